"""What bounds the one-request default's latency: its two sides timed apart, in the same index.

The default asks one Lucene query per question: the SPARC side's clauses (the question's tokens)
and the BM25 side's (its ``b|`` terms, whose weights each sentence stores beside its impacts;
:mod:`sparc_es.engines.blend`). This times, side by side and question by question in one process,
Lucene BM25 (the separate index), the default, and each side of the default's own query alone over
the same impact index, with the postings each side walks (the sum of its clauses' document
frequencies). The BM25 side alone is the floor of any design that keeps BM25 inside the one query:
whatever the SPARC side costs comes on top of it.

    .venv/bin/python scripts/studies/one_request_floor.py --index bench/work-stop/index-1m --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))


class Side:
    """The default engine's question with only the clauses ``keep`` accepts: the same weights, the
    same index, the same Java call as the default's own search."""

    def __init__(self, default, keep) -> None:
        self.default, self.keep = default, keep

    def weights(self, question: str) -> dict[str, float]:
        return {t: w for t, w in self.default.weights(question).items() if self.keep(t)}

    def batch_search(self, topics, k: int = 10, threads: int = 1):
        topics = list(topics)
        bags = [self.weights(q) for _, q in topics]
        results = self.default.searcher.weighted_batch(bags, k, threads)
        return {qid: self.default._hits(hits, with_text=False) for (qid, _), hits in zip(topics, results)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--index", type=Path, required=True, help="a sparc-es Lucene index with its bm25/ beside it")
    p.add_argument("--queries", type=int, default=500)
    p.add_argument("--json", type=Path)
    a = p.parse_args()

    from sparc_es.engines import blend, open_engine
    from sparc_es.engines.bm25 import LuceneBM25
    from sparc_es.evaluation.evalsets import data_dir

    from bench import cpu_model, side_by_side, squad_questions

    default = open_engine("lucene", a.index, hybrid="default")
    sides = {"bm25_side": Side(default, lambda t: t.startswith(blend.PREFIX)),
             "sparc_side": Side(default, lambda t: not t.startswith(blend.PREFIX))}
    engines = [("bm25", LuceneBM25(a.index / "bm25")), ("default", default), *sides.items()]
    questions = squad_questions(data_dir(), a.queries)
    sentences = default.manifest.index.documents
    walked = {name: statistics.median(sum(default.postings(side.weights(q)).values()) for q in questions)
              for name, side in [("default", default), *sides.items()]}
    print(f"{sentences:,} sentences; median postings a question walks:",
          ", ".join(f"{n} {v:,.0f}" for n, v in walked.items()))
    out = {"cpu": cpu_model(), "index": str(a.index), "sentences": sentences, "queries": len(questions),
           "median_postings_walked": walked, "latency_ms": side_by_side(engines, questions)}
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
