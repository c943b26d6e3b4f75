"""Evaluation: TREC runs against TREC qrels with trec_eval's own code (ir_measures + pytrec_eval).

The paper's measures are MRR over the top 1,000 (``RR@1000``) and Recall@1, which in ReQA is the
fraction of questions whose first sentence answers them (``Success@1``); nDCG@10 and R@100 come
along. Averages run over **every query that has qrels**: a query the run left out, or answered
with nothing, counts as zero (pytrec_eval on its own would skip it, as trec_eval does without -c).

    sparc-es eval --run RUN --qrels QRELS
    python -m sparc_es.eval RUN QRELS
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from .errors import InputError

# name in reports -> ir_measures measure
MEASURES = {"MRR@1000": "RR@1000", "R@1": "Success@1", "nDCG@10": "nDCG@10", "R@100": "R@100"}

Run = Mapping[str, Mapping[str, float]]  # qid -> docid -> score
Qrels = Mapping[str, Mapping[str, int]]  # qid -> docid -> relevance


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """TREC qrels: ``qid iter docid relevance`` per line."""
    qrels: dict[str, dict[str, int]] = {}
    for lineno, fields in _lines(path):
        if len(fields) != 4:
            raise InputError(path, "expected 'qid iter docid relevance'", lineno)
        try:
            qrels.setdefault(fields[0], {})[fields[2]] = int(fields[3])
        except ValueError:
            raise InputError(path, f"relevance {fields[3]!r} is not an integer", lineno) from None
    if not qrels:
        raise InputError(path, "no judgements in the qrels file")
    return qrels


def read_run(path: str | Path) -> dict[str, dict[str, float]]:
    """TREC run: ``qid Q0 docid rank score tag`` per line."""
    run: dict[str, dict[str, float]] = {}
    for lineno, fields in _lines(path):
        if len(fields) != 6:
            raise InputError(path, "expected 'qid Q0 docid rank score tag'", lineno)
        try:
            run.setdefault(fields[0], {})[fields[2]] = float(fields[4])
        except ValueError:
            raise InputError(path, f"score {fields[4]!r} is not a number", lineno) from None
    return run


def _lines(path: str | Path) -> Iterable[tuple[int, list[str]]]:
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "file not found")
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            try:
                fields = raw.decode("utf-8").split()
            except UnicodeDecodeError:
                raise InputError(path, "not valid UTF-8", lineno) from None
            if fields:
                yield lineno, fields


def _judged(run: Run, qrels: Qrels) -> dict[str, dict[str, float]]:
    """The part of the run the library sees: judged queries with at least one result. The
    callers count every other judged query as zero."""
    return {q: dict(docs) for q, docs in run.items() if q in qrels and docs}


def evaluate(run: Run, qrels: Qrels, measures: Mapping[str, str] = MEASURES) -> dict[str, float]:
    """Mean of each measure over all queries with qrels; missing or empty results score 0."""
    import ir_measures

    parsed = {name: ir_measures.parse_measure(m) for name, m in measures.items()}
    by_measure = {m: name for name, m in parsed.items()}
    totals = dict.fromkeys(parsed, 0.0)
    for metric in ir_measures.iter_calc(list(parsed.values()), dict(qrels), _judged(run, qrels)):
        totals[by_measure[metric.measure]] += metric.value
    n = len(qrels)
    return {name: total / n for name, total in totals.items()}


def per_query(run: Run, qrels: Qrels, measure: str) -> dict[str, float]:
    """One measure per judged query (0 where the run has nothing for it)."""
    import ir_measures

    m = ir_measures.parse_measure(measure)
    values = dict.fromkeys(qrels, 0.0)
    for metric in ir_measures.iter_calc([m], dict(qrels), _judged(run, qrels)):
        values[metric.query_id] = metric.value
    return values


def format_scores(scores: Mapping[str, float]) -> str:
    """``MRR@1000 55.44  R@1 48.15 ...`` (percentages, as the paper reports them)."""
    return "  ".join(f"{name} {100 * value:.2f}" for name, value in scores.items())


def main(argv: list[str] | None = None) -> int:
    from .cli import main as cli_main

    return cli_main(["eval", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
