"""Concluded: weak tokens left out of questions: 7-8% faster at 1M, val unchanged; not adopted (docs/benchmarks.md).

Leaving weak, frequent tokens out of questions: what it saves in latency and costs in quality.

    python scripts/studies/bench_weak_tokens.py        # needs bench/work/index-1m (scripts/bench.py --scales 10k,1m)
                                               # and val's index (sparc-es table --domains val --workdir bench/runs)

A token is *weak* in an index when its postings cover at least ``p`` of the sentences and its mean
impact (Lucene's total term frequency over document frequency: impacts are stored as term
frequencies) is at most ``w``: the model put it in half the sentences at the smallest weight
(",", "in", "of", "to", "a"). Each index's own statistics decide, so nothing is chosen on the
questions. Quality: ``val`` (1,047 questions) with and without the weak tokens, paired bootstrap
intervals (``sparc_es.evaluation.measures.compare``). Latency: the 1M index, the first 500 SQuAD dev questions,
BM25 and both SPARC variants timed in turn on each question (the order rotates), so the machine's
drift falls on all three alike. JSON: ``bench/weak_tokens.json``.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/, for bench
import bench  # noqa: E402

RULES = [(0.1, 1.5), (0.1, 2.0)]  # (share of sentences at least, mean impact at most)


def term_statistics(engine) -> dict[str, tuple[float, float]]:
    """token -> (share of the index's sentences it is in, its mean impact)."""
    from jnius import autoclass, cast

    reader = engine.searcher.reader
    sentences = reader.numDocs()
    terms = autoclass("org.apache.lucene.index.MultiTerms").getTerms(
        cast("org.apache.lucene.index.IndexReader", reader), "contents")
    it, out = terms.iterator(), {}
    while (term := it.next()) is not None:
        out[term.utf8ToString()] = (it.docFreq() / sentences, it.totalTermFreq() / it.docFreq())
    return out


def weak(stats: dict[str, tuple[float, float]], share: float, mean: float) -> dict[str, float]:
    """Query weights that leave the weak tokens out (a weight of 0 drops a token)."""
    return {t: 0.0 for t, (s, m) in stats.items() if s >= share and m <= mean}


def quality(index: Path, evalset: Path) -> dict:
    from sparc_es.engines.lucene import LuceneEngine
    from sparc_es.evaluation.measures import compare, evaluate
    from sparc_es.evaluation.trec import read_qrels, read_topics

    engine = LuceneEngine(index)
    stats = term_statistics(engine)
    topics, qrels = list(read_topics(evalset / "topics.tsv")), read_qrels(evalset / "qrels.txt")

    def run(weights):
        engine.queries.weights = weights
        return {q: {h.id: h.score for h in hits} for q, hits in engine.batch_search(topics, 1000).items()}

    base = run(None)
    out = {"all_tokens": evaluate(base, qrels)}
    for share, mean in RULES:
        weights = weak(stats, share, mean)
        diffs = compare(run(weights), base, qrels)
        out[f"share>={share},mean<={mean}"] = {
            "dropped": sorted(weights),
            **{d.measure: {"delta": round(100 * d.delta, 2), "low": round(100 * d.low, 2),
                           "high": round(100 * d.high, 2), "changed": d.changed} for d in diffs}}
    engine.close()
    return out


def latency(index: Path, questions: list[str]) -> dict:
    from sparc_es.engines.bm25 import LuceneBM25
    from sparc_es.engines.lucene import LuceneEngine
    from sparc_es.model.query import QueryEncoder

    sparc, bm25 = LuceneEngine(index), LuceneBM25(index / "bm25")
    stats = term_statistics(sparc)
    encoders = {"sparc": sparc.queries}
    for share, mean in RULES:
        encoders[f"sparc share>={share},mean<={mean}"] = QueryEncoder(sparc.queries.tokenizer, weak(stats, share, mean))
    postings = {name: round(statistics.median(sum(stats.get(t, (0, 0))[0] for t in enc.encode(q))
                                              for q in questions), 3)
                for name, enc in encoders.items()}

    def timed(name: str, question: str, k: int) -> float:
        engine = bm25
        if name != "bm25":
            engine, sparc.queries = sparc, encoders[name]
        started = time.perf_counter()
        engine.batch_search([("q", question)], k)
        return 1000 * (time.perf_counter() - started)

    names = ["bm25", *encoders]
    out = {"median_postings_per_question_over_sentences": postings}
    for k in (10, 1000):
        for q in questions:  # one untimed pass warms the page cache and the JIT, as bench.py does
            for name in names:
                timed(name, q, k)
        times = {name: [] for name in names}
        for i, q in enumerate(questions):
            for name in names[i % len(names):] + names[:i % len(names)]:
                times[name].append(timed(name, q, k))
        p50 = {name: round(statistics.median(t), 3) for name, t in times.items()}
        out[f"k{k}"] = {"p50_ms": p50, "over_bm25": {n: round(v / p50["bm25"], 2) for n, v in p50.items()}}
    sparc.close()
    bm25.close()
    return out


def main() -> int:
    from sparc_es.evaluation.evalsets import data_dir

    index_1m = bench.ROOT / "bench" / "work" / "index-1m"
    val = bench.ROOT / "bench" / "runs" / "val"
    val_index = next(iter(sorted(val.glob("index-*-k500"))), None)
    if not index_1m.is_dir() or val_index is None:
        sys.exit("needs bench/work/index-1m (scripts/bench.py --scales 10k,1m) and bench/runs/val/index-*-k500 "
                 "(sparc-es table --systems sparc --domains val --workdir bench/runs)")
    out = {"command": "python scripts/studies/bench_weak_tokens.py", "when": time.strftime("%Y-%m-%d %H:%M"),
           "val": quality(val_index, val / "evalset"),
           "latency_1m": latency(index_1m, bench.squad_questions(data_dir(), 500))}
    (bench.ROOT / "bench" / "weak_tokens.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
