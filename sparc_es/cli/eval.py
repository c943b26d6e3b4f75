"""``sparc-es eval``: a TREC run scored against TREC qrels, or compared with a baseline run."""

from __future__ import annotations

import argparse
import json

from sparc_es.cli.output import warn


def add_parser(sub) -> None:
    p = sub.add_parser("eval", help="score a TREC run against TREC qrels",
                       description="MRR@1000, R@1 (first hit relevant), nDCG@10 and R@100 through trec_eval's "
                       "own code (ir_measures, pytrec_eval), averaged over every judged query: a query the "
                       "run leaves out counts as 0.")
    p.add_argument("--run", required=True, metavar="RUN", help="a TREC run file ('qid Q0 docid rank score tag' "
                   "per line), as sparc-es run writes")
    p.add_argument("--qrels", required=True, metavar="QRELS", help="TREC relevance judgements, 'qid 0 docid "
                   "relevance' per line (relevance above 0: an answer), as sparc-es evalset writes")
    p.add_argument("--baseline", metavar="RUN", help="also compare with this run of the same queries: each measure's "
                   "difference with a paired bootstrap 95%% interval and how many queries changed")
    p.add_argument("--json", action="store_true", help="print the figures as JSON, not a table")


def command(args: argparse.Namespace) -> int:
    from sparc_es.evaluation.measures import compare, coverage_notes, score_file
    from sparc_es.evaluation.trec import read_qrels

    qrels = read_qrels(args.qrels)
    unjudgeable = [q for q, judged in qrels.items() if not any(r > 0 for r in judged.values())]
    if unjudgeable:
        warn(f"{len(unjudgeable)} of {len(qrels)} queries of {args.qrels} have no relevant document (relevance > 0), "
             f"e.g. {unjudgeable[0]!r}: they count 0 in every mean")
    # the runs are read from their files one query at a time, with or without --baseline
    scored = score_file(args.run, qrels)
    baseline = score_file(args.baseline, qrels) if args.baseline else None
    for note in coverage_notes(qrels, (args.run, scored), (args.baseline, baseline) if baseline else None):
        warn(note)
    if baseline is not None:
        differences = compare(scored, baseline, qrels)
        if args.json:
            print(json.dumps({"run": str(args.run), "baseline": str(args.baseline), "queries": len(qrels),
                              "unanswered": scored.unanswered(qrels), "baseline_unanswered": baseline.unanswered(qrels),
                              "measures": [{**vars(d), "delta": d.delta} for d in differences]}))
            return 0
        print(f"{len(qrels)} judged queries; run minus baseline, paired bootstrap 95% interval")
        print(f"{'':10} {'run':>6} {'base':>6} {'diff':>6}  {'interval':<16} changed")
        for d in differences:
            print(f"{d.measure:<10} {100 * d.run:6.2f} {100 * d.baseline:6.2f} {100 * d.delta:+6.2f}  "
                  f"[{100 * d.low:+.2f}, {100 * d.high:+.2f}]  {d.changed}")
        return 0
    scores = scored.means(qrels)
    if args.json:
        print(json.dumps({"run": str(args.run), "queries": len(qrels), "unanswered": scored.unanswered(qrels),
                          **scores}))
    else:
        print(f"{len(qrels)} judged queries (missing or empty results count as 0)")
        for name, value in scores.items():
            print(f"{name:<10} {100 * value:6.2f}")
    return 0
