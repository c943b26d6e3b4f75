"""``sparc-es requantize``: an IDF-weighted or re-quantised encoded folder from one kept with float
weights, without encoding again."""

from __future__ import annotations

import argparse

from sparc_es.cli.options import positive
from sparc_es.cli.output import report_empty


def add_parser(sub) -> None:
    p = sub.add_parser("requantize", help="derive an IDF-weighted or re-quantised encoded folder, no re-encoding",
                       description="From an encoded folder made with --keep-floats, write a new one whose weights "
                       "are IDF-weighted over its sentences (--idf), quantised at another --factor and/or pruned of "
                       "small impacts (--min-impact).")
    p.add_argument("--input", required=True, metavar="ENCODED", help="encoded folder with float weights")
    p.add_argument("--output", required=True, metavar="DIR", help="new encoded folder")
    p.add_argument("--factor", type=float, metavar="F", help="quantisation factor (default: the input's)")
    p.add_argument("--idf", action="store_true", help="multiply each weight by log(N / N_v) over these sentences")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output folder (only one sparc-es "
                   "made; the old one stays until the new one is complete)")
    p.add_argument("--min-impact", type=positive, metavar="N", help="keep only impacts of at least N: static "
                   "pruning, fewer postings and a smaller, faster index (default: the input's, 1 = keep all)")


def command(args: argparse.Namespace) -> int:
    from sparc_es.encode.requantize import requantize

    manifest = requantize(args.input, args.output, args.factor, idf=args.idf, min_impact=args.min_impact,
                          overwrite=args.overwrite)
    report_empty(manifest)  # encode's own warnings (truncation, control characters) were said by encode
    pruned = f", impacts of at least {manifest.min_impact}" if manifest.min_impact > 1 else ""
    print(f"wrote {manifest.sentences} sentences into {args.output} (factor={manifest.factor:g}"
          f"{', IDF-weighted' if manifest.idf else ''}{pruned}, "
          f"{manifest.postings / max(manifest.sentences, 1):.1f} postings per sentence)")
    return 0
