"""Comparing float results of one input computed two ways, robustly across CPUs and thread counts.

The same sentence encoded in another batch (other padding, another row order), with another
thread count or on another CPU (AVX2 vs AVX-512 kernels, MKL's choice of blocking) sums its
float32 terms in another order and comes out a few units in the last place different. Such
results are compared here as:

* values: close within float32 noise (``RTOL``, ``ATOL``, generous next to the ~1e-7 seen);
* top-K lists: rank by rank the same weights; a token kept by only one side must have sat at the
  other side's cut (within the tolerance of its K-th weight), so near-ties may fall either way;
* integer impacts ``round(w * factor)``: the same, except one step apart where ``w * factor`` is
  within the noise of a .5 rounding boundary, and a token present on one side only where it sat at
  the other's cut.

Each function counts the places where the two sides differ and returns the count; every
difference it lets through is one that float noise explains, so a real bug (another sentence,
another formula, another rounding) still fails.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

RTOL = 1e-4
ATOL = 1e-5


def tol(value: float, rtol: float = RTOL, atol: float = ATOL) -> float:
    return atol + rtol * abs(value)


def close(a: float, b: float, rtol: float = RTOL, atol: float = ATOL) -> bool:
    return abs(a - b) <= tol(max(abs(a), abs(b)), rtol, atol)


def assert_same_top_k(tokens_a: Sequence[str], weights_a, tokens_b: Sequence[str], weights_b, k: int | None = None,
                      rtol: float = RTOL, atol: float = ATOL, what: object = "") -> int:
    """Two top-K token lists (best first, with their weights) of one sentence computed two ways.

    ``k`` is the K both were cut at (None: both lists were cut); a list shorter than ``k`` kept every
    positive token, so its cut is 0. Returns the number of ranks that hold different tokens.
    """
    wa = [float(w) for w in weights_a]
    wb = [float(w) for w in weights_b]
    assert len(tokens_a) == len(wa) and len(tokens_b) == len(wb), what
    a, b = dict(zip(tokens_a, wa)), dict(zip(tokens_b, wb))
    assert len(a) == len(wa) and len(b) == len(wb), ("a token listed twice", what)
    for rank, (x, y) in enumerate(zip(wa, wb)):
        assert close(x, y, rtol, atol), (what, "rank", rank, tokens_a[rank], x, tokens_b[rank], y)
    for extra in wa[len(wb):] + wb[len(wa):]:  # only a weight at 0 can be kept by one side alone
        assert close(extra, 0.0, rtol, atol), (what, "extra weight", extra)
    for t in a.keys() & b.keys():
        assert close(a[t], b[t], rtol, atol), (what, t, a[t], b[t])
    for mine, other, other_weights in ((a, b, wb), (b, a, wa)):
        cut = other_weights[-1] if other_weights and (k is None or len(other_weights) >= k) else 0.0
        for t in mine.keys() - other.keys():
            assert mine[t] <= cut + tol(cut, rtol, atol), (what, t, mine[t], "is not at the other side's cut", cut)
    return sum(x != y for x, y in zip(tokens_a, tokens_b)) + abs(len(wa) - len(wb))


def _one_step_at_a_boundary(impact: int, weight: float, factor: float, rtol: float, atol: float) -> bool:
    """Whether ``impact`` is what ``round(w * factor)`` gives for some w within noise of ``weight``."""
    x, slack = weight * factor, factor * tol(weight, rtol, atol)
    return math.floor(x - slack + 0.5) <= impact <= math.floor(x + slack + 0.5)


def assert_impacts_match_floats(vector: dict[str, int], tokens: Sequence[str], weights, factor: float,
                                cut: float | None = None, k: int | None = None, rtol: float = RTOL,
                                atol: float = ATOL, what: object = "") -> int:
    """Stored integer impacts of one sentence against the float weights of another computation of it.

    ``cut``: the weight at which the top-K cut was made (default: the last of ``weights`` when there
    are ``k`` of them, else 0); pass it where weights were added after the cut (the lexical term).
    Returns the number of tokens whose impact is not ``round(w * factor)`` of these floats.
    """
    floats = {t: float(w) for t, w in zip(tokens, weights)}
    assert len(floats) == len(tokens), what
    if cut is None:
        cut = float(weights[-1]) if len(tokens) and (k is None or len(tokens) >= k) else 0.0
    differ = 0
    for t in vector.keys() | floats.keys():
        w = floats.get(t)
        got = vector.get(t, 0)
        if w is None:  # cut from these floats: its weight was at most (within noise) the cut
            ok = got <= math.floor((cut + tol(cut, rtol, atol)) * factor + 0.5)
        elif t not in vector:  # at the other side's cut, or rounded to 0 there
            ok = _one_step_at_a_boundary(0, w, factor, rtol, atol) or w <= cut + 2 * tol(cut, rtol, atol)
        else:
            ok = _one_step_at_a_boundary(got, w, factor, rtol, atol)
        assert ok, (what, t, "impact", got, "float", w, "factor", factor, "cut", cut)
        differ += got != (round(w * factor) if w is not None else 0)
    return differ


def assert_same_impacts(va: dict[str, int], vb: dict[str, int], what: object = "") -> int:
    """Two integer impact vectors of one sentence, computed two ways, without their floats.

    An impact may be one step off (its float sat at a .5 boundary); a token present on one side
    only must have sat at the other's cut, so its impact is at most one above the other's
    smallest. Returns the number of tokens that differ.
    """
    for mine, other in ((va, vb), (vb, va)):
        floor = min(other.values(), default=0)
        for t, v in mine.items():
            if t in other:
                assert abs(v - other[t]) <= 1, (what, t, v, other[t])
            else:
                assert v <= floor + 1, (what, t, v, "kept on one side only, above the other's cut", floor)
    return sum(va.get(t, 0) != vb.get(t, 0) for t in va.keys() | vb.keys())


def assert_same_records(lines_a: Sequence[bytes | str], lines_b: Sequence[bytes | str], max_share: float = 0.02,
                        what: object = "") -> int:
    """Two encoded folders' ``vectors.jsonl`` lines for the same corpus, written from different batches.

    Records must name the same sentences in the same order; a line that is not byte for byte the
    same may differ only as float noise allows (:func:`assert_same_impacts`, the count of f > 0
    by a token or two), its own counts must agree with its vector, and at most ``max_share`` of
    all impacts may differ. Returns the number of lines that are not identical.
    """
    assert len(lines_a) == len(lines_b), what
    differ_lines = differ_tokens = postings = 0
    for la, lb in zip(lines_a, lines_b):
        ra, rb = json.loads(la), json.loads(lb)
        assert ra["id"] == rb["id"], what
        postings += len(ra["vector"])
        if la == lb:
            continue
        differ_lines += 1
        rest_a = {key: v for key, v in ra.items() if key not in ("vector", "weights", "stats")}
        rest_b = {key: v for key, v in rb.items() if key not in ("vector", "weights", "stats")}
        assert rest_a == rest_b, (what, ra["id"])
        differ_tokens += assert_same_impacts(ra["vector"], rb["vector"], (what, ra["id"]))
        if "weights" in ra or "weights" in rb:
            assert_same_top_k(list(ra["weights"]), list(ra["weights"].values()), list(rb["weights"]),
                              list(rb["weights"].values()), what=(what, ra["id"]))
        for r in (ra, rb):
            nonzero, truncated_sentence, truncated_context, n, total = r["stats"]
            assert (n, total) == (len(r["vector"]), sum(r["vector"].values())), (what, r["id"])
        assert ra["stats"][1:3] == rb["stats"][1:3], (what, ra["id"])
        assert abs(ra["stats"][0] - rb["stats"][0]) <= 2, (what, ra["id"], "f > 0 counts",
                                                           ra["stats"][0], rb["stats"][0])
    assert differ_tokens <= max(2, max_share * postings), (what, differ_tokens, "of", postings, "impacts differ")
    return differ_lines
