"""Encoding on many machines with Ray Data: :class:`RayBackend`, a :class:`~sparc_es.encode.backend.Backend`.

``pip install 'sparc-es[ray]'``; ``sparc-es encode --ray [ADDRESS] ...``. Without an address a local
Ray is started for the run (and stopped after it); ``auto`` joins the cluster this machine belongs
to, ``ray://HEAD:10001`` reaches one through Ray Client. Every machine needs the same sparc-es and
the same model folder (``--model``, ``default`` for the shipped one): each worker loads the model
from that folder and proves it is the driver's (same sparc-es version, same fingerprint) before it
does anything.

What runs where:

* the **driver** (this process) reads the corpus (local files or an Elasticsearch index) and
  validates it, merges the statistics, writes the encoded folder exactly as a local encode does
  (records in input order, ``progress.json``, resume, ``--update``, the lock), and keeps the
  passage cache;
* a fixed pool of **actors** (``actors`` of them, ``threads`` torch threads and as many CPUs each,
  ``gpus_per_actor`` GPUs each when the cluster has GPUs) loads the model once per actor and
  runs both passes:

  1. the corpus statistics (document frequencies, lengths, stems) as a map-reduce: blocks of
     sentence texts -> one :class:`~sparc_es.model.lexical.CorpusStatistics` per block (map, on the
     actors) -> :meth:`CorpusStatistics.merge` (reduce, on the driver): exact sums, equal to the
     single-process count;
  2. the encode: each piece of ``batch_size * 8`` sentences is encoded by one actor with
     ``model.encode``, so its windows are the single process's (same sentences, same length sort,
     same batches) and, at the same torch thread count on the same kind of CPU, its records are
     byte for byte the same. Pieces come back in input order (``preserve_order``).

Passage expansion: the single process encodes each passage once, in the window where it first
appears, and reads it from the encoded folder's passage cache (``passages.bin``) in later windows.
To give the same numbers, each group of pieces is encoded in two steps on the same actor pool:
(a) each piece's *new* passages (the driver knows which are new: it holds the cache) are encoded,
sorted and batched as the single process does, and come back as the sparse rows the cache stores;
the driver puts them into ``passages.bin`` in the single process's order (so the file is the same
too, for a fresh encode); (b) each piece is encoded with the rows of all its passages sent along
(about 2 KB each), so no actor ever encodes a passage another window already encoded. An
``--update`` therefore reuses the cached passages of unchanged contexts, as locally.

One Ray Data execution serves the whole run: its input is a small feed actor the driver puts
items into, read by one streaming read task (no CPU) that yields one block per item, and mapped
by the actor pool with ``map_batches(batch_size=1)``. A dataset per call (``from_items``) would
start the actors, import torch and load the model again for every group of pieces, which costs
more than encoding them.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import logging
import os
import pickle
import signal
import socket
import sys
import threading
import warnings
from collections import deque
from collections.abc import Iterator
from itertools import islice

import numpy as np

from sparc_es import __version__
from sparc_es.encode.backend import encode_passages, first_pass, passage_cached
from sparc_es.errors import ModelError, SparcError
from sparc_es.model.lexical import CorpusStatistics

try:  # optional: the classes below are defined either way, so this module always imports
    import ray
    import ray.data
    from ray.data.datasource import Datasource, ReadTask
except ImportError:  # pragma: no cover - exercised where ray is not installed
    ray = None
    Datasource = object

INSTALL = "pip install 'sparc-es[ray]'"
PIECES_PER_ACTOR = 4  # pieces handed over per actor at a time: enough to keep every actor busy
COUNT_BLOCK = 8192  # sentence texts per block of the statistics pass (the map's unit)


def _need_ray():
    if ray is None:
        raise SparcError(f"encoding on Ray needs the ray package: {INSTALL}")
    return ray


# --- the model, loaded once per actor -------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _ModelSpec:
    """What an actor needs to load the driver's model from its own disk, and to prove it did."""

    path: str
    config: dict  # every field of the driver's SparcConfig: the overrides it was loaded with included
    fingerprint: str
    version: str

    @classmethod
    def of(cls, model, path) -> _ModelSpec:
        config = {f.name: getattr(model.config, f.name) for f in dataclasses.fields(model.config)}
        return cls(str(path), config, model.fingerprint, __version__)


def _load_model(spec: _ModelSpec):
    from sparc_es.model import SparcModel

    here = socket.gethostname()
    if __version__ != spec.version:
        raise ModelError(f"Ray worker on {here} runs sparc-es {__version__} but the driver runs {spec.version}: "
                         "install the same sparc-es on every machine")
    try:
        model = SparcModel.load(spec.path, **spec.config)
    except ModelError as e:
        raise ModelError(f"Ray worker on {here}: cannot load the model being encoded from {spec.path} there ({e}); "
                         "every machine needs the same model folder (--model)") from None
    if model.fingerprint != spec.fingerprint:
        raise ModelError(f"Ray worker on {here}: the model {spec.path} there has fingerprint {model.fingerprint}, "
                         f"but the model being encoded has {spec.fingerprint}: every machine needs the same model "
                         "folder, and the model encoded must be the one saved there (--model)")
    return model


class _Rows:
    """The passage cache an actor encodes a piece with: the rows of all its passages, sent along."""

    def __init__(self, rows: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        self.rows = rows

    def get(self, text: str, size: int) -> np.ndarray | None:
        found = self.rows.get(text)
        if found is None:
            return None
        row = np.zeros(size, dtype=np.float32)
        row[found[0]] = found[1]
        return row

    def put(self, text: str, row: np.ndarray) -> None:  # every passage was sent: never called
        pass


def _sparse(row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A passage's dense f_P row as the passage cache stores it: its non-zeros."""
    ids = np.flatnonzero(row).astype(np.int32)
    return ids, row[ids].astype(np.float32)


def _dense(sparse: tuple[np.ndarray, np.ndarray], size: int) -> np.ndarray:
    row = np.zeros(size, dtype=np.float32)
    row[sparse[0]] = sparse[1]
    return row


class _Worker:
    """An actor of the pool (``map_batches``): the model, loaded once, and the work items.

    Items are pickled ``(seq, kind, payload)``; results pickled ``(seq, ("ok", value))``, or
    ``("error", (class name, message))`` for an error of sparc-es's own (a model that is not the
    driver's), which the driver raises on one line."""

    def __init__(self, spec: _ModelSpec, threads: int, feed) -> None:
        import torch

        torch.set_num_threads(threads)
        self.feed, self.version, self.options = feed, None, {}
        self.error = None
        try:
            self.model = _load_model(spec)
            if ray.get_gpu_ids() and torch.cuda.is_available():
                self.model.to("cuda")
        except SparcError as e:
            self.error = (type(e).__name__, str(e))

    def __call__(self, batch):
        import pyarrow as pa

        seqs, out = [], []
        for seq, data in zip(batch.column("seq").to_pylist(), batch.column("data").to_pylist()):
            kind, payload = pickle.loads(data)
            if self.error is not None:
                result = ("error", self.error)
            else:
                try:
                    result = ("ok", getattr(self, "_" + kind)(payload))
                except SparcError as e:
                    result = ("error", (type(e).__name__, str(e)))
            seqs.append(seq)
            out.append(pickle.dumps(result, protocol=5))
        return pa.table({"seq": pa.array(seqs, pa.int64()), "data": pa.array(out, pa.binary())})

    def _count(self, texts: list[str]) -> CorpusStatistics:
        return self.model.count_corpus(texts)

    def _passages(self, payload) -> list[tuple[np.ndarray, np.ndarray]]:
        """A piece's new passages, encoded as Pipeline.encode does (sorted by length, batched)."""
        texts, batch_size = payload
        return [_sparse(row) for row in encode_passages(self.model, texts, batch_size)]

    def _encode(self, payload) -> list:
        pairs, batch_size, version, rows = payload
        if version != self.version:  # IDF factors and corpus statistics: fetched once per run and actor
            self.options = pickle.loads(ray.get(self.feed.options.remote(version)))
            self.version = version
        cache = None if rows is None else _Rows(rows)
        return list(self.model.encode(pairs, batch_size=batch_size, passage_cache=cache, **self.options))


# --- the stream: one Ray Data execution for the whole run -----------------------------------

class _Feed:
    """The input of the stream (an async Ray actor without CPU): items in, in order; and the
    options of the encode (IDF factors, corpus statistics) by version, for the actors to fetch."""

    def __init__(self) -> None:
        self.items: asyncio.Queue = asyncio.Queue()
        self.blobs: dict[int, bytes] = {}

    async def put(self, item: bytes | None) -> None:
        await self.items.put(item)

    async def get(self) -> bytes | None:
        return await self.items.get()

    async def set_options(self, version: int, blob: bytes) -> None:
        self.blobs = {version: blob}

    async def options(self, version: int) -> bytes:
        return self.blobs[version]


class _FeedSource(Datasource):
    """A Ray Data source of one streaming read task that yields a block per item of the feed,
    as the items come, until the feed says the run is over."""

    def __init__(self, feed) -> None:
        self.feed = feed

    def estimate_inmemory_data_size(self) -> None:
        return None

    def get_read_tasks(self, parallelism: int, **kwargs) -> list:
        from ray.data.block import BlockMetadata

        feed = self.feed

        def read_feed():
            import pyarrow as pa

            while True:
                item = ray.get(feed.get.remote())
                if item is None:
                    return
                seq, data = pickle.loads(item)
                yield pa.table({"seq": pa.array([seq], pa.int64()), "data": pa.array([data], pa.binary())})

        unknown = BlockMetadata(**{f.name: None for f in dataclasses.fields(BlockMetadata)})
        return [ReadTask(read_feed, unknown)]


class _Stream:
    """Items put in, results taken out in the same order, by a fixed pool of :class:`_Worker`."""

    def __init__(self, spec: _ModelSpec, actors: int, threads: int, gpus: float) -> None:
        import inspect

        self.spec = spec
        self.feed = ray.remote(num_cpus=0)(_Feed).options(**_here()).remote()
        # One read task feeds the whole pool: Ray Data's hint that one input cannot use it all is wrong here.
        warnings.filterwarnings("ignore", message="The minimum number of concurrent actors", category=UserWarning)
        # Ray Data copies its context, deprecated fields and all: not the user's to act on.
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"ray\.data\.context")
        ctx = ray.data.DataContext.get_current()
        saved = {name: getattr(ctx, name) for name in ("execution_options", "target_max_block_size",
                                                       "enable_progress_bars", "print_on_execution_start")
                 if hasattr(ctx, name)}
        # Kept while the stream runs (some Ray versions read the current context as they execute) and
        # put back by close().
        self.saved_context = saved
        try:
            options = copy.deepcopy(ctx.execution_options)
            options.preserve_order = True  # results in input order
            ctx.execution_options = options
            ctx.target_max_block_size = 1  # a block per item, at once: never wait to fill a bigger one
            ctx.enable_progress_bars = False  # sparc-es draws its own
            if "print_on_execution_start" in saved:
                ctx.print_on_execution_start = False
            # The read task only waits on the feed: no CPU, on this machine (beside the feed), never retried
            # (a retried reader would wait for items its first run already took).
            place = {"num_cpus": 0, "max_retries": 0, **_here()}
            params = inspect.signature(ray.data.read_datasource).parameters
            read_args = {"override_num_blocks": 1}
            if "ray_remote_args" in params:
                read_args["ray_remote_args"] = place
            else:  # pragma: no cover - a Ray without it
                read_args["num_cpus"] = 0
            with warnings.catch_warnings():  # ray_remote_args: deprecated in favour of a few named ones
                warnings.simplefilter("ignore")
                ds = ray.data.read_datasource(_FeedSource(self.feed), **read_args)
            pool = {"batch_size": 1, "batch_format": "pyarrow", "num_cpus": threads,
                    "compute": ray.data.ActorPoolStrategy(size=actors, max_tasks_in_flight_per_actor=2),
                    "fn_constructor_kwargs": {"spec": spec, "threads": threads, "feed": self.feed},
                    **({"num_gpus": gpus} if gpus else {})}
            try:  # a lost actor stops the run (a rerun resumes): not restarted with arguments Ray may have lost
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ds = ds.map_batches(_Worker, max_restarts=0, **pool)
            except TypeError:  # pragma: no cover - a Ray that takes no other remote arguments
                ds = ds.map_batches(_Worker, **pool)
            self.results = iter(ds.iter_batches(batch_size=None, batch_format="pyarrow", prefetch_batches=0))
        except BaseException:
            self._restore_context()
            raise
        self.sent = self.received = 0
        self.dead = False  # the execution failed: a new stream is needed
        self.waiting: deque = deque()
        self.options_key: tuple | None = None
        self.options_version = 0

    @property
    def outstanding(self) -> int:
        return self.sent - self.received

    def put(self, kind: str, payload) -> None:
        data = pickle.dumps((kind, payload), protocol=5)
        ray.get(self.feed.put.remote(pickle.dumps((self.sent, data), protocol=5)))
        self.sent += 1

    def get(self):
        """The next result, in the order the items were put."""
        while not self.waiting:
            try:
                batch = next(self.results)
            except StopIteration:
                self.dead = True
                raise SparcError("the Ray pipeline ended before every item was encoded") from None
            except Exception as e:
                self.dead = True
                raise _as_sparc_error(e) from None
            self.waiting.extend(zip(batch.column("seq").to_pylist(), batch.column("data").to_pylist()))
        seq, data = self.waiting.popleft()
        if seq != self.received:  # preserve_order is what the records' order rests on: checked, not assumed
            raise SparcError(f"the Ray pipeline returned item {seq} where {self.received} was due")
        self.received += 1
        status, value = pickle.loads(data)
        if status == "error":
            name, message = value
            import sparc_es.errors as errors

            cls = getattr(errors, name, SparcError)
            raise (cls(message) if issubclass(cls, SparcError) and cls is not errors.InputError
                   else SparcError(message))
        return value

    def set_options(self, key: tuple, options: dict) -> int:
        """The version of ``options`` the actors fetch (sent once per run, not once per piece)."""
        if key != self.options_key:
            self.options_version += 1
            blob = pickle.dumps(options, protocol=5)
            ray.get(self.feed.set_options.remote(self.options_version, blob))
            self.options_key = key
        return self.options_version

    def close(self) -> None:
        """End the execution: at once when every result was taken, else by stopping it."""
        try:
            if self.outstanding == 0 and not self.dead:
                ray.get(self.feed.put.remote(None))
                for _ in self.results:  # nothing left: the read task ends, and the pool with it
                    pass
            else:
                close = getattr(self.results, "close", None)
                if close is not None:
                    close()
        except Exception:  # a failed run is being torn down: its error was raised already
            pass
        finally:
            with _quiet():
                ray.kill(self.feed)
            self._restore_context()

    def _restore_context(self) -> None:
        ctx = ray.data.DataContext.get_current()
        for name, value in self.saved_context.items():
            setattr(ctx, name, value)
        self.saved_context = {}


@contextlib.contextmanager
def _ctrl_c_once_ignored() -> Iterator[None]:
    """On the main thread (where Python's handler runs), a first Ctrl-C in the block is said and
    ignored; a second stops as Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed = []

    def once(signum, frame) -> None:
        if pressed:
            raise KeyboardInterrupt("interrupted while Ray was shutting down: its processes may still run "
                                    "(ray stop ends them)")
        pressed.append(signum)
        print("sparc-es encode: stopping Ray (a few seconds; Ctrl-C again leaves it running)", file=sys.stderr,
              flush=True)

    before = signal.signal(signal.SIGINT, once)
    try:
        yield
    finally:  # None: a handler not set from Python, which cannot be put back; Python's own instead
        signal.signal(signal.SIGINT, before if before is not None else signal.default_int_handler)


def _here() -> dict:
    """Ray options that keep a task or actor on the driver's machine when it can."""
    try:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return {"scheduling_strategy": NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(),
                                                                     soft=True)}
    except Exception:  # pragma: no cover - Ray Client, older Ray: wherever Ray puts it
        return {}


def _as_sparc_error(e: Exception) -> SparcError:
    """A Ray error (a worker lost, a pool that cannot start) as sparc-es's one-line error."""
    cause = e
    while getattr(cause, "cause", None) is not None and cause.cause is not cause:
        cause = cause.cause
    if isinstance(cause, SparcError):
        return cause
    kind = type(cause).__name__
    if kind in ("ActorDiedError", "RayActorError", "WorkerCrashedError", "NodeDiedError"):
        what = f"a Ray worker died ({kind}: its process was killed, ran out of memory or crashed)"
    else:
        text = str(cause).strip().splitlines()
        what = f"Ray: {kind}: {text[-1] if text else ''}"
    return SparcError(f"{what}; the work committed so far is kept: run the same command again to resume")


class _quiet:
    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return True


# --- the backend ----------------------------------------------------------------------------

class RayBackend:
    """Run the two passes of ``encode`` on a Ray cluster (:mod:`sparc_es.encode.ray`).

    ``address``: a cluster (``auto``, ``HOST:6379`` on a cluster node, ``ray://HEAD:10001``), or
    None for a local Ray started for the run with ``actors * threads`` CPUs (all of this machine's
    when ``actors`` is not given). ``actors``: the size of the pool (default: one per GPU when the
    cluster has GPUs, else one per ``threads`` CPUs). ``gpus_per_actor``: GPUs each actor asks for
    (default: 1 when the cluster has GPUs, else none). ``threads``: torch threads (and CPUs
    reserved) per actor. ``model_path``: the folder (or name, ``default``) every actor loads the
    model from; it must be the model the encode is given (the actors check its fingerprint).

    Use it as a context manager (or call :meth:`close`): the actor pool stays up across
    ``encode_corpus`` calls with the same model, and Ray is stopped if this backend started it.
    """

    def __init__(self, address: str | None = None, actors: int | None = None, gpus_per_actor: float | None = None,
                 model_path: str | os.PathLike = "default", threads: int = 1, count_block: int = COUNT_BLOCK) -> None:
        _need_ray()
        if actors is not None and actors < 1:
            raise SparcError("--ray-actors must be at least 1")
        if gpus_per_actor is not None and gpus_per_actor < 0:
            raise SparcError("--ray-gpus-per-actor must not be negative")
        if threads < 1:
            raise SparcError("threads per actor must be at least 1")
        if count_block < 1:
            raise SparcError("the count block must be at least 1 sentence")
        self.address = address or None
        self.model_path = model_path
        self.threads = threads
        self.count_block = count_block
        self._asked = (actors, gpus_per_actor)
        self.actors: int | None = None
        self.gpus_per_actor: float = 0.0
        self._started = False  # this backend started Ray (and stops it)
        self._connected = False
        self._stream: _Stream | None = None
        self._broken = False  # a call stopped half-way: its results are not the next call's
        self._held: tuple = ()  # the option objects the current version was made of (ids stay theirs)

    # -- connection

    def connect(self) -> None:
        """Start or reach Ray and size the pool (done by the first pass otherwise)."""
        if self._connected:
            return
        # Ray's and Ray Data's own reports of a failure (tracebacks of a lost worker, "unhandled
        # errors" of objects nobody reads) would come before sparc-es's one line, which says it all.
        logging.getLogger("ray").setLevel(logging.CRITICAL)
        logging.getLogger("ray.data").setLevel(logging.CRITICAL)
        os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")
        actors, gpus_per_actor = self._asked
        quiet = {"logging_level": logging.ERROR, "log_to_driver": False}
        # Ray's failure-signal handler takes SIGSEGV from the JVM that the Lucene engine runs in this
        # process, which uses it in normal operation, and Ray's shutdown leaves it at the default:
        # a later Lucene call then kills the process (ray-project/ray#36415, #58984).
        os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
        # ray.init sets a SIGTERM handler of its own (sys.exit: no message, no cleanup said) on the
        # main thread; one the process had set (sparc-es's, taking SIGTERM as Ctrl-C) is put back.
        sigterm = signal.getsignal(signal.SIGTERM) if threading.current_thread() is threading.main_thread() else None
        sigterm = None if sigterm in (signal.SIG_DFL, None) else sigterm
        try:
            if ray.is_initialized():
                pass  # the caller's own Ray: used as it is, and left running
            elif self.address:
                _reachable(self.address)
                ray.init(address=self.address, **quiet)
                self._started = True
            else:
                cpus = actors * self.threads if actors else os.cpu_count() or 1
                if cpus > (os.cpu_count() or 1):  # Ray counts what it is told, not the machine's cores
                    print(f"sparc-es encode: Ray: {actors} actors of {self.threads} thread"
                          f"{'s' if self.threads > 1 else ''} ask for {cpus} CPUs of this machine's "
                          f"{os.cpu_count()}: they share them, each slower than alone", file=sys.stderr, flush=True)
                # address="local": a new Ray on this machine, whatever RAY_ADDRESS says. Its servers
                # listen on every interface; Ray (2.52+) requires a token of its clients (the user's
                # ~/.ray/auth_token), unless RAY_AUTH_MODE=disabled says otherwise.
                ray.init(address="local", num_cpus=cpus, include_dashboard=False, **quiet)
                self._started = True
        except SparcError:
            raise
        except Exception as e:
            where = self.address or "a local Ray"
            raise SparcError(f"cannot start or reach {where}: {type(e).__name__}: {' '.join(str(e).split())}") from None
        finally:
            if sigterm is not None:
                signal.signal(signal.SIGTERM, sigterm)
        self._connected = True
        resources = ray.cluster_resources()
        gpus, cpus = resources.get("GPU", 0), resources.get("CPU", 0)
        if gpus_per_actor is None:
            gpus_per_actor = 1.0 if gpus else 0.0
        elif gpus_per_actor and not gpus:
            self.close()
            raise SparcError(f"--ray-gpus-per-actor {gpus_per_actor:g}: the Ray cluster has no GPU")
        if not actors:
            actors = max(1, int(gpus // gpus_per_actor) if gpus_per_actor else int(cpus // self.threads))
        self.actors, self.gpus_per_actor = actors, gpus_per_actor
        short = actors * self.threads > cpus or actors * gpus_per_actor > gpus
        if short and self._started and not self.address:  # a local Ray does not grow
            self.close()
            raise SparcError(f"{actors} Ray actors of {self.threads} threads"
                             f"{f' and {gpus_per_actor:g} GPUs' if gpus_per_actor else ''} need more than this "
                             f"machine's {cpus:g} CPUs and {gpus:g} GPUs: fewer --ray-actors, --threads or "
                             "--ray-gpus-per-actor")
        if short:
            print(f"sparc-es encode: Ray: {actors} actors of {self.threads} CPUs"
                  f"{f' and {gpus_per_actor:g} GPUs' if gpus_per_actor else ''} need more than the cluster's "
                  f"{cpus:g} CPUs and {gpus:g} GPUs now: waiting for it to grow", file=sys.stderr, flush=True)

    @property
    def pieces_at_once(self) -> int:
        self.connect()
        return PIECES_PER_ACTOR * self.actors

    def _stream_for(self, model) -> _Stream:
        self.connect()
        spec = _ModelSpec.of(model, self.model_path)
        if self._stream is not None and (self._broken or self._stream.dead or self._stream.spec != spec):
            self._stream.close()
            self._stream = None
        if self._stream is None:
            self._stream = _Stream(spec, self.actors, self.threads, self.gpus_per_actor)
            self._broken = False
        return self._stream

    def close(self) -> None:
        """Stop the actor pool, and Ray if this backend started it. A first Ctrl-C while it does is
        said and ignored: the run is over (its work committed, or its error on the way), and
        stopping here would leave the actors and Ray's processes running."""
        with _ctrl_c_once_ignored():
            if self._stream is not None:
                self._stream.close()
                self._stream = None
            if self._started and ray.is_initialized():
                ray.shutdown()
            self._started = self._connected = False

    def __enter__(self) -> RayBackend:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the first pass: corpus statistics, a map-reduce

    def count(self, source, model) -> tuple[int, CorpusStatistics | None]:
        """(sentences, their statistics): blocks of texts counted on the actors, merged here. The
        corpus is read (and validated) here, so a bad line fails as it does locally."""
        if model is None:  # nothing to count but sentences: reading is all the work, and it is here
            return first_pass(source, None)
        stream = self._stream_for(model)
        total, merged, in_flight = 0, None, 0
        texts = (s.text for s in source.read())
        try:
            while block := list(islice(texts, self.count_block)):
                total += len(block)
                stream.put("count", block)
                in_flight += 1
                while in_flight >= 2 * self.actors:
                    part = stream.get()
                    merged = part if merged is None else merged.merge(part)
                    in_flight -= 1
            while in_flight:
                part = stream.get()
                merged = part if merged is None else merged.merge(part)
                in_flight -= 1
        except BaseException:
            self._broken = stream.outstanding > 0
            raise
        return total, merged if merged is not None else model.count_corpus([])

    # -- the second pass: the encode

    def encode(self, model, pieces: list[list[tuple[str, str]]], batch_size: int,
               **options) -> Iterator[list]:
        """Each piece encoded by one actor as ``model.encode(pairs, batch_size, **options)``
        would, yielded in order; ``on_batch`` is called here with each piece's size as it arrives,
        ``passage_cache`` is kept here (see the module docstring)."""
        on_batch = options.pop("on_batch", None)
        cache = options.pop("passage_cache", None)
        stream = self._stream_for(model)
        held = tuple(options.values())
        key = tuple((k, id(v)) for k, v in sorted(options.items()))
        version = stream.set_options(key, options)
        self._held = held  # the objects keyed by id stay alive while their version is in use
        expand = bool(model.config.passage_weight) and cache is not None
        return self._encode(stream, model, pieces, batch_size, version, cache if expand else None, on_batch)

    def _encode(self, stream: _Stream, model, pieces, batch_size: int, version: int, cache,
                on_batch) -> Iterator[list]:
        finished = False
        try:
            if cache is None:
                for pairs in pieces:
                    if pairs:
                        stream.put("encode", (pairs, batch_size, version, None))
            else:
                self._passages(stream, model, pieces, batch_size, version, cache)
            for pairs in pieces:
                if not pairs:  # an update kept every sentence of this piece
                    result = []
                else:
                    result = stream.get()
                    if on_batch is not None:
                        on_batch(len(pairs))
                if result and len(result) != len(pairs):
                    raise SparcError(f"a Ray actor returned {len(result)} sentences for a piece of {len(pairs)}")
                yield result
            finished = True
        finally:
            if not finished and stream.outstanding:
                self._broken = True  # its results would be taken for the next call's

    def _passages(self, stream: _Stream, model, pieces, batch_size: int, version: int, cache) -> None:
        """Step (a) of the module docstring, then the pieces put in for step (b)."""
        from sparc_es.model import passage_text

        size = model.embeddings.shape[0]
        pending: set[str] = set()
        plans = []
        for pairs in pieces:
            texts = list(dict.fromkeys(passage_text(s, c) for s, c in pairs))
            todo = [t for t in texts if t not in pending and not passage_cached(cache, t)]
            pending.update(todo)
            plans.append((texts, todo))
            if todo:
                stream.put("passages", (todo, batch_size))
        for pairs, (texts, todo) in zip(pieces, plans):
            if not pairs:
                continue
            computed = dict(zip(todo, stream.get())) if todo else {}
            rows = {}
            for t in texts:  # the single process's order: the known passages read, then the new ones put
                if t not in computed:
                    row = cache.get(t, size)
                    if row is None:  # cannot happen: it was cached, or put by an earlier piece
                        raise SparcError(f"the passage cache lost a passage while it was written: {t[:60]!r}")
                    rows[t] = _sparse(row)
            for t in sorted(todo, key=len):  # as the single process puts them (encode_passages): by length, stable
                cache.put(t, _dense(computed[t], size))
            if todo:
                cache.flush()  # a kill keeps whole pieces' passages, so a resume batches them as before
            rows.update(computed)
            stream.put("encode", (pairs, batch_size, version, rows))


REACH_SECONDS = 10.0  # how long a cluster's address may take to accept a connection


def _reachable(address: str) -> None:
    """A one-line error when nothing answers at a cluster's ``HOST:PORT`` (or ``ray://HOST:PORT``):
    Ray itself retries such an address for minutes, logging as it goes, before it fails. ``auto``
    and other forms are left to Ray."""
    import socket

    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=REACH_SECONDS).close()
    except OSError as e:
        why = e.strerror or (f"no answer in {REACH_SECONDS:g} s" if isinstance(e, TimeoutError) else str(e))
        raise SparcError(f"cannot reach the Ray cluster at {address}: {why}") from None
