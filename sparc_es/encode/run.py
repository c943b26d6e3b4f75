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
from typing import Protocol

import orjson

from sparc_es import __version__
from sparc_es.corpus.sources import Files, ReadStats, Sentence, Source, as_source
from sparc_es.errors import SparcError, StoreError
from sparc_es.layout import ownership as folders
from sparc_es.layout.locks import exclusive
from sparc_es.layout.manifest import Manifest, ModelInfo, new_generation
from sparc_es.layout.names import LEXICAL_FILE, META, PASSAGES, PROGRESS, SENTENCES, TOKENIZER, VECTORS, VECTORS_FILE
from sparc_es.layout.passages import PassageCache
from sparc_es.layout.records import (
    DEFAULT_FACTOR,
    check_factor,
    quantize,
    record_has_id,
    record_line,
    record_tail,
    vector_record,
)
from sparc_es.layout.store import SentenceStore
from sparc_es.model import EncodedSentence, SparcModel, passage_text
from sparc_es.model.idf import idf_from_statistics
from sparc_es.model.lexical import CorpusStatistics


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


def _settings(model: SparcModel, factor: float, corpus: list[str], keep_floats: bool, idf: bool,
              statistics: CorpusStatistics | None) -> dict:
    """What an interrupted encode must match to be resumed (the manifest's first fields, and a
    fingerprint of the corpus statistics its weights were computed with)."""
    return {"model": dataclasses.asdict(ModelInfo.of(model)), "top_k": model.config.top_k, "factor": factor,
            "corpus": corpus, "floats": keep_floats, "idf": idf, "statistics": _fingerprint(statistics)}


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
    print(f"sparc-es encode: {message}", file=sys.stderr, flush=True)


# What `sparc-es encode` does unless told otherwise: IDF weighting on. Chosen by the worst validation
# domain's gain over BM25 (docs/evaluation.md, "Defaults"): with the hybrid below it gained on
# every domain, most on documentation. The library call leaves it to the caller (idf=False).
IDF_DEFAULT = True


class Backend(Protocol):
    """Where the two passes over a corpus run: this process (:class:`Local`, the default) or many
    (``sparc_es.encode.ray.RayBackend``). Whatever runs them, the encoded folder is written here,
    in input order, with the same records, progress and resume."""

    #: Pieces of ``batch_size * 8`` sentences handed to :meth:`encode` at a time.
    pieces_at_once: int

    def count(self, source: Source, model: SparcModel | None) -> tuple[int, CorpusStatistics | None]:
        """(sentences, the corpus statistics counted with ``model``'s tokenizer, or None without a model)."""

    def encode(self, model: SparcModel, pieces: list[list[tuple[str, str]]], batch_size: int,
               **options) -> Iterator[list[EncodedSentence]]:
        """Each piece's (sentence, context) pairs encoded as ``model.encode(pairs, batch_size,
        **options)`` would, yielded piece by piece in order."""


class Local:
    """The passes in this process: the default :class:`Backend`."""

    pieces_at_once = 1

    def count(self, source: Source, model: SparcModel | None) -> tuple[int, CorpusStatistics | None]:
        return _first_pass(source, model)

    def encode(self, model: SparcModel, pieces: list[list[tuple[str, str]]], batch_size: int,
               **options) -> Iterator[list[EncodedSentence]]:
        for pairs in pieces:
            yield list(model.encode(pairs, batch_size=batch_size, **options))


def encode_corpus(corpus: Source | Iterable[str | Path], output: str | Path, model: SparcModel,
                  factor: float = DEFAULT_FACTOR, batch_size: int = 32, shard_size: int = 10_000,
                  shard_seconds: float = 5.0, overwrite: bool = False, progress: bool = True,
                  keep_floats: bool = False, idf: bool = False, update: bool = False,
                  backend: Backend | None = None) -> Manifest:
    """Encode every sentence of ``corpus`` (file and folder paths, or a :class:`~sparc_es.corpus.sources.Source`
    such as an Elasticsearch index) into ``output``; returns the manifest written.

    ``keep_floats`` also stores each sentence's unquantised weights (exact scoring, re-quantising);
    ``idf`` weights them by the corpus's IDF first (see the module docstring). Work is committed
    in shards of at most ``shard_size`` sentences or ``shard_seconds`` of encoding, whichever
    comes first, so an interrupted run loses only the shard in flight and resumes when run again.

    ``update``: ``output`` may hold a finished encode of an earlier version of the corpus; a
    sentence whose text and context are unchanged keeps its stored weights (same model, K and
    factor), only new and changed sentences are encoded, and sentences no longer in the corpus
    are left out. The new folder is built beside the old one and replaces it when complete.

    ``backend`` runs the corpus statistics and the encoding (default: this process, :class:`Local`).
    """
    source = as_source(corpus)
    backend = backend or Local()
    factor = check_factor(factor)
    if batch_size < 1 or shard_size < 1 or not shard_seconds > 0:
        raise SparcError("batch size, shard size and shard seconds must be positive")
    if update and overwrite:
        raise SparcError("--update keeps the weights of unchanged sentences and --overwrite encodes everything "
                         "again: pass one of them")
    out = Path(output)
    if isinstance(source, Files):  # an output inside a corpus folder would be read back as corpus
        folders.check_apart(out, source.paths, "the output folder")
    with exclusive(out, "sparc-es encode"):
        try:
            _finish_interrupted_update(out)
            if update and (out / META).is_file():
                # No validation pass: the old folder is replaced only once the new one is complete, so a
                # bad line stops the update with the old folder intact. Its size stands in for the total.
                return _update(source, out, model, factor, Manifest.read(out).sentences, batch_size, shard_size,
                               shard_seconds, progress, keep_floats, idf, backend)
            if overwrite:
                folders.check_removable(out)  # refused before any work if sparc-es did not make the folder
            # Validates every record before anything is written (a bad line fails in seconds, not after
            # hours of encoding); also counts the corpus statistics of IDF weighting and the lexical term.
            total, statistics = backend.count(source, model if model.config.lexical or idf else None)
            if overwrite:
                folders.remove(out)
            settings = _settings(model, factor, source.describe(), keep_floats, idf, statistics)
            return _encode(source, out, model, settings, total, batch_size, shard_size, shard_seconds,
                           progress, keep_floats, idf, backend, corpus=statistics)
        except OSError as e:  # disk full, permissions: say which folder, and that a rerun resumes
            raise StoreError(f"{e.filename or out}: {e.strerror or e}; the work done so far is kept: fix this "
                             "and run the same command again to resume") from None


def _first_pass(source: Source, model: SparcModel | None) -> tuple[int, CorpusStatistics | None]:
    """(sentences, their texts' statistics counted with ``model``'s tokenizer when it is given)."""
    if model is None:
        return sum(1 for _ in source.read()), None
    total = 0

    def texts():
        nonlocal total
        for s in source.read():
            total += 1
            yield s.text

    statistics = model.count_corpus(texts())  # counted first: the tuple would read total before the pass
    return total, statistics


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
        self.where: dict[str, tuple[int, int, list]] = {}
        offset = 0
        for line in self.file:
            tail = record_tail(line)
            if tail is not None:
                self.where[tail[0]] = (offset, len(line), tail[1])
            offset += len(line)

    def __contains__(self, h: str) -> bool:
        return h in self.where

    def line(self, h: str, sentence_id: str) -> tuple[bytes, list] | None:
        """The stored line and its stats, when it can be written again byte for byte."""
        offset, length, counts = self.where[h]
        if not self.verbatim or len(counts) != len(_STATS):
            return None
        self.file.seek(offset)
        line = self.file.read(length)
        return (line, counts) if record_has_id(line, sentence_id) else None

    def get(self, h: str) -> dict | None:
        if h not in self.where:
            return None
        offset, length, _ = self.where[h]
        self.file.seek(offset)
        return orjson.loads(self.file.read(length))

    def close(self) -> None:
        self.file.close()


_AGAIN = "encode it again: the same command without --update, with --overwrite"


def _update(source: Source, out: Path, model: SparcModel, factor: float, total: int, batch_size: int,
            shard_size: int, shard_seconds: float, progress: bool, keep_floats: bool, idf: bool,
            backend: Backend) -> Manifest:
    import shutil

    old = Manifest.read(out)
    if idf != old.idf:
        raise StoreError(f"{out}: was encoded {'with' if old.idf else 'without'} IDF weighting; update it the same "
                         f"way ({'--idf' if old.idf else '--no-idf'}) or {_AGAIN}")
    same = (old.model.fingerprint == model.fingerprint and old.top_k == model.config.top_k
            and old.factor == factor and (old.floats or not keep_floats))
    if not same:
        raise StoreError(f"{out}: was encoded with another model, K or factor (or without float weights); {_AGAIN}")
    # The corpus statistics of the first encode are kept (the lexical term's and IDF's), so unchanged
    # sentences keep their weights and only new and changed ones are encoded.
    corpus = CorpusStatistics.read(out) if model.config.lexical or idf else None
    if (model.config.lexical or idf) and corpus is None:
        raise StoreError(f"{out}: has no {LEXICAL_FILE} (the corpus statistics of its lexical term or IDF); {_AGAIN}")
    settings = _settings(model, factor, source.describe(), keep_floats, idf, corpus)
    work, retired = _update_folders(out)
    cache = _Cache(out, verbatim=old.floats == keep_floats)
    passages = PassageCache(out / PASSAGES, write=False) if model.config.passage_weight else None
    try:
        manifest = _encode(source, work, model, settings, total, batch_size, shard_size, shard_seconds,
                           progress, keep_floats, idf, backend, cache, corpus, passages, scratch=True,
                           previous=out / SENTENCES)
    finally:
        cache.close()
        if passages is not None:
            passages.close()
    shutil.rmtree(retired, ignore_errors=True)
    out.rename(retired)  # a kill from here to the end is completed by the next run (_finish_interrupted_update)
    work.rename(out)
    shutil.rmtree(retired)
    return manifest


def _update_folders(out: Path) -> tuple[Path, Path]:
    """(where an update of ``out`` is built, where the folder it replaces goes while it is swapped)."""
    return out.parent / f".{out.name}.update", out.parent / f".{out.name}.old"


def _finish_interrupted_update(out: Path) -> None:
    """Complete an update killed between its two renames, or put the old folder back."""
    import shutil

    work, retired = _update_folders(out)
    if not retired.exists():
        return
    if out.exists():  # killed after the swap, before the old folder was removed
        shutil.rmtree(retired)
    elif (work / META).is_file():
        work.rename(out)
        shutil.rmtree(retired)
        _notice(f"{out}: completed the update that was interrupted while it replaced the folder")
    else:
        retired.rename(out)
        _notice(f"{out}: put back the folder an interrupted update had moved aside")


def _encode(source: Source, out: Path, model: SparcModel, settings: dict, total: int, batch_size: int,
            shard_size: int, shard_seconds: float, progress: bool, keep_floats: bool, idf: bool,
            backend: Backend, cache: _Cache | None = None, corpus: CorpusStatistics | None = None,
            old_passages: PassageCache | None = None, scratch: bool = False,
            previous: Path | None = None) -> Manifest:
    """Encode into ``out``, resuming an interrupted run of the same settings on the same input.
    ``scratch``: ``out`` is an update's own work folder, discarded when it cannot be resumed.
    ``previous``: the sentence store of the folder an update replaces (its ids not in ``out`` are
    counted as ``removed``)."""
    from tqdm import tqdm

    stats, done, done_bytes, digest = _prepare(out, settings, scratch)
    cleaned = ReadStats()  # control characters removed: counted over every record, skipped ones too
    records = source.read(cleaned)
    read = hashlib.sha256()  # the fingerprint of the sentences committed, in input order
    if done and not _same_start(records, done, read, digest):
        why = (f"the corpus changed since the interrupted encode (its first {done} sentences are not the ones "
               "encoded then)" if digest else "the interrupted encode was made by an older sparc-es, which kept no "
               "fingerprint of what it read")
        _notice(f"{out}: {why}: starting again from the beginning")
        stats, done, done_bytes = _restart(out, settings)
        cleaned = ReadStats()
        records = source.read(cleaned)
        read = hashlib.sha256()
    passages = PassageCache(out / PASSAGES, previous=old_passages) if model.config.passage_weight else None
    idf_weights, extra_meta = None, {}
    if idf:
        # the vocabulary may be longer than the tokenizer (padded vocabularies)
        idf_weights, record = idf_from_statistics(corpus, model.embeddings.shape[0])
        extra_meta["idf_weighting"] = record
    if model.config.lexical or idf:
        corpus.write(out)  # kept by --update
    if model.config.lexical:
        extra_meta["lexical"] = {**corpus.summary(), "weight": model.config.lexical_weight,
                                 "stem_weight": model.config.stem_weight, "word_weight": model.config.word_weight,
                                 "k1": model.config.lexical_k1, "b": model.config.lexical_b}
    else:
        corpus = None  # counted for IDF weighting only
    store = SentenceStore(out / SENTENCES, create=True)
    # Updated per batch (not per 256-sentence window) with a smoothed rate, so the first ETA is not hours.
    bar = tqdm(total=total, initial=done, unit="sent", desc="encode", disable=not progress, file=sys.stderr,
               dynamic_ncols=True, smoothing=0.1, mininterval=0.5)
    started = time.perf_counter() - stats.seconds
    piece = batch_size * 8  # what model.encode sorts by length at a time
    with open(out / VECTORS / VECTORS_FILE, "a+b") as vectors, (
            contextlib.nullcontext() if passages is None else passages):
        vectors.truncate(done_bytes)  # drop a shard that was cut off half-written
        while True:
            shard: list[Sentence] = []
            shard_started = time.perf_counter()
            while len(shard) < shard_size and time.perf_counter() - shard_started < shard_seconds:
                pieces = []
                for _ in range(backend.pieces_at_once):
                    batch = list(islice(records, min(piece, shard_size - len(shard) - sum(map(len, pieces)))))
                    if not batch:
                        break
                    pieces.append(batch)
                if not pieces:
                    break
                _write_pieces(vectors, pieces, model, backend, settings["factor"], batch_size, stats, bar,
                              keep_floats, idf_weights, cache, corpus, passages)
                shard += [s for batch in pieces for s in batch]
            if not shard:
                break
            vectors.flush()
            os.fsync(vectors.fileno())
            if passages is not None:  # no fsync: a lost passage is only encoded again
                passages.flush()
            store.add(shard)
            for s in shard:
                read.update(_read_key(s))
            done += len(shard)
            stats.seconds = time.perf_counter() - started
            _save_progress(out, settings, done, vectors.tell(), stats, read.hexdigest())
    bar.total = bar.n  # an update's total was the old folder's size
    bar.close()
    stored = len(store)
    try:
        removed = store.missing(previous) if previous is not None else 0
    finally:
        store.close()
    if stored != stats.sentences:  # the store's ids are unique: a repeated id would show here
        raise StoreError(f"{out}: {stats.sentences} sentences were encoded but the sentence store holds {stored} "
                         "ids; encode again with --overwrite")
    model.tokenizer.save_pretrained(out / TOKENIZER)
    manifest = Manifest.from_json({"sparc_es": __version__, **settings, **extra_meta, **stats.to_json(),
                                   "removed": removed, "control_characters_removed": cleaned.control_characters,
                                   "control_character_kinds": cleaned.control_kinds or None,
                                   "cleaned_ids": cleaned.examples, "cut_texts": cleaned.cut,
                                   "cut_examples": cleaned.cut_examples, "generation": new_generation()})
    manifest.write(out)
    (out / PROGRESS).unlink(missing_ok=True)
    return manifest


def _save_progress(out: Path, settings: dict, done: int, size: int, stats: EncodeStats, read: str) -> None:
    tmp = out / (PROGRESS + ".tmp")  # replaced atomically: a kill never leaves half a file
    tmp.write_text(json.dumps({"settings": settings, "sentences": done, "bytes": size, "stats": stats.state(),
                               "read": read}))
    tmp.replace(out / PROGRESS)


def _prepare(out: Path, settings: dict, scratch: bool = False) -> tuple[EncodeStats, int, int, str | None]:
    """Start fresh, or pick up an interrupted encode made with the same settings.

    Returns (stats so far, sentences done, bytes of vectors written for them, the fingerprint of
    those sentences). An interrupted encode made with other chosen settings is refused, unless
    ``scratch`` (an update's own work folder: it is started again).
    """
    if (out / META).exists():
        raise StoreError(f"{out}: already holds a finished encode; pass --overwrite to replace it "
                         "(or --update to encode only what changed)")
    progress = out / PROGRESS
    if progress.is_file():
        try:
            state = json.loads(progress.read_text())
            done, before = int(state["sentences"]), state["settings"]
        except (ValueError, KeyError, TypeError):
            state, done, before = {}, 0, {}
        chosen = all(before.get(k) == settings[k] for k in _CHOSEN)
        if chosen and before.get("statistics") == settings["statistics"] and "stats" in state:
            return EncodeStats.from_state(state["stats"]), done, int(state["bytes"]), state.get("read")
        if done and not chosen and not scratch:
            raise StoreError(f"{out}: holds an unfinished encode made with other settings "
                             "(model, K, factor, --keep-floats or IDF); pass --overwrite to start again")
        if done:
            why = ("an interrupted update with other settings" if not chosen else
                   "the corpus changed since the interrupted encode (its statistics differ)")
            _notice(f"{out}: {why}: starting again from the beginning")
    elif out.exists() and any(p.name != folders.MARKER for p in out.iterdir()):
        raise StoreError(f"{out}: folder is not empty; choose a new folder or pass --overwrite")
    return (*_restart(out, settings), None)


def _restart(out: Path, settings: dict) -> tuple[EncodeStats, int, int]:
    """An empty encoded folder in ``out`` (whatever sparc-es had begun there removed), ready to resume."""
    if (out / PROGRESS).is_file():
        folders.remove(out)
    folders.claim(out, "encode")
    (out / VECTORS).mkdir(exist_ok=True)
    stats = EncodeStats()
    _save_progress(out, settings, 0, 0, stats, hashlib.sha256().hexdigest())  # from here on, a rerun resumes
    return stats, 0, 0


def _same_start(records: Iterable[Sentence], n: int, read, digest: str | None) -> bool:
    """Whether the first ``n`` of ``records`` are the ones fingerprinted in ``digest`` (read into ``read``)."""
    seen = 0
    for s in islice(records, n):
        read.update(_read_key(s))
        seen += 1
    return seen == n and digest is not None and read.hexdigest() == digest


def _write_pieces(f, pieces: list[list[Sentence]], model: SparcModel, backend: Backend, factor: float,
                  batch_size: int, stats: EncodeStats, bar, keep_floats: bool = False, idf_weights=None,
                  cache: _Cache | None = None, corpus: CorpusStatistics | None = None,
                  passages: PassageCache | None = None) -> None:
    """Encode ``pieces`` (what an update kept is not encoded again) and append their records."""
    hashes = [[content_hash(s) for s in batch] for batch in pieces]
    known = [[cache is not None and h in cache for h in hs] for hs in hashes]
    fresh = [[(s.text, s.context) for s, k in zip(batch, ks) if not k] for batch, ks in zip(pieces, known)]
    encoded = backend.encode(model, fresh, batch_size, idf=idf_weights, on_batch=bar.update, corpus=corpus,
                             passage_cache=passages)
    for batch, hs, ks in zip(pieces, hashes, known):
        _write_piece(f, batch, hs, ks, iter(next(encoded)), factor, stats, bar, keep_floats, cache, passages)


def _write_piece(f, batch: list[Sentence], hashes: list[str], known: list[bool], encoded: Iterator[EncodedSentence],
                 factor: float, stats: EncodeStats, bar, keep_floats: bool, cache: _Cache | None,
                 passages: PassageCache | None) -> None:
    lines = []
    for s, h, kept in zip(batch, hashes, known):
        same = cache.line(h, s.id) if kept else None
        if same is not None:  # unchanged text, context and id, same model, K and factor: the line stands
            line, counts = same
            lines.append(line)
        else:
            if kept:  # unchanged weights, but an older record or a new id: written again
                old = cache.get(h)
                vector, floats = old["vector"], old.get("weights") if keep_floats else None
                parts = old.get("lexical")
                counts = old["stats"][:3]
            else:
                enc = next(encoded)
                vector = quantize(enc.tokens, enc.weights, factor)
                floats = dict(zip(enc.tokens, enc.weights.tolist())) if keep_floats else None
                parts = enc.lexical and {t: list(p) for t, p in enc.lexical.items()}
                counts = [enc.nonzero, enc.truncated_sentence, enc.truncated_context]
            counts = [*counts, len(vector), sum(vector.values())]
            lines.append(record_line(vector_record(s.id, s.text, vector, floats, parts), h, counts))
        if kept:
            stats.reused += 1
            bar.update(1)
            if passages is not None:  # for the next update
                passages.keep(passage_text(s.text, s.context))
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
    f.write(b"".join(lines))
