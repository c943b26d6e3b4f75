"""Concluded: no; at 1M Lucene 10.5 gives the same top 10, p50 k=1000 2.80x BM25 vs 2.18x on 9.9.1 (docs/benchmarks.md).

Does a newer Lucene close the latency gap? The scale part of ``scripts/bench.py`` run twice,
on the Lucene that sparc-es ships with (9.9.1, Anserini 1.7.1 in Pyserini 1.6.0) and on Lucene
10.5 (Anserini 2.3.0 in Pyserini 2.4.0, which needs Python 3.12 and so does not install here).

    python scripts/studies/bench_lucene10.py 10k 1m     # needs bench/work from scripts/bench.py --scales 10k,1m

Lucene 10 comes from PyPI without installing it: ``pip download`` fetches the Pyserini 2.4.0
source archive (110 MB) into ``bench/lucene10/`` and its Anserini fat jar is taken out of it.
sparc-es's Java classes are compiled against that jar with a JDK 21 or later (``$JAVA_HOME``,
``PATH`` or ``/usr/lib/jvm``); the one call that changed (the top-score collector manager) is
swapped in the copy. Each Lucene runs in its own process (one JVM, one Lucene), one after the
other, each indexing and searching the same encoded corpora with BM25 beside it exactly as
``bench.bench_scale`` does; the top 10 of every question are compared between the two.
JSON: ``bench/lucene10.json``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/, for bench
import bench  # noqa: E402

PYSERINI = "2.4.0"
OUT = bench.ROOT / "bench" / "lucene10"
OLD_CALL = "TopScoreDocCollector.createSharedManager(k, null, k)"
NEW_CALL = "new TopScoreDocCollectorManager(k, null, k)"


def javac21() -> Path:
    """A javac whose JDK is 21 or later (Lucene 10's class files need it)."""
    candidates = [Path(os.environ["JAVA_HOME"]) / "bin" / "javac"] if os.environ.get("JAVA_HOME") else []
    if shutil.which("javac"):
        candidates.append(Path(shutil.which("javac")))
    candidates += sorted(Path("/usr/lib/jvm").glob("*/bin/javac"))
    for javac in candidates:
        version = subprocess.run([str(javac), "-version"], capture_output=True, text=True).stdout
        match = re.search(r"javac (\d+)", version)
        if match and int(match.group(1)) >= 21:
            return javac
    sys.exit("no JDK 21 or later found (JAVA_HOME, PATH, /usr/lib/jvm): Lucene 10 needs one to compile against")


def lucene10_jars() -> tuple[Path, Path]:
    """(the folder holding Anserini 2.x's fat jar, sparc-es's jar compiled against it)."""
    jars, jar = OUT / "jars", OUT / "sparc-es-lucene.jar"
    if not any(jars.glob("anserini-*-fatjar.jar")):
        subprocess.run([sys.executable, "-m", "pip", "download", f"pyserini=={PYSERINI}", "--no-deps",
                        "--python-version", "3.12", "-d", str(OUT)], check=True)
        jars.mkdir(parents=True, exist_ok=True)
        with tarfile.open(OUT / f"pyserini-{PYSERINI}.tar.gz") as archive:
            member = next(m for m in archive.getmembers() if re.search(r"anserini-[\d.]+-fatjar\.jar$", m.name))
            with archive.extractfile(member) as src, open(jars / Path(member.name).name, "wb") as dst:
                shutil.copyfileobj(src, dst)
    fatjar = next(jars.glob("anserini-*-fatjar.jar"))
    src, classes = OUT / "src", OUT / "classes"
    shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(classes, ignore_errors=True)
    shutil.copytree(bench.ROOT / "sparc_es" / "engines" / "java", src, ignore=shutil.ignore_patterns("*.jar"))
    search = src / "sparces" / "lucene" / "Search.java"
    text = search.read_text()
    if OLD_CALL not in text:
        sys.exit(f"{search}: the call to swap ({OLD_CALL}) is gone; update this script")
    search.write_text(text.replace(OLD_CALL, NEW_CALL).replace(
        "import org.apache.lucene.search.TopScoreDocCollector;",
        "import org.apache.lucene.search.TopScoreDocCollectorManager;"))
    javac = javac21()
    subprocess.run([str(javac), "--release", "21", "-cp", str(fatjar), "-d", str(classes),
                    *map(str, sorted(src.rglob("*.java")))], check=True)
    subprocess.run([str(javac.with_name("jar")), "cf", str(jar), "-C", str(classes), "."], check=True)
    return jars, jar


def child(lucene: str, labels: list[str], result: Path) -> None:
    """One Lucene in this process: index and search every scale, as bench.bench_scale does."""
    from sparc_es.engines import _java
    from sparc_es.engines.lucene import LuceneEngine
    from sparc_es.evaluation.evalsets import data_dir

    if lucene == "10":
        _java.JAR = OUT / "sparc-es-lucene.jar"  # read by start_jvm, before the JVM starts
    _java.start_jvm()
    from jnius import autoclass

    version = str(autoclass("org.apache.lucene.util.Version").LATEST.toString())
    work = OUT / f"work-{lucene}"
    work.mkdir(parents=True, exist_ok=True)
    questions = bench.squad_questions(data_dir(), 500)
    out = {"lucene": version, "scales": {}, "top10": {}}
    for label in labels:
        out["scales"][label] = bench.bench_scale(bench.encoded_folder(label), work, questions, label)
        engine = LuceneEngine(work / f"index-{label}")
        found = engine.batch_search([(str(i), q) for i, q in enumerate(questions)], k=10)
        out["top10"][label] = [[h.id for h in found[str(i)]] for i in range(len(questions))]
        engine.close()
        print(lucene, label, json.dumps(out["scales"][label]["latency_ms"]), file=sys.stderr, flush=True)
    if len(labels) >= 2:
        out["growth_per_million"] = bench.growth_per_million(out["scales"][labels[0]], out["scales"][labels[-1]])
    result.write_text(json.dumps(out))


def main(labels: list[str]) -> int:
    for label in labels:
        encoded = bench.encoded_folder(label)
        if not encoded.is_dir():
            sys.exit(f"{encoded}: missing; run scripts/bench.py --scales {','.join(labels)} first")
    jars, _ = lucene10_jars()
    results = {}
    for lucene in ("9", "10"):
        env = dict(os.environ)
        if lucene == "10":
            env["ANSERINI_CLASSPATH"] = str(jars)  # Pyserini's own setting: the fat jar's folder
        path = OUT / f"result-{lucene}.json"
        subprocess.run([sys.executable, __file__, "--child", lucene, *labels], env=env, check=True)
        results[lucene] = json.loads(path.read_text())
    same = {label: sum(a == b for a, b in zip(results["9"]["top10"][label], results["10"]["top10"][label]))
            for label in labels}
    out = {"command": "python scripts/studies/bench_lucene10.py " + " ".join(labels),
           "when": time.strftime("%Y-%m-%d %H:%M"),
           "pyserini_for_lucene10": PYSERINI, "questions": 500, "same_top10": same,
           **{f"lucene{n}": {k: v for k, v in r.items() if k != "top10"} for n, r in results.items()}}
    (bench.ROOT / "bench" / "lucene10.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"{'':24} {'Lucene ' + results['9']['lucene']:>16} {'Lucene ' + results['10']['lucene']:>16}")
    for label in labels:
        for key in ("sparc_k10", "bm25_k10", "sparc_k1000", "bm25_k1000"):
            cells = [results[n]["scales"][label]["latency_ms"][key]["p50"] for n in ("9", "10")]
            print(f"{label} p50 {key:16} {cells[0]:>13.2f} ms {cells[1]:>13.2f} ms")
        for k in (10, 1000):
            cells = [results[n]["scales"][label]["latency_ms"][f"sparc_over_bm25_p50_k{k}"] for n in ("9", "10")]
            print(f"{label} SPARC/BM25 k={k:<9} {cells[0]:>15.2f}x {cells[1]:>15.2f}x")
        cells = [results[n]["scales"][label]["index"]["sparc_sentences_per_second"] for n in ("9", "10")]
        print(f"{label} impact build /s {cells[0]:>18,} {cells[1]:>16,}")
        print(f"{label} same top 10: {same[label]} of 500 questions")
    if len(labels) >= 2:
        cells = [results[n]["growth_per_million"]["ratio"] for n in ("9", "10")]
        cells = [f"{c}x" if c is not None else "n/a" for c in cells]
        print(f"growth ratio k=1000      {cells[0]:>16} {cells[1]:>16}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3:], OUT / f"result-{sys.argv[2]}.json")
        sys.exit(0)
    sys.exit(main(sys.argv[1:] or ["10k", "1m"]))
