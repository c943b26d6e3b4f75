"""The vocabulary-wide max-product kernels store the same weights (``sparc_es.model.kernels``).

The bf16 screen is forced on (``screen=True``) so it runs on every CPU: where bf16 is not native
it is only slower. Its exactness argument (a proven error bound, then a float32 recomputation of
every token that could be positive) makes the results equal to the float32 reference up to the
order of a float32 sum, which is what these tests allow.
"""

from __future__ import annotations

import pytest

from tolerance import assert_same_top_k

SENTENCES = ["The quick brown fox jumps over the lazy dog near the river bank.",
             "Lucene stores integer impacts as term frequencies in its postings.",
             "Pass --overwrite to replace an existing output folder.", "Paris is the capital of France.",
             "A very short one.", "Elasticsearch keeps nine significant bits of a rank feature's value."]


@pytest.fixture(scope="module")
def shipped():
    from sparc_es.model import SparcModel

    return SparcModel.load()


def _inputs(model, sentences):
    import torch

    ids, seg, _, _ = model.tokenize_pairs(sentences, ["A paragraph around it."] * len(sentences))
    with torch.no_grad():
        hidden, mask = model.hidden_states(ids, seg)
        hidden = model.head.transform(hidden)
    return hidden, mask


@pytest.mark.parametrize("passages", [False, True])
def test_the_three_kernels_agree(shipped, passages):
    import torch

    from sparc_es.model.kernels import masked_max_product, reference_max_product, relu_max_product

    model = shipped.passage_model if passages else shipped
    hidden, mask = _inputs(model, SENTENCES)
    E, bias, keep = model.embeddings.detach(), model.head.bias.detach(), model.scorable
    with torch.no_grad():
        reference = torch.relu(reference_max_product(hidden, mask, E) + bias) * keep
        blocked = torch.relu(masked_max_product(hidden, mask, E) + bias) * keep
        screened = relu_max_product(hidden, mask, E, bias, keep, screen=True)
    for row in range(len(SENTENCES)):
        ref = reference[row]
        for other in (blocked[row], screened[row]):
            assert torch.allclose(other, ref, rtol=1e-5, atol=1e-6)  # zeros included: relu(m + b) <= 0 stays 0
        k = 200
        top = torch.topk(ref, k)
        for other in (blocked[row], screened[row]):
            mine = torch.topk(other, k)
            assert_same_top_k(mine.indices.tolist(), mine.values.tolist(), top.indices.tolist(), top.values.tolist(),
                              k, what=row)


def test_the_screen_recomputes_only_what_can_be_positive(shipped):
    import torch

    from sparc_es.model.kernels import _vocab_tables, bf16_error_factors, masked_max_product_bf16, reference_max_product

    hidden, mask = _inputs(shipped, SENTENCES)
    E, bias = shipped.embeddings.detach(), shipped.head.bias.detach()
    Eb, norms = _vocab_tables(E)
    approx, h_max = masked_max_product_bf16(hidden, mask, Eb)
    with torch.no_grad():
        exact = reference_max_product(hidden, mask, E)
    c1, c3 = bf16_error_factors(E.shape[1])
    bound = (c1 * h_max)[:, None] * norms[None, :] + c3 * approx.abs()
    assert bool(((approx - exact).abs() <= bound).all())  # the proven bound holds on real data
    candidates = (approx + bias + bound > 0).float().mean()  # and is tight enough to be worth it
    assert candidates < 0.2


def test_training_gradients_through_the_blocked_kernel_equal_the_reference(shipped):
    from sparc_es.model.kernels import masked_max_product, reference_max_product

    hidden, mask = _inputs(shipped, SENTENCES[:3])
    E = shipped.embeddings.detach()[:3000]
    grads = []
    for product in (reference_max_product, masked_max_product):
        h = hidden.clone().requires_grad_(True)
        product(h, mask, E).clamp(min=0).sum().backward()
        grads.append(h.grad)
    scale = float(grads[0].norm())
    assert float((grads[0] - grads[1]).norm()) <= 1e-5 * scale


def test_encoding_with_each_kernel_stores_the_same(shipped, monkeypatch):
    from sparc_es.layout.records import quantize

    pairs = [(s, "A paragraph around it.") for s in SENTENCES]
    stored = {}
    for method in ("reference", "blocked", "auto"):
        monkeypatch.setenv("SPARC_ES_KERNEL", method)
        stored[method] = [quantize(e.tokens, e.weights, 5.0) for e in shipped.encode(pairs)]
    for method in ("blocked", "auto"):
        for mine, ref in zip(stored[method], stored["reference"]):
            assert mine.keys() == ref.keys() or len(mine.keys() ^ ref.keys()) <= 2
            assert sum(abs(mine.get(t, 0) - ref.get(t, 0)) for t in ref) <= 2
