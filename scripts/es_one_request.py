#!/usr/bin/env python
"""The default on both engines, on the validation questions: one request each, the same top 10.

For each validation domain (an evaluation set folder, or ``val``) whose encoded folder and Lucene
index ``sparc-es table`` left in ``--workdir``, the encoded folder is loaded into Elasticsearch
(noida-db on loopback, an ES-API stand-in, unless ``SPARC_ES_URL`` names a cluster), and every
question is answered by ``sparc-es run`` with the default search on both engines: the questions
whose top 10 differ are counted (the goal: none), the MRR of both runs compared, and the
Elasticsearch run timed (one ``_search`` a question).

    .venv/bin/python scripts/es_one_request.py --workdir runs/v1 --domains val,docs-click [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def default_folders(domain: Path, fingerprint: str) -> tuple[Path, Path]:
    """(encoded folder, Lucene index) of the default model (IDF, K 500) that ``table`` made for a
    domain: the folders keyed by the default model's fingerprint (a workdir may hold other models')."""
    encoded = domain / f"encoded-{fingerprint}-k500-idf"
    if not (encoded / "meta.json").is_file():
        sys.exit(f"{domain}: no {encoded.name} folder; run sparc-es table with sparc:idf=1 (the default model) first")
    index = domain / f"index-{encoded.name.removeprefix('encoded-')}"
    if not (index / "blend.json").is_file():
        sys.exit(f"{index}: missing or built without BM25 terms; run sparc-es table with a hybrid=sum system")
    return encoded, index


def top10(run: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in run.read_text().splitlines():
        qid, _, doc, rank = line.split()[:4]
        if int(rank) <= 10:
            out.setdefault(qid, []).append(doc)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workdir", type=Path, default=ROOT / "runs" / "v1")
    p.add_argument("--domains", required=True, help="comma-separated folder names under --workdir")
    p.add_argument("-k", type=int, default=100, help="hits per question in both runs (default: %(default)s; the "
                   "loopback server returns 1,000 hits a question far more slowly than a cluster)")
    p.add_argument("--limit", type=int, help="only the first N questions of each domain (the loopback server takes "
                   "about 1.5 s a question on 1,100 sentences)")
    p.add_argument("--json", type=Path, help="write the figures here")
    args = p.parse_args(argv)

    from sparc_es.cli import main as cli
    from sparc_es.engines.elastic import Connection, build_index
    from sparc_es.engines.elastic.loopback import noida_server
    from sparc_es.evaluation.measures import evaluate_file
    from sparc_es.evaluation.trec import read_qrels
    from sparc_es.model import SparcModel

    fingerprint = SparcModel.load("default").fingerprint
    url = os.environ.get("SPARC_ES_URL")
    rows = []
    with (nullcontext(url) if url else noida_server()) as url:
        client = Connection(url).client()
        for name in args.domains.split(","):
            domain = args.workdir / name
            encoded, index = default_folders(domain, fingerprint)
            topics, qrels = domain / "evalset" / "topics.tsv", domain / "evalset" / "qrels.txt"
            if args.limit:
                lines = topics.read_text().splitlines()[: args.limit]
                topics = domain / "runs" / f"topics-first-{args.limit}.tsv"
                topics.write_text("".join(line + "\n" for line in lines))
            es_index = f"one-request-{name}".lower()
            started = time.perf_counter()
            build_index(encoded, client, es_index, progress=False, recreate=True)
            load_seconds = time.perf_counter() - started
            runs = {}
            for engine, flags in (("lucene", ["--index", str(index)]),
                                  ("es", ["--engine", "es", "--es-url", url, "--es-index", es_index,
                                          "--tokenizer", str(index)])):
                runs[engine] = domain / "runs" / f"default-{engine}.trec"
                started = time.perf_counter()
                if cli(["run", *flags, "--topics", str(topics), "--output", str(runs[engine]), "-k", str(args.k)]) != 0:
                    sys.exit(f"{name}: run --engine {engine} failed")
                if engine == "es":
                    es_seconds = time.perf_counter() - started
            lucene, es = top10(runs["lucene"]), top10(runs["es"])
            questions = len(topics.read_text().splitlines())
            differ = sum(lucene.get(q) != es.get(q) for q in set(lucene) | set(es))
            judged = read_qrels(qrels)
            asked = {q.split("\t", 1)[0] for q in topics.read_text().splitlines()}
            judged = {q: j for q, j in judged.items() if q in asked}
            mrr = {e: round(100 * evaluate_file(r, judged)["MRR@1000"], 2) for e, r in runs.items()}
            rows.append({"domain": name, "questions": questions, "k": args.k, "top10_differ": differ, "mrr": mrr,
                         "es_run_seconds": round(es_seconds, 1), "es_load_seconds": round(load_seconds, 1)})
            print(json.dumps(rows[-1]), flush=True)
            client.indices.delete(index=es_index, ignore_unavailable=True)
    server = "a cluster (SPARC_ES_URL)" if os.environ.get("SPARC_ES_URL") else "noida-db on loopback"
    if args.json:
        args.json.write_text(json.dumps({"command": "python scripts/es_one_request.py " + " ".join(
            argv if argv is not None else sys.argv[1:]), "server": server, "rows": rows}, indent=2) + "\n")
    print(f"{'domain':16} questions  top-10 differ  MRR@{args.k} Lucene / ES  ES run")
    for r in rows:
        print(f"{r['domain']:16} {r['questions']:9}  {r['top10_differ']:13}  {r['mrr']['lucene']:6.2f} / "
              f"{r['mrr']['es']:6.2f}  {r['es_run_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
