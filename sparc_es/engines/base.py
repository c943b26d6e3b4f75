"""The engine contract: :class:`Hit`, the :class:`Engine` protocol and the engine kinds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from enum import Enum
from typing import Protocol, runtime_checkable

# Hits per question an engine is asked for: Elasticsearch's default max_result_window, and far past
# what a person reads or a run is evaluated at (1,000); a Java priority queue of 2^31 entries is not.
MAX_HITS = 10_000


@dataclass(frozen=True, slots=True)  # slots: a run of 10k queries x 1,000 hits is 10M of these
class Hit:
    """One retrieved sentence. ``score`` is in model units: g(q, s) over the quantised weights."""

    id: str
    score: float
    impact: int | None = None  # an impact engine's integer score: score * factor
    text: str = ""
    doc: str | None = None
    start: int | None = None
    end: int | None = None
    code: str | None = None  # the code block the sentence leads into, as written
    context: str | None = None  # the passage, where the engine returns it (Elasticsearch; Lucene's is in the store)

    def located(self, sentence) -> Hit:
        """This hit with the stored sentence's text, document, offsets and code (``None``: unchanged)."""
        if sentence is None:
            return self
        return replace(self, text=sentence.text, doc=sentence.doc, start=sentence.start, end=sentence.end,
                       code=sentence.code)

    def to_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


Topics = Iterable[tuple[str, str]]  # (qid, question)


@runtime_checkable
class Engine(Protocol):
    """What every sparc-es engine does."""

    def search(self, question: str, k: int = 10) -> list[Hit]:
        """The top ``k`` sentences for one question, with their text and position."""

    def batch_search(self, topics: Topics, k: int = 1000, threads: int = 1) -> dict[str, list[Hit]]:
        """The top ``k`` for many (qid, question) pairs, keyed by qid (texts may be left out)."""

    def close(self) -> None:
        """Release files, connections and stores."""


class EngineKind(str, Enum):
    LUCENE = "lucene"
    ES = "es"
    BM25 = "bm25"


class HybridMethod(str, Enum):
    """How SPARC and BM25 are combined (``--hybrid``; the rules are :mod:`~sparc_es.engines.hybrid`'s)."""

    SUM = "sum"  # one request: the engine sums SPARC and BM25 (blend.py)
    MINMAX = "minmax"  # two requests, min-max normalised and summed here
    RRF = "rrf"  # two requests, reciprocal-rank fusion here


def above(hits: list[Hit], min_score: float | None) -> list[Hit]:
    """The hits scoring at least ``min_score`` (all of them when it is None): ``--min-score``."""
    return hits if min_score is None else [h for h in hits if h.score >= min_score]


def best_sentences(hits: list[Hit], doc_of: Mapping[str, str | None], k: int) -> list[Hit]:
    """Sentence hits (best first) -> each document's best sentence, the top ``k`` documents: the
    one aggregation of ``run --documents`` and ``search --documents``. A sentence without a
    document stands for itself."""
    out: list[Hit] = []
    seen: set[str] = set()
    for h in hits:
        doc = doc_of.get(h.id) or h.id
        if doc not in seen:
            seen.add(doc)
            out.append(h)
            if len(out) == k:
                break
    return out


def best_per_document(hits: list[Hit], doc_of: Mapping[str, str | None], k: int) -> list[Hit]:
    """Sentence hits (best first) -> document hits: each document takes its best sentence's score
    and text (:func:`best_sentences`); the top ``k``."""
    out = []
    for h in best_sentences(hits, doc_of, k):
        doc = doc_of.get(h.id) or h.id
        out.append(replace(h, id=doc, doc=doc))
    return out
