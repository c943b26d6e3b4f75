"""Where vocabulary expansion loses: the questions that hold a new word, and their question weights.

`adapt --expand-vocabulary` (docs/adaptation.md) makes the corpus's frequent split words whole
WordPieces. Scored with the default search it loses on most validation domains. This probe reads
the expanded models' indexes that `sparc-es table` built under ``--workdir`` and, for each domain:

* splits the questions into those whose expanded tokenization holds a new word and the others, and
  gives each group's share of the change in MRR against the default (questions without a new word
  can change too: their answer or a rival sentence may hold one);
* searches again with each new word's question weight set to the number of WordPieces it replaced
  (so that a word counts in the question's sum as its pieces did), through the query encoder's own
  per-token weights: if the loss came from the question giving a split word less weight, this
  recovers it.

    .venv/bin/python scripts/studies/expansion_probe.py --workdir runs/v5 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

DEFAULT_MODEL = "2304a1258a440b87"
DOMAINS = "docs-pip,docs-click,docs-black,docs-flask,docs-pymdown,docs-werkzeug,val"


def variants(folder: Path) -> dict[str, Path]:
    """The default's index and the two expanded models' (with the stop-word rule) under ``folder``:
    ``{"default" | "expansion alone" | "expansion and replacement": index}``."""
    found = {}
    for meta in sorted(folder.glob("index-*-k500-idf/meta.json")):
        model = json.loads(meta.read_text())["model"]
        adaptation = model.get("adaptation") or {}
        if model["fingerprint"] == DEFAULT_MODEL:
            found["default"] = meta.parent
        elif adaptation.get("expand_vocabulary") and model.get("lexical_skips_stop_words"):
            found["expansion alone" if adaptation.get("rows") == "new" else "expansion and replacement"] = meta.parent
    return found


def new_words(index: Path) -> list[str]:
    """The words the expanded model added: its tokenizer's last ``words`` entries."""
    meta = json.loads((index / "meta.json").read_text())
    n = meta["model"]["adaptation"]["expanded_vocabulary"]["words"]
    from sparc_es.model.query import QueryEncoder

    tokenizer = QueryEncoder.load(index).tokenizer
    by_id = {i: t for t, i in tokenizer.get_vocab().items()}
    return [by_id[i] for i in range(len(tokenizer) - n, len(tokenizer))]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", type=Path, default=ROOT / "runs" / "v5")
    p.add_argument("--domains", default=DOMAINS)
    p.add_argument("--json", type=Path)
    a = p.parse_args()

    from sparc_es.engines import open_engine
    from sparc_es.evaluation.measures import per_query
    from sparc_es.evaluation.trec import read_qrels, read_topics, run_of
    from sparc_es.model.query import QueryEncoder

    def rr(engine, topics, qrels) -> dict[str, float]:
        return per_query(run_of(engine.batch_search(topics, k=1000)), qrels, "RR@1000")

    out = {}
    for domain in a.domains.split(","):
        folder = a.workdir / domain
        topics = list(read_topics(folder / "evalset" / "topics.tsv"))
        qrels = read_qrels(folder / "evalset" / "qrels.txt")
        indexes = variants(folder)
        original = QueryEncoder.load(indexes["default"]).tokenizer

        engine = open_engine("lucene", indexes["default"], hybrid="default")
        base = rr(engine, topics, qrels)
        engine.close()
        n = len(base)  # the judged questions
        row = {"questions": n, "default": round(100 * sum(base.values()) / n, 2)}
        for name in ("expansion alone", "expansion and replacement"):
            engine = open_engine("lucene", indexes[name], hybrid="default")
            words = new_words(indexes[name])
            pieces = {w: len(original.tokenize(w)) for w in words}
            got = rr(engine, topics, qrels)
            tokenize = engine.queries.tokenizer.tokenize
            holds = {q for q, text in topics if q in base and set(tokenize(text)) & pieces.keys()}
            engine.queries.weights = pieces  # each new word weighs what its pieces weighed
            weighted = rr(engine, topics, qrels)
            engine.close()
            change = {q: 100 * (got[q] - base[q]) / n for q in base}
            row[name] = {
                "new_words": len(words), "MRR": round(100 * sum(got.values()) / n, 2),
                "MRR_new_words_weighted_as_pieces": round(100 * sum(weighted.values()) / n, 2),
                "questions_with_a_new_word": len(holds),
                "change_from_questions_with_a_new_word": round(sum(change[q] for q in holds), 2),
                "change_from_the_others": round(sum(v for q, v in change.items() if q not in holds), 2)}
        print(domain, json.dumps(row), flush=True)
        out[domain] = row
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
