"""Concluded: the code a sentence leads into stays shown, not searched (docs/evaluation.md, "The code
under a sentence: searched or not"; docs/results/code-in-retrieval.json).

Copies of evaluation sets whose sentences carry their code block into what retrieval reads
(research script). Each set's ``corpus.jsonl`` holds the code a sentence leads into (``code``); a
copy puts it after the sentence's context (``ctx``: the encoder and passage expansion read it) or
after its text (``text``: the sentence itself, BM25 included), or only where the default's BM25 side
reads it (``bm25``: after the section titles, which BM25 reads with the text; the encoder does not).
Ids, topics and qrels are kept, so ``sparc-es table`` scores the copies against the same answers:

    .venv/bin/python scripts/studies/code_in_retrieval.py work/docsqa-sets/docs-pip ... --output work/code
    .venv/bin/sparc-es table --domains work/code/ctx/docs-pip,... --systems bm25,sparc:idf=1,hybrid=sum
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

MODES = ("ctx", "text", "bm25")
FIELD = {"ctx": "context", "text": "text", "bm25": "headings"}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sets", type=Path, nargs="+", help="evaluation set folders (scripts/docs_qa.py evalsets)")
    p.add_argument("--output", type=Path, required=True, help="writes OUTPUT/MODE/NAME for each mode")
    args = p.parse_args(argv)
    for mode in MODES:
        for src in args.sets:
            dst = args.output / mode / src.name
            dst.mkdir(parents=True, exist_ok=True)
            for name in ("topics.tsv", "qrels.txt", "evalset.json"):
                shutil.copy(src / name, dst / name)
            with open(src / "corpus.jsonl", encoding="utf-8") as fi, open(dst / "corpus.jsonl", "w") as fo:
                for line in fi:
                    record = json.loads(line)
                    code = record.pop("code", None)
                    if code:
                        field = FIELD[mode]
                        record[field] = f"{record.get(field, '')} {code}".strip()
                    fo.write(json.dumps(record) + "\n")
            print(dst)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
