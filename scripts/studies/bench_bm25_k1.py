"""The one-request default's latency with the BM25 side at k1 1.2 (the default since 2026-11-28)
against k1 0.9, side by side on one machine: the same encoded corpus indexed twice, the two
defaults and Lucene BM25 taking turns question by question, as ``scripts/bench.py`` times them.

    .venv/bin/python scripts/studies/bench_bm25_k1.py --encoded bench/work-stop/encoded-1m \\
        --index bench/work-stop/index-1m --json docs/results/bench-bm25-k1.json

``--index`` is the k1 1.2 index ``bench.py`` built (its BM25 index beside it); the k1 0.9 one is
built here (``INDEX-k0.9``). Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--encoded", type=Path, required=True)
    p.add_argument("--index", type=Path, required=True)
    p.add_argument("--queries", type=int, default=500)
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    from sparc_es.engines import blend, open_engine
    from sparc_es.engines.bm25 import LuceneBM25
    from sparc_es.engines.lucene import build_index
    from sparc_es.evaluation.evalsets import data_dir

    from bench import cpu_model, latencies, squad_questions

    current = blend.K1
    older = a.index.with_name(a.index.name + "-k0.9")
    blend.K1 = 0.9  # the stored setting before 2026-11-28: build and open that index with it
    try:
        if not (older / blend.BLEND_FILE).is_file():
            shutil.rmtree(older, ignore_errors=True)
            build_index(a.encoded, older, bm25=False)
        before = open_engine("lucene", older, hybrid="default")
    finally:
        blend.K1 = current
    now = open_engine("lucene", a.index, hybrid="default")
    bm25 = LuceneBM25(a.index / "bm25")
    questions = squad_questions(data_dir(), a.queries)
    engines = (("bm25", bm25), ("k1_0.9", before), ("k1_1.2", now))
    out = {"cpu": cpu_model(), "sentences": now.manifest.index.documents, "queries": len(questions),
           "latency_ms": {}}
    for k in (10, 100):
        out["latency_ms"].update(latencies(engines, questions, k))
        for name, _ in engines:
            got = out["latency_ms"][f"{name}_k{k}"]
            print(f"k={k:<4} {name:8} p50 {got['p50']:.3f} ms  p99 {got['p99']:.3f} ms", flush=True)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
