"""Issue 28: nothing sparc-es reads runs code, and a mistyped model config is a one-line error.

* Resume states (``adapt-checkpoint.pt``, ``checkpoint/trainer.pt``) are read with the weights-only
  unpickler: a planted pickle payload is refused with one line and never runs; a real checkpoint
  still resumes.
* Every field of ``sparc_config.json`` is checked at load (type, finite, range, sub-folder), on a
  copy of the shipped default model with one bad field at a time.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import random
import re
import shutil
from pathlib import Path

import pytest
import torch

import sparc_es
from sparc_es.corpus.sources import Sentence
from sparc_es.errors import ModelError, SparcError, StoreError
from sparc_es.model import SparcConfig, SparcModel
from sparc_es.model.checkpoint import SHIPPED_MODEL
from sparc_es.training import adapt as adapt_module
from sparc_es.training.adapt import AdaptConfig, adapt
from sparc_es.training.train import CHECKPOINT, TRAINER_STATE, Example, TrainConfig, Trainer, sample_batch

DEMO = Path(sparc_es.__file__).parent / "demo"


class Payload:
    """What an attacker plants: unpickling it writes ``marker`` (any call could be made instead)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return pathlib.Path.write_text, (self.marker, "pwned")


def plant(path: Path, marker: Path) -> None:
    """A torch.save file at ``path`` whose unpickling runs :class:`Payload`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"settings": Payload(marker), "config": Payload(marker), "step": 1}, path)


def one_line(e: pytest.ExceptionInfo) -> str:
    message = str(e.value)
    assert "\n" not in message, message
    return message


# --- planted checkpoints -------------------------------------------------------------------


def test_planted_adapt_checkpoint_does_not_run(tmp_path):
    out, marker = tmp_path / "adapted", tmp_path / "pwned"
    plant(out / adapt_module.CHECKPOINT, marker)
    with pytest.raises(StoreError) as e:
        adapt("splade-bert-tiny", [DEMO], out, AdaptConfig(steps=2, batch_size=8), progress=False)
    assert not marker.exists(), "the planted checkpoint ran its payload"
    message = one_line(e)
    assert "older sparc-es" in message and "overwrite=True" in message and adapt_module.CHECKPOINT in message


def test_garbage_adapt_checkpoint_is_one_line(tmp_path):
    out = tmp_path / "adapted"
    out.mkdir()
    (out / adapt_module.CHECKPOINT).write_bytes(b"PK\x03\x04 not a checkpoint")
    with pytest.raises(StoreError) as e:
        adapt("splade-bert-tiny", [DEMO], out, AdaptConfig(steps=2, batch_size=8), progress=False)
    assert "pass overwrite=True" in one_line(e)  # a library call: the keyword, not the flag


def test_adapt_resume_still_works(tmp_path, adapt_stopped):
    """A real checkpoint (written by this sparc-es) resumes through the weights-only reader."""
    config = AdaptConfig(steps=2, batch_size=8, checkpoint_every=1, lr=1e-3)
    out = tmp_path / "adapted"
    adapt_stopped(DEMO, out, config, step=1)
    assert (out / adapt_module.CHECKPOINT).is_file()
    record = adapt("splade-bert-tiny", [DEMO], out, config, progress=False)
    assert record["steps"] == 2 and not (out / adapt_module.CHECKPOINT).exists()
    assert len(json.loads((out / "adaptation.json").read_text())["losses"]) == 2


def _examples() -> list[Example]:
    """Eight hand-made training examples (no SQuAD data needed)."""
    out = []
    for i in range(8):
        context = f"Town {i} lies on river {i}. Its mayor is called Alex {i}. It has {i + 2} bridges."
        s = [Sentence(id=f"p{i}-{j}", text=t.strip() + ".", context=context, doc=f"p{i}")
             for j, t in enumerate(context.split(".")[:3])]
        out.append(Example(f"What is the mayor of town {i} called?", f"Alex {i}", s[1], [s[0]], [s[2]]))
    return out


def _train_config(model: Path) -> TrainConfig:
    return TrainConfig(model=str(model), max_length=32, batch_size=4, chunk_size=96, max_steps=4, lr=1e-3,
                       warmup_steps=0, checkpoint_every=1, head="dot", top_k_aware=False, passage_weight=0.0,
                       token_weights=False)


def test_planted_trainer_state_does_not_run(tiny_model_dir, tmp_path):
    out, marker = tmp_path / "run", tmp_path / "pwned"
    plant(out / CHECKPOINT / TRAINER_STATE, marker)
    with pytest.raises(StoreError) as e:
        Trainer(_train_config(tiny_model_dir), out, _examples(), device="cpu", progress=False)
    assert not marker.exists(), "the planted trainer state ran its payload"
    message = one_line(e)
    assert "older sparc-es" in message and TRAINER_STATE in message


def test_trainer_checkpoint_round_trip(tiny_model_dir, tmp_path):
    """A checkpoint written by Trainer.checkpoint resumes: step, losses, optimiser and RNG state."""
    examples, config, out = _examples(), _train_config(tiny_model_dir), tmp_path / "run"
    trainer = Trainer(config, out, examples, device="cpu", progress=False)
    loss = trainer.train_step(*sample_batch(examples, [0, 1, 2, 3], random.Random(0)))
    trainer.step, trainer.losses = 1, [loss]
    trainer.checkpoint()
    rng = torch.get_rng_state()
    resumed = Trainer(config, out, examples, device="cpu", progress=False)
    assert resumed.step == 1 and resumed.losses == [loss]
    assert torch.equal(torch.get_rng_state(), rng)
    before, after = trainer.optimizer.state_dict()["state"], resumed.optimizer.state_dict()["state"]
    assert before.keys() == after.keys() and before
    for k in before:
        assert torch.equal(before[k]["exp_avg"], after[k]["exp_avg"])
    assert resumed.scheduler.state_dict()["last_epoch"] == trainer.scheduler.state_dict()["last_epoch"]


def test_planted_pytorch_model_bin_does_not_run(tmp_path):
    """Guard (passed before the fix too: transformers reads .bin weights-only): a model folder whose
    weights are a pickle payload does not run it."""
    folder, marker = tmp_path / "model", tmp_path / "pwned"
    shutil.copytree(SHIPPED_MODEL, folder, ignore=shutil.ignore_patterns("passage", "*.safetensors",
                                                                          "sparc_config.json"))
    torch.save({"embeddings.word_embeddings.weight": Payload(marker)}, folder / "pytorch_model.bin")
    with pytest.raises(ModelError):
        SparcModel.load(folder)
    assert not marker.exists()


# --- model config fields -------------------------------------------------------------------


class TooManyLoads(BaseException):
    """Not an Exception: SparcModel.load must not turn the guard into an ordinary ModelError."""


@pytest.fixture
def load_guard(monkeypatch):
    """At most a few encoder loads per test: a recursive load fails fast instead of eating memory."""
    from transformers import AutoModel

    real = AutoModel.from_pretrained.__func__
    calls = []

    def counted(cls, *a, **k):
        calls.append(1)
        if len(calls) > 4:
            raise TooManyLoads("the model folder was loaded recursively")
        return real(cls, *a, **k)

    monkeypatch.setattr(AutoModel, "from_pretrained", classmethod(counted))


def copy_default(folder: Path) -> Path:
    """The shipped default model: its configs copied (to be edited), its weights and tokenizer linked."""
    for src in sorted(SHIPPED_MODEL.rglob("*")):
        target = folder / src.relative_to(SHIPPED_MODEL)
        if src.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.suffix == ".json":
            shutil.copy(src, target)
        else:
            target.symlink_to(src)
    return folder


NAN, INF = float("nan"), float("inf")
BAD_FIELDS = [
    ("w", NAN, "finite"), ("w", INF, "finite"), ("w", -INF, "finite"), ("w", "0.5", "number"), ("w", True, "number"),
    ("w", 1e4, "exp(w)"),
    ("top_k", 0, "top-K must be at least 1"), ("top_k", 1.5, "int"), ("top_k", "many", "int"), ("top_k", None, "int"),
    ("max_length", 4, "at least 8"), ("max_length", 100_000, "positions"),
    ("max_over", "everything", "choose from"), ("max_over", 1, "str"),
    ("head", "linear", "choose from"),
    ("token_weights", "yes", "bool"), ("token_weights", 1, "bool"),
    ("passage_weight", -1.0, ">= 0"), ("passage_weight", NAN, "finite"),
    ("passage_encoder", ".", "sub-folder"), ("passage_encoder", "..", "sub-folder"),
    ("passage_encoder", "", "sub-folder"),
    ("passage_encoder", "passage/..", "sub-folder"), ("passage_encoder", "../default", "sub-folder"),
    ("passage_encoder", "/tmp", "sub-folder"), ("passage_encoder", str(SHIPPED_MODEL / "passage"), "sub-folder"),
    ("passage_encoder", "missing", "no SPARC model"), ("passage_encoder", "loop", "model folder itself"),
    ("passage_encoder", 5, "str"),
    ("passage_max_length", 0, "at least 8"), ("passage_max_length", 4096, "positions"),
    ("lexical_weight", -0.1, ">= 0"), ("lexical_weight", INF, "finite"),
    ("lexical_k1", -1.0, ">= 0"), ("lexical_k1", NAN, "finite"),
    ("lexical_b", 1.5, "[0, 1]"), ("lexical_b", -0.1, "[0, 1]"), ("lexical_b", NAN, "finite"),
    ("stem_weight", -1.0, ">= 0"), ("word_weight", NAN, "finite"),
    ("base_model", "splade", "dict"), ("base_model", {"name": 3}, "str"), ("base_model", {"sha256": NAN}, "NaN"),
    ("adaptation", [], "dict"), ("adaptation", {"loss_first_10": NAN}, "NaN"),
    ("lexical_wieght", 0.2, "unknown"), ("format", "sparc-es-model/9", "sparc-es-model/1"),
]


@pytest.fixture(scope="module")
def shipped_fingerprint() -> str:
    return SparcModel.load("default").fingerprint


def test_shipped_model_and_its_copy_load(tmp_path, shipped_fingerprint, load_guard):
    """The copy the bad-field cases edit is itself a working model (so their errors are the field's)."""
    assert SparcModel.load(copy_default(tmp_path / "m")).fingerprint == shipped_fingerprint
    assert SparcModel.load(SHIPPED_MODEL).passage_model is not None


@pytest.mark.parametrize("name, value, expected", BAD_FIELDS, ids=[f"{n}={v!r}" for n, v, _ in BAD_FIELDS])
def test_bad_config_field_is_a_one_line_error(tmp_path, load_guard, name, value, expected):
    folder = copy_default(tmp_path / "m")
    config_file = folder / "sparc_config.json"
    config = json.loads(config_file.read_text())
    config[name] = value
    config_file.write_text(json.dumps(config))  # json.dumps writes NaN and Infinity as they were planted
    if value == "loop":
        (folder / "loop").symlink_to(folder, target_is_directory=True)
    with pytest.raises(ModelError) as e:
        SparcModel.load(folder)
    message = one_line(e)
    assert re.search(rf"\b{name}\b", message) and "sparc_config.json" in message and expected in message, message


def test_config_must_be_an_object(tmp_path):
    folder = copy_default(tmp_path / "m")
    (folder / "sparc_config.json").write_text("[1, 2]")
    with pytest.raises(ModelError, match="sparc_config.json.*object"):
        SparcModel.load(folder)


def test_passage_encoder_of_a_passage_encoder_is_refused(tmp_path, load_guard):
    """Loading never recurses: a passage encoder with a passage encoder of its own is an error."""
    folder = copy_default(tmp_path / "m")
    inner = folder / "passage" / "sparc_config.json"
    config = json.loads(inner.read_text())
    config.update(passage_weight=1.0, passage_encoder="passage")
    inner.write_text(json.dumps(config))
    shutil.copytree(folder / "passage", folder / "passage" / "passage", symlinks=True)
    with pytest.raises(ModelError) as e:
        SparcModel.load(folder)
    assert "'passage_encoder'" in one_line(e) and "passage encoder of its own" in str(e.value)


def test_every_field_is_validated():
    """The hand-written type table covers every SparcConfig field (a new field must be added there)."""
    from sparc_es.model.config import _KINDS

    assert set(_KINDS) == {f.name for f in dataclasses.fields(SparcConfig)}


def test_written_configs_refuse_nan(tmp_path, tiny_model_dir):
    """A diverged w never reaches sparc_config.json as a bare NaN."""
    model = SparcModel.load(tiny_model_dir)
    with torch.no_grad():
        model.w.fill_(math.nan)
    with pytest.raises(SparcError, match="'w'.*NaN"):
        model.save(tmp_path / "copy")
    assert not (tmp_path / "copy" / "sparc_config.json").exists()


def test_config_from_code_is_validated_too():
    with pytest.raises(ModelError, match="'w' is NaN"):
        SparcConfig(w=math.nan)
    with pytest.raises(ModelError, match="'lexical_b'"):
        dataclasses.replace(SparcConfig(), lexical_b=2.0)
    assert SparcConfig(w=1, top_k=3).w == 1.0 and isinstance(SparcConfig(w=1).w, float)
