"""Encode a corpus into an *encoded folder*: top-K integer impacts ready for any engine.

The folder's layout and manifest belong to :mod:`sparc_es.layout.manifest`.

With ``idf`` every kept weight (after the top-K cut) is multiplied by log(N / N_v) over the
corpus being encoded (paper 004, eq. 6-7): N sentences, N_v of them with token v in their text,
and a factor of 1 for tokens that occur in none. The counts are recorded in ``meta.json`` and kept
(``lexical.json``) by ``update``, as the lexical term's are: unchanged sentences keep their weights,
new ones are weighted by the statistics of the first encode (``--overwrite`` counts afresh).

The corpus is validated in a first cheap pass (so a bad line fails in seconds, not after hours of
encoding, and before the output folder is touched; an update, which builds its folder beside the
old one, skips it), then encoded in shards appended to one file:
Anserini numbers documents in file order within a file but lists a folder's files in no fixed
order, and Lucene breaks score ties by that number. A shard ends after ``shard_size`` sentences or
``shard_seconds`` of work; after each, the file's length is recorded in ``progress.json``, so an
interrupted encode cuts the file back to the last whole shard and resumes there when run again
(a kill loses a few seconds of work). The output folder is locked while it is written.

A resume proves it continues the same input: ``progress.json`` keeps a fingerprint of every
sentence committed so far (id, text, context, document, offsets) and of the corpus statistics
the weights used; the rerun reads those sentences again and compares. If the corpus changed
(a file added, a document edited), the encode starts again from the beginning and says so,
rather than mixing two versions of the corpus. An update interrupted between its two renames
is completed (or rolled back) by the next run.

:func:`encode_corpus` reads as its steps, each a method of one run object (``_EncodeRun``), in the
order they run. The passes over the corpus are a :class:`~sparc_es.encode.backend.Backend`'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import statistics
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

import orjson

from sparc_es import __version__
from sparc_es.corpus.sources import JSONL_SUFFIXES, Files, ReadStats, Sentence, Source, as_source
from sparc_es.encode.backend import Backend, Local
from sparc_es.errors import InputError, SparcError, StoreError, option
from sparc_es.layout import ownership as folders
from sparc_es.layout.locks import exclusive
from sparc_es.layout.manifest import Manifest, ModelInfo, new_generation
from sparc_es.layout.names import LEXICAL_FILE, META, PASSAGES, PROGRESS, SENTENCES, TOKENIZER, VECTORS, VECTORS_FILE
from sparc_es.layout.passages import PassageCache
from sparc_es.layout.records import (
    DEFAULT_FACTOR,
    check_factor,
    check_min_impact,
    quantize,
    record_has_id,
    record_line,
    record_tail,
    vector_record,
)
from sparc_es.layout.store import SentenceStore
from sparc_es.model import EncodedSentence, SparcModel, passage_text
from sparc_es.model.idf import IDF_DEFAULT, idf_from_statistics
from sparc_es.model.lexical import CorpusStatistics
from sparc_es.notices import notice


@dataclass
class EncodeStats:
    """Counts recorded in ``meta.json`` and reported to the user."""

    sentences: int = 0
    truncated_sentences: int = 0
    truncated_contexts: int = 0
    empty_vectors: int = 0
    postings: int = 0
    max_postings: int = 0  # the most tokens one sentence stores: K plus what the lexical term adds
    impact_sum: int = 0
    seconds: float = 0.0
    reused: int = 0  # sentences whose stored weights were kept by an update
    renamed: int = 0  # of those, the ones kept under a new id (a file renamed or moved)
    # f(v, s) > 0 before top-K: how many sentences had each count (bounded, unlike one entry per sentence)
    nonzero: dict[int, int] = field(default_factory=dict)
    truncated_ids: list[str] = field(default_factory=list)  # the first few, for the message

    def median_nonzero(self) -> float:
        counts = sorted(self.nonzero.items())
        n = sum(c for _, c in counts)
        if not n:
            return 0
        values = []
        for wanted in sorted({(n - 1) // 2, n // 2}):  # the one or two middle ranks
            seen = 0
            for value, c in counts:
                seen += c
                if seen > wanted:
                    values.append(value)
                    break
        return statistics.mean(values)

    def to_json(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "nonzero"}
        d["median_nonzero_before_top_k"] = self.median_nonzero()
        d["sentences_per_second"] = round(self.sentences / self.seconds, 2) if self.seconds else None
        return d

    def state(self) -> dict:
        """Everything, for resuming."""
        return {**self.__dict__, "nonzero": {str(k): v for k, v in self.nonzero.items()}}

    @classmethod
    def from_state(cls, d: dict) -> EncodeStats:
        stats = cls(**{k: v for k, v in d.items() if k != "nonzero"})
        stats.nonzero = {int(k): v for k, v in d.get("nonzero", {}).items()}
        return stats


# Settings the user chose: a resume with others is refused. "corpus" (the paths as typed) and
# "statistics" are not among them: whether the input is the same is proven from its content.
_CHOSEN = ("model", "top_k", "factor", "floats", "idf")


def _fingerprint(statistics: CorpusStatistics | None) -> str | None:
    if statistics is None:
        return None
    return hashlib.sha256(orjson.dumps(dataclasses.asdict(statistics), option=orjson.OPT_SORT_KEYS |
                                       orjson.OPT_NON_STR_KEYS)).hexdigest()


def _read_key(s: Sentence) -> bytes:
    """What the fingerprint of the sentences read so far covers: everything stored about one."""
    return orjson.dumps([s.id, s.text, s.context, s.doc, s.start, s.end]) + b"\n"


def _notice(message: str) -> None:
    notice("encode", message)


def _again() -> str:
    """What to do when an update cannot keep the old weights."""
    return "encode it again: " + option("the same command without --update, with --overwrite",
                                        "overwrite=True instead of update=True")


def encode_corpus(corpus: Source | str | Path | Iterable[str | Path], output: str | Path,
                  model: SparcModel | str | Path, factor: float = DEFAULT_FACTOR, batch_size: int = 32,
                  shard_size: int = 10_000, shard_seconds: float = 5.0, overwrite: bool = False, progress: bool = True,
                  keep_floats: bool = False, idf: bool = IDF_DEFAULT, update: bool = False,
                  backend: Backend | None = None, min_impact: int = 1) -> Manifest:
    """Encode every sentence of ``corpus`` (file and folder paths, or a :class:`~sparc_es.corpus.sources.Source`
    such as an Elasticsearch index) into ``output``; returns the manifest written.

    ``keep_floats`` also stores each sentence's unquantised weights (exact scoring, re-quantising);
    ``idf`` (the default, as ``sparc-es encode``'s) weights them by the corpus's IDF first (see the
    module docstring). Work is committed in shards of at most ``shard_size`` sentences or
    ``shard_seconds`` of encoding, whichever comes first, so an interrupted run loses only the
    shard in flight and resumes when run again.

    ``update``: ``output`` may hold a finished encode of an earlier version of the corpus; a
    sentence whose text and context are unchanged keeps its stored weights (same model, K and
    factor), only new and changed sentences are encoded, and sentences no longer in the corpus
    are left out. The new folder is built beside the old one and replaces it when complete.

    ``backend`` runs the corpus statistics and the encoding (default: this process, :class:`Local`).

    ``min_impact``: static pruning, each sentence keeps only its impacts of at least this value
    (1, the default, keeps every one; docs/benchmarks.md has what larger floors save and cost).

    ``model``: a loaded :class:`SparcModel`, or what :meth:`SparcModel.load` takes ("default", a folder).
    """
    if isinstance(model, (str, Path)):
        model = SparcModel.load(model)
    run = _EncodeRun(source=as_source(corpus), backend=backend or Local(), factor=check_factor(factor), model=model,
                     out=Path(output), batch_size=batch_size, shard_size=shard_size, shard_seconds=shard_seconds,
                     progress=progress, keep_floats=keep_floats, idf=idf, min_impact=check_min_impact(min_impact))
    run.check_inputs(overwrite, update)
    with exclusive(run.out, "sparc-es encode"), run.resumable_on_disk_errors():
        run.finish_interrupted_update()
        if update and (run.out / META).is_file():
            return run.update()
        if update and not run.out.exists():  # a first --update (a script's, say) is a whole encode, said so
            _notice(f"{run.out}: no such folder, so nothing to update: encoding the whole corpus")
        if overwrite and (run.out / META).is_file():
            return run.replace()
        run.first_pass(overwrite)
        return run.encode()


@dataclass(eq=False)
class _EncodeRun:
    """One run of :func:`encode_corpus`: what is encoded, where and how; then what each step finds
    for the next. Its steps are the methods below, in the order they run."""

    source: Source
    backend: Backend
    factor: float
    model: SparcModel
    out: Path  # the folder asked for
    batch_size: int
    shard_size: int
    shard_seconds: float
    progress: bool
    keep_floats: bool
    idf: bool
    min_impact: int = 1
    overwrite: bool = False  # --overwrite: an unfinished encode of other settings is started again, not refused

    # What the weights are computed with, known before any record is written.
    folder: Path = field(init=False)  # where the records go: ``out``, or an update's work folder beside it
    total: int = field(init=False, default=0)  # for the progress bar
    statistics: CorpusStatistics | None = field(init=False, default=None)  # of IDF and the lexical term
    settings: dict = field(init=False, default_factory=dict)  # what a resume must match (progress.json)
    kept: _Cache | None = field(init=False, default=None)  # an update's: the records of the folder it replaces
    kept_passages: PassageCache | None = field(init=False, default=None)  # and that folder's passage cache
    idf_weights: object = field(init=False, default=None)  # the factors, when ``idf``
    lexical: CorpusStatistics | None = field(init=False, default=None)  # the statistics the lexical term reads
    extra_meta: dict = field(init=False, default_factory=dict)  # what the manifest records of both
    # Where the encode stands: what was committed (progress.json), and the corpus read from there on.
    stats: EncodeStats = field(init=False, default_factory=EncodeStats)
    done: int = field(init=False, default=0)  # sentences committed
    done_bytes: int = field(init=False, default=0)  # of the vectors file, for them
    cleaned: ReadStats = field(init=False, default_factory=ReadStats)  # control characters removed: every record
    records: Iterator[Sentence] = field(init=False)  # the corpus, read up to the next sentence to encode
    read: object = field(init=False, default_factory=hashlib.sha256)  # fingerprint of the committed sentences
    passages: PassageCache | None = field(init=False, default=None)  # this folder's passage cache
    store: SentenceStore = field(init=False)
    bar: object = field(init=False)  # the progress bar (tqdm)

    @property
    def updating(self) -> bool:
        """The records go to an update's own work folder, which replaces ``out`` when complete."""
        return self.folder != self.out

    # -- before the folder is locked

    def check_inputs(self, overwrite: bool, update: bool) -> None:
        """Refuse what cannot run, before the output folder is touched."""
        if self.batch_size < 1 or self.shard_size < 1 or not self.shard_seconds > 0:
            raise SparcError("batch size, shard size and shard seconds must be positive")
        if update and overwrite:
            raise SparcError(f"{option('--update', 'update')} keeps the weights of unchanged sentences and "
                             f"{option('--overwrite', 'overwrite')} encodes everything again: pass one of them")
        folders.check_folder_output(self.out, option("--output", "output"))
        if isinstance(self.source, Files):  # an output inside a corpus folder would be read back as corpus
            folders.check_apart(self.out, self.source.paths, "the output folder")

    @contextlib.contextmanager
    def resumable_on_disk_errors(self) -> Iterator[None]:
        """Disk full, permissions: one line that says which folder, and that a rerun resumes."""
        try:
            yield
        except OSError as e:
            where = Path(e.filename).absolute() if e.filename else None
            ours = where is None or where.is_relative_to(self.out.absolute()) or (
                where.parent == self.out.absolute().parent and where.name.startswith(f".{self.out.name}."))
            kept = "the work done so far is kept" if self.done else "nothing was encoded yet"
            if not ours:  # a corpus file it cannot read: said as that, not as the output's trouble
                raise InputError(e.filename, f"{e.strerror or e}: sparc-es cannot read this file of the corpus; "
                                             f"{kept}: fix it (or move it out of the corpus) and run the same "
                                             "command again") from None
            raise StoreError(f"{e.filename or self.out}: {e.strerror or e}; {kept}: fix this and run the same "
                             "command again" + (" to resume" if self.done else "")) from None

    # -- with the folder locked: what an earlier run left

    def finish_interrupted_update(self) -> None:
        """Complete an update (or an ``--overwrite`` of a finished encode) killed between its two
        renames, or put the old folder back."""
        import shutil

        out = self.out
        work, retired = self._update_folders()
        if not retired.exists():
            return
        if out.exists():  # killed after the swap, before the old folder was removed
            shutil.rmtree(retired)
        elif (work / META).is_file():
            work.rename(out)
            shutil.rmtree(retired)
            _notice(f"{out}: completed the encode (--update or --overwrite) that was interrupted while it replaced "
                    "the folder")
        else:
            retired.rename(out)
            _notice(f"{out}: put back the folder an interrupted encode (--update or --overwrite) had moved aside")

    def _update_folders(self) -> tuple[Path, Path]:
        """(where an update of ``out`` is built, where the folder it replaces goes while it is swapped)."""
        return self.out.parent / f".{self.out.name}.update", self.out.parent / f".{self.out.name}.old"

    # -- a fresh encode (or the resume of one)

    def first_pass(self, overwrite: bool) -> None:
        """Read every record before anything is written (a bad line fails in seconds, not after hours of
        encoding), counting the corpus statistics of IDF weighting and the lexical term; with
        ``overwrite``, then remove what sparc-es had written in the folder, but an unfinished encode,
        which is resumed where its settings and corpus are these (else started again)."""
        if overwrite:
            self._may_overwrite()
        self._count()
        if overwrite and not (self.out / PROGRESS).is_file():
            folders.remove(self.out)
        self.folder = self.out
        self.settings = self._settings()

    def replace(self) -> Manifest:
        """``--overwrite`` of a finished encode: encode the corpus into a folder beside it and swap it
        in when complete (as an update does), so an interrupted run keeps the old folder whole and a
        rerun resumes the new one."""
        self._may_overwrite()
        self._count()
        self.settings = self._settings()
        self.folder, retired = self._update_folders()
        manifest = self.encode()
        self._swap_in(retired)
        return manifest

    def _may_overwrite(self) -> None:
        """Refuse, before any work, an ``--overwrite`` of a folder sparc-es did not make, or made of
        another kind (an index)."""
        folders.check_removable(self.out, option("--overwrite", "overwrite=True"), replaces=folders.ENCODED)
        self.overwrite = True

    def _count(self) -> None:
        """The first pass: the corpus's sentences and the statistics of IDF and the lexical term."""
        counted = self.model if self.model.config.lexical or self.idf else None
        self.total, self.statistics = self.backend.count(self.source, counted)

    def _swap_in(self, retired: Path) -> None:
        """Put the complete work folder in ``out``'s place, the folder it replaces removed (a kill
        between the renames is completed by the next run: :meth:`finish_interrupted_update`)."""
        folders.swap_in(self.folder, self.out, retired)

    # -- an update: the finished folder in ``out`` is the one to keep weights from

    def update(self) -> Manifest:
        """Encode what changed since the finished encode in ``out`` into a folder beside it, keeping the
        weights of unchanged sentences, and swap it in when complete.

        No validation pass: the old folder is replaced only once the new one is complete, so a bad
        line stops the update with the old folder intact. Its size stands in for the total."""
        old = Manifest.read(self.out)
        self._check_same_weights(old)
        self._check_same_corpus(old)
        self.total = old.sentences
        # The corpus statistics of the first encode are kept (the lexical term's and IDF's), so unchanged
        # sentences keep their weights and only new and changed ones are encoded.
        self.statistics = self._kept_statistics()
        self.settings = self._settings()
        self.folder, retired = self._update_folders()
        self.kept = _Cache(self.out, verbatim=old.floats == self.keep_floats)
        if self.model.config.passage_weight:
            self.kept_passages = PassageCache(self.out / PASSAGES, write=False)
        try:
            manifest = self.encode()
        finally:
            self.kept.close()
            if self.kept_passages is not None:
                self.kept_passages.close()
        self._swap_in(retired)
        if manifest.sentences - manifest.reused or manifest.removed:  # what searches still answer from
            rebuild = option(f"sparc-es index --input {self.out} --index DIR --overwrite",
                             f"build_index({str(self.out)!r}, DIR, overwrite=True)")
            in_place = option("sparc-es index --engine es", "sparc_es.engines.elastic.build_index")
            _notice(f"an index built from {self.out} before this update still holds its old sentences: build it "
                    f"again ({rebuild}; on Elasticsearch, {in_place} updates the index in place)")
        return manifest

    def _check_same_weights(self, old: Manifest) -> None:
        """Refuse to update a folder whose weights this run would not give (IDF, model, K, factor, floats)."""
        if self.idf != old.idf:
            same_way = option("--idf" if old.idf else "--no-idf", f"idf={old.idf}")
            raise StoreError(f"{self.out}: was encoded {'with' if old.idf else 'without'} IDF weighting; update it "
                             f"the same way ({same_way}) or {_again()}")
        same = (old.model.fingerprint == self.model.fingerprint and old.top_k == self.model.config.top_k
                and old.factor == self.factor and old.min_impact == self.min_impact
                and (old.floats or not self.keep_floats))
        if not same:
            raise StoreError(f"{self.out}: was encoded with another model, K, factor or "
                             f"{option('--min-impact', 'min_impact')} (or without float weights); {_again()}")

    def _check_same_corpus(self, old: Manifest) -> None:
        """Refuse to update from other corpus folders or document files: a document's id is its path
        inside the folder given, so the same files under another folder would all be renamed, and the
        rest removed. JSONL files are not compared: their records name themselves."""
        if not isinstance(self.source, Files):  # documents of a search index: ids do not depend on where
            return
        now = self.source.describe()

        def named(paths) -> set[Path]:  # a JSONL file's records carry their own ids: its name is no part of them
            return {Path(p).resolve() for p in paths if Path(p).suffix.lower() not in JSONL_SUFFIXES}

        # where the folders are now (moved together with the encoded folder, say), compared as files
        if named(old.corpus_roots(self.out)) != named(now):
            raise StoreError(f"{self.out}: was encoded from {', '.join(old.corpus)}, not {', '.join(now)}; sentence "
                             "ids are paths inside the corpus folders, so an update from others would rename or "
                             f"remove every sentence: update it from the same corpus, or encode it afresh with "
                             f"{option('--overwrite', 'overwrite=True')}")

    def _kept_statistics(self) -> CorpusStatistics | None:
        """The corpus statistics the folder being updated was encoded with (None when it needs none)."""
        if not (self.model.config.lexical or self.idf):
            return None
        corpus = CorpusStatistics.read(self.out)
        if corpus is None:
            raise StoreError(f"{self.out}: has no {LEXICAL_FILE} (the corpus statistics of its lexical term or IDF); "
                             f"{_again()}")
        return corpus

    def _settings(self) -> dict:
        """What an interrupted encode must match to be resumed (the manifest's first fields, and a
        fingerprint of the corpus statistics its weights were computed with)."""
        return {"model": dataclasses.asdict(ModelInfo.of(self.model)), "top_k": self.model.config.top_k,
                "factor": self.factor, "corpus": self.source.describe(), "floats": self.keep_floats, "idf": self.idf,
                "statistics": _fingerprint(self.statistics),
                **({"min_impact": self.min_impact} if self.min_impact > 1 else {})}  # 1: as folders before it

    # -- the encode, into ``folder``: both ways end here

    def encode(self) -> Manifest:
        """Encode into ``folder``, resuming an interrupted run of the same settings on the same input."""
        self.resume()
        self.weigh()
        self.encode_shards()
        return self.finish()

    def resume(self) -> None:
        """Pick up what an interrupted encode with the same settings committed, once the corpus is shown
        to begin with the very sentences it read; otherwise start from the beginning."""
        digest = self._prepare()
        self._read_corpus()
        if self.done and not self._same_start(digest):
            why = (f"the corpus changed since the interrupted encode (its first {self.done} sentences are not the "
                   "ones encoded then)" if digest else "the interrupted encode was made by an older sparc-es, which "
                   "kept no fingerprint of what it read")
            _notice(f"{self.folder}: {why}: starting again from the beginning")
            self._restart()
            self._read_corpus()
        elif self.done:  # said: a rerun that picks up is not a fresh start
            if self.updating and not self.overwrite:  # its total stands in (the folder it replaces)
                _notice(f"{self.out}: resuming the interrupted update: {self.done:,} sentences were written before "
                        "it stopped")
            else:
                _notice(f"{self.out}: resuming the interrupted encode: {self.done:,} of {self.total:,} sentences "
                        "were encoded before it stopped")
        if self.model.config.passage_weight:
            self.passages = PassageCache(self.folder / PASSAGES, previous=self.kept_passages)

    def _prepare(self) -> str | None:
        """Start fresh, or pick up an interrupted encode made with the same settings.

        Returns the fingerprint of the sentences it committed (None when starting fresh). An
        interrupted encode made with other chosen settings is refused, unless this is an update
        (its own work folder: it is started again).
        """
        out = self.folder
        if (out / META).exists():
            raise StoreError(f"{out}: already holds a finished encode; pass {option('--overwrite', 'overwrite=True')} "
                             f"to replace it (or {option('--update', 'update=True')} to encode only what changed)")
        progress = out / PROGRESS
        if progress.is_file():
            try:
                state = json.loads(progress.read_text())
                done, before = int(state["sentences"]), state["settings"]
            except (ValueError, KeyError, TypeError):
                state, done, before = {}, 0, {}
            chosen = all(before.get(k) == self.settings[k] for k in _CHOSEN)
            if chosen and before.get("statistics") == self.settings["statistics"] and "stats" in state:
                self.stats, self.done, self.done_bytes = (EncodeStats.from_state(state["stats"]), done,
                                                          int(state["bytes"]))
                return state.get("read")
            if done and not chosen and not (self.updating or self.overwrite):
                raise StoreError(f"{out}: holds an unfinished encode made with other settings (model, K, factor, "
                                 f"float weights or IDF); pass {option('--overwrite', 'overwrite=True')} to start "
                                 "again")
            if done:
                why = ("an interrupted update with other settings" if not chosen else
                       "the corpus changed since the interrupted encode (its statistics differ)")
                _notice(f"{out}: {why}: starting again from the beginning")
        elif out.exists() and any(p.name != folders.MARKER for p in out.iterdir()):
            raise StoreError(f"{out}: folder is not empty; choose a new folder or pass "
                             f"{option('--overwrite', 'overwrite=True')}")
        self._restart()
        return None

    def _restart(self) -> None:
        """An empty encoded folder (whatever sparc-es had begun there removed), ready to resume."""
        if (self.folder / PROGRESS).is_file():
            folders.remove(self.folder)
        folders.claim(self.folder, "encode")
        (self.folder / VECTORS).mkdir(exist_ok=True)
        self.stats, self.done, self.done_bytes = EncodeStats(), 0, 0
        self._save_progress(0, hashlib.sha256().hexdigest())  # from here on, a rerun resumes

    def _read_corpus(self) -> None:
        """Start reading the corpus from its beginning."""
        self.cleaned = ReadStats()  # control characters removed: counted over every record, skipped ones too
        self.records = self.source.read(self.cleaned)
        self.read = hashlib.sha256()  # the fingerprint of the sentences committed, in input order

    def _same_start(self, digest: str | None) -> bool:
        """Whether the corpus's first ``done`` sentences are the ones fingerprinted in ``digest`` (read past
        them, into ``read``)."""
        seen = 0
        for s in islice(self.records, self.done):
            self.read.update(_read_key(s))
            seen += 1
        return seen == self.done and digest is not None and self.read.hexdigest() == digest

    def weigh(self) -> None:
        """The IDF factors and the lexical term's statistics the weights are computed with, recorded in
        the folder."""
        if self.idf:
            # the vocabulary may be longer than the tokenizer (padded vocabularies)
            self.idf_weights, record = idf_from_statistics(self.statistics, self.model.embeddings.shape[0])
            self.extra_meta["idf_weighting"] = record
        if self.model.config.lexical or self.idf:
            self.statistics.write(self.folder)  # kept by --update
        if self.model.config.lexical:
            c = self.model.config
            self.extra_meta["lexical"] = {**self.statistics.summary(), "weight": c.lexical_weight,
                                          "stem_weight": c.stem_weight, "word_weight": c.word_weight,
                                          "k1": c.lexical_k1, "b": c.lexical_b}
            self.lexical = self.statistics  # otherwise counted for IDF weighting only

    def encode_shards(self) -> None:
        """Encode the rest of the corpus in shards appended to the vectors file, each committed before
        the next is begun."""
        from tqdm import tqdm

        self.store = SentenceStore(self.folder / SENTENCES, create=True)
        # Updated per batch (not per 256-sentence window) with a smoothed rate, so the first ETA is not hours.
        self.bar = tqdm(total=self.total, initial=self.done, unit="sent", desc="encode", disable=not self.progress,
                        file=sys.stderr, dynamic_ncols=True, smoothing=0.1, mininterval=0.5)
        started = time.perf_counter() - self.stats.seconds
        try:
            with open(self.folder / VECTORS / VECTORS_FILE, "a+b") as vectors, (
                    contextlib.nullcontext() if self.passages is None else self.passages):
                vectors.truncate(self.done_bytes)  # drop a shard that was cut off half-written
                while shard := self._encode_shard(vectors):
                    self._commit(vectors, shard, started)
            self.bar.total = self.bar.n  # an update's total was the old folder's size
        finally:  # its line ended before any message of a stop (Ctrl-C, SIGTERM, an error) is printed
            self.bar.close()

    def _encode_shard(self, vectors) -> list[Sentence]:
        """Encode the next shard's sentences into ``vectors`` (none when the corpus is done)."""
        piece = self.batch_size * 8  # what model.encode sorts by length at a time
        shard: list[Sentence] = []
        shard_started = time.perf_counter()
        while len(shard) < self.shard_size and time.perf_counter() - shard_started < self.shard_seconds:
            pieces = []
            for _ in range(self.backend.pieces_at_once):
                batch = list(islice(self.records, min(piece, self.shard_size - len(shard) - sum(map(len, pieces)))))
                if not batch:
                    break
                pieces.append(batch)
            if not pieces:
                break
            _write_pieces(vectors, pieces, self)
            shard += [s for batch in pieces for s in batch]
        return shard

    def _commit(self, vectors, shard: list[Sentence], started: float) -> None:
        """Make a written shard durable, then record it in ``progress.json``: a rerun resumes after it."""
        vectors.flush()
        os.fsync(vectors.fileno())
        if self.passages is not None:  # no fsync: a lost passage is only encoded again
            self.passages.flush()
        self.store.add(shard)
        for s in shard:
            self.read.update(_read_key(s))
        self.done += len(shard)
        self.stats.seconds = time.perf_counter() - started
        self._save_progress(vectors.tell(), self.read.hexdigest())

    def _save_progress(self, size: int, read: str) -> None:
        tmp = self.folder / (PROGRESS + ".tmp")  # replaced atomically: a kill never leaves half a file
        tmp.write_text(json.dumps({"settings": self.settings, "sentences": self.done, "bytes": size,
                                   "stats": self.stats.state(), "read": read}))
        tmp.replace(self.folder / PROGRESS)

    def piece_records(self, batch: list[Sentence], hashes: list[str], known: list[bool],
                      encoded: Iterator[EncodedSentence]) -> bytes:
        """The records of one piece, in order: an update's kept ones copied or rebuilt, the others from
        ``encoded``; each counted in ``stats``."""
        stats, lines = self.stats, []
        for s, h, kept in zip(batch, hashes, known):
            same = self.kept.line(h, s.id, s.headings) if kept else None
            if same is not None:  # unchanged text, context and id, same model, K and factor: the line stands
                line, counts = same
                lines.append(line)
            else:
                if kept:  # unchanged weights, but an older record or a new id: written again
                    old = self.kept.get(h, s.id)
                    stats.renamed += old["id"] != s.id
                    vector, floats = old["vector"], old.get("weights") if self.keep_floats else None
                    parts = old.get("lexical")
                    counts = old["stats"][:3]
                else:
                    enc = next(encoded)
                    vector = quantize(enc.tokens, enc.weights, self.factor, self.min_impact)
                    floats = dict(zip(enc.tokens, enc.weights.tolist())) if self.keep_floats else None
                    parts = enc.lexical and {t: list(p) for t, p in enc.lexical.items()}
                    counts = [enc.nonzero, enc.truncated_sentence, enc.truncated_context]
                counts = [*counts, len(vector), sum(vector.values())]
                lines.append(record_line(vector_record(s.id, s.text, vector, floats, parts, s.headings), h, counts))
            if kept:
                stats.reused += 1
                self.bar.update(1)
                if self.passages is not None:  # for the next update
                    self.passages.keep(passage_text(s.text, s.context))
            nonzero, truncated_sentence, truncated_context, postings, impact_sum = counts
            stats.sentences += 1
            stats.postings += postings
            stats.max_postings = max(stats.max_postings, postings)
            stats.impact_sum += impact_sum
            stats.nonzero[nonzero] = stats.nonzero.get(nonzero, 0) + 1
            stats.empty_vectors += not postings
            stats.truncated_contexts += truncated_context
            if truncated_sentence:
                stats.truncated_sentences += 1
                if len(stats.truncated_ids) < 5:
                    stats.truncated_ids.append(s.id)
        return b"".join(lines)

    def finish(self) -> Manifest:
        """Check that the sentence store holds every sentence once, then write the tokenizer and the
        manifest: the folder is finished."""
        stored = len(self.store)
        try:
            # the ids of the folder an update replaces that this one has not
            removed = self.store.missing(self.out / SENTENCES) if self.updating else 0
        finally:
            self.store.close()
        if stored != self.stats.sentences:  # the store's ids are unique: a repeated id would show here
            raise StoreError(f"{self.folder}: {self.stats.sentences} sentences were encoded but the sentence store "
                             f"holds {stored} ids; encode again with {option('--overwrite', 'overwrite=True')}")
        self.model.tokenizer.save_pretrained(self.folder / TOKENIZER)
        cleaned = self.cleaned
        manifest = Manifest.from_json({"sparc_es": __version__, **self.settings, **self.extra_meta,
                                       **self.stats.to_json(), "removed": removed,
                                       "control_characters_removed": cleaned.control_characters,
                                       "control_character_kinds": cleaned.control_kinds or None,
                                       "cleaned_ids": cleaned.examples, "cut_texts": cleaned.cut,
                                       "cut_examples": cleaned.cut_examples, "empty_files": cleaned.empty_files,
                                       "empty_file_examples": cleaned.empty_examples,
                                       "generation": new_generation()})
        manifest.write(self.folder)
        (self.folder / PROGRESS).unlink(missing_ok=True)
        return manifest


def _write_pieces(f, pieces: list[list[Sentence]], run: _EncodeRun) -> None:
    """Encode ``pieces`` (what an update kept is not encoded again) and append their records to ``f``.

    A function, not a method of the run: the tests cut a shard off here, as a kill or a full disk would."""
    hashes = [[content_hash(s) for s in batch] for batch in pieces]
    known = [[run.kept is not None and h in run.kept for h in hs] for hs in hashes]
    fresh = [[(s.text, s.context) for s, k in zip(batch, ks) if not k] for batch, ks in zip(pieces, known)]
    encoded = run.backend.encode(run.model, fresh, run.batch_size, idf=run.idf_weights, on_batch=run.bar.update,
                                 corpus=run.lexical, passage_cache=run.passages)
    for batch, hs, ks in zip(pieces, hashes, known):
        f.write(run.piece_records(batch, hs, ks, iter(next(encoded))))


def content_hash(sentence: Sentence) -> str:
    """What a sentence's weights depend on besides the model: its text and its context."""
    return hashlib.sha1(f"{sentence.text}\0{sentence.context}".encode()).hexdigest()[:20]


# What each record's "stats" holds, so an update can count a kept record without parsing it.
_STATS = ("nonzero", "truncated_sentence", "truncated_context", "postings", "impact_sum")


class _Cache:
    """The records of a finished encoded folder, found by content hash (offsets in memory, records on disk).

    A record written by this version with the same id is copied as it stands (``line``); its
    figures come from its ``stats``, so its vector is never parsed. Older records, and records to be
    written without their float weights, are parsed (``get``).
    """

    def __init__(self, folder: Path, verbatim: bool) -> None:
        self.file = open(folder / VECTORS / VECTORS_FILE, "rb")
        self.verbatim = verbatim
        # A hash may have several records: a sentence repeated word for word (in one paragraph, or
        # a page footer) has one id per copy and the same text and context. One record is held as
        # its (offset, length, stats); several as {id: that}, so each copy is found at once (a
        # container per hash would cost memory at 1M sentences).
        self.where: dict[str, tuple | list[tuple] | dict[str, tuple]] = {}
        offset = 0
        for line in self.file:
            tail = record_tail(line)
            if tail is not None:
                at, before = (offset, len(line), tail[1]), self.where.get(tail[0])
                if before is None:
                    self.where[tail[0]] = at
                elif isinstance(before, tuple):
                    self.where[tail[0]] = [before, at]
                else:
                    before.append(at)
            offset += len(line)
        for h, found in self.where.items():
            if isinstance(found, list):
                self.where[h] = {orjson.loads(self._read(at))["id"]: at for at in found}

    def _of(self, h: str, sentence_id: str) -> tuple[tuple, bytes] | None:
        """(where, line) of the record of ``h`` that is ``sentence_id``'s, if it has one."""
        found = self.where[h]
        if isinstance(found, dict):
            found = found.get(sentence_id)
            return None if found is None else (found, self._read(found))
        line = self._read(found)
        return (found, line) if record_has_id(line, sentence_id) else None

    def __contains__(self, h: str) -> bool:
        return h in self.where

    def _read(self, at: tuple[int, int, list]) -> bytes:
        self.file.seek(at[0])
        return self.file.read(at[1])

    def line(self, h: str, sentence_id: str, headings: str | None) -> tuple[bytes, list] | None:
        """The stored line and its stats, when it can be written again byte for byte (same id and
        headings: a JSONL record's headings may change while its text and context do not)."""
        if not self.verbatim:
            return None
        found = self._of(h, sentence_id)
        if found is None or len(found[0][2]) != len(_STATS) or orjson.loads(found[1]).get("headings") != headings:
            return None
        return found[1], found[0][2]

    def get(self, h: str, sentence_id: str) -> dict | None:
        """The record of content hash ``h``: the one of ``sentence_id`` where it has one (else the
        sentence was renamed, and the first stands in)."""
        if h not in self.where:
            return None
        found = self._of(h, sentence_id)
        if found is not None:
            return orjson.loads(found[1])
        first = self.where[h]
        return orjson.loads(self._read(first if isinstance(first, tuple) else next(iter(first.values()))))

    def close(self) -> None:
        self.file.close()

