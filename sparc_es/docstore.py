"""Sentence store: id -> text, document and offsets, so a hit can be shown in its document.

A single SQLite file (standard library, bounded memory, random access by id) written while
encoding and copied into every index built from the encoded folder. Contexts are not stored:
they are inputs to the encoder, not results.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

from .corpus import Sentence

FILENAME = "sentences.sqlite"


class DocStore:
    """Read and write the sentence store of an encoded folder or index."""

    def __init__(self, path: str | Path, create: bool = False) -> None:
        self.path = Path(path)
        if not create and not self.path.is_file():
            from .errors import StoreError

            raise StoreError(f"{self.path}: sentence store missing")
        # check_same_thread=False: the Lucene engine may look hits up from worker threads.
        self.db = sqlite3.connect(self.path, check_same_thread=False)
        if create:
            self.db.execute("CREATE TABLE IF NOT EXISTS sentences (id TEXT PRIMARY KEY, text TEXT NOT NULL, "
                            "doc TEXT, start INTEGER, end INTEGER)")

    def add(self, sentences: Iterable[Sentence]) -> None:
        # INSERT OR REPLACE makes a resumed encode idempotent.
        self.db.executemany("INSERT OR REPLACE INTO sentences VALUES (?, ?, ?, ?, ?)",
                            ((s.id, s.text, s.doc, s.start, s.end) for s in sentences))
        self.db.commit()

    def get(self, ids: list[str]) -> dict[str, Sentence]:
        out: dict[str, Sentence] = {}
        for start in range(0, len(ids), 500):  # SQLite caps the number of bound parameters
            chunk = ids[start: start + 500]
            marks = ",".join("?" * len(chunk))
            for sid, text, doc, a, b in self.db.execute(
                    f"SELECT id, text, doc, start, end FROM sentences WHERE id IN ({marks})", chunk):
                out[sid] = Sentence(id=sid, text=text, doc=doc, start=a, end=b)
        return out

    def __len__(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM sentences").fetchone()[0]

    def close(self) -> None:
        self.db.close()
