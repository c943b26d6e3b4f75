"""``sparc-es serve``: a long-running HTTP JSON API over one open engine, so a question pays the
JVM's start once, not per ``sparc-es search``.

    GET  /health                  index name, sentence count, model fingerprint, engine, its last failure
    GET  /search?q=...&k=10       the hits of one question (also POST /search {"question", "k"})
    POST /batch                   {"questions": [...], "k"}: the hits of each question
    GET  /sentences/{id}          a stored sentence with its passage and where it sits
    GET  /documents/{doc}?line=N  the document as text with numbered lines, at the line (a hit's link)
    GET  /explain?q=...&ids=...   why hits scored what they did, token by token (sparc_es.answers.explain)
    GET  /                        a search page: hits in context, the question's words marked

FastAPI on uvicorn, thin over the library: the engine ``open_engine`` gives (the same one
``sparc-es search`` opens), the index's :class:`~sparc_es.layout.store.SentenceStore`, and the CLI's own
:class:`~sparc_es.answers.show.Presenter`, so a hit here is a hit of ``search --json`` (marks, lines,
headings, code, collapsed paragraphs), and the page renders the server's marks. Every engine
and store call runs on one worker thread: the Lucene engine (pyjnius, a tokenizer) is not safe
for concurrent use, and one thread also keeps a single Python thread attached to the JVM.
Errors are JSON ``{"error": "one line"}``: 4xx for a bad request (413 for a body over
``MAX_BODY``), 500 when the engine fails (its stack goes to the server's log, never to the client).
``/health`` answers off the worker, so a long request never hides a failing engine. A request
whose client has gone stops at its next question; a rebuilt index (``index --overwrite``) is
reopened before the next request that reads it. Nothing the API returns names a local path.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from sparc_es import __version__
from sparc_es.engines.base import Engine, Hit, Recorded, Reweighable, sparc_side
from sparc_es.errors import SparcError, one_line
from sparc_es.layout.manifest import Manifest
from sparc_es.layout.names import META, SENTENCES
from sparc_es.layout.store import SentenceStore

try:
    import uvicorn
    from fastapi import FastAPI, Query, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import HTMLResponse, JSONResponse
    from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator
    from starlette.exceptions import HTTPException
except ImportError as e:  # an optional part: say which extra brings it
    raise SparcError(f"sparc-es serve needs FastAPI and uvicorn ({e}); pip install 'sparc-es[serve]'") from None

MAX_K = 1000  # hits per question
MAX_BATCH = 1000  # questions per /batch request
MAX_EXPLAIN = 20  # hits per /explain request: each is encoded again
MAX_BODY = 4 << 20  # bytes of a request body: a full /batch of long questions fits
MAX_LINE = 300  # characters of an error message sent to a client
HEALTH_WAIT = 10.0  # seconds /health waits for a rebuilt index to be opened again
MAX_DOCUMENT = 16 << 20  # bytes of a document /documents shows
T = TypeVar("T")
log = logging.getLogger("sparc_es.answers.server")


def _line(e: BaseException) -> str:
    """An error as a client or the log reads it: :func:`~sparc_es.errors.one_line`, first line only
    (a Java exception's stack follows it), at most ``MAX_LINE`` characters."""
    return one_line(e, most=MAX_LINE)


class Gone(Exception):
    """The client of a request went away (or the server is stopping): its work stops."""


class ApiError(Exception):
    """A request that ends with ``status`` and the JSON ``{"error": message}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def _question(value: str) -> str:
    from sparc_es.model.query import check_question

    try:
        return check_question(value, asked=True)
    except SparcError as e:
        raise ValueError(str(e)) from None


MIN_SCORE_HELP = "drop hits scoring less (default: the server's --min-score)"
COLLAPSE_HELP = "the sentences of one paragraph as one hit, the others in its collapsed list (false: each its own)"
FROM_HELP = "hits to skip: the next page starts at from + k"
HYBRID_HELP = "this request's: sum (SPARC and BM25 in one query) or none (SPARC alone); the Lucene engine"
WEIGHT_HELP = "this request's BM25 share of the sum, 0 to 1"
PATH_HELP = "only hits of this document, or of the documents under this folder (as hits name them)"


class SearchRequest(BaseModel):
    """``POST /search``: one question."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    question: str
    k: StrictInt = Field(10, ge=1, le=MAX_K)  # strict: true is not 1
    context: bool = Field(False, description="add each hit's passage")
    min_score: float | None = Field(None, ge=0, allow_inf_nan=False, description=MIN_SCORE_HELP)
    collapse: bool = Field(True, description=COLLAPSE_HELP)
    start: StrictInt = Field(0, ge=0, le=MAX_K, alias="from", description=FROM_HELP)
    path: str | None = Field(None, max_length=1000, description=PATH_HELP)
    hybrid: Literal["sum", "none"] | None = Field(None, description=HYBRID_HELP)
    hybrid_weight: float | None = Field(None, ge=0, le=1, allow_inf_nan=False, description=WEIGHT_HELP)

    @field_validator("question")
    @classmethod
    def _nonempty(cls, value: str) -> str:
        return _question(value)


class BatchRequest(BaseModel):
    """``POST /batch``: many questions, the same k."""

    model_config = ConfigDict(extra="forbid")
    questions: list[str] = Field(min_length=1, max_length=MAX_BATCH)
    k: StrictInt = Field(10, ge=1, le=MAX_K)  # strict: true is not 1
    context: bool = False
    min_score: float | None = Field(None, ge=0, allow_inf_nan=False, description=MIN_SCORE_HELP)
    collapse: bool = Field(True, description=COLLAPSE_HELP)

    @field_validator("questions")
    @classmethod
    def _questions(cls, value: list[str]) -> list[str]:
        for i, q in enumerate(value):
            try:
                _question(q)
            except ValueError as e:
                raise ValueError(f"question {i + 1} of {len(value)}: {e}") from None
        return value


def _hit_json(shown, context: bool) -> dict[str, Any]:
    """A hit as the API gives it: what ``search --json`` prints, but the local ``path``; ``where``
    as the CLI writes it (``doc:line``); the passage and its marks only when asked for."""
    out = shown.to_json()
    out.pop("path", None)
    out["where"] = shown.where()
    if not context:
        out.pop("context", None)
        out.pop("paragraph", None)
        out["marks"].pop("context", None)
    return out


class Service:
    """One engine and its index's sentence store behind a single worker thread."""

    def __init__(self, engine: Engine, index: str | Path | None, kind: str = "lucene", model: str = "default",
                 min_score: float | None = None, reopen: Callable[[], Engine] | None = None,
                 tokenizer: str | Path | None = None, name: str | None = None) -> None:
        """``engine`` as ``open_engine`` opened it, over ``index``; ``kind`` is its name (lucene, es, bm25).
        ``model``: what ``/explain`` encodes hits again with (loaded on its first call). ``min_score``:
        hits scoring less are dropped (a request may ask its own). ``reopen``: opens the engine again
        when ``index`` was rebuilt (None: keep answering from the first). ``tokenizer``: on
        Elasticsearch, the encoded folder or index whose question tokenizer, sentence store and corpus
        folders place the hits (``--tokenizer``); ``name``: the index's name in ``/health`` (default:
        ``index``'s folder name). The service closes the engine."""
        self.min_score = min_score
        self.kind, self.model, self._reopen = kind, model, reopen
        self.index = Path(index) if index is not None else None
        self.tokenizer = Path(tokenizer) if tokenizer is not None else None
        self.name = name or (self.index.name if self.index is not None else None)
        self.closing = threading.Event()
        self.failure: dict[str, Any] | None = None  # the last engine call's error, until one succeeds
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sparc-es-engine")
        self._open(engine)
        if self.kind == "lucene" and self.index is not None:  # /explain's model, loaded now, not on its first call
            self._worker.submit(self._load_explainer)

    def _load_explainer(self) -> None:
        try:
            self.explainer().inputs()
        except Exception as e:  # /explain will say it; the rest of the API serves on
            log.warning("explain is not ready: %s", _line(e))

    def explainer(self):
        """The :class:`~sparc_es.answers.explain.Explainer` of this index (made on the worker thread)."""
        if self._explainer is None:
            from sparc_es.answers.explain import Explainer

            self._explainer = Explainer(self.index, self.engine, self.model)
        return self._explainer

    def _open(self, engine: Engine) -> None:
        """Take ``engine`` and the index's manifest and store as they are now (on the worker thread,
        or before it starts)."""
        self.engine = engine
        self._presenter = self._explainer = None  # made on the worker thread when first needed
        described = engine.describe()
        self.engine_info = {"engine": self.kind, "hybrid": described.hybrid.value if described.hybrid else None,
                            "hybrid_weight": described.hybrid_weight}
        self.stamp = _stamp(self.index)
        folder = self.index  # what holds the manifest and the sentences: --tokenizer's folder on Elasticsearch
        if folder is None and self.tokenizer is not None and (self.tokenizer / META).is_file():
            folder = self.tokenizer
        self.manifest = Manifest.read(folder) if folder is not None else None
        store = folder / SENTENCES if folder is not None else None
        self.store = SentenceStore(store) if store is not None and store.is_file() else None
        self.sentences = len(self.store) if self.store is not None else None
        self._documents: frozenset[str] | None = None  # the store's document names, read on first use

    def _drop(self) -> None:
        """Close what :meth:`_open` took (on the worker thread)."""
        if self._presenter is not None:  # the explainer holds only the engine and the model
            self._presenter.close()
        self.engine.close()
        if self.store is not None:
            self.store.close()

    def rebuilt(self) -> bool:
        """Whether the index folder was rebuilt since it was opened (not while a rebuild renames it in)."""
        if self._reopen is None or self.index is None:
            return False
        stamp = _stamp(self.index)
        return stamp is not None and stamp != self.stamp

    async def reopened(self, wait: float = HEALTH_WAIT) -> None:
        """The engine reopened on the worker if the index was rebuilt, waited for at most ``wait``
        seconds (a long search holds the worker: health then answers from what it has); a reopen
        that fails is the failure health reports."""
        if self.rebuilt():
            try:
                await asyncio.wait_for(asyncio.wrap_future(self._worker.submit(self.fresh)), wait)
            except TimeoutError:
                pass
            except Exception as e:
                self._failed(e)

    def fresh(self) -> None:
        """Reopen the engine when the index folder was rebuilt since it was opened (on the worker)."""
        if not self.rebuilt():
            return
        log.warning("%s was rebuilt: opening it again", self.index.name)
        engine = self._reopen()
        self._drop()
        self._open(engine)
        self.failure = None  # the failure was the old engine's

    def public(self, message: str) -> str:
        """``message`` without the index folder's local path: its name stands for it (a client of the
        API learns no path of this machine)."""
        if self.index is not None:
            for path in {str(self.index.resolve()), str(self.index)} - {""}:
                message = message.replace(path, self.index.name)
        return message

    def _failed(self, e: Exception) -> str:
        """Log ``e`` with its stack and hold it as the failure health reports; its public line."""
        message = self.public(_line(e))
        log.error("engine error: %s", message, exc_info=e)
        self.failure = {"error": message, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        return message

    async def run(self, fn: Callable[..., T], *args: Any, request: Request | None = None) -> T:
        """``fn(*args)`` on the worker thread, the index reopened first if it was rebuilt; an engine
        failure becomes a 500 with one line (its stack in the log). With ``request``, ``fn`` takes a
        last argument, a function to call between units of work: it raises :class:`Gone` once the
        client has disconnected, so abandoned work does not hold the worker."""
        gone = threading.Event()

        def check() -> None:
            if gone.is_set() or self.closing.is_set():
                raise Gone

        def work() -> T:
            check()
            self.fresh()
            return fn(*args, check) if request is not None else fn(*args)

        watcher = asyncio.create_task(_watch(request, gone)) if request is not None else None
        try:
            result = await asyncio.wrap_future(self._worker.submit(work))
        except (ApiError, Gone):
            raise
        except Exception as e:
            raise ApiError(500, self._failed(e)) from None
        finally:
            if watcher is not None:
                watcher.cancel()
        self.failure = None
        return result

    def search(self, question: str, k: int, context: bool, min_score: float | None = None,
               collapse: bool = True, start: int = 0, path: str | None = None, hybrid: str | None = None,
               hybrid_weight: float | None = None) -> tuple[list[dict[str, Any]], str | None]:
        """The hits of one question as ``search --json`` shows them (on the worker thread): those
        scoring under ``min_score`` (default: the service's) dropped, the sentences of one paragraph
        one hit unless not ``collapse``, only documents at or under ``path`` (a file or folder of the
        corpus), ``k`` of them from rank ``start + 1``; with ``context``, each hit's passage and its
        marks. Also the CLI's notice when no word of the question is in the index (else None).
        ``path`` filters the engine's first hits (a deeper search, not an index filter).
        ``hybrid`` ("sum" or "none") and ``hybrid_weight`` (BM25's share) are this request's, on
        the Lucene engine."""
        from contextlib import nullcontext

        from sparc_es.answers.show import answer

        options = nullcontext()
        if hybrid is not None or hybrid_weight is not None:
            options = self._asked(hybrid, hybrid_weight)

        keep = None
        if path:
            folder = path.rstrip("/") + "/"

            def keep(h) -> bool:
                return h.doc is not None and (h.doc == path or h.doc.startswith(folder))
        with options:
            match, shown = answer(self.engine, self.presenter(), question, k, collapse,
                                  self.min_score if min_score is None else min_score, start, keep)
        notice = match.notice()
        if path and not shown and self.store is not None:
            if self._documents is None:
                self._documents = self.store.documents()
            if not any(keep(Hit("", 0.0, doc=d)) for d in self._documents):
                notice = f"no document of the index lies at or under {path!r}"
        return [_hit_json(s, context) for s in shown], notice

    def _asked(self, hybrid: str | None, weight: float | None):
        """The engine with one request's hybrid options (422 where they cannot apply)."""
        from sparc_es.engines.hybrid import BM25_WEIGHT, HybridChoice

        if not isinstance(self.engine, Reweighable):
            raise ApiError(422, "hybrid and hybrid_weight per request apply to the Lucene engine's sum or SPARC "
                                f"alone; this server runs {self.kind} {self.engine_info['hybrid'] or ''}".rstrip())
        try:
            choice = HybridChoice.of(self.kind, hybrid or "sum", weight)
            if choice.method is None:
                return self.engine.asked(None)
            share = choice.weight if choice.weighed else self.engine_info["hybrid_weight"] or BM25_WEIGHT
            return self.engine.asked(share)
        except SparcError as e:
            why = _line(e).replace("--hybrid-weight", "hybrid_weight").replace("--hybrid ", "hybrid=")
            raise ApiError(422, why) from None

    def presenter(self):
        """The CLI's :class:`~sparc_es.answers.show.Presenter` over this engine (made on the worker thread)."""
        if self._presenter is None:
            from sparc_es.answers.show import Presenter

            self._presenter = Presenter(self.engine, self.index if self.kind != "es" else None, self.tokenizer)
        return self._presenter

    def sentence(self, sentence_id: str) -> dict[str, Any]:
        """A stored sentence with its passage; 404 when the index has no such id."""
        if self.store is None:
            raise ApiError(404, "this server has no sentence store (serve it with --index INDEX, or on "
                                "Elasticsearch with --tokenizer ENCODED)")
        found = self.store.get([sentence_id], context=True).get(sentence_id)
        if found is None:
            shown = sentence_id if len(sentence_id) <= 200 else sentence_id[:200] + "..."
            raise ApiError(404, f"no sentence with id {shown!r} in the index")
        from sparc_es.answers.show import Shown

        place = self.presenter().places.of(found)
        shown = Shown(Hit(found.id, 0.0, text=found.text, doc=found.doc, start=found.start, end=found.end), 0,
                      place=place)
        return {**found.to_json(), "context": found.context, "where": shown.where(), "line": place.line,
                "headings": list(place.headings) if place.headings is not None else None}

    def explain(self, question: str, ids: list[str]) -> dict[str, Any]:
        """:meth:`~sparc_es.answers.explain.Explainer.explain` of the hits ``ids`` (sentence ids or ranks),
        without local paths; 422 for an id or rank that names no hit, 500 when the model is not the
        index's."""
        if self.index is None or self.kind != "lucene":
            raise ApiError(404, "explain reads a Lucene impact index: serve one with --index INDEX (--engine lucene)")
        explainer = self.explainer()
        explainer.inputs()  # the model and its corpus statistics: a failure here is the server's
        try:
            found = explainer.explain(question, ids)
        except SparcError as e:
            raise ApiError(422, _line(e)) from None
        found["index"] = self.index.name
        for hit in found["hits"]:
            hit.pop("path", None)
        return found

    def document(self, doc: str) -> tuple[str, str]:
        """(name, text) of the document ``doc`` of the index: 404 unless the index holds sentences of
        ``doc`` and it is a file under the corpus folders the index records (an index is a shared
        artefact: its sentence store must not open other files, and a corpus folder may hold files
        encode left out, hidden ones or ones added since), 413 past ``MAX_DOCUMENT`` bytes."""
        if self._documents is None and self.store is not None:
            self._documents = self.store.documents()
        recorded = sparc_side(self.engine)
        if self.store is None and isinstance(recorded, Recorded):  # Elasticsearch without --tokenizer
            held = recorded.holds(doc)
        else:
            held = bool(self._documents) and doc in self._documents
        path = self.presenter().places.file(doc) if held else None
        if path is None or not path.is_file():
            shown = doc if len(doc) <= 200 else doc[:200] + "..."
            raise ApiError(404, f"this index holds no document {shown!r} under its corpus folders")
        if path.stat().st_size > MAX_DOCUMENT:
            raise ApiError(413, f"{doc}: over {MAX_DOCUMENT >> 20} MiB, not shown")
        return doc, path.read_bytes().decode("utf-8", errors="replace")

    def health(self) -> dict[str, Any]:
        """What the server answers from, and the engine's last failure (``status`` "failing" until a
        call succeeds again); read off the worker, from what :meth:`_open` noted."""
        m = self.manifest
        model = {"fingerprint": m.model.fingerprint, "base": m.model.base_model.get("name")} if m else None
        described = {"sentences": self.sentences, "model": model,
                     "factor": m.factor if m else None, "generation": _generation(m)}
        recorded = sparc_side(self.engine)
        if isinstance(recorded, Recorded):  # what the Elasticsearch index holds, not --tokenizer's folder
            r = recorded.record()
            model = described["model"] if m and m.model.fingerprint == r["fingerprint"] else None
            described = {"sentences": r["sentences"], "factor": r["factor"], "generation": r["generation"],
                         "model": model or ({"fingerprint": r["fingerprint"], "base": None} if r["fingerprint"]
                                            else None)}
        failure = self.failure
        if failure is None and self.index is not None and not (self.index / META).is_file() and not self.rebuilt():
            # deleted under the server (not a rebuild renaming it in: that has a new stamp)
            failure = {"error": f"{self.index.name}: the index folder is gone: searches answer from the files "
                                "opened before it went, until the server stops", "at": None}
        return {"status": "failing" if failure else "ok", "version": __version__, "index": self.name,
                **described, "engine": self.engine_info, "min_score": self.min_score, "failure": failure}

    def close(self) -> None:
        """Stop: abandon queued and running work at its next check, then close the engine."""
        self.closing.set()
        self._worker.submit(self._drop_quietly).result()
        self._worker.shutdown(wait=True, cancel_futures=True)

    def _drop_quietly(self) -> None:
        try:
            self._drop()
        except Exception as e:  # stopping anyway: say what failed
            log.error("closing the engine: %s", _line(e))


def _generation(manifest: Manifest | None) -> str | None:
    """Which build of the index answers: the encode it was built from and when it was built (a
    rebuild, or an update and a rebuild, gives a new one)."""
    if manifest is None or manifest.index is None:
        return None
    return f"{manifest.generation or '-'}@{manifest.index.built_at or '-'}"


def _stamp(index: Path | None) -> tuple[int, int] | None:
    """What changes when ``index`` is rebuilt: the folder's inode (a rebuild renames a new folder
    into place) and its manifest's time; None when it is not there."""
    if index is None:
        return None
    try:
        return os.stat(index).st_ino, os.stat(index / META).st_mtime_ns
    except OSError:
        return None


async def _watch(request: Request, gone: threading.Event) -> None:
    """Set ``gone`` once ``request``'s client has disconnected."""
    while not gone.is_set():
        if await request.is_disconnected():
            gone.set()
            return
        await asyncio.sleep(0.1)


def _known_params(request: Request, *names: str) -> None:
    """422 for a query parameter the endpoint does not take: never silently ignored (``hybrid=none``
    is not a per-request option)."""
    unknown = sorted(set(request.query_params) - set(names))
    if unknown:
        shown = ", ".join(u.encode("ascii", "backslashreplace").decode()[:40] for u in unknown[:3])
        raise ApiError(422, f"unknown parameter{'s' if len(unknown) > 1 else ''} {shown}: this endpoint takes "
                            f"{', '.join(names)}")


def _validation_message(e: RequestValidationError) -> tuple[int, str]:
    """(status, one line) for a request FastAPI could not read: 400 for a body that is not JSON."""
    errors = e.errors()
    first = errors[0] if errors else {}
    if first.get("type") == "json_invalid":
        return 400, f"invalid JSON body: {first.get('ctx', {}).get('error', first.get('msg', ''))}"
    loc = ".".join(str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")) \
        or ("request body" if tuple(first.get("loc", ())) == ("body",) else "")
    msg = str(first.get("msg", "invalid request")).removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return 422, " ".join(f"{loc + ': ' if loc else ''}{msg[:1].lower() + msg[1:]}{more}".split())


def document_page(name: str, text: str, line: int | None, to: int | None = None) -> str:
    """A document as text (an HTML source too: shown, never rendered) with numbered lines, ``line``
    scrolled to and marked, through ``to`` (a sentence's lines) where given (package data
    ``web/document.html``)."""
    from html import escape
    from string import Template

    last = max(line, to or line) if line is not None else None
    rows = "".join(f'<tr id="L{n}"{_row_class(n, line, last)}><td>{n}</td><td>{escape(t) or " "}</td></tr>'
                   for n, t in enumerate(text.split("\n"), start=1))
    template = (resources.files("sparc_es.answers") / "web" / "document.html").read_text(encoding="utf-8")
    return Template(template).substitute(name=escape(name), rows=rows, root="../" * (name.count("/") + 1))


def _row_class(n: int, line: int | None, last: int | None) -> str:
    """The marked rows: ``at`` for the one scrolled to, ``also`` for the sentence's other lines."""
    if line is None or not line <= n <= last:
        return ""
    return ' class="at"' if n == line else ' class="also"'


def page() -> str:
    """The search page, shipped as package data."""
    return (resources.files("sparc_es.answers") / "web" / "index.html").read_text(encoding="utf-8")


LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


def host_of(header: str) -> str:
    """The host name of a ``Host`` header, without its port (``[::1]:8000`` -> ``::1``), lower-cased."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def create_app(service: Service, allowed_hosts: Iterable[str] | None = None, max_body: int = MAX_BODY) -> FastAPI:
    """The FastAPI application over ``service``; the caller closes the service. ``allowed_hosts``:
    the only ``Host`` headers answered (None: any), so that a web page the user visits cannot rebind
    its own name to this server's address and read the index (DNS rebinding). ``max_body``: the
    largest request body read, in bytes."""
    # no /docs or /redoc: FastAPI's pages load their scripts from a CDN; /openapi.json describes the API
    app = FastAPI(title="sparc-es", version=__version__, description="SPARC sentence retrieval over one index",
                  docs_url=None, redoc_url=None)
    app.add_middleware(Guard, allowed_hosts=allowed_hosts, max_body=max_body)

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, e: ApiError) -> JSONResponse:
        return JSONResponse({"error": e.message}, status_code=e.status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, e: RequestValidationError) -> JSONResponse:
        status, message = _validation_message(e)
        kind = request.headers.get("content-type", "")
        if request.method == "POST" and message.startswith("request body:") and "json" not in kind.lower():
            # curl -d sends a form (application/x-www-form-urlencoded), which FastAPI reads as a string
            message += f" (the body was sent as {kind or 'no content type'}: send JSON, Content-Type: application/json)"
        return JSONResponse({"error": message}, status_code=status)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, e: HTTPException) -> JSONResponse:
        if isinstance(e.__cause__, TooLarge):  # FastAPI reads the body, and calls its failure a 400
            return JSONResponse({"error": str(e.__cause__)}, status_code=413)
        message = {404: f"no such endpoint: {request.url.path}",
                   405: f"{request.method} is not allowed on {request.url.path}"}.get(e.status_code, str(e.detail))
        return JSONResponse({"error": message}, status_code=e.status_code, headers=e.headers)

    @app.exception_handler(Gone)
    async def _gone(request: Request, e: Gone) -> JSONResponse:  # nobody reads it; uvicorn logs the status
        return JSONResponse({"error": "the client went away or the server is stopping"}, status_code=503)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, e: Exception) -> JSONResponse:
        log.error("internal error on %s: %s", request.url.path, _line(e), exc_info=e)
        return JSONResponse({"error": service.public(_line(e))}, status_code=500)

    @app.get("/health")
    async def health() -> JSONResponse:
        """Index name, sentence count, model fingerprint, engine, and the engine's last failure
        (``status``: "ok", or "failing", with HTTP status 503 for a load balancer's probe, until an
        engine call succeeds again); an index rebuilt since the last request is opened first, so a
        monitor sees the new one."""
        await service.reopened()
        answer = service.health()
        return JSONResponse(answer, status_code=503 if answer["status"] == "failing" else 200)

    app.add_api_route("/health", health, methods=["HEAD"], include_in_schema=False)  # uptime monitors' HEAD

    @app.get("/search")
    async def search_get(request: Request, q: str = Query(..., description="the question"),
                         k: int = Query(10, ge=1, le=MAX_K), context: bool = False,
                         min_score: float | None = Query(None, ge=0, description=MIN_SCORE_HELP,
                                                         allow_inf_nan=False),
                         collapse: bool = Query(True, description=COLLAPSE_HELP),
                         start: int = Query(0, ge=0, le=MAX_K, alias="from", description=FROM_HELP),
                         path: str | None = Query(None, max_length=1000, description=PATH_HELP),
                         hybrid: Literal["sum", "none"] | None = Query(None, description=HYBRID_HELP),
                         hybrid_weight: float | None = Query(None, ge=0, le=1, allow_inf_nan=False,
                                                             description=WEIGHT_HELP)) -> dict:
        """The top ``k`` sentences for question ``q``."""
        _known_params(request, "q", "k", "context", "min_score", "collapse", "from", "path", "hybrid",
                      "hybrid_weight")
        return await _search(q, k, context, min_score, collapse, start, path, hybrid, hybrid_weight)

    @app.post("/search")
    async def search_post(body: SearchRequest) -> dict:
        """The top ``k`` sentences for ``question``."""
        return await _search(body.question, body.k, body.context, body.min_score, body.collapse, body.start,
                             body.path, body.hybrid, body.hybrid_weight)

    async def _search(question: str, k: int, context: bool, min_score: float | None = None,
                      collapse: bool = True, start: int = 0, path: str | None = None, hybrid: str | None = None,
                      hybrid_weight: float | None = None) -> dict:
        try:
            _question(question)
        except ValueError as e:
            raise ApiError(422, f"q: {e}") from None
        def work() -> dict:
            hits, notice = service.search(question, k, context, min_score, collapse, start, path, hybrid,
                                          hybrid_weight)
            return {"question": question, "k": k, "notice": notice, "hits": hits}

        return await service.run(work)

    @app.post("/batch")
    async def batch(body: BatchRequest, request: Request) -> dict:
        """The top ``k`` sentences for each of ``questions``, in order."""
        def work(check: Callable[[], None]) -> list[dict]:
            results = []
            for q in body.questions:
                check()  # stop when the client is gone
                hits, _ = service.search(q, body.k, body.context, body.min_score, body.collapse)
                results.append({"question": q, "hits": hits})
            return results

        return {"k": body.k, "results": await service.run(work, request=request)}

    @app.get("/explain")
    async def explain(request: Request, q: Annotated[str, Query(description="the question")],
                      ids: Annotated[list[str], Query(description="a hit to explain, once per hit: its sentence "
                                                      "id, or its rank in the answer of /search")]) -> dict:
        """Why each hit scored what it did: for each question token, the impact it stores and how the
        model made it (``sparc-es explain --index INDEX --json``)."""
        _known_params(request, "q", "ids")
        try:
            _question(q)
        except ValueError as e:
            raise ApiError(422, f"q: {e}") from None
        if len(ids) > MAX_EXPLAIN:
            raise ApiError(422, f"ids: at most {MAX_EXPLAIN} hits per request")
        return await service.run(service.explain, q, ids)

    @app.get("/sentences/{sentence_id:path}")
    async def sentence(sentence_id: str) -> dict:
        """A stored sentence (id as in hits, URL-encoded: ``#`` is ``%23``) with its passage."""
        return await service.run(service.sentence, sentence_id)

    @app.get("/documents/{doc:path}", response_class=HTMLResponse)
    async def document(request: Request, doc: str,
                       line: int | None = Query(None, ge=1, description="the line to show"),
                       to: int | None = Query(None, ge=1, description="the last line marked with it (a hit's "
                                                                       "last_line)")) -> HTMLResponse:
        """A document of the index as text with line numbers, scrolled to ``line`` and lines ``line``
        to ``to`` marked (where a hit's link leads: its sentence's lines); only documents the index
        holds, read from the corpus folders it records."""
        _known_params(request, "line", "to")
        name, text = await service.run(service.document, doc)
        return HTMLResponse(document_page(name, text, line, to))

    @app.api_route("/", methods=["GET", "HEAD"], response_class=HTMLResponse, include_in_schema=False)
    async def index_page() -> HTMLResponse:
        return HTMLResponse(page())

    return app


class TooLarge(Exception):
    """A request body over the server's limit."""


def _by_address(host: str) -> bool:
    """Whether ``host`` (a ``Host`` header's host) is an IP address, or empty (an HTTP/1.0 health
    check): no web page can rebind a name to this server under either, since DNS rebinding needs
    the page's own name."""
    import ipaddress

    if not host:
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class Guard:
    """ASGI middleware in front of every request: a ``Host`` that is a name not in ``allowed_hosts``
    (None: any) is refused with 400 (an address is answered: see :func:`_by_address`), and a body
    over ``max_body`` bytes with 413, by its ``Content-Length`` before it is read, or as it arrives
    when it is sent in chunks. (A plain ASGI class, not Starlette's
    ``BaseHTTPMiddleware``, which swallows the disconnect that stops abandoned work.)"""

    def __init__(self, app, allowed_hosts: Iterable[str] | None, max_body: int) -> None:
        self.app, self.max_body = app, max_body
        self.allowed = None if allowed_hosts is None else {host_of(h) for h in allowed_hosts}

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or ())
        host = host_of(headers.get(b"host", b"").decode("latin-1"))
        if self.allowed is not None and host not in self.allowed and not _by_address(host):
            shown = host.encode("ascii", "backslashreplace").decode()[:100]
            return await JSONResponse({"error": f"Host {shown!r} is not served here (serve --allow-host {shown} "
                                                "allows it)"}, status_code=400)(scope, receive, send)
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body):
            return await JSONResponse({"error": self.too_large()}, status_code=413)(scope, receive, send)
        seen = 0

        async def counted():
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_body:
                raise TooLarge(self.too_large())
            return message

        await self.app(scope, counted, send)

    def too_large(self) -> str:
        return f"request body over {self.max_body:,} bytes"


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``, or a one-line error (port taken, unknown host)."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as e:
        raise SparcError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as e:
        sock.close()
        raise SparcError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    return sock


def serve(service: Service, sock: socket.socket, log_level: str = "info",
          allowed_hosts: Iterable[str] | None = None) -> None:
    """Serve ``service`` on a listening socket until interrupted (Ctrl-C, SIGTERM), answering only
    requests whose ``Host`` is one of ``allowed_hosts`` (None: any)."""
    class Server(uvicorn.Server):
        async def shutdown(self, sockets=None) -> None:
            service.closing.set()  # running work stops at its next question rather than delaying the exit
            await super().shutdown(sockets)

    Server(uvicorn.Config(create_app(service, allowed_hosts), log_level=log_level,
                          log_config=log_config(log_level))).run(sockets=[sock])


def log_config(level: str) -> dict:
    """uvicorn's logging, with the time on every line, and this module's messages (a rebuilt index
    reopened, an engine's error with its stack) on uvicorn's handler at ``level``: they went to
    Python's last-resort handler, without level or time, and ``--log-level critical`` kept them."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    for formatter in config["formatters"].values():
        formatter["fmt"] = "%(asctime)s " + formatter["fmt"]
    config["loggers"][log.name] = {"handlers": ["default"], "level": level.upper(), "propagate": False}
    return config
