"""The README's Python example runs as written: the fenced block under ``<!-- tested: tests/test_readme.py -->``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
MARK = "<!-- tested: tests/test_readme.py -->"


def _readme_blocks() -> list[str]:
    """The code of every fenced block right under the marker (blank lines between them allowed)."""
    text = README.read_text(encoding="utf-8")
    return re.findall(re.escape(MARK) + r"\s*\n```[a-z]*\n(.*?)\n```", text, flags=re.S)


def test_the_readme_marks_its_python_example():
    blocks = _readme_blocks()
    assert len(blocks) == README.read_text(encoding="utf-8").count(MARK) == 1
    assert "open_engine(" in blocks[0] and "encode_corpus(" in blocks[0]


@pytest.mark.jvm
def test_the_readme_python_example_prints_hits(tmp_path):
    """Run in an empty folder, as a user would paste it (its own process: its own Java VM)."""
    (tmp_path / "example.py").write_text(_readme_blocks()[0])
    done = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"\d+ sentences encoded and indexed", lines[0]), done.stdout
    hits = [line for line in lines[1:] if re.match(r"\s*\d+\.\d\d  ", line)]
    assert len(hits) == 3, done.stdout
    assert "Java 21" in hits[0] and "[setup.md:" in hits[0], done.stdout


def test_the_readme_python_example_type_checks(tmp_path):
    """The package ships py.typed, so a user's type checker reads its hints: the README's example,
    and the ``with open_engine(...) as engine:`` it names, check with mypy ("Engine" had no
    ``__enter__``)."""
    example = _readme_blocks()[0] + (
        '\nwith open_engine("lucene", "work/index") as same:\n'
        '    print(same.search("Which Java version?", k=1)[0].text)\n')
    (tmp_path / "example.py").write_text(example)
    import os

    # MYPYPATH: mypy does not see an editable install's import hook; the package is read from source
    done = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--cache-dir",
                           str(tmp_path / "cache"), "example.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "MYPYPATH": str(README.parent)})
    assert done.returncode == 0 and "Success" in done.stdout, done.stdout[-3000:] + done.stderr[-1000:]
