"""Evaluation: TREC runs against TREC qrels with trec_eval's own code (ir_measures + pytrec_eval).

The paper's measures are MRR over the top 1,000 (``RR@1000``) and Recall@1, which in ReQA is the
fraction of questions whose first sentence answers them (``Success@1``); nDCG@10 and R@100 come
along. Averages run over **every query that has qrels**: a query the run left out, or answered
with nothing, counts as zero (pytrec_eval on its own would skip it, as trec_eval does without -c).

Reading and writing the TREC files themselves is :mod:`sparc_es.trec`'s job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# name in reports -> ir_measures measure
MEASURES = {"MRR@1000": "RR@1000", "R@1": "Success@1", "nDCG@10": "nDCG@10", "R@100": "R@100"}

Run = Mapping[str, Mapping[str, float]]  # qid -> docid -> score
Qrels = Mapping[str, Mapping[str, int]]  # qid -> docid -> relevance


def _judged(run: Run, qrels: Qrels) -> dict[str, dict[str, float]]:
    """The part of the run the library sees: judged queries with at least one result. The
    callers count every other judged query as zero."""
    return {q: dict(docs) for q, docs in run.items() if q in qrels and docs}


def evaluate(run: Run, qrels: Qrels, measures: Mapping[str, str] = MEASURES) -> dict[str, float]:
    """Mean of each measure over all queries with qrels; missing or empty results score 0."""
    return {name: sum(values.values()) / len(qrels) for name, values in _per_query(run, qrels, measures).items()}


def per_query(run: Run, qrels: Qrels, measure: str) -> dict[str, float]:
    """One measure per judged query (0 where the run has nothing for it)."""
    return _per_query(run, qrels, {measure: measure})[measure]


def _per_query(run: Run, qrels: Qrels, measures: Mapping[str, str]) -> dict[str, dict[str, float]]:
    """Each measure per judged query, all in one pass over the run."""
    import ir_measures

    parsed = {ir_measures.parse_measure(m): name for name, m in measures.items()}
    values = {name: dict.fromkeys(qrels, 0.0) for name in measures}
    for metric in ir_measures.iter_calc(list(parsed), dict(qrels), _judged(run, qrels)):
        values[parsed[metric.measure]][metric.query_id] = metric.value
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


def compare(run: Run, baseline: Run, qrels: Qrels, measures: Mapping[str, str] = MEASURES,
            resamples: int = 2000, seed: int = 0) -> list[Difference]:
    """Each measure of ``run`` against ``baseline`` with a paired bootstrap 95% interval of the
    difference: the queries are resampled with replacement, both runs keep their own value on each.
    Two runs on the same questions differ on few of them, so the paired interval is much narrower
    than either mean's own, and tells a real difference from a reshuffle of a few queries."""
    import numpy as np

    queries = list(qrels)
    picks = np.random.default_rng(seed).integers(len(queries), size=(resamples, len(queries)))
    ours, theirs = _per_query(run, qrels, measures), _per_query(baseline, qrels, measures)
    out = []
    for name in measures:
        a = np.array([ours[name][q] for q in queries])
        b = np.array([theirs[name][q] for q in queries])
        low, high = np.quantile((a - b)[picks].mean(axis=1), [0.025, 0.975])
        out.append(Difference(name, float(a.mean()), float(b.mean()), float(low), float(high),
                              int(np.count_nonzero(np.abs(a - b) > 1e-12))))
    return out
