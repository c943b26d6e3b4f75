"""``sparc-es query-dsl``: the Elasticsearch request ``search --engine es`` sends for a question, to
paste into Kibana Dev Tools."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from sparc_es.cli.options import (
    MIN_SCORE_HELP,
    connection,
    es_connection_args,
    es_index,
    es_query_args,
    hit_count,
    hybrid_args,
    no_bm25_weight,
    score,
)
from sparc_es.cli.output import warn
from sparc_es.errors import SparcError


def add_parser(sub) -> None:
    p = sub.add_parser("query-dsl", help="print the Elasticsearch request for a question (for Kibana Dev Tools)",
                       description="Print what `search --engine es` sends for a question, with the same options, "
                       "ready to paste into Kibana Dev Tools or send with any Elasticsearch client. The default "
                       "(--hybrid sum) and --hybrid none are one _search, a bool of rank_feature clauses that runs "
                       "on any licence; the sum's clause weights need each feature's largest stored value, read "
                       "from the index's mapping (--es-url, or $SPARC_ES_URL) or from a Lucene index of the same "
                       "encoded folder (--index INDEX, also spelt --tokenizer). With a cluster, it follows the index "
                       "as search does: its quantisation factor, the query mode its weights take and, on an index "
                       "without BM25 terms, the same fallback to --hybrid minmax with the same notice. --hybrid "
                       "minmax and rrf print the _msearch of the two searches sparc-es fuses client-side, and for rrf "
                       "the one-request retriever form that needs an Enterprise licence.")
    p.add_argument("question")
    p.add_argument("-k", type=hit_count, default=10, help="hits (default: %(default)s)")
    p.add_argument("--es-index", help="index name (default: $SPARC_ES_INDEX)")
    es_query_args(p, index=False)
    es_connection_args(p, "Elasticsearch (to read the index's mapping: maxima, factor, query mode)")
    hybrid_args(p, "hybrid with BM25 (as search --engine es)")
    p.add_argument("--min-score", type=score, metavar="S", help=MIN_SCORE_HELP + "; written as the request's "
                   "min_score (in _score's units: S times the quantisation factor for --hybrid none)")


def command(args: argparse.Namespace) -> int:
    from sparc_es.engines.elastic import bm25_body, query_body
    from sparc_es.engines.hybrid import DEPTH, RRF_K, HybridChoice
    from sparc_es.model.query import check_question

    no_bm25_weight(args)
    check_question(args.question, asked=True)
    HybridChoice.of("es", args.hybrid or "default", args.hybrid_weight)  # its rules, before anything is read
    name = es_index(args, " (the request's GET /INDEX/_search line names it, also with --index)")
    if args.es_url or os.environ.get("SPARC_ES_URL"):
        method, weight, bag, mode, factor = _from_cluster(args, name)
    else:
        method, weight, bag, mode, factor = _from_folder(args)
    if not bag:
        raise SparcError("no token of the question is in the index: there is nothing to ask")
    if args.min_score is not None and method not in ("sum", "none"):
        raise SparcError(f"--min-score applies to a score the engine computes (the default, --hybrid sum or none); "
                         f"--hybrid {method} is fused here, from two lists, so no request can drop by it")
    if args.min_score is not None and method == "sum" and args.min_score > 1:
        raise SparcError(f"--min-score {args.min_score:g} drops every hit: the default's scores are fractions of the "
                         "question's attainable score, 0 to 1")
    if method in ("sum", "none"):
        comment = (f"one request: _score = {1 - weight:g} x SPARC + {weight:g} x BM25, each over the most this "
                   "question can score there (a fraction of its attainable score, 0 to 1); any licence"
                   if method == "sum" else _impact_comment(factor, "the score sparc-es search shows"))
        print(f"# {comment}")
        body = query_body(bag, size=args.k, mode=mode)
        if args.min_score is not None:  # _score is the shown score, times the factor for SPARC alone
            body["min_score"] = args.min_score if method == "sum" else args.min_score * factor[0]
        print(f"GET /{name}/_search")
        print(json.dumps(body, indent=2, ensure_ascii=False))
        return 0
    depth = max(args.k, DEPTH)
    sparc, bm25 = query_body(bag, size=depth, mode=mode), bm25_body(args.question, depth)
    # search shows the fused score, never either list's _score: said per fusion
    fusion = (f"{weight:g} x BM25' + {1 - weight:g} x SPARC', each list's _score min-max normalised to [0, 1], "
              "which is the score sparc-es search shows" if method == "minmax" else
              f"reciprocal-rank fusion, the sum of 1 / ({RRF_K} + rank) over the two lists, which is the score "
              "sparc-es search shows (the _scores only rank each list)")
    print(f"# sparc-es fuses the two lists client-side: {fusion}; the top {args.k} are the answer "
          f"(the default, --hybrid sum, is one request); "
          f"{_impact_comment(factor, 'the score of sparc-es search --hybrid none', 'the SPARC list')}")
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


def _from_cluster(args: argparse.Namespace, name: str):
    """(method, BM25's share, the question's clause weights, query mode, (factor, where it is from)) as
    ``search --engine es`` asks the index: the same engine opened the same way, so the same
    fallback (and its notice) on an index without BM25 terms, the index's own quantisation factor,
    and the query mode its weights field takes."""
    from sparc_es.engines import open_engine
    from sparc_es.engines.hybrid import HybridEngine

    engine = open_engine("es", connection=connection(args), es_index=name, tokenizer=args.tokenizer,
                         query_mode=args.query_mode, hybrid=args.hybrid or "default",
                         hybrid_weight=args.hybrid_weight, notice=warn)
    try:
        sparc = engine.sparc if isinstance(engine, HybridEngine) else engine
        method = engine.method if isinstance(engine, HybridEngine) else sparc.method
        weight = engine.bm25_weight if method is not None else 0.0
        factor = (sparc.factor, f"the quantisation factor of index {name!r}, in its _meta")
        return (method.value if method is not None else "none"), weight, sparc.weights(args.question), \
            sparc.mode, factor
    finally:
        engine.close()


def _from_folder(args: argparse.Namespace):
    """As :func:`_from_cluster`, without a cluster: the tokenizer, factor and (for the sum) maxima of
    ``--tokenizer``'s encoded folder or Lucene index."""
    from sparc_es.engines.blend import Blend
    from sparc_es.engines.hybrid import DEFAULT_METHOD, HybridChoice
    from sparc_es.layout.manifest import Manifest
    from sparc_es.layout.names import META
    from sparc_es.layout.records import DEFAULT_FACTOR
    from sparc_es.model.query import QueryEncoder

    method = args.hybrid or DEFAULT_METHOD.value
    weight = HybridChoice.of("es", method, args.hybrid_weight).weight
    bag = QueryEncoder.load(args.tokenizer or "default").bag(args.question)
    if method == "sum":
        blend = Blend.read(args.tokenizer) if args.tokenizer else None
        if blend is None:
            raise SparcError("the sum's clause weights need each feature's largest stored value: give --es-url "
                             "(read from the index's mapping) or --index INDEX, a Lucene index of the same encoded "
                             "folder")
        bag = blend.weights(args.question, bag, weight)
    folder = Path(args.tokenizer) if args.tokenizer else None
    if folder is not None and (folder / META).is_file():
        factor = (Manifest.read(folder).factor, f"the quantisation factor of {folder}")
    else:
        factor = (DEFAULT_FACTOR, "encode's default quantisation factor; --es-url or --tokenizer ENCODED reads an "
                                  "index's own")
    return method, weight, bag, args.query_mode or "rank_feature", factor


def _impact_comment(factor: tuple[float, str], shown: str, which: str = "the SPARC search") -> str:
    """What the ``#`` line says of SPARC-alone scores: ``_score`` is the integer impact sum, the
    index's quantisation factor times ``shown`` (the factor and where it was read)."""
    value, source = factor
    return f"{which}'s _score is the integer impact sum, {value:g} x {shown} (divide by {value:g}: {source})"
