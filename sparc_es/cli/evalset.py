"""``sparc-es evalset``: an evaluation set (corpus, topics, qrels) from MRQA data, a BEIR folder or
your own documents, for ``run``, ``eval`` and ``table``."""

from __future__ import annotations

import argparse
import sys

from sparc_es.cli.output import warn
from sparc_es.errors import SparcError
from sparc_es.layout import ownership as folders


def add_parser(sub) -> None:
    from sparc_es.evaluation.evalsets import DOMAINS

    p = sub.add_parser("evalset", help="build an evaluation set (corpus, topics, qrels) for run, eval and table",
                       description="From MRQA data, the revised MultiReQA protocol: every sentence of every passage "
                       "is a candidate, sentences overlapping an answer span are relevant, identical questions are "
                       "merged. From a BEIR folder: documents split into sentences, document-level qrels. The "
                       "output folder is a domain for `sparc-es table --domains DIR`.")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--domain", choices=list(DOMAINS), help="one of the project's sets, from ../shared/data")
    source.add_argument("--mrqa", metavar="FILE", help="any MRQA file, JSON lines, gzipped (.jsonl.gz) or not")
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
    p.add_argument("--split", help="with --beir: the qrels split (default: test)")
    p.add_argument("--name", help="with --mrqa, --beir or --docs: the set's name in tables (with --mrqa, its "
                   "sentence ids' prefix too; default: the file's or folder's)")
    p.add_argument("--output", required=True, metavar="DIR")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output folder (only one sparc-es "
                   "made)")
    p.add_argument("--data", metavar="DIR", help="with --domain: the data folder (default: $SPARC_ES_DATA or "
                   "../shared/data)")


def command(args: argparse.Namespace) -> int:
    from sparc_es.evaluation.evalsets import (
        beir_eval_set,
        build_eval_set,
        check_data_folder,
        check_output,
        docs_eval_set,
        mrqa_eval_set,
    )

    if args.candidates and not args.mrqa:
        raise SparcError("--candidates goes with --mrqa")
    if args.split is not None and not args.beir:
        raise SparcError("--split goes with --beir (it names the BEIR folder's qrels/SPLIT.tsv)")
    if args.name is not None and args.domain:
        raise SparcError(f"--name goes with --mrqa, --beir or --docs: the project's set {args.domain!r} keeps its "
                         "name, which its ids carry")
    if (args.docs, args.questions, args.answers).count(None) not in (0, 3):
        raise SparcError("--docs, --questions and --answers go together")
    if args.data is not None and not args.domain:
        raise SparcError("--data goes with --domain (the project's sets are read from it)")
    if args.data is not None:
        check_data_folder(args.data, "--data")
    # before the set is built: a folder that would be refused costs nothing
    folders.check_apart(args.output, [args.docs, args.mrqa, args.beir, args.questions, args.answers, args.candidates,
                                      args.data], "--output")
    check_output(args.output, args.overwrite, "--output")
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
        evalset = beir_eval_set(args.beir, args.split or "test", args.name)
    evalset.check(args.docs or args.mrqa or args.beir or args.domain)
    for note in evalset.notes:
        warn(note)
    paths = evalset.write(args.output, overwrite=args.overwrite)
    merged = "merged " if evalset.level == "sentence" else ""
    print(f"{evalset.name}: {len(evalset.sentences)} sentences, {len(evalset.topics)} {merged}queries, "
          f"{sum(map(len, evalset.qrels.values()))} {evalset.level} judgements -> "
          + ", ".join(str(p) for p in paths.values()))
    return 0
