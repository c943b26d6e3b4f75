#!/usr/bin/env python
"""The time of one ``sparc-es adapt`` step: the checkpoint's full MLM forward against the MLM head on
the masked positions only (what ``adapt`` runs), side by side, and a whole run with the defaults.

    .venv/bin/python scripts/bench_adapt.py                       # 5,000 SQuAD dev sentences, 40 steps each way
    .venv/bin/python scripts/bench_adapt.py --corpus docs --steps 20 --threads 1

Each step is the same batch (the seeded batch of that step number) through both paths, taking
turns, each an optimiser step of E (forward, backward, AdamW), so the two see the same sentences
and the same machine state; medians and their ratio are printed and written as JSON with the CPU
named. ``--run`` also times a whole ``adapt`` with its defaults on the corpus (500 steps).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import cpu_model, spread

ROOT = Path(__file__).resolve().parents[1]


def corpus_texts(corpus: str | None, limit: int) -> tuple[list[str], str]:
    """The benchmark's sentences and how to name them: ``corpus`` (what encode reads), else the first
    ``limit`` SQuAD dev sentences of the shared data."""
    from sparc_es.corpus import read_corpus

    if corpus:
        return [s.text for s in read_corpus([corpus])][:limit], corpus
    from sparc_es.evaluation.evalsets import squad_dev_sentences

    texts = []
    for s in squad_dev_sentences():
        texts.append(s.text)
        if len(texts) == limit:
            break
    return texts, f"the first {len(texts):,} SQuAD dev sentences"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", help="a corpus encode reads (default: SQuAD dev sentences from ../shared/data)")
    p.add_argument("--limit", type=int, default=5000, help="sentences (default: %(default)s)")
    p.add_argument("--steps", type=int, default=40, help="timed steps per path (default: %(default)s)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default: %(default)s)")
    p.add_argument("--run", action="store_true", help="also time a whole adapt with its defaults")
    p.add_argument("--json", type=Path, default=ROOT / "bench" / "adapt.json")
    args = p.parse_args(argv)

    import torch

    from sparc_es.model import SparcModel
    from sparc_es.training.adapt import AdaptConfig, _batch_indices, _MaskedLM, adapt, find_base

    torch.set_num_threads(args.threads)
    texts, named = corpus_texts(args.corpus, args.limit)
    config = AdaptConfig()
    mlm = _MaskedLM(find_base(SparcModel.load("default")))
    optimizer = torch.optim.AdamW([mlm.E], lr=config.lr, weight_decay=0.0)
    seconds: dict[str, list[float]] = {"full": [], "masked": []}
    tokens = []
    for step in range(args.steps + 2):  # the first two steps warm both paths up, untimed
        batch = [texts[i] for i in _batch_indices(len(texts), step, config.batch_size, config.seed)]
        inputs = mlm.batch(batch, config.max_length, config.mask_probability, torch.Generator().manual_seed(step))
        tokens.append(int(inputs[1].sum()))
        for path in (("full", "masked") if step % 2 else ("masked", "full")):
            started = time.perf_counter()
            loss = mlm.loss(*inputs, masked_only=path == "masked")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if step >= 2:
                seconds[path].append(time.perf_counter() - started)
    full, masked = (statistics.median(seconds[k]) for k in ("full", "masked"))
    result = {"when": time.strftime("%Y-%m-%d %H:%M"), "command": "python scripts/bench_adapt.py " + " ".join(
                  sys.argv[1:] if argv is None else argv),
              "machine": {"cpu_model": cpu_model(), "torch_threads": torch.get_num_threads(),
                          "torch": torch.__version__, "capability": torch.backends.cpu.get_cpu_capability()},
              "corpus": named, "sentences": len(texts), "batch_size": config.batch_size,
              "max_length": config.max_length, "tokens_per_batch": spread(tokens),
              "seconds_per_step": {"full MLM forward": spread(seconds["full"]),
                                   "masked positions only": spread(seconds["masked"])},
              "speedup": round(full / masked, 2)}
    print(f"{result['machine']['cpu_model']}, {args.threads} torch threads; {named}, batches of "
          f"{config.batch_size} (median {statistics.median(tokens):.0f} tokens)")
    print("| path | s/step median (min-max) |\n|---|---|")
    for name, s in result["seconds_per_step"].items():
        print(f"| {name} | {s['median']} ({s['min']}-{s['max']}) |")
    print(f"masked positions only: {result['speedup']}x faster")
    if args.run:
        with tempfile.TemporaryDirectory(prefix="sparc-es-adapt-") as tmp:
            corpus = Path(tmp) / "corpus.jsonl"
            corpus.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(texts)))
            started = time.perf_counter()
            record = adapt("default", [corpus], Path(tmp) / "adapted", config, progress=False)
            result["whole_run"] = {"steps": record["steps"], "seconds": round(time.perf_counter() - started, 1),
                                   "adapt_seconds": record["seconds"]}
        print(f"a whole adapt with its defaults ({record['steps']} steps) on {named}: "
              f"{result['whole_run']['seconds']:.0f} s")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
