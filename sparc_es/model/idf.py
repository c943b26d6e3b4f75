"""IDF weighting of stored weights (paper 004, eq. 6-7), shared by ``encode --idf`` and ``requantize --idf``.

Every kept weight (after the top-K cut) is multiplied by log(N / N_v) over the corpus: N
sentences, N_v of them with token v in their text, and a factor of 1 for tokens that occur in none.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from sparc_es.model.lexical import CorpusStatistics, count_corpus

# What `sparc-es encode` does unless told otherwise: IDF weighting on. Chosen by the worst validation
# domain's gain over BM25 (docs/evaluation.md, "Defaults"): with the one-request BM25 sum it gained on
# every domain, most on documentation. The library call leaves it to the caller (idf=False).
IDF_DEFAULT = True


def idf_weights(df: np.ndarray, n: int) -> np.ndarray:
    """log(N / N_v), and 1 where N_v = 0 (paper 004, eq. 6)."""
    out = np.ones(len(df), dtype=np.float64)
    seen = df > 0
    out[seen] = np.log(n / df[seen])
    return out


def idf_vector(texts: Iterable[str], tokenizer, vocab: int) -> tuple[np.ndarray, dict]:
    """(one IDF factor per vocabulary id, the record kept in the manifest) over ``texts``."""
    return idf_from_statistics(count_corpus(texts, tokenizer), vocab)


def idf_from_statistics(statistics: CorpusStatistics, vocab: int) -> tuple[np.ndarray, dict]:
    """The same from corpus statistics already counted (``encode``'s first pass)."""
    df = np.zeros(vocab, dtype=np.int64)
    for token, n in statistics.df.items():
        if token < vocab:
            df[token] = n
    return idf_weights(df, statistics.sentences), {
        "documents": statistics.sentences, "counted_in": "sentence text (WordPiece tokens)",
        "tokens_seen": int((df > 0).sum()), "formula": "log(N / N_v), 1 where N_v = 0"}
