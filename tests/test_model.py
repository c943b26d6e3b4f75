"""f(v, s) and top-K against a direct computation; model folders; the real default model."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
import torch

from sparc_es.model import MaxOver, SparcModel

from tolerance import assert_same_top_k

SENTENCES = ["The capital of France is Paris.", "Water boils at 100 degrees Celsius at sea level, we are told."]
CONTEXTS = ["France is a country in Europe. The capital of France is Paris. It has many museums.",
            "A longer paragraph about water, physics and cooking. " * 3]


def brute_force_max(model: SparcModel, sentence: str, context: str, max_over: MaxOver) -> np.ndarray:
    """max_i H(s)_i . e_v straight from the definition: one unpadded input, float64, every vocabulary
    row; NaN for the tokens that are never scored."""
    enc = model.tokenizer(sentence, context, truncation="only_second", max_length=model.config.max_length,
                          return_tensors="pt")
    with torch.no_grad():
        H = model.encoder(**enc).last_hidden_state[0].double().numpy()
    if max_over is MaxOver.SENTENCE:
        H = H[enc["token_type_ids"][0].numpy() == 0]
    E = model.embeddings.detach().double().numpy()
    m = (H @ E.T).max(axis=0)
    vocab = model.tokenizer.convert_ids_to_tokens(list(range(E.shape[0])))
    excluded = [t in {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"} or re.fullmatch(r"\[unused\d+\]", t) is not None
                for t in vocab]
    m[np.array(excluded)] = np.nan
    return m


def brute_force_scores(model: SparcModel, sentence: str, context: str, max_over: MaxOver) -> np.ndarray:
    """f(v, s) = log(1 + ReLU(max) exp(w)) from :func:`brute_force_max`; 0 for unscored tokens."""
    m = brute_force_max(model, sentence, context, max_over)
    return np.nan_to_num(np.log1p(np.maximum(m, 0) * np.exp(float(model.w.detach()))), nan=0.0)


@pytest.mark.parametrize("max_over", list(MaxOver))
def test_token_scores_and_top_k_match_brute_force(tiny_model, max_over):
    model = SparcModel(tiny_model.encoder, tiny_model.tokenizer,
                       dataclasses.replace(tiny_model.config, max_over=max_over))
    # Both sentences in one batch, so padding and masking are exercised too.
    ids, seg, _, _ = model.tokenize_pairs(SENTENCES, CONTEXTS)
    with torch.inference_mode():
        hidden, mask = model.hidden_states(ids, seg)
        f = model.token_scores(hidden, mask).numpy()
    encoded = model.encode_batch(SENTENCES, CONTEXTS, top_k=50)
    for i, (s, c) in enumerate(zip(SENTENCES, CONTEXTS)):
        expected = brute_force_scores(model, s, c, max_over)
        np.testing.assert_allclose(f[i], expected, rtol=1e-4, atol=1e-5)
        # float32 in a padded batch against float64 unpadded: the same top 50, except that two
        # tokens whose weights agree within float noise may swap places (at the cut too)
        top = np.argsort(-expected, kind="stable")[:50]
        assert_same_top_k(encoded[i].tokens, encoded[i].weights, model.tokenizer.convert_ids_to_tokens(top.tolist()),
                          expected[top], k=50, what=(max_over, i))
        # f > 0 exactly where the max is positive; a max within float noise of 0 may count either way
        m = brute_force_max(model, s, c, max_over)
        assert int(np.sum(m > 1e-5)) <= encoded[i].nonzero <= int(np.sum(m > -1e-5))
        assert int(np.sum(m > -1e-5)) - int(np.sum(m > 1e-5)) <= 5  # the allowance is a handful of tokens


def test_special_and_unused_tokens_never_scored(tiny_model):
    e = tiny_model.encode_batch(SENTENCES, CONTEXTS, top_k=len(tiny_model.tokenizer))
    for enc in e:
        special = ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]")
        assert not any(t.startswith("[unused") or t in special for t in enc.tokens)
        assert (enc.weights > 0).all() and (np.diff(enc.weights) <= 0).all()


def test_sparsity_scalar_scales_inside_the_log(tiny_model):
    ids, seg, _, _ = tiny_model.tokenize_pairs(SENTENCES[:1], CONTEXTS[:1])
    with torch.inference_mode():
        hidden, mask = tiny_model.hidden_states(ids, seg)
        f_w = tiny_model.token_scores(hidden, mask)
        sparta = SparcModel(tiny_model.encoder, tiny_model.tokenizer, dataclasses.replace(tiny_model.config, w=0.0))
        f_0 = sparta.token_scores(hidden, mask)
    # log(1 + x e^w) from log(1 + x): x = e^f0 - 1
    np.testing.assert_allclose(f_w.numpy(), np.log1p(np.expm1(f_0.numpy()) * np.exp(0.7)), rtol=1e-4, atol=1e-5)


def test_truncation_is_flagged(tiny_model):
    long = "word " * 200
    ids, seg, s_cut, c_cut = tiny_model.tokenize_pairs([long, "short one."], ["context " * 100, "tiny context"])
    assert [len(x) for x in ids][0] == tiny_model.config.max_length
    assert s_cut == [True, False] and c_cut == [True, False]
    assert ids[0][0] == tiny_model.tokenizer.cls_token_id and ids[0][-1] == tiny_model.tokenizer.sep_token_id


def test_encode_stream_keeps_input_order(tiny_model):
    pairs = [(f"Sentence {'long ' * (i % 7)}number {i}.", "") for i in range(40)]
    streamed = list(tiny_model.encode(pairs, batch_size=4, window=3))
    direct = [tiny_model.encode_batch([s], [c])[0] for s, c in pairs]
    # batches of 4 sorted by length against one at a time: other padding, so float noise; the
    # same sentence's top K up to near-ties, which a sentence out of place could not match
    for i, (a, b) in enumerate(zip(streamed, direct)):
        assert_same_top_k(a.tokens, a.weights, b.tokens, b.weights, k=tiny_model.config.top_k, what=i)


def test_model_folder_round_trip(tiny_model, tmp_path):
    folder = tiny_model.save(tmp_path / "copy")
    expected = {"sparc_config.json", "config.json", "model.safetensors", "tokenizer.json"}
    assert expected <= {p.name for p in folder.iterdir()}
    again = SparcModel.load(folder)
    assert again.fingerprint == tiny_model.fingerprint
    assert again.config == tiny_model.config
    a, b = tiny_model.explain(SENTENCES[0]), again.explain(SENTENCES[0])
    assert [t for t, _ in a] == [t for t, _ in b]


def test_missing_folder_is_a_model_error(tmp_path):
    from sparc_es.errors import ModelError

    with pytest.raises(ModelError, match="no such model folder"):
        SparcModel.load(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match="no model.safetensors"):
        SparcModel.load(tmp_path / "empty")


def test_default_model_is_the_shipped_trained_one():
    from sparc_es.model.checkpoint import SHIPPED_MODEL

    model = SparcModel.load()
    assert (SHIPPED_MODEL / "MODEL_CARD.md").is_file()
    assert sum(f.stat().st_size for f in SHIPPED_MODEL.iterdir()) <= 50e6
    assert model.config.base_model["name"] == "splade-bert-tiny" and model.config.w != 0.0
    assert str(model.encoder.get_input_embeddings().weight.dtype) == "torch.float32"  # fp16 on disk
    top = [t for t, _ in model.explain("The capital of France is Paris.", top=10)]
    assert {"capital", "paris", "france"} <= set(top)


def test_untrained_minilm_when_no_model_ships(monkeypatch, tmp_path):
    from sparc_es.model import checkpoint

    monkeypatch.setattr(checkpoint, "SHIPPED_MODEL", tmp_path)
    assert checkpoint.resolve_model_path("default") == checkpoint.default_base_path()
    assert checkpoint.resolve_model_path("splade-bert-tiny") == checkpoint.known_base_path("splade-bert-tiny")


def _brute_mlm_scores(model, sentence: str, context: str):
    """f(v, s) written out from the formula: LayerNorm(gelu(dense(H))) . E^T + b, max over the
    sentence's positions, log(1 + ReLU(.) exp(w)), times u_v."""
    import torch

    ids, seg, _, _ = model.tokenize_pairs([sentence], [context])
    with torch.no_grad():
        hidden, mask = model.hidden_states(ids, seg)
        h = hidden[0][mask[0]]
        t = model.head.transform
        h = torch.nn.functional.layer_norm(torch.nn.functional.gelu(t.dense(h)), (h.shape[-1],),
                                           t.LayerNorm.weight, t.LayerNorm.bias, t.LayerNorm.eps)
        m = (h @ model.embeddings.T).max(dim=0).values + model.head.bias
        f = torch.log1p(torch.relu(m) * torch.exp(model.w))
        if hasattr(model.head, "log_u"):
            f = f * model.head.log_u.exp()
    return f * model.scorable


def test_mlm_head_scores_follow_the_formula_and_survive_save_and_load(tiny_mlm_dir, tmp_path):
    import torch

    model = SparcModel.load(tiny_mlm_dir, head="mlm", token_weights=True, top_k=40)
    with torch.no_grad():
        model.head.log_u.normal_(0, 0.3)  # as if trained
    sentence, context = "The capital of France is Paris.", "France is a country in Europe."
    expected = _brute_mlm_scores(model, sentence, context)
    e = model.encode_batch([sentence], [context])[0]
    top = expected.topk(40)
    kept = top.values > 0
    assert_same_top_k(e.tokens, e.weights, model.tokenizer.convert_ids_to_tokens(top.indices[kept].tolist()),
                      top.values[kept].numpy(), k=40, rtol=1e-5, atol=1e-6)

    model.save(tmp_path / "m")
    again = SparcModel.load(tmp_path / "m")
    assert again.config.head.value == "mlm" and again.config.token_weights
    assert again.fingerprint != SparcModel.load(tiny_mlm_dir, head="mlm", token_weights=True).fingerprint  # u counts
    assert again.encode_batch([sentence], [context])[0].tokens == e.tokens
    dot = SparcModel.load(tiny_mlm_dir)  # a plain checkpoint is read as the paper's dot product
    assert dot.head is None and dot.fingerprint != model.fingerprint


def test_mlm_head_needs_one(tiny_model_dir):
    from sparc_es.errors import ModelError

    with pytest.raises(ModelError, match="needs the checkpoint's BERT MLM head"):
        SparcModel.load(tiny_model_dir, head="mlm")


def test_passage_expansion_adds_the_passage_scores_before_the_cut(tiny_model_dir, tiny_mlm_dir, tmp_path):
    import dataclasses

    import torch

    model = SparcModel.load(tiny_model_dir)
    model.config = dataclasses.replace(model.config, passage_weight=1.5, passage_encoder="passage",
                                       passage_max_length=64)
    model.passage_model = SparcModel.load(tiny_mlm_dir, head="mlm")
    passage = "France is a country in Europe. The capital of France is Paris. It has many museums."
    pairs = [("The capital of France is Paris.", passage), ("It has many museums.", passage),
             ("A sentence on its own.", "")]
    with torch.no_grad():
        expected = []
        for s, c in pairs:
            ids, seg, _, _ = model.tokenize_pairs([s], [c])
            f = model.token_scores(*model.hidden_states(ids, seg))[0]
            expected.append(f + 1.5 * model.passage_scores([c or s])[0])  # no token weights here
    streamed = list(model.encode(pairs, batch_size=2, window=1))  # passages shared across batches of a window
    for i, (e, f) in enumerate(zip(streamed, expected)):  # batched against one at a time: float noise only
        top = f.topk(model.config.top_k)
        kept = top.values > 0
        assert_same_top_k(e.tokens, e.weights, model.tokenizer.convert_ids_to_tokens(top.indices[kept].tolist()),
                          top.values[kept].numpy(), k=model.config.top_k, what=i)

    model.save(tmp_path / "pm")
    assert (tmp_path / "pm" / "passage" / "sparc_config.json").is_file()
    again = SparcModel.load(tmp_path / "pm")
    assert again.passage_model is not None and again.fingerprint != SparcModel.load(tiny_model_dir).fingerprint
    for i, (a, b) in enumerate(zip(again.encode(pairs), streamed, strict=True)):  # one batch against batches of 2
        assert_same_top_k(a.tokens, a.weights, b.tokens, b.weights, k=again.config.top_k, what=i)


def test_query_encoder_counts_weights_and_rounds_for_lucene(tiny_model):
    from sparc_es.model.query import QueryEncoder

    plain = tiny_model.queries
    assert plain.bag("Paris, Paris and France") == {"paris": 2, ",": 1, "and": 1, "france": 1}
    weighted = QueryEncoder(tiny_model.tokenizer, {"paris": 1.5, "and": 0.2})
    assert weighted.bag("Paris, Paris and France") == {"paris": 3.0, ",": 1.0, "and": 0.2, "france": 1.0}
    assert weighted.encode("Paris and France") == {"paris": 2, "france": 1}  # Lucene: integers, 0 dropped
    assert plain.bag("word " * 3000) == {"word": 3000}  # no model runs: no 512-token limit


def test_library_settings_are_validated():
    from sparc_es.errors import ModelError, SparcError
    from sparc_es.model import SparcConfig
    from sparc_es.training.adapt import AdaptConfig

    with pytest.raises(ModelError, match="top-K"):
        SparcConfig(top_k=0)
    with pytest.raises(ModelError, match="unknown max_over .everything.; choose from sentence, all"):
        SparcConfig(max_over="everything")
    with pytest.raises(SparcError, match="mask probability"):
        AdaptConfig(mask_probability=1.5)


def test_a_misspelt_override_names_the_config_fields(tiny_model_dir):
    """``SparcModel.load(topk=10)`` was a bare TypeError from the dataclass."""
    from sparc_es.errors import ModelError
    from sparc_es.model import SparcModel

    with pytest.raises(ModelError, match="no SPARC config field 'topk'; the fields are w, top_k, "):
        SparcModel.load(tiny_model_dir, topk=10)


def test_explain_refuses_what_it_cannot_explain(tiny_model):
    """A blank sentence gave unrelated tokens, top=0 about a hundred and top=-1 a torch RuntimeError;
    a sentence that is no string was a ValueError from inside transformers."""
    from sparc_es.errors import ModelError

    for args, says in [(("",), "empty sentence"), ((None,), "the sentence to explain is text, not NoneType"),
                       (("Paris is in France.", "", 0), "top is how many tokens to show, 1 or more, not 0"),
                       (("Paris is in France.", "", -1), "not -1"), (("Paris.", 3), "the context to explain is text")]:
        with pytest.raises(ModelError, match=says):
            tiny_model.explain(*args)
    assert len(tiny_model.explain("Paris is in France.", top=3)) == 3
