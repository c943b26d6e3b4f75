"""Can a user threshold the default's scores? The top hit's score for questions a corpus answers and
for questions it does not.

The default's score is the fraction of the question's attainable score (``sparc_es.engines.blend``),
meant to be comparable across questions, so that ``--min-score`` can say "no answer here". Over the
validation domains' indexes that ``sparc-es table`` built, each domain is asked its own questions
(split by whether the top hit is relevant) and every other domain's questions (which its corpus
does not answer: another project's documentation, or SQuAD's held-out articles); for each
threshold, the share of each group whose top hit stays, and the AUC of the top score between own and
others' questions.

    .venv/bin/python scripts/studies/score_threshold.py --workdir runs/v6 --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)


def auc(pos: list[float], neg: list[float]) -> float:
    """P(a random own question's top score > a random other's), ties counted half."""
    import numpy as np

    p, n = np.sort(np.asarray(pos)), np.sort(np.asarray(neg))
    below = np.searchsorted(n, p, side="left")
    ties = np.searchsorted(n, p, side="right") - below
    return float((below + 0.5 * ties).sum() / (len(p) * len(n)))


def main() -> None:
    from sparc_es.engines import open_engine
    from sparc_es.evaluation.trec import read_qrels, read_topics

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", type=Path, default=ROOT / "runs" / "v6")
    p.add_argument("--model", default="2304a1258a440b87")
    p.add_argument("--domains", default="docs-pip,docs-click,docs-black,docs-flask,docs-pymdown,docs-werkzeug,val")
    p.add_argument("--others", type=int, default=150, help="questions taken from each other domain")
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    domains = a.domains.split(",")
    topics = {d: list(read_topics(a.workdir / d / "evalset" / "topics.tsv")) for d in domains}
    out = {"thresholds": THRESHOLDS, "domains": {}}
    for d in domains:
        qrels = read_qrels(a.workdir / d / "evalset" / "qrels.txt")
        engine = open_engine("lucene", a.workdir / d / f"index-{a.model}-k500-idf", hybrid="default")
        own = engine.batch_search(topics[d], k=1)
        right = [h[0].score for q, h in own.items() if h and qrels.get(q, {}).get(h[0].id, 0) > 0]
        wrong = [h[0].score for q, h in own.items() if h and qrels.get(q, {}).get(h[0].id, 0) <= 0]
        others = [(f"{o}/{q}", text) for o in domains if o != d for q, text in topics[o][:a.others]]
        foreign = [h[0].score if h else 0.0 for h in engine.batch_search(others, k=1).values()]
        engine.close()
        row = {"own_right": len(right), "own_wrong": len(wrong), "others": len(foreign),
               "median": {"own_right": round(statistics.median(right), 3),
                          "own_wrong": round(statistics.median(wrong), 3),
                          "others": round(statistics.median(foreign), 3)},
               "auc_own_vs_others": round(auc(right + wrong, foreign), 3),
               "auc_right_vs_others": round(auc(right, foreign), 3),
               "kept": {f"{t:g}": {"own_right": round(sum(s >= t for s in right) / len(right), 3),
                                   "own_wrong": round(sum(s >= t for s in wrong) / max(1, len(wrong)), 3),
                                   "others": round(sum(s >= t for s in foreign) / len(foreign), 3)}
                        for t in THRESHOLDS}}
        out["domains"][d] = row
        print(d, json.dumps(row), flush=True)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
