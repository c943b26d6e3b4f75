"""IDF counted over what sentences store, not over their text: a probe on the validation domains.

`encode --idf` (paper 004, eq. 6-7) multiplies each kept neural weight by log(N / N_v), N_v the
sentences whose *text* holds token v, and by 1 where no text holds it. A token that questions ask
and sentences rarely say ("who", "when", "many") thus gets a large factor on every sentence the
model expands to it, although the model puts it in a large share of the stored vectors; one text
holding it, or none, moves the factor from log N to 1. This probe counts N_v over the stored
vectors instead (the sentences whose kept neural top K holds v), so a token's factor says how
rare it is in what the index holds, and compares on each domain, with the default search (the
one-request BM25 sum, BM25's share 0.35): the paper's IDF (which `encode` stores; a check that the
re-quantised folder gives the table's figure), the stored-vector IDF, and their mean.

It re-quantises the float folders `sparc-es table --systems sparc` leaves under ``--workdir``
(``encoded-<model>-k500``, no IDF) with ``requantize --idf``'s own composition, the IDF vector
swapped, and builds an index of each.

    .venv/bin/sparc-es table --domains ... --systems sparc --workdir runs/v5      # the float folders
    .venv/bin/python scripts/studies/stored_idf.py --workdir runs/v5 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from unittest import mock

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

DOMAINS = "docs-pip,docs-click,docs-black,docs-flask,docs-pymdown,docs-werkzeug,val"


def stored_df(encoded: Path, vocab: dict[str, int]) -> tuple[np.ndarray, int]:
    """(how many sentences' kept neural weights hold each vocabulary id, the number of sentences)."""
    from sparc_es.layout.records import iter_vectors

    df = np.zeros(len(vocab), dtype=np.int64)
    n = 0
    for record in iter_vectors(encoded):
        floats, parts = record["weights"], record.get("lexical") or {}
        neural = {t for t in floats if t not in parts} | {t for t, (w, _) in parts.items() if w > 0}
        df[[vocab[t] for t in neural if t in vocab]] += 1
        n += 1
    return df, n


def reweighted(encoded: Path, out: Path, variant: str) -> Path:
    """``encoded`` IDF-weighted by ``variant`` (text, stored or mean), as ``requantize --idf`` writes it."""
    from transformers import AutoTokenizer

    from sparc_es.encode import requantize as rq
    from sparc_es.layout.names import TOKENIZER
    from sparc_es.layout.records import iter_vectors
    from sparc_es.model import idf

    if (out / "meta.json").is_file():
        return out
    tokenizer = AutoTokenizer.from_pretrained(encoded / TOKENIZER, local_files_only=True)
    text, record = idf.idf_vector((r["contents"] for r in iter_vectors(encoded)), tokenizer, len(tokenizer))
    df, n = stored_df(encoded, tokenizer.get_vocab())
    stored = idf.idf_weights(df, n)
    weights = {"text": text, "stored": stored, "mean": (text + stored) / 2}[variant]
    record = {**record, "counted_in": {"text": record["counted_in"], "stored": "the kept neural weights",
                                       "mean": "the mean of the two factors"}[variant]}
    with mock.patch.object(idf, "idf_vector", lambda *a, **k: (weights, record)):
        rq.requantize(encoded, out, idf=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", type=Path, default=ROOT / "runs" / "v5")
    p.add_argument("--model", default="2304a1258a440b87")
    p.add_argument("--domains", default=DOMAINS)
    p.add_argument("--variants", default="text,stored,mean")
    p.add_argument("--json", type=Path)
    a = p.parse_args()

    from sparc_es.engines import open_engine
    from sparc_es.engines.lucene import build_index
    from sparc_es.evaluation.measures import evaluate
    from sparc_es.evaluation.trec import read_qrels, read_topics, run_of
    from sparc_es.layout.manifest import Manifest

    out = {}
    for domain in a.domains.split(","):
        folder = a.workdir / domain
        topics = list(read_topics(folder / "evalset" / "topics.tsv"))
        qrels = read_qrels(folder / "evalset" / "qrels.txt")
        row = {}
        for variant in a.variants.split(","):
            encoded = reweighted(folder / f"encoded-{a.model}-k500", folder / f"encoded-{a.model}-k500-idf-{variant}",
                                 variant)
            index = folder / f"index-{a.model}-k500-idf-{variant}"
            if not (index / "meta.json").is_file():
                build_index(encoded, index, overwrite=True, bm25=False)
            engine = open_engine("lucene", index, hybrid="default")
            got = engine.batch_search(topics, k=1000)
            engine.close()
            manifest = Manifest.read(encoded)
            row[variant] = {"MRR": round(100 * evaluate(run_of(got), qrels, {"MRR": "RR@1000"})["MRR"], 2),
                            "postings_per_sentence": round(manifest.postings / manifest.sentences, 1)}
        print(domain, json.dumps(row), flush=True)
        out[domain] = row
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
