"""Where the two passes of an encode run: the :class:`Backend` protocol and :class:`Local`, this process.

The first pass reads (and validates) the corpus and counts its statistics; the second encodes it.
:func:`~sparc_es.encode.run.encode_corpus` writes the encoded folder itself, whatever backend runs
the passes. What a backend on other machines (``sparc_es.encode.ray.RayBackend``) needs to give
the single process's numbers is public here: :func:`first_pass`, :func:`encode_passages` and
:func:`passage_cached`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from sparc_es.corpus.sources import Source
from sparc_es.layout.passages import PassageCache
from sparc_es.model import EncodedSentence, SparcModel
from sparc_es.model.lexical import CorpusStatistics

if TYPE_CHECKING:
    import numpy as np


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
        return first_pass(source, model)

    def encode(self, model: SparcModel, pieces: list[list[tuple[str, str]]], batch_size: int,
               **options) -> Iterator[list[EncodedSentence]]:
        for pairs in pieces:
            yield list(model.encode(pairs, batch_size=batch_size, **options))


def first_pass(source: Source, model: SparcModel | None) -> tuple[int, CorpusStatistics | None]:
    """The first pass in this process: (sentences, their texts' statistics counted with ``model``'s
    tokenizer when it is given); reading the corpus validates every record."""
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


def encode_passages(model: SparcModel, texts: list[str], batch_size: int) -> np.ndarray:
    """Each passage's f_P as a dense float32 row, in the order of ``texts``, computed as ``model.encode``
    computes a window's new passages (shortest first, ``batch_size`` at a time)."""
    from sparc_es.model import Stages

    # The pipeline's own method, not a copy of it: the same batches are what make a passage's row the
    # single process's, bit for bit.
    scores = model.pipeline.passages(texts, batch_size, None, Stages())
    return scores.cpu().numpy()


def passage_cached(cache: PassageCache, text: str) -> bool:
    """Whether ``cache.get`` would find the passage ``text``: in ``cache``, or in the older folder's
    cache it carries records from (``--update``)."""
    digest = PassageCache.key(text)
    return digest in cache.where or (cache.previous is not None and digest in cache.previous.where)
