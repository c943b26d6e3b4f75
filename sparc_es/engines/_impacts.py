"""Write a Lucene impact index with each impact as one posting's term frequency.

Anserini's ``JsonVectorCollection -impact`` turns a weight of 7 into seven occurrences of the token,
which Lucene then counts back into a term frequency: about 2,000 token occurrences per sentence at
factor 3, four times the postings they become. Here each sentence's vector is one string
``token<D>7 token<D>3 ...`` that Lucene's own ``DelimitedTermFrequencyTokenFilter`` reads as
(term, frequency) pairs, so Lucene inverts 500 tokens, not 2,000. The index is the one Anserini
builds (same fields: stored ``id`` with its binary doc values, ``contents`` with documents and
frequencies, no norms; the impact similarity; ``LuceneImpactSearcher`` reads it unchanged), and docids follow
input order (one writer, a merge policy that merges adjacent segments only).

Reading and formatting the JSON records runs in a child process (``python -m
sparc_es.engines._impacts FILE``) that streams ``[id, delimited]`` lines to this one, so on two
cores the parsing overlaps with Lucene's inversion (pyjnius holds the GIL during Java calls, so a
thread would not).
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
_RAM_BUFFER_MB = 256.0


def delimited(vector: dict[str, int]) -> str:
    """``token<D>impact`` pairs separated by spaces (non-positive impacts dropped, as Anserini does)."""
    return " ".join([f"{token}{DELIMITER}{impact}" for token, impact in vector.items() if impact > 0])


def _stream(path: str) -> int:
    """Child process: one ``[id, delimited]`` JSON line per record with a non-empty vector."""
    out = sys.stdout.buffer
    with open(path, "rb") as f:
        for number, line in enumerate(f, 1):
            try:
                record = orjson.loads(line)
                vector = record["vector"]
                text = delimited(vector)
                # A token with whitespace or the delimiter in it would be split silently.
                if text and (len(text.split()) != text.count(DELIMITER) or any(
                        not isinstance(impact, int) for impact in vector.values())):
                    raise ValueError("a token holds whitespace or U+E000, or an impact is not an integer")
            except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError) as e:
                print(f"{path} line {number}: not an impact record ({e})", file=sys.stderr)
                return 1
            if text:  # Lucene keeps no document without terms (encode counted those as empty)
                out.write(orjson.dumps([record["id"], text]))
                out.write(b"\n")
    return 0


def write_impact_index(vectors_file: Path, index_dir: Path, total: int | None = None, progress: bool = False) -> int:
    """Index ``vectors_file`` (JsonVectorCollection records) into a new Lucene index at ``index_dir``.

    Returns the number of documents written. Raises :class:`EngineError` on a bad record (naming
    its line) or a Lucene failure. ``progress`` shows a bar on stderr (``total`` documents expected).
    """
    from tqdm import tqdm

    from ._java import start_jvm

    start_jvm()
    from jnius import JavaException, autoclass

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
    # The impact similarity ignores length norms; without them no norm is read per scored posting
    # (top 10 on 100k sentences: 1.28 against 1.40 ms) and the index is smaller.
    field_type.setOmitNorms(True)
    field_type.freeze()
    BytesRef = autoclass("org.apache.lucene.util.BytesRef")
    stored = autoclass("org.apache.lucene.document.Field$Store").YES
    id_field = autoclass("org.apache.lucene.document.StringField")("id", "", stored)
    id_order = autoclass("org.apache.lucene.document.BinaryDocValuesField")("id", BytesRef(b""))  # as Anserini 1.x
    contents = autoclass("org.apache.lucene.document.Field")(
        "contents", "", field_type,
        signature="(Ljava/lang/String;Ljava/lang/CharSequence;Lorg/apache/lucene/index/IndexableFieldType;)V")
    document = autoclass("org.apache.lucene.document.Document")()
    for field in (id_field, id_order, contents):
        document.add(field)

    path = autoclass("java.nio.file.Paths").get(str(index_dir))
    directory = autoclass("org.apache.lucene.store.FSDirectory").open(path)
    writer = autoclass("org.apache.lucene.index.IndexWriter")(directory, config)
    # The child imports this package from where this process found it, installed or not.
    package_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
    child = subprocess.Popen([sys.executable, "-m", __name__, str(vectors_file)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env)
    documents = 0
    bar = tqdm(total=total, unit="sent", desc="index", disable=not progress, file=sys.stderr, dynamic_ncols=True,
               mininterval=0.5)
    try:
        for line in child.stdout:
            sentence_id, text = orjson.loads(line)
            # Fields are reused: Lucene copies what it needs in addDocument.
            id_field.setStringValue(sentence_id)
            id_order.setBytesValue(BytesRef(sentence_id.encode("utf-8")))
            contents.setStringValue(text)
            writer.addDocument(document)
            documents += 1
            if documents % 1000 == 0:
                bar.update(1000)
        bar.update(documents % 1000)
        if child.wait() != 0:
            message = child.stderr.read().decode("utf-8", "replace").strip().splitlines()
            raise EngineError(message[-1] if message else f"reading {vectors_file} failed")
        writer.forceMerge(1)
        writer.close()
    except JavaException as e:
        raise EngineError(f"Lucene indexing of {vectors_file} failed: {e}") from None
    finally:
        bar.close()
        if child.poll() is None:
            child.kill()
        child.wait()
        if writer.isOpen():
            writer.rollback()
    return documents


if __name__ == "__main__":
    sys.exit(_stream(sys.argv[1]))
