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
FOLDER/table-*.json``, each training's ``training.json``, each base's record) into one JSON; with
``--matrix VARIANT`` it also prints and records the cross-domain matrix of the models named
``FOLDER/{domain}-{VARIANT}-shipped``, each scored on every domain: a model adapted on another
corpus is the control for what retraining alone moves (``seed14-shipped``, the shipped recipe with
another seed, is the other control).
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
                "passage_weight": s.get("passage_weight"), "postings_per_sentence": s.get("postings_per_sentence"),
                "run": r.get("run")}
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


def _corpus_of(domain: str) -> str:
    return domain.removeprefix("docs-")


def interval(scores: dict, domain: str, system: str, baseline: str) -> list[float] | None:
    """The paired bootstrap 95% interval of ``system`` - ``baseline`` on ``domain``'s questions (MRR@1000),
    from the run files the table wrote: what resampling the questions alone moves."""
    from sparc_es.evaluation.measures import compare
    from sparc_es.evaluation.trec import read_qrels

    a, b = scores.get((domain, system), {}).get("run"), scores.get((domain, baseline), {}).get("run")
    if not (a and b and Path(a).is_file() and Path(b).is_file()):
        return None
    qrels = read_qrels(Path(a).parents[1] / "evalset" / "qrels.txt")
    d = compare(a, b, qrels, {"MRR@1000": "RR@1000"})[0]
    return [round(100 * d.low, 2), round(100 * d.high, 2)]


def mean_interval(scores: dict, pairs: list[tuple[str, str]], baseline: str, resamples: int = 2000) -> list[float]:
    """The 95% interval of the mean over domains of (system - baseline) MRR@1000, each domain's
    questions resampled on their own (a stratified paired bootstrap): ``pairs`` are (domain, system)."""
    import numpy as np

    from sparc_es.evaluation.measures import per_query_file
    from sparc_es.evaluation.trec import read_qrels

    rng, means = np.random.default_rng(0), np.zeros(resamples)
    for domain, system in pairs:
        a, b = scores[(domain, system)]["run"], scores[(domain, baseline)]["run"]
        qrels = read_qrels(Path(a).parents[1] / "evalset" / "qrels.txt")
        x, y = (per_query_file(r, qrels, {"MRR@1000": "RR@1000"})["MRR@1000"] for r in (a, b))
        diff = np.array([x[q] - y[q] for q in qrels])
        means += diff[rng.integers(len(diff), size=(resamples, len(diff)))].mean(axis=1)
    low, high = np.quantile(100 * means / len(pairs), [0.025, 0.975])
    return [round(float(low), 2), round(float(high), 2)]


def matrix(scores: list[dict], variant: str, folder: str = "runs/p004") -> dict:
    """Each domain's score with the model adapted on it, against the default, a reseeded control and
    the models adapted on the other domains (what retraining alone moves), with the paired bootstrap
    intervals of the adapted and the reseeded model against the default (what the questions move)."""
    full = {(r["domain"], r["system"]): r for r in scores}
    at = {key: r["MRR@1000"] for key, r in full.items()}
    default, control = "sparc:idf=1,hybrid=sum", f"sparc:idf=1,hybrid=sum,model={folder}/seed14-shipped"
    domains = sorted({d for d, s in at if s == default})
    models = {_corpus_of(d): f"{default},model={folder}/{_corpus_of(d)}-{variant}-shipped" for d in domains}
    rows = []
    for d in domains:
        here = at.get((d, models[_corpus_of(d)]))
        elsewhere = [at[(d, m)] for c, m in models.items() if c != _corpus_of(d) and (d, m) in at]
        if here is None:
            continue
        off = sum(elsewhere) / len(elsewhere) if elsewhere else None
        rows.append({"domain": d, "bm25": at.get((d, "bm25")), "default": at[(d, default)],
                     "reseeded": at.get((d, control)), "adapted_here": here,
                     "adapted_elsewhere_mean": None if off is None else round(off, 2),
                     "adapted_elsewhere_range": [min(elsewhere), max(elsewhere)] if elsewhere else None,
                     "adapted_elsewhere_n": len(elsewhere),
                     "change": round(here - at[(d, default)], 2),
                     "change_interval": interval(full, d, models[_corpus_of(d)], default),
                     "reseeded_interval": interval(full, d, control, default),
                     "corpus_effect": None if off is None else round(here - off, 2)})
    docs = [r for r in rows if r["domain"].startswith("docs-")]
    summary = {"docs_mean_change": round(sum(r["change"] for r in docs) / len(docs), 2) if docs else None,
               "docs_mean_change_interval": mean_interval(
                   full, [(r["domain"], models[_corpus_of(r["domain"])]) for r in docs], default) if docs else None,
               "docs_mean_reseeded_interval": mean_interval(
                   full, [(r["domain"], control) for r in docs], default)
               if docs and all((r["domain"], control) in full for r in docs) else None,
               "worst_change": min(((r["change"], r["domain"]) for r in rows), default=None),
               "mean_corpus_effect": round(sum(r["corpus_effect"] for r in rows if r["corpus_effect"] is not None)
                                           / max(1, sum(r["corpus_effect"] is not None for r in rows)), 2)}
    return {"variant": variant, "rows": rows, "summary": summary}


def _print_matrix(m: dict) -> None:
    cols = ["bm25", "default", "reseeded", "adapted_here", "adapted_elsewhere_mean", "change", "corpus_effect"]
    print("| domain | " + " | ".join(cols) + " | change, 95% | reseeded - default, 95% |")
    print("|---" * (len(cols) + 3) + "|")
    for r in m["rows"]:
        spans = ["" if r[c] is None else f"{r[c][0]:+.2f} .. {r[c][1]:+.2f}" for c in ("change_interval",
                                                                                   "reseeded_interval")]
        print(f"| {r['domain']} | " + " | ".join("" if r[c] is None else f"{r[c]:.2f}" for c in cols)
              + " | " + " | ".join(spans) + " |")
    print(m["summary"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gather", type=Path, metavar="FOLDER", help="collect a probe's figures (to --json) and stop")
    p.add_argument("--json", type=Path, help="with --gather: where to write them")
    p.add_argument("--matrix", metavar="VARIANT", help="with --gather: the matrix of FOLDER/*-VARIANT-shipped")
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
        found = gather(a.gather)
        if a.matrix:
            found["matrix"] = matrix(found["scores"], a.matrix, str(a.gather))
            _print_matrix(found["matrix"])
        out = json.dumps(found, indent=1) + "\n"
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
