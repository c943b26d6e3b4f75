"""Search: :class:`ElasticEngine`, a sparc-es index in Elasticsearch as an :class:`~sparc_es.engines.base.Engine`,
and :class:`ElasticBM25`, BM25 over the same index's ``text`` (the other half of a client-side fusion).

A question becomes one ``_search`` (for many questions too, one each): by default the one-request
sum of SPARC and the stored BM25 terms (:meth:`ElasticEngine.use_blend`, scores fractions of the
question's attainable score); SPARC alone, the dot-product query of
:func:`~sparc_es.engines.elastic.documents.query_body`, with scores divided by the index's
quantisation factor, as the Lucene engine's are. ``--hybrid minmax`` and ``rrf`` also send the BM25
``match`` query of :func:`~sparc_es.engines.elastic.documents.bm25_body` and fuse the two lists
client-side, with the Lucene engine's own :class:`~sparc_es.engines.hybrid.HybridEngine`.

What the engine reads of the index's mapping (factor, query mode, the sum's maxima) is read again
when the index is rebuilt under a long-lived engine (``serve``): :meth:`ElasticEngine._current`
compares the build id the loader records, at most every :data:`RECHECK` seconds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable

from sparc_es.engines.base import Closing, Description, Engine, EngineKind, Hit, HybridMethod, check_k, check_topics
from sparc_es.engines.blend import BM25_SHARE, Blend
from sparc_es.engines.elastic.connection import _cluster_errors, check_index_name, check_server
from sparc_es.engines.elastic.documents import (
    BLEND_META,
    BUILD_META,
    FIELD,
    TERMS_META,
    QueryMode,
    bm25_body,
    build_id,
    index_mappings,
    query_body,
    same_bm25,
    text_searchable,
    weights_mode,
)
from sparc_es.errors import EngineError, choice, option
from sparc_es.model.query import QueryEncoder

# said after a search that timed out (only then: a rejected query is not slow)
_SLOW = "; raise --es-timeout if the cluster is slow"


# Seconds between two checks that the index was not rebuilt under a long-lived engine (serve). A
# check is one small request (the mapping's build id, filtered by the server), so a question costs
# one _search and, at most once in this many seconds, that check besides: a rebuild is noticed
# within a few seconds without doubling the requests of a busy server. A sum whose scores come back
# above 1 (maxima older than the documents) checks at once.
RECHECK = 5.0


class ElasticEngine(Closing, Engine):
    """Search a sparc-es index in Elasticsearch with the question as a dot-product query."""

    recheck: float | None = RECHECK  # seconds between checks that the index was not rebuilt; None: never

    def __init__(self, client, index_name: str, queries: QueryEncoder, mode: QueryMode | str | None = None) -> None:
        """``queries``: the question encoder (the tokenizer of the encoded folder that was loaded);
        ``mode``: how to send a question, by default the one the index's weights field takes."""
        self.client = client
        self.index = check_index_name(index_name)  # before asking: a bad name was "no index 'Bad Name'"
        self.asked_mode = None if mode is None else choice(QueryMode, mode, "query mode")
        self.queries = queries
        # the one-request sum and BM25's share in it (use_blend), or SPARC alone; a run tag and the server say it
        self.method: HybridMethod | None = None
        self.bm25_weight: float | None = None
        check_server(client)
        self._read()

    def _read(self) -> None:
        """Read what the index's mapping says: its quantisation factor, the query mode its weights
        field takes, the sum's maxima, its text's BM25, and the id of the build that wrote them."""
        index = self.index
        with _cluster_errors(f"reading the mapping of index {index!r}"):
            mappings = index_mappings(self.client.indices.get_mapping(index=index), index)
        meta = mappings.get("_meta")
        meta = meta if isinstance(meta, dict) else {}
        identity = meta.get("sparc_es")
        if identity is None:
            raise EngineError(f"index {index!r} was not made by sparc-es (no _meta.sparc_es in its mapping)")
        if not isinstance(identity, dict):  # mappings/sparc.json's placeholder: created, never loaded
            raise EngineError(f"index {index!r} was never loaded (its _meta.sparc_es is not filled in): load an "
                              f"encoded folder into it with sparc-es index --engine es --es-index {index}")
        try:
            self.factor = float(identity["factor"])
        except (KeyError, TypeError, ValueError):
            raise EngineError(f"index {index!r} has an unreadable _meta.sparc_es (no quantisation factor): load "
                              "it again with sparc-es index --engine es --recreate") from None
        fits = weights_mode(mappings)
        if fits is None:
            raise EngineError(f"index {index!r} has no {FIELD!r} field of type rank_features or sparse_vector")
        if self.asked_mode is not None and self.asked_mode is not fits:
            flag = option("--query-mode", "query_mode")
            raise EngineError(f"{flag} {self.asked_mode.value} does not fit index {index!r}: its weights are "
                              f"mapped for {fits.value} queries; leave {flag} out (it follows the mapping)")
        self.mode = fits
        self.text_searchable = text_searchable(mappings)  # whether BM25 (a hybrid) can search its text
        self.same_bm25 = same_bm25(mappings)  # whether that BM25 is the Lucene BM25 index's
        blended = meta.get(BLEND_META)
        # the one-request sum's maxima, where the index stores BM25 terms (see use_blend)
        try:
            self.blend = Blend.from_json(json.loads(blended), f"index {index!r}") if blended else None
        except (TypeError, ValueError):
            raise EngineError(f"index {index!r} has an unreadable _meta.{BLEND_META}: load it again with sparc-es "
                              "index --engine es --recreate") from None
        self.stored_blend = self.blend  # as the Lucene engine names what the index stores, searched or not
        self.loading = not blended and TERMS_META in meta  # created by a load that has not finished
        self.build = build_id(meta)
        self.identity = identity
        built = meta.get(BUILD_META)
        self.built = built if isinstance(built, dict) else {}
        corpus = built.get("corpus") if isinstance(built, dict) else None
        # the corpus paths the loaded folder was encoded from: where a hit's document is read to place it
        self.corpus: list[str] = [c for c in corpus if isinstance(c, str)] if isinstance(corpus, list) else []
        self._checked = time.monotonic()

    def record(self) -> dict:
        """What the index's mapping records of its build (the Recorded protocol; ``/health`` shows it)."""
        documents = self.built.get("documents")
        at = self.built.get("at")
        return {"sentences": documents if isinstance(documents, int) else None,
                "fingerprint": self.identity.get("fingerprint"), "factor": self.factor,
                "generation": f"{self.build or '-'}@{at or '-'}" if self.build or at else None}

    def holds(self, doc: str) -> bool:
        """Whether the index holds sentences of ``doc`` (a count of its ``doc`` keyword)."""
        with _cluster_errors(f"looking for document {doc!r} in index {self.index!r}"):
            return self.client.count(index=self.index, query={"term": {"doc": doc}})["count"] > 0

    def _current(self, force: bool = False) -> bool:
        """Read the mapping again when the index was rebuilt (or updated) since it was read: its
        build id changed. Checked at most once every :attr:`recheck` seconds (see :data:`RECHECK`),
        or now with ``force``. Whether it was read again."""
        if self.recheck is None or (not force and time.monotonic() - self._checked < self.recheck):
            return False
        with _cluster_errors(f"reading the mapping of index {self.index!r}"):
            response = self.client.indices.get_mapping(index=self.index,
                                                       filter_path=f"*.mappings._meta.{BUILD_META}.id")
        self._checked = time.monotonic()
        if build_id(index_mappings(response, self.index).get("_meta") or {}) == self.build:
            return False
        self._read()
        return True

    def _ready(self) -> None:
        """Refuse a sum when the index (read again) holds no maxima for it: a load under way, or an
        index rebuilt by an older sparc-es."""
        if self.method is HybridMethod.SUM and self.blend is None:
            if self.loading:
                raise EngineError(f"index {self.index!r} is being loaded (its build is not recorded yet): search it "
                                  "when the load has finished")
            self.use_blend(self.bm25_weight)  # says why

    def use_blend(self, bm25_share: float = BM25_SHARE) -> None:
        """Search with the one-request sum of SPARC and BM25 (:mod:`~sparc_es.engines.blend`), BM25's
        share ``bm25_share``; scores become fractions of each question's attainable score."""
        if self.blend is None:
            raise EngineError(f"index {self.index!r} stores no BM25 terms (loaded by an older sparc-es); load it "
                              "again with sparc-es index --engine es --recreate for the SPARC + BM25 sum")
        self.method, self.bm25_weight = HybridMethod.SUM, bm25_share

    def weights(self, question: str) -> dict[str, float]:
        """The question as the engine is asked it: ``{feature: clause weight}``."""
        bag = self.queries.bag(question)
        return bag if self.method is not HybridMethod.SUM else self.blend.weights(question, bag, self.bm25_weight)

    def body(self, question: str, k: int = 10) -> dict | None:
        """The request body for ``question`` (what ``sparc-es query-dsl`` prints); None when the
        question has no token to score."""
        bag = self.weights(question)
        return query_body(bag, size=k, mode=self.mode) if bag else None

    def bm25(self, notice: Callable[[str], None] | None = None) -> ElasticBM25:
        """BM25 over this index's ``text`` field, through the same client (the BM25 side of a
        client-side fusion); ``notice`` hears when that BM25 is not the Lucene BM25 index's."""
        if not self.text_searchable:
            raise EngineError(f"index {self.index!r} has no searchable text field for BM25; search it with "
                              "--hybrid none (SPARC alone)")
        if not self.same_bm25 and notice is not None:
            notice(f"index {self.index!r} was created by an older sparc-es: its BM25 is Elasticsearch's default "
                   "(standard analyser, k1 1.2, b 0.75), not the Lucene BM25 index's; --recreate it to match")
        return ElasticBM25(self.client, self.index)

    def search(self, question: str, k: int = 10) -> list[Hit]:
        return self._ask(question, k, f"searching {self.index!r}")

    def _ask(self, question: str, k: int, doing: str) -> list[Hit]:
        """One question's hits, the mapping read again first when the index was rebuilt; a sum that
        scores above 1 (maxima older than the documents) is asked again after a check."""
        check_k(k)
        if self.closed:
            raise EngineError("this engine is closed: open it again to search the index")
        for attempt in (0, 1):
            self._current(force=attempt == 1)
            self._ready()
            body = self.body(question, k)
            if body is None:
                return []
            with _cluster_errors(doing, slow=_SLOW):
                response = self.client.search(index=self.index, **body)
            hits = self._hits(response)
            if attempt or self.integers or self.recheck is None or not any(h.score > 1 + 1e-4 for h in hits):
                return hits
        return hits

    def batch_search(self, topics: Iterable[tuple[str, str]], k: int = 1000, threads: int = 1) -> dict[str, list[Hit]]:
        """Many questions, one ``_search`` each, as :meth:`search` asks them: a slow cluster's
        timeout bounds one question, never a batch of them (``threads`` is not used: the cluster
        searches in parallel)."""
        return {qid: self._ask(question, k, f"searching {self.index!r} for question {qid}")
                for qid, question in check_topics(topics, threads)}

    def _hits(self, response) -> list[Hit]:
        hits = []
        for h in response["hits"]["hits"]:
            src = h.get("_source", {})
            sort = h.get("sort") or []
            order = sort[1] if len(sort) > 1 and isinstance(sort[1], int) and sort[1] < 2**31 else None
            score, impact = h["_score"], None
            if self.integers:  # impacts: integers, as Lucene's engine gives them
                impact = int(round(score))
                score = impact / self.factor
            hits.append(Hit(id=h["_id"], score=score, impact=impact, text=src.get("text", ""), doc=src.get("doc"),
                            start=src.get("start"), end=src.get("end"), code=src.get("code"),
                            context=src.get("context"), order=order))
        if self.integers:
            # The cluster sums floats and can land one ulp under the integer, which would put a hit
            # after its ties: the page re-sorted by (integer, place), as Lucene's engine does.
            hits.sort(key=lambda h: (-h.impact, h.order if h.order is not None else 2**31))
        return hits

    @property
    def integers(self) -> bool:
        """Whether scores are sums of integer impacts (SPARC alone), not the one-request sum's fractions."""
        return self.method is not HybridMethod.SUM

    def describe(self) -> Description:
        return Description(EngineKind.ES.value, self.method, self.bm25_weight)

    closed = False

    def close(self) -> None:
        self.closed = True
        self.client.close()


class ElasticBM25(ElasticEngine):
    """BM25 over the ``text`` field of an index, as the cluster scores a ``match`` query (its
    analyser and similarity, not the Lucene BM25 index's: README, "Elasticsearch"). Made by
    :meth:`ElasticEngine.bm25`; it shares that engine's client, which that engine closes."""

    factor = 1.0  # BM25 scores as the cluster gives them
    method = None
    integers = False
    recheck = None  # nothing of the mapping is read

    def __init__(self, client, index_name: str) -> None:  # the mapping was read by the SPARC engine
        self.client, self.index = client, index_name

    def body(self, question: str, k: int = 10) -> dict | None:
        return bm25_body(question, size=k) if question.strip() else None

    def describe(self) -> Description:
        return Description("es-bm25")

    def close(self) -> None:
        pass

