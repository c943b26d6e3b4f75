"""Adaptation on the documentation sets' third pass (about 150 questions a project, 936 in all).

On the first passes (43-52 questions a project) a domain's paired 95% interval was 8-12 MRR points
wide, so adaptation's gains and losses could not be told from noise (docs/adaptation.md). This
prints, from ``sparc-es table --json`` files over the third-pass sets, each system's MRR@1000 on
each domain, its change against the default with the paired bootstrap 95% interval, and the mean
change over the documentation domains with its stratified interval (each domain's questions
resampled on their own: ``scripts/studies/paper004.py``'s intervals).

    python scripts/studies/third_pass.py runs/v6/table-docs.json runs/v6/table-val.json --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

DEFAULT = "sparc:idf=1,hybrid=sum"


def summarise(tables: list[Path]) -> dict:
    """Each system's row: MRR@1000 per domain, change against the default with its interval, and
    the documentation mean's change with its interval and the worst domain's change."""
    from paper004 import interval, mean_interval

    scores, systems, domains = {}, [], []
    for table in tables:
        for r in json.loads(table.read_text()):
            scores[(r["domain"], r["system"])] = {"MRR@1000": r["MRR@1000"], "run": r["run"],
                                                  "queries": r["queries"], "sentences": r["sentences"]}
            systems += [r["system"]] if r["system"] not in systems else []
            domains += [r["domain"]] if r["domain"] not in domains else []
    docs = [d for d in domains if d.startswith("docs-")]
    rows = []
    for system in systems:
        row = {"system": system, "domains": {}}
        for d in domains:
            if (d, system) not in scores:
                continue
            cell = {"MRR@1000": scores[(d, system)]["MRR@1000"]}
            if system != DEFAULT:
                cell["change"] = round(scores[(d, system)]["MRR@1000"] - scores[(d, DEFAULT)]["MRR@1000"], 2)
                cell["interval"] = interval(scores, d, system, DEFAULT)
            row["domains"][d] = cell
        have = [d for d in docs if (d, system) in scores]
        if system != DEFAULT and have:
            changes = {d: row["domains"][d]["change"] for d in have}
            row["docs_mean_change"] = round(sum(changes.values()) / len(changes), 2)
            row["docs_mean_interval"] = mean_interval(scores, [(d, system) for d in have], DEFAULT)
            worst = min(row["domains"], key=lambda d: row["domains"][d]["change"])
            row["worst"] = [worst, row["domains"][worst]["change"]]
        rows.append(row)
    sizes = {d: {k: scores[(d, DEFAULT)][k] for k in ("queries", "sentences")} for d in domains}
    return {"domains": sizes, "systems": rows}


def _print(summary: dict) -> None:
    domains = list(summary["domains"])
    print("| system | " + " | ".join(d.removeprefix("docs-") for d in domains) + " | docs mean change | worst |")
    print("|---|" + "---|" * (len(domains) + 2))
    for row in summary["systems"]:
        cells = []
        for d in domains:
            c = row["domains"].get(d)
            if c is None:
                cells.append("")
            elif "change" in c:
                i = c["interval"]
                cells.append(f"{c['MRR@1000']:.2f} ({c['change']:+.2f}; {i[0]:+.2f} to {i[1]:+.2f})" if i
                             else f"{c['MRR@1000']:.2f} ({c['change']:+.2f})")
            else:
                cells.append(f"{c['MRR@1000']:.2f}")
        mean = (f"{row['docs_mean_change']:+.2f} ({row['docs_mean_interval'][0]:+.2f} to "
                f"{row['docs_mean_interval'][1]:+.2f})") if "docs_mean_change" in row else ""
        worst = f"{row['worst'][1]:+.2f} ({row['worst'][0].removeprefix('docs-')})" if "worst" in row else ""
        print(f"| {row['system']} | " + " | ".join(cells) + f" | {mean} | {worst} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("tables", type=Path, nargs="+", help="sparc-es table --json files")
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    summary = summarise(a.tables)
    _print(summary)
    if a.json:
        a.json.write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
