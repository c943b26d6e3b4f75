"""Elasticsearch engine: SPARC weights in a ``rank_features`` field, questions as dot-product queries.

* Token names are made safe for ES in :func:`feature_name` (ES rejects ``.`` in feature names;
  BERT's vocabulary has such tokens) and read back with :func:`token_name`.
* Stored values are the same integer impacts as the Lucene index (``round(f * factor)``), dropped
  when not positive in :func:`es_features` (ES requires strictly positive values). ES keeps 9
  significant bits of each value, so impacts below 512 are stored exactly; larger ones lose at
  most 0.4%.
* A question is ``bool.should`` of ``rank_feature`` clauses with ``"linear": {}`` and ``boost`` =
  the token's count: the score is the dot product (the default ``saturation`` function is not).
  ``sparse_vector`` with a ``query_vector`` is the alternative on servers that have it (8.15+),
  and needs the field mapped as ``sparse_vector``.
* Loading streams records through the official client's ``streaming_bulk`` (chunks, retries with
  backoff on 429), with document ids = sentence ids so a re-run replaces rather than duplicates;
  failed items go to a JSONL report and the run ends with a check that the index holds exactly
  the folder's ids.
* Every request of the client :meth:`Connection.client` makes is retried with backoff on
  connection errors, timeouts and 429/502/503/504 (:func:`retry_delays`); no message shows the
  password of a URL (:func:`redact_url`).

Supported servers: Elasticsearch 8.x (client 8.x or 9.x with 8-compatible headers) and 9.x.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import json
import math
import os
import re
import time
from datetime import datetime, timezone
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from urllib.parse import urlsplit

from ..corpus import CorpusStats, Sentence, document_sentences
from ..encoded import Manifest, iter_vectors
from ..errors import EngineError, InputError, SparcError, choice, count_mismatch
from ..query import QueryEncoder
from ..store import FILENAME as SENTENCES, SentenceStore
from .base import Hit

FIELD = "weights"


class QueryMode(str, Enum):
    """How a question is sent: ``rank_feature`` clauses (linear, boost = count), or one
    ``sparse_vector`` query (ES 8.15+, field mapped as ``sparse_vector``)."""

    RANK_FEATURE = "rank_feature"
    SPARSE_VECTOR = "sparse_vector"


class FieldType(str, Enum):
    """How the weights field is mapped."""

    RANK_FEATURES = "rank_features"
    SPARSE_VECTOR = "sparse_vector"


def feature_name(token: str) -> str:
    """Reversible ES-safe name for a token: ``%`` -> ``%25`` first, then ``.`` -> ``%2E``."""
    return token.replace("%", "%25").replace(".", "%2E")


def token_name(feature: str) -> str:
    """Inverse of :func:`feature_name`."""
    return feature.replace("%2E", ".").replace("%25", "%")


def es_features(vector: dict[str, float]) -> dict[str, float]:
    """The ``rank_features`` value of one sentence: safe names, strictly positive values only."""
    return {feature_name(t): float(w) for t, w in vector.items() if w > 0}


BASE_MAPPING = {
    "dynamic": "strict",
    "properties": {
        "text": {"type": "text"},
        "context": {"type": "text", "index": False},  # shown with a hit, not searched
        "doc": {"type": "keyword"},
        "start": {"type": "integer"},
        "end": {"type": "integer"},
        "hash": {"type": "keyword", "index": False},  # of text and context: an update skips unchanged sentences
        FIELD: {"type": "rank_features"},
    },
}


def mapping(manifest: Manifest | None = None, field_type: FieldType | str = FieldType.RANK_FEATURES) -> dict:
    """The index mapping (also in ``mappings/sparc.json``), ``_meta`` describing the encoded weights."""
    body = copy.deepcopy(BASE_MAPPING)
    body["properties"][FIELD]["type"] = choice(FieldType, field_type, "field type").value
    if manifest is not None:
        body["_meta"] = {"sparc_es": _identity(manifest)}
    return body


def _identity(manifest: Manifest) -> dict:
    """What the weights in an index must share to be mixed: the model (its fingerprint, which hashes
    the weights and every setting that changes f(v, s)), K, the quantisation factor and IDF.

    Only values that survive a round trip through a cluster: the factor is written as text because
    a server may return a float one rounding step off (noida-db does for ``passage_weight``)."""
    return {"fingerprint": manifest.model.fingerprint, "top_k": int(manifest.top_k),
            "factor": repr(float(manifest.factor)), "idf": bool(manifest.idf)}


def _differs(stored: dict | None, body: dict) -> str:
    """What differs between an index's weights and the new ones, for the refusal message."""
    if not isinstance(stored, dict):
        return "it was not made by sparc-es"
    new = body["_meta"]["sparc_es"]
    old = {"fingerprint": stored.get("fingerprint") or (stored.get("model") or {}).get("fingerprint"),
           "top_k": stored.get("top_k"), "factor": stored.get("factor"), "idf": stored.get("idf", False)}
    return ", ".join(f"{k} {old[k]} there, {new[k]} here" for k in new if str(old[k]) != str(new[k])) or "unreadable"


def same_weights(stored: dict | None, identity: dict) -> bool:
    """Whether an index's ``_meta.sparc_es`` (as the cluster returns it) names the weights of
    ``identity``. Indexes written before identities were reduced (the whole model record, the factor
    as a number) are recognised too."""
    if not isinstance(stored, dict):
        return False
    fingerprint = stored.get("fingerprint") or (stored.get("model") or {}).get("fingerprint")
    try:
        factor = float(stored.get("factor"))
        top_k = int(stored.get("top_k"))
    except (TypeError, ValueError):
        return False
    return (fingerprint == identity["fingerprint"] and top_k == identity["top_k"]
            and math.isclose(factor, float(identity["factor"]), rel_tol=1e-9)
            and bool(stored.get("idf", False)) == identity["idf"])


def query_body(bag: dict[str, float], size: int = 10, mode: QueryMode | str = QueryMode.RANK_FEATURE,
               bm25_text: str | None = None, bm25_weight: float = 0.0) -> dict:
    """Search request whose score is sum over the question's tokens of count x stored impact."""
    features = {feature_name(t): c for t, c in bag.items()}
    if choice(QueryMode, mode, "query mode") is QueryMode.SPARSE_VECTOR:
        should = [{"sparse_vector": {"field": FIELD, "query_vector": {k: float(v) for k, v in features.items()}}}]
    else:
        should = [{"rank_feature": {"field": f"{FIELD}.{name}", "linear": {}, "boost": count}}
                  for name, count in features.items()]
    if bm25_text and bm25_weight > 0:
        should.append({"match": {"text": {"query": bm25_text, "boost": bm25_weight}}})
    return {"size": size, "query": {"bool": {"should": should}}, "_source": ["text", "doc", "start", "end"]}


def redact_url(url: str) -> str:
    """``url`` fit to show: its user-info becomes ``user:***@`` (``***@`` when it has no ``:``, as
    it may be a token). The user-info is everything up to the last ``@``, so a password with an
    unencoded ``/``, ``#`` or ``@`` is hidden too, and a URL without its scheme as well."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    userinfo, at, host = rest.rpartition("@")
    if not at:
        return url
    user, colon, _ = userinfo.partition(":")
    return f"{scheme}{sep}{user + ':***' if colon else '***'}@{host}"


# user-info in a URL inside a message of another library (one without a scheme: redact_url)
_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)[^\s/?#'\"]*@")


def _redacted(text: str) -> str:
    """``text`` with the user-info of every URL in it hidden: for messages of the client."""
    return _USERINFO.sub(r"\1***@", text)


MAX_BACKOFF = 10.0  # seconds: the longest wait between two attempts of one request


def retry_delays(retries: int, first: float = 0.5) -> list[float]:
    """The waits before each retry of one request: ``first`` seconds, doubling, at most
    :data:`MAX_BACKOFF` (0.5, 1, 2 s for the default 3 retries)."""
    return [min(first * 2 ** n, MAX_BACKOFF) for n in range(retries)]


@functools.cache
def _transport_class() -> type:
    """The client's transport, with backoff between the attempts of a request.

    elastic-transport retries connection errors, timeouts and the retry statuses at once (its
    newest releases can wait between attempts, off by default and not for retried statuses; the
    older ones this package supports cannot) and a single node never waits out its dead-node
    timeout, so four attempts took 10 ms against a cluster that was restarting. It is asked for one
    attempt at a time here, and the retries happen in this one place for every request: queries,
    scans, bulk loading."""
    from elastic_transport import ConnectionError, ConnectionTimeout, TlsError, Transport
    from elastic_transport.client_utils import DEFAULT

    class BackoffTransport(Transport):
        backoff = 0.5  # seconds before the first retry; Connection.client sets its own

        def perform_request(self, method: str, target: str, **kwargs):
            def given(name, default):
                value = kwargs.pop(name, DEFAULT)
                return default if value is DEFAULT else value

            retries = given("max_retries", self.max_retries)
            on_timeout = given("retry_on_timeout", self.retry_on_timeout)
            on_status = given("retry_on_status", self.retry_on_status)
            for delay in [*retry_delays(retries, self.backoff), None]:
                try:
                    response = super().perform_request(method, target, max_retries=0, **kwargs)
                except TlsError:
                    raise  # a certificate, or https spoken to plain HTTP, does not heal by waiting
                except ConnectionTimeout:
                    if delay is None or not on_timeout:
                        raise
                except ConnectionError:
                    if delay is None:
                        raise
                else:
                    if delay is None or response.meta.status not in on_status:
                        return response
                time.sleep(delay)

    return BackoffTransport


@dataclass(frozen=True)
class Connection:
    """Where the cluster is and how to authenticate; secrets come from flags or the environment."""

    url: str
    api_key: str | None = None
    username: str | None = None
    password: str | None = None
    ca_certs: str | None = None
    timeout: float = 60.0  # seconds per request
    retries: int = 3  # per request, on connection errors, timeouts and 429/502/503/504
    backoff: float = 0.5  # seconds before the first retry, doubling (retry_delays)

    def __post_init__(self) -> None:
        shown = redact_url(self.url)
        if not self.url.startswith(("http://", "https://")):
            raise SparcError(f"Elasticsearch URL {shown!r} needs its scheme: http://HOST:9200 or https://HOST:9200")
        why = self._unusable()
        if why:
            raise SparcError(f"cannot use the Elasticsearch URL {shown!r}: {why}")
        if not self.timeout > 0 or self.retries < 0 or not self.backoff >= 0:
            raise SparcError("the Elasticsearch timeout must be above 0, the retries and backoff at least 0")

    def _unusable(self) -> str | None:
        """Why the URL cannot be used, said here rather than by the client, whose messages
        repeat the URL whole, password included."""
        try:
            parts = urlsplit(self.url)
            parts.port  # raises on a port that is not a number from 0 to 65535
        except ValueError:
            return "its host or port cannot be read (HOST:PORT, the port a number up to 65535)"
        if "@" in self.url[len(f"{parts.scheme}://{parts.netloc}"):]:
            return "a user name or password with / ? # or @ must be percent-encoded"
        if not parts.hostname:
            return "it has no host"
        if self.ca_certs and parts.scheme != "https":
            return "a CA bundle (--es-ca-certs) is for https:// URLs"
        return None

    def _scrub(self, text: str) -> str:
        """``text`` without this connection's secrets: its URL redacted, its password and API key hidden."""
        text = _redacted(text.replace(self.url, redact_url(self.url)))
        userinfo = self.url.partition("://")[2].rpartition("@")[0]
        for secret in (userinfo.partition(":")[2], self.password, self.api_key):
            if secret and len(secret) >= 4:  # a shorter one would hide letters of the message
                text = text.replace(secret, "***")
        return text

    @classmethod
    def from_env(cls, url: str | None = None, timeout: float = 60.0, retries: int = 3, **given) -> Connection:
        env = os.environ
        url = url or env.get("SPARC_ES_URL")
        if not url:
            raise SparcError("no Elasticsearch URL: pass --es-url or set SPARC_ES_URL")
        return cls(url=url, api_key=given.get("api_key") or env.get("SPARC_ES_API_KEY"),
                   username=given.get("username") or env.get("SPARC_ES_USER"),
                   password=given.get("password") or env.get("SPARC_ES_PASSWORD"),
                   ca_certs=given.get("ca_certs") or env.get("SPARC_ES_CA_CERTS"), timeout=timeout, retries=retries)

    def __repr__(self) -> str:  # never print secrets
        auth = "api key" if self.api_key else "basic" if self.username else "none"
        return f"Connection(url={redact_url(self.url)!r}, auth={auth})"

    def client(self, **options):
        """An ``Elasticsearch`` client whose every request is retried with backoff (:func:`retry_delays`)."""
        try:
            from elasticsearch import Elasticsearch
        except ImportError:
            raise SparcError("the Elasticsearch engine needs the client: pip install 'sparc-es[es]'") from None
        kwargs = {"request_timeout": self.timeout, "max_retries": self.retries, "retry_on_timeout": True,
                  "retry_on_status": (429, 502, 503, 504), "transport_class": _transport_class(), **options}
        if self.api_key:
            kwargs["api_key"] = self.api_key
        elif self.username:
            kwargs["basic_auth"] = (self.username, self.password or "")
        if self.ca_certs:
            kwargs["ca_certs"] = self.ca_certs
        try:
            client = Elasticsearch(self.url, **kwargs)
        except (ValueError, TypeError) as e:
            raise SparcError(f"cannot use the Elasticsearch URL {redact_url(self.url)!r}: {self._scrub(str(e))}") \
                from None
        client.transport.backoff = self.backoff
        return client


_BAD_NAME = re.compile(r'[\\/*?"<>| ,#:A-Z]')


def check_index_name(name: str) -> str:
    """``name`` if Elasticsearch accepts it as an index name, else a one-line error saying why."""
    if not name or name in (".", "..") or name.startswith(("-", "_", "+")) or _BAD_NAME.search(name) \
            or len(name.encode("utf-8")) > 255:
        raise SparcError(f"invalid Elasticsearch index name {name!r}: lowercase, at most 255 bytes, not starting "
                         'with - _ +, none of \\ / * ? " < > | , # : or spaces')
    return name


@contextmanager
def _cluster_errors(doing: str, then: str = ""):
    """Connection faults, timeouts and server errors of the client as one-line :class:`EngineError`."""
    from elasticsearch import ApiError, TransportError

    try:
        yield
    except TransportError as e:  # connection refused or lost, timeouts (after the client's retries)
        raise EngineError(f"Elasticsearch did not answer while {doing} ({type(e).__name__}: {_redacted(str(e))})"
                          f"{then}") from None
    except ApiError as e:
        raise EngineError(f"Elasticsearch refused {doing}: {_redacted(str(e))}{then}") from None


SUPPORTED_MAJORS = (8, 9)


def check_server(client) -> str:
    """The server's version, refused unless its major is one sparc-es supports (8.x, 9.x)."""
    try:
        version = client.info()["version"]["number"]
    except Exception as e:  # connection refused, auth, product check: the client's own message
        raise EngineError(f"cannot reach Elasticsearch: {_redacted(str(e))}") from None
    if int(version.split(".")[0]) not in SUPPORTED_MAJORS:
        raise EngineError(f"Elasticsearch {version} is not supported (8.x or 9.x)")
    return version


def _batches(encoded: Path, size: int = 500) -> Iterator[list[dict]]:
    """The encoded folder's records with weights (what the index must hold), ``size`` at a time."""
    batch: list[dict] = []
    for record in iter_vectors(encoded):
        if not es_features(record["vector"]):
            continue  # nothing to retrieve it by: counted as an empty vector at encode time
        batch.append(record)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _present(client, index_name: str, ids: list[str]) -> dict[str, str | None]:
    """Which of ``ids`` the index holds, with the content hash each was stored with."""
    docs = client.mget(index=index_name, ids=ids, source=["hash"])["docs"]
    return {d["_id"]: d.get("_source", {}).get("hash") for d in docs if d.get("found")}


def _actions(encoded: Path, index_name: str, client=None, skipped: list[int] | None = None) -> Iterator[dict]:
    """Bulk actions for every record; with ``client``, those the index already holds unchanged
    (same content hash) are skipped (a resumed load, or an update) and counted in ``skipped[0]``."""
    store = SentenceStore(encoded / SENTENCES)
    try:
        for batch in _batches(encoded):
            if client is not None:
                there = _present(client, index_name, [r["id"] for r in batch])
                fresh = [r for r in batch if r["id"] not in there or there[r["id"]] != r.get("hash")]
                if skipped is not None:
                    skipped[0] += len(batch) - len(fresh)
                batch = fresh
            yield from _with_text(batch, store, index_name)
    finally:
        store.close()


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


def _id_digest(ids: Iterable[str]) -> tuple[int, int]:
    """How many ``ids`` and the sum of their 128-bit hashes: the same for the same ids in any order,
    and different (but for a 2^-128 chance) when one is swapped for another, in constant memory."""
    n = total = 0
    for i in ids:
        n += 1
        total += int.from_bytes(hashlib.blake2b(i.encode("utf-8"), digest_size=16).digest(), "big")
    return n, total % (1 << 128)


def id_differences(client, index_name: str, encoded: str | Path) -> tuple[list[str], list[str]]:
    """(the encoded folder's ids that ``index_name`` does not hold, the ids it holds that the folder
    has not): what a count check misses when one document is lost and a foreign one came in.

    The ids of both are compared by :func:`_id_digest`, streamed (constant memory, one pass over
    each); only when they differ are the differences listed (the folder's ids then held in memory)."""
    encoded = Path(encoded)
    there = _id_digest(h["_id"] for h in scan(client, index_name, source=False, page=5000))
    if there == _id_digest(_loaded_ids(encoded)):
        return [], []
    return _missing(client, index_name, encoded), _stale_ids(client, index_name, encoded)


@contextmanager
def _point_in_time(client, index_name: str) -> Iterator[dict]:
    """A point in time of ``index_name``, as a search's ``pit`` (its id kept current), closed after."""
    with _cluster_errors(f"reading index {index_name!r}"):
        pit = {"id": client.open_point_in_time(index=index_name, keep_alive="5m")["id"], "keep_alive": "5m"}
    try:
        yield pit
    finally:
        try:
            client.close_point_in_time(id=pit["id"])
        except Exception:
            pass  # it expires by itself


def scan(client, index_name: str, source: list[str] | bool = False, query: dict | None = None,
         page: int = 1000, pit: dict | None = None) -> Iterator[dict]:
    """Every hit of ``query`` in ``index_name``, paged with a point in time and ``search_after``
    (a consistent view however long the caller takes between pages); in ``pit`` when given."""
    if pit is None:
        with _point_in_time(client, index_name) as pit:
            yield from scan(client, index_name, source, query, page, pit)
        return
    after = None
    while True:
        with _cluster_errors(f"reading index {index_name!r}"):
            response = client.search(pit=pit, sort=["_shard_doc"], size=page, source=source, search_after=after,
                                     query=query or {"match_all": {}})
        hits = response["hits"]["hits"]
        if not hits:
            return
        pit["id"] = response.get("pit_id", pit["id"])
        yield from hits
        after = hits[-1]["sort"]


def _with_text(records: list[dict], store: SentenceStore, index_name: str) -> Iterator[dict]:
    found = store.get([r["id"] for r in records], context=True)
    for r in records:
        features = es_features(r["vector"])
        s = found[r["id"]]
        source = {"text": s.text, FIELD: features}
        if r.get("hash"):
            source["hash"] = r["hash"]
        for key in ("context", "doc", "start", "end"):
            if getattr(s, key) not in (None, ""):
                source[key] = getattr(s, key)
        yield {"_op_type": "index", "_index": index_name, "_id": r["id"], "_source": source}


def build_index(encoded: str | Path, client, index_name: str, chunk_size: int = 500, max_retries: int = 5,
                initial_backoff: float = 2.0, report: str | Path | None = None, progress: bool = True,
                field_type: FieldType | str = FieldType.RANK_FEATURES, recreate: bool = False) -> dict:
    """Stream an encoded folder into the index ``index_name`` (created with the SPARC mapping if
    missing; deleted first with ``recreate``): the Elasticsearch counterpart of ``lucene.build_index``.

    Loading into an index that already holds weights of the same model, K and factor updates it:
    documents already there with the same content are skipped (which also resumes an interrupted
    load), new and changed ones are written, and those the encoded folder no longer has are
    deleted. The mapping's ``_meta.sparc_es_build`` records what the index was built from and
    when. Returns counts; raises
    :class:`EngineError` when any document failed or is missing at the end, with the ids in
    ``report`` (default ``ENCODED/es-failures-INDEX.jsonl``).
    """
    import sys

    from elasticsearch import helpers
    from tqdm import tqdm

    index = check_index_name(index_name)
    encoded = Path(encoded)
    manifest = Manifest.read(encoded)
    expected = manifest.retrievable
    check_server(client)
    body = mapping(manifest, field_type)
    again = "; run the same command again when the cluster is back: loading resumes"
    with _cluster_errors(f"preparing index {index!r}", again):
        if recreate and client.indices.exists(index=index):
            client.indices.delete(index=index)
        resume = client.indices.exists(index=index)
        if resume:
            # Re-running into the same index replaces documents by id; weights from another model or
            # factor would be mixed in silently, so that is refused.
            existing = client.indices.get_mapping(index=index)[index]["mappings"].get("_meta", {}).get("sparc_es")
            if not same_weights(existing, body["_meta"]["sparc_es"]):
                raise EngineError(f"index {index!r} already holds other weights ({_differs(existing, body)}); "
                                  "choose another index name or load with --recreate")
            client.indices.refresh(index=index)  # a count sees only refreshed documents
            resume = client.count(index=index)["count"] > 0
            properties = client.indices.get_mapping(index=index)[index]["mappings"].get("properties", {})
            if "hash" not in properties:  # made before content hashes were stored
                client.indices.put_mapping(index=index, properties={"hash": BASE_MAPPING["properties"]["hash"]})
        else:
            client.indices.create(index=index, mappings=body)
    report_path = Path(report) if report else encoded / f"es-failures-{index}.jsonl"
    ok = failed = 0
    skipped = [0]
    with _cluster_errors(f"loading into {index!r}", again), open(report_path, "w", encoding="utf-8") as failures, \
            tqdm(total=expected, unit="sent", desc="bulk", disable=not progress, file=sys.stderr) as bar:
        actions = _actions(encoded, index, client if resume else None, skipped)
        for success, item in helpers.streaming_bulk(client, actions, chunk_size=chunk_size,
                                                    max_retries=max_retries, initial_backoff=initial_backoff,
                                                    raise_on_error=False, raise_on_exception=False):
            if success:
                ok += 1
            else:
                failed += 1
                failures.write(json.dumps(item, default=str) + "\n")
            bar.n = skipped[0] + ok + failed
            bar.update(0)
    if skipped[0] + ok + failed > expected:  # e.g. records written twice into one encoded folder
        raise EngineError(count_mismatch(f"the encoded folder {encoded}", skipped[0] + ok + failed, expected,
                                         "sentences with weights its manifest lists"))
    deleted = 0
    if resume:
        with _cluster_errors(f"deleting stale documents from {index!r}", again):
            client.indices.refresh(index=index)
            stale = _stale_ids(client, index, encoded)
            for success, item in helpers.streaming_bulk(
                    client, ({"_op_type": "delete", "_index": index, "_id": i} for i in stale), chunk_size=chunk_size,
                    max_retries=max_retries, initial_backoff=initial_backoff, raise_on_error=False):
                deleted += success
    with _cluster_errors(f"checking the ids in {index!r}", again):
        client.indices.refresh(index=index)
        count = client.count(index=index)["count"]
        # ids, not only their count: a lost document and a foreign one leave the count right
        missing, extra = id_differences(client, index, encoded)
    if missing or extra:
        with open(report_path, "a", encoding="utf-8") as failures:
            failures.writelines(json.dumps({"missing": i}) + "\n" for i in missing)
            failures.writelines(json.dumps({"extra": i}) + "\n" for i in extra)
    elif not failed:
        report_path.unlink()
    result = {"index": index, "loaded": ok, "already_there": skipped[0], "deleted": deleted, "failed": failed,
              "count": count, "expected": expected}
    if failed or missing or extra:
        foreign = f"; {len(extra)} it should not hold (e.g. {', '.join(extra[:3])})" if extra else ""
        raise EngineError(f"{failed} of {ok + failed} documents failed to load into {index!r}; {len(missing)} are "
                          f"missing from it (e.g. {', '.join(missing[:3]) or '-'}){foreign}; ids in {report_path}"
                          f"{again}")
    if count != expected:
        raise EngineError(count_mismatch(f"index {index!r}", count, expected, f"sentences with weights in {encoded}"))
    with _cluster_errors(f"recording the build in {index!r}"):
        client.indices.put_mapping(index=index, meta={
            "sparc_es": _identity(manifest),
            "sparc_es_build": {"encoded": str(encoded.resolve()), "corpus": list(manifest.corpus),
                               "sentences": manifest.sentences, "documents": count,
                               "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}})
    return result


def _missing(client, index_name: str, encoded: Path) -> list[str]:
    """The ids of the encoded folder's records that the index does not hold."""
    out: list[str] = []
    for batch in _batches(encoded):
        ids = [r["id"] for r in batch]
        there = _present(client, index_name, ids)
        out += [i for i in ids if i not in there]
    return out


@dataclass
class ElasticSource:
    """A corpus read from an existing Elasticsearch index (``encode --from-es``).

    Documents are paged with a point in time and ``search_after`` (a consistent view however long
    encoding takes), each split into sentences with its paragraph as context, as a local text
    document is; sentence ids are ``<document id>#<n>`` and ``doc`` is the document id, so a hit
    points back to its source document. ``id_field`` takes the document id from a source field
    instead of ``_id``; ``query`` (query DSL) selects documents; ``title_field`` is put before
    each paragraph in the context.
    """

    client: object
    index: str
    text_field: str
    id_field: str | None = None
    title_field: str | None = None
    query: dict | None = None
    page: int = 500
    format: str = "text"  # how the text field is written: text, markdown, rst or html (corpus.split_document)

    def describe(self) -> list[str]:
        query = json.dumps(self.query, sort_keys=True) if self.query else ""
        read_as = "" if self.format == "text" else f":{self.format}"  # a resume must read the same way
        return [f"elasticsearch:{self.index}:{self.text_field}:{self.id_field or '_id'}:{self.title_field or ''}:{query}"
                f"{read_as}"]

    def documents(self) -> Iterator[tuple[str, dict]]:
        """(document id, source) of every selected document, sorted by document id.

        The same order on every read, whatever the index's own order (which changes when a
        document is edited or segments merge): a resumed encode reads the source again and
        compares it with what it read before. The ids are listed first (only they are held in
        memory), then the documents fetched ``page`` at a time, all in one point in time."""
        fields = [f for f in (self.text_field, self.id_field, self.title_field) if f]
        with _point_in_time(self.client, self.index) as pit:
            listed = []
            for h in scan(self.client, self.index, source=[self.id_field] if self.id_field else False,
                          query=self.query, page=max(self.page, 1000), pit=pit):
                doc_id = h.get("_source", {}).get(self.id_field) if self.id_field else h["_id"]
                if doc_id is None or str(doc_id).strip() == "":
                    raise InputError(f"{self.index}/{h['_id']}", f"no {self.id_field!r} field to take the id from")
                listed.append((str(doc_id), h["_id"]))
            listed.sort()
            for start in range(0, len(listed), self.page):
                part = listed[start:start + self.page]
                with _cluster_errors(f"reading index {self.index!r}"):
                    response = self.client.search(pit=pit, size=len(part), source=fields,
                                                  query={"ids": {"values": [i for _, i in part]}})
                pit["id"] = response.get("pit_id", pit["id"])
                found = {h["_id"]: h.get("_source", {}) for h in response["hits"]["hits"]}
                for doc_id, es_id in part:
                    if es_id not in found:  # listed in this point in time: only a broken server loses it
                        raise EngineError(f"index {self.index!r} lost document {es_id!r} while it was read")
                    yield doc_id, found[es_id]

    def read(self, stats: CorpusStats | None = None) -> Iterator[Sentence]:
        seen: set[str] = set()
        count = 0
        for doc_id, src in self.documents():
            where = f"{self.index}/{doc_id}"
            if doc_id in seen:
                raise InputError(where, f"two documents have the id {doc_id!r}")
            seen.add(doc_id)
            text = src.get(self.text_field)
            if text is None:
                continue  # a document without the field has nothing to encode
            if not isinstance(text, str):
                raise InputError(where, f"field {self.text_field!r} is not text")
            title = src.get(self.title_field) if self.title_field else ""
            for sentence in document_sentences(text, doc_id, stats, title if isinstance(title, str) else "",
                                               format=self.format, where=where):
                count += 1
                yield sentence
        if count == 0:
            raise InputError(self.index, f"no sentences: no selected document has text in {self.text_field!r}")


class ElasticEngine:
    """Search a sparc-es index in Elasticsearch with the question as a dot-product query."""

    def __init__(self, client, index_name: str, queries: QueryEncoder,
                 mode: QueryMode | str = QueryMode.RANK_FEATURE, bm25_weight: float = 0.0) -> None:
        """``queries``: the question encoder (the tokenizer of the encoded folder that was loaded);
        ``bm25_weight`` > 0 adds a BM25 ``match`` clause on the text with that boost (a hybrid;
        scores are then no longer pure SPARC sums)."""
        self.client = client
        self.index = index = index_name
        self.mode = choice(QueryMode, mode, "query mode")
        self.bm25_weight = bm25_weight
        self.queries = queries
        check_server(client)
        try:
            meta = client.indices.get_mapping(index=index)[index]["mappings"].get("_meta", {}).get("sparc_es")
        except Exception as e:
            raise EngineError(f"cannot read index {index!r}: {_redacted(str(e))}") from None
        if not meta:
            raise EngineError(f"index {index!r} was not made by sparc-es (no _meta.sparc_es in its mapping)")
        self.factor = float(meta["factor"])

    def body(self, question: str, k: int = 10) -> dict | None:
        """The request body for ``question`` (what ``sparc-es query-dsl`` prints); None when the
        question has no token to score and no BM25 clause."""
        bag = self.queries.bag(question)
        if not bag and not self.bm25_weight:
            return None
        return query_body(bag, size=k, mode=self.mode, bm25_text=question, bm25_weight=self.bm25_weight)

    def search(self, question: str, k: int = 10) -> list[Hit]:
        body = self.body(question, k)
        if body is None:
            return []
        with _cluster_errors(f"searching {self.index!r}", "; raise --es-timeout if the cluster is slow"):
            response = self.client.search(index=self.index, **body)
        return self._hits(response)

    def batch_search(self, topics: Iterable[tuple[str, str]], k: int = 1000, threads: int = 1) -> dict[str, list[Hit]]:
        """Many questions through ``_msearch``, 50 per request."""
        topics = list(topics)
        results: dict[str, list[Hit]] = {}
        for start in range(0, len(topics), 50):
            part = [(qid, self.body(q, k)) for qid, q in topics[start: start + 50]]
            asked = [(qid, body) for qid, body in part if body is not None]
            results.update((qid, []) for qid, _ in part)
            if not asked:
                continue
            searches = []
            for _, body in asked:
                searches += [{"index": self.index}, body]
            with _cluster_errors(f"searching {self.index!r}", "; raise --es-timeout if the cluster is slow"):
                responses = self.client.msearch(searches=searches)["responses"]
            for (qid, _), response in zip(asked, responses):
                if "error" in response:
                    raise EngineError(f"query {qid} failed: {response['error']}")
                results[qid] = self._hits(response)
        return results

    def _hits(self, response) -> list[Hit]:
        hits = []
        for h in response["hits"]["hits"]:
            src = h.get("_source", {})
            hits.append(Hit(id=h["_id"], score=h["_score"] / self.factor, text=src.get("text", ""),
                            doc=src.get("doc"), start=src.get("start"), end=src.get("end")))
        return hits

    def close(self) -> None:
        self.client.close()
