"""BM25 + SPARC hybrids (paper 004 section 3.3): every rule of ``--hybrid`` and ``--hybrid-weight``.

The default, ``sum``, is one engine request: each sentence stores its BM25 term weights beside its
SPARC impacts, and the engine sums both with clause weights that normalise each side by the most
the question can score there (:mod:`~sparc_es.engines.blend`): one Lucene ``BooleanQuery``, one
Elasticsearch ``bool``. Scores are fractions of the question's attainable score, in [0, 1].

Two client-side fusions are kept as options, never the default: each engine retrieves ``depth``
sentences per question (at least the k asked for), SPARC from the impact index and BM25 from the
Lucene BM25 index beside it (or a ``match`` query on Elasticsearch), and the two lists are fused
per question by

* ``minmax``: ``a * bm25' + (1 - a) * sparc'`` after min-max normalisation of each list to [0, 1]
  (the default before the one-request sum; every question's top hit scores about 1, so scores
  cannot be thresholded), a sentence missing from a list scoring 0 there;
* ``rrf``: reciprocal-rank fusion (Cormack et al. 2009), ``sum over lists of 1 / (60 + rank)``.

Ties go by the one tie rule (:mod:`~sparc_es.engines.base`): input order, so that a fused run is
deterministic and ranks ties as every engine does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from sparc_es.engines.base import Closing, Description, Engine, EngineKind, Hit, HybridMethod, best_first, check_topics
from sparc_es.engines.blend import BM25_SHARE
from sparc_es.errors import SparcError, choice, option

RRF_K = 60
DEPTH = 1000  # sentences each engine retrieves per question before a client-side fusion

# BM25's share of a sum (``--hybrid-weight``) by default, for ``sum`` and ``minmax`` alike.
BM25_WEIGHT = BM25_SHARE


CLIENT_SIDE = (HybridMethod.MINMAX, HybridMethod.RRF)

# What `sparc-es search`, `serve` and `run` do unless told otherwise (--hybrid none: SPARC alone).
DEFAULT_METHOD = HybridMethod.SUM


@dataclass(frozen=True)
class HybridChoice:
    """What ``--hybrid`` and ``--hybrid-weight`` (or the API's ``hybrid``, ``hybrid_weight``, or a
    ``table`` system's options) ask of an engine, checked by :meth:`of`: the one owner of their rules,
    which the CLI, the server, ``table`` and :func:`~sparc_es.engines.open_engine` all call."""

    method: HybridMethod | None  # None: SPARC alone, or the BM25 engine
    weight: float  # BM25's share of a sum
    default: bool = False  # the default asked for: ``sum`` where the index stores BM25 terms (open_engine)
    weighed: bool = False  # a weight was given, so a fallback that cannot weigh it is an error

    @classmethod
    def of(cls, kind: EngineKind | str, hybrid: str | None, weight: float | None) -> HybridChoice:
        """``hybrid``: ``sum``, ``minmax``, ``rrf``, ``none``, ``default`` or None (SPARC alone on
        the SPARC engines, nothing on BM25); ``weight``: BM25's share, given only with a sum to weigh
        (``sum``, ``minmax`` or the default). Anything else is a one-line error, never ignored."""
        kind = choice(EngineKind, kind, "engine")
        default = hybrid == "default"
        method = None if hybrid in (None, "none", "default") else choice(HybridMethod, hybrid, "hybrid method")
        if kind is EngineKind.BM25:
            if hybrid not in (None, "default") or weight is not None:
                given = option("--hybrid", "hybrid") if hybrid not in (None, "default") else option(
                    "--hybrid-weight", "hybrid_weight")
                raise SparcError(f"{given} fuses SPARC with BM25: it applies to "
                                 f"{option('--engine lucene and es', 'the lucene and es engines')}, not to the BM25 "
                                 "engine")
            return cls(None, BM25_WEIGHT)
        if weight is not None and (method is HybridMethod.RRF or hybrid in (None, "none")):
            raise SparcError(f"{option('--hybrid-weight', 'hybrid_weight')} is BM25's share of a hybrid sum: it does "
                             f"not apply to {option('--hybrid ', 'hybrid=')}{hybrid or 'none'}"
                             + (" (SPARC alone)" if method is None else ""))
        if weight is not None and (isinstance(weight, bool) or not isinstance(weight, int | float)):
            raise SparcError(f"{option('--hybrid-weight', 'hybrid_weight')} is BM25's share of the sum, a number "
                             f"between 0 and 1, not {type(weight).__name__} {weight!r}")
        share = BM25_WEIGHT if weight is None else weight
        if not 0.0 <= share <= 1.0:
            raise SparcError(f"{option('--hybrid-weight', 'hybrid_weight')} is BM25's share of the sum: between 0 "
                             f"and 1, not {share:g}")
        return cls(method, share, default, weight is not None)


def normalised_sum(sparc: list[Hit], bm25: list[Hit], bm25_weight: float = BM25_WEIGHT) -> list[tuple[str, float]]:
    """(id, fused score) best first: ``a * bm25' + (1 - a) * sparc'`` over min-max-normalised lists."""
    fused: dict[str, float] = {}
    for hits, weight in ((sparc, 1.0 - bm25_weight), (bm25, bm25_weight)):
        if not hits:
            continue
        top, bottom = max(h.score for h in hits), min(h.score for h in hits)
        span = top - bottom
        for h in hits:
            fused[h.id] = fused.get(h.id, 0.0) + weight * ((h.score - bottom) / span if span > 0 else 1.0)
    return best_first(fused, _places(sparc, bm25))


def reciprocal_rank(sparc: list[Hit], bm25: list[Hit], k: int = RRF_K) -> list[tuple[str, float]]:
    """(id, fused score) best first: ``sum over the two lists of 1 / (k + rank)``, ranks from 1."""
    fused: dict[str, float] = {}
    for hits in (sparc, bm25):
        for rank, h in enumerate(hits, start=1):
            fused[h.id] = fused.get(h.id, 0.0) + 1.0 / (k + rank)
    return best_first(fused, _places(sparc, bm25))


def _places(sparc: list[Hit], bm25: list[Hit]) -> dict[str, tuple[float, float]]:
    """Each hit's place in the encoded folder as (SPARC side's order, BM25 side's order), unknown
    as infinity: the two Lucene indexes number sentences apart (the impact index leaves out those
    with no weight), so each order is compared only with its own side's."""
    places: dict[str, list[float]] = {}
    for side, hits in enumerate((sparc, bm25)):
        for h in hits:
            if h.order is not None:
                places.setdefault(h.id, [float("inf"), float("inf")])[side] = h.order
    return {i: tuple(place) for i, place in places.items()}


class HybridEngine(Closing, Engine):
    """A SPARC engine and a BM25 engine over the same sentences, fused per question client-side
    (``minmax`` or ``rrf``: two searches to ``depth`` a question)."""

    def __init__(self, sparc, bm25, method: HybridMethod | str = HybridMethod.RRF, bm25_weight: float = BM25_WEIGHT,
                 depth: int = DEPTH) -> None:
        method = choice(HybridMethod, method, "hybrid method")
        if method not in CLIENT_SIDE:
            raise SparcError(f"the {method.value} hybrid is one engine request, not a client-side fusion")
        if not 0.0 <= bm25_weight <= 1.0:
            raise SparcError("the BM25 weight of a hybrid sum must be between 0 and 1")
        self.sparc, self.bm25 = sparc, bm25
        self.method, self.bm25_weight, self.depth = method, bm25_weight, depth

    @classmethod
    def open(cls, index: str | Path, method: HybridMethod | str = HybridMethod.RRF, bm25_weight: float = BM25_WEIGHT,
             depth: int = DEPTH) -> HybridEngine:
        """The hybrid over a sparc-es Lucene index and the BM25 index built beside it (``INDEX/bm25``)."""
        from sparc_es.engines.bm25 import LuceneBM25
        from sparc_es.engines.lucene import LuceneEngine

        bm25 = LuceneBM25.beside(index)  # first: its error says how to get one
        return cls(LuceneEngine(index), bm25, method, bm25_weight, depth)

    def fuse(self, sparc: list[Hit], bm25: list[Hit], k: int) -> list[Hit]:
        """The top ``k`` of the two lists fused; a hit keeps the text, document and offsets its
        engine gave it (Elasticsearch's hits carry them, the Lucene engines' batch hits do not)."""
        if self.method is HybridMethod.RRF:
            ranked = reciprocal_rank(sparc, bm25)[:k]
        else:
            ranked = normalised_sum(sparc, bm25, self.bm25_weight)[:k]
        if not any(h.text or h.doc is not None for h in sparc[:1] + bm25[:1]):
            orders = {h.id: h.order for h in bm25 + sparc}  # the SPARC side's where both have one
            return [Hit(id=i, score=s, order=orders.get(i)) for i, s in ranked]
        given = {h.id: h for hits in (bm25, sparc) for h in hits}
        return [replace(given[i], score=s, impact=None) for i, s in ranked]

    def batch_search(self, topics: Iterable[tuple[str, str]], k: int = 1000, threads: int = 1) -> dict[str, list[Hit]]:
        topics = check_topics(topics, threads)
        depth = max(k, self.depth)
        sparc = self.sparc.batch_search(topics, k=depth, threads=threads)
        bm25 = self.bm25.batch_search(topics, k=depth, threads=threads)
        return {qid: self.fuse(sparc.get(qid, []), bm25.get(qid, []), k) for qid, _ in topics}

    def search(self, question: str, k: int = 10) -> list[Hit]:
        """Fused hits with their text, document and offsets (from the SPARC index's store where it
        has one, else as the engines returned them)."""
        from sparc_es.engines.lucene import LuceneEngine

        hits = self.batch_search([("q", question)], k=k)["q"]
        store = self.sparc.store if isinstance(self.sparc, LuceneEngine) else None
        found = store.get([h.id for h in hits]) if store is not None else {}
        return [h.located(found.get(h.id)) for h in hits]

    def describe(self) -> Description:
        weighed = self.method is HybridMethod.MINMAX
        return Description(self.sparc.describe().engine, self.method, self.bm25_weight if weighed else None)

    def close(self) -> None:
        for engine in (self.sparc, self.bm25):
            engine.close()
