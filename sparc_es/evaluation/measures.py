"""Evaluation: TREC runs against TREC qrels with trec_eval's own code (ir_measures + pytrec_eval).

The paper's measures are MRR over the top 1,000 (``RR@1000``) and Recall@1, which in ReQA is the
fraction of questions whose first sentence answers them (``Success@1``); nDCG@10 and R@100 come
along. Averages run over **every query that has qrels**: a query the run left out, or answered
with nothing, counts as zero (pytrec_eval on its own would skip it, as trec_eval does without -c).

Every measure here is a per-query value averaged over the queries, so a run is scored a chunk of
queries at a time (:data:`CHUNK`): :func:`evaluate_file` streams a run file query by query, and the
memory it needs does not grow with the number of questions (trec_eval's own reader keeps the
whole run).

Reading and writing the TREC files themselves is :mod:`sparc_es.evaluation.trec`'s job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from sparc_es.errors import InputError

# name in reports -> ir_measures measure
MEASURES = {"MRR@1000": "RR@1000", "R@1": "Success@1", "nDCG@10": "nDCG@10", "R@100": "R@100"}

Run = Mapping[str, Mapping[str, float]]  # qid -> docid -> score
Qrels = Mapping[str, Mapping[str, int]]  # qid -> docid -> relevance
Queries = Iterable[tuple[str, Mapping[str, float]]]  # a run one query at a time: (qid, docid -> score)

CHUNK = 200  # queries handed to trec_eval's code at once


def evaluate(run: Run | Queries, qrels: Qrels, measures: Mapping[str, str] = MEASURES) -> dict[str, float]:
    """Mean of each measure over all queries with qrels; missing or empty results score 0. ``run``
    is a whole run or (qid, docs) pairs one query at a time, each query once."""
    return _means(_per_query(run, qrels, measures), qrels)


def evaluate_file(path: str | Path, qrels: Qrels, measures: Mapping[str, str] = MEASURES) -> dict[str, float]:
    """:func:`evaluate` of a TREC run file, read one query at a time."""
    return _means(per_query_file(path, qrels, measures), qrels)


def per_query(run: Run | Queries, qrels: Qrels, measure: str) -> dict[str, float]:
    """One measure per judged query (0 where the run has nothing for it)."""
    return _per_query(run, qrels, {measure: measure})[measure]


def per_query_file(path: str | Path, qrels: Qrels, measures: Mapping[str, str] = MEASURES
                   ) -> dict[str, dict[str, float]]:
    """Each measure per judged query of a TREC run file, streamed query by query
    (:func:`~sparc_es.evaluation.trec.iter_run`). A file whose queries' lines are not each together is read
    whole instead, as trec_eval reads every file."""
    from sparc_es.evaluation.trec import RunNotGrouped, iter_run, read_run

    seen: set[str] = set()

    def counted(queries: Queries) -> Queries:
        for qid, docs in queries:
            seen.add(qid)
            yield qid, docs

    try:
        values = _per_query(counted(iter_run(path)), qrels, measures)
    except RunNotGrouped:
        seen.clear()
        values = _per_query(counted(read_run(path).items()), qrels, measures)
    if not seen:
        raise InputError(path, "an empty run: no result lines")
    if not seen & qrels.keys():
        raise InputError(path, f"none of its {len(seen)} queries is judged in the qrels (e.g. {min(seen)!r}; the qrels "
                               f"judge e.g. {min(qrels)!r}): a run and qrels of different sets?")
    return values


def _means(values: dict[str, dict[str, float]], qrels: Qrels) -> dict[str, float]:
    return {name: sum(per.values()) / len(qrels) for name, per in values.items()}


def _per_query(run: Run | Queries, qrels: Qrels, measures: Mapping[str, str]) -> dict[str, dict[str, float]]:
    """Each measure per judged query, in one pass over the run, :data:`CHUNK` queries at a time.
    The library sees judged queries with at least one result; every other judged query counts 0."""
    import ir_measures

    parsed = {ir_measures.parse_measure(m): name for name, m in measures.items()}
    values = {name: dict.fromkeys(qrels, 0.0) for name in measures}

    def score(chunk: dict[str, dict[str, float]]) -> None:
        for metric in ir_measures.iter_calc(list(parsed), {q: dict(qrels[q]) for q in chunk}, chunk):
            values[parsed[metric.measure]][metric.query_id] = metric.value

    chunk: dict[str, dict[str, float]] = {}
    for qid, docs in (run.items() if isinstance(run, Mapping) else run):
        if qid in qrels and docs:
            chunk[qid] = dict(docs)
            if len(chunk) == CHUNK:
                score(chunk)
                chunk = {}
    if chunk:
        score(chunk)
    return values


@dataclass(frozen=True)
class Difference:
    """A run against a baseline on one measure, paired over the same judged queries."""

    measure: str
    run: float
    baseline: float
    low: float  # 95% paired bootstrap interval of run - baseline
    high: float
    changed: int  # queries where the two differ

    @property
    def delta(self) -> float:
        return self.run - self.baseline


def compare(run: Run | str | Path, baseline: Run | str | Path, qrels: Qrels, measures: Mapping[str, str] = MEASURES,
            resamples: int = 2000, seed: int = 0) -> list[Difference]:
    """Each measure of ``run`` against ``baseline`` with a paired bootstrap 95% interval of the
    difference: the queries are resampled with replacement, both runs keep their own value on each.
    Two runs on the same questions differ on few of them, so the paired interval is much narrower
    than either mean's own, and tells a real difference from a reshuffle of a few queries.
    A run is a whole run or the path of a run file (streamed, :func:`per_query_file`)."""
    import numpy as np

    queries = list(qrels)
    ours, theirs = (per_query_file(r, qrels, measures) if isinstance(r, str | Path) else _per_query(r, qrels, measures)
                    for r in (run, baseline))
    rows = max(1, 2_000_000 // max(len(queries), 1))  # resamples drawn at once: memory bounded by a constant
    out = []
    for name in measures:
        a = np.array([ours[name][q] for q in queries])
        b = np.array([theirs[name][q] for q in queries])
        rng = np.random.default_rng(seed)  # the same resamples for every measure
        means = np.concatenate([(a - b)[rng.integers(len(queries), size=(min(rows, resamples - i), len(queries)))]
                                .mean(axis=1) for i in range(0, resamples, rows)])
        low, high = np.quantile(means, [0.025, 0.975])
        out.append(Difference(name, float(a.mean()), float(b.mean()), float(low), float(high),
                              int(np.count_nonzero(np.abs(a - b) > 1e-12))))
    return out
