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

from collections.abc import Callable
from pathlib import Path

from ..errors import SparcError, choice
from .base import Engine, EngineKind, Hit, Topics

__all__ = ["Engine", "EngineKind", "Hit", "Topics", "open_engine"]


def open_engine(kind: EngineKind | str = EngineKind.LUCENE, index: str | Path | None = None, *,
                hybrid: str | None = None, hybrid_weight: float | None = None, connection=None,
                es_index: str | None = None, tokenizer: str | Path | None = None, query_mode: str = "rank_feature",
                notice: Callable[[str], None] | None = None) -> Engine:
    """Open a search engine.

    ``index`` is the index folder (Lucene, BM25). Elasticsearch takes a
    :class:`~sparc_es.engines.elastic.Connection`, the index name, the folder whose question
    tokenizer to use (default: ``index``, else the default model's) and the query mode.

    ``hybrid`` fuses SPARC with BM25 over the same sentences, the same way on both SPARC engines
    (:mod:`~sparc_es.engines.hybrid`): on Lucene with the BM25 index built beside the impact index,
    on Elasticsearch with a ``match`` query on the index's text. ``sum`` (BM25's share is
    ``hybrid_weight``, default :data:`~sparc_es.engines.hybrid.BM25_WEIGHT`) or ``rrf``; ``none`` or
    None: SPARC alone; ``default``: :data:`~sparc_es.engines.hybrid.DEFAULT_METHOD` where the index
    can be searched by BM25, else SPARC alone, said through ``notice``. A ``hybrid_weight`` without
    a sum to weigh is an error, never ignored.
    """
    from .hybrid import BM25_WEIGHT, DEFAULT_METHOD, HybridEngine, HybridMethod

    kind = choice(EngineKind, kind, "engine")
    default = hybrid == "default"
    method = None if hybrid in (None, "none", "default") else choice(HybridMethod, hybrid, "hybrid method")
    if kind is EngineKind.BM25:
        if hybrid not in (None, "default") or hybrid_weight is not None:
            raise SparcError("--hybrid and --hybrid-weight fuse SPARC with BM25: they apply to --engine lucene "
                             "and es, not to the BM25 engine")
    elif method is not None and method is not HybridMethod.SUM and hybrid_weight is not None:
        raise SparcError(f"--hybrid-weight is BM25's share of a hybrid sum: it does not apply to --hybrid "
                         f"{method.value}")
    elif hybrid in (None, "none") and hybrid_weight is not None:
        raise SparcError("--hybrid-weight is BM25's share of a hybrid sum: it needs --hybrid sum (or the default "
                         "hybrid), not SPARC alone")
    weight = BM25_WEIGHT if hybrid_weight is None else hybrid_weight

    def fallback(why: str) -> None:  # the default hybrid where the index cannot have it
        if hybrid_weight is not None:
            raise SparcError(f"--hybrid-weight weighs the default hybrid, but {why}")
        if notice is not None:
            notice(f"{why}: searching with SPARC alone, not the default hybrid")

    if kind is EngineKind.ES:
        from ..query import QueryEncoder
        from .elastic import ElasticEngine

        if connection is None or not es_index:
            raise SparcError("the Elasticsearch engine needs a connection and an index name")
        sparc = ElasticEngine(connection.client(), es_index, QueryEncoder.load(tokenizer or index or "default"),
                              mode=query_mode)
        try:
            if default and sparc.text_searchable:
                method = DEFAULT_METHOD
            elif default:
                fallback(f"index {es_index!r} has no searchable text field for BM25")
            return HybridEngine(sparc, sparc.bm25(), method, weight) if method is not None else sparc
        except BaseException:
            sparc.close()
            raise
    if index is None:
        raise SparcError(f"the {kind.value} engine needs an index folder (--index DIR)")
    from .bm25 import LuceneBM25

    if kind is EngineKind.BM25:
        return LuceneBM25.beside(index)
    if default and LuceneBM25.exists_beside(index):
        method = DEFAULT_METHOD
    elif default:
        fallback(f"{index} has no BM25 index beside it (built with --no-bm25)")
    if method is not None:
        return HybridEngine.open(index, method, weight)
    from .lucene import LuceneEngine

    return LuceneEngine(index)
