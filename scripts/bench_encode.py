#!/usr/bin/env python
"""Benchmark: encode the SQuAD dev sentences (with their paragraphs), index them in Lucene, query.

Reports sentences encoded per second, index build time and size, postings per sentence and
query latency, as JSON (``--json``, default ``bench/encode.json``) and a printed table.
The data comes from ``../shared/data`` (override with ``--data`` or ``SPARC_ES_DATA``).

    .venv/bin/python scripts/bench_encode.py                 # all 10,642 sentences
    .venv/bin/python scripts/bench_encode.py --limit 2000    # a quicker look
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from itertools import islice
from pathlib import Path

from sparc_es.experiments.datasets import data_dir, read_mrqa, squad_dev_sentences
from sparc_es.encode import encode_corpus
from sparc_es.engines.lucene import LuceneEngine, build_index
from sparc_es.encoded import DEFAULT_FACTOR
from sparc_es.model import SparcModel


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=None, help="data folder (default: $SPARC_ES_DATA or ../shared/data)")
    p.add_argument("--limit", type=int, default=None, help="encode only the first N sentences")
    p.add_argument("--model", default="default")
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--factor", type=float, default=DEFAULT_FACTOR)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--threads", type=int, default=2, help="torch threads (default: %(default)s)")
    p.add_argument("--queries", type=int, default=1000, help="questions to time searches with")
    p.add_argument("--workdir", type=Path, default=Path("bench/work"))
    p.add_argument("--json", type=Path, default=Path("bench/encode.json"))
    args = p.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    root = args.data or data_dir()
    args.workdir.mkdir(parents=True, exist_ok=True)
    corpus = args.workdir / "squad-dev-sentences.jsonl"
    with open(corpus, "w", encoding="utf-8") as f:
        for s in islice(squad_dev_sentences(root), args.limit):
            f.write(json.dumps(s.to_json(), ensure_ascii=False) + "\n")

    overrides = {"top_k": args.top_k} if args.top_k else {}
    model = SparcModel.load(args.model, **overrides)
    meta = encode_corpus([corpus], args.workdir / "encoded", model, factor=args.factor,
                         batch_size=args.batch_size, overwrite=True)
    imeta = build_index(args.workdir / "encoded", args.workdir / "index", overwrite=True)

    questions = [qa["question"] for c in read_mrqa(root / "mrqa" / "SQuAD.jsonl.gz") for qa in c["qas"]]
    engine = LuceneEngine(args.workdir / "index")
    latency = {}
    for k in (10, 1000):
        times = []
        for q in questions[: args.queries]:
            t = time.perf_counter()
            engine.search(q, k)
            times.append(time.perf_counter() - t)
        latency[k] = 1000 * statistics.median(times)

    n, info = meta.sentences, imeta.index
    result = {
        "sentences": n,
        "model": meta.model.fingerprint, "base_model": meta.model.base_model.get("name"),
        "top_k": meta.top_k, "factor": meta.factor, "max_over": meta.model.max_over,
        "batch_size": args.batch_size, "torch_threads": args.threads,
        "encode_seconds": round(meta.seconds, 1), "sentences_per_second": meta.sentences_per_second,
        "median_nonzero_before_top_k": meta.median_nonzero_before_top_k,
        "postings_per_sentence": round(meta.postings / n, 1),
        "impact_sum_per_sentence": round(meta.impact_sum / n, 1),
        "index_build_seconds": info.build_seconds,
        "index_sentences_per_second": round(n / info.build_seconds, 1),
        "index_megabytes": round(info.bytes / 1e6, 2),
        "query_ms_median_k10": round(latency[10], 2), "query_ms_median_k1000": round(latency[1000], 2),
        "queries_timed": min(args.queries, len(questions)),
        "machine": {"python": platform.python_version(), "torch": torch.__version__,
                    "cpu_count": torch.get_num_threads(), "platform": platform.platform()},
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    width = max(map(len, result))
    for key, value in result.items():
        if key != "machine":
            print(f"{key:<{width}}  {value}")
    print(f"\nwritten to {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
