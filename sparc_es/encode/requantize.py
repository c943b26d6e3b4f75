"""Re-quantise an encoded folder from its kept float weights, no re-encoding: at another factor,
and/or IDF-weighted over its own sentences (what ``encode --idf`` stores), and/or statically
pruned (impacts below a floor dropped)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sparc_es.errors import StoreError
from sparc_es.layout import ownership as folders
from sparc_es.layout.manifest import Manifest, copy_into, new_generation, reading
from sparc_es.layout.names import TOKENIZER, VECTORS, VECTORS_FILE
from sparc_es.layout.records import check_factor, check_min_impact, iter_vectors, quantize, record_line, vector_record
from sparc_es.model.lexical import add_words
from sparc_es.model.stored import stored_weights


def _idf_weighted(floats: dict[str, float], parts: dict[str, list[float]], idf_weights) -> dict[str, float]:
    """A record's kept weights as ``encode --idf`` stores them: IDF on the neural part, then the
    lexical part added (``model.stored.stored_weights``), from the parts the record kept."""
    vocab, inverse, idf = idf_weights
    neural = {t: w for t, w in floats.items() if t not in parts}
    neural.update({t: n for t, (n, _) in parts.items() if n > 0})
    neural = dict(sorted(neural.items(), key=lambda tw: -tw[1]))  # the top-K order encode weighs in
    lexical = {vocab[t]: w for t, (_, w) in parts.items() if t in vocab}
    ids, weights = stored_weights(np.array([vocab[t] for t in neural], dtype=np.int64),
                                  np.array(list(neural.values()), dtype=np.float32), idf, lexical)
    words = {t: w for t, (_, w) in parts.items() if t not in vocab}  # whole-word features
    tokens, weights = add_words([inverse[int(i)] for i in ids], weights, words)
    return dict(zip(tokens, weights.tolist()))


def requantize(encoded: str | Path, output: str | Path, factor: float | None = None, idf: bool = False,
               min_impact: int | None = None) -> Manifest:
    """A copy of an encoded folder made from its float weights, no re-encoding: quantised at another
    ``factor``, IDF-weighted over its own sentences (what ``encode --idf`` stores), and/or keeping
    only impacts of at least ``min_impact`` (static pruning; default: the input's floor)."""
    encoded, out = Path(encoded), Path(output)
    with reading(encoded) as manifest:
        return _requantize(encoded, out, manifest, factor, idf, min_impact)


def _requantize(encoded: Path, out: Path, manifest: Manifest, factor: float | None, idf: bool,
                min_impact: int | None = None) -> Manifest:
    factor = check_factor(manifest.factor if factor is None else factor)
    min_impact = check_min_impact(manifest.min_impact if min_impact is None else min_impact)
    if not manifest.floats:
        raise StoreError(f"{encoded}: has no float weights to re-quantise; encode with --keep-floats")
    if idf and manifest.idf:
        raise StoreError(f"{encoded}: its weights are IDF-weighted already")
    if out.exists():
        raise StoreError(f"{out}: already exists")
    idf_weights, idf_record = None, None
    if idf:
        from transformers import AutoTokenizer

        from sparc_es.model.idf import idf_vector

        tokenizer = AutoTokenizer.from_pretrained(encoded / TOKENIZER, local_files_only=True)
        weights, idf_record = idf_vector((r["contents"] for r in iter_vectors(encoded)), tokenizer, len(tokenizer))
        vocab = tokenizer.get_vocab()
        idf_weights = (vocab, {i: t for t, i in vocab.items()}, weights)
    folders.claim(out, "requantize")
    (out / VECTORS).mkdir()
    postings = impact_sum = empty = 0
    with open(out / VECTORS / VECTORS_FILE, "wb") as f:
        for record in iter_vectors(encoded):
            floats, parts = record["weights"], record.get("lexical")
            if idf_weights is not None:
                floats = _idf_weighted(floats, parts or {}, idf_weights)
                parts = None  # the weights are IDF-weighted: no further requantize --idf
            vector = quantize(list(floats), list(floats.values()), factor, min_impact)
            postings += len(vector)
            impact_sum += sum(vector.values())
            empty += not vector
            f.write(record_line(vector_record(record["id"], record["contents"], vector, floats, parts,
                                              record.get("headings"))))
    copy_into(encoded, out)
    changes = {"idf": True, "idf_weighting": idf_record} if idf else {}
    manifest = manifest.replace(factor=factor, min_impact=min_impact, postings=postings, impact_sum=impact_sum,
                                empty_vectors=empty, requantized_from=str(encoded), generation=new_generation(),
                                **changes)
    manifest.write(out)
    return manifest
