"""The BM25 side of the one-request default at other k1 and b, scored exactly (no engine).

The default sums a sentence's SPARC impacts and the BM25 weights of its terms (section titles and
text) with Pyserini's k1 0.9 and b 0.4 (``sparc_es.engines.blend``). Those settings were made for
passages; sentences are shorter and more even in length. This re-weights the BM25 side of the
indexes that ``sparc-es table`` built, at each (k1, b), scores every question exactly in floating
point with the blend's own clause weights (``Blend.weights``), and reports MRR@1000 per domain.
The (0.9, 0.4) row checks the scorer against the Lucene figures.

    .venv/bin/python scripts/studies/bm25_side.py --workdir runs/v5 --model 2304a1258a440b87 \\
        --domains docs-pip,docs-werkzeug,val --k1 0.6,0.9,1.2 --b 0.2,0.4,0.75 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from scipy import sparse

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _matrix(rows: list[dict[str, float]], columns: dict[str, int]) -> sparse.csr_matrix:
    data, ind, ptr = [], [], [0]
    for r in rows:
        for f, v in r.items():
            ind.append(columns.setdefault(f, len(columns)))
            data.append(v)
        ptr.append(len(ind))
    return sparse.csr_matrix((np.array(data, dtype=np.float64), ind, ptr), shape=(len(rows), len(columns) + 1))


def domain_figures(folder: Path, model: str, grid: list[tuple[float, float]], share: float) -> dict[str, float]:
    from sparc_es.engines.blend import Blend, EnglishAnalyzer, Statistics, bm25_text
    from sparc_es.evaluation.measures import evaluate
    from sparc_es.evaluation.trec import read_qrels, read_topics
    from sparc_es.layout.records import iter_vectors
    from sparc_es.model.query import QueryEncoder

    encoded, index = folder / f"encoded-{model}-k500-idf", folder / f"index-{model}-k500-idf"
    records = list(iter_vectors(encoded))
    ids = [r["id"] for r in records]
    analyzer = EnglishAnalyzer()
    live = [any(v > 0 for v in r["vector"].values()) for r in records]
    terms = [analyzer.terms(bm25_text(r)) for r in records]
    stats = Statistics()
    for t in terms:
        stats.add(t)
    columns: dict[str, int] = {}
    queries = QueryEncoder.load(index)
    topics = list(read_topics(folder / "evalset" / "topics.tsv"))
    qrels = read_qrels(folder / "evalset" / "qrels.txt")
    bags = [(qid, q, queries.bag(q)) for qid, q in topics]
    out = {}
    for k1, b in grid:
        bm25 = [stats.weights(t, k1, b) if ok else {} for t, ok in zip(terms, live)]
        cols = dict(columns)
        m = _matrix([{**r["vector"], **w} for r, w in zip(records, bm25)], cols)
        maxima = {f: int(v) for f, v in zip(cols, m.max(axis=0).toarray().ravel())}
        blend = Blend(maxima)
        m = m.tocsc()  # a question reads only its features' columns, as an engine reads posting lists
        run = {}
        for qid, q, bag in bags:
            w = blend.weights(q, bag, share)
            if not w:
                run[qid] = {}
                continue
            scores = m[:, [cols[f] for f in w]] @ np.array(list(w.values()))
            hit = np.flatnonzero(scores > 0)
            top = hit[np.lexsort((hit, -scores[hit]))][:1000]  # ties: the earlier sentence first
            run[qid] = {ids[i]: float(scores[i]) for i in top}
        out[f"k1={k1:g},b={b:g}"] = round(100 * evaluate(run, qrels, {"MRR@1000": "RR@1000"})["MRR@1000"], 2)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--model", required=True, help="model fingerprint of the encoded folders")
    p.add_argument("--domains", required=True)
    p.add_argument("--k1", default="0.9")
    p.add_argument("--b", default="0.4")
    p.add_argument("--share", type=float, default=None, help="BM25's share (default: the product's)")
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    from sparc_es.engines.blend import BM25_SHARE

    share = BM25_SHARE if a.share is None else a.share
    grid = [(float(k1), float(b)) for k1 in a.k1.split(",") for b in a.b.split(",")]
    table = {}
    for d in a.domains.split(","):
        table[d] = domain_figures(a.workdir / d, a.model, grid, share)
        print(d, json.dumps(table[d]), flush=True)
    if a.json:
        a.json.write_text(json.dumps({"model": a.model, "share": share, "mrr_at_1000": table}, indent=1) + "\n")


if __name__ == "__main__":
    main()
