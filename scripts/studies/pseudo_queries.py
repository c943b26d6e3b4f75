"""Fine-tuning on the user's corpus with pseudo-questions from its own headings (research script, issue 40).

GPL (Wang et al. 2022) adapts a retriever to a new domain with questions a T5 model writes for the
corpus's passages. No such generator can be had here (none ships inside a package; `gpl` and `lmqg`
fetch theirs from a hub at run time), so this probe takes the only questions a documentation corpus
writes about itself: its section titles. Each section of the corpus (a document and its heading path)
gives one example:

* the pseudo-question: the section's title, with its parent's when the title has fewer than three
  words ("Local projects" -> "Installing packages Local projects");
* the positive: the section's first sentence of six words or more (the one that says what the
  section is about); the labels of admonitions ("Note", "Warning", "Example") are not sections;
* hard negatives: other sentences of the same document outside the section, and the Lucene BM25
  top 100 of the pseudo-question over the corpus outside the section.

These are mixed with ``--squad-share`` times as many of the source domain's training examples (so the
model does not forget how questions look), and the shipped model is fine-tuned on the mix with the
shipped recipe's settings (``sparc-es train``'s trainer) for ``--epochs`` passes over the mix
(``--control``: the same steps on source examples only). A corpus without headings gives no
examples and the script says so. Measured and concluded in docs/adaptation.md ("Pseudo-questions from
the corpus's own headings"): not a feature.

    .venv/bin/python scripts/studies/pseudo_queries.py --corpus work/docsqa-sets-v6/docs-pip/corpus.jsonl \\
        --output runs/pseudo/docs-pip --examples-cache runs/walk/examples.json --threads 1
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path


def section_path(headings: str | None) -> tuple[str, ...]:
    """A sentence's heading path without the labels of the boxes it sits in ("Note", "Example", ...),
    which name no topic."""
    from sparc_es.corpus.readers.blocks import BOX_LABELS

    labels = {v.lower() for v in BOX_LABELS.values()} | {"example", "examples"}
    path = [h.strip() for h in (headings or "").split(" > ") if h.strip()]
    while path and path[-1].lower() in labels:
        path.pop()
    return tuple(path)


def sections(sentences: list) -> list[list]:
    """The sentences grouped by (document, heading path), in corpus order; a section's first
    sentence is its first of at least six words."""
    groups: dict[tuple, list] = {}
    for s in sentences:
        path = section_path(s.headings)
        if path:
            groups.setdefault((s.doc, path), []).append(s)
    return [sorted(g, key=lambda s: len(s.text.split()) < 6) for g in groups.values()]


def pseudo_question(headings: str) -> str:
    """A section's pseudo-question: its title, with its parent's when the title is under three words."""
    path = section_path(headings)
    title = path[-1]
    if len(title.split()) < 3 and len(path) > 1:
        title = f"{path[-2]} {title}"
    return title


def pseudo_examples(corpus: Path, depth: int = 100, seed: int = 13, workdir: Path | None = None,
                    per_section: int = 1) -> list:
    """Training examples from the sections of ``corpus`` (see the module's docstring): the section's
    first ``per_section`` sentences, each with the section's pseudo-question."""
    from sparc_es.corpus.sources import Sentence, read_corpus
    from sparc_es.engines.bm25 import LuceneBM25, build_bm25_index
    from sparc_es.training.train import Example

    everything = list(read_corpus([corpus]))
    groups = sections(everything)
    if not groups:
        return []
    by_id = {s.id: s for s in everything}
    by_doc: dict[str | None, list[Sentence]] = {}
    for s in everything:
        by_doc.setdefault(s.doc, []).append(s)
    questions = [pseudo_question(g[0].headings) for g in groups]
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        build_bm25_index(everything, Path(tmp) / "bm25")
        hits = LuceneBM25(Path(tmp) / "bm25").batch_search([(str(i), q) for i, q in enumerate(questions)],
                                                           k=depth, threads=1)
    rng = random.Random(seed)
    examples = []
    for i, (group, question) in enumerate(zip(groups, questions)):
        inside = {s.id for s in group}
        same = [s for s in by_doc[group[0].doc] if s.id not in inside]
        same = rng.sample(same, min(20, len(same)))
        hard = [by_id[h.id] for h in hits[str(i)] if h.id not in inside]
        examples += [Example(question, "", positive, same, hard) for positive in group[:per_section]]
    return examples


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", type=Path, required=True, help="the corpus (sentence JSONL with headings)")
    p.add_argument("--output", type=Path, required=True, help="model folder to write")
    p.add_argument("--model", default="default", help="the model to fine-tune (default: %(default)s)")
    p.add_argument("--epochs", type=float, default=3.0,
                   help="passes over the mix of pseudo and source examples (default: %(default)s)")
    p.add_argument("--squad-share", type=float, default=1.0,
                   help="source-domain examples per pseudo example in the mix (default: %(default)s)")
    p.add_argument("--per-section", type=int, default=1,
                   help="examples a section gives: its first N sentences, each a positive (default: %(default)s)")
    p.add_argument("--control", action="store_true",
                   help="the control: as many source-domain examples in place of the pseudo examples (the same "
                        "steps, nothing from the corpus)")
    p.add_argument("--lr", type=float, default=1e-4, help="encoder learning rate (default: %(default)s)")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--examples-cache", type=Path, required=True, help="sparc-es train's examples cache (JSON)")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)

    import torch

    from sparc_es.training.examples import cached_examples
    from sparc_es.training.train import TrainConfig, train

    torch.set_num_threads(args.threads)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    pseudo = pseudo_examples(args.corpus, seed=args.seed, workdir=args.output.parent, per_section=args.per_section)
    if not pseudo:
        print(f"{args.corpus}: no sentence has headings, so there is no pseudo-question to train on", file=sys.stderr)
        return 1
    squad = cached_examples(args.examples_cache, None, 100, None)
    rng = random.Random(args.seed)
    n = round(args.squad_share * len(pseudo)) + (len(pseudo) if args.control else 0)
    mix = ([] if args.control else pseudo) + rng.sample(squad, min(len(squad), n))
    config = TrainConfig(model=args.model, epochs=args.epochs, lr=args.lr, seed=args.seed)
    print(f"{len(pseudo)} pseudo-questions (e.g. {pseudo[0].question!r} -> {pseudo[0].positive.text[:80]!r}); "
          f"training on {len(mix)} examples{' (control: source examples only)' if args.control else ''}",
          file=sys.stderr)
    summary = train(config, args.output, lambda: mix)
    summary["pseudo_examples"] = len(pseudo)
    (args.output / "training.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
