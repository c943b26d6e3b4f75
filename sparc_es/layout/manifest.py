"""The encoded folder: what ``sparc-es encode`` writes and every engine reads.

Layout::

    ENCODED/meta.json             the manifest: model provenance, K, quantisation factor, counts
    ENCODED/tokenizer/            the tokenizer questions are split with at search time
    ENCODED/sentences.sqlite      id -> text, context, document, offsets (shown with hits)
    ENCODED/vectors/vectors.jsonl Pyserini JsonVectorCollection, integer weights, input order
    ENCODED/passages.bin          with passage expansion: each passage's f_P, for updates (:class:`PassageCache`)

An index built from an encoded folder keeps the same manifest (plus what the build recorded, in
:class:`IndexInfo`), its tokenizer and its sentence store (:func:`copy_into`).

This module owns that layout, the typed :class:`Manifest`, the vector records
(:func:`quantize`, :func:`vector_record`, :func:`iter_vectors`) and re-quantising (:func:`requantize`).

* Quantisation: float f(v, s) -> integer impact ``round(f * factor)``, dropping weights that round
  to zero or below. Lucene impact indexes need integers (floats are truncated, zeros dropped);
  the factor is recorded in the manifest, so scores can be read back in model units
  (integer score / factor).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
import struct
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson

from sparc_es.errors import SparcError, StoreError

# Every file and folder name of an encoded folder or index, here and nowhere else.
META = "meta.json"  # the manifest
VECTORS = "vectors"  # the folder Anserini indexes ...
VECTORS_FILE = "vectors.jsonl"  # ... and the file in it: one record per sentence, input order
SENTENCES = "sentences.sqlite"  # the sentence store (sparc_es.layout.store)
TOKENIZER = "tokenizer"  # the question tokenizer (sparc_es.model.query)
LEXICAL_FILE = "lexical.json"  # the corpus statistics of IDF and the lexical term (sparc_es.model.lexical)
PASSAGES = "passages.bin"  # each passage's f_P, for updates (PassageCache)
PROGRESS = "progress.json"  # an unfinished encode's progress (sparc_es.encode.run)
LUCENE = "lucene"  # an index's Lucene impact index (sparc_es.engines.lucene)
BM25 = "bm25"  # an index's BM25 index of the same texts (sparc_es.engines.bm25)


def es_failures(index: str) -> str:
    """The report of the ids an Elasticsearch load of this folder into ``index`` could not write."""
    return f"es-failures-{index}.jsonl"
FORMAT = "sparc-es-encoded/1"

# Chosen on the validation articles for the default model (docs/evaluation.md): the smallest factor
# whose exact integer scoring is within 0.15 MRR of float scoring (74.59 at 5 against 74.71; 74.24
# at 3, 74.70 at 10). Impacts are written as one posting's term frequency, so a larger factor
# does not add indexing work; it keeps more of the small lexical weights from rounding to 0.
DEFAULT_FACTOR = 5.0
# What the engines can hold of integer impacts (``round(weight * factor)``, those below 1 dropped):
# * Lucene stores an impact as a term frequency, an int: at most 2**31 - 1, and so is the sum of a
#   sentence's impacts (its field length: past it the build fails deep in Java, "too many tokens").
# * Both engines score in 32-bit floats (Lucene's ImpactSimilarity: count x impact, summed), whose
#   integers are exact only up to 2**24; the Lucene engine rounds a score back to its integer, which
#   is right only below that. So a sentence's impacts may sum to at most 2**24 (a question that
#   repeats a token multiplies its impact, so this bound is the least the scores need).
# * Elasticsearch's rank_features keep 9 significant bits of a value: impacts up to 2**9 = 512 are
#   stored exactly, larger ones within 0.4% (the default factor gives the default model's weights,
#   at most about 10, impacts up to about 50). That is not refused here: the engine is chosen
#   later, by ``index``, and Lucene keeps them exactly.
MAX_IMPACT = 2**31 - 1
MAX_IMPACT_SUM = 2**24
# A factor that makes a weight of 1 (a common one) an impact past MAX_IMPACT_SUM cannot be right
# for any model: refused before any sentence is encoded.
MAX_FACTOR = float(MAX_IMPACT_SUM)
_TOO_MUCH = "more than Lucene can store and score exactly (integers up to 2^24 = 16,777,216 in 32-bit float scores)"


def check_factor(factor: float) -> float:
    """``factor`` if it is a usable quantisation factor (finite, above 0, at most
    :data:`MAX_FACTOR`), else a typed error."""
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not math.isfinite(factor) or factor <= 0:
        raise SparcError(f"the quantisation factor must be a finite number above 0 (got {factor!r})")
    if factor > MAX_FACTOR:
        raise SparcError(f"factor {factor:g} makes a weight of 1 an impact of {factor:.3g}, {_TOO_MUCH}; "
                         "lower --factor")
    return float(factor)


def quantize(tokens: Iterable[str], weights: np.ndarray, factor: float) -> dict[str, int]:
    """Integer impacts ``round(weight * factor)``; tokens whose impact is not positive are dropped.
    A sentence whose impacts sum past :data:`MAX_IMPACT_SUM` is a typed error (see there)."""
    impacts = np.rint(np.asarray(weights, dtype=np.float64) * factor)
    total = float(impacts[impacts > 0].sum())  # float: an int64 sum of huge impacts could wrap
    if total > MAX_IMPACT_SUM:
        raise SparcError(f"factor {factor:g} gives a sentence impacts that sum to {total:,.0f}, {_TOO_MUCH}; "
                         "lower --factor")
    return {t: int(q) for t, q in zip(tokens, impacts.astype(np.int64)) if q > 0}


def vector_record(sentence_id: str, text: str, vector: dict[str, int], floats: dict[str, float] | None = None,
                  lexical: dict[str, list[float]] | None = None) -> dict:
    """One Pyserini ``JsonVectorCollection`` document: ``{"id", "contents", "vector": {token: int}}``.

    ``floats`` (the unquantised weights, kept on request for exact scoring and re-quantising) go
    in a ``weights`` field, which Anserini ignores; with a lexical term, ``lexical`` holds each
    lexical token's [neural weight, lexical weight] (``requantize --idf`` weighs the first alone).
    """
    record = {"id": sentence_id, "contents": text, "vector": vector}
    if floats is not None:
        record["weights"] = floats
        if lexical:
            record["lexical"] = lexical
    return record


def record_line(record: dict, content_hash: str | None = None, stats: list[int] | None = None) -> bytes:
    """One line of ``vectors.jsonl``: a :func:`vector_record`, then (when given) ``hash``, the
    sentence's content hash, and ``stats``, its counts, as the last keys, so an update reads them
    back without parsing the vector (:func:`record_tail`)."""
    if content_hash is not None:
        record = {**record, "hash": content_hash, "stats": stats}
    return orjson.dumps(record) + b"\n"


def record_tail(line: bytes) -> tuple[str, list] | None:
    """(content hash, stats) of a line written by :func:`record_line`, read without parsing its
    vector; None for a record written without them."""
    # "hash" and "stats" are the last keys (after the vector, whose tokens may include "hash").
    # Older folders were written with spaces.
    at = line.rfind(b'"hash":')
    try:
        tail = orjson.loads(b"{" + line[at:]) if at >= 0 else {}
    except orjson.JSONDecodeError:  # "hash" was a token of a record without one (requantize writes none)
        return None
    if not isinstance(tail.get("hash"), str):
        return None
    return tail["hash"], tail.get("stats", [])


def record_has_id(line: bytes, sentence_id: str) -> bool:
    """Whether a line written by :func:`record_line` is the record of ``sentence_id``."""
    return line.startswith(b'{"id":' + orjson.dumps(sentence_id) + b",")


@dataclass(frozen=True)
class ModelInfo:
    """Which model produced the weights, and the settings that change them."""

    fingerprint: str
    w: float
    max_over: str
    max_length: int
    head: str = "dot"
    token_weights: bool = False
    passage_weight: float = 0.0
    lexical_weight: float = 0.0
    stem_weight: float = 0.0
    word_weight: float = 0.0
    base_model: dict = field(default_factory=dict)
    adaptation: dict = field(default_factory=dict)

    @classmethod
    def of(cls, model) -> ModelInfo:
        """The provenance of a loaded :class:`~sparc_es.model.SparcModel`."""
        c = model.config
        return cls(fingerprint=model.fingerprint, w=float(model.w.detach()), max_over=c.max_over.value,
                   max_length=c.max_length, head=c.head.value, token_weights=c.token_weights,
                   passage_weight=c.passage_weight, lexical_weight=c.lexical_weight, stem_weight=c.stem_weight,
                   word_weight=c.word_weight,
                   base_model=c.base_model, adaptation=c.adaptation)


@dataclass(frozen=True)
class IndexInfo:
    """What building an index from an encoded folder recorded."""

    engine: str
    documents: int
    build_seconds: float
    bytes: int
    encoded: str
    bm25: dict | None = None  # the BM25 index built beside it: documents, build_seconds, bytes
    built_at: str = ""  # UTC, ISO 8601


@dataclass(frozen=True)
class Manifest:
    """``meta.json`` of an encoded folder or index, typed and read-only."""

    model: ModelInfo
    top_k: int
    factor: float
    corpus: tuple[str, ...]  # what encode read: absolute paths (an older sparc-es: as typed), or a source
    sentences: int
    empty_vectors: int = 0
    postings: int = 0
    max_postings: int = 0  # K bounds the neural part; the lexical term adds the sentence's own tokens
    impact_sum: int = 0
    truncated_sentences: int = 0
    truncated_contexts: int = 0
    truncated_ids: tuple[str, ...] = ()
    seconds: float = 0.0
    reused: int = 0  # sentences an update kept from the previous encode (not encoded again)
    removed: int = 0  # sentences of the previous encode whose ids an update no longer found in the corpus
    sentences_per_second: float | None = None
    median_nonzero_before_top_k: float = 0
    floats: bool = False  # the unquantised weights are kept (exact scoring, requantize)
    idf: bool = False
    idf_weighting: dict | None = None
    lexical: dict | None = None  # the corpus statistics of the model's lexical term (sparc_es.model.lexical)
    control_characters_removed: int = 0  # from the corpus's texts (see corpus.ReadStats)
    control_character_kinds: dict | None = None  # those characters by code point, {"U+0080": 2}
    cleaned_ids: tuple[str, ...] = ()  # the first few sentences (or documents) they were removed from
    cut_texts: int = 0  # texts the readers cut or bounded (see corpus.ReadStats.cut)
    # Each corpus path relative to the folder this manifest is in ("" for what is not a local
    # path): the corpus found again when the two are moved together (written by write()).
    corpus_relative: tuple[str, ...] = ()
    cut_examples: tuple[str, ...] = ()  # the first few, "file:line: what"
    requantized_from: str | None = None
    # Changes whenever the folder's content is written anew (encode, update, requantize): a reader
    # checks it did not change under it (:func:`reading`).
    generation: str = ""
    index: IndexInfo | None = None  # set in an index's manifest
    format: str = FORMAT
    sparc_es: str = ""

    @property
    def retrievable(self) -> int:
        """Sentences with at least one weight: what an index must hold (Lucene drops empty documents)."""
        return self.sentences - self.empty_vectors

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        if self.index is None:
            del d["index"]
        else:
            d["engine"] = self.index.engine  # top-level, as in every manifest written so far
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items() if v is not None}

    @classmethod
    def from_json(cls, d: dict) -> Manifest:
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in d.items() if k in known}
        model_fields = {f.name for f in dataclasses.fields(ModelInfo)}
        kwargs["model"] = ModelInfo(**{k: v for k, v in d["model"].items() if k in model_fields})
        for name in ("corpus", "truncated_ids", "cleaned_ids", "cut_examples", "corpus_relative"):
            kwargs[name] = tuple(kwargs.get(name, ()))
        if d.get("index"):
            kwargs["index"] = IndexInfo(**{"engine": d.get("engine", "lucene"), **d["index"]})
        return cls(**kwargs)

    @classmethod
    def read(cls, folder: str | Path) -> Manifest:
        """The manifest of a finished encoded folder or index."""
        path = Path(folder) / META
        if not path.is_file():
            raise StoreError(f"{folder}: not a finished sparc-es encoded folder or index (no {META})")
        try:
            return cls.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, TypeError, KeyError) as e:
            raise StoreError(f"{path}: unreadable manifest ({e})") from None

    def write(self, folder: str | Path) -> None:
        """Write ``folder/meta.json``, the corpus paths also relative to ``folder``."""
        here = Path(folder).resolve()
        relative = tuple(os.path.relpath(c, here) if os.path.isabs(c) else "" for c in self.corpus)
        d = dataclasses.replace(self, corpus_relative=relative).to_json()
        # allow_nan=False: a bare NaN is not JSON (engines and other tools refuse the file)
        (Path(folder) / META).write_text(json.dumps(d, indent=2, allow_nan=False) + "\n")

    def corpus_roots(self, folder: str | Path) -> list[Path]:
        """The corpus paths of this manifest, read from ``folder``: each where it was recorded, else
        where it lies relative to ``folder`` (both moved together), else as recorded (gone)."""
        roots = []
        for i, c in enumerate(self.corpus):
            path = Path(c)
            rel = self.corpus_relative[i] if i < len(self.corpus_relative) else ""
            if not path.exists() and rel and (Path(folder) / rel).exists():
                path = Path(os.path.normpath(Path(folder) / rel))
            roots.append(path)
        return roots

    def replace(self, **changes) -> Manifest:
        return dataclasses.replace(self, **changes)


class PassageCache:
    """Each passage's f_P (:meth:`~sparc_es.model.SparcModel.passage_scores`) by the hash of its text,
    kept in an encoded folder so an update does not encode a passage again when a sentence of it
    changes but the passage does not (a passage's transformer and vocabulary-wide product cost more
    than its sentence's).

    A passage's f_P is exactly zero but for a few hundred tokens, so each record stores those (a
    20-byte SHA-1 of the text, a count n, n int32 token ids, n float32 weights: about 1.8 KB for
    the default model) and :meth:`get` gives back the very row that was computed. The file is only
    appended to; a record cut off by a kill is dropped when the file is opened again. ``previous``:
    an older folder's cache to read from; :meth:`get` and :meth:`keep` copy what they use from it
    into this one.
    """

    _HEAD = struct.Struct("<20sI")

    def __init__(self, path: str | Path, previous: PassageCache | None = None, write: bool = True) -> None:
        self.path, self.previous = Path(path), previous
        self.where: dict[bytes, tuple[int, int]] = {}
        self.file = open(self.path, "a+b" if write else "rb") if write or self.path.is_file() else None
        if self.file is None:
            return
        size = self.file.seek(0, 2)
        offset = self.file.seek(0)
        while offset + self._HEAD.size <= size:  # headers only: the weights stay on disk
            digest, n = self._HEAD.unpack(self.file.read(self._HEAD.size))
            if offset + self._HEAD.size + 8 * n > size:
                break
            self.where[digest] = (offset + self._HEAD.size, n)
            offset = self.file.seek(8 * n, 1)
        if write and offset < size:
            self.file.truncate(offset)

    @staticmethod
    def key(text: str) -> bytes:
        return hashlib.sha1(text.encode("utf-8")).digest()

    def __len__(self) -> int:
        return len(self.where)

    def get(self, text: str, size: int) -> np.ndarray | None:
        """The passage's f_P as a dense float32 row of ``size`` tokens, or None if it was never stored."""
        digest = self.key(text)
        self._carry(digest)
        found = self._read(digest)
        if found is None:
            return None
        row = np.zeros(size, dtype=np.float32)
        row[found[0]] = found[1]
        return row

    def put(self, text: str, row: np.ndarray) -> None:
        """Store a passage's dense f_P row (its non-zeros)."""
        digest = self.key(text)
        if digest not in self.where:
            ids = np.flatnonzero(row).astype("<i4")
            self._append(digest, ids, row[ids].astype("<f4"))

    def keep(self, text: str) -> None:
        """Copy a passage's record from ``previous`` (a kept sentence's passage, for the next update)."""
        self._carry(self.key(text))

    def _carry(self, digest: bytes) -> None:
        if digest not in self.where and self.previous is not None:
            found = self.previous._read(digest)
            if found is not None:
                self._append(digest, *found)

    def _read(self, digest: bytes) -> tuple[np.ndarray, np.ndarray] | None:
        if digest not in self.where:
            return None
        offset, n = self.where[digest]
        self.file.seek(offset)
        data = self.file.read(8 * n)
        return np.frombuffer(data, "<i4", n), np.frombuffer(data, "<f4", n, 4 * n)

    def _append(self, digest: bytes, ids: np.ndarray, weights: np.ndarray) -> None:
        self.file.seek(0, 2)
        offset = self.file.tell()
        self.file.write(self._HEAD.pack(digest, len(ids)) + ids.astype("<i4").tobytes()
                        + weights.astype("<f4").tobytes())
        self.where[digest] = (offset + self._HEAD.size, len(ids))

    def flush(self) -> None:
        if self.file is not None:
            self.file.flush()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()

    def __enter__(self) -> PassageCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def new_generation() -> str:
    """A fresh :attr:`Manifest.generation`."""
    return uuid.uuid4().hex


@contextmanager
def reading(folder: str | Path) -> Iterator[Manifest]:
    """The manifest of a finished encoded folder, for a block that reads its files: raises
    :class:`StoreError` at the end if the folder was replaced meanwhile (``encode --update``
    swaps in a new folder when it finishes), so a reader never mixes two versions of a corpus."""
    path = Path(folder) / META
    before = path.read_bytes() if path.is_file() else None
    manifest = Manifest.read(folder)
    yield manifest
    try:
        after = path.read_bytes()
    except OSError:
        after = None
    if after != before:
        raise StoreError(f"{folder}: was replaced while it was read (an encode --update finished meanwhile); "
                         "run the same command again")


def id_digest(ids: Iterable[str]) -> tuple[int, int]:
    """How many ``ids`` and the sum of their 128-bit hashes: the same for the same ids in any order,
    and different (but for a 2^-128 chance) when one is swapped for another, in constant memory."""
    n = total = 0
    for i in ids:
        n += 1
        total += int.from_bytes(hashlib.blake2b(i.encode("utf-8"), digest_size=16).digest(), "big")
    return n, total % (1 << 128)


def iter_vectors(folder: str | Path) -> Iterator[dict]:
    """Yield the ``JsonVectorCollection`` records of an encoded folder, in order."""
    with open(Path(folder) / VECTORS / VECTORS_FILE, "rb") as f:
        for line in f:
            yield orjson.loads(line)


def copy_into(encoded: str | Path, index: str | Path) -> None:
    """Copy what a search needs besides the engine's own files: the question tokenizer and the
    sentence store (texts and offsets shown with hits)."""
    encoded, index = Path(encoded), Path(index)
    shutil.copytree(encoded / TOKENIZER, index / TOKENIZER)
    shutil.copy2(encoded / SENTENCES, index / SENTENCES)
    if (encoded / LEXICAL_FILE).is_file():  # the lexical term's corpus statistics: an update keeps them
        shutil.copy2(encoded / LEXICAL_FILE, index / LEXICAL_FILE)


