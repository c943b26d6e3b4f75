"""Write a Lucene impact index with each impact as one posting's term frequency.

Anserini's ``JsonVectorCollection -impact`` turns a weight of 7 into seven occurrences of the token,
which Lucene then counts back into a term frequency: about 2,000 token occurrences per sentence at
factor 3, four times the postings they become. Here sparc-es's Java class
``sparces.lucene.ImpactIndexer`` (``java/``) hands Lucene each (token, impact) pair as a term with
its frequency, so Lucene inverts about 500 terms a sentence, not thousands of tokens. The records
are read and parsed in Java too (Jackson's streaming parser), on one thread per core, each over
its own byte range of the file; the index is sorted on the record's position, so after the final
merge docids follow input order (ties in score go to the earlier sentence).

The index is the one Anserini builds, read by the same searchers: stored ``id`` with its binary
doc values, ``contents`` with documents and frequencies (no norms: the impact similarity ignores
them), plus the ``order`` doc values the sort needs.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from sparc_es.errors import EngineError

_RAM_BUFFER_MB = 1024.0  # per writer, capped in Java at a quarter of the heap over all writers


def write_impact_index(vectors_file: Path, index_dir: Path, total: int | None = None, progress: bool = False,
                       threads: int | None = None) -> int:
    """Index ``vectors_file`` (JsonVectorCollection records) into a new Lucene index at ``index_dir``.

    Returns the number of documents written (records without a positive impact are skipped).
    Raises :class:`EngineError` on a bad record (naming its line) or a Lucene failure.
    ``threads``: indexing threads (default: one per core, at most 4). ``progress`` counts the
    sentences on stderr (``total`` expected).
    """
    from sparc_es.engines._java import interruptible, start_jvm

    start_jvm()
    from jnius import JavaException, autoclass

    threads = threads or min(4, os.cpu_count() or 1)
    indexer = autoclass("sparces.lucene.ImpactIndexer")
    similarity = autoclass("io.anserini.search.similarity.ImpactSimilarity")()
    stopped = autoclass("java.util.concurrent.atomic.AtomicBoolean")(False)  # this run's own stop flag
    try:
        return int(interruptible(lambda: indexer.index(str(vectors_file), str(index_dir), similarity, threads,
                                                       _RAM_BUFFER_MB, total or 0, progress, stopped),
                                 stop=lambda: stopped.set(True)))
    except JavaException as e:
        bad = re.search(r"BadRecord: (.*)", str(e))
        if bad:
            raise EngineError(f"{vectors_file} {bad.group(1)}") from None
        raise EngineError(f"Lucene indexing of {vectors_file} failed: {str(e).splitlines()[0]}") from None
