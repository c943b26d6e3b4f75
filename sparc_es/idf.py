"""IDF weighting of stored weights (paper 004, eq. 6-7), shared by ``encode --idf`` and ``requantize --idf``.

Every kept weight (after the top-K cut) is multiplied by log(N / N_v) over the corpus: N
sentences, N_v of them with token v in their text, and a factor of 1 for tokens that occur in none.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice

import numpy as np


def document_frequencies(texts: Iterable[str], tokenizer, batch: int = 1024) -> tuple[np.ndarray, int]:
    """(N_v for every vocabulary id, N): how many of ``texts`` have token v."""
    df = np.zeros(len(tokenizer), dtype=np.int64)
    n = 0
    records = iter(texts)
    while chunk := list(islice(records, batch)):
        for ids in tokenizer(chunk, add_special_tokens=False)["input_ids"]:
            df[np.unique(np.asarray(ids, dtype=np.int64))] += 1
        n += len(chunk)
    return df, n


def idf_weights(df: np.ndarray, n: int) -> np.ndarray:
    """log(N / N_v), and 1 where N_v = 0 (paper 004, eq. 6)."""
    out = np.ones(len(df), dtype=np.float64)
    seen = df > 0
    out[seen] = np.log(n / df[seen])
    return out


def idf_vector(texts: Iterable[str], tokenizer, vocab: int) -> tuple[np.ndarray, dict]:
    """(one IDF factor per vocabulary id, the record kept in the manifest) over ``texts``."""
    from .checkpoint import quiet_transformers

    with quiet_transformers():
        df, n = document_frequencies(texts, tokenizer)
    weights = np.ones(vocab)
    weights[: min(vocab, len(df))] = idf_weights(df, n)[:vocab]
    return weights, {"documents": n, "counted_in": "sentence text (WordPiece tokens)",
                     "tokens_seen": int((df > 0).sum()), "formula": "log(N / N_v), 1 where N_v = 0"}
