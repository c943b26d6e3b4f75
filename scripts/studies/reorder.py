"""Document reordering by recursive graph bisection: does a docid order that clusters similar
sentences let Lucene's block-max pruning skip more of the default's long posting lists?

Lucene keeps, for each block of 128 postings of a term, the block's largest impact; a top-k query
skips a block whose largest possible score cannot reach the k-th best so far. When sentences that
share tokens sit next to each other, a common token's high impacts gather in a few blocks and the
rest of its list can be skipped. Recursive graph bisection (Dhulipala et al., "Compressing Graphs
and Indexes with Recursive Graph Bisection", KDD 2016; Mackenzie et al., "Faster Index Reordering
with Bipartite Graph Partitioning", SIGIR 2021; Lucene's ``BPIndexReorderer``, not in the jar
Pyserini ships) finds such an order: split the documents in two, swap documents between the halves
while that lowers the estimated log-gap cost of every term's postings, and recurse into each half.
Scores do not change; only ties (broken by docid) can.

The benchmark's million sentences are perturbed copies of the 10,642 SQuAD dev sentences
(``scripts/bench.py``, ``replicate``), and bisecting them would put each sentence's ~94 near-copies
side by side: a gift to block-max that no real corpus gives. So the order is found on the 10,642
real sentences, and each copy keeps the copies together as input order does (copy 0, copy 1, ...)
with each copy's sentences in the bisected order: a million sentences with the topical locality of
a reordered real corpus, and no more.

    # the order of the real sentences, then the million re-written in it, then both indexed and timed
    .venv/bin/python scripts/studies/reorder.py order --encoded bench/work-stop/encoded --output runs/reorder/order.json
    .venv/bin/python scripts/studies/reorder.py permute --encoded bench/work-stop/encoded-1m \\
        --order runs/reorder/order.json --output bench/work-stop/encoded-1m-bp
    .venv/bin/python scripts/studies/reorder.py bench --index bench/work-stop/index-1m \\
        --reordered bench/work-stop/index-1m-bp --json docs/results/reorder-1m.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))


def _cost(degree: np.ndarray, size: np.ndarray) -> np.ndarray:
    """The log-gap estimate of a term's postings among ``size`` documents, ``degree`` of them holding it
    (a degree of -1, a document leaving a half that lacks the term, is never used)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return degree * (np.log2(np.maximum(size, 1)) - np.log2(degree + 1.0))


def bisection_order(doc_of: np.ndarray, term_of: np.ndarray, n_docs: int, min_partition: int = 32,
                    iterations: int = 20) -> tuple[np.ndarray, list[dict]]:
    """A docid order (``order[position] = document``) by recursive graph bisection over the postings
    ``(doc_of[i], term_of[i])``, and each level's record (its segments and the swaps of each iteration)."""
    doc_of = np.asarray(doc_of, dtype=np.int64)
    term_of = np.asarray(term_of, dtype=np.int64)
    n_terms = int(term_of.max()) + 1
    order = np.arange(n_docs)
    starts = np.array([0, n_docs])  # segment boundaries over positions
    levels = []
    while True:
        lengths = np.diff(starts)
        if lengths.max() < 2 * min_partition:
            break
        mids = starts[:-1] + lengths // 2
        position = np.empty(n_docs, dtype=np.int64)
        position[order] = np.arange(n_docs)
        seg_doc = np.searchsorted(starts, position, side="right") - 1
        split = lengths >= 2 * min_partition  # segments too small stay as they are
        side = (position >= mids[seg_doc]) & split[seg_doc]
        seg_p = seg_doc[doc_of]
        groups, inverse = np.unique(seg_p * n_terms + term_of, return_inverse=True)
        group_seg = groups // n_terms
        total = np.bincount(inverse, minlength=len(groups)).astype(np.float64)
        n_right = (starts[1:] - mids).astype(np.float64)
        n_left = (mids - starts[:-1]).astype(np.float64)
        record = {"segments": int(split.sum()), "swaps": []}
        for _ in range(iterations):
            side_p = side[doc_of]
            right = np.bincount(inverse, weights=side_p, minlength=len(groups))
            left = total - right
            nl, nr = n_left[group_seg], n_right[group_seg]
            # the cost change of one document leaving its half for the other, per term
            to_right = (_cost(left, nl) - _cost(left - 1, nl)) + (_cost(right, nr) - _cost(right + 1, nr))
            to_left = (_cost(right, nr) - _cost(right - 1, nr)) + (_cost(left, nl) - _cost(left + 1, nl))
            gain_p = np.where(side_p, to_left[inverse], to_right[inverse])
            gain = np.bincount(doc_of, weights=gain_p, minlength=n_docs)
            movable = split[seg_doc]
            pairs = []
            for half in (False, True):
                docs = np.flatnonzero(movable & (side == half))
                docs = docs[np.lexsort((-gain[docs], seg_doc[docs]))]
                segs = seg_doc[docs]
                first = np.searchsorted(segs, segs, side="left")
                pairs.append((docs, segs, np.arange(len(docs)) - first))
            (ld, ls, lr), (rd, rs, rr) = pairs
            m = np.minimum(n_left, n_right).astype(np.int64)
            lk, rk = lr < m[ls], rr < m[rs]
            ld, rd = ld[lk], rd[rk]
            swap = gain[ld] + gain[rd] > 0
            swapped = int(swap.sum())
            side[ld[swap]] = True
            side[rd[swap]] = False
            record["swaps"].append(swapped)
            if swapped == 0:
                break
        order = np.lexsort((position, side, seg_doc))  # each segment: its left half, then its right
        starts = np.unique(np.concatenate([starts, mids[split]]))
        levels.append(record)
    return order, levels


def log_gap_bits(doc_of: np.ndarray, term_of: np.ndarray, order: np.ndarray) -> float:
    """Bits a posting of the order's d-gaps would take, log2(gap) + 1 each: what reordering shrinks."""
    position = np.empty(len(order), dtype=np.int64)
    position[order] = np.arange(len(order))
    p = position[doc_of]
    keys = np.lexsort((p, term_of))
    t, p = term_of[keys], p[keys]
    gap = np.diff(p, prepend=-1)
    first = np.r_[True, t[1:] != t[:-1]]  # a list's first posting: its gap is its docid + 1
    gap[first] = p[first] + 1
    return float(np.mean(np.log2(gap) + 1))


def _postings(encoded: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
    from sparc_es.layout.records import iter_vectors

    ids, docs, terms, vocabulary = [], [], [], {}
    for i, r in enumerate(iter_vectors(encoded)):
        ids.append(r["id"])
        for token in r["vector"]:
            docs.append(i)
            terms.append(vocabulary.setdefault(token, len(vocabulary)))
    return ids, np.array(docs, dtype=np.int64), np.array(terms, dtype=np.int64)


def order_command(a) -> None:
    ids, docs, terms = _postings(a.encoded)
    started = time.perf_counter()
    order, levels = bisection_order(docs, terms, len(ids), a.min_partition, a.iterations)
    seconds = time.perf_counter() - started
    before = log_gap_bits(docs, terms, np.arange(len(ids)))
    after = log_gap_bits(docs, terms, order)
    print(f"{len(ids):,} sentences, {len(docs):,} postings: {seconds:.1f} s, {len(levels)} levels; "
          f"log-gap bits a posting {before:.3f} in input order, {after:.3f} bisected")
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(json.dumps({"encoded": str(a.encoded), "sentences": len(ids), "postings": len(docs),
                                    "seconds": round(seconds, 1), "log_gap_bits_input": round(before, 4),
                                    "log_gap_bits_bisected": round(after, 4), "levels": levels,
                                    "order": [ids[i] for i in order]}) + "\n")


def permute_command(a) -> None:
    """Each copy of the replicas (ids ``X`` for copy 0, ``X~c`` for copy c) in the order's sequence;
    streamed copy by copy, so memory holds one copy's records."""
    import orjson
    from tqdm import tqdm

    from sparc_es.corpus.sources import Sentence
    from sparc_es.layout.manifest import Manifest, copy_into
    from sparc_es.layout.names import SENTENCES, VECTORS, VECTORS_FILE
    from sparc_es.layout.store import SentenceStore

    rank = {sid: i for i, sid in enumerate(json.loads(a.order.read_text())["order"])}
    a.output.mkdir(parents=True, exist_ok=True)
    (a.output / VECTORS).mkdir(exist_ok=True)
    source = a.encoded / VECTORS / VECTORS_FILE
    manifest = Manifest.read(a.encoded)
    copy_into(a.encoded, a.output)
    (a.output / SENTENCES).unlink(missing_ok=True)
    store = SentenceStore(a.output / SENTENCES, create=True)
    written = 0

    def flush(block: list[tuple[int, bytes, str, str]], out) -> None:
        nonlocal written
        block.sort(key=lambda x: x[0])
        out.writelines(line for _, line, _, _ in block)
        store.add([Sentence(id=sid, text=text) for _, _, sid, text in block])
        written += len(block)

    with open(source, "rb") as f, open(a.output / VECTORS / VECTORS_FILE, "wb") as out:
        block, copy = [], 0
        for line in tqdm(f, total=manifest.sentences, desc="permute", unit="sent", mininterval=5):
            r = orjson.loads(line)
            base, _, c = r["id"].partition("~")
            c = int(c or 0)
            if c != copy:
                flush(block, out)
                block, copy = [], c
            block.append((rank[base], line, r["id"], r["contents"]))
        flush(block, out)
    store.close()
    manifest.write(a.output)
    print(f"wrote {written:,} sentences to {a.output}")


def index_command(a) -> None:
    """The impact index and its BM25 index of an encoded folder, as ``scripts/bench.py`` builds them."""
    from bench import build_indexes

    impact, bm25 = build_indexes(a.encoded, a.index)
    print(f"impact index {impact.bytes / 1e6:.1f} MB in {impact.build_seconds:.0f} s; "
          f"BM25 {bm25['bytes'] / 1e6:.1f} MB in {bm25['build_seconds']:.0f} s")


def bench_command(a) -> None:
    from sparc_es.engines import open_engine
    from sparc_es.engines.bm25 import LuceneBM25
    from sparc_es.evaluation.evalsets import data_dir

    from bench import cpu_model, side_by_side, squad_questions

    questions = squad_questions(data_dir(), a.queries)
    engines = [("bm25", LuceneBM25(a.index / "bm25")), ("default", open_engine("lucene", a.index, hybrid="default")),
               ("default_bisected", open_engine("lucene", a.reordered, hybrid="default")),
               ("bm25_bisected", LuceneBM25(a.reordered / "bm25"))]
    same = scores_same = 0
    for q in questions:  # the order changes no score: the same top 10 but for ties
        x, y = ([(h.id, h.score) for h in e.batch_search([("q", q)], 10)["q"]] for e in (engines[1][1], engines[2][1]))
        same += x == y
        scores_same += [s for _, s in x] == [s for _, s in y]
    print(f"the default's top 10 the same in both orders for {same} of {len(questions)} questions "
          f"(the same scores for {scores_same})")
    sizes = {name: round(sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 1e6, 1)
             for name, folder in (("impact_mb", a.index / "lucene"), ("impact_bisected_mb", a.reordered / "lucene"),
                                  ("bm25_mb", a.index / "bm25"), ("bm25_bisected_mb", a.reordered / "bm25"))}
    print("index sizes:", sizes)
    out = {"cpu": cpu_model(), "index": str(a.index), "reordered": str(a.reordered), "queries": len(questions),
           "sizes": sizes, "same_top10": same, "same_top10_scores": scores_same,
           "latency_ms": side_by_side(engines, questions)}
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    o = sub.add_parser("order", help="the bisected order of an encoded folder's sentences")
    o.add_argument("--encoded", type=Path, required=True)
    o.add_argument("--output", type=Path, required=True, help="JSON with the order (ids) and the gap costs")
    o.add_argument("--min-partition", type=int, default=32)
    o.add_argument("--iterations", type=int, default=20)
    o.set_defaults(run=order_command)
    m = sub.add_parser("permute", help="an encoded folder of replicas rewritten, each copy in the order")
    m.add_argument("--encoded", type=Path, required=True)
    m.add_argument("--order", type=Path, required=True)
    m.add_argument("--output", type=Path, required=True)
    m.set_defaults(run=permute_command)
    i = sub.add_parser("index", help="the impact and BM25 indexes of an encoded folder, as scripts/bench.py builds")
    i.add_argument("--encoded", type=Path, required=True)
    i.add_argument("--index", type=Path, required=True)
    i.set_defaults(run=index_command)
    b = sub.add_parser("bench", help="the default and BM25 timed in both orders, side by side")
    b.add_argument("--index", type=Path, required=True)
    b.add_argument("--reordered", type=Path, required=True)
    b.add_argument("--queries", type=int, default=500)
    b.add_argument("--json", type=Path)
    b.set_defaults(run=bench_command)
    a = p.parse_args()
    a.run(a)


if __name__ == "__main__":
    main()
