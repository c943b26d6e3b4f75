#!/usr/bin/env python
"""The demo on Elasticsearch: load the encoded demo corpus into a loopback ES-API server
(noida-db) and answer the demo questions from it; or into your cluster when SPARC_ES_URL is set.

    .venv/bin/sparc-es demo && .venv/bin/python scripts/es_demo.py
"""

from __future__ import annotations

import os
import sys
from contextlib import nullcontext
from pathlib import Path

from importlib import resources

from sparc_es.cli import main as cli
from sparc_es.trec import read_topics

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from loopback import noida_server  # noqa: E402  (a test fixture, not part of the library)


def main() -> int:
    encoded = Path(".sparc-demo/encoded")
    if not (encoded / "meta.json").is_file():
        print("run `sparc-es demo` first (it writes .sparc-demo/encoded)", file=sys.stderr)
        return 1
    given = os.environ.get("SPARC_ES_URL")
    with nullcontext(given) if given else noida_server() as url:
        es = ["--engine", "es", "--es-url", url, "--es-index", "sparc-demo"]
        rc = cli(["index", *es, "--input", str(encoded), "--recreate", "--quiet"])
        questions = [q for _, q in read_topics(resources.files("sparc_es") / "demo" / "questions.tsv")]
        return rc or cli(["search", *es, "--tokenizer", str(encoded), "-k", "2", *questions])


if __name__ == "__main__":
    sys.exit(main())
