#!/usr/bin/env python
"""Benchmark: Lucene impact-index build time and size against K and the quantisation factor.

Encodes the first N SQuAD dev sentences once (top 2,000 tokens kept as floats), then for each
(K, factor) writes the quantised vectors and builds an index, one thread, side by side in one run.
Writes JSON (``--json``, default ``bench/factor.json``) and prints a table.

    .venv/bin/python scripts/bench_factor.py --limit 2000
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from itertools import islice
from pathlib import Path

from sparc_es.experiments.datasets import data_dir, squad_dev_sentences
from sparc_es.engines._java import start_jvm
from sparc_es.engines._java import folder_size
from sparc_es.encoded import quantize, vector_record
from sparc_es.model import SparcModel


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=None)
    p.add_argument("--limit", type=int, default=2000)
    p.add_argument("--model", default="default")
    p.add_argument("--ks", default="250,500,1000,2000")
    p.add_argument("--factors", default="5,10,20,50,100")
    p.add_argument("--max-impact", type=int, default=100_000,
                   help="skip (K, factor) pairs whose K x factor exceeds this (slow builds)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--workdir", type=Path, default=Path("bench/factor"))
    p.add_argument("--json", type=Path, default=Path("bench/factor.json"))
    args = p.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    sentences = list(islice(squad_dev_sentences(args.data or data_dir()), args.limit))
    model = SparcModel.load(args.model, top_k=2000)
    encoded = list(model.encode((s.text, s.context) for s in sentences))

    start_jvm()
    from pyserini.pyclass import autoclass

    indexer = autoclass("io.anserini.index.IndexCollection")
    rows = []
    for k in map(int, args.ks.split(",")):
        for factor in map(float, args.factors.split(",")):
            if k * factor > args.max_impact:
                continue
            shutil.rmtree(args.workdir, ignore_errors=True)
            (args.workdir / "vectors").mkdir(parents=True)
            impact = 0
            with open(args.workdir / "vectors" / "v.jsonl", "w") as f:
                for s, e in zip(sentences, encoded):
                    vector = quantize(e.tokens[:k], e.weights[:k], factor)
                    impact += sum(vector.values())
                    f.write(json.dumps(vector_record(s.id, "", vector)) + "\n")
            started = time.perf_counter()
            indexer.main(["-collection", "JsonVectorCollection", "-input", str(args.workdir / "vectors"),
                          "-index", str(args.workdir / "index"), "-generator", "DefaultLuceneDocumentGenerator",
                          "-threads", "1", "-impact", "-pretokenized", "-optimize", "-quiet"])
            seconds = time.perf_counter() - started
            rows.append({"K": k, "factor": factor, "impact_per_sentence": round(impact / len(sentences)),
                         "build_seconds": round(seconds, 2), "sentences_per_second": round(len(sentences) / seconds),
                         "index_megabytes": round(folder_size(args.workdir / "index") / 1e6, 2)})
            print(" ".join(f"{key}={value}" for key, value in rows[-1].items()), flush=True)
    shutil.rmtree(args.workdir, ignore_errors=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"sentences": len(sentences), "rows": rows}, indent=2) + "\n")
    print("\n| K | factor | integer weight per sentence | build s | sentences/s | MB |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['K']} | {r['factor']:g} | {r['impact_per_sentence']:,} | {r['build_seconds']} | "
              f"{r['sentences_per_second']:,} | {r['index_megabytes']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
