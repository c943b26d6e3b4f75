#!/usr/bin/env python
"""The demo on Elasticsearch: load the encoded demo corpus into a cluster and answer the demo questions from it.

The cluster is ``--es-url`` or ``$SPARC_ES_URL``; without one, a loopback ES-API server (noida-db, started
and stopped by ``sparc_es.engines.elastic.loopback``; ``pip install noida-db``, which the test extra has).

    .venv/bin/sparc-es demo && .venv/bin/python scripts/es_demo.py [--es-url URL]
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import AbstractContextManager, nullcontext
from importlib import resources
from pathlib import Path

from sparc_es.cli import main as cli
from sparc_es.evaluation.trec import read_topics


def loopback_cluster() -> AbstractContextManager[str]:
    """noida-db's Elasticsearch API on a free loopback port for the demo's duration (its URL)."""
    from sparc_es.engines.elastic.loopback import noida_binary, noida_server

    if noida_binary() is None:
        raise SystemExit("no cluster: pass --es-url or set SPARC_ES_URL, or pip install noida-db for a loopback one")
    print("no --es-url or SPARC_ES_URL: loading into noida-db on loopback", file=sys.stderr)
    return noida_server()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--es-url", default=os.environ.get("SPARC_ES_URL"),
                        help="the cluster (default $SPARC_ES_URL; without one, noida-db on loopback)")
    parser.add_argument("--es-index", default="sparc-demo", help="the index to (re)create (default sparc-demo)")
    parser.add_argument("--encoded", type=Path, default=Path(".sparc-demo/encoded"),
                        help="the encoded demo corpus (default .sparc-demo/encoded, what `sparc-es demo` writes)")
    args = parser.parse_args(argv)
    if not (args.encoded / "meta.json").is_file():
        print(f"{args.encoded}: no encoded corpus; run `sparc-es demo` first (it writes .sparc-demo/encoded)",
              file=sys.stderr)
        return 1
    with nullcontext(args.es_url) if args.es_url else loopback_cluster() as url:
        es = ["--engine", "es", "--es-url", url, "--es-index", args.es_index]
        rc = cli(["index", *es, "--input", str(args.encoded), "--recreate", "--quiet"])
        questions = [q for _, q in read_topics(resources.files("sparc_es") / "demo" / "questions.tsv")]
        return rc or cli(["search", *es, "--tokenizer", str(args.encoded), "-k", "2", *questions])


if __name__ == "__main__":
    sys.exit(main())
