"""Search engines behind one contract: :class:`Engine` returns plain :class:`Hit` lists, never raw
engine objects, and :func:`open_engine` is the one way to open one.

    lucene   a sparc-es Lucene impact index (``lucene.py``), the embedded default
    es       a sparc-es index in Elasticsearch (``elastic/``)
    bm25     the Lucene BM25 index that ``sparc-es index`` builds beside the impact index (``bm25.py``)

plus :class:`~sparc_es.engines.hybrid.HybridEngine` (BM25 fused with SPARC) on top of the first two, and
:class:`~sparc_es.engines.exact.ExactEngine`, the in-memory reference scorer of the tests and
evaluations. Building is one verb everywhere: ``lucene.build_index`` and ``elastic.build_index``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from sparc_es import notices
from sparc_es.engines.base import Engine, EngineKind, Hit, Topics
from sparc_es.errors import SparcError, choice, option

__all__ = ["Engine", "EngineKind", "Hit", "Topics", "open_engine"]


def open_engine(kind: EngineKind | str = EngineKind.LUCENE, index: str | Path | None = None, *,
                hybrid: str | None = "default", hybrid_weight: float | None = None, connection=None,
                es_index: str | None = None, tokenizer: str | Path | None = None, query_mode: str | None = None,
                notice: Callable[[str], None] | None = None) -> Engine:
    """Open a search engine.

    ``index`` is the index folder (Lucene, BM25). Elasticsearch takes a
    :class:`~sparc_es.engines.elastic.Connection`, the index name, the folder whose question
    tokenizer to use (default: ``index``, else the default model's) and the query mode (default:
    the one the index's weights field takes).

    ``hybrid`` (:mod:`~sparc_es.engines.hybrid`, the same on both SPARC engines): ``sum``, SPARC and
    BM25 summed by the engine in one request (BM25's share ``hybrid_weight``, default
    :data:`~sparc_es.engines.hybrid.BM25_WEIGHT`); ``minmax`` or ``rrf``, two searches fused here;
    ``none`` or None, SPARC alone; ``default`` (the default, as ``sparc-es search``'s),
    :data:`~sparc_es.engines.hybrid.DEFAULT_METHOD` where the index stores BM25 terms, else the
    ``minmax`` fusion where it can be searched by BM25 (an index built by an older sparc-es), else
    SPARC alone, said through ``notice`` (default: the library's notices, :mod:`sparc_es.notices`).
    A ``hybrid_weight`` without a sum to weigh is an error, never ignored.
    """
    from sparc_es.engines.blend import OLDER_TITLES
    from sparc_es.engines.hybrid import DEFAULT_METHOD, HybridChoice, HybridEngine, HybridMethod

    if notice is None:  # the library's notices, through logging (sparc_es.notices)
        def notice(message: str) -> None:
            notices.notice("search", message)
    kind = choice(EngineKind, kind, "engine")
    for name, value in (("index", index), ("tokenizer", tokenizer)):
        if value is not None and not isinstance(value, str | os.PathLike):
            raise SparcError(f"{name} is a folder's path (str or Path), not {type(value).__name__} {value!r}")
    if kind is not EngineKind.ES:  # Elasticsearch's options, never ignored on another engine
        given = [name for name, value in (("connection", connection), ("es_index", es_index),
                                          ("tokenizer", tokenizer), ("query_mode", query_mode)) if value is not None]
        if given:
            raise SparcError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to the Elasticsearch "
                             f"engine ('es'), not to {kind.value!r}")
    asked = HybridChoice.of(kind, hybrid, hybrid_weight)
    method, weight, default = asked.method, asked.weight, asked.default

    def fallback(why: str, searchable: bool) -> HybridMethod | None:
        """What the default becomes on an index without BM25 terms: the two-search fusion where
        the index can be searched by BM25, else SPARC alone."""
        if searchable:
            notice(f"{why}: fusing two searches client-side ({HybridMethod.MINMAX.value}); rebuild the index "
                   "with this sparc-es for the one-request default")
            return HybridMethod.MINMAX
        if asked.weighed:
            raise SparcError(f"{option('--hybrid-weight', 'hybrid_weight')} weighs the default hybrid, but {why} and "
                             "it cannot be searched by BM25")
        notice(f"{why} and it cannot be searched by BM25: searching with SPARC alone, not the default hybrid")
        return None

    if kind is EngineKind.ES:
        from sparc_es.engines.elastic import Connection, ElasticEngine
        from sparc_es.model.query import QueryEncoder

        if connection is None or not es_index:
            raise SparcError("the Elasticsearch engine needs a connection and an index name")
        if not isinstance(connection, Connection):  # an Elasticsearch client, say, as elastic.build_index takes
            raise SparcError(f"connection is a sparc_es.engines.elastic.Connection (Connection(url), or "
                             f"Connection.from_env()), not {type(connection).__name__}")
        queries = QueryEncoder.load(tokenizer or index or "default")
        sparc = ElasticEngine(connection.client(), es_index, queries, mode=query_mode)
        try:
            if default:
                method = DEFAULT_METHOD if sparc.blend is not None else fallback(
                    f"index {es_index!r} stores no BM25 terms", sparc.text_searchable)
            if method is HybridMethod.SUM:
                sparc.use_blend(weight)
                if not sparc.blend.titles:
                    notice(OLDER_TITLES.format(where=f"index {es_index!r}",
                                               how="sparc-es index --engine es --recreate"))
                return sparc
            return HybridEngine(sparc, sparc.bm25(notice), method, weight) if method is not None else sparc
        except BaseException:
            sparc.close()
            raise
    if index is None:
        raise SparcError(f"the {kind.value} engine needs an index folder ({option('--index DIR', 'index')})")
    from sparc_es.engines.blend import Blend
    from sparc_es.engines.bm25 import LuceneBM25
    from sparc_es.engines.lucene import LuceneEngine, lucene_manifest

    lucene_manifest(Path(index))  # a folder that is not an index says so first, before any notice about it
    if kind is EngineKind.BM25:
        return LuceneBM25.beside(index)
    if default:
        method = DEFAULT_METHOD if Blend.read(index) is not None else fallback(
            f"{index} stores no BM25 terms (built by an older sparc-es)", LuceneBM25.exists_beside(index))
    if method is HybridMethod.SUM:
        engine = LuceneEngine(index, bm25_share=weight)
        if not engine.blend.titles:
            notice(OLDER_TITLES.format(where=str(index), how=option("sparc-es index --overwrite",
                                                                      "build_index(..., overwrite=True)")))
        return engine
    if method is not None:
        return HybridEngine.open(index, method, weight)
    return LuceneEngine(index)
