"""A loopback Elasticsearch-API server, for trying the Elasticsearch path on a machine without a
cluster: the tests, ``scripts/es_demo.py`` and ``scripts/bench.py`` all start it from here.

``noida-db`` (PyPI, MIT) serves the ES API on 127.0.0.1; its ``start`` command is a wrapper whose
server child outlives a killed wrapper, so the server runs in its own process group, is stopped
with ``noida-db down`` and the group is killed if anything is left.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sparc_es.errors import EngineError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def noida_binary() -> str | None:
    found = shutil.which("noida-db")
    beside = Path(sys.executable).parent / "noida-db"
    return found or (str(beside) if beside.exists() else None)


@contextmanager
def noida_server(data_dir: str | Path | None = None, timeout: float = 20.0) -> Iterator[str]:
    """Start noida-db's Elasticsearch API on a free loopback port; yield its URL; stop it."""
    binary = noida_binary()
    if binary is None:
        raise EngineError("noida-db is not installed (pip install noida-db)")
    with tempfile.TemporaryDirectory(prefix="sparc-es-noida-") as tmp:
        data = Path(data_dir or tmp)
        port = free_port()
        proc = subprocess.Popen([binary, "start", "--only", "elasticsearch", "--elasticsearch-port", str(port),
                                 "--data-dir", str(data)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                        break
                except OSError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise EngineError(f"noida-db did not start on port {port}") from None
                    time.sleep(0.1)
            yield url
        finally:
            subprocess.run([binary, "down", "--data-dir", str(data)], capture_output=True, timeout=30)
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=10)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
