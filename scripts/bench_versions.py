#!/usr/bin/env python
"""Concluded: 0.977x b18ea4a's encoding speed (2,000 sentences, noise), in docs/results/bench-versions.json.

Encoding speed of this tree against an earlier commit, side by side in one run.

Each version encodes the same SQuAD dev sentences (with their paragraphs), or the same folder of
documents (``--corpus DIR``: each version's own readers split it), with the default model in its own
process (``git worktree`` of ``--before``, this tree as it is), alternating, ``--repeats`` times
each; the medians and their ratio are printed and written as JSON. Run it on a quiet machine.

    .venv/bin/python scripts/bench_versions.py --before b18ea4a --limit 2000 --json docs/results/bench-versions.json
    .venv/bin/python scripts/bench_versions.py --before 2e6e507 --corpus work/docsqa/pymdown \
        --json docs/results/bench-versions-readers.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Run inside each version's tree: encode the corpus, print sentences per second.
TIMED = """
import json, sys, time
from sparc_es.encode import encode_corpus
from sparc_es.model import SparcModel
corpus, out, idf = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
model = SparcModel.load("default")
started = time.perf_counter()
manifest = encode_corpus([corpus], out, model, progress=False, idf=idf)
print(json.dumps({"seconds": time.perf_counter() - started, "sentences": manifest.sentences}))
"""


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", required=True, help="the commit to compare with")
    p.add_argument("--limit", type=int, default=2000, help="SQuAD dev sentences (default: %(default)s)")
    p.add_argument("--corpus", type=Path, help="a folder of documents to encode instead of SQuAD dev sentences")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2, help="torch threads (default: %(default)s)")
    p.add_argument("--idf", action=argparse.BooleanOptionalAction, default=True,
                   help="encode with IDF weighting (the CLI's default now; default: %(default)s)")
    p.add_argument("--json", type=Path, default=ROOT / "bench" / "versions.json")
    args = p.parse_args(argv)

    from sparc_es.evaluation.evalsets import squad_dev_sentences

    with tempfile.TemporaryDirectory(prefix="sparc-es-versions-") as tmp:
        tmp = Path(tmp)
        corpus = args.corpus.resolve() if args.corpus else tmp / "corpus.jsonl"
        if not args.corpus:
            with open(corpus, "w", encoding="utf-8") as f:
                for n, s in enumerate(squad_dev_sentences()):
                    if n >= args.limit:
                        break
                    f.write(json.dumps(s.to_json()) + "\n")
        counts: dict[str, int] = {}
        before = tmp / "before"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(before), args.before],
                       check=True)
        trees = {args.before: before, "this tree": ROOT}
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
        rates: dict[str, list[float]] = {name: [] for name in trees}
        try:
            for r in range(args.repeats):
                for name, tree in trees.items():
                    out = tmp / f"enc-{r}-{name.replace(' ', '_')}"
                    got = subprocess.run([sys.executable, "-c", TIMED, str(corpus), str(out), str(int(args.idf))],
                                         cwd=tree, env={**env, "PYTHONPATH": str(tree)}, capture_output=True,
                                         text=True, check=True)
                    result = json.loads(got.stdout.strip().splitlines()[-1])
                    rates[name].append(result["sentences"] / result["seconds"])
                    counts[name] = result["sentences"]
                    print(f"{name:12} run {r + 1}: {rates[name][-1]:.1f} sentences/s", flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)], check=False)
    medians = {name: statistics.median(v) for name, v in rates.items()}
    ratio = medians["this tree"] / medians[args.before]
    result = {"cpu": cpu_name(), "threads": args.threads, "corpus": str(args.corpus) if args.corpus else "squad-dev",
              "sentences": counts, "idf": args.idf,
              "before": args.before, "rates": rates, "medians": medians, "ratio": round(ratio, 3)}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\n| version | median sentences/s |\n|---|---|\n| {args.before} | {medians[args.before]:.1f} |\n"
          f"| this tree | {medians['this tree']:.1f} |\n\nratio {ratio:.3f} on {result['cpu']}, "
          f"{args.threads} threads, {counts} sentences, IDF {'on' if args.idf else 'off'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
