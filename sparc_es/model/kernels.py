"""The vocabulary-wide max-products of f(v, s): the hot path of encoding, three ways.

Encoding a sentence computes, for every vocabulary token v, ``m_v = max_i H_i . e_v`` over the
sentence's valid positions (and again over its passage's positions), and stores only what
``relu(m_v + b_v)`` lets through: with the shipped model about 1,200 of 30,522 tokens are
positive for a sentence and about 200 for a passage. Two drop-in kernels:

* :func:`reference_max_product` -- the first implementation: one product per group of positions
  (a positions x 30,522 float32 matrix, up to 250 MB), then ``index_reduce``; kept as the
  benchmark's and the tests' reference (``SPARC_ES_KERNEL=reference``).
* :func:`masked_max_product` -- the same contract (float32, (batch, vocab) maxima), blocked over
  the vocabulary so the (positions x block) logits stay in cache. Same float32 products, same
  maxima: bit-identical to the reference on the inputs measured, and differentiable (training
  uses it). ``SPARC_ES_KERNEL=blocked``.
* :func:`relu_max_product` -- ``relu(m + bias)`` for every kept token, float32 and exact, computed
  by a bfloat16 *screen*: a bf16 product (twice the float32 throughput with AVX512_BF16/AMX) gives
  each m within a proven bound; tokens whose upper bound cannot clear ``-bias`` are exactly 0 after
  the relu, and the few others (about 5% of the vocabulary) are recomputed in float32. Where bf16
  is not native (see :func:`bf16_native`) it is the float32 path above, so never slower than it.
  The default (``SPARC_ES_KERNEL=auto``).

``scripts/bench.py`` times encoding with each kernel side by side (the ``kernels`` rows);
``scripts/studies/kernels_study.py`` measured them alone, with parity figures (``bench/kernels-study.json``).
"""

from __future__ import annotations

import os
import warnings

import torch

__all__ = ["KERNELS", "bf16_native", "kernel", "masked_max_product", "masked_max_product_bf16",
           "reference_max_product", "relu_max_product", "BF16_UNIT", "bf16_error_factors"]

#: Vocabulary rows per block: (positions x VOCAB_BLOCK) float32 logits, at most 16 MB with
#: ``POSITIONS`` rows, mostly in cache. 2,048 measured best for float32, 1,024-2,048 for bf16.
VOCAB_BLOCK = 2048
#: At most this many packed positions go into one product (as in ``_masked_max_product``).
POSITIONS = 2048
#: Unit roundoff of bfloat16 (8 significant bits, round to nearest even).
BF16_UNIT = 2.0 ** -8
_F32_UNIT = 2.0 ** -24


KERNELS = ("auto", "blocked", "reference")


def kernel() -> str:
    """Which kernel :func:`relu_max_product` runs: ``SPARC_ES_KERNEL`` (default ``auto``)."""
    chosen = os.environ.get("SPARC_ES_KERNEL", "auto").strip() or "auto"
    if chosen not in KERNELS:
        raise ValueError(f"SPARC_ES_KERNEL={chosen!r}; choose from {', '.join(KERNELS)}")
    return chosen


def reference_max_product(hidden, mask, E, positions: int = POSITIONS):
    """``max_i hidden[b, i] . E^T`` over the positions where ``mask`` is set, for each row b.

    The valid positions of several sentences go into one product (a few large matrix products
    run about 1.4 times faster than one small product per sentence), at most ``positions`` rows at
    a time so memory stays bounded; ``index_reduce`` takes each sentence's max and back-propagates.
    """
    lengths = mask.sum(dim=1).tolist()
    packed = hidden[mask]
    out, start, first = [], 0, 0
    for b in range(len(lengths) + 1):
        if b < len(lengths) and (b == first or sum(lengths[first: b + 1]) <= positions):
            continue
        n = sum(lengths[first:b])
        logits = packed[start: start + n] @ E.T
        rows = torch.repeat_interleave(torch.arange(b - first, device=logits.device),
                                       torch.tensor(lengths[first:b], device=logits.device))
        out.append(_segment_max(logits, rows, b - first))
        start, first = start + n, b
    return torch.cat(out)


def bf16_native() -> bool:
    """Whether the bf16 screen pays here: the CPU has AVX512_BF16 or AMX (native bf16 dot
    products), and oneDNN, which torch's bf16 matmul uses, is there and accepts bf16.

    Elsewhere (AVX2-only or AVX-512 without BF16 CPUs) bf16 products are emulated, so
    :func:`relu_max_product` keeps to float32. ``SPARC_ES_BF16=0`` turns the screen off, ``=1``
    forces it (for tests: results are exact either way, only speed differs).
    """
    forced = os.environ.get("SPARC_ES_BF16", "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    cpu = getattr(torch, "cpu", None)
    native = any(getattr(cpu, name, lambda: False)()
                 for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"))
    try:
        return bool(native and torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def bf16_error_factors(dim: int) -> tuple[float, float]:
    """(c1, c3) with ``|m~ - m| <= c1 * max_i ||h_i|| * ||e|| + c3 * |m~|`` for the bf16 screen.

    Derivation, for one position h and token e of dimension d, u = 2^-8 (bf16), v = 2^-24:
    rounding to bf16 (round to nearest even; torch's conversion and oneDNN's both do) gives
    h^ = h(1 + a), e^ = e(1 + b), |a|, |b| <= u, so |h^ e^ - h e| <= (2u + u^2)|h||e| per
    coordinate. A product of two 8-bit significands is exact in float32 and the products are
    summed in float32 (oneDNN's bf16 kernels and vdpbf16ps accumulate in fp32, in any order),
    which adds at most gamma_d * sum|h^ e^| with gamma_d = d v / (1 - d v). With Cauchy-Schwarz,
    sum_j |h_j e_j| <= ||h|| ||e||, the fp32 accumulator acc satisfies
    |acc - h.e| <= (2u + u^2 + gamma_d (1 + u)^2) ||h|| ||e||. The result is rounded to bf16
    once; rounding is monotone, so the max over positions of the rounded values is the rounding
    of the max accumulator, within u/(1 - u) |m~| of it. The max over positions of quantities
    each within c1 ||h_i|| ||e|| of the exact ones is within c1 max_i ||h_i|| ||e|| of the exact
    max. The float32 reference itself is within gamma_d ||h|| ||e|| of the exact value, which c1
    also adds, so the bound holds against the float32 product too. A 1/1024 relative margin
    covers the float32 arithmetic that evaluates the bound; flushed denormals (|x| < 2^-126)
    are far below it.
    """
    u, v = BF16_UNIT, _F32_UNIT
    gamma = dim * v / (1 - dim * v)
    c1 = (2 * u + u * u + gamma * (1 + u) ** 2 + gamma) * (1 + 2.0 ** -10)
    c3 = u / (1 - u) * (1 + 2.0 ** -10)
    return c1, c3


def _groups(lengths: list[int], positions: int) -> list[tuple[int, int, int, int]]:
    """Consecutive rows whose valid positions add up to at most ``positions`` (a longer row goes
    alone): (first row, end row, first packed position, end packed position)."""
    out, first, start, n = [], 0, 0, 0
    for b, length in enumerate(lengths):
        if b > first and n + length > positions:
            out.append((first, b, start, start + n))
            first, start, n = b, start + n, 0
        n += length
    if lengths:
        out.append((first, len(lengths), start, start + n))
    return out


def _segment_max(logits, rows, count: int):
    """Per-row max of ``logits`` (positions x block) over the positions of each of ``count`` rows."""
    init = torch.full((count, logits.shape[1]), float("-inf"), dtype=logits.dtype, device=logits.device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "index_reduce() is in beta"
        return init.index_reduce(0, rows, logits, "amax")


def _blocked_max(packed, E, lengths: list[int], positions: int, block: int):
    """The max-product over packed positions, by groups of rows and blocks of the vocabulary."""
    out = []
    for first, end, start, stop in _groups(lengths, positions):
        rows = torch.repeat_interleave(torch.arange(end - first, device=packed.device),
                                       torch.tensor(lengths[first:end], device=packed.device))
        x = packed[start:stop]
        out.append(torch.cat([_segment_max(x @ E[v: v + block].T, rows, end - first)
                              for v in range(0, E.shape[0], block)], dim=1))
    return torch.cat(out) if len(out) != 1 else out[0]


def masked_max_product(hidden, mask, E, positions: int = POSITIONS, block: int = VOCAB_BLOCK):
    """``max_i hidden[b, i] . E^T`` over the positions where ``mask`` is set, for each row b.

    Drop-in for ``model._masked_max_product``: float32 (batch, vocab) maxima, -inf for a row
    without valid positions, differentiable (gradients equal the old function's up to float32
    summation order: the backward sums over vocabulary blocks). The valid positions are packed (at most
    ``positions`` per product) and the vocabulary taken ``block`` rows at a time, so each
    product's output (positions x block) stays in cache and goes straight into the per-row max.
    The products are the same float32 ones, so the maxima are too (bit-identical on every input
    the study measured).
    """
    lengths = mask.sum(dim=1).tolist()
    return _blocked_max(hidden[mask], E, lengths, positions, block)


_TABLES: dict = {}


def _vocab_tables(E):
    """E in bf16 and each row's norm, kept for the last E seen: the same tensor object (held
    here, so its memory cannot be reused by another one), storage and version (in-place updates
    bump it); anything else rebuilds them (about 10 ms for 30,522 x 128)."""
    key = (E.data_ptr(), E._version, tuple(E.shape), E.dtype, E.device)
    if _TABLES.get("E") is not E or _TABLES.get("key") != key:
        with torch.no_grad():
            _TABLES.update(E=E, key=key, bf16=E.detach().to(torch.bfloat16).contiguous(),
                           norm=E.detach().float().norm(dim=1))
    return _TABLES["bf16"], _TABLES["norm"]


def masked_max_product_bf16(hidden, mask, E_bf16, positions: int = POSITIONS, block: int = VOCAB_BLOCK):
    """The bf16 screen's product: (m~, h_max) with m~ (batch, vocab) float32 the max over valid
    positions of the bf16 products, and h_max (batch,) each row's largest position norm
    (float32), so that ``|m~ - m| <= c1 * h_max * ||e_v|| + c3 * |m~|`` with
    ``(c1, c3) = bf16_error_factors(d)``. No gradient."""
    with torch.no_grad():
        lengths = mask.sum(dim=1).tolist()
        packed = hidden[mask].float()
        norms = packed.norm(dim=1)
        rows = torch.repeat_interleave(torch.arange(len(lengths), device=packed.device),
                                       torch.tensor(lengths, device=packed.device))
        h_max = _segment_max(norms[:, None], rows, len(lengths))[:, 0].clamp(min=0)  # 0: no positions
        m = _blocked_max(packed.to(torch.bfloat16), E_bf16, lengths, positions, block)
        return m.float(), h_max


def relu_max_product(hidden, mask, E, bias=None, keep=None, *, screen: bool | None = None):
    """``relu(masked_max_product(hidden, mask, E) + bias)``, exact, faster where bf16 is native.

    ``bias`` is per token (vocab,) or None; ``keep`` (optional bool (vocab,)): tokens whose value
    the caller multiplies by 0 anyway (unscorable ones), returned as 0 without being computed.
    :func:`kernel` chooses the path (``reference`` and ``blocked`` are float32 throughout).

    Exactness: with ``screen`` (default: :func:`bf16_native`, CPU tensors, no gradient), m~ and
    the bound of :func:`bf16_error_factors` give an upper bound ``hi >= m + bias`` for each
    (row, token), evaluated with a margin for its own float32 rounding. Where ``hi <= 0`` the
    exact value is ``relu(m + bias) = 0``, which is what is returned. Every other kept token (on
    the default model about 1,500 of 30,522 per sentence, 300 per passage) is recomputed from
    that row's float32 positions and the float32 E, so every returned value is a float32
    ``relu(max_i h_i . e_v + b_v)``: the same products as the float32 path, summed by the same
    library. The one difference from the float32 path: the recomputation's small products may sum
    a dot product in another order than the big ones, a last-bit difference (the study saw at
    most 1.6e-6 in f with 2 threads, none with 1; no top-K set, nonzero count or round(5 f)
    changed). Downstream (log1p, passage term, u_v, top-K, the nonzero count) is therefore
    unchanged. Without the screen it is the float32 path.

    Cost: the bf16 product (about half the float32 one's time), an elementwise bound over
    (batch, vocab), and a float32 product of each row's positions with its active tokens'
    embeddings (about 5% of the vocabulary on the default model; the screen would save little on
    a model whose relu lets most tokens through).
    """
    method = kernel()
    if screen is None:
        screen = (method == "auto" and hidden.device.type == "cpu"
                  and not (torch.is_grad_enabled() and hidden.requires_grad) and bf16_native())
    if not screen:
        product = reference_max_product if method == "reference" else masked_max_product
        m = product(hidden, mask, E)
        out = torch.relu(m if bias is None else m + bias)
        return out if keep is None else out * keep.to(out.dtype)
    if bias is None:
        bias = torch.zeros(E.shape[0], dtype=torch.float32, device=E.device)
    with torch.no_grad():
        E32 = E.float()
        Eb, e_norm = _vocab_tables(E)
        approx, h_max = masked_max_product_bf16(hidden, mask, Eb)
        c1, c3 = bf16_error_factors(E.shape[1])
        tiny = 2.0 ** -18  # covers the float32 rounding of the bound's own evaluation
        slack = (c1 * h_max)[:, None] * e_norm[None, :]
        slack += (c3 + tiny) * approx.abs()
        slack += tiny * bias.abs()[None, :]
        active = approx + bias + slack > 0
        if keep is not None:
            active &= keep[None, :]
        lengths = mask.sum(dim=1).tolist()
        active &= torch.tensor(lengths, device=active.device)[:, None] > 0  # no positions: relu(-inf) = 0
        out = torch.zeros_like(approx)
        packed = hidden[mask].float()
        start = 0
        for b, n in enumerate(lengths):
            cols = active[b].nonzero().squeeze(1)
            if n and len(cols):
                m = (packed[start: start + n] @ E32[cols].T).amax(dim=0)
                out[b, cols] = torch.relu(m + bias[cols])
            start += n
        return out
