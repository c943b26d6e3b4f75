"""Where the engines differ: the same encoded folder searched on Lucene and on Elasticsearch, SPARC
alone, BM25 alone and the hybrids, through the command line (issue 30).

    .venv/bin/python scripts/studies/es_lucene_hybrid.py            # docs-click, docs-black, docs-pip
    SPARC_ES_URL=http://localhost:9200 .venv/bin/python scripts/studies/es_lucene_hybrid.py   # a real cluster

Each documentation set of ``work/docsqa-sets`` (``scripts/docs_qa.py evalsets``) is encoded with the
default model (IDF-weighted, as ``encode`` does by default), indexed in Lucene (with its BM25
index) and loaded into Elasticsearch (noida-db on loopback unless ``SPARC_ES_URL`` is set); then
``sparc-es run`` on both engines with ``--hybrid none``, ``--hybrid sum --hybrid-weight 1`` (BM25's
ranking alone, through the same fusion), the default (sum, 0.3) and ``--hybrid rrf``, scored by
``sparc-es eval``, with the top-10 overlap between the engines. JSON to ``bench/es-lucene-hybrid.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path

from sparc_es.engines.elastic.loopback import noida_server

ROOT = Path(__file__).resolve().parents[2]

SETS = ("docs-click", "docs-black", "docs-pip")
MODES = {"sparc": ["--hybrid", "none"], "bm25": ["--hybrid", "minmax", "--hybrid-weight", "1"],
         "minmax 0.3 (the default then)": ["--hybrid", "minmax", "--hybrid-weight", "0.3"],
         "rrf": ["--hybrid", "rrf"]}
MEASURES = ("MRR@1000", "R@1", "R@100")


def cli(*args) -> str:
    done = subprocess.run([sys.executable, "-m", "sparc_es", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, cwd=ROOT)
    if done.returncode:
        raise SystemExit(f"sparc-es {' '.join(map(str, args))}: {done.stderr}")
    return done.stdout


def top10(run: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in run.read_text().splitlines():
        qid, _, docid, rank, *_ = line.split()
        if int(rank) <= 10:
            out.setdefault(qid, []).append(docid)
    return out


def main() -> int:
    work = ROOT / "bench" / "work" / "es-lucene"
    results = {}
    given = os.environ.get("SPARC_ES_URL")
    with nullcontext(given) if given else noida_server() as url:
        for name in SETS:
            folder = ROOT / "work" / "docsqa-sets" / name
            if not (folder / "topics.tsv").is_file():
                raise SystemExit(f"{folder}: missing; run scripts/docs_qa.py fetch and evalsets first")
            enc, idx = work / name / "enc", work / name / "idx"
            if not (enc / "meta.json").is_file():
                cli("encode", "--corpus", folder / "corpus.jsonl", "--output", enc, "--quiet")
            if not (idx / "meta.json").is_file():
                cli("index", "--input", enc, "--index", idx, "--quiet")
            es_index = f"sparc-es-lucene-{name}"
            cli("index", "--engine", "es", "--es-url", url, "--es-index", es_index, "--input", enc, "--quiet",
                "--recreate")
            engines = {"lucene": ["--index", idx],
                       "es": ["--engine", "es", "--es-url", url, "--es-index", es_index, "--tokenizer", enc,
                              "--es-timeout", "900"]}
            rows = results[name] = {}
            for mode, flags in MODES.items():
                scores, tops = {}, {}
                for engine, where in engines.items():
                    run = work / name / f"{engine}-{mode.split()[0]}.trec"
                    cli("run", *where, *flags, "--topics", folder / "topics.tsv", "--output", run)
                    got = json.loads(cli("eval", "--run", run, "--qrels", folder / "qrels.txt", "--json"))
                    scores[engine] = {m: round(100 * got[m], 2) for m in MEASURES}
                    tops[engine] = top10(run)
                lucene, es = tops["lucene"], tops["es"]
                rows[mode] = {**scores, "questions": len(lucene),
                              "top10_overlap": round(sum(len(set(lucene[q]) & set(es.get(q, []))) / len(lucene[q])
                                                         for q in lucene) / len(lucene), 3),
                              "same_first": round(sum(lucene[q][:1] == es.get(q, [])[:1] for q in lucene)
                                                  / len(lucene), 3)}
                print(f"{name:10} {mode:18} lucene {scores['lucene']}  es {scores['es']}  "
                      f"top-10 overlap {rows[mode]['top10_overlap']:.2f}", flush=True)
    server = "Elasticsearch at SPARC_ES_URL" if given else "noida-db on loopback"
    out = ROOT / "bench" / "es-lucene-hybrid.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"command": "python scripts/studies/es_lucene_hybrid.py", "server": server,
                               "sets": results}, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
