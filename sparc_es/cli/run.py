"""``sparc-es run``: a topics file searched a batch at a time into a TREC run file
(:func:`sparc_es.evaluation.runs.write_runs`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sparc_es.cli.options import check_depth, engine_args, hit_count, open_engine, positive, refuse
from sparc_es.cli.output import warn
from sparc_es.errors import SparcError
from sparc_es.layout import ownership as folders

RUN_BATCH = 500  # questions searched at once: the hits held in memory are one batch's


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="batch search: topics TSV in, TREC run file out",
                       description="Anserini-style batch run: one 'qid<TAB>question' per line in, a TREC "
                       "run file (qid Q0 docid rank score tag) out, for trec_eval.")
    p.add_argument("--index", metavar="DIR", help="Lucene index folder (with --engine es, the index or encoded folder "
                   "whose tokenizer and sentence store serve the questions and hits, as --tokenizer)")
    engine_args(p, ["lucene", "es", "bm25"])
    p.add_argument("--topics", required=True, metavar="TSV",
                   help="the questions, one 'qid<TAB>question' per line, no third column (a first line of two "
                   "column names, an id's and a text's, e.g. 'qid<TAB>question' or '_id<TAB>text', is a header)")
    p.add_argument("--output", required=True, metavar="RUN",
                   help="the TREC run file to write: 'qid Q0 sentence-id rank score tag' per line")
    p.add_argument("-k", type=hit_count, default=1000, help="hits per query (default: %(default)s)")
    p.add_argument("--threads", type=positive, help="search threads of the Lucene engines (default: 1; "
                   "Elasticsearch searches on the cluster)")
    p.add_argument("--tag", help="run tag, last column (default: sparc-es, the engine and the hybrid, e.g. "
                   "sparc-es-lucene-sum0.35)")
    p.add_argument("--documents", action="store_true",
                   help="rank documents, not sentences: each document scored by its best sentence among the "
                        "top --depth sentences, document ids in the run file (for document-level qrels)")
    p.add_argument("--depth", type=hit_count,
                   help="with --documents: sentences retrieved per query before grouping (default: 1000)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def command(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from sparc_es.evaluation.runs import RunFile, hit_documents, index_documents, write_runs
    from sparc_es.evaluation.trec import read_topics, run_tag

    check_depth(args)
    if args.engine == "es":
        refuse(args, ("threads",), "applies to the Lucene engines only: Elasticsearch searches on the cluster")
    if args.tag is not None and (not args.tag.strip() or len(args.tag.split()) > 1):
        raise SparcError(f"--tag {args.tag!r}: a run tag is one word (TREC run files split on whitespace)")
    depth = max(1000 if args.depth is None else args.depth, args.k)  # sentences searched with --documents
    folders.check_file_output(args.output, "--output")
    folders.check_apart(args.output, [args.topics, args.index], "--output")
    topics = list(read_topics(args.topics))
    if not topics:  # an empty run file would score 0 without a word
        raise SparcError(f"{args.topics}: no topics in it (one 'qid<TAB>question' per line)")
    engine = open_engine(args)
    try:
        described = engine.describe()
        hybrid = described.hybrid.value if described.hybrid else None
        tag = args.tag or run_tag(args.engine, hybrid, described.hybrid_weight)
        documents = None
        if args.documents:  # Elasticsearch's hits carry their document; a Lucene index's store has it
            documents = hit_documents if args.engine == "es" else index_documents(args.index)
        replaced = Path(args.output).is_file()
        searched = 0

        def progress(done: int) -> None:
            nonlocal searched
            bar.update(done - searched)
            searched = done

        with tqdm(total=len(topics), unit="query", desc="run", disable=args.quiet, file=sys.stderr,
                  leave=False) as bar:
            try:
                [written] = write_runs([RunFile(engine, Path(args.output), tag)], topics, args.k,
                                       depth=depth if args.documents else args.k, threads=args.threads or 1,
                                       batch=RUN_BATCH, min_score=args.min_score, documents=documents,
                                       progress=progress)
            except KeyboardInterrupt:  # a run file is written whole or not at all: nothing to resume
                kept = "the run file already there is as it was" if replaced else "no run file was written"
                raise KeyboardInterrupt(f"run stopped after {searched:,} of {len(topics):,} queries: {kept}; run "
                                        "the same command again to search them all") from None
    finally:
        engine.close()
    if written.short:
        warn(f"{written.short} of {len(topics)} queries have fewer than {args.k} documents among their top "
             f"{depth} sentences; raise --depth for more")
    missed = ""  # a topic without a hit has no line, as in TREC runs: said, not left for eval to find
    if written.no_hit:
        more = ", ..." if written.no_hit > len(written.no_hit_ids) else ""
        missed = (f"; {written.no_hit} topic{'s' if written.no_hit > 1 else ''} had no hit: "
                  f"{', '.join(written.no_hit_ids)}{more}")
    print(f"wrote {len(topics)} queries to {args.output}{' (replacing the run file there)' if replaced else ''} "
          f"in {written.seconds:.1f} s ({1000 * written.seconds / max(len(topics), 1):.1f} ms/query){missed}")
    return 0
