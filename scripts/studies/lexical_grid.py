"""Concluded: alpha 0.2, stem beta 0.3 (val 74.69 MRR on the three-epoch model), as shipped (docs/training.md).

Choose the lexical term's alpha and stem weight beta on an evaluation set, without re-encoding.

Scores, exactly in floating point, the neural weights of an encoded folder that has no lexical term
(``sparc-es table --systems sparc-exact:model=M,lexical_weight=0`` writes one with float weights)
plus alpha x the sentences' own BM25 weights plus beta x their stem siblings' BM25 weights, composed
by the product's own pipeline (``sparc_es.model.stored``: ``lexical_terms`` and ``stored_weights``)
with the evaluation corpus's statistics: the weights an encode with that alpha and beta would
store (without IDF), for every (alpha, beta) of a grid at the cost of one encode. Use it on the validation split only::

    .venv/bin/python scripts/studies/lexical_grid.py runs/val/encoded-<fingerprint>-k500 runs/models/e2 \\
        --alphas 0.2,0.25,0.3,0.35,0.4 --betas 0,0.3,0.4,0.5 --json runs/lexical-grid.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def floats_list(text: str) -> list[float]:
    return [float(x) for x in text.split(",")]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("encoded", type=Path, help="encoded folder with float weights and no lexical term")
    p.add_argument("model", help="the model folder it was encoded with")
    p.add_argument("--evalset", type=Path, default=Path("runs/val/evalset"),
                   help="evaluation set folder (default: the validation split under runs/)")
    p.add_argument("--alphas", type=floats_list, default=[0.2, 0.25, 0.3, 0.35, 0.4])
    p.add_argument("--betas", type=floats_list, default=[0.0, 0.3, 0.4, 0.5])
    p.add_argument("--json", type=Path, help="write the grid here")
    args = p.parse_args(argv)

    import numpy as np
    from scipy import sparse

    from sparc_es.engines.exact import top_k_rows
    from sparc_es.evaluation.evalsets import EvalSet
    from sparc_es.evaluation.measures import evaluate
    from sparc_es.layout.manifest import Manifest
    from sparc_es.layout.records import iter_vectors
    from sparc_es.model import SparcModel, stored_weights

    manifest = Manifest.read(args.encoded)
    if manifest.model.lexical_weight or manifest.model.stem_weight:
        raise SystemExit(f"{args.encoded}: already has a lexical term; encode with lexical_weight=0")
    model = SparcModel.load(args.model, lexical_weight=1.0, stem_weight=1.0)
    vocab = model.tokenizer.get_vocab()
    evalset = EvalSet.read(args.evalset)
    ids, neural = [], []
    for record in iter_vectors(args.encoded):
        if "weights" not in record:
            raise SystemExit(f"{args.encoded}: no float weights; encode with --keep-floats")
        ids.append(record["id"])
        tokens = sorted(record["weights"].items(), key=lambda tw: -tw[1])
        neural.append((np.array([vocab[t] for t, _ in tokens], dtype=np.int64),
                       np.array([w for _, w in tokens], dtype=np.float32)))
    text = {s.id: s.text for s in evalset.sentences}
    sentences = [text[i] for i in ids]
    terms = model.lexical_terms(sentences, model.count_corpus(sentences))
    shape = (len(ids), len(vocab))

    def docs(alpha: float, beta: float):
        """What an encode with this alpha and beta stores (model.stored.stored_weights, no IDF)."""
        rows, cols, vals = [], [], []
        for r, ((tokens, weights), term) in enumerate(zip(neural, terms)):
            kept, w = stored_weights(tokens, weights, None, term.scaled(alpha, beta) if alpha or beta else None)
            rows += [r] * len(kept)
            cols += kept.tolist()
            vals += w.tolist()
        return sparse.csr_matrix((vals, (rows, cols)), shape=shape, dtype=np.float64)

    bags = [model.queries.bag(q) for _, q in evalset.topics]
    questions = sparse.csr_matrix(([c for b in bags for c in b.values()],
                                   ([i for i, b in enumerate(bags) for _ in b], [vocab[t] for b in bags for t in b])),
                                  shape=(len(bags), len(vocab)), dtype=np.float64)

    def score(matrix) -> dict[str, float]:
        ranked = top_k_rows((questions @ matrix.T).toarray(), 1000)
        run = {qid: {ids[j]: s for j, s in row} for (qid, _), row in zip(evalset.topics, ranked)}
        return {k: round(100 * v, 2) for k, v in evaluate(run, evalset.qrels).items()}

    rows = [{"alpha": 0.0, "beta": 0.0, **score(docs(0.0, 0.0))}]
    print(f"neural weights alone: MRR@1000 {rows[0]['MRR@1000']:.2f}  R@1 {rows[0]['R@1']:.2f}", flush=True)
    print("alpha \\ beta " + "".join(f"{b:>14g}" for b in args.betas))
    for a in args.alphas:
        line = []
        for b in args.betas:
            rows.append({"alpha": a, "beta": b, **score(docs(a, b))})
            line.append(f"{rows[-1]['MRR@1000']:6.2f} / {rows[-1]['R@1']:5.2f}")
        print(f"{a:<13g}" + "".join(f"{x:>14}" for x in line), flush=True)
    best = max(rows, key=lambda r: r["MRR@1000"])
    print(f"best: alpha {best['alpha']:g}, beta {best['beta']:g}: MRR@1000 {best['MRR@1000']:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"encoded": str(args.encoded), "model": args.model,
                                         "evalset": str(args.evalset), "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
