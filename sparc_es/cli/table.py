"""``sparc-es table``: systems x domains, evaluated and tabulated (:mod:`sparc_es.evaluation.table`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from sparc_es.cli.options import hit_count, positive, set_threads
from sparc_es.errors import SparcError
from sparc_es.layout import ownership as folders


def add_parser(sub) -> None:
    from sparc_es.evaluation.table import BATCH, __doc__ as table_doc

    p = sub.add_parser("table", help="evaluate systems over domains: JSON and a Markdown table",
                       description=table_doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--systems", default="bm25,bm25-paper,sparc", help="comma-separated; 'default' is the search "
                   "run and search do by default, sparc:idf=1,hybrid=sum ('sparc' is SPARC alone, without IDF) "
                   "(default: %(default)s)")
    p.add_argument("--domains", default="squad,newsqa",
                   help="comma-separated: squad, newsqa, val, or evaluation set folders (default: %(default)s)")
    p.add_argument("--workdir", default="runs", help="cache of sets, encodings, indexes, runs (default: %(default)s)")
    p.add_argument("--data", metavar="DIR", help="data folder (default: $SPARC_ES_DATA or ../shared/data)")
    p.add_argument("--json", help="(default: WORKDIR/table.json)")
    p.add_argument("--markdown", help="(default: WORKDIR/table.md)")
    p.add_argument("-k", type=hit_count, default=1000, help="hits per query, recorded in both outputs; a measure's "
                   "cutoff past k is k, and its column says so (-k 50: MRR@50, R@50) (default: %(default)s)")
    p.add_argument("--threads", type=positive, default=None, help="torch and search threads (default: 2)")
    p.add_argument("--batch", type=positive, default=BATCH, help="questions searched at once; a batch's hits, for "
                   "each system, are all the hits held in memory: runs go to files and are scored from them "
                   "(default: %(default)s)")


def command(args: argparse.Namespace) -> int:
    from sparc_es.evaluation.evalsets import check_data_folder
    from sparc_es.evaluation.table import run_table, split_systems, write_table

    set_threads(args.threads)
    json_path = args.json or str(Path(args.workdir) / "table.json")
    markdown_path = args.markdown or str(Path(args.workdir) / "table.md")
    given = [d for d in args.domains.split(",") if Path(d).exists()]  # evaluation set folders
    for flag, path in (("--json", json_path), ("--markdown", markdown_path)):
        folders.check_file_output(path, flag)
        folders.check_apart(path, given, flag)
    if args.data is not None:
        check_data_folder(args.data, "--data")
    if not split_systems(args.systems) or not [d for d in args.domains.split(",") if d.strip()]:
        raise SparcError("--systems and --domains each name at least one")
    rows = run_table(split_systems(args.systems), args.domains.split(","), args.workdir, args.data,
                     k=args.k, threads=args.threads or 2, batch=args.batch)
    write_table(rows, json_path, markdown_path)
    print(f"wrote {json_path} and {markdown_path}")
    return 0
