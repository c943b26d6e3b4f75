"""Real ``sparc-es`` processes for the tests: started, and killed partway through their work."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path


def kill_midway(args: list, progress: Path, at_least: int, timeout: float = 180) -> int:
    """Start ``sparc-es *args``, SIGKILL it once ``progress`` records ``at_least`` sentences; returns them."""
    proc = subprocess.Popen([sys.executable, "-m", "sparc_es", *map(str, args)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        try:
            if json.loads(progress.read_text())["sentences"] >= at_least:
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.02)
    assert proc.poll() is None, f"the encode ended before it could be killed: {proc.stderr.read()}"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return json.loads(progress.read_text())["sentences"]
