"""The one-request default with its top-k threshold over-estimated: a dynamic-pruning lever.

Lucene's top-k search tells the scorer the k-th best score so far, and block-max pruning skips every
block whose largest possible score cannot beat it. Told ``factor`` times that score instead (Broder,
Carmel, Herscovici, Soffer and Zien, "Efficient query evaluation using a two-level retrieval
process", CIKM 2003, section 3.2; for learned sparse indexes, Mackenzie, Trotman and Lin, "Efficient
Document-at-a-time and Score-at-a-time Query Evaluation for Learned Sparse Representations", TOIS
2023), it skips more: a sentence whose score lies between the k-th best and ``factor`` times it is
kept when the scorer reaches it anyway and lost when it skips it. The scores of the hits found are
the default's; factor 1 is the default (``sparces.lucene.Search.overestimated``).

Elasticsearch has no such setting, so the lever could serve the embedded engine only, and the two
engines would no longer rank the same.

    # quality on the validation domains (indexes that `sparc-es table` built), MRR@10 at k = 10:
    .venv/bin/python scripts/studies/threshold_factor.py quality --workdir runs/v6 --factor 1.1,1.25,1.5 \\
        --json out.json
    # latency at a million sentences beside Lucene BM25 and the default (bench.py's corpus):
    .venv/bin/python scripts/studies/threshold_factor.py bench --index bench/work/index-1m --factor 1.1,1.25,1.5 \\
        --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))


class Overestimated:
    """The default engine's question, searched with the k-th score times ``factor`` as the bar."""

    def __init__(self, default, factor: float) -> None:
        from jnius import autoclass

        self.default, self.factor = default, factor
        self._search = autoclass("sparces.lucene.Search")

    def batch_search(self, topics, k: int = 10, threads: int = 1):
        out = {}
        for qid, question in topics:
            bag = self.default.weights(question)
            hits = self._search.overestimatedBag(self.default.searcher.searcher, "contents", list(bag),
                                                 [float(w) for w in bag.values()], k, self.factor, "id")
            out[qid] = self.default._hits(list(zip(hits.docs, hits.scores, hits.ids)), with_text=False)
        return out

    def close(self) -> None:
        pass


def same_top10(got: dict, full: dict) -> int:
    return sum([h.id for h in got[q][:10]] == [h.id for h in full[q][:10]] for q in full)


def quality(a) -> dict:
    from sparc_es.engines import open_engine
    from sparc_es.evaluation.measures import evaluate
    from sparc_es.evaluation.trec import read_qrels, read_topics, run_of

    measures = {"MRR@10": "RR@10"}
    out = {}
    for domain in a.domains.split(","):
        folder = a.workdir / domain
        topics = list(read_topics(folder / "evalset" / "topics.tsv"))
        qrels = read_qrels(folder / "evalset" / "qrels.txt")
        default = open_engine("lucene", folder / f"index-{a.model}-k500-idf", hybrid="default")
        full = default.batch_search(topics, k=10)
        row = {"questions": len(topics),
               "default": {m: round(100 * v, 2) for m, v in evaluate(run_of(full), qrels, measures).items()}}
        for factor in a.factor:
            got = Overestimated(default, factor).batch_search(topics, k=10)
            scores = {m: round(100 * v, 2) for m, v in evaluate(run_of(got), qrels, measures).items()}
            scores["same_top10"] = same_top10(got, full)
            # the scores found are the default's: a hit can be missed, never mis-scored
            scores["same_first_hit"] = sum(bool(got[q]) and bool(full[q]) and got[q][0].id == full[q][0].id
                                           for q in full)
            row[f"factor{factor:g}"] = scores
            print(domain, factor, scores, "default", row["default"], flush=True)
        default.close()
        out[domain] = row
    return out


def bench(a) -> dict:
    from bench import variants_beside_default

    out = variants_beside_default(a.index, lambda default: [(f"factor{f:g}", Overestimated(default, f))
                                                            for f in a.factor], a.queries)
    print(json.dumps(out["latency_ms"], indent=1))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["quality", "bench"])
    p.add_argument("--workdir", type=Path, default=ROOT / "runs" / "v6")
    p.add_argument("--model", default="2304a1258a440b87")
    p.add_argument("--domains", default="docs-pip,docs-click,docs-black,docs-flask,docs-pymdown,docs-werkzeug,val")
    p.add_argument("--index", type=Path)
    p.add_argument("--factor", type=lambda s: [float(x) for x in s.split(",") if x], default=[1.25])
    p.add_argument("--queries", type=int, default=500)
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    out = quality(a) if a.what == "quality" else bench(a)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
