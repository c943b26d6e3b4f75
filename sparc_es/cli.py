"""``sparc-es``: one console script, a sub-command per stage, each a thin call into the library.

    sparc-es encode  --corpus DOCS --output ENCODED     sentences -> top-K integer impacts
    sparc-es requantize --input ENCODED --output NEW --idf   IDF / another factor, no re-encoding
    sparc-es index   --input ENCODED --index INDEX      impacts -> Lucene impact index (or --engine es)
    sparc-es search  --index INDEX "question"           top sentences with text, document, score
    sparc-es serve   --index INDEX [--port 8000]        HTTP JSON API and search page, one engine start
    sparc-es run     --index INDEX --topics T --output RUN   topics TSV -> TREC run file
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
import os
import sys
import time
from importlib import resources
from pathlib import Path

from . import __version__, folders
from .errors import SparcError

PROG = "sparc-es"


def _warn(message: str) -> None:
    print(f"{PROG}: warning: {message}", file=sys.stderr)


def _k(value: str) -> int:
    k = int(value)
    if k < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return k


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
    g.add_argument("--threads", type=int, default=None, metavar="N",
                   help="torch CPU threads (default: torch's choice)")
    g.add_argument("--device", default="auto", metavar="DEVICE",
                   help="where the model runs: auto (a GPU when torch sees one, else the CPU), cpu, cuda or "
                        "cuda:N (default: %(default)s)")


def _load_model(args: argparse.Namespace):
    from .model import SparcModel, resolve_device

    _set_threads(args.threads)
    device = resolve_device(args.device)  # before loading: a wrong device fails at once
    overrides = {name: getattr(args, name) for name in ("top_k", "max_length", "max_over")
                 if getattr(args, name) is not None}
    model = SparcModel.load(args.model, **overrides)
    return model if device == "cpu" else model.to(device)


def _es_query_args(g) -> None:
    """How a question is turned into an Elasticsearch request (search, run, query-dsl)."""
    from .engines.elastic import QueryMode

    g.add_argument("--tokenizer", metavar="DIR", help="encoded folder, index or model folder whose tokenizer "
                   "splits the question (default: --index, else the default model's)")
    g.add_argument("--query-mode", choices=[m.value for m in QueryMode], default=QueryMode.RANK_FEATURE.value,
                   help="dot product through rank_feature clauses (linear, boost = count) or one "
                        "sparse_vector query (default: %(default)s)")
    g.add_argument("--bm25-weight", type=float, default=0.0, metavar="B",
                   help="add a BM25 match clause on the text with this boost (hybrid; default: off)")


def _engine_args(p: argparse.ArgumentParser, kinds: list[str], query: bool = True) -> None:
    p.add_argument("--engine", choices=kinds, default="lucene",
                   help="lucene: the embedded impact index; es: an Elasticsearch cluster"
                        + ("; bm25: the Lucene BM25 index built beside the impact index (a baseline)"
                           if "bm25" in kinds else "") + " (default: %(default)s)")
    g = _es_connection_args(p, "Elasticsearch (--engine es)")
    g.add_argument("--es-index", help="index name (default: $SPARC_ES_INDEX)")
    if not query:
        return
    _es_query_args(g)
    from .engines.hybrid import BM25_WEIGHT, DEFAULT_METHOD

    g = p.add_argument_group("hybrid with BM25 (Lucene engine; uses the BM25 index built beside the impact index)")
    g.add_argument("--hybrid", choices=["sum", "rrf", "none"],
                   help="fuse with BM25: a weighted sum of min-max-normalised scores, reciprocal-rank fusion, or "
                        f"none (SPARC alone). Default: {DEFAULT_METHOD.value} on the Lucene engine when the index "
                        "has its BM25 index (chosen on the validation domains, docs/evaluation.md), else none")
    g.add_argument("--hybrid-weight", type=float, metavar="A",
                   help=f"BM25's share of the --hybrid sum, 0 to 1 (default: {BM25_WEIGHT}, chosen with the "
                        "default on the validation domains)")


def _es_connection_args(p: argparse.ArgumentParser, title: str):
    g = p.add_argument_group(f"{title}; secrets also from the environment, never printed")
    g.add_argument("--es-url", help="cluster URL (default: $SPARC_ES_URL)")
    g.add_argument("--es-api-key", help="API key (default: $SPARC_ES_API_KEY)")
    g.add_argument("--es-user", help="basic auth user (default: $SPARC_ES_USER)")
    g.add_argument("--es-password", help="basic auth password (default: $SPARC_ES_PASSWORD)")
    g.add_argument("--es-ca-certs", help="CA bundle for TLS (default: $SPARC_ES_CA_CERTS)")
    g.add_argument("--es-timeout", type=float, default=60.0, metavar="SECONDS",
                   help="per request (default: %(default)s)")
    g.add_argument("--es-retries", type=int, default=3, metavar="N",
                   help="retries with backoff on connection errors, timeouts and 429/502/503/504 "
                        "(default: %(default)s)")
    return g


def _connection(args: argparse.Namespace):
    from .engines.elastic import Connection

    return Connection.from_env(args.es_url, timeout=args.es_timeout, retries=args.es_retries, api_key=args.es_api_key,
                               username=args.es_user, password=args.es_password, ca_certs=args.es_ca_certs)


def _es_index(args: argparse.Namespace) -> str:
    name = args.es_index or os.environ.get("SPARC_ES_INDEX")
    if not name:
        raise SparcError("no Elasticsearch index name: pass --es-index or set SPARC_ES_INDEX")
    return name


def _open_engine(args: argparse.Namespace):
    from .engines import open_engine

    if args.engine == "es":
        return open_engine("es", args.index, connection=_connection(args), es_index=_es_index(args),
                           tokenizer=args.tokenizer, query_mode=args.query_mode, bm25_weight=args.bm25_weight,
                           hybrid=_hybrid(args))
    hybrid = _hybrid(args)
    return open_engine(args.engine, args.index, hybrid=hybrid, hybrid_weight=args.hybrid_weight)


def _hybrid(args: argparse.Namespace) -> str | None:
    """``--hybrid`` as given, else the default: the sum on the Lucene engine where the index has its BM25
    index (a notice where it has none). ``--hybrid-weight`` applies to a sum only."""
    from .engines.bm25 import LuceneBM25
    from .engines.hybrid import DEFAULT_METHOD

    hybrid = args.hybrid
    if hybrid is None and args.engine == "lucene" and args.index:
        if LuceneBM25.exists_beside(args.index):
            hybrid = DEFAULT_METHOD.value
        elif args.hybrid_weight is None:
            _warn(f"{args.index} has no BM25 index beside it (built with --no-bm25): searching with SPARC alone, "
                  "not the default hybrid")
    hybrid = None if hybrid == "none" else hybrid
    if args.hybrid_weight is not None and hybrid != "sum":
        raise SparcError("--hybrid-weight is BM25's share of a hybrid sum: it needs --hybrid sum (or the default "
                         "hybrid, on a Lucene index with its BM25 index)")
    return hybrid


def _printable(text: str) -> str:
    """Text safe for a terminal: control characters (escape codes) shown as U+FFFD."""
    from .corpus import CONTROL

    return CONTROL.sub("\ufffd", text)


def _print_hits(hits) -> None:
    if not hits:
        print("  (no sentence shares a token with the question)")
    for rank, h in enumerate(hits, start=1):
        where = h.doc or h.id
        if h.start is not None:
            where += f":{h.start}-{h.end}"
        print(f"{rank:3d}. {h.score:8.2f}  {_printable(h.text)}\n{'':15}[{_printable(where)}]")


def _report_encode(manifest) -> None:
    if manifest.truncated_sentences:
        _warn(f"{manifest.truncated_sentences} sentences were longer than {manifest.model.max_length} tokens and "
              f"were truncated (e.g. {', '.join(manifest.truncated_ids)}); raise --max-length to keep them whole")
    if manifest.empty_vectors:
        _warn(f"{manifest.empty_vectors} sentences have no token weight above 0.5/factor and cannot be "
              "retrieved; raise --factor")
    if manifest.control_characters_removed:
        _warn(f"removed {manifest.control_characters_removed} control characters (NUL, ESC, ...) from the corpus "
              f"text (e.g. in {', '.join(manifest.cleaned_ids)})")
    if manifest.truncated_contexts:
        _warn(f"{manifest.truncated_contexts} of {manifest.sentences} contexts were cut to fit "
              f"{manifest.model.max_length} tokens with their sentence (the sentence itself is kept whole)")


# --- commands ------------------------------------------------------------------------------

def _encode_parser(sub) -> None:
    from .layout import DEFAULT_FACTOR

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
    from .encode import IDF_DEFAULT

    p.add_argument("--idf", action=argparse.BooleanOptionalAction, default=IDF_DEFAULT,
                   help="multiply each kept neural weight (after the top-K cut) by log(N / N_v) over this corpus "
                        "(paper 004; recorded in meta.json, kept by --update). On by default: it gained on every "
                        "validation domain, most on documentation (docs/evaluation.md)")
    p.add_argument("--keep-floats", action="store_true",
                   help="also store the unquantised weights, so `sparc-es requantize` can derive IDF-weighted or "
                        "re-quantised folders later without encoding again (about 2x the vectors file)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _model_args(p)
    g = _es_connection_args(p, "reading from Elasticsearch (--from-es)")
    g.add_argument("--text-field", help="the field holding each document's text (required with --from-es)")
    g.add_argument("--id-field", help="take document ids from this field (default: _id)")
    g.add_argument("--title-field", help="a title field put before each paragraph in the context")
    g.add_argument("--es-query", metavar="JSON", help="query DSL selecting the documents (default: all)")
    g.add_argument("--format", choices=["text", "markdown", "rst", "html"], default="text",
                   help="how the text field is written: split as plain text, or read as Markdown, "
                        "reStructuredText or HTML (section titles go into the context) (default: %(default)s)")
    p.set_defaults(func=cmd_encode)


def cmd_encode(args: argparse.Namespace) -> int:
    from .encode import encode_corpus

    if args.corpus:  # say at once which files of the folders will not be read
        from .corpus import CorpusStats, corpus_files

        listed = CorpusStats()
        corpus_files(args.corpus, listed)
        if listed.skipped_files:
            _warn(listed.skipped_notice())
    corpus = args.corpus or _es_source(args)
    model = _load_model(args)
    batch_size = args.batch_size or (32 if model.device.type == "cpu" else 256)  # a GPU wants larger batches
    manifest = encode_corpus(corpus, args.output, model, factor=args.factor, batch_size=batch_size,
                             shard_size=args.shard_size, overwrite=args.overwrite, progress=not args.quiet,
                             idf=args.idf, keep_floats=args.keep_floats, update=args.update)
    _report_encode(manifest)
    reused = f", {manifest.reused} unchanged kept, {manifest.sentences - manifest.reused} encoded" \
        if args.update else ""
    print(f"encoded {manifest.sentences} sentences into {args.output} "
          f"(K={manifest.top_k}, at most {manifest.max_postings} tokens stored per sentence, "
          f"factor={manifest.factor:g}{', IDF-weighted' if manifest.idf else ''}, "
          f"{manifest.sentences_per_second} sentences/s{reused})")
    return 0


def _es_source(args: argparse.Namespace):
    from .engines.elastic import ElasticSource, check_index_name

    if not args.text_field:
        raise SparcError("--from-es needs --text-field (the field that holds each document's text)")
    try:
        query = json.loads(args.es_query) if args.es_query else None
    except ValueError as e:
        raise SparcError(f"--es-query is not valid JSON: {e}") from None
    return ElasticSource(_connection(args).client(), check_index_name(args.from_es), args.text_field,
                         id_field=args.id_field, title_field=args.title_field, query=query, format=args.format)


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
    from .requantize import requantize

    manifest = requantize(args.input, args.output, args.factor, idf=args.idf)
    _report_encode(manifest)
    print(f"wrote {manifest.sentences} sentences into {args.output} (factor={manifest.factor:g}"
          f"{', IDF-weighted' if manifest.idf else ''}, {manifest.postings / max(manifest.sentences, 1):.1f} "
          "postings per sentence)")
    return 0


def _index_parser(sub) -> None:
    from .engines.elastic import FieldType

    p = sub.add_parser("index", help="build a Lucene impact index from an encoded folder",
                       description="Build a Lucene impact index (in-process; Pyserini searches it) from an "
                       "encoded folder, with a Lucene BM25 index of the same texts beside it, and check that no "
                       "sentence was lost; or load it into Elasticsearch.")
    p.add_argument("--input", required=True, metavar="ENCODED", help="folder written by sparc-es encode")
    p.add_argument("--index", metavar="DIR", help="Lucene index folder to write")
    p.add_argument("--overwrite", action="store_true", help="replace an existing Lucene index folder")
    p.add_argument("--no-bm25", action="store_true",
                   help="skip the BM25 index of the sentence texts that --hybrid and --engine bm25 search")
    _engine_args(p, ["lucene", "es"], query=False)
    g = p.add_argument_group("Elasticsearch loading")
    g.add_argument("--chunk-size", type=_k, default=500, help="documents per bulk request (default: %(default)s)")
    g.add_argument("--recreate", action="store_true", help="delete and recreate the ES index first")
    g.add_argument("--field-type", choices=[t.value for t in FieldType], default=FieldType.RANK_FEATURES.value,
                   help="ES field type; sparse_vector (ES 8.15+) enables --query-mode sparse_vector "
                        "(default: %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=cmd_index)


def cmd_index(args: argparse.Namespace) -> int:
    if args.engine == "es":
        from .engines import elastic

        client = _connection(args).client()
        result = elastic.build_index(args.input, client, _es_index(args), chunk_size=args.chunk_size,
                                     recreate=args.recreate, field_type=args.field_type, progress=not args.quiet)
        print(f"loaded {result['loaded']} sentences into Elasticsearch index {result['index']!r} "
              f"({result['already_there']} unchanged, {result['deleted']} deleted; {result['count']} documents, "
              "count checked)")
        return 0
    from .engines import lucene

    if not args.index:
        raise SparcError("--index DIR is required for the Lucene engine")
    manifest = lucene.build_index(args.input, args.index, overwrite=args.overwrite, bm25=not args.no_bm25,
                                  progress=not args.quiet)
    info = manifest.index
    if manifest.empty_vectors:
        _warn(f"{manifest.empty_vectors} sentences have no weights and are not in the index")
    print(f"indexed {info.documents} sentences into {args.index} in {info.build_seconds:.1f} s "
          f"({info.bytes / 1e6:.1f} MB)")
    if info.bm25:
        print(f"  and their texts for BM25 (--hybrid, --engine bm25) in {info.bm25['build_seconds']:.1f} s "
              f"({info.bm25['bytes'] / 1e6:.1f} MB)")
    return 0


def _search_parser(sub) -> None:
    p = sub.add_parser("search", help="answer questions from an index",
                       description="Print the top sentences for each question with score, text and "
                       "document position. The question is a bag of WordPiece tokens: no model runs.")
    p.add_argument("--index", metavar="DIR", help="Lucene index folder")
    p.add_argument("question", nargs="+", help="one or more questions; '-' alone reads one question per line "
                   "from standard input (one engine start for all)")
    p.add_argument("-k", type=_k, default=10, help="hits per question (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print hits as one JSON document: the list of hits of "
                   "one question, or a list of {question, hits} for several; with '-', one {question, hits} "
                   "object per line")
    _engine_args(p, ["lucene", "es", "bm25"])
    p.set_defaults(func=cmd_search)


def cmd_search(args: argparse.Namespace) -> int:
    if "-" in args.question:
        if len(args.question) > 1:
            raise SparcError("'-' (questions from standard input) goes alone, without other questions")
        return _search_stdin(args)
    if any(not q.strip() for q in args.question):
        raise SparcError("empty question")
    engine = _open_engine(args)
    answers = []
    try:
        for question in args.question:
            hits = engine.search(question, args.k)
            if args.json:
                answers.append({"question": question, "hits": [h.to_json() for h in hits]})
            else:
                print(f"Q: {_printable(question)}")
                _print_hits(hits)
    finally:
        engine.close()
    if args.json:  # one JSON document: the hits of one question, or a list of {question, hits}
        print(json.dumps(answers[0]["hits"] if len(answers) == 1 else answers, ensure_ascii=False, indent=2))
    return 0


def _search_stdin(args: argparse.Namespace) -> int:
    """``search -``: one question per line of standard input (blank lines skipped), answered as it
    comes; with ``--json`` one ``{question, hits}`` object per line."""
    engine = _open_engine(args)
    try:
        for line in sys.stdin:
            question = line.strip()
            if not question:
                continue
            hits = engine.search(question, args.k)
            if args.json:
                print(json.dumps({"question": question, "hits": [h.to_json() for h in hits]}, ensure_ascii=False))
            else:
                print(f"Q: {_printable(question)}")
                _print_hits(hits)
            sys.stdout.flush()  # a reader of a pipe gets each answer as it comes
    finally:
        engine.close()
    return 0


def _serve_parser(sub) -> None:
    p = sub.add_parser("serve", help="answer questions over HTTP: a JSON API and a search page",
                       description="Open the index once (the engine `search` opens, with the same defaults) and "
                       "serve it over HTTP until interrupted: GET /health, GET|POST /search, POST /batch, "
                       "GET /sentences/{id}, and a search page at /. Needs the serve extra "
                       "(pip install 'sparc-es[serve]').")
    p.add_argument("--index", metavar="DIR", help="Lucene index folder")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on; the default is this machine only, "
                   "0.0.0.0 every interface (the API has no authentication) (default: %(default)s)")
    p.add_argument("--port", type=_port, default=8000, help="0 takes a free one (default: %(default)s)")
    p.add_argument("--log-level", choices=["critical", "error", "warning", "info", "debug"], default="info",
                   help="uvicorn's log level; info logs every request (default: %(default)s)")
    _engine_args(p, ["lucene", "es", "bm25"])
    p.set_defaults(func=cmd_serve)


def _port(value: str) -> int:
    port = int(value)
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError("must be between 0 and 65535")
    return port


def cmd_serve(args: argparse.Namespace) -> int:
    from . import server

    sock = server.listen(args.host, args.port)  # a taken port says so before the JVM starts
    try:
        engine = _open_engine(args)
        try:
            service = server.Service(engine, args.index, args.engine)
        except BaseException:
            engine.close()
            raise
    except BaseException:
        sock.close()
        raise
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"serving {args.index or args.es_index} on http://{host}:{sock.getsockname()[1]}/ (Ctrl-C stops)",
          file=sys.stderr, flush=True)
    try:
        server.serve(service, sock, log_level=args.log_level)
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
    p.add_argument("-k", type=_k, default=1000, help="hits per query (default: %(default)s)")
    p.add_argument("--threads", type=_k, default=1, help="search threads (default: %(default)s)")
    p.add_argument("--tag", default="sparc-es", help="run tag, last column (default: %(default)s)")
    p.add_argument("--documents", action="store_true",
                   help="rank documents, not sentences: each document scored by its best sentence among the "
                        "top --depth sentences, document ids in the run file (for document-level qrels)")
    p.add_argument("--depth", type=_k, default=1000,
                   help="with --documents: sentences retrieved per query before grouping (default: %(default)s)")
    p.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    from .trec import TrecRunWriter, read_topics

    topics = list(read_topics(args.topics))
    engine = _open_engine(args)
    try:
        started = time.perf_counter()
        results = engine.batch_search(topics, k=max(args.depth, args.k) if args.documents else args.k,
                                      threads=args.threads)
        seconds = time.perf_counter() - started
    finally:
        engine.close()
    if args.documents:
        results = _by_document(args, results)
        short = sum(len(hits) < args.k for hits in results.values())
        if short:
            _warn(f"{short} of {len(topics)} queries have fewer than {args.k} documents among their top "
                  f"{args.depth} sentences; raise --depth for more")
    with TrecRunWriter(args.output, tag=args.tag) as run:
        for qid, _ in topics:
            run.write(qid, results[qid])
    print(f"wrote {len(topics)} queries to {args.output} in {seconds:.1f} s "
          f"({1000 * seconds / max(len(topics), 1):.1f} ms/query)")
    return 0


def _by_document(args: argparse.Namespace, results: dict) -> dict:
    """Sentence hits -> the best sentence per document, ``args.k`` documents per query."""
    from .engines.base import best_per_document

    if args.engine == "es":  # hits carry their document
        doc_of = {h.id: h.doc for hits in results.values() for h in hits}
    else:
        from .layout import SENTENCES
        from .store import SentenceStore

        store = SentenceStore(Path(args.index) / SENTENCES)
        try:
            found = store.get(list({h.id for hits in results.values() for h in hits}))
        finally:
            store.close()
        doc_of = {sid: s.doc for sid, s in found.items()}
    return {qid: best_per_document(hits, doc_of, args.k) for qid, hits in results.items()}


def _query_dsl_parser(sub) -> None:
    p = sub.add_parser("query-dsl", help="print the Elasticsearch request for a question (for Kibana Dev Tools)",
                       description="Print the search request whose score is the SPARC dot product, ready to "
                       "paste into Kibana Dev Tools or send with any Elasticsearch client.")
    p.add_argument("question")
    p.add_argument("-k", type=_k, default=10, help="hits (default: %(default)s)")
    p.add_argument("--es-index", help="index name for the request line (default: $SPARC_ES_INDEX or sparc)")
    _es_query_args(p)
    p.set_defaults(func=cmd_query_dsl)


def cmd_query_dsl(args: argparse.Namespace) -> int:
    from .engines.elastic import query_body
    from .query import QueryEncoder

    queries = QueryEncoder.load(args.tokenizer or "default")
    body = query_body(queries.bag(args.question), size=args.k, mode=args.query_mode, bm25_text=args.question,
                      bm25_weight=args.bm25_weight)
    print(f"GET /{args.es_index or os.environ.get('SPARC_ES_INDEX', 'sparc')}/_search")
    print(json.dumps(body, indent=2, ensure_ascii=False))
    return 0


def _train_parser(sub) -> None:
    from .options import add_arguments
    from .train import TrainConfig, __doc__ as train_doc

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
    from .experiments.examples import squad_examples
    from .options import from_arguments
    from .train import TrainConfig, train

    _set_threads(args.threads)
    config = from_arguments(args, TrainConfig)
    summary = train(config, args.output, squad_examples(config, args.output, args.limit, args.examples_cache),
                    progress=not args.quiet)
    print(f"trained {summary['steps']} steps in {summary['seconds']:.0f} s ({summary['questions_per_second']} "
          f"questions/s on {summary['device']}); exp(w) = {summary['exp_w']:.2f}; model in {args.output}")
    return 0


def _adapt_parser(sub) -> None:
    from .adapt import AdaptConfig, __doc__ as adapt_doc
    from .options import add_arguments

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
    from .adapt import AdaptConfig, adapt
    from .model import resolve_device
    from .options import from_arguments

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
    from .eval import compare, evaluate
    from .trec import read_qrels, read_run

    qrels = read_qrels(args.qrels)
    if args.baseline:
        differences = compare(read_run(args.run), read_run(args.baseline), qrels)
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
    scores = evaluate(read_run(args.run), qrels)
    if args.json:
        print(json.dumps({"run": str(args.run), "queries": len(qrels), **scores}))
    else:
        print(f"{len(qrels)} judged queries (missing or empty results count as 0)")
        for name, value in scores.items():
            print(f"{name:<10} {100 * value:6.2f}")
    return 0


def _evalset_parser(sub) -> None:
    from .experiments.datasets import DOMAINS

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
    from .experiments.datasets import beir_eval_set, build_eval_set, docs_eval_set, mrqa_eval_set

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
    paths = evalset.write(args.output)
    merged = "merged " if evalset.level == "sentence" else ""
    print(f"{evalset.name}: {len(evalset.sentences)} sentences, {len(evalset.topics)} {merged}queries, "
          f"{sum(map(len, evalset.qrels.values()))} {evalset.level} judgements -> "
          + ", ".join(str(p) for p in paths.values()))
    return 0


def _table_parser(sub) -> None:
    from .experiments.table import __doc__ as table_doc

    p = sub.add_parser("table", help="evaluate systems over domains: JSON and a Markdown table",
                       description=table_doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--systems", default="bm25,bm25-paper,sparc", help="comma-separated (default: %(default)s)")
    p.add_argument("--domains", default="squad,newsqa",
                   help="comma-separated: squad, newsqa, val, or evaluation set folders (default: %(default)s)")
    p.add_argument("--workdir", default="runs", help="cache of sets, encodings, indexes, runs (default: %(default)s)")
    p.add_argument("--data", metavar="DIR", help="data folder (default: $SPARC_ES_DATA or ../shared/data)")
    p.add_argument("--json", default="runs/table.json", help="(default: %(default)s)")
    p.add_argument("--markdown", default="runs/table.md", help="(default: %(default)s)")
    p.add_argument("-k", type=_k, default=1000, help="hits per query (default: %(default)s)")
    p.add_argument("--threads", type=_k, default=None, help="torch and search threads (default: 2)")
    p.set_defaults(func=cmd_table)


def cmd_table(args: argparse.Namespace) -> int:
    from .experiments.table import run_table, split_systems, write_table

    _set_threads(args.threads)
    rows = run_table(split_systems(args.systems), args.domains.split(","), args.workdir, args.data,
                     k=args.k, threads=args.threads or 2)
    write_table(rows, args.json, args.markdown)
    print(f"wrote {args.json} and {args.markdown}")
    return 0


def _explain_parser(sub) -> None:
    p = sub.add_parser("explain", help="show the (token, weight) pairs of one sentence",
                       description="Print the highest-scoring tokens f(v, s) of a sentence, as in the "
                       "SPARTA paper's table 6. A model's lexical term is left out: it depends on the corpus "
                       "(its BM25 statistics), so only an encoded folder holds it.")
    p.add_argument("sentence")
    p.add_argument("--context", help="the passage the sentence comes from")
    p.add_argument("--top", type=_k, default=20, help="tokens to show (default: %(default)s)")
    p.add_argument("--json", action="store_true")
    _model_args(p)
    p.set_defaults(func=cmd_explain)


def cmd_explain(args: argparse.Namespace) -> int:
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


def _demo_parser(sub) -> None:
    p = sub.add_parser("demo", help="encode, index and query the bundled demo corpus",
                       description="The main job end to end on the embedded Lucene engine: encode the "
                       "project's own documentation, index it, and answer a few questions.")
    p.add_argument("--workdir", default=".sparc-demo", help="where the encoded folder and index go "
                   "(replaced on each run if an earlier demo made it; any other existing folder is refused; "
                   "default: %(default)s)")
    p.add_argument("-k", type=_k, default=3, help="hits per question (default: %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _model_args(p)
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from .encode import IDF_DEFAULT, encode_corpus
    from .engines import open_engine
    from .engines.hybrid import DEFAULT_METHOD
    from .engines.lucene import build_index
    from .trec import read_topics

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
        for _, question in read_topics(demo_dir / "questions.tsv"):
            print(f"Q: {question}")
            _print_hits(engine.search(question, args.k))
            print()
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
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    except Exception as e:
        if debug:
            raise
        print(f"{PROG}: error: {_one_line(e)}", file=sys.stderr)
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
