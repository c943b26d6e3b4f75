"""Re-quantise an encoded folder from its kept float weights, no re-encoding: at another factor,
and/or IDF-weighted over its own sentences (what ``encode --idf`` stores), and/or statically
pruned (impacts below a floor dropped)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from sparc_es.errors import SparcError, StoreError, option
from sparc_es.layout import ownership as folders
from sparc_es.layout.locks import exclusive
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
               min_impact: int | None = None, overwrite: bool = False) -> Manifest:
    """A copy of an encoded folder made from its float weights, no re-encoding: quantised at another
    ``factor``, IDF-weighted over its own sentences (what ``encode --idf`` stores), and/or keeping
    only impacts of at least ``min_impact`` (static pruning; default: the input's floor).

    The copy is written in a hidden folder beside ``output`` and renamed into place when complete,
    so a failed run (a factor whose impacts Lucene cannot hold, a full disk, Ctrl-C) leaves nothing
    behind that blocks the corrected rerun, and ``overwrite`` replaces an existing ``output`` (one
    sparc-es made, as ``encode --overwrite`` does) only once the new one is complete."""
    encoded, out = Path(encoded), Path(output)
    _check(encoded, Manifest.read(encoded), factor, idf, min_impact)  # what can be, before anything is made
    folders.check_apart(out, [encoded], "--output")
    folders.check_folder_output(out, "--output")
    if out.exists() and not overwrite:
        raise StoreError(f"{out}: already exists; choose a new folder or pass --overwrite to replace it")
    folders.check_removable(out, replaces=folders.ENCODED)  # --overwrite replaces only an encoded folder sparc-es made
    created = [p for p in (out.absolute().parent, *out.absolute().parent.parents) if not p.exists()]
    try:
        with exclusive(out, "sparc-es requantize"):
            building = out.parent / f".{out.name}.building"
            shutil.rmtree(building, ignore_errors=True)  # left by a run that was killed
            try:
                with reading(encoded) as manifest:  # an update finishing meanwhile would mix two corpora
                    manifest = _requantize(encoded, building, manifest, factor, idf, min_impact, out)
                folders.remove(out)
                building.rename(out)
            finally:
                shutil.rmtree(building, ignore_errors=True)
    except BaseException:
        for parent in created:  # the folders above the output this run made, if still empty
            try:
                parent.rmdir()
            except OSError:
                break
        raise
    return manifest


def _check(encoded: Path, manifest: Manifest, factor: float | None, idf: bool,
           min_impact: int | None) -> tuple[float, int]:
    """The factor and impact floor to write with, or a one-line error for a request the encoded
    folder cannot meet."""
    factor = check_factor(manifest.factor if factor is None else factor)
    min_impact = check_min_impact(manifest.min_impact if min_impact is None else min_impact)
    if not manifest.floats:
        raise StoreError(f"{encoded}: has no float weights to re-quantise; encode with "
                         f"{option('--keep-floats', 'keep_floats=True')}")
    if idf and manifest.idf:
        raise StoreError(f"{encoded}: its weights are IDF-weighted already")
    return factor, min_impact


def _requantize(encoded: Path, out: Path, manifest: Manifest, factor: float | None, idf: bool,
                min_impact: int | None = None, named: Path | None = None) -> Manifest:
    """Write the requantised copy into ``out`` (``named``: the output folder the user named, for messages)."""
    named = out if named is None else named
    factor, min_impact = _check(encoded, manifest, factor, idf, min_impact)
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
            try:
                vector = quantize(list(floats), list(floats.values()), factor, min_impact)
            except SparcError as e:  # impacts past what Lucene holds: which sentence, and nothing written
                raise SparcError(f"{encoded}: sentence {record['id']}: {e}; nothing was written to {named}") from None
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
