"""Loading an encoded folder into an index: :func:`build_index`, the counterpart of ``lucene.build_index``.

Records stream through the official client's ``streaming_bulk`` (chunks, retries with backoff on
429), with document ids = sentence ids so a re-run replaces rather than duplicates; documents the
index already holds unchanged (same content hash) are skipped, so an interrupted load resumes and
a later one updates. Failed items go to a JSONL report and the run ends with a check that the
index holds exactly the folder's ids (:func:`id_differences`, by an order-free digest).

:func:`build_index` reads as its steps, each a function below it, in the order they run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sparc_es.engines import blend
from sparc_es.engines.elastic.connection import Connection, _cluster_errors, check_index_name, check_server, scan
from sparc_es.engines.elastic.documents import (
    BASE_MAPPING,
    BLEND_META,
    BUILD_META,
    FIELD,
    SETTINGS,
    TERMS_META,
    FieldType,
    _differs,
    _identity,
    es_features,
    index_mappings,
    mapping,
    same_bm25,
    same_weights,
    terms_analysis,
    weights_mode,
)
from sparc_es.errors import EngineError, InputError, choice, count_mismatch, option
from sparc_es.layout.manifest import Manifest
from sparc_es.layout.names import SENTENCES, es_failures
from sparc_es.layout.records import id_digest, iter_vectors
from sparc_es.layout.store import SentenceStore
from sparc_es.notices import notice

# said after an error a re-run can get past
_AGAIN = "; run the same command again when the cluster is back: loading resumes"


@dataclass(frozen=True)
class _Load:
    """One run of :func:`build_index`: what is loaded, where, and how."""

    client: object
    index: str
    encoded: Path
    manifest: Manifest
    notice: Callable[[str], None] | None  # hears what the user should know before the index changes
    report: Path  # the JSONL report of failed, missing and foreign ids
    bulk: dict  # streaming_bulk's chunk_size, max_retries and initial_backoff
    progress: bool
    statistics: blend.Statistics  # of the sentences' BM25 terms, counted before the load
    maxima: dict[str, int]  # each feature's largest value: SPARC's counted before, BM25's while loading


@dataclass
class _Counts:
    """What happened to the folder's records, and to the index's stale documents."""

    loaded: int = 0  # written whole: new or changed sentences
    moved: int = 0  # unchanged sentences whose place in their file moved: their offsets updated
    failed: int = 0
    already_there: int = 0
    deleted: int = 0

    @property
    def seen(self) -> int:
        return self.already_there + self.loaded + self.moved + self.failed


def build_index(encoded: str | Path, client, index_name: str, chunk_size: int = 500, max_retries: int = 5,
                initial_backoff: float = 2.0, report: str | Path | None = None, progress: bool = True,
                field_type: FieldType | str | None = None, recreate: bool = False,
                notice: Callable[[str], None] | None = None) -> dict:
    """Stream an encoded folder into the index ``index_name`` (created with the SPARC mapping if
    missing; deleted first with ``recreate``): the Elasticsearch counterpart of ``lucene.build_index``.
    ``client``: an ``Elasticsearch`` client, or a :class:`Connection` (as ``open_engine`` takes).

    Loading into an index that already holds weights of the same model, K and factor updates it:
    documents already there with the same content are skipped (which also resumes an interrupted
    load), new and changed ones are written, and those the encoded folder no longer has are
    deleted (``notice`` hears first when the index was last built from another folder or corpus).
    An empty index created from ``mappings/sparc.json`` is loaded as one sparc-es created.
    ``field_type`` (default: the existing index's, else ``rank_features``) must be the existing
    index's: a load never changes a field's type. An index last built from another encoded folder
    or corpus takes this folder's BM25 statistics, and every document is written again. The
    mapping's ``_meta.sparc_es_build`` records what the index was built from and when, and the
    build's id (which an engine searching the index compares to notice a rebuild). Returns counts; raises
    :class:`EngineError` when any document failed or is missing at the end, with the ids in
    ``report`` (default ``es-failures-INDEX.jsonl`` in the working directory: never inside the
    encoded folder, which is input and may be read-only), checked writable before the cluster is
    touched.
    """
    index = check_index_name(index_name)
    if isinstance(client, Connection):  # what open_engine takes: either will do
        client = client.client()
    encoded, manifest = _check_folder(encoded)
    report = Path(report) if report else Path(es_failures(index))
    _check_writable(report)
    check_server(client)
    statistics, maxima = blend.count(iter_vectors(encoded))
    load = _Load(client, index, encoded, manifest, notice=notice, report=report,
                 bulk={"chunk_size": chunk_size, "max_retries": max_retries, "initial_backoff": initial_backoff},
                 progress=progress, statistics=statistics, maxima=maxima)
    resume, same_source = _create_or_check_index(load, manifest, field_type, recreate)
    if resume and same_source:  # an update keeps the BM25 statistics of its first load (unchanged documents skipped)
        kept = _kept_statistics(load)
        if kept is not None and kept.to_json() != statistics.to_json():
            say = notice or _notice
            say(f"index {index!r} keeps the BM25 statistics of its first load ({kept.sentences} sentences then, "
                f"{statistics.sentences} in this folder), so that the documents an update leaves alone keep their "
                "weights: the BM25 side scores a little apart from a fresh load's and from the Lucene index's; load "
                f"with {_recreate()} to take this folder's statistics")
        load = dataclasses.replace(load, statistics=kept or statistics)
    counts = _stream_bulk(load, resume)
    if resume:
        counts.deleted = _delete_stale_ids(load)
    count, missing, extra = _refresh_and_check_ids(load)
    _record_failures(load, counts, missing, extra)
    _check_count(load, count)
    _write_build_record(load, count)
    return {"index": index, "loaded": counts.loaded, "moved": counts.moved, "already_there": counts.already_there,
            "deleted": counts.deleted,
            "failed": counts.failed, "count": count, "expected": manifest.retrievable}


def _recreate() -> str:
    return option("--recreate", "recreate=True")


def _index_name() -> str:
    return option("--es-index", "index name")


def _notice(message: str) -> None:
    notice("index", message)


def _check_writable(report: Path) -> None:
    """A one-line error now, before an index is created, when the failure report cannot be written."""
    existed = report.exists()
    try:
        with open(report, "a", encoding="utf-8"):
            pass
    except OSError as e:
        raise InputError(report, f"cannot write the failure report here: {e.strerror or e}; name another "
                                 "with --report FILE") from None
    if not existed:
        report.unlink()


def _check_folder(encoded: str | Path) -> tuple[Path, Manifest]:
    """The encoded folder and its manifest, refused (:class:`~sparc_es.errors.StoreError`) when it is
    not a finished encoded folder."""
    encoded = Path(encoded)
    return encoded, Manifest.read_encoded(encoded)


def _create_or_check_index(load: _Load, manifest: Manifest, field_type: FieldType | str | None,
                           recreate: bool) -> tuple[bool, bool]:
    """Create the index with the SPARC mapping (deleting it first with ``recreate``), or check the one
    there holds the same weights in a field of ``field_type``, with BM25 terms made as this sparc-es
    makes them. Whether the load resumes (the index was there with documents in it), and whether
    it was last built from this folder and corpus."""
    client, index = load.client, load.index
    with _cluster_errors(f"preparing index {index!r}", _AGAIN):
        if recreate and client.indices.exists(index=index):
            if field_type is None:  # recreated as it was: a sparse_vector index stays one
                before = index_mappings(client.indices.get_mapping(index=index), index)
                field_type = ((before.get("properties") or {}).get(FIELD) or {}).get("type")
                field_type = field_type if field_type in {t.value for t in FieldType} else None
            client.indices.delete(index=index)
        if not client.indices.exists(index=index):
            client.indices.create(index=index, mappings=mapping(manifest, field_type or FieldType.RANK_FEATURES),
                                  settings=SETTINGS)
            return False, True
        mappings = index_mappings(client.indices.get_mapping(index=index), index)
        kind = ((mappings.get("properties") or {}).get(FIELD) or {}).get("type")
        body = mapping(manifest, kind if kind in {t.value for t in FieldType} else FieldType.RANK_FEATURES)

        def same_type() -> None:  # a load never changes the weights field's type
            wanted = choice(FieldType, field_type, "field type").value if field_type is not None else kind
            if kind is not None and wanted != kind:
                raise EngineError(f"index {index!r} stores its weights as {kind}, not {wanted}: a load cannot "
                                  f"change a field's type; choose another {_index_name()}, or load with "
                                  f"{_recreate()}, which deletes the index and its documents")

        meta = mappings.get("_meta") if isinstance(mappings.get("_meta"), dict) else {}
        existing = meta.get("sparc_es")
        client.indices.refresh(index=index)  # a count sees only refreshed documents
        count = client.count(index=index)["count"]
        doomed = f"index {index!r} and its {count} documents"  # what --recreate deletes
        if not isinstance(existing, dict):
            if count == 0 and weights_mode(mappings) is not None:
                # made from mappings/sparc.json (its _meta.sparc_es a placeholder) and never loaded
                same_type()
                _add_fields(client, index, mappings, BASE_MAPPING["properties"], meta=body["_meta"])
                return False, True
            why = ("no _meta.sparc_es in its mapping" if existing is None else "its _meta.sparc_es is not filled in")
            why += f", and no {FIELD!r} field to load into" if weights_mode(mappings) is None else ""
            raise EngineError(f"index {index!r} was not made by sparc-es ({why}); {_recreate()} would delete "
                              f"{doomed}: choose another {_index_name()} to keep them")
        same_type()
        # Re-running into the same index replaces documents by id; weights from another model or
        # factor would be mixed in silently, so that is refused.
        if not same_weights(existing, body["_meta"]["sparc_es"]):
            raise EngineError(f"index {index!r} already holds other weights ({_differs(existing, body)}); "
                              f"choose another index name, or load with {_recreate()}, which deletes {doomed}")
        same_source = True
        if count:
            _check_terms(index, meta, mappings, doomed)
            same_source = not _say_other_source(load, meta.get(BUILD_META))
        _add_fields(client, index, mappings, {name: BASE_MAPPING["properties"][name]
                                              for name in ("hash", "code", "order")})
        return count > 0, same_source


def _add_fields(client, index: str, mappings: dict, fields: dict, meta: dict | None = None) -> None:
    """Add to the index's mapping those of ``fields`` it lacks (made before content hashes, the code a
    sentence leads into or its place were stored; or by hand), and ``meta`` as its ``_meta``."""
    properties = mappings.get("properties") or {}
    added = {name: field for name, field in fields.items() if name not in properties}
    if added or meta is not None:
        client.indices.put_mapping(index=index, **({"properties": added} if added else {}),
                                   **({"meta": meta} if meta is not None else {}))


def _check_terms(index: str, meta: dict, mappings: dict, doomed: str) -> None:
    """Refuse to keep the documents of an index whose BM25 terms were not made as this sparc-es
    makes them (none at all: loaded by an older sparc-es): a load skips the documents it finds
    unchanged, so they would keep their terms while the mapping's maxima said otherwise."""
    record = meta.get(BLEND_META) or meta.get(TERMS_META)
    try:
        analysis = terms_analysis(json.loads(record)) if isinstance(record, str) else None
    except ValueError:
        analysis = None
    if analysis == terms_analysis():
        return
    text = "" if same_bm25(mappings) else ", and its text keeps Elasticsearch's standard analyser"
    why = ("stores no BM25 terms (loaded by an older sparc-es)" if analysis is None else
           f"stores BM25 terms made otherwise ({_analysis(analysis)} there, {_analysis(terms_analysis())} here)")
    raise EngineError(f"index {index!r} {why}{text}: its documents cannot be kept; load with {_recreate()}, "
                      f"which deletes {doomed} and loads this folder's")


def _analysis(record: dict) -> str:
    return (f"k1 {record.get('k1')}, b {record.get('b')}, scale {record.get('scale')}"
            + ("" if record.get("titles") else ", without section titles"))


def _say_other_source(load: _Load, build) -> bool:
    """Whether the index was last built from another encoded folder or corpus, told to
    ``load.notice``: the load replaces its documents with this folder's, BM25 statistics included."""
    if not isinstance(build, dict):
        return False
    encoded, corpus = str(load.encoded.resolve()), list(load.manifest.corpus)
    before, corpus_before = build.get("encoded"), build.get("corpus")
    if before == encoded and corpus_before == corpus:
        return False
    from_ = ", ".join(map(str, corpus_before)) if isinstance(corpus_before, list) else corpus_before
    (load.notice or _notice)(f"index {load.index!r} was last built from {before} (corpus {from_}); loading "
                             f"{encoded} (corpus {', '.join(corpus)}) replaces its documents with this folder's and "
                             "its BM25 statistics: every document is written again, those not in it deleted")
    return True


def _stream_bulk(load: _Load, resume: bool) -> _Counts:
    """Index every record of the folder through ``streaming_bulk`` (on a resume, only those the index
    does not already hold unchanged), each failed item written to the report as it comes. Refused
    when the folder turns out to hold more records than its manifest lists."""
    from elasticsearch import helpers
    from tqdm import tqdm

    counts = _Counts()
    skipped = [0]
    expected = load.manifest.retrievable
    with _cluster_errors(f"loading into {load.index!r}", _AGAIN), \
            open(load.report, "w", encoding="utf-8") as failures, \
            tqdm(total=expected, unit="sent", desc="bulk", disable=not load.progress, file=sys.stderr) as bar:
        actions = _actions(load, load.client if resume else None, skipped)
        for success, item in helpers.streaming_bulk(load.client, actions, **load.bulk,
                                                    raise_on_error=False, raise_on_exception=False):
            if success and "update" in item:
                counts.moved += 1
            elif success:
                counts.loaded += 1
            else:
                counts.failed += 1
                failures.write(json.dumps(item, default=str) + "\n")
            counts.already_there = skipped[0]
            bar.n = counts.seen
            bar.update(0)
    counts.already_there = skipped[0]
    if counts.seen > expected:  # e.g. records written twice into one encoded folder
        raise EngineError(count_mismatch(f"the encoded folder {load.encoded}", counts.seen, expected,
                                         "sentences with weights its manifest lists"))
    return counts


def _delete_stale_ids(load: _Load) -> int:
    """Delete the documents the index holds that the folder has not (:func:`_stale_ids`); how many were."""
    from elasticsearch import helpers

    client, index = load.client, load.index
    deleted = 0
    with _cluster_errors(f"deleting stale documents from {index!r}", _AGAIN):
        client.indices.refresh(index=index)
        stale = _stale_ids(client, index, load.encoded)
        for success, _ in helpers.streaming_bulk(
                client, ({"_op_type": "delete", "_index": index, "_id": i} for i in stale), **load.bulk,
                raise_on_error=False):
            deleted += success
    return deleted


def _refresh_and_check_ids(load: _Load) -> tuple[int, list[str], list[str]]:
    """The index's document count, the folder's ids it lacks and the ids it holds that the folder has
    not, after a refresh. Ids, not only their count: a lost document and a foreign one leave the
    count right."""
    client, index = load.client, load.index
    with _cluster_errors(f"checking the ids in {index!r}", _AGAIN):
        client.indices.refresh(index=index)
        count = client.count(index=index)["count"]
        missing, extra = id_differences(client, index, load.encoded)
    return count, missing, extra


def _record_failures(load: _Load, counts: _Counts, missing: list[str], extra: list[str]) -> None:
    """Add the missing and foreign ids to the report, or delete the report when nothing failed; then
    raise :class:`EngineError` naming the report when any document failed, is missing or is foreign."""
    if missing or extra:
        with open(load.report, "a", encoding="utf-8") as failures:
            failures.writelines(json.dumps({"missing": i}) + "\n" for i in missing)
            failures.writelines(json.dumps({"extra": i}) + "\n" for i in extra)
    elif not counts.failed:
        load.report.unlink()
    if counts.failed or missing or extra:
        foreign = f"; {len(extra)} it should not hold (e.g. {', '.join(extra[:3])})" if extra else ""
        raise EngineError(f"{counts.failed} of {counts.loaded + counts.failed} documents failed to load into "
                          f"{load.index!r}; {len(missing)} are missing from it (e.g. {', '.join(missing[:3]) or '-'})"
                          f"{foreign}; ids in {load.report}{_AGAIN}")


def _check_count(load: _Load, count: int) -> None:
    """Refuse an index whose document count is not the number of the folder's records with weights."""
    expected = load.manifest.retrievable
    if count != expected:
        raise EngineError(count_mismatch(f"index {load.index!r}", count, expected,
                                         f"sentences with weights in {load.encoded}"))


def _write_build_record(load: _Load, count: int) -> None:
    """Record in the mapping's ``_meta`` the weights' identity and what the index was built from, and when."""
    manifest = load.manifest
    with _cluster_errors(f"recording the build in {load.index!r}"):
        load.client.indices.put_mapping(index=load.index, meta={
            "sparc_es": _identity(manifest),
            TERMS_META: json.dumps(terms_analysis(), sort_keys=True),
            # the id tells an engine reading the index that it was rebuilt (ElasticEngine._current)
            BUILD_META: {"encoded": str(load.encoded.resolve()), "corpus": list(manifest.corpus),
                         "sentences": manifest.sentences, "documents": count,
                         "at": datetime.now(UTC).isoformat(timespec="seconds"), "id": uuid.uuid4().hex},
            # as one string: feature names are not field names, and integers survive any server
            BLEND_META: json.dumps({**blend.Blend(load.maxima, load.statistics.digest()).to_json(),
                                    "counts": load.statistics.to_json()}, ensure_ascii=False, sort_keys=True)})


def _kept_statistics(load: _Load) -> blend.Statistics | None:
    """The BM25 statistics an index was first loaded with (None for an index loaded before they were
    kept): an update keeps them, as ``encode --update`` keeps the first encode's IDF, so the
    documents it skips as unchanged keep the weights they were stored with."""
    with _cluster_errors(f"reading the mapping of {load.index!r}", _AGAIN):
        meta = load.client.indices.get_mapping(index=load.index)[load.index]["mappings"].get("_meta", {})
    try:
        counts = json.loads(meta[BLEND_META])["counts"]
    except (KeyError, TypeError, ValueError):
        return None
    return blend.Statistics.from_json(counts, f"index {load.index!r}")


# --- the folder's records, and the ids the index holds ------------------------------------------

def _batches(encoded: Path, size: int = 500) -> Iterator[list[dict]]:
    """The encoded folder's records with weights (what the index must hold), ``size`` at a time."""
    batch: list[dict] = []
    for order, record in enumerate(iter_vectors(encoded)):
        if not es_features(record["vector"]):
            continue  # nothing to retrieve it by: counted as an empty vector at encode time
        batch.append({**record, "order": order})
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _present(client, index_name: str, ids: list[str]) -> dict[str, str | None]:
    """Which of ``ids`` the index holds, with the content hash each was stored with."""
    docs = client.mget(index=index_name, ids=ids, source=["hash"])["docs"]
    return {d["_id"]: d.get("_source", {}).get("hash") for d in docs if d.get("found")}


def _actions(load: _Load, client=None, skipped: list[int] | None = None) -> Iterator[dict]:
    """Bulk actions for every record, with its BM25 terms (:func:`~sparc_es.engines.blend.blended`);
    with ``client``, those the index already holds unchanged (same hash: of the weights' inputs and
    the BM25 statistics, and of where the sentence sits and the code it leads into, so a sentence
    that moved down its file is written again with its new offsets) are skipped (a resumed load, or
    an update) and counted in ``skipped[0]``."""
    encoded, index_name = load.encoded, load.index
    store = SentenceStore(encoded / SENTENCES)
    try:
        for batch in _batches(encoded):
            batch = list(blend.blended(batch, load.statistics, load.maxima))
            found = store.get([r["id"] for r in batch], context=True)
            actions = [_action(r, found[r["id"]], index_name) for r in batch]
            if client is not None:
                there = _present(client, index_name, [a["_id"] for a in actions])
                fresh = [_moved(a) if _same_content(there.get(a["_id"]), a["_source"].get("hash")) else a
                         for a in actions if a["_id"] not in there or there[a["_id"]] != a["_source"].get("hash")]
                if skipped is not None:
                    skipped[0] += len(actions) - len(fresh)
                actions = fresh
            yield from actions
    finally:
        store.close()


def _same_content(stored: str | None, new: str | None) -> bool:
    """Whether two hashes (:func:`_action`) differ only in where the sentence sits."""
    return bool(stored and new) and stored.rpartition("+")[0] == new.rpartition("+")[0] and "+" in stored


PLACE = ("doc", "start", "end", "code", "order")  # what an update of a moved sentence rewrites


def _moved(action: dict) -> dict:
    """The partial update of a document whose sentence only moved in its file: its place and hash,
    not its weights or text."""
    source = action["_source"]
    return {"_op_type": "update", "_index": action["_index"], "_id": action["_id"],
            "doc": {key: source.get(key) for key in (*PLACE, "hash")}}


def _action(record: dict, s, index_name: str) -> dict:
    """The index action of one record: its weights, with the text, context, document, offsets and
    code of its stored sentence ``s``."""
    source = {"text": s.text, FIELD: es_features(record["vector"]), "order": record["order"]}
    if record.get("hash"):
        where = f"{s.doc}\0{s.start}\0{s.end}\0{s.code or ''}\0{record['order']}"
        source["hash"] = f"{record['hash']}+{hashlib.sha1(where.encode()).hexdigest()[:12]}"
    for key in ("context", "doc", "start", "end", "code"):
        if getattr(s, key) not in (None, ""):
            source[key] = getattr(s, key)
    return {"_op_type": "index", "_index": index_name, "_id": record["id"], "_source": source}


def _stale_ids(client, index_name: str, encoded: Path) -> list[str]:
    """Ids in the index that it should not hold: sentences the encoded folder no longer has
    (sources edited or deleted), or has without weights, and documents of other writers."""
    keep = set(_loaded_ids(encoded))
    return [h["_id"] for h in scan(client, index_name, source=False) if h["_id"] not in keep]


def _loaded_ids(encoded: Path) -> Iterator[str]:
    """The ids the index must hold: those of the encoded folder's records with weights."""
    for batch in _batches(encoded):
        for record in batch:
            yield record["id"]


def _missing(client, index_name: str, encoded: Path) -> list[str]:
    """The ids of the encoded folder's records that the index does not hold."""
    out: list[str] = []
    for batch in _batches(encoded):
        ids = [r["id"] for r in batch]
        there = _present(client, index_name, ids)
        out += [i for i in ids if i not in there]
    return out


def id_differences(client, index_name: str, encoded: str | Path) -> tuple[list[str], list[str]]:
    """(the encoded folder's ids that ``index_name`` does not hold, the ids it holds that the folder
    has not): what a count check misses when one document is lost and a foreign one came in.

    The ids of both are compared by :func:`_id_digest`, streamed (constant memory, one pass over
    each); only when they differ are the differences listed (the folder's ids then held in memory)."""
    encoded = Path(encoded)
    there = id_digest(h["_id"] for h in scan(client, index_name, source=False, page=5000))
    if there == id_digest(_loaded_ids(encoded)):
        return [], []
    return _missing(client, index_name, encoded), _stale_ids(client, index_name, encoded)
