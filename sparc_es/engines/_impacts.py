"""Write a Lucene impact index with each impact as one posting's term frequency.

Anserini's ``JsonVectorCollection -impact`` turns a weight of 7 into seven occurrences of the token,
which Lucene then counts back into a term frequency: about 2,000 token occurrences per sentence at
factor 3, four times the postings they become. Here each sentence's vector is one string
``token<D>7 token<D>3 ...`` that Lucene's own ``DelimitedTermFrequencyTokenFilter`` reads as
(term, frequency) pairs, so Lucene inverts 500 tokens, not 2,000. The index is the one Anserini
builds (same fields: stored ``id`` with its binary doc values, ``contents`` with documents and
frequencies; the impact similarity; ``LuceneImpactSearcher`` reads it unchanged), and docids follow
input order (one writer, a merge policy that merges adjacent segments only).

Reading a record is cheap: encode writes compact ASCII JSON, so the ``token<D>impact`` string is
cut straight from the record's bytes (formatting each of its 500 pairs in Python cost 3x more;
anything unusual takes that slower path). Lucene's inversion is the rest, and it runs in every
indexing process at once: from ``PARALLEL_FROM`` sentences on, the file is split into contiguous
parts, one per core; this process indexes the first part while workers (``python -m
sparc_es.engines._impacts``, each with its own JVM: pyjnius holds the GIL during Java calls, so
threads would not overlap) index the others into their own folders, which ``addIndexes`` then
appends in order. Below that, one child process reads while this one inverts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

from ..errors import EngineError

# A private-use character: never part of a WordPiece token, so it cannot clash with one.
DELIMITER = "\ue000"
_DELIMITER = DELIMITER.encode()
_DIGITS = frozenset(b"0123456789")
_RAM_BUFFER_MB = 256.0
# Below this many sentences a second indexing process saves less than its JVM takes to start.
PARALLEL_FROM = 50_000


class BadRecord(ValueError):
    """A vectors line that is not an impact record."""


def delimited(vector: dict[str, int]) -> str:
    """``token<D>impact`` pairs separated by spaces (non-positive impacts dropped, as Anserini does)."""
    return " ".join([f"{token}{DELIMITER}{impact}" for token, impact in vector.items() if impact > 0])


def record_text(line: bytes) -> tuple[str, str]:
    """(id, delimited impacts) of one JsonVectorCollection line; raises :class:`BadRecord`."""
    try:
        record = orjson.loads(line)
        sentence_id, vector = record["id"], record["vector"]
        text = _cut(line, vector)
        if text is None:
            text = delimited(vector)
            # A token with whitespace or the delimiter in it would be split silently.
            if text and (len(text.split()) != text.count(DELIMITER) or any(
                    not isinstance(impact, int) for impact in vector.values())):
                raise ValueError("a token holds whitespace or U+E000, or an impact is not an integer")
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError) as e:
        raise BadRecord(f"not an impact record ({e})") from None
    if not isinstance(sentence_id, str):
        raise BadRecord("not an impact record (its id is not a string)")
    return sentence_id, text


def _cut(line: bytes, vector: dict) -> str | None:
    """:func:`delimited` cut from the record's bytes: ``{"tok":7,"b":3}`` -> ``tok<D>7 b<D>3``, or None
    where that is not certain to be the same (spaced or escaped JSON, non-ASCII or ``:`` tokens,
    impacts that are not positive integers)."""
    if not isinstance(vector, dict) or not vector:
        return None
    start = line.find(b',"vector":{"')
    if start < 0:
        return None
    start += 11
    end = line.find(b"}", start)
    while end > 0 and line[end - 1] not in _DIGITS:  # a "}" token
        end = line.find(b"}", end + 1)
    part = line[start:end]
    if end < 0 or not part.isascii() or b"\\" in part or b'":":' in part:
        return None
    values = vector.values()
    if type(sum(values)) is not int or min(values) <= 0:
        return None
    text = part.replace(b'":', _DELIMITER).replace(b',"', b" ")[1:]
    if text.count(_DELIMITER) != len(vector) or text.count(b" ") != len(vector) - 1:
        return None
    return text.decode("utf-8")


def _stream(path: str) -> int:
    """Child process: one ``[id, delimited]`` JSON line per record with a non-empty vector."""
    out = sys.stdout.buffer
    with open(path, "rb") as f:
        for number, line in enumerate(f, 1):
            try:
                sentence_id, text = record_text(line)
            except BadRecord as e:
                print(f"{path} line {number}: {e}", file=sys.stderr)
                return 1
            if text:  # Lucene keeps no document without terms (encode counted those as empty)
                out.write(orjson.dumps([sentence_id, text]))
                out.write(b"\n")
    return 0


def _parts(path: Path, parts: int) -> list[tuple[int, int]]:
    """Byte ranges of ``path`` that start and end at line boundaries, about equal in size."""
    size = path.stat().st_size
    cuts = [0]
    with open(path, "rb") as f:
        for i in range(1, parts):
            f.seek(max(cuts[-1], size * i // parts))
            f.readline()
            cuts.append(min(f.tell(), size))
    cuts.append(size)
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a] or [(0, 0)]


def _line_number(path: Path, offset: int) -> int:
    with open(path, "rb") as f:
        return f.read(offset).count(b"\n") + 1


class _Writer:
    """A Lucene IndexWriter set up as Anserini's impact indexes are, and the one reused document."""

    def __init__(self, index_dir: Path) -> None:
        from ._java import start_jvm

        start_jvm()
        from jnius import autoclass

        HashMap = autoclass("java.util.HashMap")
        delimiter = HashMap()
        delimiter.put("delimiter", DELIMITER)
        analyzer = (autoclass("org.apache.lucene.analysis.custom.CustomAnalyzer").builder()
                    .withTokenizer("whitespace", HashMap())
                    .addTokenFilter("delimitedTermFrequency", delimiter).build())
        config = autoclass("org.apache.lucene.index.IndexWriterConfig")(analyzer)
        config.setSimilarity(autoclass("io.anserini.search.similarity.ImpactSimilarity")())
        config.setRAMBufferSizeMB(_RAM_BUFFER_MB)
        config.setUseCompoundFile(False)
        # merges of adjacent segments only, so docids (which break ties) stay in input order
        config.setMergePolicy(autoclass("org.apache.lucene.index.LogByteSizeMergePolicy")())

        field_type = autoclass("org.apache.lucene.document.FieldType")()
        field_type.setIndexOptions(autoclass("org.apache.lucene.index.IndexOptions").DOCS_AND_FREQS)
        field_type.setTokenized(True)
        field_type.freeze()
        self._bytes = autoclass("org.apache.lucene.util.BytesRef")
        stored = autoclass("org.apache.lucene.document.Field$Store").YES
        self._id = autoclass("org.apache.lucene.document.StringField")("id", "", stored)
        self._order = autoclass("org.apache.lucene.document.BinaryDocValuesField")("id", self._bytes(b""))  # as Anserini 1.x
        self._contents = autoclass("org.apache.lucene.document.Field")(
            "contents", "", field_type,
            signature="(Ljava/lang/String;Ljava/lang/CharSequence;Lorg/apache/lucene/index/IndexableFieldType;)V")
        self._document = autoclass("org.apache.lucene.document.Document")()
        for field in (self._id, self._order, self._contents):
            self._document.add(field)
        self._fs = autoclass("org.apache.lucene.store.FSDirectory")
        self._paths = autoclass("java.nio.file.Paths")
        self.writer = autoclass("org.apache.lucene.index.IndexWriter")(self.directory(index_dir), config)

    def directory(self, path: Path):
        return self._fs.open(self._paths.get(str(path)))

    def append(self, folders: list[Path]) -> None:
        """Append the indexes in ``folders``, in that order, after the documents added so far."""
        self.writer.addIndexes(*[self.directory(f) for f in folders])

    def add(self, sentence_id: str, text: str) -> None:
        # Fields are reused: Lucene copies what it needs in addDocument.
        self._id.setStringValue(sentence_id)
        self._order.setBytesValue(self._bytes(sentence_id.encode("utf-8")))
        self._contents.setStringValue(text)
        self.writer.addDocument(self._document)

    def add_range(self, path: Path, start: int, end: int, on_thousand=None) -> int:
        """Index the records in bytes [start, end) of ``path``; raises :class:`BadRecord` naming
        the offending line's byte offset as ``OFFSET<TAB>message``."""
        documents = 0
        with open(path, "rb") as f:
            f.seek(start)
            offset = start
            while offset < end:
                line = f.readline()
                if not line:
                    break
                try:
                    sentence_id, text = record_text(line)
                except BadRecord as e:
                    raise BadRecord(f"{offset}\t{e}") from None
                offset += len(line)
                if text:  # Lucene keeps no document without terms (encode counted those as empty)
                    self.add(sentence_id, text)
                    documents += 1
                    if on_thousand is not None and documents % 1000 == 0:
                        on_thousand()
        return documents

    def close(self, merge: bool = True) -> None:
        if merge:
            self.writer.forceMerge(1)
        self.writer.close()

    def rollback(self) -> None:
        if self.writer.isOpen():
            self.writer.rollback()


def write_impact_index(vectors_file: Path, index_dir: Path, total: int | None = None, progress: bool = False,
                       parts: int | None = None) -> int:
    """Index ``vectors_file`` (JsonVectorCollection records) into a new Lucene index at ``index_dir``.

    Returns the number of documents written. Raises :class:`EngineError` on a bad record (naming
    its line) or a Lucene failure. ``progress`` shows a bar on stderr (``total`` documents expected).
    ``parts``: indexing processes (default: one per core from ``PARALLEL_FROM`` sentences on).
    """
    from tqdm import tqdm

    from ._java import start_jvm

    start_jvm()
    from jnius import JavaException

    vectors_file, index_dir = Path(vectors_file), Path(index_dir)
    if parts is None:
        parts = min(len(os.sched_getaffinity(0)), 8) if (total or 0) >= PARALLEL_FROM else 1
    bar = tqdm(total=total, unit="sent", desc="index", disable=not progress, file=sys.stderr, dynamic_ncols=True,
               mininterval=0.5)
    writer = None
    try:
        writer = _Writer(index_dir)
        if parts > 1:
            documents = _index_in_parts(writer, vectors_file, index_dir, parts, bar)
        else:
            documents = _index_with_reader(writer, vectors_file, bar)
        writer.close()
    except BadRecord as e:
        offset, message = str(e).split("\t", 1)
        raise EngineError(f"{vectors_file} line {_line_number(vectors_file, int(offset))}: {message}") from None
    except JavaException as e:
        raise EngineError(f"Lucene indexing of {vectors_file} failed: {e}") from None
    finally:
        bar.close()
        if writer is not None:
            writer.rollback()
    return documents


def _index_with_reader(writer: _Writer, vectors_file: Path, bar) -> int:
    """One Lucene writer here, the records read and cut in a child process (the two overlap)."""
    # The child imports this package from where this process found it, installed or not.
    child = subprocess.Popen([sys.executable, "-m", __name__, str(vectors_file)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=_child_env())
    documents = 0
    try:
        for line in child.stdout:
            writer.add(*orjson.loads(line))
            documents += 1
            if documents % 1000 == 0:
                bar.update(1000)
        bar.update(documents % 1000)
        if child.wait() != 0:
            message = child.stderr.read().decode("utf-8", "replace").strip().splitlines()
            raise EngineError(message[-1] if message else f"reading {vectors_file} failed")
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
    return documents


def _index_in_parts(writer: _Writer, vectors_file: Path, index_dir: Path, parts: int, bar) -> int:
    """The first part indexed here, the others by worker processes into ``index_dir.part<N>``
    folders, appended in order (``addIndexes``) and merged."""
    import shutil
    import tempfile
    import threading

    ranges = _parts(vectors_file, parts)
    folders = [index_dir.parent / f"{index_dir.name}.part{i}" for i in range(1, len(ranges))]
    workers, counts, errors = [], [0] * len(folders), []
    lock = threading.Lock()

    def tick(n: int = 1000) -> None:
        with lock:
            bar.update(n)

    def follow(i: int, worker) -> None:  # "." per thousand documents, then the count
        for line in worker.stdout:
            if line.strip() == b".":
                tick()
            elif line.strip().isdigit():
                counts[i] = int(line)
                tick(counts[i] % 1000)

    try:
        for i, ((start, end), folder) in enumerate(zip(ranges[1:], folders)):
            shutil.rmtree(folder, ignore_errors=True)
            errors.append(tempfile.TemporaryFile())
            worker = subprocess.Popen([sys.executable, "-m", __name__, str(vectors_file), str(start), str(end),
                                       str(folder)], stdout=subprocess.PIPE, stderr=errors[-1], env=_child_env())
            worker.follower = threading.Thread(target=follow, args=(i, worker), daemon=True)
            worker.follower.start()
            workers.append(worker)
        documents = writer.add_range(vectors_file, *ranges[0], on_thousand=tick)
        tick(documents % 1000)
        for worker, error in zip(workers, errors):
            worker.follower.join()
            if worker.wait() != 0:
                error.seek(0)
                message = error.read().decode("utf-8", "replace").strip().splitlines()
                last = message[-1] if message else ""
                if "\t" in last and last.split("\t", 1)[0].isdigit():
                    raise BadRecord(last)
                raise EngineError(last or f"indexing part of {vectors_file} failed")
        writer.append(folders)
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
            worker.wait()
        for error in errors:
            error.close()
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
    return documents + sum(counts)


def _child_env() -> dict[str, str]:
    package_root = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}


def _worker(path: str, start: int, end: int, folder: str) -> int:
    """Worker process: index bytes [start, end) of ``path`` into ``folder``; on stdout a "." per
    thousand documents, then their count; a bad record: ``OFFSET<TAB>message`` on stderr."""
    writer = _Writer(Path(folder))
    try:
        documents = writer.add_range(Path(path), start, end, on_thousand=lambda: print(".", flush=True))
        writer.close(merge=False)
    except BadRecord as e:
        print(e, file=sys.stderr)
        return 1
    finally:
        writer.rollback()
    print(documents, flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5:
        sys.exit(_worker(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]))
    sys.exit(_stream(sys.argv[1]))
