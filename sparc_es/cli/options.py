"""The options several verbs share: argument types, argument groups (model, engine, Elasticsearch
connection and query, hybrid), the rules that refuse an option that would be silently ignored,
and the engine and model the options open.

Heavy imports (torch, Lucene, elasticsearch) stay inside the functions: building the parser, which
``sparc-es --help`` does, loads none of them.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Iterable

from sparc_es.cli.output import warn
from sparc_es.errors import SparcError

# --- argument types ------------------------------------------------------------------------


def positive(value: str, most: int = 2**31 - 1) -> int:
    """A positive whole number of at most ``most`` (a C int: what Java and torch take)."""
    try:
        k = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if k < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    if k > most:
        raise argparse.ArgumentTypeError(f"must be at most {most:,}")
    return k


def hit_count(value: str) -> int:
    """Hits per question (-k, --depth): at most MAX_HITS."""
    from sparc_es.engines.base import MAX_HITS

    return positive(value, MAX_HITS)


def _finite(value: str) -> float:
    # argparse names this function in its error for a value that is not a number: keep its name
    number = float(value)
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError("must be a finite number")
    return number


def score(value: str) -> float:
    # argparse names this function in its error for a value that is not a number: keep its name
    number = _finite(value)
    if number < 0:
        raise argparse.ArgumentTypeError("must be 0 or more (no score is below 0: a sum of positive weights)")
    return number


MIN_SCORE_HELP = ("drop hits scoring under S (the SPARC engines); the default's scores are fractions of the "
                  "question's attainable score, 0 to 1, comparable across questions (e.g. 0.3)")


# --- argument groups -----------------------------------------------------------------------


def model_args(p: argparse.ArgumentParser) -> None:
    """The model a verb loads and how it runs (encode, explain, demo)."""
    g = p.add_argument_group("model")
    g.add_argument("--model", default="default",
                   help="SPARC model folder or BERT-family checkpoint folder; 'default' is the shipped "
                        "trained model, 'all-minilm-l6-v2' and 'splade-bert-tiny' the packaged base checkpoints "
                        "(as untrained SPARTA)")
    g.add_argument("--top-k", type=int, metavar="K",
                   help="tokens the model's neural scores keep per sentence (default: the model's, 500). A model "
                        "with a lexical term (the default) then adds the sentence's own tokens and their stem "
                        "siblings that are not among them, so a sentence stores up to K plus those (the encode "
                        "summary and meta.json's max_postings say how many). Fewer make shorter posting lists "
                        "and faster searches: 300 searched about 1.3x faster at 1M sentences and lost 0.5 "
                        "points of R@100 on the validation articles (docs/benchmarks.md)")
    g.add_argument("--max-length", type=int, metavar="N",
                   help="max tokens of [CLS] sentence [SEP] context [SEP] (default: the model's own; "
                        "the shipped default's is 128)")
    g.add_argument("--max-over", choices=["sentence", "all"],
                   help="positions the max in f(v, s) runs over: the sentence's own, or sentence and "
                        "context (default: the model's, sentence)")
    g.add_argument("--threads", type=positive, default=None, metavar="N",
                   help="torch CPU threads (default: torch's choice)")
    g.add_argument("--device", default="auto", metavar="DEVICE",
                   help="where the model runs: auto (a GPU when torch sees one, else the CPU), cpu, cuda or "
                        "cuda:N (default: %(default)s)")


def es_query_args(g, index: bool = True) -> None:
    """How a question is turned into an Elasticsearch request (search, run, query-dsl; ``index``:
    the command has an --index the tokenizer defaults to)."""
    from sparc_es.engines.elastic import QueryMode

    # query-dsl reads a Lucene index only for its tokenizer and the sum's maxima: there --index is
    # another name for --tokenizer, so the folder is named as search names it
    g.add_argument("--tokenizer", *(() if index else ("--index",)), dest="tokenizer", metavar="DIR",
                   help="encoded folder, index or model folder whose tokenizer splits the question (default: "
                   + ("--index, else " if index else "") + "the default model's"
                   + ("" if index else "; an encoded folder or index also gives its quantisation factor") + ")")
    g.add_argument("--query-mode", choices=[m.value for m in QueryMode],
                   help="dot product through rank_feature clauses (linear, boost = count) or one "
                        "sparse_vector query (default: the one the index's weights field takes, "
                        f"{QueryMode.RANK_FEATURE.value} for rank_features; {QueryMode.RANK_FEATURE.value} without "
                        "a cluster to read)")
    g.add_argument("--bm25-weight", help=argparse.SUPPRESS)  # gone: refused with what to use instead


def hybrid_args(p: argparse.ArgumentParser, title: str) -> None:
    """--hybrid and --hybrid-weight, under ``title``."""
    from sparc_es.engines.hybrid import BM25_WEIGHT, DEFAULT_METHOD

    g = p.add_argument_group(title)
    g.add_argument("--hybrid", choices=["sum", "minmax", "rrf", "none"],
                   help="SPARC with BM25 over the same sentences, the same way on both engines. sum: one engine "
                        "request whose score is (1 - A) x SPARC + A x BM25, each over the most the question can "
                        "score there (a fraction of the question's attainable score, 0 to 1); minmax, rrf: two "
                        "searches to depth 1,000 fused here (min-max-normalised sum, reciprocal-rank fusion); none: "
                        f"SPARC alone. Default: {DEFAULT_METHOD.value} (chosen on the validation domains, "
                        "docs/evaluation.md); on an index built by an older sparc-es, minmax, with a notice")
    g.add_argument("--hybrid-weight", type=float, metavar="A",
                   help=f"BM25's share A of a sum (sum, minmax or the default), 0 to 1 (default: {BM25_WEIGHT}, "
                        "chosen with the default on the validation domains)")


def engine_args(p: argparse.ArgumentParser, kinds: list[str], query: bool = True) -> None:
    """--engine among ``kinds`` and Elasticsearch's options; with ``query``, how a question is asked
    too (the hybrid, --min-score)."""
    p.add_argument("--engine", choices=kinds, default="lucene",
                   help="lucene: the embedded impact index; es: an Elasticsearch cluster"
                        + ("; bm25: the Lucene BM25 index built beside the impact index (a baseline)"
                           if "bm25" in kinds else "") + " (default: %(default)s)")
    g = es_connection_args(p, "Elasticsearch (--engine es only)")
    g.add_argument("--es-index", help="index name (default: $SPARC_ES_INDEX)")
    if not query:
        return
    es_query_args(g)
    hybrid_args(p, "hybrid with BM25 (sum: the BM25 terms every sentence stores, one request; minmax and rrf: the "
                   "BM25 index beside the impact index, or a match query on an Elasticsearch index's text)")
    p.add_argument("--min-score", type=score, metavar="S", help=MIN_SCORE_HELP)


ES_TIMEOUT, ES_RETRIES = 60.0, 3


def es_connection_args(p: argparse.ArgumentParser, title: str):
    """How to reach an Elasticsearch cluster, under ``title``; the group, for a verb's own options."""
    g = p.add_argument_group(f"{title}; secrets also from the environment, never printed")
    g.add_argument("--es-url", help="cluster URL (default: $SPARC_ES_URL)")
    g.add_argument("--es-api-key", help="API key (default: $SPARC_ES_API_KEY)")
    g.add_argument("--es-user", help="basic auth user (default: $SPARC_ES_USER)")
    g.add_argument("--es-password", help="basic auth password (default: $SPARC_ES_PASSWORD)")
    g.add_argument("--es-ca-certs", help="CA bundle for TLS (default: $SPARC_ES_CA_CERTS)")
    g.add_argument("--es-timeout", type=float, metavar="SECONDS", help=f"per request (default: {ES_TIMEOUT})")
    g.add_argument("--es-retries", type=int, metavar="N",
                   help=f"retries with backoff on connection errors, timeouts and 429/502/503/504 "
                        f"(default: {ES_RETRIES})")
    return g


# --- refusals: an option that does not apply is a one-line error, never silently ignored -------

# Options by what they apply to (argparse destinations).
ES_CONNECTION = ("es_url", "es_api_key", "es_user", "es_password", "es_ca_certs", "es_timeout", "es_retries")
ES_QUERY = ("es_index", "tokenizer", "query_mode")
HYBRID = ("hybrid", "hybrid_weight")


def given(args: argparse.Namespace, names: Iterable[str]) -> list[str]:
    """The options among ``names`` given on the command line (every one of them defaults to None or
    False), as written there."""
    return ["--" + n.replace("_", "-") for n in names if getattr(args, n, None) is not None
            and getattr(args, n) is not False]


def refuse(args: argparse.Namespace, names: Iterable[str], why: str) -> None:
    """A one-line error for the first option of ``names`` given: ``OPTION why``."""
    found = given(args, names)
    if found:
        raise SparcError(f"{found[0]} {why}")


def no_bm25_weight(args: argparse.Namespace) -> None:
    """--bm25-weight is gone: say what replaced it."""
    if getattr(args, "bm25_weight", None) is not None:
        raise SparcError("--bm25-weight is gone: BM25 is fused with SPARC the same way on every engine; use "
                         "--hybrid sum --hybrid-weight W")


def check_depth(args: argparse.Namespace) -> None:
    """--depth without --documents is refused (search and run)."""
    if args.depth is not None and not args.documents:
        raise SparcError("--depth is how many sentences are grouped into documents: it applies with --documents only")


def check_engine_options(args: argparse.Namespace) -> None:
    """``search``, ``serve`` and ``run``: Elasticsearch's options with --engine es only, the hybrid's
    as :class:`~sparc_es.engines.hybrid.HybridChoice` rules, before anything is opened."""
    from sparc_es.engines.hybrid import HybridChoice

    no_bm25_weight(args)
    if args.engine != "es":
        refuse(args, ES_CONNECTION + ES_QUERY, f"applies to --engine es only, not --engine {args.engine}")
    if args.engine == "bm25":
        refuse(args, ("min_score",), "applies to the SPARC engines (the default's scores are fractions), not to BM25")
    HybridChoice.of(args.engine, hybrid(args), args.hybrid_weight)
    if args.min_score is not None and args.min_score > 1 and hybrid(args) in FRACTIONS:
        what = "the default search" if hybrid(args) == "default" else f"--hybrid {hybrid(args)}"
        raise SparcError(f"--min-score {args.min_score:g} drops every hit: the scores of {what} are fractions of "
                         "the question's attainable score, 0 to 1")


FRACTIONS = ("default", "sum", "minmax")  # the hybrids whose scores run from 0 to 1


def hybrid(args: argparse.Namespace) -> str | None:
    """``--hybrid`` as given, or the default hybrid on the SPARC engines."""
    return "default" if args.hybrid is None and args.engine != "bm25" else args.hybrid


# --- what the options open -----------------------------------------------------------------


def set_threads(threads: int | None) -> None:
    """torch's CPU threads, when --threads is given."""
    if threads:
        import torch

        torch.set_num_threads(threads)


def load_model(args: argparse.Namespace):
    """The model of :func:`model_args`, on its device."""
    from sparc_es.model import SparcModel, resolve_device

    set_threads(args.threads)
    device = resolve_device(args.device)  # before loading: a wrong device fails at once
    overrides = {name: getattr(args, name) for name in ("top_k", "max_length", "max_over")
                 if getattr(args, name) is not None}
    model = SparcModel.load(args.model, **overrides)
    return model if device == "cpu" else model.to(device)


def connection(args: argparse.Namespace):
    """The Elasticsearch connection of :func:`es_connection_args`, the environment filling in."""
    from sparc_es.engines.elastic import Connection

    return Connection.from_env(args.es_url, timeout=ES_TIMEOUT if args.es_timeout is None else args.es_timeout,
                               retries=ES_RETRIES if args.es_retries is None else args.es_retries,
                               api_key=args.es_api_key, username=args.es_user, password=args.es_password,
                               ca_certs=args.es_ca_certs)


def es_index(args: argparse.Namespace, why: str = "") -> str:
    """--es-index, else $SPARC_ES_INDEX; ``why`` says what the name is for, where it is not plain."""
    name = args.es_index or os.environ.get("SPARC_ES_INDEX")
    if not name:
        raise SparcError(f"no Elasticsearch index name{why}: pass --es-index or set SPARC_ES_INDEX")
    return name


def open_engine(args: argparse.Namespace):
    """The engine of ``search``, ``serve`` and ``run``; an option that does not apply to it is refused."""
    from sparc_es.engines import open_engine as opened

    check_engine_options(args)
    method = hybrid(args)
    if args.engine == "es":
        return opened("es", args.index, connection=connection(args), es_index=es_index(args),
                           tokenizer=args.tokenizer, query_mode=args.query_mode, hybrid=method,
                           hybrid_weight=args.hybrid_weight, notice=warn)
    return opened(args.engine, args.index, hybrid=method, hybrid_weight=args.hybrid_weight, notice=warn)
