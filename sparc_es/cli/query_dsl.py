"""``sparc-es query-dsl``: the Elasticsearch request ``search --engine es`` sends for a question, to
paste into Kibana Dev Tools."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from sparc_es.cli.options import (
    ES_CONNECTION,
    connection,
    es_connection_args,
    es_query_args,
    hit_count,
    hybrid_args,
    no_bm25_weight,
    refuse,
)
from sparc_es.errors import SparcError


def add_parser(sub) -> None:
    p = sub.add_parser("query-dsl", help="print the Elasticsearch request for a question (for Kibana Dev Tools)",
                       description="Print what `search --engine es` sends for a question, with the same options, "
                       "ready to paste into Kibana Dev Tools or send with any Elasticsearch client. The default "
                       "(--hybrid sum) and --hybrid none are one _search, a bool of rank_feature clauses that runs "
                       "on any licence; the sum's clause weights need each feature's largest stored value, read "
                       "from the index's mapping (--es-url, or $SPARC_ES_URL) or from a Lucene index of the same "
                       "encoded folder (--index INDEX, also spelt --tokenizer). --hybrid minmax and rrf print the "
                       "_msearch of the two searches sparc-es fuses client-side, and for rrf the one-request "
                       "retriever form that needs an Enterprise licence.")
    p.add_argument("question")
    p.add_argument("-k", type=hit_count, default=10, help="hits (default: %(default)s)")
    p.add_argument("--es-index", help="index name for the request line (default: $SPARC_ES_INDEX or sparc)")
    es_query_args(p, index=False)
    es_connection_args(p, "Elasticsearch (to read the index's mapping)")
    hybrid_args(p, "hybrid with BM25 (as search --engine es)")


def command(args: argparse.Namespace) -> int:
    from sparc_es.engines.elastic import bm25_body, query_body
    from sparc_es.engines.hybrid import DEFAULT_METHOD, DEPTH, RRF_K, HybridChoice
    from sparc_es.model.query import QueryEncoder, check_question

    no_bm25_weight(args)
    check_question(args.question)
    if not args.question.strip():
        raise SparcError("empty question")
    method = args.hybrid or DEFAULT_METHOD.value
    weight = HybridChoice.of("es", method, args.hybrid_weight).weight
    name = args.es_index or os.environ.get("SPARC_ES_INDEX", "sparc")
    if method != "sum":
        refuse(args, ES_CONNECTION, "reads the sum's maxima from the cluster: it applies to --hybrid sum only")
    queries = QueryEncoder.load(args.tokenizer or "default")
    mode = args.query_mode or "rank_feature"
    bag = queries.bag(args.question)
    if method == "sum":
        bag = _blend(args, name).weights(args.question, bag, weight)
    if not bag:
        raise SparcError("no token of the question is in the index: there is nothing to ask")
    if method in ("sum", "none"):
        comment = (f"one request: _score = {1 - weight:g} x SPARC + {weight:g} x BM25, each over the most this "
                   "question can score there (a fraction of its attainable score, 0 to 1); any licence"
                   if method == "sum" else _impact_comment(args))
        print(f"# {comment}")
        print(f"GET /{name}/_search")
        print(json.dumps(query_body(bag, size=args.k, mode=mode), indent=2, ensure_ascii=False))
        return 0
    depth = max(args.k, DEPTH)
    sparc, bm25 = query_body(bag, size=depth, mode=mode), bm25_body(args.question, depth)
    fusion = (f"{weight:g} x BM25' + {1 - weight:g} x SPARC', each list min-max normalised to [0, 1]"
              if method == "minmax" else f"reciprocal-rank fusion, the sum of 1 / ({RRF_K} + rank) over the two lists")
    print(f"# sparc-es fuses the two lists client-side: {fusion}; the top {args.k} are the answer "
          f"(the default, --hybrid sum, is one request); {_impact_comment(args)}")
    print(f"GET /{name}/_msearch")
    for body in (sparc, bm25):
        print("{}")
        print(json.dumps(body, ensure_ascii=False))
    if method == "rrf":
        print("\n# the same fusion in one request, with Elasticsearch's rrf retriever: needs an Enterprise licence "
              "(a Basic cluster answers 403)")
        print(f"GET /{name}/_search")
        retriever = {"rrf": {"retrievers": [{"standard": {"query": sparc["query"]}},
                                            {"standard": {"query": bm25["query"]}}],
                             "rank_constant": RRF_K, "rank_window_size": depth}}
        print(json.dumps({"size": args.k, "retriever": retriever, "_source": sparc["_source"]}, indent=2,
                         ensure_ascii=False))
    return 0


def _impact_comment(args: argparse.Namespace) -> str:
    """What the ``#`` line says of SPARC-alone scores: ``_score`` is the integer impact sum,
    ``factor`` times the score ``search`` shows (the factor of ``--tokenizer``'s encoded folder or
    index, else encode's default)."""
    from sparc_es.layout.manifest import Manifest
    from sparc_es.layout.names import META
    from sparc_es.layout.records import DEFAULT_FACTOR

    folder = Path(args.tokenizer) if args.tokenizer else None
    if folder is not None and (folder / META).is_file():
        factor, source = Manifest.read(folder).factor, f"the quantisation factor of {folder}"
    else:
        factor, source = DEFAULT_FACTOR, ("encode's default quantisation factor; --tokenizer ENCODED reads an "
                                          "index's own")
    return (f"the SPARC search's _score is the integer impact sum, {factor:g} x the score sparc-es search shows "
            f"(divide by {factor:g}: {source})")


def _blend(args: argparse.Namespace, name: str):
    """The maxima the sum's clause weights need: from the cluster's mapping, else a Lucene index's."""
    from sparc_es.engines.blend import Blend
    from sparc_es.engines.elastic import ElasticEngine
    from sparc_es.model.query import QueryEncoder

    if args.es_url or os.environ.get("SPARC_ES_URL"):
        engine = ElasticEngine(connection(args).client(), name, QueryEncoder.load(args.tokenizer or "default"))
        try:
            if engine.blend is None:
                raise SparcError(f"index {name!r} stores no BM25 terms (loaded by an older sparc-es): load it again "
                                 "with sparc-es index --engine es --recreate, or print --hybrid minmax")
            return engine.blend
        finally:
            engine.close()
    blend = Blend.read(args.tokenizer) if args.tokenizer else None
    if blend is None:
        raise SparcError("the sum's clause weights need each feature's largest stored value: give --es-url (read "
                         "from the index's mapping) or --index INDEX, a Lucene index of the same encoded folder")
    return blend
