"""A real headless Chromium driven over the DevTools protocol, for tests that click, type and go back.

``--dump-dom`` shows what a page renders from its URL; what happens after a user submits a form or
presses Back needs a browser that is told to. This drives one through the protocol's own websocket
(the ``websockets`` package): no browser download, no driver binary, the Chromium the tests use.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import subprocess
import time
import urllib.request
from pathlib import Path


class Page:
    """One Chromium tab. ``evaluate(js)`` returns the value of a JavaScript expression (a promise
    awaited); ``wait(js)`` polls one until it is truthy."""

    def __init__(self, chromium: str, profile: Path) -> None:
        from websockets.sync.client import connect

        profile.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                                         "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.is_file() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.close()
                raise RuntimeError("Chromium did not open its DevTools port")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as answer:
            page = next(t for t in json.load(answer) if t["type"] == "page")
        self.opened = contextlib.ExitStack()
        self.socket = self.opened.enter_context(connect(page["webSocketDebuggerUrl"], max_size=None))
        self.ids = itertools.count(1)

    def call(self, method: str, **params) -> dict:
        n = next(self.ids)
        self.socket.send(json.dumps({"id": n, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=60))
            if message.get("id") == n:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait(self, expression: str, timeout: float = 60):
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"not true after {timeout} s: {expression}")
            time.sleep(0.1)

    def go(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait("document.readyState === 'complete'")

    def close(self) -> None:
        if getattr(self, "opened", None) is not None:
            self.opened.close()
        self.process.kill()
        self.process.wait(timeout=30)
