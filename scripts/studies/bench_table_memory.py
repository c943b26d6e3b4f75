"""Peak memory of `sparc-es table` and `sparc-es eval` against the number of questions (issue 30).

    .venv/bin/python scripts/studies/bench_table_memory.py                       # 10k and 50k questions
    .venv/bin/python scripts/studies/bench_table_memory.py --questions 2000,10000 --baseline /tmp/sparc-es-old

The questions are synthesised from a real evaluation set (default: the docs-click set of
``work/docsqa-sets``, from ``scripts/docs_qa.py evalsets``; without it the ``val`` set built from
``../shared/data``): its questions repeated in a new random order each round, under new query ids,
with their judgements, over the same small corpus, so every figure is over real questions and
real hits (up to ``-k`` per question). Each size is one evaluation set folder that ``table``
reads like any other; its encodings and indexes are built once (a warm-up run on the real
questions) and shared by every size, so the measured runs only search, write runs and score.

Each measurement is a child process (``python -m sparc_es ...``) whose peak resident set size
comes from ``os.wait4`` (the kernel's ``ru_maxrss``: Python, torch and the Java VM together):

* ``table`` with ``--systems`` (default: Lucene BM25, SPARC alone and the default hybrid) at k;
* ``eval`` of the hybrid's run file, which ``table`` just wrote.

``--baseline DIR`` measures the same commands with another copy of the package first on the path
(e.g. the last commit's: ``git archive HEAD sparc_es | tar -x -C DIR``), at the sizes of
``--baseline-questions`` (default: the smallest size only: the old ``table`` held every run in
memory). JSON goes to ``bench/table-memory.json``; a Markdown table is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sparc_es.evaluation.trec import read_qrels, read_topics

ROOT = Path(__file__).resolve().parents[2]

DOCS_SET = ROOT / "work" / "docsqa-sets" / "docs-click"
SYSTEMS = "bm25,sparc,sparc:hybrid=sum,hybrid_weight=0.3"
NAME = "synthetic"  # every size is the same domain for table: one cache of encodings and indexes


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def source_set(work: Path, given: str | None) -> Path:
    """The real evaluation set the questions come from."""
    if given:
        return Path(given)
    if (DOCS_SET / "topics.tsv").is_file():
        return DOCS_SET
    from sparc_es.evaluation.evalsets import build_eval_set

    folder = work / "val"
    if not (folder / "topics.tsv").is_file():
        build_eval_set("val").write(folder)
    return folder


def synthesise(source: Path, folder: Path, questions: int, seed: int = 0) -> Path:
    """``questions`` questions from ``source``'s, reshuffled each round, ids ``r<round>-<qid>``."""
    topics = list(read_topics(source / "topics.tsv"))
    qrels = read_qrels(source / "qrels.txt")
    topics = [(qid, q) for qid, q in topics if qid in qrels]
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / "corpus.jsonl", folder / "corpus.jsonl")
    info = json.loads((source / "evalset.json").read_text()) if (source / "evalset.json").is_file() else {}
    rng = random.Random(seed)
    written = 0
    with open(folder / "topics.tsv", "w", encoding="utf-8") as t, open(folder / "qrels.txt", "w") as q:
        for round_ in range(-(-questions // len(topics))):
            order = topics[:]
            rng.shuffle(order)
            for qid, question in order[: questions - written]:
                new = f"r{round_}-{qid}"
                t.write(f"{new}\t{question}\n")
                for docid, rel in sorted(qrels[qid].items()):
                    q.write(f"{new} 0 {docid} {rel}\n")
                written += 1
    (folder / "evalset.json").write_text(json.dumps({"name": NAME, "level": info.get("level", "sentence"),
                                                     "queries": written}) + "\n")
    return folder


def measure(argv: list[str], package: Path | None = None) -> dict:
    """Run ``python -m sparc_es ARGV`` in a child; its wall time and peak RSS."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cwd = ROOT  # python -m puts the working directory first on the path: this checkout's package
    if package is not None:
        env["PYTHONPATH"] = str(package)
        cwd = package
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", "sparc_es", *argv], env=env, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)  # this child's own rusage: its peak RSS
        seconds = time.perf_counter() - started
        child.returncode = code = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        if code != 0:
            raise SystemExit(f"failed ({code}): sparc-es {' '.join(argv)}\n{err.read()[-3000:]}")
        return {"peak_rss_mb": round(usage.ru_maxrss / 1024, 1), "seconds": round(seconds, 1),
                "stdout": out.read().strip()}


def bench(sizes: list[int], systems: str, k: int, work: Path, source: Path, package: Path | None,
          label: str) -> list[dict]:
    runs = work / f"runs-{label}"
    first = synthesise(source, work / "warmup", len(list(read_topics(source / "topics.tsv"))))
    measure(["table", "--domains", str(first), "--systems", systems, "--workdir", str(runs), "-k", str(k),
             "--json", str(work / "warmup.json"), "--markdown", str(work / "warmup.md")], package)  # builds caches
    rows = []
    for n in sizes:
        folder = synthesise(source, work / f"set-{n}", n)
        table = measure(["table", "--domains", str(folder), "--systems", systems, "--workdir", str(runs), "-k", str(k),
                         "--json", str(work / f"table-{label}-{n}.json"), "--markdown", str(work / "t.md")], package)
        result = json.loads((work / f"table-{label}-{n}.json").read_text())
        hybrid = result[-1]["run"]
        run_bytes = sum(Path(r["run"]).stat().st_size for r in result)
        evaluated = measure(["eval", "--run", hybrid, "--qrels", str(folder / "qrels.txt"), "--json"], package)
        rows.append({"code": label, "questions": n, "systems": systems, "k": k,
                     "table_peak_rss_mb": table["peak_rss_mb"], "table_seconds": table["seconds"],
                     "eval_peak_rss_mb": evaluated["peak_rss_mb"], "eval_seconds": evaluated["seconds"],
                     "run_files_mb": round(run_bytes / 1e6, 1),
                     "mrr": {r["system"]: r["MRR@1000"] for r in result}})
        print(f"{label:9} {n:>7,} questions: table {table['peak_rss_mb']:8.1f} MB in {table['seconds']:6.1f} s, "
              f"eval {evaluated['peak_rss_mb']:7.1f} MB in {evaluated['seconds']:6.1f} s", flush=True)
        shutil.rmtree(runs / NAME / "runs", ignore_errors=True)  # gigabytes of run files at 50k
        shutil.rmtree(folder)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", default="10000,50000", help="sizes, comma-separated (default: %(default)s)")
    parser.add_argument("--systems", default=SYSTEMS, help="table's --systems (default: %(default)s)")
    parser.add_argument("-k", type=int, default=1000, help="hits per question (default: %(default)s)")
    parser.add_argument("--set", help="the real evaluation set (default: work/docsqa-sets/docs-click, else val)")
    parser.add_argument("--baseline", metavar="DIR", help="a folder holding another sparc_es package to measure")
    parser.add_argument("--baseline-questions", help="sizes for --baseline (default: the smallest of --questions)")
    parser.add_argument("--work", default=str(ROOT / "bench" / "work" / "table-memory"))
    parser.add_argument("--output", default=str(ROOT / "bench" / "table-memory.json"))
    args = parser.parse_args()
    sizes = [int(n) for n in args.questions.split(",")]
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    source = source_set(work, args.set)
    rows = bench(sizes, args.systems, args.k, work, source, None, "this")
    if args.baseline:
        baseline_sizes = [int(n) for n in (args.baseline_questions or str(min(sizes))).split(",")]
        rows += bench(baseline_sizes, args.systems, args.k, work, source, Path(args.baseline).resolve(), "baseline")
    record = {"command": "python scripts/studies/bench_table_memory.py " + " ".join(sys.argv[1:]),
              "when": time.strftime("%Y-%m-%d %H:%M"), "cpu": cpu_model(), "cores": os.cpu_count(),
              "source_set": str(source), "corpus_sentences": sum(1 for _ in open(source / "corpus.jsonl")),
              "real_questions": len(list(read_topics(source / "topics.tsv"))), "rows": rows}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(record, indent=2) + "\n")
    print(f"\n{record['cpu']}, {record['cores']} cores; {record['corpus_sentences']} sentences of {source.name}, "
          f"k = {args.k}, systems {args.systems}\n")
    print("| code | questions | table peak RSS | table time | eval peak RSS | eval time | run files |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['code']} | {r['questions']:,} | {r['table_peak_rss_mb']:,.0f} MB | {r['table_seconds']:.0f} s | "
              f"{r['eval_peak_rss_mb']:,.0f} MB | {r['eval_seconds']:.0f} s | {r['run_files_mb']:,.0f} MB |")
    print(f"\nwrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
