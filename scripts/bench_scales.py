"""The scale part of ``scripts/bench.py`` alone: index build and query latency, SPARC beside BM25.

    python scripts/bench_scales.py 10k 1m      # needs bench/work from a full scripts/bench.py run

For a change to the engines (not the model), when the 35-minute full run is more than needed:
encoded corpora already in ``bench/work`` are indexed again and searched exactly as the full run
does (``bench.bench_scale``), one scale after another; the JSON goes to ``bench/scales.json``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sparc_es.experiments.datasets import data_dir  # noqa: E402

import bench  # noqa: E402


def main(labels: list[str]) -> int:
    work = bench.ROOT / "bench" / "work"
    questions = bench.squad_questions(data_dir(), 500)
    out = {"command": "python scripts/bench_scales.py " + " ".join(labels), "when": time.strftime("%Y-%m-%d %H:%M"),
           "scales": {}}
    for label in labels or ["10k", "1m"]:
        encoded = bench.encoded_folder(label, work)
        if not encoded.is_dir():
            sys.exit(f"{encoded}: missing; run scripts/bench.py --scales {label} first")
        out["scales"][label] = bench.bench_scale(encoded, work, questions, label)
        print(label, json.dumps(out["scales"][label]["latency_ms"]), file=sys.stderr, flush=True)
    (bench.ROOT / "bench" / "scales.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
