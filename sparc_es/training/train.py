"""Train SPARC on the source domain (section 5 of the SPARC paper: Nishida, Yoshinaga and Nishida,
"Sparse Neural Retrieval Model for Efficient Cross-Domain Retrieval-Based Question Answering").

Each question brings its positive sentence (the one holding the answer) and two hard negatives: a
random other sentence of the same passage, and a random sentence from the Lucene BM25 top 100 of
the whole pool that does not contain the answer. With B questions a batch scores B x 3B with
g(q, s) = sum over the question's tokens of f(v, s) and the loss is cross-entropy over the
in-batch sentences. The word-embedding matrix E is frozen; w has its own learning rate ({w_lr:g},
--w-lr); AdamW with linear warm-up and decay.

Only the rows of E for tokens that occur in the batch's questions are scored (a few hundred, not
30,522), so a step costs little more than the transformer. A batch larger than memory allows is
processed in chunks with a gradient cache (Gao et al. 2021, as the paper did): representations
are first computed without gradients, the loss gradient with respect to them is taken over the
whole batch, then each chunk is recomputed (same dropout) and back-propagated with that gradient.
The result equals one big batch, in-batch negatives included, which plain gradient accumulation
would lose.

Beyond the paper (each measured on the validation split, docs/training.md): scoring through the
base's MLM head (``head="mlm"``), passage expansion (each sentence also stores lambda times its
passage's scores from a frozen passage encoder, precomputed once per training passage; lambda is
learned), learned per-token weights, top-K-aware scoring, and (off by default) the FLOPS
regulariser that SPLADE trains for sparsity with, over what each sentence stores. The slice's last
``validation_articles`` articles are never trained on: they are the ``val`` domain of
``sparc-es table``, where models are chosen.

Checkpoints (model folder plus optimiser, scheduler and random states) are written every
``checkpoint_every`` steps; running the same command again resumes from the last one.

The defaults are the shipped default model's training recipe. Its lexical term is not trained:
``lexical_weight`` (--lexical-weight) defaults to 0, off, and train has no stem weight; the shipped
model's alpha = 0.2, stem weight 0.3 and stop-word rule are set in the trained folder afterwards
by ``scripts/ship_model.py`` (``sh scripts/train_default.sh`` runs both).
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sparc_es.corpus.sources import Sentence
from sparc_es.errors import ModelError, SparcError, StoreError, option
from sparc_es.evaluation.evalsets import VALIDATION_ARTICLES
from sparc_es.layout import ownership as folders
from sparc_es.layout.locks import exclusive
from sparc_es.model import Head, MaxOver, SparcModel, passage_text
from sparc_es.model.checkpoint import SPARC_CONFIG, read_state
from sparc_es.model.query import query_bag
from sparc_es.options import setting

CHECKPOINT = "checkpoint"
TRAINER_STATE = "trainer.pt"


@dataclass(frozen=True)
class TrainConfig:
    """Settings of one training run; saved with every checkpoint and the final model.

    Each field is a ``sparc-es train`` flag (``--max-length`` for ``max_length``) with the help
    given here; defaults are the shipped default's training recipe (docs/training.md), whose
    lexical and stem weights are set when shipping, not trained (see the module's text)."""

    model: str = setting("splade-bert-tiny", "starting checkpoint")
    max_length: int = setting(128, "tokens per input")
    max_over: str = setting("sentence", "which positions the max runs over", choices=("sentence", "all"))
    batch_size: int = setting(32, "questions per optimiser step (3x as many sentences)")
    chunk_size: int = setting(96, "sentences per forward pass; smaller than 3 x batch uses the gradient cache")
    # chosen on the validation articles: 73.31 MRR against 72.55 for two, 72.00 for one
    epochs: float = setting(3.0, "passes over the questions")
    max_steps: int | None = setting(None, "train this many steps in place of --epochs: the warm-up (at most a tenth "
                                          "of them) and the linear decay to 0 span these steps, so it is not the "
                                          "first N steps of the --epochs run", type=int,
                                    metavar="N")
    lr: float = setting(1e-4, "encoder learning rate")
    w_lr: float = setting(1e-2, "learning rate of w, lambda and alpha")
    learn_w: bool = setting(True, "learn w; --no-learn-w keeps it at 0 (SPARTA)")
    top_k_aware: bool = setting(True, "a question token scores in training only if it is in the sentence's top K, "
                                       "as in the index (not in the paper; see docs/training.md)")
    head: str = setting("mlm", "vocabulary logits: the paper's H . E^T, or the base's BERT MLM head (transform and "
                                "bias, E still tied)", choices=("dot", "mlm"))
    token_weights: bool = setting(True, "also learn one multiplier per vocabulary token (a query-side weight that "
                                         "the index stores folded into each sentence's weights)")
    token_weight_lr: float = setting(1e-2, "learning rate of the token multipliers")
    passage_weight: float = setting(2.0, "passage expansion: each sentence also stores lambda x the scores of its "
                                          "whole passage from a frozen passage encoder (computed once per training "
                                          "passage); lambda's starting value, learned from there; 0 turns it off. "
                                          "A starting SPARC model that has a passage encoder keeps it and starts "
                                          "from its own lambda (0 drops it)")
    passage_model: str = setting("splade-bert-tiny", "the frozen passage encoder given to a starting model that has "
                                                     "none")
    passage_head: str = setting("mlm", "that passage encoder's vocabulary logits", choices=("dot", "mlm"))
    lexical_weight: float = setting(0.0, "the lexical term: each sentence's own tokens also get alpha x their BM25 "
                                          "weight over the training sentences; alpha's starting value, learned from "
                                          "there, in place of a starting model's own; 0: not trained, a starting "
                                          "model's own alpha kept as it is (the shipped model was trained without "
                                          "it: its alpha 0.2 and stem weight 0.3 were set by scripts/ship_model.py)")
    flops_weight: float = setting(0.0, "the FLOPS regulariser (Paria et al. 2020, as SPLADE trains for sparsity): adds "
                                        "this weight x the sum over the vocabulary of each token's squared mean "
                                        "stored score over the batch's sentences, which pushes towards shorter "
                                        "posting lists; 0 turns it off")
    sparsity: str = setting("flops", "what --flops-weight weighs: flops, SPLADE's sum over the vocabulary of each "
                                     "token's squared mean score; walk, the postings a training question walks: the "
                                     "sum over tokens of the share of training questions that use the token x its "
                                     "mean score (the lists a search reads are those of the tokens questions use)",
                            choices=("flops", "walk"))
    warmup_steps: int = setting(500, "linear warm-up, at most a tenth of the run")
    weight_decay: float = setting(0.01, "AdamW weight decay of the encoder")
    bm25_depth: int = setting(100, "BM25 candidates per question, from which hard negatives are drawn")
    same_passage_negatives: int = setting(1, "other sentences of the positive's passage per question (the paper: 1)")
    bm25_negatives: int = setting(1, "sentences from the question's BM25 candidates without the answer per question")
    seed: int = setting(13, "random seed")
    checkpoint_every: int = setting(50, "steps between checkpoints")
    data: str | None = setting(None, "data folder (default: $SPARC_ES_DATA or ../shared/data)", type=str,
                                metavar="DIR")
    validation_articles: int = setting(VALIDATION_ARTICLES, "the training slice's last N articles are held out for "
                                                             "model selection (`sparc-es table --domains val`)")

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise SparcError(f"training {f.name} must be a finite number ({_flag(f.name)} {value:g})")
        def given(name: str) -> str:  # the flag and the value given, as adapt's checks say them
            value = getattr(self, name)
            return f"{_flag(name)} {value:g}" if isinstance(value, float) else f"{_flag(name)} {value}"

        for name in ("max_length", "batch_size", "chunk_size", "bm25_depth", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise SparcError(f"training {name} must be at least 1 ({given(name)})")
        if self.max_steps is not None and self.max_steps < 1:
            raise SparcError(f"training max_steps must be at least 1 ({given('max_steps')})")
        for name in ("same_passage_negatives", "bm25_negatives", "warmup_steps", "validation_articles",
                     "passage_weight", "lexical_weight", "weight_decay", "flops_weight"):
            if not getattr(self, name) >= 0:
                raise SparcError(f"training {name} must be at least 0 ({given(name)})")
        ignored = [n for n in ("passage_model", "passage_head") if getattr(self, n) != getattr(TrainConfig, n)]
        if not self.passage_weight and ignored:
            raise SparcError(f"{', '.join(given(n) for n in ignored)}: the passage encoder's settings, but "
                             f"{_flag('passage_weight')} 0 trains without one: leave them out, or give a passage "
                             "weight above 0")
        if self.sparsity not in ("flops", "walk"):
            raise SparcError(f"training sparsity must be flops or walk ({given('sparsity')})")
        if self.sparsity != "flops" and not self.flops_weight:
            raise SparcError(f"training sparsity {self.sparsity} is weighed by {_flag('flops_weight')}: give it a "
                             f"weight above 0 ({given('sparsity')}, {given('flops_weight')})")
        for name in ("epochs", "lr", "w_lr", "token_weight_lr"):
            if not getattr(self, name) > 0:
                raise SparcError(f"training {name} must be above 0 ({given(name)})")


def _changed_settings(saved: dict, given: dict) -> str:
    """The settings of ``given`` that differ from a checkpoint's ``saved`` ones, as their user gives
    them ("--lr 0.0001 -> 0.001"); "" when none does. One data folder named two ways (a trailing
    "/", $SPARC_ES_DATA) is the same folder."""
    from sparc_es.evaluation.evalsets import data_dir

    def folder(value) -> Path:
        return Path(value or data_dir()).resolve()

    changed = [f"{_flag(name)} {saved.get(name)} -> {given.get(name)}" for name in sorted(set(saved) | set(given))
               if saved.get(name) != given.get(name) and not (name == "data" and folder(saved.get(name)) ==
                                                              folder(given.get(name)))]
    return "; ".join(changed)


def _flag(name: str) -> str:
    """The setting ``name`` as its user gives it: the ``sparc-es train`` flag (``max_steps`` ->
    ``--max-steps``), or the keyword from Python."""
    return option("--" + name.replace("_", "-"), name)


# The learning rate of w that the text above names is the setting's default, not a copy of it.
if __doc__:  # None under python -OO
    __doc__ = __doc__.format(w_lr=TrainConfig.w_lr)


@dataclass(frozen=True)
class Example:
    question: str
    answer: str
    positive: Sentence
    same_passage: list[Sentence]  # candidates: other sentences of the passage without the answer
    bm25: list[Sentence]  # candidates: BM25 top-k of the pool without the answer


def _draw(pool: list[Sentence], n: int, rng: random.Random) -> list[Sentence]:
    return [rng.choice(pool)] if n == 1 else rng.sample(pool, min(n, len(pool)))


def sample_batch(examples: list[Example], indices: list[int], rng: random.Random, same_passage: int = 1,
                 bm25: int = 1) -> tuple[list[str], list[Sentence]]:
    """Questions and their sentences: the B positives first, then each question's negatives.

    With one negative of each kind (the paper's setting) a question whose passage has no other
    sentence takes a BM25 one instead and vice versa; with more, each kind gives what it has.
    """
    questions, positives, negatives = [], [], []
    for i in indices:
        e = examples[i]
        questions.append(e.question)
        positives.append(e.positive)
        if same_passage == 1 and bm25 == 1:
            pool_same = e.same_passage or e.bm25
            pool_hard = e.bm25 or e.same_passage
            negatives.append(rng.choice(pool_same) if pool_same else e.positive)
            negatives.append(rng.choice(pool_hard) if pool_hard else e.positive)
        else:
            negatives += _draw(e.same_passage, same_passage, rng) if e.same_passage and same_passage else []
            negatives += _draw(e.bm25, bm25, rng) if e.bm25 and bm25 else []
    if same_passage == 1 and bm25 == 1:  # the original order: all same-passage, then all BM25
        negatives = negatives[0::2] + negatives[1::2]
    return questions, positives + negatives


class Trainer:
    """One training run: model, optimiser, schedule, data order and checkpoints."""

    def __init__(self, config: TrainConfig, output: str | Path, examples: list[Example], device: str | None = None,
                 progress: bool = True) -> None:
        import torch

        self.config = config
        self.output = Path(output)
        self.examples = examples
        self.progress = progress
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        steps_per_epoch = max(1, len(examples) // config.batch_size)
        self.total_steps = config.max_steps or max(1, int(config.epochs * steps_per_epoch))
        self.steps_per_epoch = steps_per_epoch
        self.step = 0
        self.seconds = 0.0
        self.losses: list[float] = []

        checkpoint = self.output / CHECKPOINT
        resume = (checkpoint / TRAINER_STATE).is_file()
        if resume:
            restart = f"delete {checkpoint} or use another --output to start again"
            # weights-only: the output folder is not trusted, and a planted pickle must not run
            state = read_state(checkpoint / TRAINER_STATE, ("config", "optimizer", "scheduler", "step", "seconds",
                                                            "losses", "torch_rng"), restart)
            changed = _changed_settings(state["config"], dataclasses.asdict(config))
            if changed:
                raise SparcError(f"{checkpoint}: was made with other training settings ({changed}); give the same "
                                 f"ones to resume it, or use another {option('--output', 'output')}")
            trained_on = state.get("questions")  # absent from a checkpoint of an older sparc-es
            if isinstance(trained_on, int) and trained_on != len(examples):
                raise SparcError(f"{checkpoint}: was trained on {trained_on:,} questions and these are "
                                 f"{len(examples):,} ({option('another --limit?', 'other examples?')}); give the "
                                 f"same ones to resume it, or use another {option('--output', 'output')}")
        torch.manual_seed(config.seed)
        source = checkpoint if resume else config.model
        overrides = {} if resume else {"max_length": config.max_length, "max_over": MaxOver(config.max_over),
                                       "head": Head(config.head), "token_weights": config.token_weights}
        self.model = SparcModel.load(source, **overrides)
        if not resume:  # a checkpoint's model holds what the fresh run set
            self._start_extras()
        self.model.to(self.device)
        self.passages, self.passage_row = None, {}
        if config.passage_weight:
            self._encode_passages()
        encoder = self.model.encoder
        encoder.get_input_embeddings().weight.requires_grad_(False)  # E stays the pre-trained one
        params = [p for p in encoder.parameters() if p.requires_grad]
        head = self.model.head
        if head is not None and hasattr(head, "transform"):
            params += [*head.transform.parameters(), head.bias]
        groups = [{"params": params, "lr": config.lr, "weight_decay": config.weight_decay}]
        if head is not None and hasattr(head, "log_u"):
            groups.append({"params": [head.log_u], "lr": config.token_weight_lr, "weight_decay": 0.0})
        self.model.w.requires_grad_(config.learn_w)
        if config.learn_w:
            groups.append({"params": [self.model.w], "lr": config.w_lr, "weight_decay": 0.0})
        self.log_lambda = None
        if config.passage_weight:
            self.log_lambda = torch.nn.Parameter(torch.tensor(math.log(self.model.config.passage_weight),
                                                              device=self.device))
            groups.append({"params": [self.log_lambda], "lr": config.w_lr, "weight_decay": 0.0})
        self.question_share = None
        if config.flops_weight and config.sparsity == "walk":
            self.question_share = question_share(self.model.tokenizer, [e.question for e in examples],
                                                 self.model.scorable.numel()).to(self.device)
        self.log_alpha, self.corpus, self.lexical = None, None, {}
        if config.lexical_weight:
            self.log_alpha = torch.nn.Parameter(torch.tensor(math.log(self.model.config.lexical_weight),
                                                             device=self.device))
            groups.append({"params": [self.log_alpha], "lr": config.w_lr, "weight_decay": 0.0})
            pool = {s.id: s.text for e in examples for s in [e.positive, *e.same_passage, *e.bm25]}
            self.corpus = self.model.count_corpus(pool.values())
        self.optimizer = torch.optim.AdamW(groups)
        from transformers import get_linear_schedule_with_warmup

        warmup = min(config.warmup_steps, self.total_steps // 10)
        self.scheduler = get_linear_schedule_with_warmup(self.optimizer, warmup, self.total_steps)
        if resume:
            self.step, self.seconds, self.losses = state["step"], state["seconds"], state["losses"]
            if not (isinstance(self.step, int) and self.step >= 0  # total_steps may differ (--limit)
                    and isinstance(self.seconds, (int, float)) and isinstance(self.losses, list)):
                raise StoreError(f"{checkpoint / TRAINER_STATE}: an inconsistent training state; {restart}")
            try:
                self.optimizer.load_state_dict(state["optimizer"])
                self.scheduler.load_state_dict(state["scheduler"])
                torch.set_rng_state(state["torch_rng"])
            except (ValueError, KeyError, TypeError, RuntimeError) as e:
                raise StoreError(f"{checkpoint / TRAINER_STATE}: an inconsistent training state "
                                 f"({type(e).__name__}); {restart}") from None

    def _start_extras(self) -> None:
        """Passage expansion and the lexical term of a fresh run, as the flags say: a base gets the
        passage encoder; a SPARC model that has one keeps it, and its lambda, which the passage flags
        would ignore (so they are refused); passage weight 0 drops it (trained without, saved
        without); a lexical weight is alpha's starting value, whatever the model's own."""
        config, model = self.config, self.model
        if config.passage_weight and model.passage_model is not None:
            given = [f"{_flag(name)} {getattr(config, name)}" for name in ("passage_weight", "passage_model",
                                                                          "passage_head")
                     if getattr(config, name) != getattr(TrainConfig, name)]
            if given:
                raise SparcError(f"{', '.join(given)}: the starting model {config.model} has a passage encoder, which "
                                 f"training keeps with its lambda ({model.config.passage_weight:g}) and these settings "
                                 f"would not change: leave them out, or give {_flag('passage_weight')} 0 to train "
                                 "without passage expansion")
        elif not config.passage_weight and model.config.passage_weight:
            model.passage_model = None
            model.config = dataclasses.replace(model.config, passage_weight=0.0, passage_encoder="self")
        elif config.passage_weight:  # a base: attach the passage encoder
            model.config = dataclasses.replace(model.config, passage_weight=config.passage_weight,
                                               passage_encoder="passage", passage_max_length=2 * config.max_length)
            model.passage_model = SparcModel.load(config.passage_model, head=Head(config.passage_head),
                                                  max_length=2 * config.max_length)
            # Passage scores are added to the sentence's token by token: both must count the same tokens
            # (a base with an expanded vocabulary needs a passage encoder with that vocabulary).
            theirs, ours = model.passage_model.tokenizer, model.tokenizer
            if theirs.get_vocab() != ours.get_vocab():
                raise ModelError(f"the passage encoder {config.passage_model} has another vocabulary than the model "
                                 f"{config.model} ({len(theirs)} tokens against {len(ours)}); give "
                                 f"{_flag('passage_model')} a checkpoint with the model's vocabulary")
        if config.lexical_weight:
            model.config = dataclasses.replace(model.config, lexical_weight=config.lexical_weight)

    # --- one step --------------------------------------------------------------------------

    def _encode_passages(self) -> None:
        """f_P(v, passage) of every training passage, once (the passage encoder is frozen)."""
        import torch
        from tqdm import tqdm

        texts = list(dict.fromkeys(passage_text(s.text, s.context) for e in self.examples
                                   for s in [e.positive, *e.same_passage, *e.bm25]))
        self.passage_row = {t: i for i, t in enumerate(texts)}
        self.passages = torch.empty((len(texts), self.model.embeddings.shape[0]))
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        with torch.inference_mode():
            for b in tqdm(range(0, len(texts), 32), desc="passages", unit="batch", disable=not self.progress,
                          file=sys.stderr, dynamic_ncols=True):
                idx = order[b: b + 32]
                self.passages[idx] = self.model.passage_scores([texts[i] for i in idx]).cpu()

    def _passage_term(self, sentences: list[Sentence], vocab_ids=None):
        """lambda * f_P(v, passage of s) for the batch's sentences (all tokens, or ``vocab_ids``)."""
        rows = self.passages[[self.passage_row[passage_text(s.text, s.context)] for s in sentences]]
        if vocab_ids is not None:
            rows = rows[:, vocab_ids.cpu()]
        return self.log_lambda.exp() * rows.to(self.device)

    def _scores(self, sentences: list[Sentence], vocab_ids):
        """What the batch's sentences store for the question tokens, as dense differentiable scores
        (:meth:`sparc_es.model.stored.Pipeline.training_scores`), and with ``flops_weight`` what they
        store over the whole vocabulary before the top-K cut (differentiable, for the regulariser;
        else None)."""
        ids, seg, _, _ = self.model.tokenize_pairs([s.text for s in sentences], [s.context for s in sentences])
        hidden, mask = self.model.hidden_states(ids, seg)
        passage = full_passage = None
        if self.passages is not None:
            passage = self._passage_term(sentences, vocab_ids)
            if self.config.top_k_aware or self.config.flops_weight:
                full_passage = self._passage_term(sentences)
        full = None
        if self.config.flops_weight:
            full = self.model.token_scores(hidden, mask, passage=full_passage)
        lexical = None
        if self.log_alpha is not None:
            own, siblings = self._lexical_term(sentences, vocab_ids)
            lexical = (self.log_alpha.exp(), own, self.model.config.stem_weight, siblings)
        f = self.model.pipeline.training_scores(hidden, mask, vocab_ids, passage,
                                                None if full_passage is None else full_passage.detach(),
                                                self.config.top_k_aware, lexical,
                                                full=None if full is None else full.detach())
        return f, full

    def _sparsity(self, mean):
        """The sparsity term of the batch's mean score per token (``config.sparsity``): FLOPS, or the
        postings a training question walks."""
        return (mean ** 2).sum() if self.question_share is None else (self.question_share * mean).sum()

    def _lexical_term(self, sentences: list[Sentence], vocab_ids):
        """BM25(v, s) over the training corpus for the batch's sentences and the question tokens:
        (own tokens, stem siblings), the second all zeros without a stem weight (which stays fixed)."""
        import torch

        missing = [s for s in sentences if s.id not in self.lexical]
        if missing:
            self.lexical.update(zip((s.id for s in missing),
                                    self.model.lexical_terms([s.text for s in missing], self.corpus)))
        column = {int(v): j for j, v in enumerate(vocab_ids.tolist())}
        own, siblings = torch.zeros((2, len(sentences), len(column)))
        for i, s in enumerate(sentences):
            term = self.lexical[s.id]
            for out, weights in ((own, term.own), (siblings, term.siblings)):
                for t, w in weights.items():
                    if t in column:
                        out[i, column[t]] = w
        return own.to(self.device), siblings.to(self.device)

    def train_step(self, questions: list[str], sentences: list[Sentence]) -> float:
        """One optimiser step on B questions and their 3B sentences; returns the loss."""
        import torch

        loss = self.backward(questions, sentences)
        torch.nn.utils.clip_grad_norm_([p for g in self.optimizer.param_groups for p in g["params"]], 1.0)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss

    def backward(self, questions: list[str], sentences: list[Sentence]) -> float:
        """The batch loss, its gradients accumulated into the parameters' ``.grad`` (no step).

        Sentences are scored in chunks of ``chunk_size`` through a gradient cache, which gives the
        gradients of one big batch with the memory of one chunk."""
        import torch

        tok = self.model.tokenizer
        bags = [query_bag(tok, q) for q in questions]
        vocab = sorted({i for bag in bags for i in tok.convert_tokens_to_ids(list(bag))})
        column = {v: j for j, v in enumerate(vocab)}
        Q = torch.zeros((len(questions), len(vocab)), device=self.device)
        for i, bag in enumerate(bags):
            for t, count in bag.items():
                Q[i, column[tok.convert_tokens_to_ids(t)]] += count
        vocab_ids = torch.tensor(vocab, device=self.device)
        labels = torch.arange(len(questions), device=self.device)
        self.model.encoder.train()
        if self.model.head is not None:
            self.model.head.train()
        chunk = self.config.chunk_size
        weight = self.config.flops_weight
        if len(sentences) <= chunk:
            f, full = self._scores(sentences, vocab_ids)
            loss = torch.nn.functional.cross_entropy(Q @ f.T, labels)
            if full is not None:
                loss = loss + weight * self._sparsity(full.mean(dim=0))
            loss.backward()
        else:
            # Gradient cache: the loss over the whole batch, then chunk by chunk back-propagation.
            # FLOPS is a function of the batch's column means, so its gradient with respect to one
            # sentence's scores, 2 x weight x mean / N, is known after the first pass too.
            states, parts, sums = [], [], 0.0
            with torch.no_grad():
                for start in range(0, len(sentences), chunk):
                    states.append(_rng_state(self.device))
                    f, full = self._scores(sentences[start: start + chunk], vocab_ids)
                    parts.append(f)
                    if full is not None:
                        sums = sums + full.sum(dim=0)
            F = torch.cat(parts).requires_grad_(True)
            loss = torch.nn.functional.cross_entropy(Q @ F.T, labels)
            loss.backward()
            mean = None
            if weight:
                mean = sums / len(sentences)
                loss = loss + weight * float(self._sparsity(mean))
                # d(term)/d(mean), and each sentence's share of the mean is 1 / N
                slope = (2 * mean if self.question_share is None else self.question_share) * (weight / len(sentences))
            for n, start in enumerate(range(0, len(sentences), chunk)):
                _set_rng_state(states[n], self.device)  # the same dropout as in the first pass
                f, full = self._scores(sentences[start: start + chunk], vocab_ids)
                if full is None:
                    f.backward(F.grad[start: start + chunk])
                else:
                    torch.autograd.backward([f, full], [F.grad[start: start + chunk], slope.expand_as(full)])
        return float(loss.detach())

    # --- the loop ----------------------------------------------------------------------------

    def batches(self, step: int) -> tuple[list[int], random.Random]:
        """Question indices of ``step`` (a seeded permutation per epoch) and its sampling RNG."""
        epoch, position = divmod(step, self.steps_per_epoch)
        order = list(range(len(self.examples)))
        random.Random(self.config.seed * 1000 + epoch).shuffle(order)
        b = self.config.batch_size
        return order[position * b: (position + 1) * b], random.Random(self.config.seed * 1_000_003 + step)

    def train(self) -> dict:
        """Run to ``total_steps`` (resuming where a checkpoint left off); save and return a summary."""
        from tqdm import tqdm

        bar = tqdm(total=self.total_steps, initial=self.step, unit="step", desc="train",
                   disable=not self.progress, file=sys.stderr, dynamic_ncols=True)
        started = time.perf_counter() - self.seconds
        saved = self.step  # the step of the checkpoint a rerun resumes from (0: none yet)
        try:
            # Ctrl-C stops the run after the step (and the checkpoint) in progress, never inside one:
            # torch, the tokenizer and the checkpoint's files are left whole (a second Ctrl-C stops at once).
            with _deferred_interrupt() as interrupted:
                while self.step < self.total_steps:
                    indices, rng = self.batches(self.step)
                    questions, sentences = sample_batch(self.examples, indices, rng,
                                                        self.config.same_passage_negatives, self.config.bm25_negatives)
                    self.losses.append(self.train_step(questions, sentences))
                    self.step += 1
                    diverged = self._diverged()
                    if diverged:  # the weights are NaN from here on: stop rather than checkpoint or save them
                        bar.close()
                        raise SparcError(diverged)
                    self.seconds = time.perf_counter() - started
                    bar.update(1)
                    bar.set_postfix(loss=f"{sum(self.losses[-20:]) / len(self.losses[-20:]):.3f}",
                                    exp_w=f"{float(self.model.w.detach().exp()):.2f}")
                    if self.step % self.config.checkpoint_every == 0 and self.step < self.total_steps:
                        self.checkpoint()
                        saved = self.step
                    if interrupted():
                        raise KeyboardInterrupt
        except KeyboardInterrupt:  # the progress line ends, and one line says how to go on
            bar.close()
            raise KeyboardInterrupt(self._interrupted(saved)) from None
        bar.close()
        return self.finish()

    def _diverged(self) -> str | None:
        """What to tell, when the last step's loss or the weights it left are not finite numbers."""
        import torch

        loss = self.losses[-1]
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        if math.isfinite(loss) and all(bool(torch.isfinite(p).all()) for p in params):
            return None
        what = f"loss {loss:g}" if not math.isfinite(loss) else f"loss {loss:.4g}, weights no longer finite"
        return (f"training diverged at step {self.step} of {self.total_steps} ({what}); nothing of it was saved: "
                f"lower {_flag('lr')} ({self.config.lr:g}) or {_flag('w_lr')} ({self.config.w_lr:g})")

    def _interrupted(self, saved: int) -> str:
        """What to do after a Ctrl-C: resume from the checkpoint of step ``saved``, or start over."""
        if saved:
            return (f"train interrupted at step {self.step} of {self.total_steps}; run the same command again to "
                    f"resume from the checkpoint of step {saved} ({self.output / CHECKPOINT}, written every "
                    f"{self.config.checkpoint_every} steps)")
        return (f"train interrupted at step {self.step} of {self.total_steps}, before its first checkpoint (step "
                f"{self.config.checkpoint_every}); the same command starts again from step 0")

    def _sync_lambda(self) -> None:
        """Write the learned lambda and alpha into the model's config."""
        if self.log_lambda is not None:
            self.model.config = dataclasses.replace(self.model.config,
                                                    passage_weight=float(self.log_lambda.detach().exp()))
        if self.log_alpha is not None:
            self.model.config = dataclasses.replace(self.model.config,
                                                    lexical_weight=float(self.log_alpha.detach().exp()))

    def checkpoint(self) -> None:
        import torch

        tmp = self.output / (CHECKPOINT + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        self._sync_lambda()
        self.model.save(tmp)
        torch.save({"config": dataclasses.asdict(self.config), "optimizer": self.optimizer.state_dict(),
                    "scheduler": self.scheduler.state_dict(), "step": self.step, "seconds": self.seconds,
                    "losses": self.losses, "torch_rng": torch.get_rng_state(), "questions": len(self.examples)},
                   tmp / TRAINER_STATE)
        final = self.output / CHECKPOINT
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)  # a kill between the two lines leaves checkpoint.tmp complete: see resume_checkpoint

    def finish(self) -> dict:
        import torch

        self.model.encoder.eval()
        if self.model.head is not None:
            self.model.head.eval()
        self._sync_lambda()
        self.model.save(self.output)
        summary = {"config": dataclasses.asdict(self.config), "steps": self.step, "questions": len(self.examples),
                   "seconds": round(self.seconds, 1),
                   "questions_per_second": round(self.step * self.config.batch_size / max(self.seconds, 1e-9), 2),
                   "final_loss": round(sum(self.losses[-20:]) / max(len(self.losses[-20:]), 1), 4),
                   "exp_w": float(self.model.w.detach().exp()),
                   "passage_weight": self.model.config.passage_weight,
                   "lexical_weight": self.model.config.lexical_weight, "device": self.device,
                   "torch_threads": torch.get_num_threads()}
        (self.output / "training.json").write_text(json.dumps(summary, indent=2) + "\n")
        shutil.rmtree(self.output / CHECKPOINT, ignore_errors=True)
        return summary


def flops(scores):
    """The FLOPS regulariser of a batch's (sentences, vocabulary) scores: the sum over tokens of the
    squared mean score, a smooth stand-in for the expected number of postings a question walks."""
    return (scores.mean(dim=0) ** 2).sum()


def question_share(tokenizer, questions: list[str], vocab: int):
    """The share of ``questions`` whose bag of tokens holds each token id, shape (vocab,): how often a
    search reads each token's posting list."""
    import torch

    counts = torch.zeros(vocab)
    for q in questions:
        counts[tokenizer.convert_tokens_to_ids(list(query_bag(tokenizer, q)))] += 1
    return counts / max(1, len(questions))


def resume_checkpoint(output: Path) -> None:
    """Finish a checkpoint swap that a kill interrupted (only ``checkpoint.tmp`` left)."""
    tmp, final = output / (CHECKPOINT + ".tmp"), output / CHECKPOINT
    if (tmp / TRAINER_STATE).is_file() and not final.exists():
        tmp.rename(final)


def _reclaim_interrupt() -> None:
    """Make Ctrl-C Python's again. A Java VM started without ``-Xrs`` (sparc-es starts it with that
    option, ``engines/_java.py``; other code may have started it first) installs its own SIGINT
    handler over Python's, without Python knowing: a Ctrl-C then made the
    VM call exit() from its own thread while torch ran on in the main one, with no checkpoint said,
    and once in a while the two exits corrupted the heap ("corrupted double-linked list", SIGABRT).
    Setting Python's handler again puts it back at the system level. In the main thread only, and
    only where Python's own handler is the one in place (not where SIGINT is ignored: nohup)."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread() \
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@contextmanager
def _deferred_interrupt() -> Iterator[Callable[[], bool]]:
    """For the ``with`` block, a Ctrl-C (SIGINT) is noted instead of raised where it lands; the block
    asks the callable it gets whether one came, and stops at a point of its choosing. A second
    Ctrl-C raises at once. Outside the main thread, or where SIGINT is ignored (nohup) or handled
    by someone else, nothing changes."""
    import signal
    import threading

    pending: list[int] = []
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield lambda: bool(pending)
        return

    def note(signum, frame) -> None:
        if pending:
            raise KeyboardInterrupt
        pending.append(signum)

    signal.signal(signal.SIGINT, note)
    try:
        yield lambda: bool(pending)
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _rng_state(device: str):
    import torch

    return (torch.get_rng_state(), torch.cuda.get_rng_state() if device.startswith("cuda") else None)


def _set_rng_state(state, device: str) -> None:
    import torch

    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1])


def train(config: TrainConfig, output: str | Path, examples: Callable[[], list[Example]],
          progress: bool = True, overwrite: bool = False, device: str | None = None) -> dict:
    """Train on ``examples()`` (called once the output folder is locked: building them can take
    minutes); resumes from ``output/checkpoint`` when present. A finished model in ``output`` is
    refused, or with ``overwrite`` replaced once the new one is complete (trained beside it, in
    ``.NAME.training``, which a rerun resumes). The source corpus's examples are mined by
    :func:`sparc_es.training.examples.squad_examples`. ``device``: where the model trains (default:
    a GPU where torch sees one, else the CPU)."""
    output = Path(output)
    folders.check_folder_output(output, option("--output", "output"))
    with exclusive(output, "sparc-es train"):
        work, retired = _replacement_folders(output)
        _finish_interrupted_swap(output, work, retired)
        folder = work if check_output(output, overwrite) else output
        folders.claim(folder, "train")  # the marker every folder sparc-es makes holds
        resume_checkpoint(folder)
        mined = examples()
        _reclaim_interrupt()  # mining the examples may have started the Java VM, which takes Ctrl-C
        summary = Trainer(config, folder, mined, device=device, progress=progress).train()
        if folder == work:
            _swap_in(work, output, retired)
        return summary


# What a train output folder holds before its model is saved: an unfinished run's (written before
# folders were marked, ``.sparc-es``) is resumed, not refused.
_TRAIN_FILES = (CHECKPOINT, CHECKPOINT + ".tmp", "examples.json", "training.json")


def check_output(output: Path, overwrite: bool = False) -> bool:
    """Whether ``output`` holds a finished model that ``overwrite`` replaces; else refuse, with one
    line, a folder train must not write into: a finished model (without ``overwrite``), a folder
    of another kind sparc-es made (an index, an encoded folder), or one that holds files sparc-es
    did not write (train marks its folder as its own, so it must not mark one of the user's). A
    folder with an unfinished run's checkpoint is resumed, an empty one taken."""
    if not output.is_dir() or not any(output.iterdir()):
        return False
    made = folders.maker(output)
    if made is not None and made not in folders.MODEL:
        raise StoreError(f"{output}: holds {folders.holds(output)}, not a model; train writes a model folder: "
                         f"choose another {option('--output', 'output')}")
    if any((output / name).exists() for name in (CHECKPOINT, CHECKPOINT + ".tmp")):
        return False  # an unfinished run: resumed
    if made is not None and ((output / SPARC_CONFIG).is_file() or made != "train"):
        if not overwrite:
            raise StoreError(f"{output}: already holds {folders.holds(output)}; pass "
                             f"{option('--overwrite', 'overwrite=True')} to replace it (it is kept until the new "
                             f"model is complete) or choose another {option('--output', 'output')}")
        return folders.check_removable(output, option("--overwrite", "overwrite=True"), replaces=folders.MODEL)
    if not folders.is_ours(output) and not any((output / name).exists() for name in _TRAIN_FILES):
        raise StoreError(f"{output}: folder is not empty and was not made by sparc-es; choose a new folder for "
                         "the model train writes")
    return False


def _replacement_folders(output: Path) -> tuple[Path, Path]:
    """(where the model that replaces ``output``'s is trained, where the old one goes while swapped)."""
    return output.parent / f".{output.name}.training", output.parent / f".{output.name}.old"


def _swap_in(work: Path, output: Path, retired: Path) -> None:
    """The new model in ``output``'s place, the old one removed; its examples cache (the default
    ``--examples-cache``) moves with it. A kill between the renames is completed by the next run."""
    if (output / "examples.json").is_file() and not (work / "examples.json").exists():
        (output / "examples.json").rename(work / "examples.json")
    folders.swap_in(work, output, retired)


def _finish_interrupted_swap(output: Path, work: Path, retired: Path) -> None:
    """Complete a replacement killed between its renames (:func:`_swap_in`), or put the old model back."""
    folders.finish_swap(output, work, retired, (work / SPARC_CONFIG).is_file() and not (work / CHECKPOINT).exists())
