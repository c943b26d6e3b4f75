"""The sentence store: id -> text, context, document, offsets and heading path, so a hit can be
shown in its document.

A single SQLite file (standard library, bounded memory, random access by id) written while
encoding and copied into every index built from the encoded folder. Contexts are stored once
each (many sentences share a passage) and joined back on request.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from sparc_es.corpus.sources import Sentence
from sparc_es.errors import StoreError, option
from sparc_es.layout.names import SENTENCES
from sparc_es.layout.records import id_digest, iter_vectors


def _key(context: str) -> str | None:
    return hashlib.sha1(context.encode("utf-8")).hexdigest() if context else None


class SentenceStore:
    """Read and write the sentence store of an encoded folder or index."""

    def __init__(self, path: str | Path, create: bool = False) -> None:
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise StoreError(f"{self.path}: sentence store missing")
        # check_same_thread=False: engines look hits up from several threads; one connection is not
        # safe for concurrent use, so every use holds the lock.
        self.db = sqlite3.connect(self.path, check_same_thread=False)
        self._lock = threading.Lock()
        if create:
            self.db.execute("CREATE TABLE IF NOT EXISTS sentences (id TEXT PRIMARY KEY, text TEXT NOT NULL, "
                            "doc TEXT, start INTEGER, end INTEGER, context TEXT, code TEXT, headings TEXT)")
            self.db.execute("CREATE TABLE IF NOT EXISTS contexts (key TEXT PRIMARY KEY, text TEXT NOT NULL)")
        # A store written before sentences kept the code they lead into has no "code" column, and
        # one written before they kept their heading path no "headings" column.
        columns = {row[1] for row in self.db.execute("PRAGMA table_info(sentences)")}
        for column in ("code", "headings"):
            if create and columns and column not in columns:  # an interrupted encode of an older sparc-es, resumed
                self.db.execute(f"ALTER TABLE sentences ADD COLUMN {column} TEXT")
                columns.add(column)
        self._code = "s.code" if "code" in columns else "NULL"
        self._headings = "s.headings" if "headings" in columns else "NULL"

    def add(self, sentences: Iterable[Sentence]) -> None:
        with self._lock:
            self._add(list(sentences))

    def _add(self, sentences: list[Sentence]) -> None:
        # INSERT OR REPLACE / IGNORE make a resumed encode idempotent.
        self.db.executemany("INSERT OR IGNORE INTO contexts VALUES (?, ?)",  # in the corpus's order, not a set's
                            dict.fromkeys((_key(s.context), s.context) for s in sentences if s.context))
        self.db.executemany("INSERT OR REPLACE INTO sentences (id, text, doc, start, end, context, code, headings) "
                            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            ((s.id, s.text, s.doc, s.start, s.end, _key(s.context), s.code, s.headings)
                             for s in sentences))
        self.db.commit()

    def get(self, ids: list[str], context: bool = False) -> dict[str, Sentence]:
        """The stored sentences among ``ids``; with ``context``, their passages too."""
        with self._lock:
            return self._get(ids, context)

    def _get(self, ids: list[str], context: bool) -> dict[str, Sentence]:
        out: dict[str, Sentence] = {}
        join = "LEFT JOIN contexts c ON c.key = s.context" if context else ""
        ctx = "c.text" if context else "NULL"
        for start in range(0, len(ids), 500):  # SQLite caps the number of bound parameters
            chunk = ids[start: start + 500]
            marks = ",".join("?" * len(chunk))
            for sid, text, doc, a, b, passage, code, headings in self.db.execute(
                    f"SELECT s.id, s.text, s.doc, s.start, s.end, {ctx}, {self._code}, {self._headings} "
                    f"FROM sentences s {join} WHERE s.id IN ({marks})", chunk):
                out[sid] = Sentence(id=sid, text=text, context=passage or "", doc=doc, start=a, end=b, code=code,
                                    headings=headings)
        return out

    def ids(self) -> Iterator[str]:
        """Every stored sentence id, in no particular order, streamed (single-threaded use only)."""
        for (sid,) in self.db.cursor().execute("SELECT id FROM sentences"):
            yield sid

    def __len__(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM sentences").fetchone()[0]

    def documents(self) -> frozenset[str]:
        """The names of the documents whose sentences are stored (one scan; a corpus has far fewer
        documents than sentences, so the set is small)."""
        with self._lock:
            rows = self.db.execute("SELECT DISTINCT doc FROM sentences WHERE doc IS NOT NULL")
            return frozenset(doc for (doc,) in rows)

    def missing(self, other: str | Path) -> int:
        """How many ids of the sentence store ``other`` (another folder's file) this one does not hold:
        what an update removed. Counted by SQLite on the two id indexes, nothing loaded into memory."""
        other = Path(other)
        if not other.is_file():  # ATTACH would create it
            raise StoreError(f"{other}: sentence store missing")
        with self._lock:
            self.db.execute("ATTACH DATABASE ? AS other", (str(other),))
            try:
                return self.db.execute("SELECT COUNT(*) FROM other.sentences o WHERE NOT EXISTS "
                                       "(SELECT 1 FROM main.sentences s WHERE s.id = o.id)").fetchone()[0]
            finally:
                self.db.execute("DETACH DATABASE other")

    def close(self) -> None:
        self.db.close()


def check_ids(folder: str | Path) -> None:
    """Check that an encoded folder's vectors and sentence store hold the same ids, each once."""
    folder = Path(folder)
    vectors = id_digest(r["id"] for r in iter_vectors(folder))
    try:
        store = SentenceStore(folder / SENTENCES)
        try:
            stored = id_digest(store.ids())
        finally:
            store.close()
    except sqlite3.DatabaseError as e:  # "database disk image is malformed": which file, and what to do
        raise StoreError(f"{folder / SENTENCES}: {e}: the sentence store is damaged; encode the folder again "
                         "(--overwrite)") from None
    if vectors != stored:
        raise StoreError(f"{folder}: its vectors ({vectors[0]} records) and its sentence store ({stored[0]} ids) "
                         "do not hold the same sentence ids (a record repeated or lost); encode it again "
                         f"with {option('--overwrite', 'overwrite=True')}")
