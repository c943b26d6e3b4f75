"""The one-request default in two steps inside Lucene: a short first list, then exact scores.

The default sums, for each question, the clause weights of its SPARC tokens and BM25 terms over
every sentence that stores one of them; a SPARC sentence stores about 500 impacts, so a question
walks most of the corpus's postings (docs/benchmarks.md). Two-step retrieval (Lassance, Déjean,
Clinchant and Tonellotto, "Two-Step SPLADE", ECIR 2024; Mallia et al., "Faster Learned Sparse
Retrieval with Guided Traversal", SIGIR 2022) asks the same question first of an index that holds
only each sentence's ``keep`` largest SPARC impacts (and all its BM25 terms), takes that query's
``window`` best sentences, and scores each of them with the full default query
(``sparces.lucene.Search.twoStep``): the scores are the default's, the candidates the short
index's. Both indexes hold the same sentences under the same docids (input order). (At commit
5ab0258 it also timed the exact variant, the full query started at the k-th rescored score as its
minimum competitive score: slower than the plain default, 3.44x and 3.76x BM25 at 1M, k = 10.)

Commit 4c80b66 made this the default, with the short field in the same index (32 impacts, 50
sentences proposed); it was reverted (ec10274) when the reported pools showed a loss that grows
with the corpus (docs/evaluation.md, "Two steps"). This script, which keeps the short field in a
second index, measures the lever on today's code.

    # quality on the validation domains (indexes that `sparc-es table` built):
    .venv/bin/python scripts/studies/two_step.py quality --workdir runs/v5 --model 2304a1258a440b87 \\
        --keep 32,64 --window 100 --json out.json
    # latency at a million sentences beside Lucene BM25 and the default (bench.py's corpus):
    .venv/bin/python scripts/studies/two_step.py bench --encoded bench/work-stop/encoded-1m \\
        --index bench/work-stop/index-1m --keep 32,64 --window 100 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))


def first_stage(encoded: Path, out: Path, keep: int) -> Path:
    """A Lucene impact index at ``out/lucene`` of ``encoded``'s sentences with their ``keep`` largest
    SPARC impacts and all their BM25 terms (the weights the full index stores); kept if there."""
    from sparc_es.engines import blend
    from sparc_es.engines._impacts import write_impact_index
    from sparc_es.layout.records import iter_vectors

    if (out / "lucene" / "done").is_file():
        return out / "lucene"
    out.mkdir(parents=True, exist_ok=True)
    stats, maxima = blend.count(iter_vectors(encoded))
    vectors = out / "vectors.jsonl"
    with open(vectors, "wb") as f:
        for r in blend.blended(iter_vectors(encoded), stats, maxima):
            sparc = sorted((-v, t) for t, v in r["vector"].items() if not t.startswith(blend.PREFIX))[:keep]
            vector = {t: -v for v, t in sparc}  # the largest first, ties in token order
            vector.update((t, v) for t, v in r["vector"].items() if t.startswith(blend.PREFIX))
            f.write(orjson.dumps({"id": r["id"], "contents": "", "vector": vector}) + b"\n")
    write_impact_index(vectors, out / "lucene", threads=1)
    vectors.unlink()
    (out / "lucene" / "done").write_text("")
    return out / "lucene"


class TwoStep:
    """The default engine's question, asked first of a first-stage index, then scored in full."""

    def __init__(self, default, first_lucene: Path, window: int) -> None:
        from jnius import autoclass

        from sparc_es.engines._java import TopK

        self.default, self.window = default, window
        self.first = TopK(first_lucene, autoclass("io.anserini.search.similarity.ImpactSimilarity")())
        self._search = autoclass("sparces.lucene.Search")

    def batch_search(self, topics, k: int = 10, threads: int = 1):
        out = {}
        for qid, question in topics:
            bag = self.default.weights(question)
            hits = self._search.twoStep(self.first.searcher, "contents", self.default.searcher.searcher, "contents",
                                        list(bag), [float(w) for w in bag.values()], max(self.window, k), k, "id")
            out[qid] = self.default._hits(list(zip(hits.docs, hits.scores, hits.ids)), with_text=False)
        return out

    def close(self) -> None:
        self.first.close()


def quality(a) -> dict:
    from sparc_es.engines import open_engine
    from sparc_es.evaluation.measures import evaluate
    from sparc_es.evaluation.trec import read_qrels, read_topics, run_of

    measures = {"MRR@10": "RR@10"} if a.k == 10 else {"MRR@10": "RR@10", f"MRR@{a.k}": f"RR@{a.k}"}
    out = {}
    for domain in a.domains.split(","):
        folder = a.workdir / domain
        encoded, index = folder / f"encoded-{a.model}-k500-idf", folder / f"index-{a.model}-k500-idf"
        topics = list(read_topics(folder / "evalset" / "topics.tsv"))
        qrels = read_qrels(folder / "evalset" / "qrels.txt")
        default = open_engine("lucene", index, hybrid="default")
        full = default.batch_search(topics, k=a.k)
        row = {"default": {m: round(100 * v, 2) for m, v in evaluate(run_of(full), qrels, measures).items()}}
        for keep in a.keep:
            first = first_stage(encoded, folder / f"first-{a.model}-top{keep}", keep)
            for window in a.window:
                engine = TwoStep(default, first, window)
                got = engine.batch_search(topics, k=a.k)
                engine.close()
                scores = {m: round(100 * v, 2) for m, v in evaluate(run_of(got), qrels, measures).items()}
                same10 = sum([h.id for h in got[q][:10]] == [h.id for h in full[q][:10]] for q, _ in topics)
                scores["same_top10"] = same10
                scores["questions"] = len(topics)
                row[f"top{keep}_window{window}"] = scores
                print(domain, keep, window, scores, "default", row["default"], flush=True)
        default.close()
        out[domain] = row
    return out


def bench(a) -> dict:
    from bench import variants_beside_default

    def variants(default):
        out = []
        for keep in a.keep:  # the study's own short index beside the full one
            first = first_stage(a.encoded, a.index.with_name(f"{a.index.name}-first-top{keep}"), keep)
            out += [(f"top{keep}_window{window}", TwoStep(default, first, window)) for window in a.window]
        return out

    return variants_beside_default(a.index, variants, a.queries)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["quality", "bench"])
    p.add_argument("--workdir", type=Path, default=ROOT / "runs" / "v5")
    p.add_argument("--model", default="2304a1258a440b87")
    p.add_argument("--domains", default="docs-pip,docs-click,docs-black,docs-flask,docs-pymdown,docs-werkzeug,val")
    p.add_argument("--encoded", type=Path)
    p.add_argument("--index", type=Path)
    p.add_argument("--keep", type=lambda s: [int(x) for x in s.split(",") if x], default=[64])
    p.add_argument("--window", type=lambda s: [int(x) for x in s.split(",") if x], default=[100])
    p.add_argument("--queries", type=int, default=500)
    p.add_argument("--k", type=int, default=100, help="quality: the depth searched and measured")
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    out = quality(a) if a.what == "quality" else bench(a)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
