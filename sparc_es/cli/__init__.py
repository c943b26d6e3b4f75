"""``sparc-es``: one console script, a sub-command per stage, each a thin call into the library.

    sparc-es encode  --corpus DOCS --output ENCODED     sentences -> top-K integer impacts
    sparc-es requantize --input ENCODED --output NEW --idf   IDF / another factor, no re-encoding
    sparc-es index   --input ENCODED --index INDEX      impacts -> Lucene impact index (or --engine es)
    sparc-es search  --index INDEX "question"           top sentences with text, document, score
    sparc-es serve   --index INDEX [--port 8000]        HTTP JSON API and search page, one engine start
    sparc-es run     --index INDEX --topics T --output RUN   topics TSV -> TREC run file
    sparc-es explain --index INDEX "question" 1 2       why those hits scored what they did, token by token
    sparc-es explain "sentence"                         the (token, weight) pairs a sentence gets
    sparc-es eval    --run RUN --qrels QRELS            MRR@1000, R@1, nDCG@10, R@100
    sparc-es evalset --domain squad --output DIR        corpus, topics, qrels (or --mrqa FILE, --beir DIR,
                                                        --docs DIR --questions Q --answers A)
    sparc-es table   --systems bm25,sparc --domains squad,newsqa   systems x domains table
    sparc-es train   --output MODEL                     train SPARC on the SQuAD train slice
    sparc-es adapt   --corpus DOCS --output MODEL       embedding replacement on your own corpus (CPU)
    sparc-es query-dsl "question"                       the Elasticsearch request, for Kibana
    sparc-es demo                                       all of the above on the bundled demo corpus

Each command is a parser function (``_NAME_parser``) followed by the command it runs
(``cmd_NAME``); the library validates its own arguments, this module only parses and prints.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from importlib import resources
from pathlib import Path

from sparc_es import __version__
from sparc_es.errors import SparcError
from sparc_es.layout import ownership as folders

PROG = "sparc-es"


def _warn(message: str) -> None:
    print(f"{PROG}: warning: {message}", file=sys.stderr)


def _k(value: str, most: int = 2**31 - 1) -> int:
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


def _hits(value: str) -> int:
    """Hits per question (-k, --depth): at most MAX_HITS."""
    from sparc_es.engines.base import MAX_HITS

    return _k(value, MAX_HITS)


def _set_threads(threads: int | None) -> None:
    if threads:
        import torch

        torch.set_num_threads(threads)


# --- shared argument groups ----------------------------------------------------------------

def _model_args(p: argparse.ArgumentParser) -> None:
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
    g.add_argument("--threads", type=_k, default=None, metavar="N",
                   help="torch CPU threads (default: torch's choice)")
    g.add_argument("--device", default="auto", metavar="DEVICE",
                   help="where the model runs: auto (a GPU when torch sees one, else the CPU), cpu, cuda or "
                        "cuda:N (default: %(default)s)")


def _load_model(args: argparse.Namespace):
    from sparc_es.model import SparcModel, resolve_device

    _set_threads(args.threads)
    device = resolve_device(args.device)  # before loading: a wrong device fails at once
    overrides = {name: getattr(args, name) for name in ("top_k", "max_length", "max_over")
                 if getattr(args, name) is not None}
    model = SparcModel.load(args.model, **overrides)
    return model if device == "cpu" else model.to(device)


def _es_query_args(g, index: bool = True) -> None:
    """How a question is turned into an Elasticsearch request (search, run, query-dsl; ``index``:
    the command has an --index the tokenizer defaults to)."""
    from sparc_es.engines.elastic import QueryMode

    g.add_argument("--tokenizer", metavar="DIR", help="encoded folder, index or model folder whose tokenizer "
                   "splits the question (default: " + ("--index, else " if index else "") + "the default model's"
                   + ("" if index else "; an encoded folder or index also gives its quantisation factor") + ")")
    g.add_argument("--query-mode", choices=[m.value for m in QueryMode],
                   help="dot product through rank_feature clauses (linear, boost = count) or one "
                        f"sparse_vector query (default: {QueryMode.RANK_FEATURE.value})")
    g.add_argument("--bm25-weight", help=argparse.SUPPRESS)  # gone: refused with what to use instead


def _hybrid_args(p: argparse.ArgumentParser, title: str) -> None:
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



def _engine_args(p: argparse.ArgumentParser, kinds: list[str], query: bool = True) -> None:
    p.add_argument("--engine", choices=kinds, default="lucene",
                   help="lucene: the embedded impact index; es: an Elasticsearch cluster"
                        + ("; bm25: the Lucene BM25 index built beside the impact index (a baseline)"
                           if "bm25" in kinds else "") + " (default: %(default)s)")
    g = _es_connection_args(p, "Elasticsearch (--engine es only)")
    g.add_argument("--es-index", help="index name (default: $SPARC_ES_INDEX)")
    if not query:
        return
    _es_query_args(g)
    _hybrid_args(p, "hybrid with BM25 (sum: the BM25 terms every sentence stores, one request; minmax and rrf: the "
                    "BM25 index beside the impact index, or a match query on an Elasticsearch index's text)")
    p.add_argument("--min-score", type=_finite, metavar="S",
                   help="drop hits scoring under S (the SPARC engines); the default's scores are fractions of the "
                        "question's attainable score, 0 to 1, comparable across questions (e.g. 0.3)")


ES_TIMEOUT, ES_RETRIES = 60.0, 3


def _es_connection_args(p: argparse.ArgumentParser, title: str):
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


# Options by what they apply to (argparse destinations), for the one-line refusal of an option that
# would otherwise be silently ignored.
ES_CONNECTION = ("es_url", "es_api_key", "es_user", "es_password", "es_ca_certs", "es_timeout", "es_retries")
ES_QUERY = ("es_index", "tokenizer", "query_mode")
HYBRID = ("hybrid", "hybrid_weight")


def _given(args: argparse.Namespace, names) -> list[str]:
    """The options among ``names`` given on the command line (every one of them defaults to None or
    False), as written there."""
    return ["--" + n.replace("_", "-") for n in names if getattr(args, n, None) is not None
            and getattr(args, n) is not False]


def _refuse(args: argparse.Namespace, names, why: str) -> None:
    """A one-line error for the first option of ``names`` given: ``OPTION why``."""
    given = _given(args, names)
    if given:
        raise SparcError(f"{given[0]} {why}")


def _no_bm25_weight(args: argparse.Namespace) -> None:
    if getattr(args, "bm25_weight", None) is not None:
        raise SparcError("--bm25-weight is gone: BM25 is fused with SPARC the same way on every engine; use "
                         "--hybrid sum --hybrid-weight W")


def _connection(args: argparse.Namespace):
    from sparc_es.engines.elastic import Connection

    return Connection.from_env(args.es_url, timeout=ES_TIMEOUT if args.es_timeout is None else args.es_timeout,
                               retries=ES_RETRIES if args.es_retries is None else args.es_retries,
                               api_key=args.es_api_key, username=args.es_user, password=args.es_password,
                               ca_certs=args.es_ca_certs)


def _es_index(args: argparse.Namespace) -> str:
    name = args.es_index or os.environ.get("SPARC_ES_INDEX")
    if not name:
        raise SparcError("no Elasticsearch index name: pass --es-index or set SPARC_ES_INDEX")
    return name


def _open_engine(args: argparse.Namespace):
    """The engine of ``search``, ``serve`` and ``run``; an option that does not apply to it is refused."""
    from sparc_es.engines import open_engine

    _check_engine_options(args)
    hybrid = _hybrid(args)
    if args.engine == "es":
        return open_engine("es", args.index, connection=_connection(args), es_index=_es_index(args),
                           tokenizer=args.tokenizer, query_mode=args.query_mode or "rank_feature", hybrid=hybrid,
                           hybrid_weight=args.hybrid_weight, notice=_warn)
    return open_engine(args.engine, args.index, hybrid=hybrid, hybrid_weight=args.hybrid_weight, notice=_warn)


def _check_engine_options(args: argparse.Namespace) -> None:
    """``search``, ``serve`` and ``run``: Elasticsearch's options with --engine es only, the hybrid's
    as :class:`~sparc_es.engines.hybrid.HybridChoice` rules, before anything is opened."""
    from sparc_es.engines.hybrid import HybridChoice

    _no_bm25_weight(args)
    if args.engine != "es":
        _refuse(args, ES_CONNECTION + ES_QUERY, f"applies to --engine es only, not --engine {args.engine}")
    if args.engine == "bm25":
        _refuse(args, ("min_score",), "applies to the SPARC engines (the default's scores are fractions), not to BM25")
    HybridChoice.of(args.engine, _hybrid(args), args.hybrid_weight)


def _hybrid(args: argparse.Namespace) -> str | None:
    """``--hybrid`` as given, or the default hybrid on the SPARC engines."""
    return "default" if args.hybrid is None and args.engine != "bm25" else args.hybrid


def _printable(text: str, one_line: bool = False) -> str:
    """Text safe for a terminal (:func:`sparc_es.answers.show.printable`)."""
    from sparc_es.answers.show import printable

    return printable(text, one_line)


def _print_hits(question: str, match, shown, color: bool | None = None) -> None:
    """One question's answer for people (``sparc_es.answers.show``): how it met the index, then each hit."""
    from sparc_es.answers.show import render, use_color

    color = use_color() if color is None else color
    print(f"Q: {_printable(question, one_line=True)}")
    for line in (match.summary(), match.notice() and f"! {match.notice()}"):
        if line:
            print(f"  {_printable(line)}")
    if not shown:
        print("  (no sentence shares a token with the question)")
    held = match.in_index
    for s in shown:
        print(render(s, question, color, of=len(held) if held is not None else None))


def _answer(args: argparse.Namespace, engine, presenter, question: str):
    """(how ``question`` met the index, its hits as ``search`` shows them): with ``--documents``,
    each document's best sentence among the top ``--depth`` (``run --documents``'s aggregation)."""
    from sparc_es.answers.show import answer
    from sparc_es.engines.base import above, best_sentences

    if not args.documents:
        return answer(engine, presenter, question, args.k, args.collapse, args.min_score)
    hits = engine.search(question, max(args.k, args.depth or 1000))
    hits = above(best_sentences(hits, {h.id: h.doc for h in hits}, args.k), args.min_score)
    match = presenter.question(question)
    return match, presenter.hits(question, hits, match)


def _presenter(args: argparse.Namespace, engine):
    from sparc_es.answers.show import Presenter

    presenter = Presenter(engine, args.index if args.engine != "es" else None, getattr(args, "tokenizer", None))
    gone = presenter.places.gone()
    if gone:
        _warn(f"the corpus the index was built from is not at {', '.join(_printable(str(g)) for g in gone)} (nor where "
              "it was beside the index): hits show character offsets, not lines")
    return presenter


def _report_encode(manifest) -> None:
    if manifest.truncated_sentences:
        _warn(f"{manifest.truncated_sentences} sentences were longer than {manifest.model.max_length} tokens and "
              f"were truncated (e.g. {', '.join(manifest.truncated_ids)}); raise --max-length to keep them whole")
    _report_empty(manifest)
    if manifest.control_characters_removed:
        from sparc_es.corpus.sources import controls_found

        kinds = controls_found(manifest.control_character_kinds) if manifest.control_character_kinds else \
            "C0 controls but tab and line ends, DEL, C1 controls"  # a folder written before kinds were kept
        _warn(f"removed {manifest.control_characters_removed} control characters from the corpus text: {kinds}; "
              f"e.g. in {', '.join(manifest.cleaned_ids)}")
    if manifest.cut_texts:
        n = manifest.cut_texts
        more = " ..." if n > len(manifest.cut_examples) else ""
        _warn(f"{n} text{'s' if n != 1 else ''} of the corpus {'were' if n != 1 else 'was'} cut or read in pieces: "
              f"{'; '.join(_printable(e) for e in manifest.cut_examples)}{more}")
    if manifest.truncated_contexts:
        _warn(f"{manifest.truncated_contexts} of {manifest.sentences} contexts were cut to fit "
              f"{manifest.model.max_length} tokens with their sentence (the sentence itself is kept whole)")


def _report_empty(manifest) -> None:
    """The one warning of encode's that requantize repeats: its factor decides which vectors are empty."""
    if manifest.empty_vectors:
        _warn(f"{manifest.empty_vectors} sentences have no token weight above 0.5/factor and cannot be "
              "retrieved; raise --factor")


# --- commands ------------------------------------------------------------------------------

def _encode_parser(sub) -> None:
    from sparc_es.layout.records import DEFAULT_FACTOR

    p = sub.add_parser("encode", help="encode a corpus into top-K integer token weights",
                       description="Encode every sentence of a corpus (JSONL records {id, text, context?}, or "
                       ".txt/.md/.rst/.html documents split into sentences) into its top-K tokens, quantised to "
                       "integers. Resumes an interrupted run when given the same output folder.")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--corpus", nargs="+", metavar="PATH", help="files or folders")
    source.add_argument("--from-es", metavar="SOURCE_INDEX", help="read the documents of an Elasticsearch index "
                        "(split into sentences, ids <document id>#<n>); see the options below")
    p.add_argument("--output", required=True, metavar="DIR", help="encoded folder to write")
    p.add_argument("--update", action="store_true",
                   help="OUTPUT holds an earlier encode of this corpus: keep the weights of unchanged sentences, "
                        "encode only new and changed ones, drop the ones gone (same model, K and factor)")
    p.add_argument("--factor", type=float, default=DEFAULT_FACTOR, metavar="F",
                   help="quantisation: integer weight = round(f(v, s) * F) (default: %(default)s)")
    p.add_argument("--batch-size", type=_k, default=None,
                   help="sentences per forward pass (default: 32 on the CPU, 256 on a GPU)")
    p.add_argument("--shard-size", type=_k, default=10_000,
                   help="sentences per shard, the unit of resuming (default: %(default)s)")
    from sparc_es.encode.run import IDF_DEFAULT

    p.add_argument("--idf", action=argparse.BooleanOptionalAction, default=IDF_DEFAULT,
                   help="multiply each kept neural weight (after the top-K cut) by log(N / N_v) over this corpus "
                        "(Iida and Okazaki, \"Unsupervised Domain Adaptation for Sparse Retrieval by Filling "
                        "Vocabulary and Word Frequency Gaps\"; recorded in meta.json, kept by --update). On by "
                        "default: it gained on every validation domain, most on documentation (docs/evaluation.md)")
    p.add_argument("--keep-floats", action="store_true",
                   help="also store the unquantised weights, so `sparc-es requantize` can derive IDF-weighted or "
                        "re-quantised folders later without encoding again (about 2x the vectors file)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _model_args(p)
    g = p.add_argument_group("many machines: Ray (pip install 'sparc-es[ray]'; README, \"Many machines: Ray\")")
    g.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="encode on a pool of Ray actors, each loading --model from its own disk; this process reads "
                        "the corpus and writes OUTPUT as without --ray (same records, resumable). Alone: a local Ray "
                        "on this machine; 'auto' (on a node of a cluster) or ray://HEAD:10001: that cluster. "
                        "--threads is then each actor's torch threads (default 1)")
    g.add_argument("--ray-actors", type=_k, metavar="N",
                   help="actors in the pool (default: one per GPU of the cluster, else one per --threads CPUs)")
    g.add_argument("--ray-gpus-per-actor", type=float, metavar="F",
                   help="GPUs each actor asks Ray for (default: 1 when the cluster has GPUs, else 0)")
    g = _es_connection_args(p, "reading from Elasticsearch (--from-es)")
    g.add_argument("--text-field", help="the field holding each document's text (required with --from-es)")
    g.add_argument("--id-field", help="take document ids from this field (default: _id)")
    g.add_argument("--title-field", help="a title field put before each paragraph in the context")
    g.add_argument("--es-query", metavar="JSON", help="query DSL selecting the documents (default: all)")
    g.add_argument("--format", choices=["text", "markdown", "rst", "html"],
                   help="how the text field is written: split as plain text, or read as Markdown, "
                        "reStructuredText or HTML (section titles go into the context) (default: text; files "
                        "given with --corpus are read as their suffix says)")
    p.set_defaults(func=cmd_encode)


def cmd_encode(args: argparse.Namespace) -> int:
    from sparc_es.encode.run import encode_corpus

    if args.corpus:  # say at once which files of the folders will not be read
        from sparc_es.corpus.sources import ReadStats, corpus_files

        _refuse(args, ("text_field", "id_field", "title_field", "es_query", "format"),
                "applies to --from-es only: files given with --corpus are read as their suffix says")

        listed = ReadStats()
        corpus_files(args.corpus, listed)
        if listed.skipped_notice():
            _warn(listed.skipped_notice())
    corpus = args.corpus or _es_source(args)
    backend = _ray_backend(args)
    try:
        model = _load_model(args)
        gpu = backend.gpus_per_actor > 0 if backend is not None else model.device.type != "cpu"
        batch_size = args.batch_size or (256 if gpu else 32)  # a GPU wants larger batches
        manifest = encode_corpus(corpus, args.output, model, factor=args.factor, batch_size=batch_size,
                                 shard_size=args.shard_size, overwrite=args.overwrite, progress=not args.quiet,
                                 idf=args.idf, keep_floats=args.keep_floats, update=args.update, backend=backend)
    finally:
        if backend is not None:
            backend.close()
    _report_encode(manifest)
    reused = f", {manifest.reused} unchanged kept, {manifest.sentences - manifest.reused} encoded, " \
        f"{manifest.removed} removed" if args.update else ""
    print(f"encoded {manifest.sentences} sentences into {args.output} "
          f"(K={manifest.top_k}, at most {manifest.max_postings} tokens stored per sentence, "
          f"factor={manifest.factor:g}{', IDF-weighted' if manifest.idf else ''}, "
          f"{manifest.sentences_per_second} sentences/s{reused})")
    return 0


def _ray_backend(args: argparse.Namespace):
    """The Ray backend of ``encode --ray`` (connected, so its pool's size and GPUs are known), or None."""
    if args.ray is None:
        if args.ray_actors is not None or args.ray_gpus_per_actor is not None:
            raise SparcError("--ray-actors and --ray-gpus-per-actor go with --ray")
        return None
    if args.device not in ("auto", "cpu"):
        raise SparcError(f"--device {args.device} is for an encode in this process; with --ray each actor uses the "
                         "GPUs Ray gives it (--ray-gpus-per-actor)")
    args.device = "cpu"  # this process only reads and writes: the GPUs are the actors'
    from sparc_es.encode.ray import RayBackend

    backend = RayBackend(address=args.ray or None, actors=args.ray_actors, gpus_per_actor=args.ray_gpus_per_actor,
                         model_path=args.model, threads=args.threads or 1)
    try:
        backend.connect()  # fails on one line before the model is loaded
    except BaseException:
        backend.close()
        raise
    return backend


def _es_source(args: argparse.Namespace):
    from sparc_es.engines.elastic import ElasticSource, check_index_name

    if not args.text_field:
        raise SparcError("--from-es needs --text-field (the field that holds each document's text)")
    try:
        query = json.loads(args.es_query) if args.es_query else None
    except ValueError as e:
        raise SparcError(f"--es-query is not valid JSON: {e}") from None
    return ElasticSource(_connection(args).client(), check_index_name(args.from_es), args.text_field,
                         id_field=args.id_field, title_field=args.title_field, query=query,
                         format=args.format or "text")


def _requantize_parser(sub) -> None:
    p = sub.add_parser("requantize", help="derive an IDF-weighted or re-quantised encoded folder, no re-encoding",
                       description="From an encoded folder made with --keep-floats, write a new one whose weights "
                       "are IDF-weighted over its sentences (--idf) and/or quantised at another --factor.")
    p.add_argument("--input", required=True, metavar="ENCODED", help="encoded folder with float weights")
    p.add_argument("--output", required=True, metavar="DIR", help="new encoded folder")
    p.add_argument("--factor", type=float, metavar="F", help="quantisation factor (default: the input's)")
    p.add_argument("--idf", action="store_true", help="multiply each weight by log(N / N_v) over these sentences")
    p.set_defaults(func=cmd_requantize)


def cmd_requantize(args: argparse.Namespace) -> int:
    from sparc_es.encode.requantize import requantize

    manifest = requantize(args.input, args.output, args.factor, idf=args.idf)
    _report_empty(manifest)  # encode's own warnings (truncation, control characters) were said by encode
    print(f"wrote {manifest.sentences} sentences into {args.output} (factor={manifest.factor:g}"
          f"{', IDF-weighted' if manifest.idf else ''}, {manifest.postings / max(manifest.sentences, 1):.1f} "
          "postings per sentence)")
    return 0


def _index_parser(sub) -> None:
    from sparc_es.engines.elastic import FieldType

    p = sub.add_parser("index", help="build a Lucene impact index from an encoded folder",
                       description="Build a Lucene impact index (in-process; Pyserini searches it) from an "
                       "encoded folder, with a Lucene BM25 index of the same texts beside it, and check that no "
                       "sentence was lost; or load it into Elasticsearch.")
    p.add_argument("--input", required=True, metavar="ENCODED", help="folder written by sparc-es encode")
    p.add_argument("--index", metavar="DIR", help="Lucene index folder to write (--engine lucene)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing Lucene index folder")
    p.add_argument("--no-bm25", action="store_true",
                   help="skip the separate BM25 index of the sentence texts that --engine bm25 and the client-side "
                        "fusions (--hybrid minmax, rrf) search; the default search needs none: the BM25 terms it "
                        "sums are stored in the impact index")
    _engine_args(p, ["lucene", "es"], query=False)
    g = p.add_argument_group("Elasticsearch loading (--engine es only)")
    g.add_argument("--chunk-size", type=_k, help="documents per bulk request (default: 500)")
    g.add_argument("--recreate", action="store_true", help="delete and recreate the ES index first")
    g.add_argument("--report", metavar="FILE", help="where the ids of documents that failed to load are written "
                   "(default: es-failures-INDEX.jsonl in the working directory; removed when none failed)")
    g.add_argument("--field-type", choices=[t.value for t in FieldType],
                   help="ES field type; sparse_vector (ES 8.15+) enables --query-mode sparse_vector "
                        f"(default: {FieldType.RANK_FEATURES.value})")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=cmd_index)


def cmd_index(args: argparse.Namespace) -> int:
    if args.engine == "es":
        from sparc_es.engines import elastic

        _refuse(args, ("index", "overwrite", "no_bm25"), "applies to --engine lucene only: Elasticsearch indexes "
                "the text itself (--es-index names the index, --recreate replaces it)")
        client = _connection(args).client()
        result = elastic.build_index(args.input, client, _es_index(args), chunk_size=args.chunk_size or 500,
                                     recreate=args.recreate, field_type=args.field_type or "rank_features",
                                     progress=not args.quiet, report=args.report)
        print(f"loaded {result['loaded']} sentences into Elasticsearch index {result['index']!r} "
              f"({result['already_there']} unchanged, {result['moved']} moved in their file (offsets updated), "
              f"{result['deleted']} deleted; {result['count']} documents, "
              "count checked)")
        return 0
    from sparc_es.engines import lucene

    _refuse(args, ES_CONNECTION + ("es_index", "chunk_size", "recreate", "field_type", "report"),
            "applies to --engine es only, not --engine lucene")
    if not args.index:
        raise SparcError("--index DIR is required for the Lucene engine")
    manifest = lucene.build_index(args.input, args.index, overwrite=args.overwrite, bm25=not args.no_bm25,
                                  progress=not args.quiet)
    info = manifest.index
    if manifest.empty_vectors:
        _warn(f"{manifest.empty_vectors} sentences have no weights and are not in the index")
    print(f"indexed {info.documents} sentences with their BM25 terms into {args.index} in {info.build_seconds:.1f} s "
          f"({info.bytes / 1e6:.1f} MB)")
    if info.bm25:
        print(f"  and a separate BM25 index of their texts (--engine bm25, --hybrid minmax or rrf) in "
              f"{info.bm25['build_seconds']:.1f} s "
              f"({info.bm25['bytes'] / 1e6:.1f} MB)")
    return 0


def _search_parser(sub) -> None:
    p = sub.add_parser("search", help="answer questions from an index",
                       description="Print the top sentences for each question: rank, score, where each is "
                       "(file:line, the 1-based line of its start in its file, and its heading path), its id, the "
                       "sentence with the question's words marked (bold on a terminal, in \u00abguillemets\u00bb "
                       "otherwise) and the rest of its paragraph, and how many of the question's tokens it stores. "
                       "A line first says how many question tokens the index has, and when no word of the "
                       "question is in the index at all. The question is a bag of WordPiece tokens: no model runs.")
    p.add_argument("--index", metavar="DIR", help="Lucene index folder")
    p.add_argument("question", nargs="+", help="one or more questions; '-' alone reads one question per line "
                   "from standard input (one engine start for all)")
    p.add_argument("-k", type=_hits, default=10, help="hits per question (default: %(default)s)")
    p.add_argument("--documents", action="store_true",
                   help="rank documents, not sentences: each document by its best sentence among the top --depth "
                        "sentences (as run --documents), shown with that sentence")
    p.add_argument("--depth", type=_hits, help="with --documents: sentences retrieved before grouping (default: 1000)")
    p.add_argument("--no-collapse", dest="collapse", action="store_false",
                   help="show every sentence as its own hit; by default the sentences of one paragraph are one hit, "
                        "the best of them, with the others named under it (collapsed in --json)")
    p.add_argument("--json", action="store_true", help="print hits as one JSON document: the list of hits of "
                   "one question, or a list of {question, hits, match} for several; with '-', one {question, "
                   "hits, match} object per line. Each hit adds to its id, score, text and offsets its rank, "
                   "line, path (the file read), headings, context, marks ({text, context}: [start, end] of each "
                   "marked word) and covers (the question tokens it stores); match says which question tokens "
                   "have postings and which words are in the index (one question: said on stderr when none is)")
    _engine_args(p, ["lucene", "es", "bm25"])
    p.set_defaults(func=cmd_search)


def cmd_search(args: argparse.Namespace) -> int:
    if "-" in args.question:
        if len(args.question) > 1:
            raise SparcError("'-' (questions from standard input) goes alone, without other questions")
        return _search_stdin(args)
    if any(not q.strip() for q in args.question):
        raise SparcError("empty question")
    from sparc_es.model.query import check_question

    for question in args.question:
        check_question(question)
    if args.depth is not None and not args.documents:
        raise SparcError("--depth is how many sentences are grouped into documents: it applies with --documents only")
    engine = _open_engine(args)
    answers = []
    try:
        presenter = _presenter(args, engine)
        try:
            for question in args.question:
                match, shown = _answer(args, engine, presenter, question)
                if args.json:
                    answers.append({"question": question, "hits": [s.to_json() for s in shown],
                                    "match": match.to_json()})
                    if len(args.question) == 1 and match.notice():
                        _warn(match.notice())
                else:
                    _print_hits(question, match, shown)
        finally:
            presenter.close()
    finally:
        engine.close()
    if args.json:  # one JSON document: the hits of one question, or a list of {question, hits, match}
        print(json.dumps(answers[0]["hits"] if len(answers) == 1 else answers, ensure_ascii=False, indent=2))
    return 0


def _search_stdin(args: argparse.Namespace) -> int:
    """``search -``: one question per line of standard input (blank lines skipped), answered as it
    comes; with ``--json`` one ``{question, hits}`` object per line."""
    if args.depth is not None and not args.documents:
        raise SparcError("--depth is how many sentences are grouped into documents: it applies with --documents only")
    from sparc_es.model.query import check_question

    engine = _open_engine(args)
    try:
        presenter = _presenter(args, engine)
        try:
            for number, line in enumerate(sys.stdin, start=1):
                question = line.strip()
                if not question:
                    continue
                try:
                    check_question(question)
                except SparcError as e:  # the others are still answered
                    _warn(f"standard input, line {number}: {e}; skipped")
                    continue
                match, shown = _answer(args, engine, presenter, question)
                if args.json:
                    print(json.dumps({"question": question, "hits": [s.to_json() for s in shown],
                                      "match": match.to_json()}, ensure_ascii=False))
                else:
                    _print_hits(question, match, shown)
                sys.stdout.flush()  # a reader of a pipe gets each answer as it comes
        finally:
            presenter.close()
    finally:
        engine.close()
    return 0


def _serve_parser(sub) -> None:
    p = sub.add_parser("serve", help="answer questions over HTTP: a JSON API and a search page",
                       description="Open the index once (the engine `search` opens, with the same defaults) and "
                       "serve it over HTTP until interrupted: GET /health, GET|POST /search, POST /batch, "
                       "GET /sentences/{id}, GET /explain, and a search page at /. Needs the serve extra "
                       "(pip install 'sparc-es[serve]').")
    p.add_argument("--index", metavar="DIR", help="Lucene index folder")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on; the default is this machine only, "
                   "0.0.0.0 every interface (the API has no authentication) (default: %(default)s)")
    p.add_argument("--port", type=_port, default=8000, help="0 takes a free one (default: %(default)s)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="answer requests for this host name too (repeatable); by default only the --host address, "
                        "localhost, 127.0.0.1 and ::1 are answered, so that a web page cannot rebind its own name "
                        "to this server and read the index")
    p.add_argument("--log-level", choices=["critical", "error", "warning", "info", "debug"], default="info",
                   help="uvicorn's log level; info logs every request (default: %(default)s)")
    p.add_argument("--model", default="default", help="the model GET /explain encodes hits again with: the one "
                   "the index was encoded with (default: %(default)s, the shipped model)")
    _engine_args(p, ["lucene", "es", "bm25"])
    p.set_defaults(func=cmd_serve)


def _finite(value: str) -> float:
    number = float(value)
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError("must be a finite number")
    return number


def _port(value: str) -> int:
    port = int(value)
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError("must be between 0 and 65535")
    return port


def cmd_serve(args: argparse.Namespace) -> int:
    from sparc_es.answers import server

    sock = server.listen(args.host, args.port)  # a taken port says so before the JVM starts
    try:
        engine = _open_engine(args)
        try:
            service = server.Service(engine, args.index, args.engine, args.model, args.min_score,
                                     reopen=lambda: _open_engine(args))
        except BaseException:
            engine.close()
            raise
    except BaseException:
        sock.close()
        raise
    host = f"[{args.host}]" if ":" in args.host else args.host
    if server.host_of(args.host) not in server.LOCAL_HOSTS:
        _warn(f"listening on {args.host}: the API has no authentication, so anyone who reaches this address can "
              "search the index and read its sentences; put it behind a proxy that authenticates")
    print(f"serving {args.index or args.es_index} on http://{host}:{sock.getsockname()[1]}/ (Ctrl-C stops)",
          file=sys.stderr, flush=True)
    try:
        server.serve(service, sock, log_level=args.log_level,
                     allowed_hosts=[args.host, *server.LOCAL_HOSTS, *args.allow_host])
    except KeyboardInterrupt:  # uvicorn stops on Ctrl-C, then raises it again: the usual way to stop
        pass
    finally:
        service.close()
        sock.close()
    return 0


def _run_parser(sub) -> None:
    p = sub.add_parser("run", help="batch search: topics TSV in, TREC run file out",
                       description="Anserini-style batch run: one 'qid<TAB>question' per line in, a TREC "
                       "run file (qid Q0 docid rank score tag) out, for trec_eval.")
    p.add_argument("--index", metavar="DIR", help="Lucene index folder")
    _engine_args(p, ["lucene", "es", "bm25"])
    p.add_argument("--topics", required=True, metavar="TSV")
    p.add_argument("--output", required=True, metavar="RUN")
    p.add_argument("-k", type=_hits, default=1000, help="hits per query (default: %(default)s)")
    p.add_argument("--threads", type=_k, help="search threads of the Lucene engines (default: 1; Elasticsearch "
                   "searches on the cluster)")
    p.add_argument("--tag", help="run tag, last column (default: sparc-es, the engine and the hybrid, e.g. "
                   "sparc-es-lucene-sum0.3)")
    p.add_argument("--documents", action="store_true",
                   help="rank documents, not sentences: each document scored by its best sentence among the "
                        "top --depth sentences, document ids in the run file (for document-level qrels)")
    p.add_argument("--depth", type=_hits,
                   help="with --documents: sentences retrieved per query before grouping (default: 1000)")
    p.set_defaults(func=cmd_run)


RUN_BATCH = 500  # questions searched at once by `run`: the hits it holds in memory are one batch's


def cmd_run(args: argparse.Namespace) -> int:
    from sparc_es.engines.base import above
    from sparc_es.evaluation.trec import TrecRunWriter, read_topics, run_tag

    if args.depth is not None and not args.documents:
        raise SparcError("--depth is how many sentences are grouped into documents: it applies with --documents only")
    if args.engine == "es":
        _refuse(args, ("threads",), "applies to the Lucene engines only: Elasticsearch searches on the cluster")
    if args.tag is not None and (not args.tag.strip() or len(args.tag.split()) > 1):
        raise SparcError(f"--tag {args.tag!r}: a run tag is one word (TREC run files split on whitespace)")
    depth = 1000 if args.depth is None else args.depth
    folders.check_file_output(args.output, "--output")
    folders.check_apart(args.output, [args.topics, args.index], "--output")
    topics = list(read_topics(args.topics))
    if not topics:  # an empty run file would score 0 without a word
        raise SparcError(f"{args.topics}: no topics in it (one 'qid<TAB>question' per line)")
    engine = _open_engine(args)
    output = Path(args.output)
    partial = output.with_name(output.name + ".partial")  # renamed once complete: no half run under RUN
    seconds, short = 0.0, 0
    try:
        method = getattr(engine, "method", None)  # a hybrid's
        tag = args.tag or run_tag(args.engine, method.value if method else None, getattr(engine, "bm25_weight", None))
        document_of = _document_of(args) if args.documents else None
        with TrecRunWriter(partial, tag=tag) as run:
            for start in range(0, len(topics), RUN_BATCH):
                part = topics[start: start + RUN_BATCH]
                started = time.perf_counter()
                results = engine.batch_search(part, k=max(depth, args.k) if args.documents else args.k,
                                              threads=args.threads or 1)
                seconds += time.perf_counter() - started
                results = {qid: above(hits, args.min_score) for qid, hits in results.items()}
                if document_of is not None:
                    results = document_of(results)
                    short += sum(len(hits) < args.k for hits in results.values())
                for qid, _ in part:
                    run.write(qid, results[qid])
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        engine.close()
    os.replace(partial, output)
    if short:
        _warn(f"{short} of {len(topics)} queries have fewer than {args.k} documents among their top "
              f"{depth} sentences; raise --depth for more")
    print(f"wrote {len(topics)} queries to {args.output} in {seconds:.1f} s "
          f"({1000 * seconds / max(len(topics), 1):.1f} ms/query)")
    return 0


def _document_of(args: argparse.Namespace):
    """Sentence hits -> the best sentence per document, ``args.k`` documents per query (a function
    of one batch's results)."""
    from sparc_es.engines.base import best_per_document

    def by_document(results: dict) -> dict:
        if args.engine == "es":  # hits carry their document
            doc_of = {h.id: h.doc for hits in results.values() for h in hits}
        else:
            from sparc_es.layout.names import SENTENCES
            from sparc_es.layout.store import SentenceStore

            store = SentenceStore(Path(args.index) / SENTENCES)
            try:
                found = store.get(list({h.id for hits in results.values() for h in hits}))
            finally:
                store.close()
            doc_of = {sid: s.doc for sid, s in found.items()}
        return {qid: best_per_document(hits, doc_of, args.k) for qid, hits in results.items()}

    return by_document


def _query_dsl_parser(sub) -> None:
    p = sub.add_parser("query-dsl", help="print the Elasticsearch request for a question (for Kibana Dev Tools)",
                       description="Print what `search --engine es` sends for a question, with the same options, "
                       "ready to paste into Kibana Dev Tools or send with any Elasticsearch client. The default "
                       "(--hybrid sum) and --hybrid none are one _search, a bool of rank_feature clauses that runs "
                       "on any licence; the sum's clause weights need each feature's largest stored value, read "
                       "from the index's mapping (--es-url, or $SPARC_ES_URL) or from a Lucene index of the same "
                       "encoded folder (--tokenizer INDEX). --hybrid minmax and rrf print the _msearch of the two "
                       "searches sparc-es fuses client-side, and for rrf the one-request retriever form that needs "
                       "an Enterprise licence.")
    p.add_argument("question")
    p.add_argument("-k", type=_hits, default=10, help="hits (default: %(default)s)")
    p.add_argument("--es-index", help="index name for the request line (default: $SPARC_ES_INDEX or sparc)")
    _es_query_args(p, index=False)
    _es_connection_args(p, "Elasticsearch (to read the index's mapping)")
    _hybrid_args(p, "hybrid with BM25 (as search --engine es)")
    p.set_defaults(func=cmd_query_dsl)


def _impact_comment(args: argparse.Namespace) -> str:
    """What query-dsl's ``#`` line says of SPARC-alone scores: ``_score`` is the integer impact sum,
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


def _dsl_blend(args: argparse.Namespace, name: str):
    """The maxima the sum's clause weights need: from the cluster's mapping, else a Lucene index's."""
    from sparc_es.engines.blend import Blend
    from sparc_es.engines.elastic import ElasticEngine
    from sparc_es.model.query import QueryEncoder

    if args.es_url or os.environ.get("SPARC_ES_URL"):
        engine = ElasticEngine(_connection(args).client(), name, QueryEncoder.load(args.tokenizer or "default"))
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
                         "from the index's mapping) or --tokenizer INDEX, a Lucene index of the same encoded folder")
    return blend


def cmd_query_dsl(args: argparse.Namespace) -> int:
    from sparc_es.engines.elastic import bm25_body, query_body
    from sparc_es.engines.hybrid import DEFAULT_METHOD, DEPTH, RRF_K, HybridChoice
    from sparc_es.model.query import QueryEncoder

    _no_bm25_weight(args)
    from sparc_es.model.query import check_question

    check_question(args.question)
    if not args.question.strip():
        raise SparcError("empty question")
    method = args.hybrid or DEFAULT_METHOD.value
    weight = HybridChoice.of("es", method, args.hybrid_weight).weight
    name = args.es_index or os.environ.get("SPARC_ES_INDEX", "sparc")
    if method != "sum":
        _refuse(args, ES_CONNECTION, "reads the sum's maxima from the cluster: it applies to --hybrid sum only")
    queries = QueryEncoder.load(args.tokenizer or "default")
    mode = args.query_mode or "rank_feature"
    bag = queries.bag(args.question)
    if method == "sum":
        bag = _dsl_blend(args, name).weights(args.question, bag, weight)
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


def _train_parser(sub) -> None:
    from sparc_es.options import add_arguments
    from sparc_es.training.train import TrainConfig, __doc__ as train_doc

    p = sub.add_parser("train", help="train SPARC on the SQuAD train slice (resumable)",
                       description=train_doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output", required=True, metavar="DIR", help="model folder to write (and resume from)")
    add_arguments(p, TrainConfig)  # every training setting, with its help, from the config's fields
    p.add_argument("--limit", type=_k, default=None, help="use only the first N questions (smoke tests)")
    p.add_argument("--examples-cache", metavar="JSON", help="where the questions with their negatives are "
                   "kept, to share between runs (default: OUTPUT/examples.json)")
    p.add_argument("--threads", type=_k, default=None, help="torch CPU threads")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_train)


def cmd_train(args: argparse.Namespace) -> int:
    from sparc_es.options import from_arguments
    from sparc_es.training.examples import squad_examples
    from sparc_es.training.train import TrainConfig, train

    _set_threads(args.threads)
    config = from_arguments(args, TrainConfig)
    summary = train(config, args.output, squad_examples(config, args.output, args.limit, args.examples_cache),
                    progress=not args.quiet)
    print(f"trained {summary['steps']} steps in {summary['seconds']:.0f} s ({summary['questions_per_second']} "
          f"questions/s on {summary['device']}); exp(w) = {summary['exp_w']:.2f}; model in {args.output}")
    return 0


def _adapt_parser(sub) -> None:
    from sparc_es.options import add_arguments
    from sparc_es.training.adapt import AdaptConfig, __doc__ as adapt_doc

    p = sub.add_parser("adapt", help="adapt a model to your corpus on the CPU (embedding replacement; resumable)",
                       description=adapt_doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", nargs="+", required=True, metavar="PATH",
                   help="the target corpus: what encode takes (JSONL, .txt, .md files or folders)")
    p.add_argument("--output", required=True, metavar="DIR", help="adapted model folder to write (and resume from)")
    p.add_argument("--model", default="default", help="SPARC model folder to adapt (default: %(default)s)")
    p.add_argument("--base", metavar="DIR", help="its base checkpoint (default: found from the model's provenance)")
    add_arguments(p, AdaptConfig)  # every adaptation setting, with its help, from the config's fields
    p.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    p.add_argument("--threads", type=_k, default=None, help="torch CPU threads")
    p.add_argument("--device", default="auto", help="where E is trained: auto (a GPU when torch sees one), cpu, "
                   "cuda or cuda:N (default: %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_adapt)


def cmd_adapt(args: argparse.Namespace) -> int:
    from sparc_es.model import resolve_device
    from sparc_es.options import from_arguments
    from sparc_es.training.adapt import AdaptConfig, adapt

    _set_threads(args.threads)
    config = from_arguments(args, AdaptConfig)
    record = adapt(args.model, args.corpus, args.output, config, base=args.base, overwrite=args.overwrite,
                   progress=not args.quiet, device=resolve_device(args.device))
    print(f"adapted E on {record['sentences']} sentences in {record['seconds']:.0f} s ({record['steps']} steps, "
          f"MLM loss {record['loss_first_10']:.2f} -> {record['loss_last_10']:.2f}); model in {args.output}")
    return 0


def _eval_parser(sub) -> None:
    p = sub.add_parser("eval", help="score a TREC run against TREC qrels",
                       description="MRR@1000, R@1 (first hit relevant), nDCG@10 and R@100 through trec_eval's "
                       "own code (ir_measures, pytrec_eval), averaged over every judged query: a query the "
                       "run leaves out counts as 0.")
    p.add_argument("--run", required=True, metavar="RUN")
    p.add_argument("--qrels", required=True, metavar="QRELS")
    p.add_argument("--baseline", metavar="RUN", help="also compare with this run of the same queries: each measure's "
                   "difference with a paired bootstrap 95%% interval and how many queries changed")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_eval)


def cmd_eval(args: argparse.Namespace) -> int:
    from sparc_es.evaluation.measures import compare, evaluate_file
    from sparc_es.evaluation.trec import read_qrels

    qrels = read_qrels(args.qrels)
    unjudgeable = [q for q, judged in qrels.items() if not any(r > 0 for r in judged.values())]
    if unjudgeable:
        _warn(f"{len(unjudgeable)} of {len(qrels)} queries of {args.qrels} have no relevant document (relevance > 0), "
              f"e.g. {unjudgeable[0]!r}: they count 0 in every mean")
    if args.baseline:  # the runs are read from their files one query at a time, as without --baseline
        differences = compare(Path(args.run), Path(args.baseline), qrels)
        if args.json:
            print(json.dumps({"run": str(args.run), "baseline": str(args.baseline), "queries": len(qrels),
                              "measures": [{**vars(d), "delta": d.delta} for d in differences]}))
            return 0
        print(f"{len(qrels)} judged queries; run minus baseline, paired bootstrap 95% interval")
        print(f"{'':10} {'run':>6} {'base':>6} {'diff':>6}  {'interval':<16} changed")
        for d in differences:
            print(f"{d.measure:<10} {100 * d.run:6.2f} {100 * d.baseline:6.2f} {100 * d.delta:+6.2f}  "
                  f"[{100 * d.low:+.2f}, {100 * d.high:+.2f}]  {d.changed}")
        return 0
    scores = evaluate_file(args.run, qrels)
    if args.json:
        print(json.dumps({"run": str(args.run), "queries": len(qrels), **scores}))
    else:
        print(f"{len(qrels)} judged queries (missing or empty results count as 0)")
        for name, value in scores.items():
            print(f"{name:<10} {100 * value:6.2f}")
    return 0


def _evalset_parser(sub) -> None:
    from sparc_es.evaluation.evalsets import DOMAINS

    p = sub.add_parser("evalset", help="build an evaluation set (corpus, topics, qrels) for run, eval and table",
                       description="From MRQA data, the revised MultiReQA protocol: every sentence of every passage "
                       "is a candidate, sentences overlapping an answer span are relevant, identical questions are "
                       "merged. From a BEIR folder: documents split into sentences, document-level qrels. The "
                       "output folder is a domain for `sparc-es table --domains DIR`.")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--domain", choices=list(DOMAINS), help="one of the project's sets, from ../shared/data")
    source.add_argument("--mrqa", metavar="FILE", help="any MRQA .jsonl.gz file")
    source.add_argument("--beir", metavar="DIR", help="a BEIR folder: corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv")
    source.add_argument("--docs", metavar="DIR", help="your own documents (what encode --corpus reads), with "
                        "--questions and --answers: sentences whose text matches a question's answer pattern "
                        "are its relevant ones")
    p.add_argument("--questions", metavar="FILE", help="with --docs: qid<TAB>question per line")
    p.add_argument("--answers", metavar="FILE", help="with --docs: qid<TAB>pattern[<TAB>file] per line, a "
                   "case-insensitive regular expression matching the answer in its sentence, optionally only "
                   "in that file (relative to DIR); several lines per question allowed")
    p.add_argument("--candidates", metavar="FILE", help="with --mrqa: its MultiReQA candidates .json.gz, for the "
                   "MultiReQA sentence boundaries (default: the project's sentence splitter)")
    p.add_argument("--split", default="test", help="with --beir: the qrels split (default: %(default)s)")
    p.add_argument("--name", help="the set's name in tables (default: the file's or folder's)")
    p.add_argument("--output", required=True, metavar="DIR")
    p.add_argument("--data", metavar="DIR", help="data folder (default: $SPARC_ES_DATA or ../shared/data)")
    p.set_defaults(func=cmd_evalset)


def cmd_evalset(args: argparse.Namespace) -> int:
    from sparc_es.evaluation.evalsets import beir_eval_set, build_eval_set, docs_eval_set, mrqa_eval_set

    if args.candidates and not args.mrqa:
        raise SparcError("--candidates goes with --mrqa")
    if (args.docs, args.questions, args.answers).count(None) not in (0, 3):
        raise SparcError("--docs, --questions and --answers go together")
    if args.docs:
        evalset, unanswered = docs_eval_set(args.docs, args.questions, args.answers, args.name)
        if unanswered:
            print(f"sparc-es: {len(unanswered)} question(s) left out, no sentence matches their answer pattern: "
                  f"{', '.join(unanswered[:10])}{' ...' if len(unanswered) > 10 else ''}", file=sys.stderr)
    elif args.domain:
        evalset = build_eval_set(args.domain, args.data)
    elif args.mrqa:
        evalset = mrqa_eval_set(args.mrqa, args.candidates, args.name)
    else:
        evalset = beir_eval_set(args.beir, args.split, args.name)
    evalset.check(args.docs or args.mrqa or args.beir or args.domain)
    folders.check_apart(args.output, [args.docs, args.mrqa, args.beir, args.questions, args.answers, args.candidates],
                        "--output")
    for note in evalset.notes:
        _warn(note)
    paths = evalset.write(args.output)
    merged = "merged " if evalset.level == "sentence" else ""
    print(f"{evalset.name}: {len(evalset.sentences)} sentences, {len(evalset.topics)} {merged}queries, "
          f"{sum(map(len, evalset.qrels.values()))} {evalset.level} judgements -> "
          + ", ".join(str(p) for p in paths.values()))
    return 0


def _table_parser(sub) -> None:
    from sparc_es.evaluation.table import __doc__ as table_doc

    p = sub.add_parser("table", help="evaluate systems over domains: JSON and a Markdown table",
                       description=table_doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--systems", default="bm25,bm25-paper,sparc", help="comma-separated (default: %(default)s)")
    p.add_argument("--domains", default="squad,newsqa",
                   help="comma-separated: squad, newsqa, val, or evaluation set folders (default: %(default)s)")
    p.add_argument("--workdir", default="runs", help="cache of sets, encodings, indexes, runs (default: %(default)s)")
    p.add_argument("--data", metavar="DIR", help="data folder (default: $SPARC_ES_DATA or ../shared/data)")
    p.add_argument("--json", help="(default: WORKDIR/table.json)")
    p.add_argument("--markdown", help="(default: WORKDIR/table.md)")
    p.add_argument("-k", type=_hits, default=1000, help="hits per query (default: %(default)s)")
    p.add_argument("--threads", type=_k, default=None, help="torch and search threads (default: 2)")
    from sparc_es.evaluation.table import BATCH

    p.add_argument("--batch", type=_k, default=BATCH, help="questions searched at once; a batch's hits, for each "
                   "system, are all the hits held in memory: runs go to files and are scored from them "
                   "(default: %(default)s)")
    p.set_defaults(func=cmd_table)


def cmd_table(args: argparse.Namespace) -> int:
    from sparc_es.evaluation.table import run_table, split_systems, write_table

    _set_threads(args.threads)
    json_path = args.json or str(Path(args.workdir) / "table.json")
    markdown_path = args.markdown or str(Path(args.workdir) / "table.md")
    given = [d for d in args.domains.split(",") if Path(d).exists()]  # evaluation set folders
    for flag, path in (("--json", json_path), ("--markdown", markdown_path)):
        folders.check_file_output(path, flag)
        folders.check_apart(path, given, flag)
    if not split_systems(args.systems) or not [d for d in args.domains.split(",") if d.strip()]:
        raise SparcError("--systems and --domains each name at least one")
    rows = run_table(split_systems(args.systems), args.domains.split(","), args.workdir, args.data,
                     k=args.k, threads=args.threads or 2, batch=args.batch)
    write_table(rows, json_path, markdown_path)
    print(f"wrote {json_path} and {markdown_path}")
    return 0


def _explain_parser(sub) -> None:
    p = sub.add_parser("explain", help="why a hit scored what it did, token by token; or a sentence's (token, "
                       "weight) pairs",
                       description="With --index: explain INDEX's hits for a question (explain --index INDEX "
                       "\"question\" ID_OR_RANK ...): for each question token, the integer impact each hit stores "
                       "(what the engine sums) and how the model made it (neural f, passage term, top-K cut, IDF "
                       "factor, lexical term, stem siblings, whole words), made again from the hit's text and "
                       "context with the index's model, settings and corpus statistics and checked against the "
                       "index; each hit's sum equals Lucene's score. A hit is a sentence id, or a rank in "
                       "`search`'s answer (same --hybrid; an id wins over a rank). Without --index: the "
                       "highest-scoring tokens f(v, s) of one sentence, as in the SPARTA paper's table 6 (a "
                       "model's lexical term is left out: it needs a corpus's statistics).")
    p.add_argument("text", nargs="+", metavar="TEXT", help="the sentence; with --index, the question and then "
                   "one or more hits (ids or ranks)")
    p.add_argument("--index", metavar="DIR", help="a Lucene index whose hits to explain; its model is loaded as "
                   "--model (it must be the one the index was encoded with) with the index's K, max length "
                   "and max-over")
    p.add_argument("--context", help="without --index: the passage the sentence comes from")
    p.add_argument("--top", type=_k, default=20, help="without --index: tokens to show (default: %(default)s)")
    p.add_argument("--no-collapse", dest="collapse", action="store_false",
                   help="with --index: ranks count every sentence, as search --no-collapse shows them (by default "
                        "the sentences of one paragraph are one hit, as search shows them)")
    p.add_argument("--json", action="store_true")
    _model_args(p)
    _hybrid_args(p, "ranks (with --index): search's, with or without BM25")
    p.set_defaults(func=cmd_explain)


def cmd_explain(args: argparse.Namespace) -> int:
    if args.index:
        return _explain_hits(args)
    _refuse(args, HYBRID, "ranks the hits of --index: it needs --index")
    if len(args.text) != 1:
        raise SparcError("explain takes one sentence (in quotes); with --index, the question and the hits to explain")
    args.sentence = args.text[0]
    from sparc_es.model.query import check_question

    check_question(args.sentence)
    if not args.sentence.strip():
        raise SparcError("empty sentence")
    model = _load_model(args)
    pairs = model.explain(args.sentence, args.context or "", top=args.top)
    if args.json:
        print(json.dumps([{"token": t, "weight": round(w, 4)} for t, w in pairs], ensure_ascii=False))
    else:
        print(f"{'token':<16} f(v, s)")
        for t, w in pairs:
            print(f"{t:<16} {w:.3f}")
    return 0


def _explain_hits(args: argparse.Namespace) -> int:
    """``explain --index INDEX "question" ID_OR_RANK ...`` (:mod:`sparc_es.answers.explain`)."""
    from sparc_es.answers.explain import Explainer, table
    from sparc_es.engines import open_engine
    from sparc_es.model import resolve_device

    _refuse(args, ("context",), "is the passage of a sentence explained alone: with --index, hits are explained "
                                "with their own context")
    _refuse(args, ("top_k", "max_length", "max_over"), "does not apply with --index: the index's own settings are "
                                                       "used")
    if len(args.text) < 2:
        raise SparcError("explain --index INDEX \"question\" ID_OR_RANK ...: name at least one hit (its id or rank)")
    question, wanted = args.text[0], args.text[1:]
    if not question.strip():
        raise SparcError("empty question")
    from sparc_es.model.query import check_question

    check_question(question)
    _set_threads(args.threads)
    device = resolve_device(args.device)
    engine = open_engine("lucene", args.index, hybrid=args.hybrid or "default", hybrid_weight=args.hybrid_weight,
                         notice=_warn)
    explainer = Explainer(args.index, engine, args.model, device, collapse=args.collapse)
    try:
        result = explainer.explain(question, wanted)
    finally:
        explainer.close()
    print(json.dumps(result, ensure_ascii=False) if args.json else _printable(table(result)))
    return 0


def _demo_parser(sub) -> None:
    p = sub.add_parser("demo", help="encode, index and query the bundled demo corpus",
                       description="The main job end to end on the embedded Lucene engine: encode the "
                       "project's own documentation, index it, and answer a few questions.")
    p.add_argument("--workdir", default=".sparc-demo", help="where the encoded folder and index go "
                   "(replaced on each run if an earlier demo made it; any other existing folder is refused; "
                   "default: %(default)s)")
    p.add_argument("-k", type=_hits, default=3, help="hits per question (default: %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _model_args(p)
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from sparc_es.answers.show import Presenter, answer
    from sparc_es.encode.run import IDF_DEFAULT, encode_corpus
    from sparc_es.engines import open_engine
    from sparc_es.engines.hybrid import DEFAULT_METHOD
    from sparc_es.engines.lucene import build_index
    from sparc_es.evaluation.trec import read_topics

    demo = resources.files("sparc_es") / "demo"
    with resources.as_file(demo) as demo_dir:
        work = Path(args.workdir)
        folders.remove(work, "demo")  # only a folder an earlier demo made
        folders.claim(work, "demo")
        model = _load_model(args)
        print(f"model: {args.model} (base {model.config.base_model.get('name', '?')}, fingerprint "
              f"{model.fingerprint}, exp(w)={float(model.w.detach().exp()):.2f}, K={model.config.top_k})")
        manifest = encode_corpus([demo_dir], work / "encoded", model, progress=not args.quiet, idf=IDF_DEFAULT)
        _report_encode(manifest)
        index = build_index(work / "encoded", work / "index").index
        print(f"indexed {manifest.sentences} sentences of {demo_dir.name}/ in {index.build_seconds:.1f} s "
              f"({manifest.sentences_per_second} sentences/s encoded)\n")
        engine = open_engine("lucene", work / "index", hybrid=DEFAULT_METHOD)  # what search does
        presenter = Presenter(engine, work / "index")
        for _, question in read_topics(demo_dir / "questions.tsv"):
            _print_hits(question, *answer(engine, presenter, question, args.k))
            print()
        presenter.close()
        engine.close()
    print(f"index kept in {work / 'index'}: try  sparc-es search --index {work / 'index'} \"your question\"")
    return 0


# --- parser --------------------------------------------------------------------------------

PARSERS = (_encode_parser, _requantize_parser, _index_parser, _search_parser, _serve_parser, _run_parser,
           _query_dsl_parser, _train_parser,
           _adapt_parser, _eval_parser, _evalset_parser, _table_parser, _explain_parser, _demo_parser)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="SPARC learned sparse retrieval on a CPU: encode sentences once into "
        "top-K token weights, index them in Lucene, answer questions as sums of stored weights.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n", 2)[2].split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the Python traceback of an error "
                        "(also SPARC_ES_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in PARSERS:
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``sparc-es`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    debug = args.debug or os.environ.get("SPARC_ES_DEBUG", "") not in ("", "0")
    try:
        return args.func(args)
    except KeyboardInterrupt as e:  # a command may say how it goes on (adapt: from which checkpoint)
        print(f"{PROG}: {str(e) or 'interrupted; run the same command again to resume'}", file=sys.stderr)
        return 130
    except Exception as e:
        if debug:
            raise
        print(f"{PROG}: error: {_printable(_one_line(e), one_line=True)}", file=sys.stderr)
        return 1


def _one_line(e: Exception) -> str:
    """What went wrong, on one line: the message of a sparc-es error; the file and reason of an OS
    error (disk full, permission denied); the type and message of anything else."""
    if isinstance(e, SparcError):
        text = str(e)
    elif isinstance(e, OSError):
        text = f"{e.filename + ': ' if e.filename else ''}{e.strerror or e}"
    else:  # not foreseen: still one line, and where to see more
        text = f"{type(e).__name__}: {e} (rerun with --debug for the traceback)"
    return " ".join(text.split())


if __name__ == "__main__":
    sys.exit(main())
