"""What an index holds and how it is asked: feature names, the mapping, the weights' identity, the query.

* Token names are made safe for ES in :func:`feature_name` (ES rejects ``.`` in feature names;
  BERT's vocabulary has such tokens) and read back with :func:`token_name`.
* Stored values are the same integer impacts as the Lucene index (``round(f * factor)``), dropped
  when not positive in :func:`es_features` (ES requires strictly positive values). ES keeps 9
  significant bits of each value, so impacts below 512 are stored exactly; larger ones lose at
  most 0.4%.
* The mapping's ``_meta.sparc_es`` names the weights (:func:`_identity`); weights of another model,
  K, factor or IDF are never mixed into an index (:func:`same_weights`, :func:`_differs`).
* A question is ``bool.should`` of ``rank_feature`` clauses with ``"linear": {}`` and ``boost`` =
  the token's count: the score is the dot product (the default ``saturation`` function is not).
  ``sparse_vector`` with a ``query_vector`` is the alternative on servers that have it (8.15+),
  and needs the field mapped as ``sparse_vector`` (:func:`query_body`).
* BM25 is a second request, a ``match`` query on the ``text`` field (:func:`bm25_body`): a hybrid
  fuses the two lists client-side (:mod:`sparc_es.engines.hybrid`), as on the Lucene engine.

No cluster is needed here: these are plain values and functions.
"""

from __future__ import annotations

import copy
import json
import math
from enum import Enum

from sparc_es.errors import choice
from sparc_es.layout.manifest import Manifest

FIELD = "weights"
BLEND_META = "sparc_es_blend"  # the mapping's _meta key of the one-request sum's maxima (blend.py)
# The mapping's _meta key saying how the documents' BM25 terms are made (terms_analysis()): written
# when the index is created, before any document, so that a load cut off before its end (no
# BLEND_META yet) is told from an index loaded by an older sparc-es (no BM25 terms at all).
TERMS_META = "sparc_es_terms"
BUILD_META = "sparc_es_build"  # what the index was last built from, and the build's id


class QueryMode(str, Enum):
    """How a question is sent: ``rank_feature`` clauses (linear, boost = count), or one
    ``sparse_vector`` query (ES 8.15+, field mapped as ``sparse_vector``)."""

    RANK_FEATURE = "rank_feature"
    SPARSE_VECTOR = "sparse_vector"


class FieldType(str, Enum):
    """How the weights field is mapped."""

    RANK_FEATURES = "rank_features"
    SPARSE_VECTOR = "sparse_vector"


def feature_name(token: str) -> str:
    """Reversible ES-safe name for a token: ``%`` -> ``%25`` first, then ``.`` -> ``%2E``."""
    return token.replace("%", "%25").replace(".", "%2E")


def token_name(feature: str) -> str:
    """Inverse of :func:`feature_name`."""
    return feature.replace("%2E", ".").replace("%25", "%")


def es_features(vector: dict[str, float]) -> dict[str, float]:
    """The ``rank_features`` value of one sentence: safe names, strictly positive values only."""
    return {feature_name(t): float(w) for t, w in vector.items() if w > 0}


# The BM25 of a `match` on `text` (the client-side fusions, a user's own queries) is the Lucene
# BM25 index's: Lucene's English analysis (the `english` analyser: possessives, stop words, Porter)
# and Pyserini's k1 and b, as a custom similarity in the index settings.
SIMILARITY = "sparc_bm25"
SETTINGS = {"index": {"similarity": {SIMILARITY: {"type": "BM25", "k1": 0.9, "b": 0.4}}}}
TEXT = {"type": "text", "analyzer": "english", "similarity": SIMILARITY}

BASE_MAPPING = {
    "dynamic": "strict",
    "properties": {
        "text": TEXT,
        "context": {"type": "text", "index": False},  # shown with a hit, not searched
        "code": {"type": "text", "index": False},  # the code block the sentence leads into: shown, not searched
        "doc": {"type": "keyword"},
        "start": {"type": "integer"},
        "end": {"type": "integer"},
        "hash": {"type": "keyword", "index": False},  # of text and context: an update skips unchanged sentences
        "order": {"type": "integer", "index": False},  # the place in the encoded folder: ties in score go to the lower
        FIELD: {"type": "rank_features"},
    },
}


def mapping(manifest: Manifest | None = None, field_type: FieldType | str = FieldType.RANK_FEATURES) -> dict:
    """The index mapping (also in ``mappings/sparc.json``), ``_meta`` describing the encoded weights."""
    body = copy.deepcopy(BASE_MAPPING)
    body["properties"][FIELD]["type"] = choice(FieldType, field_type, "field type").value
    if manifest is not None:
        body["_meta"] = {"sparc_es": _identity(manifest), TERMS_META: json.dumps(terms_analysis(), sort_keys=True)}
    return body


def terms_analysis(record: dict | None = None) -> dict:
    """How BM25 terms are made (k1, b, scale, section titles read): this sparc-es's, or those of
    ``record`` (a :data:`BLEND_META` or :data:`TERMS_META` value, parsed; both are JSON text, as a
    server may return a float of ``_meta`` one rounding step off). Documents whose terms
    were made otherwise cannot be kept by a load: their terms would not be rewritten."""
    from sparc_es.engines import blend

    if record is None:
        return {"k1": blend.K1, "b": blend.B, "scale": blend.SCALE, "titles": True}
    return {key: record.get(key) for key in ("k1", "b", "scale", "titles")}


def weights_mode(index_mapping: dict) -> QueryMode | None:
    """The query mode an index's weights field takes (``get_mapping``'s ``mappings``): ``rank_feature``
    clauses for ``rank_features``, one ``sparse_vector`` query for ``sparse_vector``; None when it has
    no such field."""
    field = (index_mapping.get("properties") or {}).get(FIELD) or {}
    kind = field.get("type") if isinstance(field, dict) else None
    return {FieldType.RANK_FEATURES.value: QueryMode.RANK_FEATURE,
            FieldType.SPARSE_VECTOR.value: QueryMode.SPARSE_VECTOR}.get(kind)


def index_mappings(response, index: str) -> dict:
    """The ``mappings`` of ``index`` in a ``get_mapping`` answer (keyed by the concrete index's name,
    which an alias's is not), ``{}`` when it has none."""
    body = getattr(response, "body", response)
    if not isinstance(body, dict) or not body:
        return {}
    entry = body.get(index) if index in body else next(iter(body.values()))
    mappings = entry.get("mappings") if isinstance(entry, dict) else None
    return mappings if isinstance(mappings, dict) else {}


def build_id(meta: dict) -> str | None:
    """The id of the load that last built an index (its mapping's ``_meta``), None when not recorded."""
    build = meta.get(BUILD_META) if isinstance(meta, dict) else None
    return str(build.get("id")) if isinstance(build, dict) and build.get("id") is not None else None


def _identity(manifest: Manifest) -> dict:
    """What the weights in an index must share to be mixed: the model (its fingerprint, which hashes
    the weights and every setting that changes f(v, s)), K, the quantisation factor and IDF.

    Only values that survive a round trip through a cluster: the factor is written as text because
    a server may return a float one rounding step off (noida-db does for ``passage_weight``)."""
    return {"fingerprint": manifest.model.fingerprint, "top_k": int(manifest.top_k),
            "factor": repr(float(manifest.factor)), "idf": bool(manifest.idf)}


def _differs(stored: dict | None, body: dict) -> str:
    """What differs between an index's weights and the new ones, for the refusal message."""
    if not isinstance(stored, dict):
        return "it was not made by sparc-es"
    new = body["_meta"]["sparc_es"]
    old = {"fingerprint": stored.get("fingerprint") or (stored.get("model") or {}).get("fingerprint"),
           "top_k": stored.get("top_k"), "factor": stored.get("factor"), "idf": stored.get("idf", False)}
    return ", ".join(f"{k} {old[k]} there, {new[k]} here" for k in new if str(old[k]) != str(new[k])) or "unreadable"


def same_weights(stored: dict | None, identity: dict) -> bool:
    """Whether an index's ``_meta.sparc_es`` (as the cluster returns it) names the weights of
    ``identity``. Indexes written before identities were reduced (the whole model record, the factor
    as a number) are recognised too."""
    if not isinstance(stored, dict):
        return False
    fingerprint = stored.get("fingerprint") or (stored.get("model") or {}).get("fingerprint")
    try:
        factor = float(stored.get("factor"))
        top_k = int(stored.get("top_k"))
    except (TypeError, ValueError):
        return False
    return (fingerprint == identity["fingerprint"] and top_k == identity["top_k"]
            and math.isclose(factor, float(identity["factor"]), rel_tol=1e-9)
            and bool(stored.get("idf", False)) == identity["idf"])


SOURCE = ["text", "doc", "start", "end", "code", "context"]  # what a hit brings back
# The one tie rule (engines.base): score, then the place in the encoded folder, as Lucene ranks (an
# index loaded before documents stored their place sorts them after, by no error: unmapped_type).
SORT = ["_score", {"order": {"order": "asc", "unmapped_type": "integer"}}]


def query_body(bag: dict[str, float], size: int = 10, mode: QueryMode | str = QueryMode.RANK_FEATURE) -> dict:
    """Search request whose score is sum over the question's tokens of count x stored impact."""
    features = {feature_name(t): c for t, c in bag.items()}
    if choice(QueryMode, mode, "query mode") is QueryMode.SPARSE_VECTOR:
        should = [{"sparse_vector": {"field": FIELD, "query_vector": {k: float(v) for k, v in features.items()}}}]
    else:
        should = [{"rank_feature": {"field": f"{FIELD}.{name}", "linear": {}, "boost": count}}
                  for name, count in features.items()]
    return {"size": size, "query": {"bool": {"should": should}}, "sort": list(SORT), "_source": list(SOURCE)}


def bm25_body(question: str, size: int = 10) -> dict:
    """Search request scoring the sentences' ``text`` by BM25 (the index's analyser and similarity:
    Lucene's English analysis and k1 = 0.9, b = 0.4 for a sparc-es index, :data:`TEXT`; an index
    created by an older sparc-es has Elasticsearch's defaults, see :func:`same_bm25`)."""
    return {"size": size, "query": {"match": {"text": {"query": question}}}, "sort": list(SORT),
            "_source": list(SOURCE)}


def same_bm25(index_mapping: dict) -> bool:
    """Whether an index's ``text`` is analysed and scored as the Lucene BM25 index's (:data:`TEXT`)."""
    field = index_mapping.get("properties", {}).get("text") or {}
    return field.get("analyzer") == TEXT["analyzer"] and field.get("similarity") == SIMILARITY


def text_searchable(index_mapping: dict) -> bool:
    """Whether an index's mapping (``get_mapping``'s ``mappings``) has a searchable ``text`` field,
    which the BM25 side of a hybrid needs; every sparc-es mapping has one."""
    field = index_mapping.get("properties", {}).get("text") or {}
    return field.get("type") in ("text", "match_only_text") and field.get("index", True) not in (False, "false")
