"""``sparc-es index``: an encoded folder -> a Lucene impact index (with a BM25 index beside it), or
loaded into an Elasticsearch index."""

from __future__ import annotations

import argparse
from pathlib import Path

from sparc_es.cli.options import ES_CONNECTION, connection, engine_args, es_index, positive, refuse
from sparc_es.cli.output import megabytes, warn
from sparc_es.corpus.sources import counted
from sparc_es.errors import SparcError


def add_parser(sub) -> None:
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
    engine_args(p, ["lucene", "es"], query=False)
    g = p.add_argument_group("Elasticsearch loading (--engine es only)")
    g.add_argument("--chunk-size", type=positive, help="documents per bulk request (default: 500)")
    g.add_argument("--recreate", action="store_true", help="delete and recreate the ES index first")
    g.add_argument("--report", metavar="FILE", help="where the ids of documents that failed to load are written "
                   "(default: es-failures-INDEX.jsonl in the working directory; removed when none failed)")
    g.add_argument("--field-type", choices=[t.value for t in FieldType],
                   help="ES field type; sparse_vector (ES 8.15+) enables --query-mode sparse_vector "
                        f"(default: the existing index's, also with --recreate, else "
                        f"{FieldType.RANK_FEATURES.value}; a load never changes it)")
    p.add_argument("--quiet", action="store_true", help="no progress output")


def command(args: argparse.Namespace) -> int:
    if args.engine == "es":
        from sparc_es.engines import elastic

        refuse(args, ("index", "overwrite", "no_bm25"), "applies to --engine lucene only: Elasticsearch indexes "
               "the text itself (--es-index names the index, --recreate replaces it)")
        client = connection(args).client()
        result = elastic.build_index(args.input, client, es_index(args), chunk_size=args.chunk_size or 500,
                                     recreate=args.recreate, field_type=args.field_type,
                                     progress=not args.quiet, report=args.report, notice=warn)
        print(f"loaded {counted(result['loaded'], 'sentence')} into Elasticsearch index {result['index']!r} "
              f"({result['already_there']} unchanged, {result['moved']} moved (their offsets or order updated: "
              "text and weights as they were), "
              f"{result['deleted']} deleted; {result['count']} documents, "
              "their ids checked against the encoded folder's)")
        return 0
    from sparc_es.engines import lucene

    refuse(args, ES_CONNECTION + ("es_index", "chunk_size", "recreate", "field_type", "report"),
           "applies to --engine es only, not --engine lucene")
    if not args.index:
        raise SparcError("--index DIR is required for the Lucene engine")
    from sparc_es.layout.ownership import check_folder_output

    check_folder_output(args.index, "--index")  # a file there: said first, not "pass --overwrite"
    try:
        manifest = lucene.build_index(args.input, args.index, overwrite=args.overwrite, bm25=not args.no_bm25,
                                      progress=not args.quiet)
    except KeyboardInterrupt as e:  # an index is built aside and renamed into place: nothing to resume
        if str(e):  # stopped after the new index was in place, which says so
            raise
        kept = "the index already there is as it was" if Path(args.index).exists() else "nothing was written"
        raise KeyboardInterrupt(f"index stopped before it was complete: {kept}; run the same command again "
                                "to build it") from None
    info = manifest.index
    if manifest.empty_vectors:
        n = manifest.empty_vectors
        warn(f"{counted(n, 'sentence')} {'has' if n == 1 else 'have'} no weights and {'is' if n == 1 else 'are'} not "
             "in the index")
    print(f"indexed {counted(info.documents, 'sentence')} with their BM25 terms into {args.index} in "
          f"{info.build_seconds:.1f} s (the impact index {info.bytes / 1e6:.1f} MB; {megabytes(args.index)} "
          "on disk with the sentence store and the BM25 index)")
    if info.bm25:
        print(f"  and a separate BM25 index of their texts (--engine bm25, --hybrid minmax or rrf) in "
              f"{info.bm25['build_seconds']:.1f} s "
              f"({info.bm25['bytes'] / 1e6:.1f} MB)")
    return 0
