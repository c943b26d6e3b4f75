"""``sparc-es encode``: a corpus (files, or an Elasticsearch index's documents) -> an encoded folder
of top-K integer token weights, on this machine or a Ray pool."""

from __future__ import annotations

import argparse
import json

from sparc_es.cli.options import connection, es_connection_args, load_model, model_args, positive, refuse
from sparc_es.cli.output import duration, megabytes, report_encode, warn
from sparc_es.errors import SparcError
from sparc_es.layout.locks import check_free


def add_parser(sub) -> None:
    from sparc_es.layout.records import DEFAULT_FACTOR
    from sparc_es.model.idf import IDF_DEFAULT

    p = sub.add_parser("encode", help="encode a corpus into top-K integer token weights",
                       description="Encode every sentence of a corpus (JSONL records {id, text, context?}, or "
                       ".txt/.md/.rst/.html documents split into sentences) into its top-K tokens, quantised to "
                       "integers. Resumes an interrupted run when given the same output folder.")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--corpus", nargs="+", metavar="PATH", help="files or folders")
    source.add_argument("--from-es", metavar="SOURCE_INDEX", help="read the documents of an Elasticsearch index "
                        "(split into sentences, ids <document id>#<key>); see the options below")
    p.add_argument("--output", required=True, metavar="DIR", help="encoded folder to write")
    p.add_argument("--update", action="store_true",
                   help="OUTPUT holds an earlier encode of this corpus: keep the weights of unchanged sentences, "
                        "encode only new and changed ones, drop the ones gone (same model, K and factor)")
    p.add_argument("--factor", type=float, default=DEFAULT_FACTOR, metavar="F",
                   help="quantisation: integer weight = round(f(v, s) * F) (default: %(default)s)")
    p.add_argument("--min-impact", type=positive, default=1, metavar="N",
                   help="static pruning: keep only a sentence's impacts of at least N (1 keeps all); fewer postings, "
                        "a smaller and faster index, at the quality price measured in docs/benchmarks.md "
                        "(default: %(default)s)")
    p.add_argument("--batch-size", type=positive, default=None,
                   help="sentences per forward pass (default: 32 on the CPU, 256 on a GPU)")
    p.add_argument("--shard-size", type=positive, default=10_000,
                   help="sentences per shard, the unit of resuming (default: %(default)s)")
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
    model_args(p)
    g = p.add_argument_group("many machines: Ray (pip install 'sparc-es[ray]'; README, \"Many machines: Ray\")")
    g.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="encode on a pool of Ray actors, each loading --model from its own disk; this process reads "
                        "the corpus and writes OUTPUT as without --ray (same records, resumable). Alone: a local Ray "
                        "on this machine; 'auto' (on a node of a cluster) or ray://HEAD:10001: that cluster. "
                        "--threads is then each actor's torch threads (default 1)")
    g.add_argument("--ray-actors", type=positive, metavar="N",
                   help="actors in the pool (default: one per GPU of the cluster, else one per --threads CPUs)")
    g.add_argument("--ray-gpus-per-actor", type=float, metavar="F",
                   help="GPUs each actor asks Ray for (default: 1 when the cluster has GPUs, else 0)")
    g = es_connection_args(p, "reading from Elasticsearch (--from-es)")
    g.add_argument("--text-field", help="the field holding each document's text (required with --from-es)")
    g.add_argument("--id-field", help="take document ids from this field (default: _id)")
    g.add_argument("--title-field", help="a title field put before each paragraph in the context")
    g.add_argument("--es-query", metavar="JSON", help="query DSL selecting the documents (default: all)")
    g.add_argument("--format", choices=["text", "markdown", "rst", "html"],
                   help="how the text field is written: split as plain text, or read as Markdown, "
                        "reStructuredText or HTML (section titles go into the context) (default: text; files "
                        "given with --corpus are read as their suffix says)")


def command(args: argparse.Namespace) -> int:
    from sparc_es.corpus.sources import counted
    from sparc_es.encode.run import encode_corpus

    if args.corpus:  # say at once which files of the folders will not be read
        from sparc_es.corpus.sources import ReadStats, corpus_files

        refuse(args, ("text_field", "id_field", "title_field", "es_query", "format"),
               "applies to --from-es only: files given with --corpus are read as their suffix says")

        listed = ReadStats()
        corpus_files(args.corpus, listed)
        if listed.skipped_notice():
            warn(listed.skipped_notice())
    corpus = args.corpus or _es_source(args)
    check_free(args.output, "sparc-es encode")  # before the model's seconds of loading
    backend = _ray_backend(args)
    try:
        model = load_model(args)
        gpu = backend.gpus_per_actor > 0 if backend is not None else model.device.type != "cpu"
        batch_size = args.batch_size or (256 if gpu else 32)  # a GPU wants larger batches
        manifest = encode_corpus(corpus, args.output, model, factor=args.factor, batch_size=batch_size,
                                 shard_size=args.shard_size, overwrite=args.overwrite, progress=not args.quiet,
                                 idf=args.idf, keep_floats=args.keep_floats, update=args.update, backend=backend,
                                 min_impact=args.min_impact)
    finally:
        if backend is not None:
            backend.close()
    report_encode(manifest)
    settings = (f"K={manifest.top_k}, at most {manifest.max_postings} tokens stored per sentence, "
                f"factor={manifest.factor:g}{', IDF-weighted' if manifest.idf else ''}"
                f"{f', impacts of at least {manifest.min_impact}' if manifest.min_impact > 1 else ''}")
    if not args.update or not (manifest.reused or manifest.removed):  # an update into no folder encodes it all
        print(f"encoded {counted(manifest.sentences, 'sentence')} into {args.output} ({settings}) in "
              f"{duration(manifest.seconds)} of encoding, {manifest.sentences_per_second} sentences/s; "
              f"{megabytes(args.output)} on disk")
        return 0
    encoded = manifest.sentences - manifest.reused
    renamed = f", {manifest.renamed} kept under a new id" if manifest.renamed else ""  # a file renamed or moved
    print(f"updated {args.output}: {encoded} encoded, {manifest.reused - manifest.renamed} unchanged kept{renamed}, "
          f"{manifest.removed} removed; {counted(manifest.sentences, 'sentence')} in all ({settings})")
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
    return ElasticSource(connection(args).client(), check_index_name(args.from_es), args.text_field,
                         id_field=args.id_field, title_field=args.title_field, query=query,
                         format=args.format or "text")
