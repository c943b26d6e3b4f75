#!/usr/bin/env python
"""Are two model folders the same model? Same fingerprint: the same bits; otherwise the largest
difference between their weights (encoder, head and passage encoder) is printed.

    .venv/bin/python scripts/compare_models.py runs/models/default-shipped default

Exits 1 when the weights differ by more than float rounding can explain (``--tolerance``, default
0.01: a re-run that rounds differently, e.g. one resumed from a checkpoint, moved float32 weights by
up to 8e-5, which flips some half-precision weights by one step: up to 0.004 in shipped folders).
"""

from __future__ import annotations

import argparse
import sys

from sparc_es.model import SparcModel


def weights(model: SparcModel):
    for part in (model, model.passage_model):
        if part is not None:
            yield from part.encoder.state_dict().values()
            if part.head is not None:
                yield from part.head.state_dict().values()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ours")
    p.add_argument("theirs")
    p.add_argument("--tolerance", type=float, default=0.01)
    args = p.parse_args(argv)
    ours, theirs = SparcModel.load(args.ours), SparcModel.load(args.theirs)
    if ours.fingerprint == theirs.fingerprint:
        print(f"{args.ours} and {args.theirs}: the same model ({ours.fingerprint}), bit for bit")
        return 0
    a, b = list(weights(ours)), list(weights(theirs))
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        print(f"{args.ours} and {args.theirs}: different architectures")
        return 1
    gap = max(float((x.float() - y.float()).abs().max()) for x, y in zip(a, b))
    print(f"{args.ours} ({ours.fingerprint}) and {args.theirs} ({theirs.fingerprint}): "
          f"largest weight difference {gap:.2g}")
    return int(gap > args.tolerance)


if __name__ == "__main__":
    sys.exit(main())
