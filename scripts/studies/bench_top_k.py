"""Concluded: K = 300 is 1.49x BM25 at k=1000 (1M) but loses 0.48 R@100 on val; K stays 500 (docs/benchmarks.md).

Query latency against the tokens kept per sentence: the benchmark's 10k and 1M corpora cut to
each sentence's top N impacts, indexed and searched exactly as ``scripts/bench.py`` does, BM25
beside them, and the growth per million between the two.

    python scripts/studies/bench_top_k.py 300 200     # needs bench/work from scripts/bench.py --scales 10k,1m

A sentence's N largest impacts are what ``sparc-es encode --top-k N`` keeps of the model's
expansion (the lexical and stem terms aside, which are few); cutting the stored records gives
the same posting lengths without encoding a million sentences again. The quality side of the
trade is measured on ``val`` (docs/benchmarks.md). JSON goes to ``bench/top_k.json``.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/, for bench
from sparc_es.evaluation.evalsets import data_dir  # noqa: E402
from sparc_es.layout.manifest import Manifest
from sparc_es.layout.names import VECTORS, VECTORS_FILE
from sparc_es.layout.records import iter_vectors  # noqa: E402

import bench  # noqa: E402


def cut(encoded: Path, out: Path, keep: int) -> Path:
    """``encoded`` with each record's vector cut to its ``keep`` largest impacts (ties: token order)."""
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(encoded, out, ignore=shutil.ignore_patterns(VECTORS))
    (out / VECTORS).mkdir()
    postings = 0
    with open(out / VECTORS / VECTORS_FILE, "w", encoding="utf-8") as f:
        for r in iter_vectors(encoded):
            top = sorted(r["vector"].items(), key=lambda tv: (-tv[1], tv[0]))[:keep]
            postings += len(top)
            f.write(json.dumps({"id": r["id"], "contents": r["contents"], "vector": dict(top)},
                               ensure_ascii=False) + "\n")
    Manifest.read(encoded).replace(postings=postings).write(out)
    return out


def main(keeps: list[int]) -> int:
    work = bench.ROOT / "bench" / "work"
    corpora = {"10k": work / "encoded", "1m": work / "encoded-1m"}
    for encoded in corpora.values():
        if not encoded.is_dir():
            sys.exit(f"{encoded}: missing; run scripts/bench.py --scales 10k,1m first")
    questions = bench.squad_questions(data_dir(), 500)
    out = {"command": "python scripts/studies/bench_top_k.py " + " ".join(map(str, keeps)),
           "when": time.strftime("%Y-%m-%d %H:%M"), "top": {}}
    for keep in keeps:
        scales = out["top"][str(keep)] = {}
        for label, encoded in corpora.items():
            folder = cut(encoded, work / f"encoded-{label}-top{keep}", keep)
            result = bench.bench_scale(folder, work, questions, f"{label}-top{keep}")
            result["postings_per_sentence"] = round(Manifest.read(folder).postings / result["sentences"], 1)
            scales[label] = result
            print(keep, label, json.dumps(result["latency_ms"]), file=sys.stderr, flush=True)
            shutil.rmtree(folder)  # up to 3 GB; the index stays in bench/work
        scales["growth_per_million"] = bench.growth_per_million(scales["10k"], scales["1m"])
        print(keep, json.dumps(scales["growth_per_million"]), file=sys.stderr, flush=True)
    (bench.ROOT / "bench" / "top_k.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main([int(a) for a in sys.argv[1:]] or [300]))
