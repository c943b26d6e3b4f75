"""Talking to a cluster: where it is, how every request is retried, and its errors as one line.

* :class:`Connection` holds the URL and credentials (from flags or ``SPARC_ES_*`` variables) and
  checks the URL before the client sees it; :meth:`Connection.client` makes the client.
* Every request of that client is retried with backoff on connection errors, timeouts and
  429/502/503/504 (:func:`retry_delays`, in the transport of :func:`_transport_class`).
* No message shows the password of a URL: :func:`redact_url` for one URL, :func:`_redacted` for
  the messages of the client, :meth:`Connection._scrub` for this connection's own secrets.
* :func:`_cluster_errors` turns the client's connection faults, timeouts and refusals into
  one-line :class:`~sparc_es.errors.EngineError`; :func:`check_server` refuses servers other than
  8.x and 9.x; :func:`check_index_name` refuses names Elasticsearch would.
* :func:`scan` pages every hit of a query in a point in time (:func:`_point_in_time`): the loader
  and :class:`~sparc_es.engines.elastic.source.ElasticSource` both read an index with it.
"""

from __future__ import annotations

import functools
import os
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

from sparc_es.errors import EngineError, SparcError, option


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


_COMPATIBLE = re.compile(r"compatible-with=\d+")


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
        compat: str | None = None  # the REST API version asked for, where not the client's own (check_server)

        def perform_request(self, method: str, target: str, **kwargs):
            def given(name, default):
                value = kwargs.pop(name, DEFAULT)
                return default if value is DEFAULT else value

            if self.compat is not None and kwargs.get("headers"):
                headers = kwargs["headers"].copy()
                for name in ("accept", "content-type"):
                    if name in headers:
                        headers[name] = _COMPATIBLE.sub(f"compatible-with={self.compat}", headers[name])
                kwargs["headers"] = headers

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


def credentials(api_key: str | None, username: str | None, password: str | None,
                env: Mapping[str, str]) -> tuple[str | None, str | None, str | None]:
    """(API key, user, password) to authenticate with, from the flags given and the environment ``env``.

    A kind of credentials given as flags wins over the environment, whichever kind the environment
    holds: ``--es-user``/``--es-password`` are used even when ``SPARC_ES_API_KEY`` is set (the user
    or password not given is taken from ``SPARC_ES_USER``/``SPARC_ES_PASSWORD``), ``--es-api-key``
    even when those are. Both kinds as flags are refused: which one was meant cannot be told. With
    no flag, the environment's; an API key there is used before a user there."""
    basic = bool(username or password)
    if api_key and basic:
        raise SparcError("give an API key (--es-api-key) or a user and password (--es-user, --es-password), "
                         "not both")
    if api_key:
        return api_key, None, None
    if basic:
        return None, username or env.get("SPARC_ES_USER"), password or env.get("SPARC_ES_PASSWORD")
    return env.get("SPARC_ES_API_KEY") or None, env.get("SPARC_ES_USER") or None, env.get("SPARC_ES_PASSWORD") or None


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
            _ = parts.port  # raises on a port that is not a number from 0 to 65535
        except ValueError:
            return "its host or port cannot be read (HOST:PORT, the port a number up to 65535)"
        if "@" in self.url[len(f"{parts.scheme}://{parts.netloc}"):]:
            return "a user name or password with / ? # or @ must be percent-encoded"
        if not parts.hostname:
            return "it has no host"
        if any(c.isspace() or not c.isprintable() for c in parts.netloc):
            # said here: whether the client refuses it depends on its urllib3 (one version took it)
            return "its host has a space or a control character"
        if self.ca_certs and parts.scheme != "https":
            return f"a CA bundle ({option('--es-ca-certs', 'ca_certs')}) is for https:// URLs"
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
        """The connection of the flags ``given`` (``api_key``, ``username``, ``password``,
        ``ca_certs``), the ``SPARC_ES_*`` variables filling in what they leave out (:func:`credentials`)."""
        env = os.environ
        url = url or env.get("SPARC_ES_URL")
        if not url:
            raise SparcError(f"no Elasticsearch URL: pass {option('--es-url', 'url=...')} or set SPARC_ES_URL")
        api_key, username, password = credentials(given.get("api_key"), given.get("username"),
                                                  given.get("password"), env)
        return cls(url=url, api_key=api_key, username=username, password=password,
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
def _cluster_errors(doing: str, then: str = "", slow: str = ""):
    """Connection faults, timeouts and server errors of the client as one-line :class:`EngineError`.

    ``then`` is said after a fault that a later run can get past (no answer, a 408, 429 or 5xx
    answer), ``slow`` after a timeout only. A request the server rejects (any other 4xx: a bad request, no
    such index, no permission) is named with the server's own reason instead, and neither is said:
    sent again, it would be rejected again."""
    from elasticsearch import ApiError, ConnectionTimeout, TransportError

    try:
        yield
    except TransportError as e:  # connection refused or lost, timeouts (after the client's retries)
        hint = slow if isinstance(e, ConnectionTimeout) else ""
        errno = re.findall(r"\[Errno -?\d+\] ([^()\]]+)", str(e.message))  # the system's reason, and where
        node = re.search(r"host='([^']+)', port=(\d+)", str(e.message))
        why = (errno[-1].strip().lower() + (f" at {node[1]}:{node[2]}" if node else "") if errno
               else f"{type(e).__name__}: {_redacted(str(e))}")
        raise EngineError(f"Elasticsearch did not answer while {doing} ({why}){hint}{then}") from None
    except ApiError as e:
        status = getattr(e.meta, "status", None)
        missing = _missing_index(e)
        if missing is not None:
            raise EngineError(missing) from None
        if isinstance(status, int) and 400 <= status < 500 and status not in (408, 429):
            raise EngineError(f"Elasticsearch rejected a request while {doing} ({_status(status)}): "
                              f"{_rejection(e)}") from None
        hint = slow if status == 408 else ""  # the server's own request timeout
        raise EngineError(f"Elasticsearch refused {doing}: {_redacted(str(e))}{hint}{then}") from None


def _missing_index(e) -> str | None:
    """``no index 'NAME' at URL`` when the server answered that an index does not exist, else None."""
    error = e.body.get("error") if isinstance(e.body, dict) else None
    if getattr(e.meta, "status", None) != 404 or not isinstance(error, dict) \
            or error.get("type") != "index_not_found_exception":
        return None
    name = error.get("index") or error.get("resource.id")
    try:
        where = f" at {_node_url(e.meta.node)}"
    except Exception:
        where = ""
    return f"no index {name!r}{where}" if name else f"no such index{where}"


def _status(status: int) -> str:
    """``400 Bad Request``: an HTTP status with its name."""
    from http import HTTPStatus

    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


def _rejection(e) -> str:
    """What the server said it rejected, on one line: the type and reason of the error's root cause
    (and its cause, when that says more), else the error's message."""
    error = e.body.get("error") if isinstance(e.body, dict) else None
    if isinstance(error, dict):
        causes = error.get("root_cause")
        cause = causes[0] if isinstance(causes, list) and causes and isinstance(causes[0], dict) else error
        text = f"{cause.get('type') or 'error'}: {cause.get('reason') or error.get('reason') or e.message}"
        deeper = error.get("caused_by")
        deeper = deeper.get("reason") if isinstance(deeper, dict) else None
        if deeper and deeper not in text:
            text += f" ({deeper})"
    elif error or e.body:
        text = str(error or e.body)
    else:  # a HEAD request's answer has no body
        status = getattr(e.meta, "status", None)
        text = ("the credentials lack a privilege this needs (the server gave no reason)" if status == 403
                else "the server gave no reason")
    return " ".join(_redacted(text).split())


SUPPORTED_MAJORS = (8, 9)


def check_server(client) -> str:
    """The server's version, refused unless its major is one sparc-es supports (8.x, 9.x); a server
    that cannot be reached is one line naming its URL (never its credentials) and why."""
    try:
        try:
            version = client.info()["version"]["number"]
        except Exception as e:
            # Client 9.x asks for REST API version 9, which an 8.x server refuses; both 8.x and 9.x
            # servers answer version 8, so it is asked for from then on (client.options() share the transport).
            if not (_refuses_version(e) and hasattr(client.transport, "compat")):
                raise
            client.transport.compat = "8"
            version = client.info()["version"]["number"]
    except Exception as e:  # connection refused, TLS, auth, product check
        if getattr(getattr(e, "meta", None), "status", None) == 401:
            given = option("--es-api-key, or --es-user and --es-password", "Connection's api_key, or username "
                           "and password")
            raise EngineError(f"Elasticsearch at {server_url(client)} refused the credentials (401 Unauthorized): "
                              f"check {given} (SPARC_ES_API_KEY, SPARC_ES_USER, SPARC_ES_PASSWORD)") from None
        status = getattr(getattr(e, "meta", None), "status", None)
        path = urlsplit(server_url(client)).path.strip("/")
        if isinstance(e, KeyError | TypeError) or (path and status == 404):  # not the cluster's root answering
            raise EngineError(f"{server_url(client)} is not the root of an Elasticsearch cluster (it answers without "
                              "the cluster's version): give the cluster's URL without an index name in its path, and "
                              f"the index with {option('--es-index', 'the index name argument')}") from None
        raise EngineError(f"cannot reach Elasticsearch at {server_url(client)}: {_unreachable(e)}") from None
    try:
        major = int(str(version).split(".")[0])
    except ValueError:
        major = None
    if major not in SUPPORTED_MAJORS:
        raise EngineError(f"Elasticsearch {version} at {server_url(client)} is not supported (8.x or 9.x)")
    return version


def _refuses_version(e: Exception) -> bool:
    """Whether ``e`` is a server's refusal of the REST API version the client asked for (an 8.x
    server asked for 9: 400, ``media_type_header_exception``)."""
    from elasticsearch import ApiError

    return isinstance(e, ApiError) and e.meta.status == 400 and "media_type_header_exception" in str(e.body)


def server_url(client) -> str:
    """The URL ``client`` talks to, fit to show: scheme, host and port (the client keeps the
    credentials of a URL apart, in its headers)."""
    try:
        return _node_url(client.transport.node_pool.all()[0].config)
    except Exception:  # a stand-in client in a test, or a transport of another shape
        return "the given URL"


def _node_url(node) -> str:
    """``scheme://host:port`` of an elastic-transport ``NodeConfig``."""
    host = f"[{node.host}]" if ":" in node.host else node.host
    return redact_url(f"{node.scheme}://{host}:{node.port}{node.path_prefix or ''}")


def _unreachable(e: Exception) -> str:
    """Why a server could not be asked anything, in a few words: the operating system's reason for a
    connection that failed (connection refused, a name not resolved), a TLS failure, no answer in
    time, a refusal of the credentials, or a server that is not Elasticsearch."""
    from elastic_transport import ConnectionError as NoConnection, ConnectionTimeout, TlsError
    from elasticsearch import ApiError, UnsupportedProductError

    if isinstance(e, UnsupportedProductError):
        return "it answers, but it is not Elasticsearch (the client's product check failed)"
    if isinstance(e, TlsError):
        return (f"TLS failed ({_redacted(str(e.message))}): an https:// URL for a server that speaks plain http, "
                "or a certificate to trust with --es-ca-certs")
    if isinstance(e, ConnectionTimeout):
        return "no answer in time (raise --es-timeout if the cluster is slow)"
    if isinstance(e, NoConnection):
        errno = re.findall(r"\[Errno -?\d+\] ([^)\]]+)", str(e.message))
        return errno[-1].strip().lower() if errno else _redacted(str(e.message))
    if isinstance(e, ApiError):
        status = getattr(e.meta, "status", None)
        if status == 401:
            return "the credentials were refused (401 Unauthorized)"
        return f"{_status(status) if isinstance(status, int) else status}: {_rejection(e)}"
    return _redacted(str(e)) or type(e).__name__


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
