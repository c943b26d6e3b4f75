"""Concluded: IDF + BM25 sum 0.3, +9.6 to +13.3 MRR over BM25 on all 5 domains, the defaults (docs/evaluation.md).

Rank the systems of ``sparc-es table`` runs by their worst validation domain's gain over BM25.

The rule for the defaults (issue "documents users bring"): a default must never lose to Lucene BM25
on any validation domain, so systems are ranked by the smallest gain in MRR@1000 over BM25 across
the domains, then by the mean gain. Report-only domains (SQuAD and NewsQA dev) must not be passed.

    .venv/bin/python scripts/studies/choose_defaults.py runs/validation.json [more.json ...] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPORT_ONLY = {"squad", "newsqa"}


def gains(rows: list[dict], measure: str = "MRR@1000") -> dict[str, dict[str, float]]:
    """system -> domain -> its measure minus BM25's on that domain."""
    bm25 = {r["domain"]: r[measure] for r in rows if r["system"] == "bm25"}
    out: dict[str, dict[str, float]] = {}
    for r in rows:
        if r["system"] != "bm25" and r["domain"] in bm25:
            out.setdefault(r["system"], {})[r["domain"]] = round(r[measure] - bm25[r["domain"]], 2)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("tables", nargs="+", type=Path, help="JSON written by sparc-es table --json")
    p.add_argument("--measure", default="MRR@1000")
    p.add_argument("--json", type=Path, help="write the ranking here")
    args = p.parse_args(argv)
    rows = [r for t in args.tables for r in json.loads(t.read_text())]
    if REPORT_ONLY & {r["domain"] for r in rows}:
        raise SystemExit(f"report-only domains in the tables ({', '.join(sorted(REPORT_ONLY))}): "
                         "choose on validation only")
    table = gains(rows, args.measure)
    domains = sorted({d for g in table.values() for d in g})
    complete = {s: g for s, g in table.items() if set(g) == set(domains)}
    ranking = sorted(complete, key=lambda s: (-min(complete[s].values()), -sum(complete[s].values())))
    width = max(map(len, ranking), default=6)
    print(f"{'system':{width}}  worst   mean  " + "  ".join(f"{d[-12:]:>12}" for d in domains))
    for s in ranking:
        g = complete[s]
        print(f"{s:{width}}  {min(g.values()):5.2f}  {sum(g.values()) / len(g):5.2f}  "
              + "  ".join(f"{g[d]:12.2f}" for d in domains))
    if args.json:
        args.json.write_text(json.dumps([{"system": s, "worst": min(complete[s].values()),
                                          "mean": round(sum(complete[s].values()) / len(domains), 2),
                                          "gains": complete[s]} for s in ranking], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
