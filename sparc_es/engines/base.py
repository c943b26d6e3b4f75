"""The engine contract: :class:`Hit`, the :class:`Engine` protocol, the engine kinds, and the optional
abilities an engine declares by having them (:class:`Tokenized`, :class:`Impacts`, :class:`Reweighable`,
:class:`Fusion`): what the answers stage may ask of an engine beyond searching.

**The one tie rule**, on every engine: hits are ranked by score, and sentences of equal score by
their place in the encoded folder (input order, :attr:`Hit.order`): Lucene by docid (its index is
always built in input order), the exact engines by column, Elasticsearch by the ``order`` each
document stores (a sort after ``_score``), the client-side fusions by :func:`best_first`.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, fields, replace
from enum import Enum
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from sparc_es.model.query import QueryEncoder

# Hits per question an engine is asked for: Elasticsearch's default max_result_window, and far past
# what a person reads or a run is evaluated at (1,000); a Java priority queue of 2^31 entries is not.
MAX_HITS = 10_000


def check_k(k: int) -> int:
    """``k`` hits per question, or a one-line error: every engine's ``search`` and ``batch_search``
    ask this first, so a library caller gets the CLI's message, not the engine's own failure."""
    from sparc_es.errors import SparcError

    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 1 <= k <= MAX_HITS:
        raise SparcError(f"k is the number of hits a question gets: 1 to {MAX_HITS:,}, not {k!r}")
    return int(k)


def check_topics(topics: Iterable[tuple[str, str]], threads: int = 1) -> list[tuple[str, str]]:
    """``batch_search``'s topics as a list of (qid, question) pairs, or a one-line error: a mapping
    (its keys would be unpacked as pairs of characters), a bare question, a qid given twice (its
    hits would replace the first's), ``threads`` under 1."""
    from sparc_es.errors import SparcError

    if isinstance(topics, (str, Mapping)):
        raise SparcError("topics are (qid, question) pairs: pass dict.items(), not the dict, or [(qid, question)] "
                         "for one question")
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral) or threads < 1:
        raise SparcError(f"threads is 1 or more, not {threads!r}")
    out, seen = [], set()
    for topic in topics:
        try:
            qid, question = topic if not isinstance(topic, (str, bytes)) else ()
        except (TypeError, ValueError):
            raise SparcError(f"topics are (qid, question) pairs, not {topic!r}"[:200]) from None
        if isinstance(qid, bool) or not isinstance(qid, str | numbers.Integral):
            raise SparcError(f"a qid is a string or an integer, not {qid!r}"[:200])
        if qid in seen:
            raise SparcError(f"qid {qid!r} is given twice: each question's hits are keyed by its qid")
        seen.add(qid)
        out.append((qid, question))
    return out


@dataclass(frozen=True, slots=True)  # slots: a run of 10k queries x 1,000 hits is 10M of these
class Hit:
    """One retrieved sentence. ``score``: SPARC alone, model units (g(q, s) over the quantised weights,
    the integer ``impact`` over the factor); the default one-request sum, the fraction of the
    question's attainable score, 0 to 1 (``impact`` None); BM25, Lucene's BM25 score."""

    id: str
    score: float
    impact: int | None = None  # an impact engine's integer score: score * factor
    text: str = ""
    doc: str | None = None
    start: int | None = None
    end: int | None = None
    code: str | None = None  # the code block the sentence leads into, as written
    context: str | None = None  # the passage, where the engine returns it (Elasticsearch; Lucene's is in the store)
    order: int | None = None  # the sentence's place in the encoded folder: ties in score go to the lower

    def located(self, sentence) -> Hit:
        """This hit with the stored sentence's text, document, offsets and code (``None``: unchanged)."""
        if sentence is None:
            return self
        return replace(self, text=sentence.text, doc=sentence.doc, start=sentence.start, end=sentence.end,
                       code=sentence.code)

    def to_json(self) -> dict:
        """The hit's fields that are set, less ``order`` (a ranking key, not something to show)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name != "order" and getattr(self, f.name) is not None}


def best_first(scored: dict[str, float], places: Mapping[str, tuple[float, ...]]) -> list[tuple[str, float]]:
    """(id, score) best first by the one tie rule: score, then the sentence's place in the encoded
    folder (``places``: a tuple, compared as tuples; an id without one goes after those with one),
    then id."""
    nowhere = (float("inf"),)
    return sorted(scored.items(), key=lambda item: (-item[1], places.get(item[0], nowhere), item[0]))


Topics = Iterable[tuple[str, str]]  # (qid, question)


@runtime_checkable
class Engine(Protocol):
    """What every sparc-es engine does."""

    def search(self, question: str, k: int = 10) -> list[Hit]:
        """The top ``k`` sentences for one question, with their text and position."""

    def batch_search(self, topics: Topics, k: int = 1000, threads: int = 1) -> dict[str, list[Hit]]:
        """The top ``k`` for many (qid, question) pairs, keyed by qid (texts may be left out)."""

    def describe(self) -> Description:
        """What this engine is: its kind and the hybrid it runs (run tags, ``/health``, explanations)."""

    def close(self) -> None:
        """Release files, connections and stores."""

    def __enter__(self) -> Engine:
        """``with open_engine(...) as engine:`` (:class:`Closing` gives every engine this)."""

    def __exit__(self, *exc: object) -> None:
        """:meth:`close` on leaving the ``with``."""


# The optional abilities. An engine has one by having its members; the answers stage asks with
# isinstance (these are runtime-checkable), never by probing for attribute names.


@runtime_checkable
class Tokenized(Protocol):
    """An engine that reads a question as a bag of WordPieces (the SPARC engines): the tokenizer the
    page and the CLI use to say which words of a question the index holds."""

    queries: QueryEncoder


@runtime_checkable
class Recorded(Protocol):
    """An engine whose index records what it was built from, where no manifest is at hand (an
    Elasticsearch index's mapping): the corpus paths (where a hit's document is read to place it),
    the sentences it holds and the weights' model and quantisation factor."""

    corpus: list[str]

    def record(self) -> dict:
        """``{"sentences", "fingerprint", "factor", "generation"}`` as the index records them (each None
        where it does not)."""

    def holds(self, doc: str) -> bool:
        """Whether the index holds sentences of the document ``doc``."""


@runtime_checkable
class Impacts(Protocol):
    """An engine whose index can be read back (the Lucene impact index): ``explain`` and the
    question's match are computed from it."""

    def postings(self, tokens: Iterable[str]) -> dict[str, int]:
        """How many sentences hold each token."""

    def stored(self, ids: list[str], tokens: Iterable[str]) -> dict[str, dict[str, int]]:
        """The impacts the sentences ``ids`` store for ``tokens``."""


@runtime_checkable
class Reweighable(Protocol):
    """An engine whose hybrid can change for one request (the Lucene sum): the server's per-request
    ``hybrid`` and ``hybrid_weight``."""

    def asked(self, bm25_share: float | None) -> AbstractContextManager:
        """Within the context, search with BM25's share ``bm25_share`` of the sum (None: SPARC alone)."""


@runtime_checkable
class Fusion(Protocol):
    """Two engines' lists fused client-side: the SPARC side holds the impacts."""

    sparc: Engine
    bm25: Engine


def sparc_side(engine: Engine) -> Engine:
    """The engine that holds the SPARC impacts: a fusion's SPARC side, else ``engine`` itself."""
    return engine.sparc if isinstance(engine, Fusion) else engine


class EngineKind(str, Enum):
    LUCENE = "lucene"
    ES = "es"
    BM25 = "bm25"


class HybridMethod(str, Enum):
    """How SPARC and BM25 are combined (``--hybrid``; the rules are :mod:`~sparc_es.engines.hybrid`'s)."""

    SUM = "sum"  # one request: the engine sums SPARC and BM25 (blend.py)
    MINMAX = "minmax"  # two requests, min-max normalised and summed here
    RRF = "rrf"  # two requests, reciprocal-rank fusion here


class Closing:
    """``with open_engine(...) as engine:``: the engine (or presenter, explainer) closed on leaving."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass(frozen=True)
class Description:
    """What an engine is (:meth:`Engine.describe`): its kind (``lucene``, ``es``, ``bm25``, ``exact``,
    ...), the hybrid it runs, and BM25's share where that hybrid weighs one (a sum or ``minmax``)."""

    engine: str
    hybrid: HybridMethod | None = None
    hybrid_weight: float | None = None


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
