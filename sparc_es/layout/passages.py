"""Each passage's f_P kept by the hash of its text (``passages.bin``), so that an update does not
encode an unchanged passage again.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import numpy as np


class PassageCache:
    """Each passage's f_P (:meth:`~sparc_es.model.SparcModel.passage_scores`) by the hash of its text,
    kept in an encoded folder so an update does not encode a passage again when a sentence of it
    changes but the passage does not (a passage's transformer and vocabulary-wide product cost more
    than its sentence's).

    A passage's f_P is exactly zero but for a few hundred tokens, so each record stores those (a
    20-byte SHA-1 of the text, a count n, n int32 token ids, n float32 weights: about 1.8 KB for
    the default model) and :meth:`get` gives back the very row that was computed. The file is only
    appended to; a record cut off by a kill is dropped when the file is opened again. ``previous``:
    an older folder's cache to read from; :meth:`get` and :meth:`keep` copy what they use from it
    into this one.
    """

    _HEAD = struct.Struct("<20sI")

    def __init__(self, path: str | Path, previous: PassageCache | None = None, write: bool = True) -> None:
        self.path, self.previous = Path(path), previous
        self.where: dict[bytes, tuple[int, int]] = {}
        self.file = open(self.path, "a+b" if write else "rb") if write or self.path.is_file() else None
        if self.file is None:
            return
        size = self.file.seek(0, 2)
        offset = self.file.seek(0)
        while offset + self._HEAD.size <= size:  # headers only: the weights stay on disk
            digest, n = self._HEAD.unpack(self.file.read(self._HEAD.size))
            if offset + self._HEAD.size + 8 * n > size:
                break
            self.where[digest] = (offset + self._HEAD.size, n)
            offset = self.file.seek(8 * n, 1)
        if write and offset < size:
            self.file.truncate(offset)

    @staticmethod
    def key(text: str) -> bytes:
        return hashlib.sha1(text.encode("utf-8")).digest()

    def __len__(self) -> int:
        return len(self.where)

    def get(self, text: str, size: int) -> np.ndarray | None:
        """The passage's f_P as a dense float32 row of ``size`` tokens, or None if it was never stored."""
        digest = self.key(text)
        self._carry(digest)
        found = self._read(digest)
        if found is None:
            return None
        row = np.zeros(size, dtype=np.float32)
        row[found[0]] = found[1]
        return row

    def put(self, text: str, row: np.ndarray) -> None:
        """Store a passage's dense f_P row (its non-zeros)."""
        digest = self.key(text)
        if digest not in self.where:
            ids = np.flatnonzero(row).astype("<i4")
            self._append(digest, ids, row[ids].astype("<f4"))

    def keep(self, text: str) -> None:
        """Copy a passage's record from ``previous`` (a kept sentence's passage, for the next update)."""
        self._carry(self.key(text))

    def _carry(self, digest: bytes) -> None:
        if digest not in self.where and self.previous is not None:
            found = self.previous._read(digest)
            if found is not None:
                self._append(digest, *found)

    def _read(self, digest: bytes) -> tuple[np.ndarray, np.ndarray] | None:
        if digest not in self.where:
            return None
        offset, n = self.where[digest]
        self.file.seek(offset)
        data = self.file.read(8 * n)
        return np.frombuffer(data, "<i4", n), np.frombuffer(data, "<f4", n, 4 * n)

    def _append(self, digest: bytes, ids: np.ndarray, weights: np.ndarray) -> None:
        self.file.seek(0, 2)
        offset = self.file.tell()
        self.file.write(self._HEAD.pack(digest, len(ids)) + ids.astype("<i4").tobytes()
                        + weights.astype("<f4").tobytes())
        self.where[digest] = (offset + self._HEAD.size, len(ids))

    def flush(self) -> None:
        if self.file is not None:
            self.file.flush()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()

    def __enter__(self) -> PassageCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
