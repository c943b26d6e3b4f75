"""Search: :class:`ElasticEngine`, a sparc-es index in Elasticsearch as an :class:`~sparc_es.engines.base.Engine`.

A question becomes the dot-product query of :func:`~sparc_es.engines.elastic.documents.query_body`
(``_msearch`` for many); scores are divided by the index's quantisation factor, as the Lucene
engine's are.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...errors import EngineError, choice
from ...query import QueryEncoder
from ..base import Hit
from .connection import _cluster_errors, _redacted, check_server
from .documents import QueryMode, query_body


class ElasticEngine:
    """Search a sparc-es index in Elasticsearch with the question as a dot-product query."""

    def __init__(self, client, index_name: str, queries: QueryEncoder,
                 mode: QueryMode | str = QueryMode.RANK_FEATURE, bm25_weight: float = 0.0) -> None:
        """``queries``: the question encoder (the tokenizer of the encoded folder that was loaded);
        ``bm25_weight`` > 0 adds a BM25 ``match`` clause on the text with that boost (a hybrid;
        scores are then no longer pure SPARC sums)."""
        self.client = client
        self.index = index = index_name
        self.mode = choice(QueryMode, mode, "query mode")
        self.bm25_weight = bm25_weight
        self.queries = queries
        check_server(client)
        try:
            meta = client.indices.get_mapping(index=index)[index]["mappings"].get("_meta", {}).get("sparc_es")
        except Exception as e:
            raise EngineError(f"cannot read index {index!r}: {_redacted(str(e))}") from None
        if not meta:
            raise EngineError(f"index {index!r} was not made by sparc-es (no _meta.sparc_es in its mapping)")
        self.factor = float(meta["factor"])

    def body(self, question: str, k: int = 10) -> dict | None:
        """The request body for ``question`` (what ``sparc-es query-dsl`` prints); None when the
        question has no token to score and no BM25 clause."""
        bag = self.queries.bag(question)
        if not bag and not self.bm25_weight:
            return None
        return query_body(bag, size=k, mode=self.mode, bm25_text=question, bm25_weight=self.bm25_weight)

    def search(self, question: str, k: int = 10) -> list[Hit]:
        body = self.body(question, k)
        if body is None:
            return []
        with _cluster_errors(f"searching {self.index!r}", "; raise --es-timeout if the cluster is slow"):
            response = self.client.search(index=self.index, **body)
        return self._hits(response)

    def batch_search(self, topics: Iterable[tuple[str, str]], k: int = 1000, threads: int = 1) -> dict[str, list[Hit]]:
        """Many questions through ``_msearch``, 50 per request."""
        topics = list(topics)
        results: dict[str, list[Hit]] = {}
        for start in range(0, len(topics), 50):
            part = [(qid, self.body(q, k)) for qid, q in topics[start: start + 50]]
            asked = [(qid, body) for qid, body in part if body is not None]
            results.update((qid, []) for qid, _ in part)
            if not asked:
                continue
            searches = []
            for _, body in asked:
                searches += [{"index": self.index}, body]
            with _cluster_errors(f"searching {self.index!r}", "; raise --es-timeout if the cluster is slow"):
                responses = self.client.msearch(searches=searches)["responses"]
            for (qid, _), response in zip(asked, responses):
                if "error" in response:
                    raise EngineError(f"query {qid} failed: {response['error']}")
                results[qid] = self._hits(response)
        return results

    def _hits(self, response) -> list[Hit]:
        hits = []
        for h in response["hits"]["hits"]:
            src = h.get("_source", {})
            hits.append(Hit(id=h["_id"], score=h["_score"] / self.factor, text=src.get("text", ""),
                            doc=src.get("doc"), start=src.get("start"), end=src.get("end")))
        return hits

    def close(self) -> None:
        self.client.close()
