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

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sparc_es.errors import InputError, SparcError

if TYPE_CHECKING:
    from sparc_es.engines.base import Hit


Run = Mapping[str, Mapping[str, float]]  # qid -> docid -> score
Qrels = Mapping[str, Mapping[str, int]]  # qid -> docid -> relevance
Queries = Iterable[tuple[str, Mapping[str, float]]]  # a run one query at a time: (qid, docid -> score)
Results = Mapping[str, Sequence["Hit"]]  # qid -> hits best first, as an engine's batch_search returns them

CHUNK = 200  # queries handed to trec_eval's code at once


def measures_at(k: int) -> dict[str, str]:
    """The report's measures (name -> ir_measures measure) for a run of ``k`` hits per query: a cutoff
    past ``k`` is ``k``, so each name says the cutoff the run really has (RR@1000 of 100 hits is
    RR@100, R@100 of 50 hits R@50). nDCG@10 keeps its name: with fewer than 10 hits it is nDCG@10 of
    those hits, not nDCG@k (the ideal ranking it divides by is still 10 long)."""
    rr, recall = min(1000, k), min(100, k)
    return {f"MRR@{rr}": f"RR@{rr}", "R@1": "Success@1", "nDCG@10": "nDCG@10", f"R@{recall}": f"R@{recall}"}


MEASURES = measures_at(1000)  # name in reports -> ir_measures measure


def evaluate(run: Run | Results | Queries, qrels: Qrels, measures: Mapping[str, str] = MEASURES
             ) -> dict[str, float]:
    """Mean of each measure over all queries with qrels; missing or empty results score 0. ``run``
    is a whole run, an engine's hits (``batch_search``'s, scored as the run file ``run`` writes), or
    (qid, docs) pairs one query at a time, each query once. A run or qrels that can measure nothing is
    refused as :func:`score_file` refuses a file, a :class:`~sparc_es.errors.SparcError`."""
    return _scored(run, qrels, measures, None).means(qrels)


def evaluate_file(path: str | Path, qrels: Qrels, measures: Mapping[str, str] = MEASURES) -> dict[str, float]:
    """:func:`evaluate` of a TREC run file, read one query at a time."""
    return score_file(path, qrels, measures).means(qrels)


def per_query(run: Run | Results | Queries, qrels: Qrels, measure: str) -> dict[str, float]:
    """One measure per judged query (0 where the run has nothing for it)."""
    return _per_query(run, qrels, {measure: measure})[measure]


@dataclass(frozen=True)
class Scored:
    """A run file scored: each measure per judged query, and which judged queries it answered."""

    values: dict[str, dict[str, float]]  # measure -> judged qid -> value (0 where unanswered)
    answered: frozenset[str]  # the judged queries with at least one result in the run

    def means(self, qrels: Qrels) -> dict[str, float]:
        return _means(self.values, qrels)

    def unanswered(self, qrels: Qrels) -> int:
        """Judged queries the run has no result for (each counts 0 in every mean)."""
        return len(qrels) - len(self.answered)


def per_query_file(path: str | Path, qrels: Qrels, measures: Mapping[str, str] = MEASURES
                   ) -> dict[str, dict[str, float]]:
    """Each measure per judged query of a TREC run file (:func:`score_file`)."""
    return score_file(path, qrels, measures).values


def score_file(path: str | Path, qrels: Qrels, measures: Mapping[str, str] = MEASURES) -> Scored:
    """Each measure per judged query of a TREC run file, streamed query by query
    (:func:`~sparc_es.evaluation.trec.iter_run`). A file whose queries' lines are not each together is read
    whole instead, as trec_eval reads every file.

    A run that can measure nothing is a one-line :class:`~sparc_es.errors.InputError` naming it, never
    a 0.00: an empty run, one none of whose queries the qrels judge, and one none of whose documents
    (for the queries they share) the qrels judge at all, which are ids of another kind or collection,
    e.g. sentence ids (``doc#key``) against qrels of documents (``sparc-es run --documents``)."""
    from sparc_es.evaluation.trec import RunNotGrouped, iter_run, read_run

    try:
        return _scored(iter_run(path), qrels, measures, path)
    except RunNotGrouped:
        return _scored(read_run(path).items(), qrels, measures, path)


def _scored(run: Run | Results | Queries, qrels: Qrels, measures: Mapping[str, str], path: str | Path | None
            ) -> Scored:
    """Each measure per judged query of ``run``, the run file ``path`` or (None) a run in memory, and
    the checks that refuse a run or qrels that can measure nothing: :func:`score_file`'s and
    :func:`evaluate`'s, in one place."""
    if not qrels:
        raise SparcError("no qrels: no judged query to average over")
    seen: set[str] = set()  # the queries with at least one result
    ids = _IdCheck(qrels)

    def counted(queries: Queries) -> Queries:
        for qid, docs in queries:
            if docs:
                seen.add(qid)
                if qid in qrels:
                    ids.look(docs)
            yield qid, docs

    values = _per_query(counted(_queries(run)), qrels, measures)
    if not seen:
        raise _refused(path, "an empty run: no results")
    answered = frozenset(seen & qrels.keys())
    if not answered:
        raise _refused(path, f"none of its {len(seen)} queries is judged in the qrels (e.g. {min(seen)!r}; the qrels "
                             f"judge e.g. {min(qrels)!r}): a run and qrels of different sets?")
    ids.check(path, len(answered))
    return Scored(values, answered)


def _refused(path: str | Path | None, message: str) -> SparcError:
    """The error that refuses the run file ``path``, or (None) a run in memory."""
    return InputError(path, message) if path is not None else SparcError(f"the run: {message}")


def _queries(run: Run | Results | Queries) -> Iterator[tuple[str, Mapping[str, float]]]:
    """``run`` one query at a time, a query's hits as the scores its run file holds
    (:func:`~sparc_es.evaluation.trec.run_of`)."""
    from sparc_es.engines.base import Hit
    from sparc_es.evaluation.trec import run_of

    for qid, docs in (run.items() if isinstance(run, Mapping) else run):
        if isinstance(docs, Mapping):
            yield qid, docs
        elif all(isinstance(h, Hit) for h in docs):
            yield qid, run_of({qid: list(docs)})[qid]
        else:
            raise SparcError(f"the run's query {qid!r}: expected its documents' scores (docid -> score) or its "
                             "hits (a list of Hit, as batch_search returns)")


def coverage_notes(qrels: Qrels, run: tuple[str | Path, Scored],
                   baseline: tuple[str | Path, Scored] | None = None) -> list[str]:
    """What a user must hear about the judged queries the runs leave out, one line each: how many
    have no results in each run (they count 0), and, against a baseline, whether the two runs
    answer different queries (a paired difference then partly compares a result with nothing)."""
    notes = [f"{scored.unanswered(qrels)} of {len(qrels)} judged queries have no results in {path} (counted as 0)"
             for path, scored in (run, *([baseline] if baseline else [])) if scored.unanswered(qrels)]
    if baseline is not None and run[1].answered != baseline[1].answered:
        ours, theirs = run[1].answered, baseline[1].answered
        notes.append(f"{run[0]} and the baseline {baseline[0]} answer different queries ({len(ours)} and "
                     f"{len(theirs)} of the {len(qrels)} judged; {len(ours - theirs)} only in the run, "
                     f"{len(theirs - ours)} only in the baseline): each counts 0 where it has no results, so the "
                     "differences include queries one run left out")
    return notes


_SENTENCE_OF = "#-"  # what follows a document's id in its sentences' ids


class _IdCheck:
    """Whether a run ranks any document the qrels judge, seen query by query: one that ranks none
    would score 0.00 on every measure because its ids are of another kind (sentences against
    documents, or the reverse) or another collection.

    A sentence's id is its document's and more, after a "#" (``a.md#1a2b3c4d``, a corpus's) or a "-"
    (``squad-0-1``, an MRQA set's, ``sparc_es.evaluation.evalsets``): a run id that a judged id
    continues so is a document of judged sentences."""

    def __init__(self, qrels: Qrels) -> None:
        self.judged = {d for judged in qrels.values() for d in judged}
        self.documents = {d[:i] for d in self.judged for i, c in enumerate(d) if c in _SENTENCE_OF and i}
        self.found = False
        self.example: str | None = None
        self.sentence: str | None = None  # a run id doc#key whose doc the qrels judge
        self.document: str | None = None  # a run id that is the document of a judged sentence

    def look(self, docs: Iterable[str]) -> None:
        if self.found:
            return
        for d in docs:
            if d in self.judged:
                self.found = True
                return
            self.example = self.example or d
            if self.sentence is None and "#" in d and d.rpartition("#")[0] in self.judged:
                self.sentence = d
            if self.document is None and d in self.documents:
                self.document = d

    def check(self, path: str | Path | None, queries: int) -> None:
        if self.found:
            return
        if self.sentence is not None:
            raise _refused(path, f"it ranks sentences (e.g. {self.sentence!r}) and the qrels judge documents (e.g. "
                                 f"{self.sentence.rpartition('#')[0]!r}): every measure would be 0.00; rank "
                                 "documents with `sparc-es run --documents`")
        if self.document is not None:
            judged = min(d for d in self.judged if d[:len(self.document) + 1] in
                         {self.document + c for c in _SENTENCE_OF})
            raise _refused(path, f"it ranks documents (e.g. {self.document!r}) and the qrels judge sentences (e.g. "
                                 f"{judged!r}): every measure would be 0.00; rank sentences (`sparc-es run` "
                                 "without --documents)")
        raise _refused(path, f"none of the documents it ranks for the {queries} queries the qrels judge is judged "
                             f"there (e.g. {self.example!r}; the qrels judge e.g. {min(self.judged)!r}): every "
                             "measure would be 0.00; a run and qrels of different collections?")


def _means(values: dict[str, dict[str, float]], qrels: Qrels) -> dict[str, float]:
    return {name: sum(per.values()) / len(qrels) for name, per in values.items()}


def _per_query(run: Run | Results | Queries, qrels: Qrels, measures: Mapping[str, str]
               ) -> dict[str, dict[str, float]]:
    """Each measure per judged query, in one pass over the run, :data:`CHUNK` queries at a time.
    The library sees judged queries with at least one result; every other judged query counts 0."""
    import ir_measures

    parsed = {ir_measures.parse_measure(m): name for name, m in measures.items()}
    values = {name: dict.fromkeys(qrels, 0.0) for name in measures}

    def score(chunk: dict[str, dict[str, float]]) -> None:
        for metric in ir_measures.iter_calc(list(parsed), {q: dict(qrels[q]) for q in chunk}, chunk):
            values[parsed[metric.measure]][metric.query_id] = metric.value

    chunk: dict[str, dict[str, float]] = {}
    for qid, docs in _queries(run):
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


def compare(run: Run | str | Path | Scored, baseline: Run | str | Path | Scored, qrels: Qrels,
            measures: Mapping[str, str] = MEASURES, resamples: int = 2000, seed: int = 0) -> list[Difference]:
    """Each measure of ``run`` against ``baseline`` with a paired bootstrap 95% interval of the
    difference: the queries are resampled with replacement, both runs keep their own value on each.
    Two runs on the same questions differ on few of them, so the paired interval is much narrower
    than either mean's own, and tells a real difference from a reshuffle of a few queries.
    A run is a whole run, the path of a run file (streamed, :func:`score_file`) or a run file
    already scored on ``measures``."""
    import numpy as np

    def values(r: Run | str | Path | Scored) -> dict[str, dict[str, float]]:
        if isinstance(r, Scored):
            return r.values
        return per_query_file(r, qrels, measures) if isinstance(r, str | Path) else _per_query(r, qrels, measures)

    queries = list(qrels)
    ours, theirs = values(run), values(baseline)
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
