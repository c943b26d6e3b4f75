#!/usr/bin/env python
"""The performance benchmark: encoding, indexing and queries, SPARC beside BM25 on the same engine.

    .venv/bin/python scripts/bench.py                      # 10k and 100k sentences
    .venv/bin/python scripts/bench.py --scales 10k,100k,1m # and 1M: 24 minutes in all on the 2-core machine
    .venv/bin/python scripts/bench.py --update-docs        # also rewrite the tables in README.md and docs/benchmarks.md
    .venv/bin/python scripts/bench.py --encoding-only      # encoding alone, the kernels side by side
    .venv/bin/python scripts/bench.py --encoding-only --device cuda  # encoding on a GPU (batches of 256)
    .venv/bin/python scripts/bench.py --scales-only --scales 10k,1m  # the engines alone, over corpora encoded before

Writes ``bench/bench.json`` (every figure, the machine and versions) and ``bench/bench.md``.
Run it on a quiet machine: every ratio is measured in the same run, but absolute figures move
with load.

* **encoding**: the default model with context at its default max length on SQuAD dev sentences:
  batched (length-sorted, batch 32) against batch size 1, where the time goes, process peak RSS,
  and an update that changes 1% of the sentences (``encode --update``) against the full encode.
* **indexing**: the Lucene impact index against a Lucene BM25 index of the same texts; bulk loading
  into the loopback ES-API server (noida-db: a stand-in for Elasticsearch, labelled as such).
* **queries**: single-thread p50 / p99 latency at k = 10 and 1,000, SPARC and BM25 on Lucene, at
  each scale; the growth per million sentences; throughput with 2 search threads; exact SciPy
  scoring on the 10k corpus as the paper's reference.

Corpora beyond the 10,642 real SQuAD dev sentences are **replicas**: copy c of a sentence gets
the id ``<id>~c``, 20% of its tokens dropped and its impacts jittered by a factor in [0.8, 1.2]
(so copies do not tie and let top-k pruning skip unrealistically); its BM25 text drops the same
share of words. Questions are the SQuAD dev questions.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import resource
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK_BEGIN, MARK_END = "<!-- bench:begin -->", "<!-- bench:end -->"


def spread(values: list[float]) -> dict:
    """Median with min and max, rounded for people."""
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3), "n": len(values)}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def scale_of(text: str) -> int:
    text = text.lower().strip()
    return int(float(text[:-1]) * (1_000_000 if text.endswith("m") else 1_000)) if text[-1] in "km" else int(text)


# --- encoding ------------------------------------------------------------------------------

def cpu_model() -> str:
    """The CPU's model name, vendor, family and model (what timings depend on)."""
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    except OSError:
        return platform.processor() or "unknown"
    return (f"{info.get('model name', '?')} ({info.get('vendor_id', '?')}, family {info.get('cpu family', '?')}, "
            f"model {info.get('model', '?')})")


def installed(package: str) -> str | None:
    """A package's version, None where it is not installed (a GPU machine encoding without Lucene)."""
    import importlib.metadata

    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def gpu_name(device: str) -> str | None:
    """The GPU's name when encoding runs on one (figures there depend on it, not on the CPU)."""
    import torch

    return torch.cuda.get_device_name(device) if device.startswith("cuda") else None


def bench_kernels(model, pairs, corpus, repeats: int, batch_size: int = 32) -> dict:
    """Batched sentences/s with each vocabulary max-product kernel (sparc_es.model.kernels), side by
    side in one run, interleaved (ABC, CBA, ...) so drifts in the machine's speed hit all alike."""
    import os

    import torch

    from sparc_es.model.kernels import KERNELS, bf16_native

    methods = ["reference", "blocked", "auto"]
    assert set(methods) == set(KERNELS)
    rates: dict[str, list[float]] = {m: [] for m in methods}
    before = os.environ.get("SPARC_ES_KERNEL")
    try:
        for r in range(repeats):
            for method in methods if r % 2 == 0 else reversed(methods):
                os.environ["SPARC_ES_KERNEL"] = method
                started = time.perf_counter()
                for _ in model.encode(pairs, batch_size=batch_size, corpus=corpus):
                    pass
                rates[method].append(len(pairs) / (time.perf_counter() - started))
    finally:
        if before is None:
            os.environ.pop("SPARC_ES_KERNEL", None)
        else:
            os.environ["SPARC_ES_KERNEL"] = before
    medians = {m: statistics.median(v) for m, v in rates.items()}
    return {"sentences": len(pairs), "threads": torch.get_num_threads(), "bf16_native": bf16_native(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "sentences_per_second": {m: spread(v) for m, v in rates.items()},
            "over_reference": {m: round(medians[m] / medians["reference"], 2) for m in methods}}


def bench_encoding(model, sentences, repeats: int, workdir: Path, batch_size: int = 32) -> dict:
    """Batched vs batch size 1, the time per stage, and a 1% update against the full encode."""

    from sparc_es.encode.run import encode_corpus
    from sparc_es.model.idf import IDF_DEFAULT

    sample = sentences[:1000]
    pairs = [(s.text, s.context) for s in sample]
    corpus = None  # the lexical term's statistics, counted once per corpus as encode does (not timed)
    if model.config.lexical:
        corpus = model.count_corpus(s.text for s in sentences)
    batched = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in model.encode(pairs, batch_size=batch_size, corpus=corpus):
            pass
        batched.append(len(pairs) / (time.perf_counter() - started))
    single_pairs = pairs[:100]
    single = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in model.encode(single_pairs, batch_size=1, window=1, corpus=corpus):
            pass
        single.append(len(single_pairs) / (time.perf_counter() - started))
    kernels = bench_kernels(model, pairs[:500], corpus, max(repeats, 3), batch_size)

    # where the time goes: the pipeline's own stage timer (sparc_es.model.stored.Stages) over an
    # encode of the sample, then quantising and serialising what it stored
    from sparc_es.layout.records import DEFAULT_FACTOR, quantize, record_line, vector_record
    from sparc_es.model import Stages

    timer = Stages()
    encoded = list(model.encode(pairs, batch_size=batch_size, corpus=corpus, timer=timer))
    stages = dict(timer.seconds)
    started = time.perf_counter()
    for e in encoded:
        record_line(vector_record("x", "text", quantize(e.tokens, e.weights, DEFAULT_FACTOR)))
    stages["quantise and serialise"] = time.perf_counter() - started
    total = sum(stages.values())

    # the full encode of the corpus (written to disk), then an update with 1% of sentences changed
    corpus = workdir / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(s.to_json()) + "\n" for s in sentences))
    shutil.rmtree(workdir / "encoded", ignore_errors=True)
    started = time.perf_counter()
    # IDF as `sparc-es encode` weighs by default (the Python function's default is off)
    encode_corpus([corpus], workdir / "encoded", model, batch_size=batch_size, progress=False, idf=IDF_DEFAULT)
    full_seconds = time.perf_counter() - started
    updates = bench_updates(model, sentences, workdir, full_seconds, batch_size)
    return {
        "device": str(model.device), "batch_size": batch_size,
        "sentences_per_second_batched": spread(batched),
        "kernels": kernels,
        "sentences_per_second_batch_size_1": spread(single),
        "batched_over_batch_size_1": round(statistics.median(batched) / statistics.median(single), 1),
        "sample": {"batched": len(pairs), "batch_size_1": len(single_pairs)},
        "stages_share": {k: round(v / total, 3) for k, v in stages.items()},
        "full_encode": {"sentences": len(sentences), "seconds": round(full_seconds, 1),
                        "sentences_per_second": round(len(sentences) / full_seconds, 1)},
        "update_1_percent": updates,
        "peak_rss_megabytes": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def bench_updates(model, sentences, workdir: Path, full_seconds: float, batch_size: int = 32) -> dict:
    """``encode --update`` after two kinds of 1% change, each against the full encode.

    ``documents``: 1% of the sentences, whole paragraphs, edited as a document is (one sentence of
    each changed, and with it the context of all its sentences): every sentence of those paragraphs
    and their passages are encoded again. ``sentences``: 1% of the sentences edited one by one,
    spread over as many paragraphs, their contexts left as they were: each brings its passage's
    vocabulary-wide product with it, which is why this costs more.
    """
    from sparc_es.encode.run import encode_corpus
    from sparc_es.model.idf import IDF_DEFAULT

    rng = random.Random(7)
    target = max(1, len(sentences) // 100)
    by_doc: dict[str, list[int]] = {}
    for i, s in enumerate(sentences):
        by_doc.setdefault(s.doc or s.context, []).append(i)
    docs, chosen = list(by_doc), []
    rng.shuffle(docs)
    for d in docs:
        if len(chosen) >= target:
            break
        chosen.extend(by_doc[d])
    edited_docs = {sentences[i].doc or sentences[i].context for i in chosen}
    scenarios = {"documents": set(chosen), "sentences": set(rng.sample(range(len(sentences)), target))}
    out = {}
    for name, changed in scenarios.items():
        rows = []
        for i, s in enumerate(sentences):
            row = s.to_json()
            if i in changed:
                row["text"] = s.text + " (edited)"
            if name == "documents" and (s.doc or s.context) in edited_docs and s.context:
                first = sentences[by_doc[s.doc or s.context][0]]
                row["context"] = s.context.replace(first.text, first.text + " (edited)", 1)
            rows.append(json.dumps(row) + "\n")
        edited = workdir / f"corpus-1pct-{name}.jsonl"
        edited.write_text("".join(rows))
        shutil.rmtree(workdir / "updated", ignore_errors=True)
        shutil.copytree(workdir / "encoded", workdir / "updated")
        started = time.perf_counter()
        manifest = encode_corpus([edited], workdir / "updated", model, batch_size=batch_size, progress=False,
                                 update=True, idf=IDF_DEFAULT)
        seconds = time.perf_counter() - started
        out[name] = {"changed": len(changed), "re_encoded": manifest.sentences - manifest.reused,
                     "seconds": round(seconds, 1), "share_of_full": round(seconds / full_seconds, 3)}
    return out


def latencies(engines, questions: list[str], k: int) -> dict[str, dict]:
    """``{name_k{k}: {p50, p99}}`` in ms for each ``(name, engine)``: the engines' own search, as a
    user calls it (hits as Hit objects, ids included; no texts: batch_search of one question, so the
    SQLite text lookup is not timed). The engines take turns question by question, so that load on
    the machine falls on all of them alike."""
    times: dict[str, list[float]] = {name: [] for name, _ in engines}
    for timed in (False, True):
        # One untimed pass warms the page cache and the JIT: after the 20 questions this used to
        # be, the first scale of a run still ran up to 1.6x slower at k=1000 than the next.
        for q in questions:
            for name, engine in engines:
                t = time.perf_counter()
                engine.batch_search([("q", q)], k)
                if timed:
                    times[name].append(1000 * (time.perf_counter() - t))
    return {f"{name}_k{k}": {"p50": round(statistics.median(times[name]), 3),
                             "p99": round(percentile(times[name], 0.99), 3)} for name, _ in engines}


def side_by_side(engines, questions: list[str], ks=(10, 100), base: str = "bm25") -> dict[str, dict]:
    """:func:`latencies` at each k in ``ks``, each engine's line printed with its ratio to ``base``'s."""
    out: dict[str, dict] = {}
    for k in ks:
        out.update(latencies(engines, questions, k))
        ref = out[f"{base}_k{k}"]
        width = max(len(name) for name, _ in engines)
        for name, _ in engines:
            got = out[f"{name}_k{k}"]
            print(f"k={k:<4} {name:{width}} p50 {got['p50']:.3f} ms ({got['p50'] / ref['p50']:.2f}x)  "
                  f"p99 {got['p99']:.3f} ms ({got['p99'] / ref['p99']:.2f}x)", flush=True)
    return out


def variants_beside_default(index: Path, variants, queries: int = 500) -> dict:
    """A lever's variants of the default timed beside Lucene BM25 and the default over ``index``
    (the benchmark's questions, :func:`side_by_side`), with how many questions' top 10 each keeps.
    ``variants(default)`` gives ``[(name, engine)]``, engines with ``batch_search`` built on the
    default's (scripts/studies/two_step.py, threshold_factor.py)."""
    from sparc_es.engines import open_engine
    from sparc_es.engines.bm25 import LuceneBM25
    from sparc_es.evaluation.evalsets import data_dir

    default = open_engine("lucene", index, hybrid="default")
    engines = [("bm25", LuceneBM25(index / "bm25")), ("default", default), *variants(default)]
    questions = squad_questions(data_dir(), queries)
    topics = [(f"q{i}", q) for i, q in enumerate(questions)]
    out = {"cpu": cpu_model(), "sentences": default.manifest.index.documents, "queries": len(questions),
           "same_top10": {}}
    full = default.batch_search(topics, k=10)
    for name, engine in engines[2:]:
        got = engine.batch_search(topics, k=10)
        out["same_top10"][name] = sum([h.id for h in got[q]] == [h.id for h in full[q]] for q, _ in topics)
    out["latency_ms"] = side_by_side(engines, questions)
    print("same top 10 as the default:", out["same_top10"], "of", len(topics))
    return out


def squad_questions(root: Path, n: int) -> list[str]:
    """The benchmark's queries: the first ``n`` distinct SQuAD dev questions."""
    from sparc_es.evaluation.evalsets import read_mrqa

    return list(dict.fromkeys(qa["question"].strip() for c in read_mrqa(root / "mrqa" / "SQuAD.jsonl.gz")
                              for qa in c["qas"]))[:n]


# --- corpora at scale ----------------------------------------------------------------------

def encoded_folder(label: str, workdir: Path = ROOT / "bench" / "work") -> Path:
    """Where a run of this script left the encoded corpus of scale ``label`` (10k: the real sentences)."""
    return workdir / ("encoded" if scale_of(label) <= 10_642 else f"encoded-{label}")


def replicate(encoded: Path, out: Path, n: int) -> tuple[Path, int]:
    """An encoded folder of ``n`` sentences: the real ones, then perturbed copies (see the docstring)."""
    from sparc_es.corpus.sources import Sentence
    from sparc_es.layout.manifest import Manifest, copy_into
    from sparc_es.layout.names import SENTENCES as FILENAME, VECTORS, VECTORS_FILE
    from sparc_es.layout.records import iter_vectors
    from sparc_es.layout.store import SentenceStore

    if (out / "meta.json").is_file():  # kept from an earlier run: reused while the model is the same
        kept = Manifest.read(out)
        source = Manifest.read(encoded)
        if kept.model.fingerprint == source.model.fingerprint and kept.sentences == n and kept.idf == source.idf:
            return out, n
    shutil.rmtree(out, ignore_errors=True)
    (out / VECTORS).mkdir(parents=True)
    records = list(iter_vectors(encoded))
    rng = random.Random(13)
    written = postings = 0
    with open(out / VECTORS / VECTORS_FILE, "w", encoding="utf-8") as f:
        copy = 0
        while written < n:
            for r in records:
                if written == n:
                    break
                if copy == 0:
                    rid, text, vector = r["id"], r["contents"], r["vector"]
                else:
                    rid = f"{r['id']}~{copy}"
                    words = r["contents"].split()
                    text = " ".join(w for w in words if rng.random() >= 0.2) or words[0]
                    vector = {t: max(1, round(v * rng.uniform(0.8, 1.2))) for t, v in r["vector"].items()
                              if rng.random() >= 0.2}
                    if not vector:
                        continue
                f.write(json.dumps({"id": rid, "contents": text, "vector": vector}, ensure_ascii=False) + "\n")
                written += 1
                postings += len(vector)
            copy += 1
    copy_into(encoded, out)
    (out / FILENAME).unlink()
    store = SentenceStore(out / FILENAME, create=True)
    batch = []
    for r in iter_vectors(out):
        batch.append(Sentence(id=r["id"], text=r["contents"]))
        if len(batch) == 10_000:
            store.add(batch)
            batch = []
    store.add(batch)
    store.close()
    Manifest.read(encoded).replace(sentences=n, empty_vectors=0, postings=postings).write(out)
    return out, n


# --- indexing and queries ------------------------------------------------------------------

def build_indexes(encoded: Path, index: Path):
    """The benchmark's two indexes of an encoded folder: the impact index at ``index`` and Lucene
    BM25 over the same sentences' texts at ``index/bm25``; their build records."""
    from sparc_es.corpus.sources import Sentence
    from sparc_es.engines.bm25 import build_bm25_index
    from sparc_es.engines.lucene import build_index
    from sparc_es.layout.records import iter_vectors

    shutil.rmtree(index, ignore_errors=True)
    impact = build_index(encoded, index, bm25=False).index
    texts = (Sentence(id=r["id"], text=r["contents"]) for r in iter_vectors(encoded))
    return impact, build_bm25_index(texts, index / "bm25", overwrite=True)


def bench_scale(encoded: Path, workdir: Path, questions: list[str], label: str) -> dict:
    from sparc_es.engines import open_engine
    from sparc_es.engines.bm25 import LuceneBM25

    index = workdir / f"index-{label}"
    impact, bm25_info = build_indexes(encoded, index)
    from sparc_es.engines.hybrid import BM25_WEIGHT, HybridEngine, HybridMethod

    sparc = open_engine("lucene", index, hybrid="none")
    bm25 = LuceneBM25(index / "bm25")
    # What `sparc-es search` does by default on a Lucene index: one query, SPARC and the stored BM25
    # terms summed by Lucene; and the default before it: both engines to depth 1,000, fused here.
    default = open_engine("lucene", index, hybrid="default")
    assert default.method is HybridMethod.SUM
    minmax = HybridEngine(open_engine("lucene", index, hybrid="none"), bm25, HybridMethod.MINMAX, BM25_WEIGHT)
    engines = (("sparc", sparc), ("bm25", bm25), ("default", default), ("previous_default_minmax", minmax))
    out = {"sentences": impact.documents,
           "index": {"sparc_seconds": impact.build_seconds, "bm25_seconds": bm25_info["build_seconds"],
                     "sparc_sentences_per_second": round(impact.documents / impact.build_seconds),
                     "bm25_sentences_per_second": round(bm25_info["documents"] / bm25_info["build_seconds"]),
                     "sparc_over_bm25_build_time": round(impact.build_seconds / bm25_info["build_seconds"], 1),
                     # the impact index holds the BM25 terms the default sums: it is the default's whole index
                     "sparc_megabytes": round(impact.bytes / 1e6, 1),
                     "bm25_megabytes": round(bm25_info["bytes"] / 1e6, 1),
                     "sparc_over_bm25_size": round(impact.bytes / bm25_info["bytes"], 1)},
           "latency_ms": {}, "throughput_qps_2_threads": {}}
    for k in (10, 100, 1000):
        out["latency_ms"].update(latencies(engines, questions, k))
        for name in ("sparc", "default", "previous_default_minmax"):
            for q in ("p50", "p99"):
                out["latency_ms"][f"{name}_over_bm25_{q}_k{k}"] = round(
                    out["latency_ms"][f"{name}_k{k}"][q] / out["latency_ms"][f"bm25_k{k}"][q], 2)
    topics = [(f"q{i}", q) for i, q in enumerate(questions)]
    for name, engine in (("sparc", sparc), ("bm25", bm25)):
        rates = []
        for _ in range(3):
            t = time.perf_counter()
            engine.batch_search(topics, k=10, threads=2)
            rates.append(len(topics) / (time.perf_counter() - t))
        out["throughput_qps_2_threads"][name] = spread(rates)
    for engine in (sparc, default, minmax):  # the fusion closes its two engines, the BM25 one among them
        engine.close()
    return out


def growth_per_million(a: dict, b: dict) -> dict:
    """Growth of the p50 latency per million sentences from scale ``a`` to ``b`` (two ``bench_scale``
    results), SPARC and BM25 at k = 1000 and 10, and SPARC's ratio to BM25's at k = 1000."""
    millions = (b["sentences"] - a["sentences"]) / 1e6

    def growth(name: str, k: int) -> float:
        return round((b["latency_ms"][f"{name}_k{k}"]["p50"] - a["latency_ms"][f"{name}_k{k}"]["p50"]) / millions, 3)

    g = {"sparc_ms": growth("sparc", 1000), "bm25_ms": growth("bm25", 1000),
         "sparc_ms_k10": growth("sparc", 10), "bm25_ms_k10": growth("bm25", 10)}
    # Between nearby scales (10k and 100k) the growth can be smaller than the noise, even negative.
    g["ratio"] = round(g["sparc_ms"] / g["bm25_ms"], 2) if g["bm25_ms"] > 0 and g["sparc_ms"] > 0 else None
    return g


def bench_exact(encoded: Path, questions: list[str]) -> dict:
    from sparc_es.engines.exact import ExactEngine

    engine = ExactEngine(encoded)
    times = []
    for start in range(0, len(questions), 100):
        part = questions[start: start + 100]
        t = time.perf_counter()
        engine.scores(part)
        times.append(1000 * (time.perf_counter() - t) / len(part))
    return {"ms_per_query": spread(times), "paper_reference_ms": 0.77,
            "note": "SciPy sparse product, 100 questions at a time, all sentences scored"}


def bench_es(encoded: Path) -> dict | None:
    try:
        from sparc_es.engines.elastic.loopback import noida_binary, noida_server
    except ImportError:
        return None
    if noida_binary() is None:
        return None
    from sparc_es.engines.elastic import Connection, build_index

    with noida_server() as url:
        client = Connection(url).client()
        t = time.perf_counter()
        result = build_index(encoded, client, "bench", progress=False, recreate=True)
        seconds = time.perf_counter() - t
    return {"server": "noida-db on loopback (an ES-API-compatible stand-in, not Elasticsearch)",
            "documents": result["count"], "seconds": round(seconds, 1),
            "sentences_per_second": round(result["count"] / seconds)}


# --- report --------------------------------------------------------------------------------

def markdown(result: dict) -> str:
    e, scales = result["encoding"], result["scales"]
    gpu = result["machine"].get("gpu")
    lines = [f"Measured {result['when']} on " + (f"a {gpu} (encoding on {e['device']}), beside " if gpu else "") +
             f"{result['machine']['cpus']} CPU threads of a "
             f"{result['machine'].get('cpu_model', '?')} ({result['machine']['platform']}; torch CPU capability "
             f"{e['kernels']['cpu_capability']}, native bf16: {'yes' if e['kernels']['bf16_native'] else 'no'}), "
             f"model {result['model']}, K {result['top_k']}, factor {result['factor']:g}; "
             f"`{result['command']}`.", "",
             "| encoding | figure |", "|---|---|",
             f"| batched ({e.get('batch_size', 32)}, length-sorted), sentences/s | "
             f"{e['sentences_per_second_batched']['median']} "
             f"({e['sentences_per_second_batched']['min']}-{e['sentences_per_second_batched']['max']}) |",
             f"| batch size 1, sentences/s | {e['sentences_per_second_batch_size_1']['median']} |",
             *(f"| kernel `{m}`, batched sentences/s (side by side, {e['kernels']['sentences']} sentences) | "
               f"{r['median']} ({e['kernels']['over_reference'][m]}x the reference) |"
               for m, r in e["kernels"]["sentences_per_second"].items()),
             f"| batched / batch size 1 | {e['batched_over_batch_size_1']}x |",
             f"| full encode of {e['full_encode']['sentences']:,} sentences (to disk) | "
             f"{e['full_encode']['seconds']} s, {e['full_encode']['sentences_per_second']} sentences/s |",
             *(f"| update, 1% of the {name} edited ({u['re_encoded']} sentences encoded again) | {u['seconds']} s, "
               f"{100 * u['share_of_full']:.1f}% of the full encode |"
               for name, u in e["update_1_percent"].items()),
             f"| process peak RSS | {e['peak_rss_megabytes']:,} MB |",
             "| time per stage | " + ", ".join(f"{k} {100 * v:.0f}%" for k, v in e["stages_share"].items()) + " |",
             ]
    if scales:
        lines += ["", "| sentences | impact index build | BM25 build | impact / BM25 time | size impact / BM25 "
                  "| p50 k=10 SPARC / BM25 | p50 k=1000 SPARC / BM25 | p99 k=1000 SPARC / BM25 "
                  "| 2-thread qps SPARC / BM25 |",
                  "|---|---|---|---|---|---|---|---|---|"]
    for s in scales.values():
        i, lat, qps = s["index"], s["latency_ms"], s["throughput_qps_2_threads"]
        lines.append(f"| {s['sentences']:,} | {i['sparc_seconds']} s ({i['sparc_sentences_per_second']:,}/s) | "
                     f"{i['bm25_seconds']} s ({i['bm25_sentences_per_second']:,}/s) | "
                     f"{i['sparc_over_bm25_build_time']}x | "
                     f"{i['sparc_megabytes']} / {i['bm25_megabytes']} MB | "
                     f"{lat['sparc_k10']['p50']} / {lat['bm25_k10']['p50']} ms ({lat['sparc_over_bm25_p50_k10']}x) | "
                     f"{lat['sparc_k1000']['p50']} / {lat['bm25_k1000']['p50']} ms "
                     f"({lat['sparc_over_bm25_p50_k1000']}x) | "
                     f"{lat['sparc_k1000']['p99']} / {lat['bm25_k1000']['p99']} ms | "
                     f"{qps['sparc']['median']:.0f} / {qps['bm25']['median']:.0f} |")
    if scales:
        lines += ["", "The default search (one Lucene query, SPARC and the stored BM25 terms summed) beside "
                  "Lucene BM25, the engines taking turns question by question; ms, and the ratio to BM25:", "",
                  "| sentences | k | BM25 p50 / p99 | default p50 / p99 | default / BM25 p50, p99 | SPARC alone p50 "
                  "| previous default (two searches, min-max) p50 | index size default / BM25 |",
                  "|---|---|---|---|---|---|---|---|"]
    for s in scales.values():
        lat, i = s["latency_ms"], s["index"]
        for k in (10, 100):
            if f"default_k{k}" not in lat:
                continue
            lines.append(f"| {s['sentences']:,} | {k} | {lat[f'bm25_k{k}']['p50']} / {lat[f'bm25_k{k}']['p99']} | "
                         f"{lat[f'default_k{k}']['p50']} / {lat[f'default_k{k}']['p99']} | "
                         f"**{lat[f'default_over_bm25_p50_k{k}']}x**, {lat[f'default_over_bm25_p99_k{k}']}x | "
                         f"{lat[f'sparc_k{k}']['p50']} ({lat[f'sparc_over_bm25_p50_k{k}']}x) | "
                         f"{lat[f'previous_default_minmax_k{k}']['p50']} "
                         f"({lat[f'previous_default_minmax_over_bm25_p50_k{k}']}x) | "
                         f"{i['sparc_megabytes']} / {i['bm25_megabytes']} MB ({i.get('sparc_over_bm25_size', '?')}x) |")
    g = result.get("growth_per_million")
    if g:
        ratio = "n/a, below the noise between these scales" if g["ratio"] is None else f"{g['ratio']}x"
        lines += ["", f"Latency growth per million sentences (p50, k=1000): SPARC {g['sparc_ms']} ms, BM25 "
                  f"{g['bm25_ms']} ms, ratio {ratio} (k=10: {g['sparc_ms_k10']} / {g['bm25_ms_k10']} ms)."]
    x = result.get("exact")
    if x:
        lines += ["", f"Exact SciPy scoring of all {scales[next(iter(scales))]['sentences']:,} sentences: "
                  f"{x['ms_per_query']['median']} ms per query (paper: 0.77 ms on SQuAD on a laptop)."]
    es = result.get("elasticsearch")
    if es:
        lines += ["", f"Bulk loading {es['documents']:,} sentences into {es['server']}: {es['seconds']} s "
                  f"({es['sentences_per_second']:,} sentences/s)."]
    return "\n".join(lines) + "\n"


def update_docs(table: str) -> list[Path]:
    changed = []
    for path in (ROOT / "README.md", ROOT / "docs" / "benchmarks.md"):
        text = path.read_text()
        if MARK_BEGIN in text and MARK_END in text:
            head, rest = text.split(MARK_BEGIN, 1)
            _, tail = rest.split(MARK_END, 1)
            path.write_text(f"{head}{MARK_BEGIN}\n{table}{MARK_END}{tail}")
            changed.append(path)
    return changed


def filtered_copy(encoded: Path, out: Path, keep, **manifest) -> Path:
    """A copy of an encoded folder whose sentences keep ``keep(vector)`` of their impacts (a dict),
    streamed record by record; the manifest gets the new postings, impact sum and empty count and
    ``manifest``'s other fields. Shared by the timing cuts below and the pruning studies."""
    from sparc_es.layout.manifest import Manifest, copy_into
    from sparc_es.layout.names import VECTORS, VECTORS_FILE
    from sparc_es.layout.records import iter_vectors

    shutil.rmtree(out, ignore_errors=True)
    (out / VECTORS).mkdir(parents=True)
    postings = impact_sum = empty = 0
    with open(out / VECTORS / VECTORS_FILE, "w", encoding="utf-8") as f:
        for r in iter_vectors(encoded):
            kept = keep(r["vector"])
            postings += len(kept)
            impact_sum += sum(kept.values())
            empty += not kept
            f.write(json.dumps({**r, "vector": kept}, ensure_ascii=False) + "\n")
    copy_into(encoded, out)
    Manifest.read(encoded).replace(postings=postings, impact_sum=impact_sum, empty_vectors=empty,
                                   **manifest).write(out)
    return out


def _kept(out: Path, encoded: Path) -> bool:
    """A copy :func:`filtered_copy` made earlier from ``encoded`` as it is now (the copy keeps its
    source's generation, which changes whenever the source is encoded again)."""
    from sparc_es.layout.manifest import Manifest

    return (out / "meta.json").is_file() and Manifest.read(out).generation == Manifest.read(encoded).generation


def keep_top(encoded: Path, out: Path, k: int) -> Path:
    """An encoded folder whose sentences keep only their ``k`` largest impacts (ties: token order):
    the posting lists of a smaller K, for timing, without encoding again."""
    from sparc_es.layout.manifest import Manifest

    if _kept(out, encoded) and Manifest.read(out).top_k == k:
        return out
    return filtered_copy(encoded, out, lambda v: dict(sorted(v.items(), key=lambda kv: -kv[1])[:k]), top_k=k)


def keep_at_least(encoded: Path, out: Path, floor: int) -> Path:
    """An encoded folder whose sentences keep only their impacts of at least ``floor``: what
    ``requantize --min-impact`` stores (the same integers, the same rounding), for timing, from a
    corpus (a replica) encoded before."""
    from sparc_es.layout.manifest import Manifest

    if _kept(out, encoded) and Manifest.read(out).min_impact == floor:
        return out
    return filtered_copy(encoded, out, lambda v: {t: i for t, i in v.items() if i >= floor}, min_impact=floor)


def scales_only(args, questions: list[str]) -> int:
    """``--scales-only``: :func:`bench_scale` over encoded corpora already in the work folder
    (with ``--keep-top K``, their sentences cut to their K largest impacts; with ``--min-impact N``,
    to their impacts of at least N)."""
    out = {"command": "python scripts/bench.py " + " ".join(sys.argv[1:]), "when": time.strftime("%Y-%m-%d %H:%M"),
           "machine": {"cpu_model": cpu_model(), "platform": platform.platform()}, "keep_top": args.keep_top,
           "min_impact": args.min_impact, "scales": {}}
    for label in args.scales.split(","):
        encoded = encoded_folder(label, args.workdir)
        if not encoded.is_dir():
            sys.exit(f"{encoded}: missing; run scripts/bench.py --scales {label} first")
        if args.keep_top:
            encoded = keep_top(encoded, args.workdir / f"{encoded.name}-top{args.keep_top}", args.keep_top)
            label = f"{label}-top{args.keep_top}"
        if args.min_impact:
            encoded = keep_at_least(encoded, args.workdir / f"{encoded.name}-min{args.min_impact}", args.min_impact)
            label = f"{label}-min{args.min_impact}"
        out["scales"][label] = bench_scale(encoded, args.workdir, questions, label)
        print(label, json.dumps(out["scales"][label]["latency_ms"]), file=sys.stderr, flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scales", default="10k,100k", help="corpus sizes (default: %(default)s)")
    p.add_argument("--queries", type=int, default=500, help="questions timed per system and k (default: %(default)s)")
    p.add_argument("--repeats", type=int, default=3, help="repeats of throughput figures (default: %(default)s)")
    p.add_argument("--threads", type=int, default=2, help="torch threads for encoding (default: %(default)s)")
    p.add_argument("--data", type=Path, default=None, help="data folder (default: $SPARC_ES_DATA or ../shared/data)")
    p.add_argument("--limit", type=int, default=None, help="use only the first N SQuAD dev sentences (smoke runs)")
    p.add_argument("--model", default="default", help="the model to benchmark (a folder; default: the shipped "
                   "one); give another model its own --workdir, so the default's replicas are kept")
    p.add_argument("--workdir", type=Path, default=ROOT / "bench" / "work")
    p.add_argument("--json", type=Path, default=ROOT / "bench" / "bench.json")
    p.add_argument("--markdown", type=Path, default=ROOT / "bench" / "bench.md")
    p.add_argument("--encoding-only", action="store_true", help="time encoding only (no index scales, exact "
                   "scoring or Elasticsearch)")
    p.add_argument("--scales-only", action="store_true", help="index and search the encoded corpora already in "
                   "--workdir only (a change to the engines, not the model): no encoding, exact scoring or "
                   "Elasticsearch; a missing corpus is an error")
    p.add_argument("--keep-top", type=int, metavar="K", help="with --scales-only: each sentence keeps only its K "
                   "largest impacts (the posting lists of a smaller K, timed without encoding again)")
    p.add_argument("--min-impact", type=int, metavar="N", help="with --scales-only: each sentence keeps only its "
                   "impacts of at least N (static pruning, what requantize --min-impact stores)")
    p.add_argument("--device", default="cpu", help="where the model encodes: cpu, cuda or cuda:N; a GPU times "
                   "encoding only (default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=None, help="sentences per encoding batch (default: 32 on "
                   "the CPU, 256 on a GPU, as `sparc-es encode` batches)")
    p.add_argument("--update-docs", action="store_true", help="rewrite the generated tables in README.md and "
                   "docs/benchmarks.md (between the bench markers)")
    args = p.parse_args(argv)
    if args.batch_size is not None and args.batch_size < 1:
        p.error("--batch-size must be at least 1")
    from sparc_es.errors import SparcError
    from sparc_es.model import resolve_device

    try:
        device = resolve_device(args.device)
    except SparcError as e:
        p.error(str(e))
    if device != "cpu" and not args.encoding_only:
        p.error("--device times encoding only: add --encoding-only (the engines' figures are CPU figures)")
    if args.keep_top is not None and not args.scales_only:
        p.error("--keep-top cuts the corpora of --scales-only")
    if args.min_impact is not None and (not args.scales_only or args.min_impact < 1):
        p.error("--min-impact N (N >= 1) prunes the corpora of --scales-only")

    import torch
    import transformers

    from sparc_es import __version__
    from sparc_es.evaluation.evalsets import data_dir, squad_dev_sentences
    from sparc_es.layout.records import DEFAULT_FACTOR
    from sparc_es.model import SparcModel

    torch.set_num_threads(args.threads)
    root = args.data or data_dir()
    args.workdir.mkdir(parents=True, exist_ok=True)
    sentences = list(squad_dev_sentences(root))[: args.limit]
    questions = squad_questions(root, args.queries)
    model = SparcModel.load(args.model).to(device)
    batch_size = args.batch_size or (32 if device == "cpu" else 256)
    started = time.time()
    if args.scales_only:
        return scales_only(args, questions)
    print("encoding ...", file=sys.stderr, flush=True)
    result = {"command": "python scripts/bench.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "when": time.strftime("%Y-%m-%d"), "model": model.fingerprint, "top_k": model.config.top_k,
              "factor": DEFAULT_FACTOR,
              "machine": {"cpus": torch.get_num_threads(), "cpu_model": cpu_model(), "platform": platform.platform(),
                          "python": platform.python_version(), "torch": torch.__version__,
                          "transformers": transformers.__version__, "pyserini": installed("pyserini"),
                          "sparc_es": __version__, "gpu": gpu_name(device)},
              "encoding": bench_encoding(model, sentences, args.repeats, args.workdir, batch_size), "scales": {}}
    encoded = args.workdir / "encoded"
    for label in [] if args.encoding_only else args.scales.split(","):
        n = scale_of(label)
        print(f"scale {label} ...", file=sys.stderr, flush=True)
        if n <= len(sentences):
            folder, n = encoded, len(sentences)
        else:
            folder, n = replicate(encoded, args.workdir / f"encoded-{label}", n)
        result["scales"][label] = bench_scale(folder, args.workdir, questions, label)
    labels = list(result["scales"])
    if len(labels) > 1:
        result["growth_per_million"] = growth_per_million(result["scales"][labels[0]], result["scales"][labels[-1]])
    if not args.encoding_only:
        print("exact scoring and Elasticsearch loading ...", file=sys.stderr, flush=True)
        result["exact"] = bench_exact(encoded, questions)
        result["elasticsearch"] = bench_es(encoded)
    result["seconds"] = round(time.time() - started)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    table = markdown(result)
    args.markdown.write_text(table)
    print(table)
    if args.update_docs:
        for path in update_docs(table):
            print(f"updated {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
