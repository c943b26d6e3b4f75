"""``sparc-es search``: the top sentences (or documents) for questions given on the command line or
read from standard input, for people or as JSON."""

from __future__ import annotations

import argparse
import json
import sys

from sparc_es.cli.options import check_depth, engine_args, hit_count, open_engine
from sparc_es.cli.output import print_hits, warn
from sparc_es.errors import SparcError


def add_parser(sub) -> None:
    p = sub.add_parser("search", help="answer questions from an index",
                       description="Print the top sentences for each question: rank, score, where each is "
                       "(file:line, the 1-based line of its start in its file, and its heading path), its id, the "
                       "sentence with the question's words marked (bold on a terminal, in \u00abguillemets\u00bb "
                       "otherwise) and the rest of its paragraph, and how many of the question's tokens it stores. "
                       "A line first says how many question tokens the index has, and when no word of the "
                       "question is in the index at all. The question is a bag of WordPiece tokens: no model runs.")
    p.add_argument("--index", metavar="DIR", help="Lucene index folder (with --engine es, the index or encoded folder "
                   "whose tokenizer and sentence store serve the questions and hits, as --tokenizer)")
    p.add_argument("question", nargs="+", help="one or more questions; '-' alone reads one question per line "
                   "from standard input (one engine start for all)")
    p.add_argument("-k", type=hit_count, default=10, help="hits per question (default: %(default)s)")
    p.add_argument("--documents", action="store_true",
                   help="rank documents, not sentences: each document by its best sentence among the top --depth "
                        "sentences (as run --documents), shown with that sentence")
    p.add_argument("--depth", type=hit_count,
                   help="with --documents: sentences retrieved before grouping (default: 1000)")
    p.add_argument("--no-collapse", dest="collapse", action="store_false",
                   help="show every sentence as its own hit; by default the sentences of one paragraph are one hit, "
                        "the best of them, with the others named under it (collapsed in --json)")
    p.add_argument("--json", action="store_true", help="print hits as one JSON document: the list of hits of "
                   "one question, or a list of {question, hits, match} for several; with '-', one {question, "
                   "hits, match} object per line. Each hit adds to its id, score, text and offsets its rank, "
                   "line, path (the file read), headings, context, marks ({text, context}: [start, end] of each "
                   "marked word) and covers (the question tokens it stores); match says which question tokens "
                   "have postings and which words are in the index (one question: said on stderr when none is)")
    engine_args(p, ["lucene", "es", "bm25"])


def command(args: argparse.Namespace) -> int:
    if "-" in args.question:
        if len(args.question) > 1:
            raise SparcError("'-' (questions from standard input) goes alone, without other questions")
        return _search_stdin(args)
    from sparc_es.model.query import check_question

    for question in args.question:
        check_question(question, asked=True)
    check_depth(args)
    engine = open_engine(args)
    answers = []
    try:
        presenter = _presenter(args, engine)
        try:
            for number, question in enumerate(args.question):
                match, shown = _answer(args, engine, presenter, question)
                if number and not args.json:
                    print()  # a blank line between questions, as the demo shows them
                if args.json:
                    answers.append({"question": question, "hits": [s.to_json() for s in shown],
                                    "match": match.to_json()})
                    if len(args.question) == 1 and match.notice():
                        warn(match.notice())
                else:
                    print_hits(question, match, shown)
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
    check_depth(args)
    from sparc_es.model.query import check_question

    engine = open_engine(args)
    try:
        presenter = _presenter(args, engine)
        try:
            answered = False
            for number, line in enumerate(sys.stdin, start=1):
                question = line.strip()
                if not question:
                    continue
                try:
                    check_question(question)
                except SparcError as e:  # the others are still answered
                    warn(f"standard input, line {number}: {e}; skipped")
                    continue
                match, shown = _answer(args, engine, presenter, question)
                if args.json:
                    print(json.dumps({"question": question, "hits": [s.to_json() for s in shown],
                                      "match": match.to_json()}, ensure_ascii=False))
                else:
                    if answered:
                        print()
                    print_hits(question, match, shown)
                    answered = True
                sys.stdout.flush()  # a reader of a pipe gets each answer as it comes
        finally:
            presenter.close()
    finally:
        engine.close()
    return 0


def _answer(args: argparse.Namespace, engine, presenter, question: str):
    """(how ``question`` met the index, its hits as ``search`` shows them): with ``--documents``,
    each document's best sentence among the top ``--depth`` (``run --documents``'s aggregation)."""
    from sparc_es.answers.show import answer

    depth = (args.depth or 1000) if args.documents else None
    return answer(engine, presenter, question, args.k, args.collapse, args.min_score, documents=depth)


def _presenter(args: argparse.Namespace, engine):
    from sparc_es.answers.show import Presenter, printable

    presenter = Presenter(engine, args.index if args.engine != "es" else None, getattr(args, "tokenizer", None))
    gone = presenter.places.gone()
    if gone:
        warn(f"the corpus the index was built from is not at {', '.join(printable(str(g)) for g in gone)} (nor where "
             "it was beside the index): hits show character offsets, not lines")
    return presenter
