"""Training: the batch loss equals g(q, s) from full scoring, the gradient cache equals one big batch,
E stays frozen, and a killed run resumes to the same weights."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from sparc_es.evaluation.evalsets import data_dir
from sparc_es.model import SparcModel
from sparc_es.training.examples import load_examples
from sparc_es.training.train import TrainConfig, Trainer, flops, sample_batch

from shared_data import need_data


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    need_data("squad_train_slice")
    return load_examples(limit=48, workdir=tmp_path_factory.mktemp("train"))


@pytest.mark.data
@pytest.mark.jvm
def test_examples_have_answer_bearing_positives_and_clean_negatives(examples):
    assert len(examples) == 48
    for e in examples:
        assert e.answer.lower() in e.positive.text.lower() or e.positive.start is not None
        assert e.bm25 and all(e.answer.lower() not in s.text.lower() for s in e.bm25 + e.same_passage)
        assert all(s.id != e.positive.id for s in e.bm25 + e.same_passage)
        assert e.positive.context  # the paragraph


def make_trainer(tiny_model_dir, examples, output, **changes) -> Trainer:
    settings = dict(model=str(tiny_model_dir), max_length=64, batch_size=8, chunk_size=96, max_steps=4,
                    lr=1e-3, warmup_steps=0, checkpoint_every=2, head="dot", top_k_aware=False, passage_weight=0.0,
                    token_weights=False)
    config = TrainConfig(**{**settings, **changes})
    return Trainer(config, output, examples, device="cpu", progress=False)


@pytest.mark.data
@pytest.mark.jvm
def test_batch_scores_equal_full_scoring(tiny_model_dir, examples, tmp_path):
    import random

    trainer = make_trainer(tiny_model_dir, examples, tmp_path)
    questions, sentences = sample_batch(examples, list(range(4)), random.Random(0))
    assert len(sentences) == 12
    model = trainer.model
    model.encoder.eval()
    with torch.no_grad():
        ids, seg, _, _ = model.tokenize_pairs([s.text for s in sentences], [s.context for s in sentences])
        hidden, mask = model.hidden_states(ids, seg)
        full = model.token_scores(hidden, mask)  # every vocabulary token
        tok = model.tokenizer
        for q in questions:
            bag = model.queries.bag(q)
            vocab = torch.tensor(sorted({tok.convert_tokens_to_ids(t) for t in bag}))
            subset = model.token_scores(hidden, mask, vocab)
            counts = [bag[t] for t in tok.convert_ids_to_tokens(vocab.tolist())]
            g_subset = subset @ torch.tensor(counts, dtype=subset.dtype)
            g_full = sum(count * full[:, tok.convert_tokens_to_ids(t)] for t, count in bag.items())
            torch.testing.assert_close(g_subset, g_full)


def _close_in_norm(a: torch.Tensor, b: torch.Tensor, scale: float, rel: float = 1e-3) -> bool:
    """Equal up to float32 summation-order noise: the difference is small against the tensor's own
    size, or against ``scale`` (the whole gradient's norm) for a gradient that is zero in exact
    arithmetic (attention key biases: a softmax ignores a constant added to every key's score).

    Chunked and unchunked products sum in another order (and differently per instruction set and
    thread count), so near-zero components may differ in their last bits; a wrong gradient (a chunk
    missing, scaled or out of order) differs by the order of the gradient itself."""
    return float((a - b).norm()) <= rel * max(float(a.norm()), float(b.norm())) + 1e-5 * scale


def _norm(grads: dict[str, torch.Tensor]) -> float:
    return float(torch.sqrt(sum(g.double().pow(2).sum() for g in grads.values())))


@pytest.mark.data
@pytest.mark.jvm
@pytest.mark.parametrize("flops_weight, sparsity", [(0.0, "flops"), (0.05, "flops"), (0.05, "walk")])
def test_gradient_cache_gives_the_gradients_of_one_big_batch(tiny_model_dir, examples, tmp_path, flops_weight,
                                                             sparsity):
    import random

    questions, sentences = sample_batch(examples, list(range(8)), random.Random(1))
    grads, losses = [], []
    for chunk in (96, 5):  # 24 sentences: one pass, then five chunks through the gradient cache
        trainer = make_trainer(tiny_model_dir, examples, tmp_path / str(chunk), chunk_size=chunk,
                               flops_weight=flops_weight, sparsity=sparsity)
        losses.append(trainer.backward(questions, sentences))
        named = [(n, p) for n, p in trainer.model.encoder.named_parameters() if p.requires_grad]
        grads.append({n: p.grad.detach().clone() for n, p in named if p.grad is not None}
                     | {"w": trainer.model.w.grad.detach().clone()})
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)
    one, cached = grads
    assert one.keys() == cached.keys() and len(one) > 10
    scale = _norm(one)
    assert scale > 0
    different = [n for n in one if not _close_in_norm(one[n], cached[n], scale)]
    assert not different, f"gradients differ beyond float32 noise: {different}"

    # The check can fail: a cache that dropped the last chunk's sentences gives other gradients.
    trainer = make_trainer(tiny_model_dir, examples, tmp_path / "short", chunk_size=5, flops_weight=flops_weight,
                           sparsity=sparsity)
    trainer.backward(questions[:7], sentences[:21])
    assert not all(_close_in_norm(one[n], p.grad, scale) for n, p in trainer.model.encoder.named_parameters()
                   if p.grad is not None)


@pytest.mark.data
@pytest.mark.jvm
def test_a_step_moves_w_and_the_encoder_and_leaves_the_embeddings_frozen(tiny_model_dir, examples, tmp_path):
    import random

    questions, sentences = sample_batch(examples, list(range(8)), random.Random(1))
    trainer = make_trainer(tiny_model_dir, examples, tmp_path, chunk_size=5)
    E = trainer.model.embeddings.detach().clone()
    before = {k: v.clone() for k, v in trainer.model.encoder.state_dict().items()}
    assert not trainer.model.embeddings.requires_grad
    trainer.train_step(questions, sentences)
    assert torch.equal(trainer.model.embeddings, E)
    assert float(trainer.model.w.detach()) != pytest.approx(0.7, abs=1e-4)
    moved = sum(not torch.equal(v, before[k]) for k, v in trainer.model.encoder.state_dict().items())
    assert moved > 10


@pytest.mark.data
@pytest.mark.jvm
def test_sparta_keeps_w(tiny_model_dir, examples, tmp_path):
    import random

    trainer = make_trainer(tiny_model_dir, examples, tmp_path, learn_w=False)
    trainer.train_step(*sample_batch(examples, list(range(8)), random.Random(2)))
    assert float(trainer.model.w.detach()) == pytest.approx(0.7)



def _killed() -> None:
    raise KeyboardInterrupt


def _stopped_at_step(monkeypatch, step: int, stop) -> object:
    """Trainer.train_step patched so that step ``step`` first calls ``stop`` (a kill, or a Ctrl-C
    sent to the process); returns the real one, to patch back."""
    real, calls = Trainer.train_step, []

    def stopping(self, *a):
        calls.append(1)
        if len(calls) == step:
            stop()
        return real(self, *a)

    monkeypatch.setattr(Trainer, "train_step", stopping)
    return real

@pytest.mark.data
@pytest.mark.jvm
def test_killed_run_resumes_to_the_same_model(tiny_model_dir, examples, tmp_path, monkeypatch):
    whole = make_trainer(tiny_model_dir, examples, tmp_path / "whole").train()

    trainer = make_trainer(tiny_model_dir, examples, tmp_path / "cut")
    real = _stopped_at_step(monkeypatch, 3, _killed)
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    monkeypatch.setattr(Trainer, "train_step", real)
    assert (tmp_path / "cut" / "checkpoint" / "trainer.pt").is_file()
    resumed = make_trainer(tiny_model_dir, examples, tmp_path / "cut")
    assert resumed.step == 2
    summary = resumed.train()
    assert summary["steps"] == whole["steps"] == 4
    a = SparcModel.load(tmp_path / "whole")
    b = SparcModel.load(tmp_path / "cut")
    assert a.fingerprint == b.fingerprint
    assert not (tmp_path / "cut" / "checkpoint").exists()

    changed = dataclasses.replace(make_trainer(tiny_model_dir, examples, tmp_path / "other").config, lr=5e-4)
    trainer = make_trainer(tiny_model_dir, examples, tmp_path / "cut2")
    trainer.checkpoint()
    with pytest.raises(Exception, match=r"other training settings \(lr 0.001 -> 0.0005\); give the same ones"):
        Trainer(changed, tmp_path / "cut2", examples, device="cpu", progress=False)  # which setting was not said
    with pytest.raises(Exception, match=f"was trained on {len(examples):,} questions and these are "
                                        f"{len(examples) - 1:,} .other examples"):  # it resumed on other questions
        Trainer(trainer.config, tmp_path / "cut2", examples[:-1], device="cpu", progress=False)
    same = dataclasses.replace(trainer.config, data=str(data_dir()) + "/")  # one folder named another way
    assert trainer.config.data != same.data
    assert Trainer(same, tmp_path / "cut2", examples, device="cpu", progress=False).step == 0


@pytest.mark.parametrize("extra", ["plain", pytest.param("passage", marks=pytest.mark.slow), "lexical", "stems"])
@pytest.mark.data
@pytest.mark.jvm
def test_top_k_aware_scores_are_what_the_index_holds(tiny_model_dir, tiny_mlm_dir, examples, tmp_path, extra):
    """With --top-k-aware a question token scores f(v, s) when it is in the sentence's encoded
    top K and 0 otherwise: the same as scoring the encoded sentence (with passage expansion, or with
    the lexical term over the training corpus's statistics, its stem part too)."""
    import random

    base = tiny_model_dir
    if extra == "stems":  # a base that has a stem weight keeps it (fixed) while alpha is learned
        base = SparcModel.load(tiny_model_dir, stem_weight=0.5).save(tmp_path / "stem-base")
    extra = {"plain": {}, "passage": dict(passage_weight=0.1, passage_model=str(tiny_mlm_dir)),
             "lexical": dict(lexical_weight=0.7), "stems": dict(lexical_weight=0.7)}[extra]
    trainer = make_trainer(base, examples, tmp_path, top_k_aware=True, **extra)
    model = trainer.model
    model.encoder.eval()
    questions, sentences = sample_batch(examples, list(range(4)), random.Random(0))
    tok = model.tokenizer
    vocab = sorted({tok.convert_tokens_to_ids(t) for q in questions for t in model.queries.bag(q)})
    with torch.no_grad():
        scores, full = trainer._scores(sentences, torch.tensor(vocab))
    assert full is None  # the whole vocabulary's scores are kept only for the FLOPS regulariser
    encoded = model.encode_batch([s.text for s in sentences], [s.context for s in sentences], corpus=trainer.corpus)
    kept = 0
    for i, e in enumerate(encoded):
        stored = dict(zip(e.tokens, e.weights.tolist()))
        for j, v in enumerate(vocab):
            expected = stored.get(tok.convert_ids_to_tokens(v), 0.0)
            assert scores[i, j].item() == pytest.approx(expected, rel=1e-4, abs=1e-6)
            kept += expected > 0
    assert kept > 0 and (scores == 0).sum() > 0  # some question tokens in, some cut
    if base != tiny_model_dir:
        assert model.config.stem_weight == 0.5 and any(t.siblings for t in trainer.lexical.values())


@pytest.mark.data
@pytest.mark.jvm
def test_flops_regulariser_is_in_the_loss_and_shortens_what_sentences_store(tiny_model_dir, examples, tmp_path):
    """The loss is cross-entropy plus weight x sum over tokens of the squared batch mean of what the
    sentences store; trained with it, the sentences of a held batch keep fewer positive tokens than
    after the same steps without it."""
    import random

    questions, sentences = sample_batch(examples, list(range(8)), random.Random(1))
    held = sample_batch(examples, list(range(8, 16)), random.Random(2))[1]
    plain = make_trainer(tiny_model_dir, examples, tmp_path / "plain")
    sparse = make_trainer(tiny_model_dir, examples, tmp_path / "sparse", flops_weight=1.0)
    with torch.no_grad():
        full = sparse.model.token_scores(*sparse.model.hidden_states(
            *sparse.model.tokenize_pairs([s.text for s in sentences], [s.context for s in sentences])[:2]))
    assert float(flops(torch.tensor([[1.0, 0.0], [3.0, 2.0]]))) == 2.0 ** 2 + 1.0 ** 2  # the column means, squared
    # over the whole vocabulary, not only the question tokens that cross-entropy scores
    before = plain.backward(questions, sentences)
    assert sparse.backward(questions, sentences) == pytest.approx(before + float(flops(full)), rel=1e-4)

    def positives(trainer) -> int:
        model = trainer.model
        model.encoder.eval()
        with torch.no_grad():
            ids, seg, _, _ = model.tokenize_pairs([s.text for s in held], [s.context for s in held])
            return int((model.token_scores(*model.hidden_states(ids, seg)) > 0).sum())

    start = positives(plain)
    plain.train(), sparse.train()
    assert positives(sparse) < min(start, positives(plain))


@pytest.mark.data
@pytest.mark.jvm
def test_walk_term_weighs_each_token_by_the_share_of_questions_that_use_it(tiny_model_dir, examples, tmp_path):
    """sparsity walk: the loss is cross-entropy plus weight x the sum over tokens of (share of the
    training questions whose bag holds the token) x (the batch's mean stored score); trained with
    it, a held batch stores fewer positive scores on the tokens questions use than after the same
    steps without it."""
    import random

    from sparc_es.training.train import question_share

    tok = SparcModel.load(tiny_model_dir).tokenizer
    share = question_share(tok, ["Who won?", "Who lost the game?"], len(tok))
    who, game = tok.convert_tokens_to_ids(["who", "game"])
    assert share[who] == 1.0 and share[game] == 0.5 and float(share.sum()) == pytest.approx((3 + 5) / 2)

    questions, sentences = sample_batch(examples, list(range(8)), random.Random(1))
    held = sample_batch(examples, list(range(8, 16)), random.Random(2))[1]
    plain = make_trainer(tiny_model_dir, examples, tmp_path / "plain")
    walk = make_trainer(tiny_model_dir, examples, tmp_path / "walk", flops_weight=1.0, sparsity="walk")
    p = walk.question_share
    assert p.shape == (walk.model.scorable.numel(),) and 0 < float(p.max()) <= 1
    with torch.no_grad():
        full = walk.model.token_scores(*walk.model.hidden_states(
            *walk.model.tokenize_pairs([s.text for s in sentences], [s.context for s in sentences])[:2]))
    before = plain.backward(questions, sentences)
    assert walk.backward(questions, sentences) == pytest.approx(before + float((p * full.mean(dim=0)).sum()),
                                                                rel=1e-4)

    def walked(trainer) -> float:
        model = trainer.model
        model.encoder.eval()
        with torch.no_grad():
            ids, seg, _, _ = model.tokenize_pairs([s.text for s in held], [s.context for s in held])
            return float(((model.token_scores(*model.hidden_states(ids, seg)) > 0).float() * p).sum())

    start = walked(plain)
    plain.train(), walk.train()
    assert walked(walk) < min(start, walked(plain))


def test_a_sparsity_term_without_a_weight_is_refused():
    from sparc_es.errors import SparcError, command_line

    with command_line(), pytest.raises(SparcError, match=r"weighed by --flops-weight: give it a weight above 0 "
                                                         r"\(--sparsity walk, --flops-weight 0\)$"):
        TrainConfig(sparsity="walk")
    assert TrainConfig(sparsity="walk", flops_weight=0.1).sparsity == "walk"


@pytest.mark.parametrize("name, value", [("lr", float("inf")), ("w_lr", float("nan")), ("epochs", float("inf")),
                                         ("passage_weight", float("inf")), ("flops_weight", float("inf"))])
def test_settings_that_are_not_finite_numbers_are_refused(name, value):
    """--lr inf ran to the end with loss nan and failed at save blaming field 'w'; --epochs inf was
    an OverflowError."""
    from sparc_es.errors import SparcError, command_line

    with command_line(), pytest.raises(SparcError, match=f"^training {name} must be a finite number "
                                                         f"\\(--{name.replace('_', '-')} {value:g}\\)$"):
        TrainConfig(**{name: value})


@pytest.mark.parametrize("changes, said", [
    ({"max_steps": 0}, "training max_steps must be at least 1 (max_steps 0)"),
    ({"batch_size": 0}, "training batch_size must be at least 1 (batch_size 0)"),
    ({"warmup_steps": -1}, "training warmup_steps must be at least 0 (warmup_steps -1)"),
    ({"weight_decay": -0.5}, "training weight_decay must be at least 0 (weight_decay -0.5)"),
    ({"lr": 0.0}, "training lr must be above 0 (lr 0)"),
    ({"sparsity": "x"}, "training sparsity must be flops or walk (sparsity x)"),
])
def test_train_numbers_name_the_setting_and_the_value_as_adapt_does(changes, said):
    """They named the config field alone ("training max_steps must be at least 1"); adapt says "(--steps 0)"."""
    from sparc_es.errors import SparcError

    with pytest.raises(SparcError) as e:
        TrainConfig(**changes)
    assert str(e.value) == said


def test_train_numbers_name_the_flag_on_the_command_line(tmp_path, cli):
    rc, _, err = cli("train", "--output", tmp_path / "never-made", "--max-steps", "0")
    assert rc == 1 and err == "sparc-es: error: training max_steps must be at least 1 (--max-steps 0)\n", err
    assert not (tmp_path / "never-made").exists()
    # a device: train had none (a GPU machine could not keep training on its CPU); one torch does not see
    # is refused before any work, as adapt's and encode's are
    rc, _, err = cli("train", "--output", tmp_path / "never-made", "--device", "cuda:7")
    assert rc == 1 and err.startswith("sparc-es: error: ") and "cuda:7" in err, err
    assert not (tmp_path / "never-made").exists()


def test_defaults_are_the_shipped_recipe():
    config = TrainConfig()
    assert (config.model, config.head, config.top_k_aware, config.passage_weight, config.token_weights, config.epochs) \
        == ("splade-bert-tiny", "mlm", True, 2.0, True, 3.0)


@pytest.mark.data
@pytest.mark.jvm
@pytest.mark.slow
def test_passage_weight_is_learned_and_saved(tiny_model_dir, tiny_mlm_dir, examples, tmp_path):
    summary = make_trainer(tiny_model_dir, examples, tmp_path, top_k_aware=True, passage_weight=1.5,
                           passage_model=str(tiny_mlm_dir)).train()
    model = SparcModel.load(tmp_path)
    assert model.passage_model is not None and model.config.passage_encoder == "passage"
    assert model.config.passage_weight == pytest.approx(summary["passage_weight"]) != pytest.approx(1.5)
    assert torch.equal(model.passage_model.embeddings, SparcModel.load(tiny_mlm_dir).embeddings)  # frozen


@pytest.mark.data
@pytest.mark.jvm
def test_a_passage_encoder_with_another_vocabulary_is_refused(tiny_model_dir, tiny_mlm_dir, examples, tmp_path):
    """Passage scores are added token by token: an encoder whose vocabulary differs (an expanded base
    beside the original passage encoder) is refused in one line, not a tensor shape error."""
    from transformers import AutoTokenizer, BertForMaskedLM

    from sparc_es.errors import ModelError
    from sparc_es.training.vocabulary import expand_masked_lm

    base, tokenizer = BertForMaskedLM.from_pretrained(tiny_mlm_dir), AutoTokenizer.from_pretrained(tiny_mlm_dir)
    tokenizer = expand_masked_lm(base, tokenizer, ["storedocvectors"])
    base.save_pretrained(tmp_path / "expanded")
    tokenizer.save_pretrained(tmp_path / "expanded")
    with pytest.raises(ModelError, match="another vocabulary than the model"):
        make_trainer(tiny_model_dir, examples, tmp_path / "out", passage_weight=1.5,
                     passage_model=str(tmp_path / "expanded"))
    make_trainer(tiny_model_dir, examples, tmp_path / "same", passage_weight=1.5, passage_model=str(tiny_mlm_dir))


@pytest.mark.data
@pytest.mark.jvm
def test_lexical_weight_is_learned_and_saved(tiny_model_dir, examples, tmp_path):
    summary = make_trainer(tiny_model_dir, examples, tmp_path, lexical_weight=0.3).train()
    model = SparcModel.load(tmp_path)
    assert model.config.lexical_weight == pytest.approx(summary["lexical_weight"]) != pytest.approx(0.3)
    assert model.fingerprint != SparcModel.load(tmp_path, lexical_weight=0.3).fingerprint


@pytest.mark.data
@pytest.mark.jvm
def test_validation_articles_are_never_trained_on(examples):
    from sparc_es.evaluation.evalsets import build_eval_set

    held_out = build_eval_set("val")
    assert len(held_out.topics) > 1000 and len(held_out.sentences) > 1000
    assert all(held_out.qrels[q] for q, _ in held_out.topics)  # every question has an answer sentence
    from sparc_es.evaluation.evalsets import train_articles

    trained_on = {p["context"] for a in train_articles() for p in a["paragraphs"]}
    assert {e.positive.context for e in examples} <= trained_on
    assert not trained_on & {s.context for s in held_out.sentences}


# --- the output folder, Ctrl-C and --help: no data needed ---------------------------------------------

def _handmade_examples(n: int = 16) -> list:
    """Questions with a positive and two negatives each, written here: train's loop needs no SQuAD."""
    from sparc_es.corpus.sources import Sentence
    from sparc_es.training.train import Example

    topics = ["lucene", "impacts", "tokens", "questions", "weights", "sentences", "folders", "indexes"]
    examples = []
    for i in range(n):
        topic, other = topics[i % len(topics)], topics[(i + 3) % len(topics)]
        context = f"Passage {i} about {topic}. It has {i} parts."
        positive = Sentence(f"p{i}", f"Passage {i} about {topic}.", context)
        same = Sentence(f"s{i}", f"It has {i} parts.", context)
        hard = Sentence(f"h{i}", f"Another passage about {other}.", f"Another passage about {other}.")
        examples.append(Example(f"what is passage {i} about?", topic, positive, [same], [hard]))
    return examples


def _tiny_config(tiny_model_dir, **changes) -> TrainConfig:
    settings = dict(model=str(tiny_model_dir), max_length=32, batch_size=4, chunk_size=96, max_steps=4, lr=1e-3,
                    warmup_steps=0, checkpoint_every=2, head="dot", top_k_aware=False, passage_weight=0.0,
                    token_weights=False)
    return TrainConfig(**{**settings, **changes})


def _umask() -> int:
    import os

    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_train_marks_its_folder_and_resumes_one_an_older_sparc_es_left_unmarked(tiny_model_dir, tmp_path,
                                                                                 monkeypatch):
    """Every folder sparc-es makes holds the .sparc-es marker (what --overwrite and demo trust before
    deleting): train's too, and a run an older sparc-es began, unmarked, still resumes. A folder of
    someone else's files is refused, not marked."""
    from sparc_es.errors import StoreError
    from sparc_es.layout.ownership import MARKER
    from sparc_es.training.train import CHECKPOINT, train

    config, examples = _tiny_config(tiny_model_dir), _handmade_examples()
    train(config, tmp_path / "whole", lambda: examples, progress=False)
    assert (tmp_path / "whole" / MARKER).is_file()
    mode = 0o666 & ~_umask()
    assert all(p.stat().st_mode & 0o777 == mode for p in (tmp_path / "whole").rglob("*") if p.is_file()), \
        [(p.name, oct(p.stat().st_mode)) for p in (tmp_path / "whole").rglob("*")]

    real = _stopped_at_step(monkeypatch, 3, _killed)
    with pytest.raises(KeyboardInterrupt):
        train(config, tmp_path / "cut", lambda: examples, progress=False)
    monkeypatch.setattr(Trainer, "train_step", real)
    (tmp_path / "cut" / MARKER).unlink()  # as an older sparc-es left it
    assert (tmp_path / "cut" / CHECKPOINT).is_dir()
    summary = train(config, tmp_path / "cut", lambda: examples, progress=False)
    assert summary["steps"] == 4 and (tmp_path / "cut" / MARKER).is_file()
    assert SparcModel.load(tmp_path / "cut").fingerprint == SparcModel.load(tmp_path / "whole").fingerprint

    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine\n")
    with pytest.raises(StoreError, match="folder is not empty and was not made by sparc-es"):
        train(config, theirs, lambda: examples, progress=False)
    assert sorted(p.name for p in theirs.iterdir()) == ["notes.txt"]


def test_train_refuses_a_finished_model_or_another_kind_and_overwrite_replaces_a_model_once_complete(
        tiny_model_dir, tmp_path, monkeypatch):
    """A second run into a finished model's folder trained it again from step 0, and an index or an
    encoded folder given as the output got model files and its marker relabelled 'train'. Both are
    refused in one line; --overwrite replaces a model, trained beside it (a Ctrl-C keeps the old
    one; the same command resumes) and swapped in when complete, its examples cache kept."""
    import shutil

    from sparc_es.errors import StoreError
    from sparc_es.layout.ownership import claim, maker
    from sparc_es.training.train import CHECKPOINT, train

    examples, out = _handmade_examples(), tmp_path / "model"
    train(_tiny_config(tiny_model_dir), out, lambda: examples, progress=False)
    old = SparcModel.load(out).fingerprint
    with pytest.raises(StoreError, match=r"model: already holds a model \(made by sparc-es train\); pass "
                                         r"overwrite=True to replace it"):
        train(_tiny_config(tiny_model_dir), out, lambda: examples, progress=False)
    assert SparcModel.load(out).fingerprint == old

    (out / "examples.json").write_text("{}")  # the default --examples-cache
    other = _tiny_config(tiny_model_dir, seed=14)
    real = _stopped_at_step(monkeypatch, 3, _killed)
    with pytest.raises(KeyboardInterrupt):
        train(other, out, lambda: examples, progress=False, overwrite=True)
    monkeypatch.setattr(Trainer, "train_step", real)
    assert SparcModel.load(out).fingerprint == old and (tmp_path / ".model.training" / CHECKPOINT).is_dir()
    train(other, out, lambda: examples, progress=False, overwrite=True)
    train(other, tmp_path / "fresh", lambda: examples, progress=False)
    new = SparcModel.load(out).fingerprint
    assert new == SparcModel.load(tmp_path / "fresh").fingerprint != old
    assert (out / "examples.json").read_text() == "{}" and maker(out) == "train"
    assert not {p.name for p in tmp_path.iterdir()} & {".model.training", ".model.old"}

    # killed between the swap's renames: the next run completes it
    shutil.copytree(out, tmp_path / ".model.training")
    out.rename(tmp_path / ".model.old")
    with pytest.raises(StoreError, match="already holds a model"):
        train(other, out, lambda: examples, progress=False)
    assert SparcModel.load(out).fingerprint == new and not (tmp_path / ".model.old").exists()

    for kind, what in (("index", "an index"), ("encode", "an encoded folder")):
        folder = claim(tmp_path / kind, kind)
        (folder / "meta.json").write_text("{}")
        for overwrite in (False, True):
            with pytest.raises(StoreError, match=f"{kind}: holds {what} \\(made by sparc-es {kind}\\), not a "
                                                 "model; train writes a model folder: choose another output"):
                train(other, folder, lambda: examples, progress=False, overwrite=overwrite)
        assert maker(folder) == kind and sorted(p.name for p in folder.iterdir()) == [".sparc-es", "meta.json"]


def test_flags_a_trained_starting_model_would_ignore_are_applied_or_refused(tiny_model_dir, tiny_mlm_dir, tmp_path):
    """From a SPARC model with a passage encoder (lambda 1.5) and alpha 0.2, --passage-model, --passage-head,
    --passage-weight and --lexical-weight were silently ignored, and --passage-weight 0 trained without the
    passage term but saved the encoder and its lambda. The passage flags are refused in one line (the
    defaults keep the model's encoder and lambda), 0 drops the encoder, a lexical weight starts alpha."""
    from sparc_es.errors import SparcError
    from sparc_es.model import Head
    from sparc_es.training.train import train

    sparc = SparcModel.load(tiny_model_dir)
    sparc.passage_model = SparcModel.load(tiny_mlm_dir, head=Head.MLM, max_length=64)
    sparc.config = dataclasses.replace(sparc.config, passage_weight=1.5, passage_encoder="passage",
                                       passage_max_length=64, lexical_weight=0.2)
    start, examples = str(sparc.save(tmp_path / "sparc")), _handmade_examples()

    def trainer(**changes) -> Trainer:
        return Trainer(_tiny_config(start, **changes), tmp_path / "out", examples, device="cpu", progress=False)

    with pytest.raises(SparcError, match=r"^passage_weight 0.5, passage_model x, passage_head dot: the starting model "
                                         r".* has a passage encoder, which training keeps with its lambda \(1.5\)"):
        trainer(passage_weight=0.5, passage_model="x", passage_head="dot")
    kept = trainer(passage_weight=TrainConfig.passage_weight, lexical_weight=0.7)
    assert kept.model.passage_model is not None and float(kept.log_lambda.detach().exp()) == pytest.approx(1.5)
    assert kept.model.config.lexical_weight == pytest.approx(0.7) == float(kept.log_alpha.detach().exp())
    assert trainer().model.config.lexical_weight == 0.2  # not trained: the model's own alpha, as it is

    train(_tiny_config(start, passage_weight=0.0), tmp_path / "plain", lambda: examples, progress=False)
    plain = SparcModel.load(tmp_path / "plain")
    assert plain.passage_model is None and plain.config.passage_weight == 0
    with pytest.raises(SparcError, match="^passage_model x: the passage encoder's settings, but passage_weight 0"):
        _tiny_config(start, passage_weight=0.0, passage_model="x")


def test_training_stops_at_the_first_step_that_diverges(tiny_model_dir, tmp_path):
    """--w-lr 1e4 made w NaN in the first steps, then failed at the checkpoint ("field 'w'"): the run
    stops at that step with one line that says which and what to lower, and nothing of it is saved
    (the checkpoint before it is kept)."""
    from sparc_es.errors import SparcError
    from sparc_es.model.checkpoint import read_state
    from sparc_es.training.train import CHECKPOINT, TRAINER_STATE, train

    config = _tiny_config(tiny_model_dir, max_steps=8, w_lr=1e4)
    with pytest.raises(SparcError, match=r"^training diverged at step [12] of 8 \(loss (nan|[0-9.]+, weights no "
                                         r"longer finite)\); nothing of it was saved: lower lr \(0.001\) or w_lr "
                                         r"\(10000\)$"):
        train(config, tmp_path / "w", _handmade_examples, progress=False)
    assert not (tmp_path / "w" / CHECKPOINT).exists() and not (tmp_path / "w" / "sparc_config.json").exists()

    config = _tiny_config(tiny_model_dir, max_steps=8, lr=1e4)  # the encoder diverges a few steps in
    with pytest.raises(SparcError, match=r"^training diverged at step ([3-8]) of 8 \(loss ") as e:
        train(config, tmp_path / "lr", _handmade_examples, progress=False)
    step = int(str(e.value).split()[4])
    state = read_state(tmp_path / "lr" / CHECKPOINT / TRAINER_STATE, ("step",), "")
    assert state["step"] == (step - 1) // 2 * 2 and not (tmp_path / "lr" / "sparc_config.json").exists()


@pytest.mark.parametrize("mask", [0o022, 0o027])
def test_model_weights_get_the_mode_the_umask_gives(tiny_model_dir, tmp_path, mask):
    """safetensors writes a temporary file and renames it: its weights were 0600 under any umask."""
    import os

    before = os.umask(mask)
    try:
        SparcModel.load(tiny_model_dir).save(tmp_path / "saved")
    finally:
        os.umask(before)
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "saved").iterdir() if p.is_file()}
    assert "model.safetensors" in modes and set(modes.values()) == {0o666 & ~mask}, modes


def test_ctrl_c_stops_train_after_the_step_in_progress(tiny_model_dir, tmp_path, monkeypatch):
    """A SIGINT that lands inside a step (or a checkpoint) lets it finish, then stops the run with one
    line naming the checkpoint the same command resumes from; the rerun ends with the model of a
    run never stopped."""
    import os
    import signal

    from sparc_es.training.train import train

    config, examples = _tiny_config(tiny_model_dir, max_steps=6), _handmade_examples()
    # what Ctrl-C sends, delivered in the middle of the step
    real = _stopped_at_step(monkeypatch, 3, lambda: os.kill(os.getpid(), signal.SIGINT))
    # Python's handler, as in a terminal: a shell that starts the tests in the background (`cmd &`)
    # starts them with SIGINT ignored, and train rightly leaves an ignored SIGINT ignored
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt) as e:
            train(config, tmp_path / "cut", lambda: examples, progress=False)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)
    assert str(e.value) == (f"train interrupted at step 3 of 6; run the same command again to resume from the "
                            f"checkpoint of step 2 ({tmp_path / 'cut' / 'checkpoint'}, written every 2 steps)")
    monkeypatch.setattr(Trainer, "train_step", real)
    train(config, tmp_path / "cut", lambda: examples, progress=False)
    train(config, tmp_path / "whole", lambda: examples, progress=False)
    assert SparcModel.load(tmp_path / "cut").fingerprint == SparcModel.load(tmp_path / "whole").fingerprint


def test_train_help_says_its_defaults_as_they_are(capsys):
    """w's learning rate is the --w-lr default (the text said 1e-3 where the default was 0.01), and the
    shipped model's lexical and stem weights are said to be set when shipping, not by train."""
    from sparc_es.cli import main

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"w has its own learning rate ({TrainConfig.w_lr:g}, --w-lr)" in text
    assert "1e-3" not in text
    assert TrainConfig().lexical_weight == 0
    assert "(--lexical-weight) defaults to 0, off, and train has no stem weight" in text
    assert "alpha = 0.2, stem weight 0.3 and stop-word rule are set in the trained folder afterwards by " \
           "``scripts/ship_model.py``" in text


def test_every_train_flag_has_its_help(capsys):
    """--quiet was listed with no description."""
    import re

    from sparc_es.cli import main

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    options = capsys.readouterr().out.split("options:", 1)[1]
    bare = [m.group(1) for m in re.finditer(r"^  (--[\w-]+)(?: [A-Z_]+| \{[\w,]+\})?\n(?=  --|\Z)", options, re.M)]
    assert "--quiet" in options and not bare, bare


def test_max_steps_help_says_it_replaces_epochs_and_rescales_the_schedule(tiny_model_dir, tmp_path, capsys):
    """The help said "stop after this many steps", but the run is N steps long: the learning rate warms
    up over at most a tenth of them and decays to 0 at the last."""
    from sparc_es.cli import main

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split()).replace("warm- up", "warm-up")  # argparse wraps at hyphens
    assert "--max-steps N train this many steps in place of --epochs: the warm-up (at most a tenth of them) and " \
           "the linear decay to 0 span these steps" in text and "stop after" not in text
    trainer = Trainer(_tiny_config(tiny_model_dir, max_steps=20, warmup_steps=500, epochs=50.0), tmp_path,
                      _handmade_examples(), device="cpu", progress=False)
    rates = []
    for _ in range(20):
        trainer.optimizer.step()
        trainer.scheduler.step()
        rates.append(trainer.scheduler.get_last_lr()[0])
    assert trainer.total_steps == 20 and rates[1] == pytest.approx(1e-3) and rates[-1] == 0  # warm-up: 2 steps


def test_the_training_doc_names_the_shipped_model_as_it_is():
    """docs/training.md pointed to sparc_es/models/default/MODEL_CARD.md (the folder is model/) and gave
    the shipped model's fingerprint as 2304a1258a440b87, that of the model before the stem term's
    stop-word rule."""
    import re

    root = Path(__file__).resolve().parents[1]
    text = (root / "docs" / "training.md").read_text()
    paths = re.findall(r"`(sparc_es/[\w/.-]+)`", text)
    assert paths and [p for p in paths if not (root / p).exists()] == []
    shipped = re.search(r"Shipped in half\s+precision \([^,]+, fingerprint (\w+)", text).group(1)
    assert shipped == SparcModel.load("default").fingerprint


@pytest.mark.jvm
def test_ctrl_c_after_the_java_vm_started_is_pythons(tiny_model_dir, tmp_path):
    """Mining the examples starts the Java VM (Lucene BM25), which puts its own SIGINT handler in
    Python's place: a Ctrl-C during training then made the VM exit the process from its own thread
    while torch ran on (no checkpoint said; once in about nine tries, "corrupted double-linked list").
    Run in a child process, which the VM would end: train takes Ctrl-C back once the examples are in."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import os, signal, sys
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, not a background job
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_train import Trainer, _handmade_examples, _tiny_config
        from sparc_es.training.train import train

        def mined():
            from sparc_es.engines._java import start_jvm
            start_jvm()
            return _handmade_examples()

        real, calls = Trainer.train_step, []

        def interrupted_in_step_three(self, *a):
            calls.append(1)
            if len(calls) == 3:
                os.kill(os.getpid(), signal.SIGINT)
            return real(self, *a)

        Trainer.train_step = interrupted_in_step_three
        try:
            train(_tiny_config({str(tiny_model_dir)!r}, max_steps=6), {str(tmp_path / "cut")!r}, mined,
                  progress=False)
        except KeyboardInterrupt as e:
            print(e)
            sys.exit(7)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 7, (done.returncode, done.stderr[-2000:])
    assert done.stdout.startswith("train interrupted at step 3 of 6; run the same command again to resume from "
                                  "the checkpoint of step 2"), done.stdout


@pytest.mark.jvm
def test_the_examples_cache_follows_the_slice_not_its_folder(tmp_path, monkeypatch):
    """A data folder moved (or mounted elsewhere) keeps its examples cache: mining them again needs
    Java and minutes. Another slice mines again."""
    import json
    import shutil

    from sparc_es.evaluation.evalsets import TRAIN_FILE
    from sparc_es.training import examples as examples_module

    def article(title: str, n: int) -> dict:
        text = " ".join(f"{title} sentence {i} mentions the number {i * 7}." for i in range(4))
        qas = [{"id": f"{title}{i}", "question": f"Which number does {title} sentence {i} mention?",
                "answers": [{"text": str(i * 7), "answer_start": text.index(f"number {i * 7}") + 7}]} for i in range(n)]
        return {"title": title, "paragraphs": [{"context": text, "qas": qas}]}

    first = tmp_path / "data"
    (first / TRAIN_FILE).parent.mkdir(parents=True)
    articles = [article("Alpha", 3), article("Beta", 3), article("Gamma", 2)]  # Gamma: held out
    (first / TRAIN_FILE).write_text(json.dumps({"data": articles}))
    cache = tmp_path / "examples.json"
    mined = examples_module.cached_examples(cache, first, bm25_depth=10, limit=None, validation_articles=1)
    assert len(mined) == 6 and cache.is_file()

    moved = tmp_path / "moved"
    shutil.move(first, moved)
    monkeypatch.setattr(examples_module, "load_examples", lambda *a, **k: pytest.fail("mined again"))
    kept = examples_module.cached_examples(cache, moved, bm25_depth=10, limit=None, validation_articles=1)
    assert [(e.question, e.positive.id) for e in kept] == [(e.question, e.positive.id) for e in mined]

    (moved / TRAIN_FILE).write_text(json.dumps({"data": [article("Delta", 2), article("Gamma", 2)]}))
    with pytest.raises(pytest.fail.Exception, match="mined again"):
        examples_module.cached_examples(cache, moved, bm25_depth=10, limit=None, validation_articles=1)


def test_an_examples_cache_that_is_a_folder_or_not_a_cache_is_one_line_naming_it(tmp_path, monkeypatch, cli):
    """--examples-cache naming a folder mined the examples, then failed at the rename ("corpus.tmp: Is a
    directory") and left the .tmp behind; a corrupt cache was a bare JSONDecodeError, without the file."""
    from sparc_es.errors import InputError, StoreError
    from sparc_es.training import examples as examples_module

    monkeypatch.setattr(examples_module, "load_examples", lambda *a, **k: pytest.fail("mined"))
    folder = tmp_path / "corpus"
    folder.mkdir()
    with pytest.raises(StoreError, match=f"^{folder}: examples_cache is a folder; name a file to write"):
        examples_module.cached_examples(folder, tmp_path, bm25_depth=10, limit=None)
    rc, _, err = cli("train", "--output", tmp_path / "never-made", "--examples-cache", folder, "--max-steps", "1")
    assert rc == 1 and err.startswith(f"sparc-es: error: {folder}: --examples-cache is a folder;"), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus"]

    broken = tmp_path / "ex.json"
    broken.write_text('{"key": ')
    with pytest.raises(InputError, match=rf"^{broken}: not an examples cache sparc-es wrote \(Expecting value: line 1 "
                                         r"column 9 \(char 8\)\); delete it \(the examples are mined again\) or give "
                                         r"examples_cache another file$"):
        examples_module.cached_examples(broken, tmp_path, bm25_depth=10, limit=None)
    assert broken.read_text() == '{"key": '
