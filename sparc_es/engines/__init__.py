"""Search engines behind one contract: :class:`Engine` returns plain :class:`Hit` lists, never raw
engine objects, and :func:`open_engine` is the one way to open one.

    lucene   a sparc-es Lucene impact index (``lucene.py``), the embedded default
    es       a sparc-es index in Elasticsearch (``elastic/``)
    bm25     the Lucene BM25 index that ``sparc-es index`` builds beside the impact index (``bm25.py``)

plus :class:`~sparc_es.engines.hybrid.HybridEngine` (BM25 fused with SPARC) on top of the first, and
:class:`~sparc_es.engines.exact.ExactEngine`, the in-memory reference scorer of the tests and
evaluations. Building is one verb everywhere: ``lucene.build_index`` and ``elastic.build_index``.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import SparcError, choice
from .base import Engine, EngineKind, Hit, Topics

__all__ = ["Engine", "EngineKind", "Hit", "Topics", "open_engine"]


def open_engine(kind: EngineKind | str = EngineKind.LUCENE, index: str | Path | None = None, *,
                hybrid: str | None = None, hybrid_weight: float | None = None, connection=None,
                es_index: str | None = None,
                tokenizer: str | Path | None = None, query_mode: str = "rank_feature",
                bm25_weight: float = 0.0) -> Engine:
    """Open a search engine.

    ``index`` is the index folder (Lucene, BM25). ``hybrid`` (``rrf`` or ``sum``, BM25's share of a
    sum is ``hybrid_weight``) fuses the Lucene index with the BM25 index built beside it.
    Elasticsearch takes a :class:`~sparc_es.engines.elastic.Connection`, the index name, the folder
    whose question tokenizer to use (default: ``index``, else the default model's), the query mode
    and an optional BM25 clause weight.
    """
    kind = choice(EngineKind, kind, "engine")
    if kind is EngineKind.ES:
        if hybrid:
            raise SparcError("--hybrid fuses with the Lucene BM25 index; with --engine es use --bm25-weight "
                             "(a BM25 clause in the same Elasticsearch query)")
        from ..query import QueryEncoder
        from .elastic import ElasticEngine

        if connection is None or not es_index:
            raise SparcError("the Elasticsearch engine needs a connection and an index name")
        return ElasticEngine(connection.client(), es_index, QueryEncoder.load(tokenizer or index or "default"),
                             mode=query_mode, bm25_weight=bm25_weight)
    if index is None:
        raise SparcError(f"the {kind.value} engine needs an index folder (--index DIR)")
    if kind is EngineKind.BM25:
        if hybrid:
            raise SparcError("--hybrid fuses SPARC with BM25; it needs --engine lucene")
        from .bm25 import LuceneBM25

        return LuceneBM25.beside(index)
    if hybrid:
        from .hybrid import BM25_WEIGHT, HybridEngine

        return HybridEngine.open(index, hybrid, BM25_WEIGHT if hybrid_weight is None else hybrid_weight)
    from .lucene import LuceneEngine

    return LuceneEngine(index)
