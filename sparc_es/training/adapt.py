"""Embedding replacement: adapt a trained SPARC model to a target corpus, on a CPU, with no questions.

Section 5.1 of the SPARC paper (Nishida, Yoshinaga and Nishida, "Sparse Neural Retrieval Model for
Efficient Cross-Domain Retrieval-Based Question Answering"; docs/adaptation.md has what it gave
here): the *original base checkpoint* the SPARC model was fine-tuned from is trained with
masked-language modelling on the target corpus's sentences with every parameter frozen except
the word-embedding matrix E; that E then replaces the SPARC model's own (which training left
equal to the base's, since E is frozen there). The encoder's layers are untouched, so what the
model learnt about questions and answers stays, while the vocabulary it scores with moves towards
the target domain.

The MLM logits come from the checkpoint's own MLM head where it has one (tied to E, so E is
trained on both sides); a checkpoint without one (all-MiniLM-L6-v2) uses the same dot-product
head SPARC scores with, logits = H . E^T. Either is computed on the masked positions only, the
only ones the loss reads: the same loss and gradients as every position's, at a fraction of the
vocabulary-wide product. Masking is BERT's: 15% of the sentence's tokens, of which 80% become
[MASK], 10% a random token, 10% stay.

Vocabulary expansion (``--expand-vocabulary N``, off by default; AdaLM's, as Iida and Okazaki's
"Unsupervised Domain Adaptation for Sparse Retrieval by Filling Vocabulary and Word Frequency Gaps"
uses it, section 3.2.1):
before training, up to N of the corpus's words that occur at least ``--expand-min-count`` times and
that WordPiece splits into pieces become whole-word tokens of both the model and its base, each new
row of E (and of every vocabulary-sized head tensor) starting as the mean of its pieces';
training and the strength then apply to the new rows as to the others (``--rows new``: only to
the new rows, expansion without replacement; :mod:`sparc_es.training.vocabulary` has the rule).
Measured on the seven validation domains (the documentation sets' third pass, 145-189 questions a
project, and 1,047 of SQuAD's held-out articles) it did not pay, alone (-0.98 MRR on average over
the documentation sets; pymdown -5.53) or with replacement (-0.55); replacement alone moved MRR by
+0.23 on average (-0.48 to +0.84 a domain, every change within its noise), and no statistic of the
corpus told which domains gain: adapt prints the one it computes beside the validation domains'
(docs/adaptation.md, "On the third-pass question sets"). Keep an adapted model only if your own
questions score better with it.

Batches and masks are drawn from the seed and the step number alone, so a run is deterministic
and a resumed run (``adapt-checkpoint.pt`` in the output folder, every ``checkpoint_every`` steps)
takes up the killed one's steps where it left them: at the same thread count (--threads) its model
is byte for byte the model of a run that was never stopped; at another count the losses match but
the weights may differ in their last bits, since the order of float sums follows the number of
threads (a resume says so). The target sentences' texts are held in memory (for random batches);
nothing else of the corpus is.

Time: a run takes ``steps`` x one step, whatever the corpus's size (a step reads ``batch_size``
sentences); a step costs more the longer its sentences (each batch is padded to its longest, at
most ``max_length`` tokens). With the default model and 32 sentences a step, measured on a 2-core
AMD EPYC virtual machine (Zen 4; ``scripts/bench_adapt.py``, docs/adaptation.md): 0.11 s a step
at two threads on SQuAD sentences (about 33 tokens), so the default 500 steps took 63 s for a
5,000-sentence corpus; 0.31 s a step at one thread on this repository's documentation (long
table rows: most batches hold a sentence of 128 tokens), 162 s for the run. On a busy machine
give adapt one thread (``--threads 1``). Ctrl-C stops a run; the same command resumes it from its
last checkpoint (one every ``checkpoint_every`` steps).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sparc_es.corpus.sources import read_corpus
from sparc_es.errors import ModelError, SparcError, StoreError, option
from sparc_es.layout import ownership as folders
from sparc_es.layout.locks import exclusive
from sparc_es.model import SparcModel
from sparc_es.model.checkpoint import (
    KNOWN_BASES,
    SPARC_CONFIG,
    base_provenance,
    known_base_path,
    quiet_transformers,
    read_state,
    sha256_file,
    weights_file,
)
from sparc_es.notices import notice
from sparc_es.options import setting
from sparc_es.training.vocabulary import split_word_share

CHECKPOINT = "adapt-checkpoint.pt"


@dataclass(frozen=True)
class AdaptConfig:
    """Settings of one adaptation run (paper defaults: 500 steps, batch 32, lr 5e-5)."""

    steps: int = setting(500, "optimiser steps; the time a run takes is steps x 0.1 to 0.3 s on two CPU cores, "
                              "longer sentences costing more (measured: see above)")
    batch_size: int = setting(32, "sentences per step")
    lr: float = setting(5e-5, "learning rate of E")
    mask_probability: float = setting(0.15, "share of tokens masked")
    max_length: int = setting(128, "tokens per sentence, [CLS] and [SEP] included")
    seed: int = setting(13, "random seed")
    checkpoint_every: int = setting(100, "steps between checkpoints")
    # How far the model's E moves towards the one trained on the corpus: E + strength x (E' - E).
    # Half the step kept the gains of the full one and lost less where the full one lost, on the
    # validation domains (docs/adaptation.md); 1 is the paper's replacement.
    strength: float = setting(0.5, "how far E moves towards the one trained on your corpus, in (0, 1]; 1 is the "
                                    "paper's full replacement (chosen on the validation domains: docs/adaptation.md)")
    # Vocabulary expansion (AdaLM, paper 004 section 3.2.1): sparc_es.training.vocabulary.
    expand_vocabulary: int = setting(0, "add up to this many of your corpus's frequent words that WordPiece splits "
                                        "into pieces as whole-word tokens (E rows start as their pieces' mean, then "
                                        "are trained); 0 = off", metavar="N")
    expand_min_count: int = setting(20, "times a word must occur in the corpus to be added by --expand-vocabulary",
                                    metavar="N")
    # Which rows of E the masked-LM steps move: every row (embedding replacement, with or without
    # expansion) or only the rows of the words expansion added (vocabulary expansion alone: every
    # old token keeps its embedding, so only texts with a new word are encoded differently).
    rows: str = setting("all", "rows of E that training moves: all (embedding replacement) or new (only the words "
                               "--expand-vocabulary adds: expansion alone)", choices=("all", "new"))

    def __post_init__(self) -> None:
        # The checks train makes of its numbers, each naming its flag and the value given.
        for name in ("steps", "batch_size", "checkpoint_every", "expand_min_count"):
            if getattr(self, name) < 1:
                raise SparcError(f"adaptation {name} must be at least 1 ({_flag(name)} {getattr(self, name)})")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise SparcError(f"adaptation lr must be a finite number above 0 ({_flag('lr')} {self.lr:g})")
        if not 0 < self.strength <= 1:
            raise SparcError(f"the adaptation strength must be in (0, 1]: above 0, at most 1 ({_flag('strength')} "
                             f"{self.strength:g})")
        if not 0 < self.mask_probability < 1:
            raise SparcError(f"the mask probability must be above 0 and below 1, neither bound included "
                             f"({_flag('mask_probability')} {self.mask_probability:g})")
        if self.max_length < 8:
            raise SparcError(f"the adaptation max length must be at least 8 tokens ({_flag('max_length')} "
                             f"{self.max_length})")
        if self.expand_vocabulary < 0:
            raise SparcError(f"expand_vocabulary must be 0 (off) or a number of words ({_flag('expand_vocabulary')} "
                             f"{self.expand_vocabulary})")
        if self.rows not in ("all", "new"):
            raise SparcError(f"rows must be 'all' or 'new', not {self.rows!r}")
        if self.expand_min_count != AdaptConfig.expand_min_count and not self.expand_vocabulary:
            raise SparcError(f"expand_min_count is the count of the words vocabulary expansion adds: give "
                             f"{_flag('expand_vocabulary')} N ({_flag('expand_min_count')} {self.expand_min_count})")
        if self.rows == "new" and not self.expand_vocabulary:
            raise SparcError(f"rows='new' trains only the rows vocabulary expansion adds: give "
                             f"{_flag('expand_vocabulary')} N")


def _flag(name: str) -> str:
    """The setting ``name`` as its user gives it: the ``sparc-es adapt`` flag (``batch_size`` ->
    ``--batch-size``), or the keyword from Python."""
    return option("--" + name.replace("_", "-"), name)


# What adapt (embedding replacement, the defaults) did on the seven validation domains under the
# default search, against the share of their words WordPiece splits (docs/adaptation.md, "On the
# third-pass question sets"; docs/results/third-pass-adaptation.json): no change outside its paired
# interval, and a rank correlation with the share that seven domains cannot tell from chance.
VALIDATION_EVIDENCE = {"domains": 7, "split_share": (0.054, 0.111), "mrr_change": (-0.48, +0.84), "spearman": 0.46,
                       "docs_mean_change": 0.23}


def advice(fit: dict) -> str:
    """What the corpus's statistics (:func:`~sparc_es.training.vocabulary.split_word_share`) say of
    whether adaptation will help, as measured on the validation domains: one line for the user."""
    e = VALIDATION_EVIDENCE
    low, high = e["split_share"]
    worst, best = e["mrr_change"]
    where = ("inside" if low <= fit["share"] <= high else "outside") + f" the validation domains' {low:.1%}-{high:.1%}"
    return (f"your corpus: {fit['share']:.1%} of its {fit['words']:,} words are split by the vocabulary ({where}); "
            f"on {e['domains']} validation domains adapt changed MRR by {worst:+.2f} to {best:+.2f} "
            f"({e['docs_mean_change']:+.2f} on average over the documentation ones, within noise) and this share did "
            f"not tell which (rank correlation {e['spearman']:.2f} over {e['domains']}, within chance): keep "
            "the model only if your own questions score better with it (sparc-es table; docs/adaptation.md)")


def corpus_fingerprint(texts: Iterable[str]) -> str:
    """Short hash of the target sentences, in order (what the adapted E was trained on)."""
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()[:16]


def find_base(model: SparcModel, base: str | Path | None = None) -> Path:
    """The base checkpoint ``model`` was fine-tuned from: ``base`` if given, else the path its
    provenance records, else the ``KNOWN_BASES`` package whose weights have the recorded sha256."""
    if base is not None:
        path = known_base_path(str(base)) if str(base) in KNOWN_BASES else Path(base)
        if not path.is_dir():
            raise ModelError(f"{path}: no such base checkpoint folder")
        return path
    record = model.config.base_model
    want = record.get("sha256")
    candidates = [Path(record["path"])] if record.get("path") else []
    for name in KNOWN_BASES:
        try:
            candidates.append(known_base_path(name))
        except ModelError:
            continue
    for path in candidates:
        try:
            if path.is_dir() and (want is None or sha256_file(weights_file(path)) == want):
                return path
        except ModelError:
            continue
    raise ModelError(f"cannot find the base checkpoint of this model ({record.get('name')!r}, sha256 "
                     f"{str(want)[:12]}...); pass --base FOLDER")


def _check_positions(base: Path, max_length: int) -> None:
    """Refuse, before any work, a max length beyond the base checkpoint's position table: the first
    sentence that long failed mid-run with a tensor size error."""
    from transformers import AutoConfig

    try:
        with quiet_transformers():
            limit = getattr(AutoConfig.from_pretrained(base, local_files_only=True), "max_position_embeddings", None)
    except (OSError, ValueError):  # said when the checkpoint is loaded
        return
    if isinstance(limit, int) and max_length > limit:
        raise SparcError(f"the adaptation max length must be at most {limit} tokens, the positions of the base "
                         f"checkpoint {base} ({_flag('max_length')} {max_length})")


class _MaskedLM:
    """The base checkpoint with only E trainable, and its MLM loss."""

    def __init__(self, path: Path, device: str = "cpu", words: list[str] = ()) -> None:
        import torch
        from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoTokenizer

        with quiet_transformers():
            self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
            archs = AutoConfig.from_pretrained(path, local_files_only=True).architectures or []
            self.head = "mlm" if any(a.endswith("ForMaskedLM") for a in archs) else "dot"
            cls = AutoModelForMaskedLM if self.head == "mlm" else AutoModel
            # weights-only (transformers' default, said here): a base's pytorch_model.bin never runs code
            self.model, info = cls.from_pretrained(path, local_files_only=True, output_loading_info=True,
                                                   dtype=torch.float32, weights_only=True)
        missing = [k for k in info.get("missing_keys", ()) if "pooler" not in k]
        if missing:
            raise ModelError(f"{path}: base checkpoint lacks {len(missing)} tensors, e.g. {missing[:3]}")
        if self.tokenizer.mask_token_id is None:
            raise ModelError(f"{path}: the tokenizer has no [MASK] token; masked-language modelling needs one")
        if words:  # vocabulary expansion: the same new ids and mean-initialised rows as the SPARC model's
            from sparc_es.training.vocabulary import expand_masked_lm

            self.tokenizer = expand_masked_lm(self.model, self.tokenizer, list(words))
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.device = device
        self.model.to(device)
        self.E = self.model.get_input_embeddings().weight
        self.E.requires_grad_(True)
        # The checkpoint's MLM head as one module (BERT's ``cls``, RoBERTa's ``lm_head``): then the loss
        # runs it on the masked positions only (:meth:`loss`); else the model computes every position's.
        self.mlm_head = next((getattr(self.model, name) for name in ("cls", "lm_head")
                              if isinstance(getattr(self.model, name, None), torch.nn.Module)), None)
        self.model.train()  # dropout, as in pre-training
        self.special = torch.tensor(sorted(set(self.tokenizer.all_special_ids)))

    def batch(self, texts: list[str], max_length: int, probability: float, generator):
        """Input ids, attention mask and labels (-100 where not masked) for one batch."""
        import torch

        with quiet_transformers():
            enc = self.tokenizer(texts, truncation=True, max_length=max_length, padding=True, return_tensors="pt")
        ids = enc["input_ids"]
        candidates = (enc["attention_mask"] == 1) & ~torch.isin(ids, self.special)
        chosen = (torch.rand(ids.shape, generator=generator) < probability) & candidates
        if not chosen.any():  # a batch of very short sentences: mask at least one token
            rows, cols = candidates.nonzero(as_tuple=True)
            pick = int(torch.randint(len(rows), (1,), generator=generator))
            chosen[rows[pick], cols[pick]] = True
        labels = torch.where(chosen, ids, torch.full_like(ids, -100))
        roll = torch.rand(ids.shape, generator=generator)
        inputs = ids.clone()
        inputs[chosen & (roll < 0.8)] = self.tokenizer.mask_token_id
        swap = chosen & (roll >= 0.8) & (roll < 0.9)
        inputs[swap] = torch.randint(len(self.tokenizer), ids.shape, generator=generator)[swap]
        return inputs, enc["attention_mask"], labels

    def loss(self, inputs, attention, labels, masked_only: bool = True):
        """The MLM loss of a batch: the mean cross-entropy over its masked positions.

        Only the masked positions (15%) need the vocabulary-wide logits, which are most of a step's
        work for a small encoder (the default's base has 2 layers of 128 and 30,522 words):
        computed there alone, the loss and E's gradient are the full computation's, up to the order
        of float sums (``masked_only=False`` runs the checkpoint's own full MLM forward, for tests)."""
        import torch

        inputs, attention, labels = (t.to(self.device) for t in (inputs, attention, labels))
        if self.head == "mlm" and (self.mlm_head is None or not masked_only):
            return self.model(input_ids=inputs, attention_mask=attention, labels=labels).loss
        picked = labels != -100
        if self.head == "mlm":
            hidden = self.model.base_model(input_ids=inputs, attention_mask=attention).last_hidden_state
            logits = self.mlm_head(hidden[picked])
        else:
            hidden = self.model(input_ids=inputs, attention_mask=attention).last_hidden_state
            logits = hidden[picked] @ self.E.T
        return torch.nn.functional.cross_entropy(logits, labels[picked])


def _batch_indices(n: int, step: int, batch_size: int, seed: int) -> list[int]:
    """Sentences of a step: consecutive slices of a fresh seeded permutation per pass over the corpus."""
    out: list[int] = []
    position = step * batch_size
    while len(out) < batch_size:
        epoch, offset = divmod(position, n)
        order = np.random.default_rng([seed, epoch]).permutation(n)
        take = order[offset: offset + batch_size - len(out)]
        out.extend(int(i) for i in take)
        position += len(take)
    return out


def _differences(now: dict, then: dict) -> str:
    """The settings of this run that differ from those an unfinished run's checkpoint recorded,
    each with both values: ``--lr 0.001 (the checkpoint's: 5e-05)``."""
    def shown(value) -> str:
        if isinstance(value, list):
            return " ".join(str(v) for v in value)
        return f"{value:g}" if isinstance(value, float) else str(value)

    names = {"model": f"{_flag('model')} (its fingerprint)", "base": _flag('base'), "corpus": _flag('corpus'),
             "corpus_fingerprint": "the corpus's sentences (their fingerprint)"}
    parts = []
    for key in [*now, *(k for k in then if k not in now)]:
        if key == "corpus_fingerprint" and now.get("corpus") != then.get("corpus"):
            continue  # other paths: said once, by --corpus
        if now.get(key) != then.get(key):
            theirs = shown(then[key]) if key in then else "not recorded"
            ours = shown(now[key]) if key in now else "none"
            parts.append(f"{names.get(key, _flag(key))} {ours} (the checkpoint's: {theirs})")
    return ", ".join(parts) or "none that it names"


def _interrupted(out: Path, step: int, saved: int, config: AdaptConfig) -> str:
    """What to do after a Ctrl-C at ``step``: resume from the checkpoint of step ``saved``, or start over."""
    if saved:
        return (f"adapt interrupted at step {step} of {config.steps}; run the same command again to resume from "
                f"the checkpoint of step {saved} ({out / CHECKPOINT}, written every {config.checkpoint_every} steps)")
    return (f"adapt interrupted at step {step} of {config.steps}, before its first checkpoint (step "
            f"{config.checkpoint_every}); the same command starts again from step 0")


def adapt(model: str | Path, corpus: Iterable[str | Path], output: str | Path, config: AdaptConfig = AdaptConfig(),
          base: str | Path | None = None, overwrite: bool = False, progress: bool = True, device: str = "cpu") -> dict:
    """Adapt ``model`` to ``corpus`` and write the new model folder to ``output``; returns its provenance.

    ``corpus`` takes what ``encode`` takes (JSONL, .txt, .md); only the sentences' texts are used.
    Running the same call again after an interruption resumes from the last checkpoint. ``overwrite``
    replaces a model (train's or adapt's) only once the new one is complete: it is adapted beside it.
    """
    folders.check_folder_output(output, option("--output", "output"))  # a file: said now, not after loading
    with exclusive(output, "sparc-es adapt"):
        return _adapt(model, corpus, output, config, base, overwrite, progress, device)


def _adapt(model: str | Path, corpus: Iterable[str | Path], output: str | Path, config: AdaptConfig,
           base: str | Path | None, overwrite: bool, progress: bool, device: str = "cpu") -> dict:
    import torch
    from tqdm import tqdm

    out = Path(output)
    # A finished model is adapted anew beside it and swapped in when complete: a Ctrl-C keeps it
    work, retired = out.parent / f".{out.name}.adapting", out.parent / f".{out.name}.old"
    folders.finish_swap(out, work, retired, (work / SPARC_CONFIG).is_file() and not (work / CHECKPOINT).exists())
    if overwrite:  # only a model sparc-es made (train's or adapt's), before seconds of loading
        folders.check_removable(out, option("--overwrite", "overwrite=True"), replaces=folders.MODEL)
    corpus = [str(p) for p in corpus]
    sparc = SparcModel.load(model)
    source_fingerprint = sparc.fingerprint
    base_path = find_base(sparc, base)
    _check_positions(base_path, config.max_length)
    texts = [s.text for s in read_corpus(corpus)]  # validates every line, as encode does
    if not texts:
        raise SparcError("the target corpus has no sentences")
    settings = {"model": sparc.fingerprint, "base": str(base_path), "corpus": corpus,
                "corpus_fingerprint": corpus_fingerprint(texts), **dataclasses.asdict(config)}

    fit = split_word_share(texts, sparc.tokenizer)  # before expansion: how well the vocabulary fits
    if overwrite and (out / SPARC_CONFIG).exists():
        building = work
    else:
        building = out
        if overwrite:
            folders.remove(out)  # an unfinished adaptation: started again
        if (out / SPARC_CONFIG).exists():
            raise StoreError(f"{out}: already holds a model; pass {option('--overwrite', 'overwrite=True')} to "
                             "replace it (it is kept until the new one is complete)")
        if out.exists() and any(out.iterdir()) and not (out / CHECKPOINT).is_file():
            raise StoreError(f"{out}: folder is not empty; choose a new folder or pass "
                             f"{option('--overwrite', 'overwrite=True')}")
    checkpoint = building / CHECKPOINT

    words: list[str] = []
    if config.expand_vocabulary:
        from sparc_es.training.vocabulary import expand_model, expansion_words

        words = expansion_words(texts, sparc.tokenizer, config.expand_vocabulary, config.expand_min_count)
        if not words and config.rows == "new":
            raise SparcError(f"no word of the corpus is seen {config.expand_min_count} times and split by the "
                             "vocabulary: nothing to expand (lower --expand-min-count)")
        sparc = expand_model(sparc, words)
    first_new = len(sparc.tokenizer) - len(words)  # rows at and after it are the expansion's words
    mlm = _MaskedLM(base_path, device, words)
    if len(mlm.tokenizer) != len(sparc.tokenizer) or mlm.E.shape != sparc.embeddings.shape:
        raise ModelError(f"{base_path}: vocabulary or embedding shape differs from the model's "
                         f"({tuple(mlm.E.shape)} against {tuple(sparc.embeddings.shape)})")
    if config.rows == "new":  # old rows get no gradient, so Adam (no weight decay) never moves them
        mlm.E.register_hook(lambda grad: torch.cat([torch.zeros_like(grad[:first_new]), grad[first_new:]]))
    optimizer = torch.optim.AdamW([mlm.E], lr=config.lr, weight_decay=0.0)  # no decay on embeddings
    step, elapsed, losses = 0, 0.0, []
    state, restart = None, f"pass {option('--overwrite', 'overwrite=True')} to start again"
    if checkpoint.is_file():
        # weights-only: the output folder is not trusted, and a planted pickle must not run
        state = read_state(checkpoint, ("settings", "step", "elapsed", "losses", "E", "optimizer"), restart)
        if building == work and state["settings"] != settings:  # an earlier --overwrite's: this one starts again
            checkpoint.unlink()
            state = None
    if state is not None:
        if state["settings"] != settings:
            raise StoreError(f"{checkpoint}: an unfinished adaptation with other settings: "
                             f"{_differences(settings, state['settings'])}; run it with the checkpoint's settings "
                             f"to resume it, or {restart}")
        step, elapsed, losses, E = state["step"], state["elapsed"], state["losses"], state["E"]
        if not (isinstance(step, int) and 0 < step <= config.steps and isinstance(elapsed, (int, float))
                and isinstance(losses, list) and len(losses) == step
                and isinstance(E, torch.Tensor) and E.shape == mlm.E.shape):
            raise StoreError(f"{checkpoint}: an inconsistent adaptation state; {restart}")
        try:
            with torch.no_grad():
                mlm.E.copy_(E)
            optimizer.load_state_dict(state["optimizer"])
        except (ValueError, KeyError, TypeError, RuntimeError) as e:
            raise StoreError(f"{checkpoint}: an inconsistent optimiser state ({type(e).__name__}); {restart}") from None
        notice("adapt", f"resuming from step {step} of {config.steps} ({checkpoint.name})")
        threads = state.get("threads")
        if isinstance(threads, int) and threads != torch.get_num_threads():
            notice("adapt", f"the run began with {threads} torch threads and goes on with {torch.get_num_threads()}: "
                   "float sums follow the thread count, so the model may differ in its last bits from one run "
                   f"whole ({option('--threads', 'torch.set_num_threads')} {threads} resumes it byte for byte)")

    bar = tqdm(total=config.steps, initial=step, unit="step", desc="adapt", disable=not progress,
               file=sys.stderr, dynamic_ncols=True)
    started = time.perf_counter() - elapsed
    saved = step  # the step of the checkpoint a rerun resumes from (0: none yet)
    try:
        while step < config.steps:
            generator = torch.Generator().manual_seed(config.seed * 1_000_003 + step)
            torch.manual_seed(config.seed * 1_000_003 + step)  # dropout
            batch = [texts[i] for i in _batch_indices(len(texts), step, config.batch_size, config.seed)]
            loss = mlm.loss(*mlm.batch(batch, config.max_length, config.mask_probability, generator))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            losses.append(round(loss.item(), 4))
            if not math.isfinite(losses[-1]):  # E is NaN from here on: stop rather than save (and record) it
                raise SparcError(f"the adaptation diverged at step {step} (loss {losses[-1]}); lower --lr")
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
            bar.update(1)
            if step % config.checkpoint_every == 0 and step < config.steps:
                folders.claim(building, "adapt")  # made at the first checkpoint: an early Ctrl-C leaves no empty folder
                tmp = building / (CHECKPOINT + ".tmp")  # replaced atomically: a kill never leaves half a file
                torch.save({"settings": settings, "step": step, "elapsed": time.perf_counter() - started,
                            "losses": losses, "E": mlm.E.detach().cpu().clone(), "optimizer": optimizer.state_dict(),
                            "threads": torch.get_num_threads()},
                           tmp)
                tmp.replace(checkpoint)
                saved = step
    except KeyboardInterrupt:  # Ctrl-C: the progress line ends, and one line says how to go on
        bar.close()
        raise KeyboardInterrupt(_interrupted(building, step, saved, config)) from None
    bar.close()
    seconds = round(time.perf_counter() - started, 1)

    with torch.no_grad():
        adapted = sparc.embeddings + config.strength * (mlm.E.detach().cpu() - sparc.embeddings)
        if config.rows == "new":  # exactly the model's own old rows (the base's may differ by float noise)
            adapted[:first_new] = sparc.embeddings[:first_new]
        sparc.embeddings.copy_(adapted)
        if sparc.passage_model is not None:  # both encoders started from the same base E
            sparc.passage_model.embeddings.copy_(adapted)
    method = ("vocabulary expansion (masked-language modelling, only the new words' rows of E trained)"
              if config.rows == "new" else "embedding replacement (masked-language modelling, only E trained)")
    record = {"method": method,
              "head": "the checkpoint's MLM head" if mlm.head == "mlm" else "dot product H . E^T",
              "adapted_from": {"fingerprint": source_fingerprint, "path": str(Path(model))},
              "base": base_provenance(base_path, weights_file(base_path)),
              "corpus": corpus, "corpus_fingerprint": settings["corpus_fingerprint"], "sentences": len(texts),
              "vocabulary_fit": fit,
              **dataclasses.asdict(config), "seconds": seconds, "torch_threads": torch.get_num_threads(),
              "device": device,
              **({"expanded_vocabulary": {"words": len(words), "min_count": config.expand_min_count,
                                          "examples": words[:20]}} if config.expand_vocabulary else {}),
              "loss_first_10": float(np.mean(losses[:10])), "loss_last_10": float(np.mean(losses[-10:]))}
    sparc.config = dataclasses.replace(sparc.config, adaptation=record)
    folders.claim(building, "adapt")
    sparc.save(building)
    checkpoint.unlink(missing_ok=True)
    (building / "adaptation.json").write_text(json.dumps({**record, "losses": losses}, indent=2, allow_nan=False)
                                              + "\n")
    if building == work:
        folders.swap_in(work, out, retired)
    return record
