"""Run a list of systems over a list of domains and tabulate MRR / R@1 (``sparc-es table``).

Systems (``--systems``, comma-separated; options after a colon)::

    bm25                      Lucene BM25, Pyserini defaults
    bm25-paper                the SPARC paper's weak BM25 (BM25Okapi on lower().split())
    sparc[:opts]              a SPARC model through the Lucene impact index (alone, no IDF: not the
                              CLI's default search)
    default[:opts]            what `sparc-es run` and `search` do by default: sparc:idf=1,hybrid=sum
    sparc-exact[:opts]        the same model scored exactly in floating point (SciPy)
    sparc-int[:opts]          the same model's integers scored exactly (what Lucene should give)

    opts: model=PATH ({domain} in it becomes the domain's name), top_k=K (tokens kept per sentence;
          k= is the old name), factor=F, max_over=sentence|all, max_length=N,
          head=dot|mlm (score a plain checkpoint through its MLM head), passage_weight=LAMBDA (passage
          expansion with the model itself as passage encoder, for a model trained without it),
          lexical_weight=ALPHA (the lexical term, sparc_es.model.lexical, with this alpha),
          stop_words=0|1 (1: the lexical term leaves out Lucene's English stop words),
          stem_weight=BETA (its stem term, sparc_es.model.lexical, with this beta),
          word_weight=GAMMA (its whole-word term, sparc_es.model.lexical.Words, with this gamma),
          idf=1 (IDF-weighted encoding), min_impact=N (static pruning: impacts below N dropped),
          hybrid=none|sum|minmax|rrf (none, as without it: SPARC alone; sum: SPARC and the stored
          BM25 terms summed in one Lucene query; minmax, rrf: fused with the Lucene BM25 run, top
          1,000 of each), hybrid_weight=A (BM25's share of a sum; default: the engines')
          e.g. sparc:top_k=500,factor=100,bm25-paper   sparc-exact:model=models/sparc,max_over=all

A system is listed once: two specs of one system (``sparc`` and ``sparc:hybrid=none``, ``default``
and ``sparc:idf=1,hybrid=sum``) are refused, as their rows would be one another's.

Domains (``--domains``, comma-separated): the project's ``squad``, ``newsqa`` and ``val``, or the
path of an evaluation set folder (``corpus.jsonl``, ``topics.tsv``, ``qrels.txt``; what
``sparc-es evalset`` writes from any MRQA file or BEIR folder). Where the qrels judge documents,
each run is scored per document, a document by its best sentence.

Everything is cached under ``--workdir`` (evaluation sets, encoded folders with float weights,
indexes, run files), keyed by the model fingerprint and settings, so adding a system or a domain
re-uses what is there; a domain whose corpus changed (a reader's change, or another set of the same
name) has its caches made again. Output: JSON with every figure and a Markdown table with the model
fingerprint and settings beside each row (``table.json`` and ``table.md`` in the workdir), each
with ``-k``, the hits per query: a measure's cutoff past k is k, and its name says so (``-k 50``:
MRR@50, R@50; :func:`~sparc_es.evaluation.measures.measures_at`).

Memory does not grow with the number of questions: the questions are searched a batch at a time
(``--batch``), every system's hits for the batch are written to its TREC run file (the Lucene
BM25 hits computed once per batch, shared by the bm25 row and every hybrid), and each run is then
scored from its file, query by query (:func:`sparc_es.evaluation.measures.evaluate_file`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from sparc_es.engines.hybrid import BM25_WEIGHT
from sparc_es.errors import SparcError, StoreError, option
from sparc_es.evaluation.evalsets import DOMAINS, EvalSet, build_eval_set
from sparc_es.evaluation.measures import MEASURES, evaluate_file, measures_at
from sparc_es.evaluation.runs import RunFile, write_runs
from sparc_es.evaluation.trec import run_tag
from sparc_es.layout.manifest import Manifest
from sparc_es.layout.names import META
from sparc_es.layout.records import DEFAULT_FACTOR

KINDS = ("bm25", "bm25-paper", "sparc", "sparc-exact", "sparc-int")
ENGINE_OF = {"bm25": "bm25", "bm25-paper": "bm25-paper", "sparc": "lucene", "sparc-exact": "exact-float",
             "sparc-int": "exact-int"}  # what searches a system's questions, as its run tag names it
DEFAULT_SYSTEM = "default"  # the search `sparc-es run` and `search` do unless told otherwise (cli_default)
BATCH = 200  # questions searched at once: the hits a table holds are one batch's, for each system


def cli_default() -> dict:
    """The options that make ``sparc`` the search ``sparc-es run`` and ``search`` do by default: the
    encoding IDF-weighted (encode's default) and the one-request BM25 sum (the engines' default
    hybrid, with BM25's default share)."""
    from sparc_es.engines.hybrid import DEFAULT_METHOD
    from sparc_es.model.idf import IDF_DEFAULT

    return {"idf": int(IDF_DEFAULT), "hybrid": DEFAULT_METHOD.value}


def _positive(value: str) -> int:
    n = int(value)
    if n < 1:
        raise ValueError("must be at least 1")
    return n


def _weight(value: str, most: float = 100.0) -> float:
    """A finite weight from 0 to ``most`` (a NaN or a sign error would run and print a row)."""
    x = float(value)
    if not 0 <= x <= most:  # NaN fails this too
        raise ValueError(f"must be a number from 0 to {most:g}")
    return x


def _flag(value: str) -> int:
    if value not in ("0", "1"):
        raise ValueError("must be 0 or 1")
    return int(value)


def _share(value: str) -> float:
    return _weight(value, 1.0)


def _factor(value: str) -> float:
    x = float(value)
    if not (math.isfinite(x) and x > 0):
        raise ValueError("must be a positive number")
    return x


# Each option's converter: a ValueError is the option's one-line error (the same bounds as the CLI's flags).
SPARC_OPTIONS = {"model": str, "top_k": _positive, "factor": _factor, "max_over": str, "max_length": _positive,
                 "head": str, "passage_weight": _weight, "lexical_weight": _weight, "stem_weight": _weight,
                 "stop_words": _flag, "word_weight": _weight, "idf": _flag, "min_impact": _positive, "hybrid": str,
                 "hybrid_weight": _share}


# An option set to what its absence means: the same system either way (System.key).
NEUTRAL = {"model": "default", "factor": DEFAULT_FACTOR, "idf": 0, "min_impact": 1, "hybrid": "none",
           "hybrid_weight": BM25_WEIGHT}


def split_systems(text: str) -> list[str]:
    """Split ``--systems`` on the commas that start a new system (options also use commas)."""
    kinds = "|".join(re.escape(k) for k in sorted((*KINDS, DEFAULT_SYSTEM), key=len, reverse=True))
    return [s for s in re.split(rf",(?=(?:{kinds})(?::|,|$))", text) if s]


@dataclass(frozen=True)
class System:
    """A parsed ``--systems`` entry."""

    spec: str
    kind: str
    options: dict = field(default_factory=dict)

    @classmethod
    def parse(cls, spec: str) -> System:
        name, _, opts = spec.partition(":")
        kind = "sparc" if name == DEFAULT_SYSTEM else name
        if kind not in KINDS:
            raise SparcError(f"unknown system {name!r}; choose from {', '.join((*KINDS, DEFAULT_SYSTEM))}")
        options = cli_default() if name == DEFAULT_SYSTEM else {}
        for item in filter(None, opts.split(",")):
            key, eq, value = item.partition("=")
            key = "top_k" if key == "k" else key  # the old name: k means hits per query everywhere else
            if not eq or key not in SPARC_OPTIONS or not kind.startswith("sparc"):
                raise SparcError(f"bad option {item!r} in system {spec!r} (sparc options: {', '.join(SPARC_OPTIONS)})")
            try:
                options[key] = SPARC_OPTIONS[key](value)
            except ValueError as e:
                why = f": {e}" if str(e).startswith("must") else ""
                raise SparcError(f"bad value in {item!r} of system {spec!r}{why}") from None
        from sparc_es.errors import choice

        if "hybrid" in options or "hybrid_weight" in options:
            from sparc_es.engines.hybrid import HybridChoice

            try:
                HybridChoice.of("lucene", options.get("hybrid"), options.get("hybrid_weight"))
            except SparcError as e:
                raise SparcError(f"system {spec!r}: {e}") from None
        if "max_over" in options or "head" in options:
            from sparc_es.model.config import Head, MaxOver

            for name, enum in (("max_over", MaxOver), ("head", Head)):
                if name in options:
                    choice(enum, options[name], f"{name} in system {spec!r}")
        return cls(spec, kind, options)

    @property
    def key(self) -> tuple:
        """What the system is, however its spec spells it: its kind and the options that change it
        (their order, ``k=`` for ``top_k=`` and an option set to what its absence means, such as
        ``hybrid=none`` or ``idf=0``, do not)."""
        return self.kind, tuple(sorted((k, v) for k, v in self.options.items() if NEUTRAL.get(k, ...) != v))


def _distinct(systems: list[System]) -> None:
    """Refuse a system listed twice, however spelt: its rows and run files would be one another's."""
    first: dict[tuple, str] = {}
    for system in systems:
        if system.key in first:
            same = first[system.key]
            said = f"{same!r} is listed twice" if same == system.spec else \
                f"{same!r} and {system.spec!r} are the same system"
            raise SparcError(f"{option('--systems', 'systems')}: {said}; list each system once")
        first[system.key] = system.spec


def run_names(systems: list[System]) -> list[str]:
    """Each system's run file name (without ``.trec``), read from its spec: ``sparc:top_k=500`` ->
    ``sparc_top_k-500``. Specs that this spelling makes one name (``model=a/b``, ``model=a_b``) each
    add their own hash, so two systems never write one file."""
    plain = [s.spec.replace(":", "_").replace("=", "-").replace("/", "_") for s in systems]
    names = [f"{n}-{hashlib.sha256(s.spec.encode()).hexdigest()[:8]}" if plain.count(n) > 1 else n
             for n, s in zip(plain, systems)]
    if len(set(names)) < len(names):  # a spelt name that is another's with its hash: never seen, still refused
        raise SparcError(f"{option('--systems', 'systems')}: two systems would write one run file; rename a model")
    return names


def _sparc_encoded(system: System, evalset: EvalSet, corpus: Path, folder: Path) -> tuple[Path, Manifest]:
    """Encoded folder (with float weights) for this model and settings; encoded once, then reused."""
    from sparc_es.encode.requantize import requantize
    from sparc_es.encode.run import encode_corpus
    from sparc_es.model import Head, MaxOver, SparcModel

    o = system.options
    overrides = {k: v for k, v in (("top_k", o.get("top_k")), ("max_length", o.get("max_length")),
                                   ("max_over", MaxOver(o["max_over"]) if "max_over" in o else None),
                                   ("head", Head(o["head"]) if "head" in o else None),
                                   ("passage_weight", o.get("passage_weight")),
                                   ("lexical_weight", o.get("lexical_weight")),
                                   ("lexical_skips_stop_words",
                                    None if "stop_words" not in o else bool(o["stop_words"])),
                                   ("stem_weight", o.get("stem_weight")),
                                   ("word_weight", o.get("word_weight"))) if v is not None}
    model = SparcModel.load(o.get("model", "default").replace("{domain}", folder.name), **overrides)
    factor = o.get("factor", DEFAULT_FACTOR)
    idf = bool(o.get("idf"))
    key = f"{model.fingerprint}-k{model.config.top_k}{'-idf' if idf else ''}"
    encoded = folder / f"encoded-{key}"
    if not (encoded / META).is_file():
        encode_corpus([corpus], encoded, model, factor=factor, keep_floats=True, idf=idf)
    min_impact = o.get("min_impact", 1)
    if Manifest.read(encoded).factor != factor or min_impact > 1:
        quantised = folder / f"encoded-{key}-f{factor:g}{f'-m{min_impact}' if min_impact > 1 else ''}"
        if not (quantised / META).is_file():
            requantize(encoded, quantised, factor, min_impact=min_impact)
        encoded = quantised
    return encoded, Manifest.read(encoded)


def _engine(system: System, evalset: EvalSet, paths: dict[str, Path], folder: Path):
    """(engine, settings for the table) for one system on one domain."""
    if system.kind == "bm25":
        from sparc_es.engines.bm25 import LuceneBM25, build_bm25_index

        index = folder / "index-bm25"
        info = {}
        if not (index / "lucene").is_dir():
            info = build_bm25_index(evalset.sentences, index, overwrite=True)
        return LuceneBM25(index), {"k1": 0.9, "b": 0.4, "analyzer": "Porter stemming, English stop words", **info}
    if system.kind == "bm25-paper":
        from sparc_es.engines.bm25 import PaperBM25

        return PaperBM25(evalset.sentences), {"k1": 1.5, "b": 0.75, "epsilon": 0.25, "tokens": "lower().split()"}

    encoded, manifest = _sparc_encoded(system, evalset, paths["corpus"], folder)
    model = manifest.model
    settings = {"model": model.fingerprint, "base": model.base_model.get("name"), "w": model.w, "K": manifest.top_k,
                "max_over": model.max_over, "max_length": model.max_length, "head": model.head,
                "passage_weight": model.passage_weight, "lexical_weight": model.lexical_weight,
                "stem_weight": model.stem_weight, "lexical_skips_stop_words": model.lexical_skips_stop_words,
                "median_nonzero_before_top_k": manifest.median_nonzero_before_top_k,
                "postings_per_sentence": round(manifest.postings / max(manifest.sentences, 1), 1),
                "idf": manifest.idf, **({"min_impact": manifest.min_impact} if manifest.min_impact > 1 else {})}
    if model.adaptation:
        a = model.adaptation
        settings["adapted"] = (f"{a['corpus_fingerprint']} ({a['sentences']} sentences, {a['steps']} steps, "
                               f"{a['seconds']} s)")
    if system.kind == "sparc-exact":
        from sparc_es.engines.exact import ExactEngine

        return ExactEngine(encoded, floats=True), {**settings, "scoring": "float"}
    if system.kind == "sparc-int":
        from sparc_es.engines.exact import ExactEngine

        return ExactEngine(encoded), {**settings, "factor": manifest.factor, "scoring": "exact integers"}
    from sparc_es.engines import open_engine
    from sparc_es.engines.lucene import build_index

    index = folder / f"index-{encoded.name.removeprefix('encoded-')}"
    if not _current(index):
        build_index(encoded, index, overwrite=True, bm25=False)  # hybrids share the domain's BM25 index
    info = Manifest.read(index).index
    settings = {**settings, "factor": manifest.factor, "scoring": "Lucene impact index",
                "index_build_seconds": info.build_seconds, "index_megabytes": round(info.bytes / 1e6, 2)}
    hybrid, weight = system.options.get("hybrid"), system.options.get("hybrid_weight", BM25_WEIGHT)
    if hybrid == "sum":  # one request: the engine sums SPARC and the BM25 terms each sentence stores
        settings["hybrid"] = f"{weight:g} x BM25 + {1 - weight:g} x SPARC in one query, each over its attainable score"
        return open_engine("lucene", index, hybrid="sum", hybrid_weight=weight), settings
    return open_engine("lucene", index, hybrid="none"), settings


class _SharedRun:
    """An engine whose hits for the current batch of questions are computed once, to ``depth``
    (the Lucene BM25 side, shared by the bm25 row and every hybrid row)."""

    def __init__(self, engine, depth: int) -> None:
        self.engine, self.depth, self.qids, self.results = engine, depth, None, {}

    def batch_search(self, topics, k: int = 1000, threads: int = 1):
        topics = list(topics)
        qids = [qid for qid, _ in topics]
        if qids != self.qids or k > self.depth:
            self.depth = max(k, self.depth)
            self.results, self.qids = self.engine.batch_search(topics, k=self.depth, threads=threads), qids
        return {qid: hits[:k] for qid, hits in self.results.items()}


def _current(index: Path) -> bool:
    """A cached index this sparc-es can search: built, and its BM25 terms stored with today's settings
    (an index from before a change of k1, b or the scale is rebuilt, not refused)."""
    from sparc_es.engines.blend import Blend

    if not (index / META).is_file():
        return False
    try:
        Blend.read(index)
    except StoreError:
        return False
    return True


CORPUS_STAMP = "corpus.sha256"


def _drop_stale(folder: Path, corpus: Path) -> None:
    """Remove the domain's cached encodings, indexes and runs when its corpus is not the one they were
    made from (a reader changed, or another set of the same name), and stamp the folder with the
    corpus it caches for. The caches are keyed by model and settings only, so without this a changed
    corpus would be scored with the old one's index, without a word. A folder of an older sparc-es,
    with caches but no stamp, is rebuilt once: what its corpus was cannot be known."""
    digest = hashlib.sha256(corpus.read_bytes()).hexdigest()
    stamp = folder / CORPUS_STAMP
    if stamp.is_file() and stamp.read_text().strip() == digest:
        return
    cached = sorted(p for p in folder.iterdir() if p.name.startswith(("encoded-", "index-")) or p.name == "runs")
    if cached:
        print(f"{folder.name}: the corpus is not the one its {len(cached)} cached encodings, indexes and runs "
              f"were made from; they are made again", file=sys.stderr)
        for p in cached:
            shutil.rmtree(p)
    stamp.write_text(digest + "\n")


def _hybrid(system: System, engine, settings: dict, bm25: _SharedRun):
    from sparc_es.engines.hybrid import HybridEngine

    weight = system.options.get("hybrid_weight", BM25_WEIGHT)
    settings = {**settings, "hybrid": "RRF (k = 60)" if system.options["hybrid"] == "rrf" else
                f"{weight:g} x BM25 + {1 - weight:g} x SPARC, min-max normalised"}
    return HybridEngine(engine, bm25, system.options["hybrid"], weight), settings


def run_table(systems: list[str], domains: list[str], workdir: str | Path, data: str | Path | None = None,
              k: int = 1000, threads: int = 2, batch: int = BATCH) -> list[dict]:
    """Evaluate every system on every domain; returns one row per (domain, system)."""
    parsed = [System.parse(s) for s in systems]
    _distinct(parsed)
    names = run_names(parsed)
    measures = measures_at(k)  # a cutoff past k is k, and its name says so
    for d in domains:
        if d not in DOMAINS and not Path(d).is_dir():
            raise SparcError(f"unknown domain {d!r}: one of {', '.join(DOMAINS)}, or an evaluation set folder")
    if batch < 1:
        raise SparcError("the batch of questions searched at once must hold at least 1")
    rows = []
    for domain in domains:
        evalset = build_eval_set(domain, data) if domain in DOMAINS else EvalSet.read(domain)
        domain = evalset.name
        folder = Path(workdir) / domain
        paths = evalset.write(folder / "evalset", overwrite=True)  # the set is cached in WORKDIR, and re-written
        _drop_stale(folder, paths["corpus"])
        doc_of = {s.id: s.doc for s in evalset.sentences} if evalset.level == "document" else None
        hybrids = any(s.options.get("hybrid") in ("minmax", "rrf") for s in parsed)  # BM25 run fused here
        bm25 = bm25_settings = None  # one Lucene BM25 engine per domain, shared by the bm25 row and every hybrid
        if hybrids or any(s.kind == "bm25" for s in parsed):
            engine, bm25_settings = _engine(System("bm25", "bm25"), evalset, paths, folder)
            bm25 = _SharedRun(engine, max(k, 1000) if hybrids else k)
        runs, opened = [], [bm25.engine] if bm25 is not None else []  # (system, engine, settings, run file)
        try:
            for system, name in zip(parsed, names):
                if system.kind == "bm25":
                    engine, settings = bm25, bm25_settings
                else:
                    engine, settings = _engine(system, evalset, paths, folder)
                    opened.append(engine)
                    if system.options.get("hybrid") in ("minmax", "rrf"):
                        engine, settings = _hybrid(system, engine, settings, bm25)
                runs.append((system, engine, settings, folder / "runs" / f"{name}.trec"))
            seconds = _search(runs, evalset.topics, doc_of, k, threads, batch)
        finally:
            for engine in opened:
                engine.close()
        for (system, _, settings, run_path), took in zip(runs, seconds):
            scores = evaluate_file(run_path, evalset.qrels, measures)  # streamed from the file, query by query
            rows.append({"domain": domain, "system": system.spec, **{m: round(100 * v, 2) for m, v in scores.items()},
                         "k": k, "queries": len(evalset.topics), "sentences": len(evalset.sentences),
                         "level": evalset.level, "search_seconds": round(took, 1), "run": str(run_path),
                         "settings": settings})
            print(f"{domain:8} {system.spec:28} " + "  ".join(f"{m} {rows[-1][m]:.2f}" for m in measures), flush=True)
    return rows


def _search(runs: list, topics: list[tuple[str, str]], doc_of: dict | None, k: int, threads: int,
            batch: int) -> list[float]:
    """Search ``topics`` a batch at a time with every system of ``runs``, writing each one's hits
    to its run file as they come; the seconds each spent searching."""
    files = [RunFile(engine, path, _tag(system)) for system, engine, _, path in runs]
    documents = (lambda results: doc_of) if doc_of is not None else None  # the evaluation set's, fixed
    written = write_runs(files, topics, k, threads=threads, batch=batch, documents=documents)
    return [done.seconds for done in written]


def _tag(system: System) -> str:
    """The run file's tag: sparc-es, the engine and the hybrid, e.g. ``sparc-es-lucene-sum0.3``."""
    hybrid = system.options.get("hybrid")
    return run_tag(ENGINE_OF[system.kind], hybrid, system.options.get("hybrid_weight", BM25_WEIGHT))


def markdown_table(rows: list[dict]) -> str:
    """One row per (domain, system): the four measures, then the settings that produced them; under
    the table, the hits per query (k) the runs hold, where the rows record it."""
    k = rows[0].get("k") if rows else None
    measures = MEASURES if k is None else measures_at(k)
    head = "| domain | system | " + " | ".join(measures) + " | settings |\n|---|---|" + "---|" * (len(measures) + 1)
    lines = [head]
    for r in rows:
        settings = ", ".join(f"{name}={value}" for name, value in r["settings"].items())
        lines.append(f"| {r['domain']} | {r['system']} | " + " | ".join(f"{r[m]:.2f}" for m in measures)
                     + f" | {settings} |")
    if k is not None:
        lines.append(f"\nk = {k} hits per query (a measure's cutoff past k is k, as its name says).")
    return "\n".join(lines) + "\n"


def write_table(rows: list[dict], json_path: str | Path, markdown_path: str | Path) -> None:
    Path(json_path).parent.mkdir(parents=True, exist_ok=True)
    Path(json_path).write_text(json.dumps(rows, indent=2) + "\n")
    Path(markdown_path).parent.mkdir(parents=True, exist_ok=True)
    Path(markdown_path).write_text(markdown_table(rows))
