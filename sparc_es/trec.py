"""``sparc_es.trec``, kept for code written before the evaluation stage became a package: every name
of :mod:`sparc_es.evaluation.trec`."""

from sparc_es.evaluation.trec import (
    RunNotGrouped,
    TrecRunWriter,
    iter_run,
    read_qrels,
    read_run,
    read_topics,
    run_of,
    run_tag,
    write_qrels,
    write_topics,
)

__all__ = ["RunNotGrouped", "TrecRunWriter", "iter_run", "read_qrels", "read_run", "read_topics", "run_of",
           "run_tag", "write_qrels", "write_topics"]
