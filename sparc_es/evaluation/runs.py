"""Batch runs, searched and written in one place: topics in, a batch of questions at a time, TREC
run files out (``sparc-es run``, ``sparc-es table``).

Memory does not grow with the number of questions: only one batch's hits are held, for every
engine, and each run file appears under its name only once it is complete.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Protocol

from sparc_es.engines.base import Hit, above, best_per_document
from sparc_es.errors import SparcError
from sparc_es.evaluation.trec import TrecRunWriter

# A batch's hits (qid -> sentence hits) -> the document of each sentence among them.
Documents = Callable[[Mapping[str, list[Hit]]], Mapping[str, str | None]]


class BatchSearcher(Protocol):
    """What a run needs of an engine (``table``'s shared BM25 run has no more)."""

    def batch_search(self, topics: Iterable[tuple[str, str]], k: int = 1000,
                     threads: int = 1) -> dict[str, list[Hit]]: ...


@dataclass(frozen=True)
class RunFile:
    """One run of a batch: the engine that searches it, the file it goes to and its tag."""

    engine: BatchSearcher
    path: Path  # a str is taken too, as every other path of the API
    tag: str = "sparc-es"

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))


NAMED = 5  # the queries without a hit that a run names (it counts them all)


@dataclass
class Written:
    """What searching one run took: the queries written, the seconds spent in the engine, (with
    documents) the queries left with fewer than ``k`` documents among a full ``depth`` of sentences,
    which a deeper search could fill (a query the engine answered with fewer sentences, or whose
    sentences ``min_score`` cut, has all the corpus holds for it), and the queries without a hit,
    which have no line in the run file (as in TREC's), the first :data:`NAMED` of them by id."""

    queries: int = 0
    seconds: float = 0.0
    short: int = 0
    no_hit: int = 0
    no_hit_ids: list[str] = field(default_factory=list)


def write_runs(runs: Sequence[RunFile], topics: Iterable[tuple[str, str]], k: int, *, batch: int,
               depth: int | None = None, threads: int = 1, min_score: float | None = None,
               documents: Documents | None = None, progress: Callable[[int], None] | None = None) -> list[Written]:
    """Search ``topics`` (qid, question) a ``batch`` at a time with the engine of every run, and write
    each one's hits to its run file: ``depth`` sentences searched per question (default ``k``),
    those under ``min_score`` dropped, then with ``documents`` each document's best sentence, ``k``
    documents per query. ``progress`` is told the questions done after each batch. A run file is
    written beside its name (``NAME.partial``) and renamed once complete, removed on failure."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise SparcError(f"batch is how many questions are searched at once, 1 or more, not {batch!r}")
    partials = [run.path.with_name(run.path.name + ".partial") for run in runs]
    written = [Written() for _ in runs]
    topics, questions = iter(topics), 0
    try:
        with ExitStack() as files:
            writers = [files.enter_context(TrecRunWriter(partial, tag=run.tag)) for run, partial in zip(runs, partials)]
            while part := list(islice(topics, batch)):
                for run, writer, done in zip(runs, writers, written):
                    _search_batch(run.engine, part, writer, done, k, depth or k, threads, min_score, documents)
                questions += len(part)
                if progress is not None:
                    progress(questions)
    except BaseException:
        for partial in partials:
            partial.unlink(missing_ok=True)
        raise
    for run, partial in zip(runs, partials):
        os.replace(partial, run.path)
    return written


def _search_batch(engine: BatchSearcher, part: list[tuple[str, str]], writer: TrecRunWriter, done: Written, k: int,
                  depth: int, threads: int, min_score: float | None, documents: Documents | None) -> None:
    started = time.perf_counter()
    results = engine.batch_search(part, k=depth, threads=threads)
    done.seconds += time.perf_counter() - started
    results = {qid: above(results.get(qid, []), min_score) for qid, _ in part}
    doc_of = documents(results) if documents is not None else None
    for qid, _ in part:
        hits = results[qid]
        if doc_of is not None:
            full = len(hits) >= depth
            hits = best_per_document(hits, doc_of, k)
            done.short += full and len(hits) < k
        if not hits:
            done.no_hit += 1
            if len(done.no_hit_ids) < NAMED:
                done.no_hit_ids.append(qid)
        writer.write(qid, hits)
    done.queries += len(part)


def hit_documents(results: Mapping[str, list[Hit]]) -> dict[str, str | None]:
    """The documents of a batch's sentences, as its hits carry them (Elasticsearch's)."""
    return {h.id: h.doc for hits in results.values() for h in hits}


def index_documents(index: str | Path) -> Documents:
    """The documents of a batch's sentences, read from the sentence store of the Lucene index
    ``index`` (a batch search's hits leave them out)."""
    from sparc_es.layout.names import SENTENCES
    from sparc_es.layout.store import SentenceStore

    def documents(results: Mapping[str, list[Hit]]) -> dict[str, str | None]:
        store = SentenceStore(Path(index) / SENTENCES)
        try:
            found = store.get(list({h.id for hits in results.values() for h in hits}))
        finally:
            store.close()
        return {sid: s.doc for sid, s in found.items()}

    return documents
