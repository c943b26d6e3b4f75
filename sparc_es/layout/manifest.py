"""The manifest (``meta.json``) of an encoded folder or index, typed: which model wrote the weights
(:class:`ModelInfo`), what the index build recorded (:class:`IndexInfo`), one generation per
reader (:func:`reading`), and :func:`copy_into` an index.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sparc_es.errors import StoreError
from sparc_es.layout.names import FORMAT, LEXICAL_FILE, META, SENTENCES, TOKENIZER


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
    lexical_skips_stop_words: bool = False
    base_model: dict = field(default_factory=dict)
    adaptation: dict = field(default_factory=dict)

    @classmethod
    def of(cls, model) -> ModelInfo:
        """The provenance of a loaded :class:`~sparc_es.model.SparcModel`."""
        c = model.config
        return cls(fingerprint=model.fingerprint, w=float(model.w.detach()), max_over=c.max_over.value,
                   max_length=c.max_length, head=c.head.value, token_weights=c.token_weights,
                   passage_weight=c.passage_weight, lexical_weight=c.lexical_weight, stem_weight=c.stem_weight,
                   word_weight=c.word_weight, lexical_skips_stop_words=c.lexical_skips_stop_words,
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
    renamed: int = 0  # of those, the ones kept under a new id (their file was renamed or moved)
    removed: int = 0  # sentences of the previous encode whose ids an update no longer found in the corpus
    sentences_per_second: float | None = None
    median_nonzero_before_top_k: float = 0
    floats: bool = False  # the unquantised weights are kept (exact scoring, requantize)
    min_impact: int = 1  # impacts below it were dropped (static pruning; 1: none)
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
    empty_files: int = 0  # corpus files that gave no sentence (see corpus.ReadStats.empty_files)
    empty_file_examples: tuple[str, ...] = ()  # the first few
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
        for name in ("corpus", "truncated_ids", "cleaned_ids", "cut_examples", "corpus_relative",
                     "empty_file_examples"):
            kwargs[name] = tuple(kwargs.get(name, ()))
        if d.get("index"):
            kwargs["index"] = IndexInfo(**{"engine": d.get("engine", "lucene"), **d["index"]})
        return cls(**kwargs)

    @classmethod
    def read(cls, folder: str | Path) -> Manifest:
        """The manifest of a finished encoded folder or index."""
        path = Path(folder) / META
        if not Path(folder).exists():
            raise StoreError(f"{folder}: no such folder")
        if not path.is_file():
            raise StoreError(f"{folder}: not a finished sparc-es encoded folder or index (no {META})")
        try:
            return cls.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, TypeError, KeyError) as e:
            raise StoreError(f"{path}: unreadable manifest ({e})") from None

    @classmethod
    def read_encoded(cls, folder: str | Path) -> Manifest:
        """The manifest of a finished encoded folder; an index is refused, naming the folder it was
        built from (an index holds no vectors to build from)."""
        manifest = cls.read(folder)
        if manifest.index is not None:
            raise StoreError(f"{folder}: an index, not an encoded folder: build from the encoded folder it was "
                             f"built from ({manifest.index.encoded})")
        return manifest

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


def copy_into(encoded: str | Path, index: str | Path) -> None:
    """Copy what a search needs besides the engine's own files: the question tokenizer and the
    sentence store (texts and offsets shown with hits)."""
    encoded, index = Path(encoded), Path(index)
    shutil.copytree(encoded / TOKENIZER, index / TOKENIZER)
    shutil.copy2(encoded / SENTENCES, index / SENTENCES)
    if (encoded / LEXICAL_FILE).is_file():  # the lexical term's corpus statistics: an update keeps them
        shutil.copy2(encoded / LEXICAL_FILE, index / LEXICAL_FILE)
