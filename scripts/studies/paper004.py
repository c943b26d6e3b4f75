"""Paper 004's adaptation recipe, probed: expand the base, train all of it on the corpus, retrain SPARC.

`adapt --expand-vocabulary` trains only E, so the fine-tuned encoder reads each new word as a token
it never learnt (docs/adaptation.md, "Where vocabulary expansion loses"). Paper 004 (Iida and
Okazaki) expands the base's vocabulary, continues masked-language modelling of the *whole* base on
the target corpus, and trains the retrieval model on top. This script makes that base:

    .venv/bin/python scripts/studies/paper004.py --corpus work/docsqa/pymdown --output runs/p004/pymdown-base
    .venv/bin/sparc-es train --model runs/p004/pymdown-base --output runs/p004/pymdown --threads 1 \\
        --examples-cache runs/flops/examples.json
    .venv/bin/python scripts/ship_model.py runs/p004/pymdown --lexical-weight 0.2 --stem-weight 0.3 \\
        --lexical-skips-stop-words --output runs/p004/pymdown-shipped

``--expand 0`` makes the control: the same training of the whole base, no new words (domain-adaptive
pre-training alone); ``--steps 0`` the expanded base untrained (new rows the mean of their pieces'),
e.g. as a passage encoder. The base is splade-bert-tiny, found as ``adapt`` finds it; the words are
``adapt``'s rule (:func:`sparc_es.training.vocabulary.expansion_words`), the masking ``adapt``'s.

``--gather FOLDER`` collects what a probe left in FOLDER (each ``sparc-es table --json
FOLDER/table-*.json``, each training's ``training.json``, each base's record) into one JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def gather(folder: Path) -> dict:
    """The scores, trainings and bases a probe left in ``folder``."""
    scores = {}
    for table in sorted(folder.glob("table-*.json")):
        for r in json.loads(table.read_text()):
            s = r.get("settings") or {}
            scores[(r["domain"], r["system"])] = {
                "MRR@1000": r["MRR@1000"], "R@1": r["R@1"], "R@100": r["R@100"], "model": s.get("model"),
                "passage_weight": s.get("passage_weight"), "postings_per_sentence": s.get("postings_per_sentence")}
    trainings = {}
    for record in sorted(folder.glob("*/training.json")):
        t = json.loads(record.read_text())
        trainings[record.parent.name] = {"model": t["config"]["model"], "passage_model": t["config"]["passage_model"],
                                         "seconds": t["seconds"], "torch_threads": t["torch_threads"],
                                         "passage_weight": t["passage_weight"]}
    bases = {}
    for record in sorted(folder.glob("*/paper004.json")):
        bases[record.parent.name] = {k: v for k, v in json.loads(record.read_text()).items() if k != "losses"}
    return {"scores": [{"domain": d, "system": s, **v} for (d, s), v in sorted(scores.items())],
            "trainings": trainings, "bases": bases}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gather", type=Path, metavar="FOLDER", help="collect a probe's figures (to --json) and stop")
    p.add_argument("--json", type=Path, help="with --gather: where to write them")
    p.add_argument("--corpus", type=Path, help="what encode takes; only the sentences' texts are used")
    p.add_argument("--output", type=Path, help="the adapted base's folder (a Hugging Face checkpoint)")
    p.add_argument("--expand", type=int, default=1000, help="new words at most (0: none, the control)")
    p.add_argument("--min-count", type=int, default=5)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    if a.gather:
        out = json.dumps(gather(a.gather), indent=1) + "\n"
        if a.json:
            a.json.write_text(out)
        else:
            print(out)
        return
    if not (a.corpus and a.output):
        p.error("--corpus and --output are required (or --gather)")

    import torch
    from tqdm import tqdm

    from sparc_es.corpus.sources import read_corpus
    from sparc_es.model import SparcModel
    from sparc_es.training.adapt import _batch_indices, _MaskedLM, find_base
    from sparc_es.training.vocabulary import expansion_words

    torch.set_num_threads(a.threads)
    texts = [s.text for s in read_corpus([str(a.corpus)])]
    default = SparcModel.load("default")
    base = find_base(default)
    words = expansion_words(texts, default.tokenizer, a.expand, a.min_count)
    mlm = _MaskedLM(base, "cpu", words)
    for parameter in mlm.model.parameters():  # the whole base, not E alone
        parameter.requires_grad_(True)
    optimizer = torch.optim.AdamW([q for q in mlm.model.parameters() if q.requires_grad], lr=a.lr, weight_decay=0.01)
    losses, started = [], time.perf_counter()
    for step in tqdm(range(a.steps), desc="masked LM, whole base", file=sys.stderr):
        generator = torch.Generator().manual_seed(a.seed * 1_000_003 + step)
        torch.manual_seed(a.seed * 1_000_003 + step)
        batch = [texts[i] for i in _batch_indices(len(texts), step, a.batch_size, a.seed)]
        loss = mlm.loss(*mlm.batch(batch, 128, 0.15, generator))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(round(loss.item(), 4))
    a.output.mkdir(parents=True, exist_ok=True)
    mlm.model.eval()
    mlm.model.save_pretrained(a.output)
    mlm.tokenizer.save_pretrained(a.output)
    record = {"base": str(base), "corpus": str(a.corpus), "sentences": len(texts), "words": len(words),
              "examples": words[:20], "steps": a.steps, "batch_size": a.batch_size, "lr": a.lr, "seed": a.seed,
              "seconds": round(time.perf_counter() - started, 1), "loss_first_10": sum(losses[:10]) / 10,
              "loss_last_10": sum(losses[-10:]) / 10}
    (a.output / "paper004.json").write_text(json.dumps({**record, "losses": losses}, indent=1) + "\n")
    print(json.dumps(record))


if __name__ == "__main__":
    main()
