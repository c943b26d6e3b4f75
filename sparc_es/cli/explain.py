"""``sparc-es explain``: why an index's hits scored what they did, token by token; or, without an
index, the (token, weight) pairs a sentence gets."""

from __future__ import annotations

import argparse
import json

from sparc_es.cli.options import HYBRID, hybrid_args, load_model, model_args, positive, refuse, set_threads
from sparc_es.cli.output import warn
from sparc_es.errors import SparcError

TOP = 20  # tokens of a sentence explained alone


def add_parser(sub) -> None:
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
    p.add_argument("--top", type=positive, help=f"without --index: tokens to show (default: {TOP})")
    p.add_argument("--no-collapse", action="store_true",
                   help="with --index: ranks count every sentence, as search --no-collapse shows them (by default "
                        "the sentences of one paragraph are one hit, as search shows them)")
    p.add_argument("--json", action="store_true", help="print JSON: the hits' token tables with --index, else the "
                                                       "(token, weight) pairs")
    model_args(p)
    hybrid_args(p, "ranks (with --index): search's, with or without BM25")


def command(args: argparse.Namespace) -> int:
    if args.index:
        return _explain_hits(args)
    refuse(args, (*HYBRID, "no_collapse"), "ranks the hits of --index: it needs --index")
    if len(args.text) != 1:
        raise SparcError("explain takes one sentence (in quotes); with --index, the question and the hits to explain")
    args.sentence = args.text[0]
    from sparc_es.model.query import check_question

    check_question(args.sentence)
    model = load_model(args)
    pairs = model.explain(args.sentence, args.context or "", top=args.top or TOP)
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
    from sparc_es.answers.show import printable
    from sparc_es.engines import open_engine
    from sparc_es.model import resolve_device

    refuse(args, ("context",), "is the passage of a sentence explained alone: with --index, hits are explained "
                               "with their own context")
    refuse(args, ("top",), "is how many tokens of a sentence explained alone to show: with --index, every question "
                           "token is shown")
    refuse(args, ("top_k", "max_length", "max_over"), "does not apply with --index: the index's own settings are "
                                                      "used")
    if len(args.text) < 2:
        raise SparcError("explain --index INDEX \"question\" ID_OR_RANK ...: name at least one hit (its id or rank)")
    question, wanted = args.text[0], args.text[1:]
    from sparc_es.model.query import check_question

    check_question(question, asked=True)
    set_threads(args.threads)
    device = resolve_device(args.device)
    engine = open_engine("lucene", args.index, hybrid=args.hybrid or "default", hybrid_weight=args.hybrid_weight,
                         notice=warn)
    explainer = Explainer(args.index, engine, args.model, device, collapse=not args.no_collapse)
    try:
        result = explainer.explain(question, wanted)
    finally:
        explainer.close()
    print(json.dumps(result, ensure_ascii=False) if args.json else printable(table(result)))
    return 0
