"""Issue 28's fault probe of the Elasticsearch engine, over real HTTP (noida-db on loopback, or the
cluster of SPARC_ES_URL): no password in any message, retries that back off, a post-load check of
the ids (not only of their count), and a source index read in the same order on every run."""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from elastic_transport import TransportError

from sparc_es.cli import main
from sparc_es.corpus.sources import sentence_key
from sparc_es.encode.run import encode_corpus
from sparc_es.engines.elastic import (
    Connection,
    ElasticEngine,
    ElasticSource,
    build_index as load_es,
    check_server,
    es_features,
)
from sparc_es.engines.elastic.loopback import free_port
from sparc_es.errors import EngineError, InputError, SparcError
from sparc_es.layout.records import iter_vectors
from sparc_es.model.query import QueryEncoder

ROOT = Path(__file__).resolve().parents[1]
SECRET = "s3cret"


@pytest.fixture(scope="module")
def encoded(tmp_path_factory, tiny_model) -> Path:
    root = tmp_path_factory.mktemp("trust")
    corpus = root / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"s{i:02d}", "text": f"Sentence {i} about port {8000 + i}."}) + "\n"
                              for i in range(40)))
    encode_corpus([corpus], root / "enc", tiny_model, progress=False, idf=False)
    return root / "enc"


class Dropper:
    """A server on loopback that accepts every connection and closes it at once (a cluster going
    down, a proxy without its backend), recording when each connection came."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.server.settimeout(0.1)
        self.accepted: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        self.port = self.server.getsockname()[1]

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            self.accepted.append(time.monotonic())
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.server.close()


@pytest.fixture
def dropper():
    d = Dropper()
    yield d
    d.close()


# --- 1. no password in any message -------------------------------------------------------

BAD_URLS = [
    ("elastic:s3cret@localhost:9200", {}),  # no scheme
    ("ftp://elastic:s3cret@localhost:9200", {}),  # another scheme
    ("http://elastic:s3cret@localhost:92x0", {}),  # a port that is not a number
    ("http://elastic:s3cret@localhost:99999", {}),  # a port out of range
    ("http://elastic:s3cret@[::1:9200", {}),  # an IPv6 host without its bracket
    ("http://elastic:s3cret@host name:9200", {}),  # a space in the host
    ("http://elastic:pa/s3cret@localhost:9200", {}),  # a "/" in the password, not percent-encoded
    ("http://elastic:s3cret@localhost:9200", {"ca_certs": "/etc/ssl/ca.pem"}),  # a CA bundle over http
]


@pytest.mark.parametrize("url, given", BAD_URLS)
def test_a_url_that_cannot_be_used_is_refused_without_its_password(url, given):
    with pytest.raises(SparcError) as refused:
        Connection(url, **given).client()
    message = str(refused.value)
    assert SECRET not in message and "***@" in message and "\n" not in message, message


def test_a_space_in_the_host_is_refused_by_sparc_es_not_left_to_the_clients_urllib3():
    with pytest.raises(SparcError, match="its host has a space or a control character"):
        Connection("http://elastic:s3cret@host name:9200").client()


@pytest.mark.parametrize("url, given", BAD_URLS)
def test_the_cli_never_prints_the_password_of_a_bad_url(url, given, capsys, monkeypatch, tmp_path):
    flags = ["--es-ca-certs", given["ca_certs"]] if given else []
    assert main(["search", "--engine", "es", "--es-url", url, *flags, "--es-index", "x", "question"]) == 1
    err = capsys.readouterr().err
    assert SECRET not in err and err.startswith("sparc-es: error:") and err.count("\n") == 1, err
    monkeypatch.setenv("SPARC_ES_URL", url)  # the same from the environment, in another command
    assert main(["encode", "--from-es", "src", "--text-field", "body", *flags, "--output", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert SECRET not in err and err.count("\n") == 1, err


def test_a_connection_never_shows_the_password_of_its_url():
    for url in ("http://elastic:s3cret@localhost:9200", "https://elastic:s3cret@es.example:9243/prefix"):
        assert SECRET not in repr(Connection(url)) and "elastic:***@" in repr(Connection(url))
    from sparc_es.engines.elastic import redact_url

    assert redact_url("http://elastic:s3cret@localhost:9200") == "http://elastic:***@localhost:9200"
    assert redact_url("elastic:s3cret@localhost:9200") == "elastic:***@localhost:9200"
    assert redact_url("https://tokenonly@host:9200") == "https://***@host:9200"  # a bare token is hidden whole
    assert redact_url("http://elastic:p@ss:s3cret@host:9200") == "http://elastic:***@host:9200"
    assert redact_url("http://localhost:9200") == "http://localhost:9200"


@pytest.mark.es
def test_errors_while_talking_to_a_cluster_never_show_the_password(es_url, encoded, dropper, tmp_path):
    """Every way a request can fail (refused, dropped, TLS spoken to plain HTTP, an unknown host, an
    index the cluster does not have), through every entry point: none names the password."""
    with_secret = es_url.replace("://", f"://elastic:{SECRET}@", 1) if "@" not in es_url else es_url
    unreachable = [f"http://elastic:{SECRET}@127.0.0.1:{free_port()}",
                   f"http://elastic:{SECRET}@127.0.0.1:{dropper.port}",
                   f"https://elastic:{SECRET}@127.0.0.1:{dropper.port}",
                   f"http://elastic:{SECRET}@no-such-host.invalid:9200"]
    messages = []
    for url in unreachable:
        client = Connection(url, retries=1, backoff=0.01, timeout=5).client()
        for attempt in (lambda client=client: check_server(client),
                        lambda client=client: ElasticEngine(client, "x", QueryEncoder.load(encoded)),
                        lambda client=client: load_es(encoded, client, "x", progress=False,
                                                      report=tmp_path / "r.jsonl"),
                        lambda client=client: list(ElasticSource(client, "x", "body").read())):
            with pytest.raises(EngineError) as failed:
                attempt()
            messages.append(str(failed.value))
    client = Connection(with_secret).client()  # a cluster that answers, about an index it does not have
    for attempt in (lambda: ElasticEngine(client, "no-such-index", QueryEncoder.load(encoded)),
                    lambda: list(ElasticSource(client, "no-such-index", "body").read())):
        with pytest.raises(EngineError) as failed:
            attempt()
        messages.append(str(failed.value))
    for message in messages:
        assert SECRET not in message and "\n" not in message, message
    assert any("no-such-index" in m for m in messages)


@pytest.mark.slow
def test_the_cli_never_prints_the_password_when_the_cluster_fails(encoded, tiny_model_dir, dropper, capsys,
                                                                    monkeypatch):
    """search, index and encode --from-es against a closed port and a server that drops
    connections, the URL given by flag and by environment: through the console script for the
    first, in-process for the second (the same code, faster)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("SPARC_ES_URL", None)
    for port in (free_port(), dropper.port):
        url = f"http://elastic:{SECRET}@127.0.0.1:{port}"
        quick = ["--es-retries", "0"]
        for args in (["search", "--engine", "es", "--es-url", url, "--es-index", "x", "--tokenizer", str(encoded),
                      *quick, "question"],
                     ["index", "--engine", "es", "--input", str(encoded), "--es-index", "x", *quick, "--quiet"],
                     ["encode", "--from-es", "src", "--text-field", "body", "--output", str(encoded.parent / "o"),
                      "--model", str(tiny_model_dir), *quick, "--quiet"]):
            run_env = env if "--es-url" in args else {**env, "SPARC_ES_URL": url}
            if port == dropper.port:
                with monkeypatch.context() as patch:
                    patch.delenv("SPARC_ES_URL", raising=False)
                    if "SPARC_ES_URL" in run_env:
                        patch.setenv("SPARC_ES_URL", url)
                    rc, err = main(args), capsys.readouterr().err
            else:
                done = subprocess.run([sys.executable, "-m", "sparc_es", *args], capture_output=True, text=True,
                                      env=run_env, cwd=ROOT, timeout=120)
                rc, err = done.returncode, done.stderr + done.stdout
            assert rc == 1 and SECRET not in err, err
            assert err.startswith("sparc-es: error:") and err.count("\n") == 1, err


# --- 2. retries back off --------------------------------------------------------------------

def test_retry_delays_double_from_half_a_second_up_to_a_cap():
    from sparc_es.engines.elastic import MAX_BACKOFF, retry_delays

    assert retry_delays(3) == [0.5, 1.0, 2.0]
    assert retry_delays(0) == []
    assert retry_delays(12)[-1] == MAX_BACKOFF and retry_delays(2, 0.05) == [0.05, 0.1]


def _attempts(caplog) -> list[float]:
    """When each attempt of a request ended: elastic-transport logs one line per attempt."""
    return [r.created for r in caplog.records
            if r.name == "elastic_transport.transport" and "[status:" in r.getMessage()]


def _requests(client):
    """One request of each kind the engine makes: the version check, a query, a bulk load."""
    from elasticsearch import helpers

    def bulk():
        for _ in helpers.streaming_bulk(client, [{"_index": "x", "_id": "1", "_source": {"text": "a"}}],
                                        initial_backoff=0, raise_on_error=False):
            pass

    return {"info": lambda: check_server(client),
            "search": lambda: client.search(index="x", query={"match_all": {}}),
            "bulk": bulk}


def _check_backoff(times: list[float], elapsed: float, delays: list[float]) -> None:
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert len(times) == len(delays) + 1, times
    for gap, delay in zip(gaps, delays):
        assert gap >= delay * 0.95, (gaps, delays)
    assert all(a < b for a, b in zip(gaps, gaps[1:])), gaps  # the waits grow
    assert sum(delays) * 0.95 <= elapsed < sum(delays) + 5


@pytest.mark.parametrize("kind", ["info", "search", "bulk"])
def test_a_closed_port_is_retried_with_growing_delays(kind, caplog):
    caplog.set_level(logging.INFO, logger="elastic_transport.transport")
    client = Connection(f"http://127.0.0.1:{free_port()}", retries=3, backoff=0.1).client()
    started = time.monotonic()
    with pytest.raises((EngineError, TransportError)):  # EngineError, or the client's ConnectionError
        _requests(client)[kind]()
    _check_backoff(_attempts(caplog), time.monotonic() - started, [0.1, 0.2, 0.4])


@pytest.mark.parametrize("kind", ["info", "search", "bulk"])
def test_a_server_dropping_connections_is_retried_with_growing_delays(kind, dropper):
    client = Connection(f"http://127.0.0.1:{dropper.port}", retries=3, backoff=0.1).client()
    started = time.monotonic()
    with pytest.raises((EngineError, TransportError)):
        _requests(client)[kind]()
    _check_backoff(dropper.accepted, time.monotonic() - started, [0.1, 0.2, 0.4])


def test_a_busy_answer_is_retried_with_growing_delays():
    """503 (and 429, 502, 504): the same waits as a connection error."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    asked: list[float] = []

    class Busy(BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append(time.monotonic())
            body = b'{"error": "busy", "status": 503}'
            self.send_response(503)
            for name, value in (("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                                ("X-Elastic-Product", "Elasticsearch")):
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Busy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = Connection(f"http://127.0.0.1:{server.server_address[1]}", retries=3, backoff=0.1).client()
        started = time.monotonic()
        with pytest.raises(EngineError, match="503"):
            check_server(client)
        _check_backoff(asked, time.monotonic() - started, [0.1, 0.2, 0.4])
    finally:
        server.shutdown()
        server.server_close()


def test_tls_spoken_to_a_server_that_does_not_is_not_retried(dropper):
    """A TLS failure (a certificate, a plain-HTTP port) does not heal by waiting: one attempt."""
    client = Connection(f"https://127.0.0.1:{dropper.port}", retries=3, backoff=0.5).client()
    started = time.monotonic()
    with pytest.raises(EngineError, match="cannot reach Elasticsearch"):
        check_server(client)
    assert len(dropper.accepted) == 1 and time.monotonic() - started < 0.5


def test_no_retries_is_one_attempt(dropper):
    client = Connection(f"http://127.0.0.1:{dropper.port}", retries=0).client()
    with pytest.raises(EngineError):
        check_server(client)
    assert len(dropper.accepted) == 1


# --- 3. the post-load check compares ids --------------------------------------------------

class Intruder:
    """The real client, and another writer: right after the load's last bulk request, a foreign
    document is planted in the index and one of ours deleted, which leaves the count right."""

    def __init__(self, real, index: str, victim: str) -> None:
        self.real, self.index, self.victim, self.done = real, index, victim, False

    def __getattr__(self, name):
        return getattr(self.real, name)

    def options(self, **kwargs):
        return self

    def bulk(self, *args, **kwargs):
        response = self.real.bulk(*args, **kwargs)
        if not self.done:
            self.done = True
            self.real.index(index=self.index, id="foreign#0", document={"text": "Not ours.", "weights": {"x": 1.0}})
            self.real.delete(index=self.index, id=self.victim)
        return response


@pytest.mark.es
def test_a_foreign_document_and_a_lost_one_fail_the_check_by_id(es_url, encoded, tmp_path):
    ids = [r["id"] for r in iter_vectors(encoded) if es_features(r["vector"])]
    victim = ids[7]
    name = f"intruded-{os.getpid()}"
    real = Connection(es_url).client()
    report = tmp_path / "report.jsonl"
    try:
        with pytest.raises(EngineError) as failed:
            load_es(encoded, Intruder(real, name, victim), name, chunk_size=1000, progress=False, recreate=True,
                    report=report)
        message = str(failed.value)
        assert victim in message and "foreign#0" in message and "\n" not in message, message
        assert "1 are missing" in message and "1 it should not hold" in message, message
        real.indices.refresh(index=name)
        assert real.count(index=name)["count"] == len(ids)  # what a count check saw: nothing wrong
        lines = [json.loads(line) for line in report.read_text().splitlines()]
        assert {"missing": victim} in lines and {"extra": "foreign#0"} in lines
        result = load_es(encoded, real, name, progress=False, report=report)  # the rerun the message asks for
        assert result["loaded"] == 1 and result["deleted"] == 1 and result["count"] == len(ids)
        real.indices.refresh(index=name)
        hits = real.search(index=name, size=1000, source=False, query={"match_all": {}})["hits"]["hits"]
        assert sorted(h["_id"] for h in hits) == sorted(ids)
    finally:
        real.indices.delete(index=name, ignore_unavailable=True)


# --- 4. a source index is read in the same order every time --------------------------------

@pytest.mark.es
def test_a_source_index_is_read_in_document_id_order_whatever_its_layout(es_url):
    """Documents written out of order, then one edited (which moves it to the end of the index's
    own order): every read yields the sentences sorted by document id, with _id or --id-field."""
    from elasticsearch import helpers

    client = Connection(es_url).client()
    src = f"order-{os.getpid()}"
    order = ["m", "b", "z", "a", "c10", "c9"]
    keys = dict(zip(order, reversed(order)))  # --id-field values in another order than the _ids
    try:
        client.indices.create(index=src, mappings={"properties": {"body": {"type": "text"},
                                                                  "key": {"type": "keyword"}}})
        helpers.bulk(client, ({"_index": src, "_id": i, "_source": {"body": f"Doc {i} starts. Doc {i} ends.",
                                                                     "key": f"k-{keys[i]}"}} for i in order),
                     refresh=True)

        def read(**given):
            return [s.id for s in ElasticSource(client, src, "body", page=2, **given).read()]

        texts = {i: [f"Doc {i} starts.", f"Doc {i} ends."] for i in order}
        first = read()
        assert first == [f"{d}#{sentence_key(t)}" for d in sorted(order) for t in texts[d]]
        client.index(index=src, id="b", document={"body": "Doc b edited. Doc b ends.", "key": f"k-{keys['b']}"},
                     refresh=True)
        texts["b"][0] = "Doc b edited."
        assert read() == [f"{d}#{sentence_key(t)}" for d in sorted(order) for t in texts[d]]  # b's first edited
        by_key = read(id_field="key")
        of_key = {k: i for i, k in keys.items()}
        assert by_key == [f"k-{k}#{sentence_key(t)}" for k in sorted(order) for t in texts[of_key[k]]]
    finally:
        client.indices.delete(index=src, ignore_unavailable=True)


@pytest.mark.es
def test_loading_never_writes_into_the_encoded_folder_and_checks_its_report_first(es_url, encoded, tmp_path,
                                                                                   monkeypatch):
    """The encoded folder is input (it may be read-only): the failure report goes to the working
    directory; an unwritable report is one line before any index is created."""
    before = sorted(p.name for p in encoded.iterdir())
    real = Connection(es_url).client()
    name = f"report-{os.getpid()}"
    monkeypatch.chdir(tmp_path)
    try:
        result = load_es(encoded, real, name, progress=False, recreate=True)
        assert result["failed"] == 0 and sorted(p.name for p in encoded.iterdir()) == before
        assert not list(tmp_path.glob("es-failures-*"))  # nothing failed: no report left
        real.indices.delete(index=name)
        with pytest.raises(InputError, match="cannot write the failure report here"):
            load_es(encoded, real, name, progress=False, report=tmp_path / "no" / "such" / "r.jsonl")
        assert not real.indices.exists(index=name)  # refused before the cluster was touched
    finally:
        real.indices.delete(index=name, ignore_unavailable=True)


@pytest.mark.es
def test_a_paragraph_inserted_at_the_top_writes_only_its_sentences(es_url, tiny_model, tmp_path):
    """Ids from content, not position: an update after an insertion re-encodes and re-loads only the
    new sentences; every other sentence keeps its id."""
    docs = tmp_path / "docs"
    docs.mkdir()
    body = "".join(f"Paragraph {i} says the port is {8000 + i}. It has a second sentence.\n\n" for i in range(10))
    (docs / "guide.md").write_text("# Guide\n\n" + body)
    encode_corpus([docs], tmp_path / "enc", tiny_model, progress=False, idf=False)
    real = Connection(es_url).client()
    name = f"inserted-{os.getpid()}"
    try:
        first = load_es(tmp_path / "enc", real, name, progress=False, recreate=True, report=tmp_path / "r.jsonl")
        assert first["loaded"] == 20
        before = {r["id"] for r in iter_vectors(tmp_path / "enc")}
        (docs / "guide.md").write_text("# Guide\n\nA new first paragraph. With two sentences.\n\n" + body)
        manifest = encode_corpus([docs], tmp_path / "enc", tiny_model, progress=False, idf=False, update=True)
        assert manifest.sentences == 22 and manifest.reused == 20
        after = {r["id"] for r in iter_vectors(tmp_path / "enc")}
        assert before < after and len(after - before) == 2
        second = load_es(tmp_path / "enc", real, name, progress=False, report=tmp_path / "r.jsonl")
        # written whole: the two new sentences; the twenty others moved down the file: their
        # offsets updated in place, not their weights or text
        assert (second["loaded"], second["moved"], second["already_there"], second["deleted"]) == (2, 20, 0, 0)
        text = (docs / "guide.md").read_text()
        real.indices.refresh(index=name)
        for hit in real.search(index=name, size=100, query={"match_all": {}})["hits"]["hits"]:
            src = hit["_source"]
            assert text[src["start"]:src["end"]] == src["text"], src  # every offset is the file's now
            assert len(src["weights"]) > 0
        third = load_es(tmp_path / "enc", real, name, progress=False, report=tmp_path / "r.jsonl")
        assert (third["loaded"], third["moved"], third["already_there"]) == (0, 0, 22)
    finally:
        real.indices.delete(index=name, ignore_unavailable=True)


@pytest.mark.es
def test_elasticsearch_hits_are_collapsed_by_paragraph_as_lucenes_are(es_url, tiny_model, tmp_path):
    """The one presenter on the Elasticsearch engine: its hits bring their passage, so the sentences
    of one paragraph are one hit there too."""
    from sparc_es.answers.show import Presenter, answer
    from sparc_es.engines import open_engine

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ports.md").write_text("# Ports\n\nThe server listens on port 8081. The port is set with --port. "
                                   "A busy port is one line.\n\nAnother paragraph about the proxy port.\n")
    encode_corpus([docs], tmp_path / "enc", tiny_model, progress=False, idf=False)
    real = Connection(es_url).client()
    name = f"collapse-{os.getpid()}"
    try:
        load_es(tmp_path / "enc", real, name, progress=False, recreate=True, report=tmp_path / "r.jsonl")
        engine = open_engine("es", None, connection=Connection(es_url), es_index=name, tokenizer=tmp_path / "enc",
                             hybrid="none")
        presenter = Presenter(engine, None, tmp_path / "enc")
        try:
            _, every = answer(engine, presenter, "which port does the server listen on", 10, collapse_paragraphs=False)
            _, hits = answer(engine, presenter, "which port does the server listen on", 10)
        finally:
            presenter.close()
            engine.close()
        assert all(h.context for h in every) and len(hits) < len(every)
        assert sum(1 + len(h.others) for h in hits) == len(every)  # every sentence once, under its paragraph's best
        assert len(hits) == len({(h.hit.doc, h.context) for h in every})
        assert all(o.context == h.context for h in hits for o in h.others)
    finally:
        real.indices.delete(index=name, ignore_unavailable=True)


@pytest.mark.es
def test_a_9x_client_talks_to_an_8x_server_by_asking_for_rest_api_version_8(encoded, es_url, capsys):
    """Elasticsearch 8.x refuses a request that asks for REST API version 9 (what client 9.x sends
    with every request: 400 media_type_header_exception). No 8.x server runs here (no Docker, no
    network), so a proxy in front of the loopback server answers those requests as 8.15 does and
    passes the others on: loading and searching through it work, asking for version 8."""
    import re
    import urllib.error
    import urllib.request
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    asked: list[str] = []
    refusal = {"error": {"root_cause": [{"type": "media_type_header_exception",
                                         "reason": "Invalid media-type value on headers [Accept]"}],
                         "type": "media_type_header_exception",
                         "reason": "Invalid media-type value on headers [Accept]",
                         "caused_by": {"type": "status_exception",
                                       "reason": "Accept version must be either version 8 or 7, but found 9."}},
               "status": 400}

    class As8(BaseHTTPRequestHandler):
        def _answer(self, status: int, headers, body: bytes) -> None:
            self.send_response(status)
            for name, value in headers:
                if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _any(self):
            versions = {v for h in ("Accept", "Content-Type")
                        for v in re.findall(r"compatible-with=(\d+)", self.headers.get(h) or "")}
            asked.extend(versions)
            if versions - {"7", "8"}:
                return self._answer(400, [("Content-Type", "application/json"), ("X-Elastic-Product", "Elasticsearch")],
                                    json.dumps(refusal).encode())
            length = int(self.headers.get("Content-Length") or 0)
            data = self.rfile.read(length) if length else None
            request = urllib.request.Request(es_url + self.path, data=data, method=self.command,
                                             headers={k: v for k, v in self.headers.items() if k.lower() != "host"})
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    self._answer(response.status, response.headers.items(), response.read())
            except urllib.error.HTTPError as e:
                self._answer(e.code, e.headers.items(), e.read())

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _any

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), As8)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url, name = f"http://127.0.0.1:{server.server_address[1]}", f"as8-{os.getpid()}"
    try:
        assert main(["index", "--engine", "es", "--input", str(encoded), "--es-url", url, "--es-index", name,
                     "--recreate"]) == 0
        capsys.readouterr()
        assert main(["search", "--engine", "es", "--es-url", url, "--es-index", name, "--tokenizer", str(encoded),
                     "--json", "-k", "1", "Which port is sentence 7 about?"]) == 0
        assert json.loads(capsys.readouterr().out)[0]["id"] == "s07"
        assert "8" in asked and (set(asked) <= {"8"} or asked.count("9") <= 2), asked  # 9 refused once a client
    finally:
        server.shutdown()
        server.server_close()
        from elasticsearch import Elasticsearch

        Elasticsearch(es_url).indices.delete(index=name, ignore_unavailable=True)


def _fake_cluster(answers: dict[tuple[str, str], tuple[int, dict | None]]):
    """A stand-in server answering (method, path) with (status, JSON body or no body), as Elasticsearch
    8.15 would: the loopback server takes any credentials and grants every privilege, so a refusal
    cannot be had from it."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Fake(BaseHTTPRequestHandler):
        def _any(self):
            status, body = answers.get((self.command, self.path.split("?")[0]), (404, {"error": "no"}))
            data = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            self.send_header("X-Elastic-Product", "Elasticsearch")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_HEAD = do_PUT = do_POST = _any

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Fake)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


ROOT_ANSWER = {"name": "n", "cluster_name": "c", "version": {"number": "8.15.3"}, "tagline": "You Know, for Search"}


@pytest.mark.parametrize("answers, flags, message", [
    ({("GET", "/"): (401, {"error": {"type": "security_exception", "reason": "unable to authenticate"},
                           "status": 401})},
     ["--es-user", "me", "--es-password", SECRET],
     r"^sparc-es: error: Elasticsearch at http://127\.0\.0\.1:\d+ refused the credentials \(401 Unauthorized\): "
     r"check --es-api-key, or --es-user and --es-password \(SPARC_ES_API_KEY"),
    ({("GET", "/"): (200, ROOT_ANSWER), ("HEAD", "/notes"): (403, None)}, [],
     r"^sparc-es: error: Elasticsearch rejected a request while preparing index 'notes' \(403 Forbidden\): the "
     r"credentials lack a privilege this needs \(the server gave no reason\)$"),
])
def test_refused_credentials_and_privileges_are_said_as_such(encoded, capsys, answers, flags, message):
    server = _fake_cluster(answers)
    try:
        assert main(["index", "--engine", "es", "--input", str(encoded), "--es-url",
                     f"http://127.0.0.1:{server.server_address[1]}", "--es-index", "notes", *flags]) == 1
    finally:
        server.shutdown()
        server.server_close()
    err = capsys.readouterr().err.strip()
    assert re.match(message, err) and SECRET not in err, err


@pytest.mark.es
@pytest.mark.parametrize("exists", [True, False])
def test_an_index_name_in_the_url_is_said_to_belong_in_es_index(es_url, capsys, exists):
    from elasticsearch import Elasticsearch

    name, client = f"url-path-{os.getpid()}", Elasticsearch(es_url)
    if exists:
        client.indices.create(index=name)
    try:
        assert main(["search", "--engine", "es", "--es-url", f"{es_url.rstrip('/')}/{name}", "--es-index", name,
                     "Which port?"]) == 1
    finally:
        client.indices.delete(index=name, ignore_unavailable=True)
    err = capsys.readouterr().err
    assert f"/{name} is not the root of an Elasticsearch cluster (it answers without the cluster's version): give " \
           "the cluster's URL without an index name in its path, and the index with --es-index" in err, err


@pytest.mark.es
def test_a_closed_elasticsearch_engine_says_it_is_closed_not_that_the_cluster_is_gone(encoded, es_url):
    from sparc_es.engines import open_engine

    name = f"closed-{os.getpid()}"
    client = Connection(es_url).client()
    load_es(encoded, client, name, progress=False, recreate=True)
    try:
        engine = open_engine("es", connection=Connection(es_url), es_index=name, tokenizer=encoded)
        assert engine.search("port 8007", 1)
        engine.close()
        with pytest.raises(EngineError, match="this engine is closed"):
            engine.search("port 8007", 1)
    finally:
        client.indices.delete(index=name, ignore_unavailable=True)


@pytest.mark.es
def test_build_index_takes_a_connection_and_open_engine_says_what_it_takes(encoded, es_url):
    """elastic.build_index took a client and open_engine a Connection; swapped, one said "cannot
    reach Elasticsearch ... 'Connection' object has no attribute 'info'", the other an AttributeError."""
    from elasticsearch import Elasticsearch

    from sparc_es.engines import open_engine

    name = f"either-{os.getpid()}"
    try:
        assert load_es(encoded, Connection(es_url), name, progress=False, recreate=True)["count"] == 40
        with pytest.raises(SparcError, match="connection is a sparc_es.engines.elastic.Connection .* not "
                                             "Elasticsearch"):
            open_engine("es", connection=Elasticsearch(es_url), es_index=name, tokenizer=encoded)
    finally:
        Elasticsearch(es_url).indices.delete(index=name, ignore_unavailable=True)
