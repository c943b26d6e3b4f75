"""How many postings a question's SPARC tokens walk in an index, as a share of its sentences.

A search reads one posting list per question token; its length is the token's document frequency.
This sums them per question (the SPARC side of the default query: the question's WordPiece tokens
that the index holds) and reports the median over the questions, divided by the number of
sentences, with the tokens that contribute most. It explains latency figures that postings per
sentence do not: a model can store fewer postings a sentence and still put them on the tokens
questions use (docs/training.md, "What a question walks").

    .venv/bin/python scripts/studies/question_walk.py --workdir runs/v5 --domains val,docs-pip \\
        --models 29304ed6b9826047 --json walk.json          # indexes that `sparc-es table` built
    .venv/bin/python scripts/studies/question_walk.py --index bench/work/index-1m --squad 500

Indexes are read, not searched; no timing is taken.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))


def walked(index: Path, questions: list[str], top: int = 8) -> dict:
    """The median share of the sentences that a question's SPARC tokens walk, and the tokens
    contributing most postings over all the questions."""
    from sparc_es.engines import open_engine

    engine = open_engine("lucene", index, hybrid="none")
    try:
        sentences = engine.manifest.index.documents
        shares, by_token = [], Counter()
        for q in questions:
            frequencies = engine.postings(engine.weights(q))
            shares.append(sum(frequencies.values()) / sentences)
            by_token.update(frequencies)
        return {"index": str(index), "questions": len(questions), "sentences": sentences,
                "postings_per_sentence": round(engine.manifest.postings / max(engine.manifest.sentences, 1), 1),
                "median_walked_share": round(statistics.median(shares), 3),
                "top_tokens": {t: round(n / len(questions) / sentences, 3) for t, n in by_token.most_common(top)}}
    finally:
        engine.close()


def topics_of(folder: Path) -> list[str]:
    """The questions of a domain folder that `sparc-es table` wrote (its evalset/topics.tsv)."""
    lines = (folder / "evalset" / "topics.tsv").read_text(encoding="utf-8").splitlines()
    return [line.split("\t", 1)[1] for line in lines if "\t" in line]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workdir", type=Path, help="a `sparc-es table` workdir (with --domains and --models)")
    p.add_argument("--domains", default="", help="comma-separated domain folder names under --workdir")
    p.add_argument("--models", default="", help="comma-separated model fingerprints (index-FP-k500-idf folders)")
    p.add_argument("--index", type=Path, action="append", default=[], help="an index folder (with --squad)")
    p.add_argument("--squad", type=int, default=500, help="with --index: the first N distinct SQuAD dev questions, "
                                                          "the benchmark's (default: %(default)s)")
    p.add_argument("--json", type=Path, help="write the rows here")
    args = p.parse_args(argv)
    rows = []
    if args.workdir:
        for domain in filter(None, args.domains.split(",")):
            questions = topics_of(args.workdir / domain)
            for fp in filter(None, args.models.split(",")):
                rows.append({"domain": domain, "model": fp,
                             **walked(args.workdir / domain / f"index-{fp}-k500-idf", questions)})
                print(json.dumps(rows[-1]), flush=True)
    if args.index:
        from sparc_es.evaluation.evalsets import data_dir

        from bench import squad_questions

        questions = squad_questions(data_dir(), args.squad)
        for index in args.index:
            rows.append({"domain": "squad-bench", **walked(index, questions)})
            print(json.dumps(rows[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
