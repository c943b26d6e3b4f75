#!/usr/bin/env python
"""Study: faster vocabulary-wide max-products for encoding (issue 31, part 3).

Builds real inputs with the shipped default model (SQuAD dev sentences with their paragraphs,
windows of 256 pairs as ``SparcModel.encode`` forms them: distinct passages by 32, then
length-sorted sentence batches of 32), then times, from the transformed hidden states to each
sentence's top-K, three ways of computing the products:

* ``today``      -- ``_masked_max_product`` as in the model (one product, index_reduce);
* ``fp32-block`` -- :func:`sparc_es.model.kernels.masked_max_product` (vocabulary blocks of 2,048);
* ``bf16-screen``-- :func:`sparc_es.model.kernels.relu_max_product` (bf16 product + proven bound, float32
  recomputation of the tokens the relu may let through).

Candidates run interleaved (ABCABC...) with 1 and 2 torch threads; medians per batch of 32
sentences plus their passages' share. Parity: top-K token sets (positive weights), max |f|
difference, impacts ``round(5 f)`` that differ. Writes ``bench/kernels-study.json``.

    .venv/bin/python scripts/studies/kernels_study.py                  # 1 timing window, 2 parity windows
    .venv/bin/python scripts/studies/kernels_study.py --emulate avx2   # fp32 fallback with MKL/ATen held to AVX2
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

EMULATE = {  # environment that holds the libraries to an older instruction set (set before torch loads)
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "avx512-no-bf16": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"},
}


def reference_product():
    """The first implementation, kept as the reference (``sparc_es.model.kernels.reference_max_product``)."""
    from sparc_es.model.kernels import reference_max_product

    return reference_max_product


def build_inputs(windows: int, data=None):
    """Per window: passage batches (transformed hidden, mask), sentence batches (transformed hidden,
    mask, each sentence's passage row), and the scoring parameters."""
    import torch

    from sparc_es.evaluation.evalsets import squad_dev_sentences
    from sparc_es.model import SparcModel

    m = SparcModel.load()
    pm = m.passage_model or m
    sents = list(itertools.islice(squad_dev_sentences(data), 256 * windows))
    pairs = [(s.text, s.context) for s in sents]
    text = lambda s, c: c or s  # noqa: E731  (model.passage_text)
    out = []
    with torch.inference_mode():
        for w in range(0, len(pairs), 256):
            win = pairs[w: w + 256]
            texts = sorted(dict.fromkeys(text(s, c) for s, c in win), key=len)
            row = {t: i for i, t in enumerate(texts)}
            pb = []
            for b in range(0, len(texts), 32):
                chunk = texts[b: b + 32]
                ids, seg, _, _ = pm.tokenize_pairs(chunk, [""] * len(chunk), m.config.passage_max_length)
                h, mk = pm.hidden_states(ids, seg)
                pb.append((pm.head.transform(h).contiguous(), mk))
            order = sorted(range(len(win)), key=lambda i: len(win[i][0]) + len(win[i][1]))
            sb = []
            for b in range(0, len(win), 32):
                idx = order[b: b + 32]
                ids, seg, _, _ = m.tokenize_pairs([win[i][0] for i in idx], [win[i][1] for i in idx])
                h, mk = m.hidden_states(ids, seg)
                sb.append((m.head.transform(h).contiguous(), mk, torch.tensor([row[text(*win[i])] for i in idx])))
            out.append({"passages": pb, "sentences": sb, "n_passages": len(texts),
                        "sentence_positions": sum(int(x[1].sum()) for x in sb),
                        "passage_positions": sum(int(x[1].sum()) for x in pb)})
    P = dict(E=m.embeddings.detach(), bias=m.head.bias.detach(), w=float(m.w), u=m.head.log_u.detach().exp(),
             keep=m.scorable, lam=m.config.passage_weight, EP=pm.embeddings.detach(), biasP=pm.head.bias.detach(),
             wP=float(pm.w), keepP=pm.scorable, k=m.config.top_k)
    return out, P


def make_methods():
    from sparc_es.model import kernels

    ref = reference_product()
    # Each: (hidden, mask, E, bias, keep) -> relu(m + bias) where kept (what token_scores needs).
    return {
        "today": lambda h, mk, E, b, keep: torch.relu(ref(h, mk, E) + b) * keep,
        "fp32-block": lambda h, mk, E, b, keep: torch.relu(kernels.masked_max_product(h, mk, E) + b) * keep,
        "bf16-screen": lambda h, mk, E, b, keep: kernels.relu_max_product(h, mk, E, b, keep, screen=True),
    }


def encode_window(win, P, relu_product):
    """token_scores' arithmetic for one window: passage rows, then each sentence batch's f, top-K
    and nonzero count (as encode_batch)."""
    fP = torch.cat([torch.log1p(relu_product(h, mk, P["EP"], P["biasP"], P["keepP"]) * math.exp(P["wP"]))
                    * P["keepP"] for h, mk in win["passages"]])
    results = []
    for h, mk, prow in win["sentences"]:
        f = torch.log1p(relu_product(h, mk, P["E"], P["bias"], P["keep"]) * math.exp(P["w"]))
        f = (f + P["lam"] * fP[prow]) * P["u"] * P["keep"]
        nonzero = (f > 0).sum(dim=1)
        values, indices = torch.topk(f, min(P["k"], f.shape[1]), dim=1)
        results.append((values, indices, nonzero))
    return results


def parity(a, b) -> dict:
    """Top-K sets (positive weights), |f| difference on common tokens, round(5 f) differences."""
    sets = kept = 0
    worst = 0.0
    impacts = 0
    nonzero = 0
    for (va, ia, na), (vb, ib, nb) in zip(a, b):
        nonzero += int((na != nb).sum())
        for r in range(va.shape[0]):
            da = {int(i): float(v) for i, v in zip(ia[r], va[r]) if v > 0}
            db = {int(i): float(v) for i, v in zip(ib[r], vb[r]) if v > 0}
            sets += da.keys() != db.keys()
            kept += len(da)
            for t in da.keys() & db.keys():
                worst = max(worst, abs(da[t] - db[t]))
                impacts += round(5 * da[t]) != round(5 * db[t])
    return {"rows_with_different_top_k_set": sets, "kept_tokens": kept, "max_abs_f_difference": worst,
            "impacts_differing_by_a_step": impacts, "rows_with_different_nonzero_count": nonzero}


def time_methods(windows, P, methods, threads: int, repeats: int) -> dict:
    torch.set_num_threads(threads)
    times = {k: [] for k in methods}
    batches = sum(len(w["sentences"]) for w in windows)
    for r in range(repeats):
        names = list(methods) if r % 2 == 0 else list(reversed(methods))  # ABC CBA: no fixed order bias
        for name in names:
            t = time.perf_counter()
            for win in windows:
                encode_window(win, P, methods[name])
            times[name].append((time.perf_counter() - t) * 1e3 / batches)
    base = statistics.median(times["today"])
    return {k: {"median_ms_per_batch": statistics.median(v), "min_ms_per_batch": min(v),
                "ratio_vs_today": base / statistics.median(v), "runs_ms": v} for k, v in times.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=None, help="data folder (default: $SPARC_ES_DATA or ../shared/data)")
    p.add_argument("--windows", type=int, default=2, help="windows of 256 sentences for parity (default: %(default)s)")
    p.add_argument("--time-windows", type=int, default=1, help="of those, timed (default: %(default)s)")
    p.add_argument("--repeats", type=int, default=4, help="interleaved repeats per thread count")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--emulate", choices=sorted(EMULATE), default=None,
                   help="re-run this script with the libraries held to an older instruction set")
    p.add_argument("--json", type=Path, default=Path("bench/kernels-study.json"))
    args = p.parse_args(argv)
    if args.emulate and os.environ.get("_KERNELS_STUDY_CHILD") != "1":
        env = {**os.environ, **EMULATE[args.emulate], "_KERNELS_STUDY_CHILD": "1"}
        json_path = args.json.with_name(args.json.stem + f"-{args.emulate}.json")
        rest = [a for a in (argv if argv is not None else sys.argv[1:])]
        rest += ["--json", str(json_path)]
        return subprocess.call([sys.executable, __file__, *rest], env=env)

    global torch
    import torch

    from sparc_es.model import kernels

    warnings.simplefilter("ignore")
    torch.set_num_threads(2)
    t = time.perf_counter()
    windows, P = build_inputs(args.windows, args.data)
    print(f"inputs: {len(windows)} windows of 256 sentences, built in {time.perf_counter() - t:.0f}s; "
          f"per window {windows[0]['n_passages']} passages, {windows[0]['sentence_positions']} sentence and "
          f"{windows[0]['passage_positions']} passage positions")
    methods = make_methods()

    torch.set_num_threads(2)
    with torch.inference_mode():
        outs = {k: [r for w in windows for r in encode_window(w, P, f)] for k, f in methods.items()}
        checks = {k: parity(outs["today"], v) for k, v in outs.items() if k != "today"}
        screened = []
        c1, c3 = kernels.bf16_error_factors(P["E"].shape[1])
        for win in windows:  # how many tokens the screen recomputes, per row
            for h, mk, *_ in win["sentences"] + win["passages"]:
                E, bias, keep = (P["E"], P["bias"], P["keep"]) if len(_) else (P["EP"], P["biasP"], P["keepP"])
                Eb, en = kernels._vocab_tables(E)
                approx, hm = kernels.masked_max_product_bf16(h, mk, Eb)
                hi = approx + bias + c1 * hm[:, None] * en[None] + c3 * approx.abs()
                screened.append(((hi > 0) & keep).sum(1).float().mean().item())
        timing = {}
        for th in [int(x) for x in args.threads.split(",")]:
            timing[str(th)] = time_methods(windows[: args.time_windows], P, methods, th, args.repeats)

    print(f"\nmedian ms per batch of 32 sentences + their passages' share (noisy: shared machine), "
          f"{args.repeats} interleaved repeats; CPU capability {torch.backends.cpu.get_cpu_capability()}, "
          f"bf16 native: {kernels.bf16_native()}, emulate: {args.emulate or 'no'}")
    print(f"{'method':13s}" + "".join(f" {th + 'T ms':>9s} {'x':>5s}" for th in timing))
    for k in methods:
        cells = (timing[th][k] for th in timing)
        print(f"{k:13s}" + "".join(f" {c['median_ms_per_batch']:9.1f} {c['ratio_vs_today']:5.2f}" for c in cells))
    print("\nparity against today (all windows):")
    for k, v in checks.items():
        print(f"  {k:12s} " + ", ".join(f"{a}={b}" for a, b in v.items()))
    print(f"  bf16 screen recomputes {statistics.mean(screened):.0f} of {P['E'].shape[0]} tokens per row on average")

    report = {"machine": {"processor": platform.processor(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                          "bf16_native": kernels.bf16_native(), "torch": torch.__version__, "cores": os.cpu_count(),
                          "emulate": args.emulate,
                          "env": {k: os.environ.get(k) for k in EMULATE.get(args.emulate, {})}},
              "inputs": {"windows": len(windows), "timed_windows": args.time_windows,
                         "per_window": [{k: w[k] for k in ("n_passages", "sentence_positions", "passage_positions")}
                                        for w in windows]},
              "timing": timing, "parity": checks, "screen_recomputed_tokens_per_row": statistics.mean(screened)}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
