"""``sparc-es serve``: one engine start, then an HTTP JSON API and a search page until interrupted."""

from __future__ import annotations

import argparse
import sys

from sparc_es.cli.options import engine_args, es_index, open_engine
from sparc_es.cli.output import warn


def _port(value: str) -> int:
    try:
        port = int(value)
    except ValueError:  # argparse would name this function ("invalid _port value")
        raise argparse.ArgumentTypeError(f"{value!r} is not a port number (0 to 65535)") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError("must be between 0 and 65535")
    return port


def _host_name(value: str) -> str:
    """An ``--allow-host`` value: a host name or address as a request's ``Host`` names it, no more."""
    if not value.strip() or any(c in value for c in "/*@ \t"):  # a URL, a wildcard, user info
        raise argparse.ArgumentTypeError(f"{value!r} is not a host name: give the name alone, as in a URL's host "
                                         "(search.example.com, not http://search.example.com/; no wildcards: "
                                         "repeat --allow-host for each name)")
    return value


def add_parser(sub) -> None:
    p = sub.add_parser("serve", help="answer questions over HTTP: a JSON API and a search page",
                       description="Open the index once (the engine `search` opens, with the same defaults) and "
                       "serve it over HTTP until interrupted: GET /health, GET|POST /search, POST /batch, "
                       "GET /sentences/{id}, GET /explain, GET /documents/{doc} (a hit's document, its line "
                       "marked) and a search page at /. Needs the serve extra (pip install 'sparc-es[serve]').")
    p.add_argument("--index", metavar="DIR", help="Lucene index folder (with --engine es, the index or encoded folder "
                   "whose tokenizer and sentence store serve the questions and hits, as --tokenizer)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on; the default is this machine only, "
                   "0.0.0.0 every interface (the API has no authentication) (default: %(default)s)")
    p.add_argument("--port", type=_port, default=8000, help="0 takes a free one (default: %(default)s)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME", type=_host_name,
                   help="answer requests for this host name too (repeatable): a request names the host it asked "
                        "for, and by default only requests by address (http://192.0.2.7:8000/), the --host name "
                        "and localhost are answered, so that a web page cannot rebind its own name to this server "
                        "and read the index (a name behind a proxy or in DNS needs this)")
    p.add_argument("--log-level", choices=["critical", "error", "warning", "info", "debug"], default="info",
                   help="uvicorn's log level; info logs every request (default: %(default)s)")
    p.add_argument("--model", default="default", help="the model GET /explain encodes hits again with: the one "
                   "the index was encoded with (default: %(default)s, the shipped model)")
    engine_args(p, ["lucene", "es", "bm25"])


def command(args: argparse.Namespace) -> int:
    from sparc_es.answers import server

    sock = server.listen(args.host, args.port)  # a taken port says so before the JVM starts
    try:
        engine = open_engine(args)
        name = es_index(args) if args.engine == "es" else None
        try:
            service = server.Service(engine, args.index, args.engine, args.model, args.min_score,
                                     reopen=lambda: open_engine(args), tokenizer=getattr(args, "tokenizer", None),
                                     name=name)
        except BaseException:
            engine.close()
            raise
    except BaseException:
        sock.close()
        raise
    host = f"[{args.host}]" if ":" in args.host else args.host
    port = sock.getsockname()[1]
    if server.host_of(args.host) not in server.LOCAL_HOSTS:
        warn(f"listening on {args.host}: the API has no authentication, so anyone who reaches this address can "
             "search the index and read its sentences; put it behind a proxy that authenticates")
    if args.host in ("0.0.0.0", "::"):  # no one opens http://0.0.0.0/: say what other machines open
        names = ", ".join(args.allow_host) or "none (--allow-host NAME answers a name)"
        print(f"serving {service.name} on port {port} of every interface: http://127.0.0.1:{port}/ here, "
              f"http://ADDRESS:{port}/ from other machines; names answered too: {names} (Ctrl-C stops)",
              file=sys.stderr, flush=True)
    else:
        print(f"serving {service.name} on http://{host}:{port}/ (Ctrl-C stops)", file=sys.stderr, flush=True)
    try:
        server.serve(service, sock, log_level=args.log_level,
                     allowed_hosts=[args.host, *server.LOCAL_HOSTS, *args.allow_host])
    except KeyboardInterrupt:  # uvicorn stops on Ctrl-C, then raises it again: the usual way to stop
        pass
    finally:
        service.close()
        sock.close()
    return 0
