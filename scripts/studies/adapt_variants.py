"""Concluded: half the replacement step (t = 0.5), +0.96 MRR over 5 domains, is adapt's default (docs/adaptation.md).

Variants of an adapted model, to find out what of embedding replacement helps (research script).

From the model ``sparc-es adapt`` started from (``--model``, default the shipped one) and the
adapted folder, writes beside the adapted folder:

* ``<name>@t<T>``: E = E_source + T x (E_adapted - E_source), in both encoders (a partial step);
* ``<name>@sentence``: the adapted E in the sentence encoder only, the passage encoder's E kept.

Score them with ``sparc-es table --systems sparc:model=DIR/{domain}@t0.5,...``.

    .venv/bin/python scripts/studies/adapt_variants.py runs/adapt/docs-pip --t 0.25,0.5
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("adapted", type=Path, nargs="+", help="folders written by sparc-es adapt")
    p.add_argument("--model", default="default", help="the model they were adapted from")
    p.add_argument("--t", default="0.5", help="comma-separated interpolation steps (default: %(default)s)")
    args = p.parse_args(argv)

    import torch

    from sparc_es.model import SparcModel

    for folder in args.adapted:
        for variant in [f"t{t}" for t in args.t.split(",")] + ["sentence"]:
            source, adapted = SparcModel.load(args.model), SparcModel.load(folder)
            e0, e1 = source.embeddings.detach().clone(), adapted.embeddings.detach().clone()
            with torch.no_grad():
                if variant == "sentence":
                    source.embeddings.copy_(e1)
                else:
                    t = float(variant[1:])
                    source.embeddings.copy_(e0 + t * (e1 - e0))
                    if source.passage_model is not None:
                        source.passage_model.embeddings.copy_(source.embeddings)
            out = folder.parent / f"{folder.name}@{variant}"
            source.save(out)
            print(f"{out}: fingerprint {SparcModel.load(out).fingerprint}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
