"""Elasticsearch engine: SPARC weights in a ``rank_features`` field, questions as dot-product queries.

One concern per module; every public name is importable from here (``from
sparc_es.engines.elastic import build_index``):

    connection   :class:`Connection` (URL checks, secrets never shown), the retrying transport,
                 cluster errors as one line, :func:`check_server`, :func:`check_index_name`, :func:`scan`
    documents    feature names, :func:`es_features`, the :func:`mapping` and the weights' identity
                 in it (:func:`same_weights`), :func:`query_body`, :func:`bm25_body`, :class:`QueryMode`,
                 :class:`FieldType`
    loader       :func:`build_index`: an encoded folder streamed into an index, resumable, incremental
    source       :class:`ElasticSource`: documents of a cluster as a corpus (``encode --from-es``)
    engine       :class:`ElasticEngine`: search; :class:`ElasticBM25`: BM25 on the same index's text

* Token names are made safe for ES in :func:`feature_name` (ES rejects ``.`` in feature names;
  BERT's vocabulary has such tokens) and read back with :func:`token_name`.
* Stored values are the same integer impacts as the Lucene index (``round(f * factor)``), dropped
  when not positive in :func:`es_features` (ES requires strictly positive values). ES keeps 9
  significant bits of each value, so impacts below 512 are stored exactly; larger ones lose at
  most 0.4%.
* A question is ``bool.should`` of ``rank_feature`` clauses with ``"linear": {}`` and ``boost`` =
  the token's count: the score is the dot product (the default ``saturation`` function is not).
  ``sparse_vector`` with a ``query_vector`` is the alternative on servers that have it (8.15+),
  and needs the field mapped as ``sparse_vector``.
* Loading streams records through the official client's ``streaming_bulk`` (chunks, retries with
  backoff on 429), with document ids = sentence ids so a re-run replaces rather than duplicates;
  failed items go to a JSONL report and the run ends with a check that the index holds exactly
  the folder's ids.
* Every request of the client :meth:`Connection.client` makes is retried with backoff on
  connection errors, timeouts and 429/502/503/504 (:func:`retry_delays`); no message shows the
  password of a URL (:func:`redact_url`).

Supported servers: Elasticsearch 8.x and 9.x, with client 8.x or 9.x (a 9.x client asks an 8.x server
for REST API version 8, which both answer: :func:`~sparc_es.engines.elastic.connection.check_server`).
"""

from __future__ import annotations

from sparc_es.engines.elastic.connection import (
    MAX_BACKOFF,
    SUPPORTED_MAJORS,
    Connection,
    check_index_name,
    check_server,
    redact_url,
    retry_delays,
    scan,
)
from sparc_es.engines.elastic.documents import (
    BASE_MAPPING,
    FIELD,
    SETTINGS,
    FieldType,
    QueryMode,
    bm25_body,
    es_features,
    feature_name,
    mapping,
    query_body,
    same_weights,
    text_searchable,
    token_name,
)
from sparc_es.engines.elastic.engine import ElasticBM25, ElasticEngine
from sparc_es.engines.elastic.loader import build_index, id_differences
from sparc_es.engines.elastic.source import ElasticSource

__all__ = [
    "BASE_MAPPING", "FIELD", "MAX_BACKOFF", "SETTINGS", "SUPPORTED_MAJORS", "Connection", "ElasticBM25",
    "ElasticEngine", "ElasticSource", "FieldType", "QueryMode", "bm25_body", "build_index", "check_index_name",
    "check_server", "es_features", "feature_name", "id_differences", "mapping", "query_body", "redact_url",
    "retry_delays", "same_weights", "scan", "text_searchable", "token_name",
]
