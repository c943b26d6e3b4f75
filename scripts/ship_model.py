#!/usr/bin/env python
"""Ship a trained model as the package default: half-precision weights, tokenizer, config, model card.

    .venv/bin/python scripts/ship_model.py runs/models/sparc --table docs/results/trained.json \
        --command "sparc-es train --output runs/models/sparc ..."

Writes ``sparc_es/model/default/`` (what ``--model default`` loads from then on) with
``MODEL_CARD.md`` built from the run's ``training.json`` and the evaluation rows of that model.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
from pathlib import Path

from sparc_es.model import SparcModel
from sparc_es.model.checkpoint import SHIPPED_MODEL


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trained", type=Path, help="model folder written by sparc-es train")
    p.add_argument("--table", type=Path, nargs="*", default=[],
                   help="JSON rows from sparc-es table: rows of this model (trained or shipped) are listed, "
                        "with BM25 rows for reference")
    p.add_argument("--command", required=True, help="the exact command that trained it")
    p.add_argument("--output", type=Path, default=SHIPPED_MODEL)
    p.add_argument("--lexical-weight", type=float, default=None,
                   help="set the lexical term's alpha (sparc_es.model.lexical) in the shipped config, as chosen on "
                        "the validation split; default: what training left")
    p.add_argument("--stem-weight", type=float, default=None,
                   help="set the lexical term's stem weight beta (sparc_es.model.lexical), as chosen on the "
                   "validation split")
    p.add_argument("--lexical-skips-stop-words", action="store_true",
                   help="the lexical term leaves out Lucene's English stop words (sparc_es.model.lexical), as chosen "
                        "on the validation domains")
    args = p.parse_args(argv)

    overrides = {k: v for k, v in (("lexical_weight", args.lexical_weight), ("stem_weight", args.stem_weight),
                                   ("lexical_skips_stop_words", args.lexical_skips_stop_words or None))
                 if v is not None}
    model = SparcModel.load(args.trained, **overrides)
    fingerprint = model.fingerprint
    training = json.loads((args.trained / "training.json").read_text())
    if args.output.exists():
        shutil.rmtree(args.output)
    model.encoder.half()  # loaded back as float32
    if model.passage_model is not None:
        model.passage_model.encoder.half()
    model.save(args.output)
    shipped = SparcModel.load(args.output)
    ours = {fingerprint, shipped.fingerprint}
    rows = [r for t in args.table for r in json.loads(t.read_text())
            if r["settings"].get("model") in ours or r["system"] == "bm25"]
    size = sum(f.stat().st_size for f in args.output.rglob("*") if f.is_file()) / 1e6
    cfg = training["config"]
    held_out = cfg.get("validation_articles", 0)
    c = model.config
    shipping_note = " (set at shipping, chosen on the validation split)" if overrides else ""
    extras = ["scored through the base's MLM head" if c.head.value == "mlm" else "",
              "learned per-token weights" if c.token_weights else "",
              f"passage expansion, lambda = {c.passage_weight:.2f} (frozen {cfg.get('passage_model')} passage "
              f"encoder, {c.passage_max_length} tokens)" if c.passage_weight else "",
              f"lexical term alpha = {c.lexical_weight:g} x BM25 (k1 {c.lexical_k1:g}, b {c.lexical_b:g}) over the "
              f"encoded corpus's WordPiece statistics"
              f"{', leaving out Lucene English stop words' if c.lexical_skips_stop_words else ''}{shipping_note}"
              if c.lexical_weight else "",
              f"stem term beta = {c.stem_weight:g} x BM25 of each word's Porter stem for the vocabulary's other "
              f"words with that stem{shipping_note}" if c.stem_weight else "",
              f"{cfg.get('same_passage_negatives', 1)} same-passage and {cfg.get('bm25_negatives', 1)} BM25 "
              "negatives per question"]
    base = model.config.base_model
    seen = training["steps"] * cfg["batch_size"]
    top_k_aware = ", top-K-aware scoring in training" if cfg.get("top_k_aware") else ""
    flags = "".join(f" --{k.replace('_', '-')}" + ("" if v is True else f" {v:g}") for k, v in overrides.items())

    def weights_of(r: dict) -> str:
        if r["system"] == "bm25":
            return "-"
        return "trained, float32" if r["settings"]["model"] == fingerprint else "shipped, half precision"

    lines = [
        "# sparc-es default model", "",
        f"SPARC ({'w learned' if cfg['learn_w'] else 'SPARTA, w fixed at 0'}) fine-tuned from "
        f"{model.config.base_model.get('name', cfg['model'])}; exp(w) = {training['exp_w']:.2f}.", "",
        "| | |", "|---|---|",
        f"| base checkpoint | {base.get('name')} (sha256 {base.get('sha256', '?')[:16]}...) |",
        f"| training data | SQuAD v1.1 train, articles 1-{44 - held_out} of `../shared/data/squad_train_slice` "
        f"({training['questions']:,} questions)"
        f"{f'; articles {45 - held_out}-44 held out for model selection' if held_out else ''} |",
        f"| steps | {training['steps']} of {cfg['batch_size']} questions ({seen} questions seen) |",
        f"| settings | max length {cfg['max_length']}, max over {cfg['max_over']}, lr {cfg['lr']}, w lr {cfg['w_lr']}, "
        f"warm-up {cfg['warmup_steps']} (capped at a tenth of the run), seed {cfg['seed']}, K {model.config.top_k}"
        f"{top_k_aware}; {'; '.join(e for e in extras if e)} |",
        f"| objective | cross-entropy over in-batch sentences (positive, same-passage and BM25 negatives), "
        f"E frozen; final training loss {training['final_loss']} |",
        f"| hardware | {training['device']}, {training['torch_threads']} torch threads ({platform.machine()}) |",
        f"| wall time | {training['seconds'] / 60:.1f} min ({training['questions_per_second']} questions/s) |",
        f"| weights | half precision, {size:.1f} MB in all; fingerprint when loaded: {shipped.fingerprint} "
        f"(trained float32: {fingerprint}) |", "",
        "## Results (MRR@1000 / R@1, revised MultiReQA dev pools)", "",
        "| domain | system | weights | scoring | MRR@1000 | R@1 |", "|---|---|---|---|---|---|",
        *[f"| {r['domain']} | {r['system']} | {weights_of(r)} | {r['settings'].get('scoring', 'Lucene BM25')} "
          f"| {r['MRR@1000']:.2f} | {r['R@1']:.2f} |" for r in rows], "",
        "## Reproduce", "", "```sh", args.command,
        f".venv/bin/python scripts/ship_model.py {args.trained} --table {' '.join(map(str, args.table))} "
        f"--command '{args.command}'" + flags, "```", "",
    ]
    (args.output / "MODEL_CARD.md").write_text("\n".join(lines))
    print(f"shipped {args.trained} to {args.output} ({size:.1f} MB, fingerprint {shipped.fingerprint})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
