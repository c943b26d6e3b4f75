"""The vector records of ``vectors.jsonl``: quantisation (float f(v, s) -> integer impact), the one
record codec, and reading the records back.

* Quantisation: float f(v, s) -> integer impact ``round(f * factor)``, dropping weights that round
  to zero or below. Lucene impact indexes need integers (floats are truncated, zeros dropped);
  the factor is recorded in the manifest, so scores can be read back in model units
  (integer score / factor).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import orjson

from sparc_es.errors import SparcError, StoreError
from sparc_es.layout.names import VECTORS, VECTORS_FILE

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


def check_min_impact(min_impact: int) -> int:
    """``min_impact`` if it is a usable pruning floor: an integer of at least 1. Static pruning keeps
    a sentence's impacts of at least this value (1 keeps every one; larger values drop the many
    small impacts that make most of the postings and little of the scores)."""
    if isinstance(min_impact, bool) or not isinstance(min_impact, int) or min_impact < 1:
        raise SparcError(f"the minimum impact must be a whole number of at least 1 (got {min_impact!r})")
    return min_impact


def quantize(tokens: Iterable[str], weights: np.ndarray, factor: float, min_impact: int = 1) -> dict[str, int]:
    """Integer impacts ``round(weight * factor)``; tokens whose impact is below ``min_impact`` (at
    least 1: never a zero) are dropped, the static pruning of :func:`check_min_impact`.
    A sentence whose impacts sum past :data:`MAX_IMPACT_SUM` is a typed error (see there)."""
    impacts = np.rint(np.asarray(weights, dtype=np.float64) * factor)
    total = float(impacts[impacts > 0].sum())  # float: an int64 sum of huge impacts could wrap
    if total > MAX_IMPACT_SUM:
        raise SparcError(f"factor {factor:g} makes a sentence's impacts sum to {total:,.0f}, {_TOO_MUCH}; "
                         "lower --factor")
    floor = max(int(min_impact), 1)
    return {t: int(q) for t, q in zip(tokens, impacts.astype(np.int64)) if q >= floor}


def vector_record(sentence_id: str, text: str, vector: dict[str, int], floats: dict[str, float] | None = None,
                  lexical: dict[str, list[float]] | None = None, headings: str | None = None) -> dict:
    """One Pyserini ``JsonVectorCollection`` document: ``{"id", "contents", "vector": {token: int}}``.

    ``floats`` (the unquantised weights, kept on request for exact scoring and re-quantising) go
    in a ``weights`` field, which Anserini ignores; with a lexical term, ``lexical`` holds each
    lexical token's [neural weight, lexical weight] (``requantize --idf`` weighs the first alone).
    """
    record = {"id": sentence_id, "contents": text, "vector": vector}
    if headings:  # the titles of its sections, read with contents by the default's BM25 side (blend.py)
        record["headings"] = headings
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


def id_digest(ids: Iterable[str]) -> tuple[int, int]:
    """How many ``ids`` and the sum of their 128-bit hashes: the same for the same ids in any order,
    and different (but for a 2^-128 chance) when one is swapped for another, in constant memory."""
    n = total = 0
    for i in ids:
        n += 1
        total += int.from_bytes(hashlib.blake2b(i.encode("utf-8"), digest_size=16).digest(), "big")
    return n, total % (1 << 128)


def iter_vectors(folder: str | Path) -> Iterator[dict]:
    """Yield the ``JsonVectorCollection`` records of an encoded folder, in order; a line that is no
    whole record (a file cut short by a full disk or a copy) is a one-line error naming it."""
    path = Path(folder) / VECTORS / VECTORS_FILE
    with open(path, "rb") as f:
        for n, line in enumerate(f, start=1):
            try:
                yield orjson.loads(line)
            except orjson.JSONDecodeError as e:
                raise StoreError(f"{path}:{n}: not a whole record ({e}): the encoded folder is damaged; encode "
                                 "it again (--overwrite)") from None
