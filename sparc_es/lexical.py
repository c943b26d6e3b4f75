"""The lexical term: a BM25 weight over WordPiece tokens, added to a sentence's stored weights.

A model with ``lexical_weight`` alpha > 0 stores, for every token v of the sentence's own text,

    f(v, s) + alpha * idf(v) * tf (k1 + 1) / (tf + k1 (1 - b + b |s| / avgdl))

with tf the count of v in the sentence, |s| its length in WordPiece tokens, idf(v) =
log(1 + (N - N_v + 0.5) / (N_v + 0.5)) and avgdl over the N sentences of the corpus being encoded
(Lucene's BM25 formula, on the tokens the questions are made of). The neural part still chooses
the top K; the lexical term is added to those tokens and to the sentence's own tokens outside
them. Queries stay plain bags: the engines score the sum as they score any impact.

Why: exact matches of tokens that are rare *in the user's corpus* are evidence the neural scores
under-weight; on the validation split the term adds about 1 MRR to the default model
(docs/training.md). The statistics must come from the corpus being indexed: the same term with
the training slice's statistics loses 0.8 MRR on the validation split.

:class:`CorpusStatistics` are counted once per encoded folder (``lexical.json``) and kept by
``encode --update``, so unchanged sentences keep their stored weights; ``--overwrite`` counts afresh.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

import numpy as np

FILE = "lexical.json"


@dataclass
class CorpusStatistics:
    """N sentences, their mean length in tokens and each token's document frequency."""

    sentences: int = 0
    tokens: int = 0  # summed lengths
    df: dict[int, int] = field(default_factory=dict)

    @property
    def avgdl(self) -> float:
        return self.tokens / self.sentences if self.sentences else 1.0

    def add(self, token_ids: Iterable[Iterable[int]]) -> None:
        """Count sentences given as lists of token ids."""
        for ids in token_ids:
            ids = list(ids)
            self.sentences += 1
            self.tokens += len(ids)
            for i in set(ids):
                self.df[i] = self.df.get(i, 0) + 1

    def idf(self, token: int) -> float:
        n = self.df.get(token, 0)
        return math.log(1 + (self.sentences - n + 0.5) / (n + 0.5))

    def write(self, folder: str | Path) -> None:
        df = {str(k): v for k, v in sorted(self.df.items())}
        data = {"sentences": self.sentences, "tokens": self.tokens, "df": df}
        (Path(folder) / FILE).write_text(json.dumps(data, separators=(",", ":")) + "\n")

    @classmethod
    def read(cls, folder: str | Path) -> CorpusStatistics | None:
        path = Path(folder) / FILE
        if not path.is_file():
            return None
        d = json.loads(path.read_text())
        return cls(int(d["sentences"]), int(d["tokens"]), {int(k): int(v) for k, v in d["df"].items()})

    def summary(self) -> dict:
        """What the manifest records about them."""
        return {"sentences": self.sentences, "avgdl": round(self.avgdl, 3), "tokens_seen": len(self.df),
                "counted_in": "sentence text (WordPiece tokens, special tokens left out)"}


def sentence_token_ids(tokenizer, texts: list[str], scorable=None) -> list[list[int]]:
    """Each text's WordPiece ids without special tokens (and, given ``scorable``, only scorable ones)."""
    from .checkpoint import quiet_transformers

    with quiet_transformers():  # no "longer than 512" warning: no model sees these ids
        ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    if scorable is None:
        return ids
    return [[i for i in x if i < len(scorable) and scorable[i]] for x in ids]


def count_corpus(texts: Iterable[str], tokenizer, scorable=None, batch: int = 1024) -> CorpusStatistics:
    """:class:`CorpusStatistics` over a stream of sentence texts."""
    stats = CorpusStatistics()
    texts = iter(texts)
    while chunk := list(islice(texts, batch)):
        stats.add(sentence_token_ids(tokenizer, chunk, scorable))
    return stats


def bm25_weights(ids: list[int], stats: CorpusStatistics, k1: float, b: float) -> dict[int, float]:
    """token id -> idf(v) * saturated tf, for one sentence's token ids."""
    counts: dict[int, int] = {}
    for i in ids:
        counts[i] = counts.get(i, 0) + 1
    norm = k1 * (1 - b + b * len(ids) / stats.avgdl)
    return {i: stats.idf(i) * tf * (k1 + 1) / (tf + norm) for i, tf in counts.items()}


def add_lexical(tokens: np.ndarray, weights: np.ndarray, lexical: dict[int, float], alpha: float
                ) -> tuple[np.ndarray, np.ndarray]:
    """Add ``alpha * lexical`` to a top-K map given as (token ids, weights); tokens outside the map
    join it. Returned sorted by weight, descending."""
    extra = {t: alpha * w for t, w in lexical.items() if w > 0}
    if not extra:
        return tokens, weights
    at = {int(t): j for j, t in enumerate(tokens)}
    weights = weights.astype(np.float64).copy()
    new = []
    for t, w in extra.items():
        if t in at:
            weights[at[t]] += w
        else:
            new.append((t, w))
    if new:
        tokens = np.concatenate([tokens, np.array([t for t, _ in new], dtype=tokens.dtype)])
        weights = np.concatenate([weights, np.array([w for _, w in new])])
    order = np.argsort(-weights, kind="stable")
    return tokens[order], weights[order]
