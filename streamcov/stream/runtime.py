"""Where a Dask graph runs: threads on this machine, or a dask.distributed cluster."""
from __future__ import annotations

import contextlib
import contextvars
import logging
import math
import os
import signal
import threading
import time
import uuid
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

from .._config import (WORKER_MALLOC_ENV, available_cores, ending_signals, sigterm_again, thread_plan,
                       worker_spawn_environ)
from ..errors import ConfigError, StreamcovError, arg, arg_name, int_arg

# the schedulers by name; anything else is a scheduler address (tcp://HOST:PORT)
SCHEDULERS = ("threads", "synchronous", "local-cluster")
# a running scheduler's address (inproc://: one inside this process, a notebook's Client(processes=False))
ADDRESS_PROTOCOLS = ("tcp://", "tls://", "inproc://", "ucx://")
# the schedulers that read a worker count (--workers, dask.workers): threads of "threads", processes of a LocalCluster
WORKER_SCHEDULERS = ("threads", "local-cluster")


def is_scheduler(name: str) -> bool:
    """Whether ``name`` is a scheduler by name or the address of a running one (``tcp://`` and ``tls://``
    with a host and a port number, as dask.distributed reads them)."""
    if name in SCHEDULERS:
        return True
    if not name.startswith(ADDRESS_PROTOCOLS):
        return False
    protocol, _, location = name.partition("://")
    if protocol in ("tcp", "tls"):
        host, colon, port = location.rpartition(":")
        # an IPv6 host in brackets ([::1]), any other without brackets or colons: Dask refuses '[::1:8786' and
        # '::1:8786' as it connects (a ValueError, after which its half-made client held the exit for 60 s)
        bracketed = host.startswith("[") and host.endswith("]")
        inner, refused = (host[1:-1], "[]") if bracketed else (host, "[]:")
        # ASCII digits only: isdigit() is also true of '²', which int() refuses, and of full-width digits
        return bool(colon and inner and not set(refused) & set(inner)
                    and port.isascii() and port.isdigit() and 0 < int(port) < 65536)
    return bool(location)


def expected_scheduler(name) -> str:
    """What a scheduler must be, for a message refusing ``name``: the names and the address form, with the
    brackets an IPv6 host needs when ``name`` looks like one."""
    ipv6 = (isinstance(name, str) and name.startswith(("tcp://", "tls://"))
            and any(c in name.partition("://")[2].rpartition(":")[0] for c in "[]:"))
    return (f"one of {', '.join(SCHEDULERS)} or a scheduler address tcp://HOST:PORT"
            + (" (an IPv6 host in brackets: tcp://[::1]:8786)" if ipv6 else "")
            + ("" if isinstance(name, str) else " (in Python also a distributed.Client or a cluster object)"))


def workers_unread(scheduler: str | None) -> str | None:
    """Why a worker count is not read with ``scheduler``; None where it is (no scheduler given: threads)."""
    if scheduler is None or scheduler in WORKER_SCHEDULERS:
        return None
    return "a synchronous run has one thread" if scheduler == "synchronous" else "a running cluster has its own workers"


# the least memory a worker process of a local-cluster needs: Dask gives each of n workers 1/n of the memory
# and pauses one at 80% of its share, and a worker holds about 265 MiB before any task (the interpreter, dask,
# numpy, numba, zarr and the engine's modules, _settle_plugin): below about 330 MiB each is paused at once and
# the run waits forever (--workers 1024 started 1024 processes)
WORKER_MIN_BYTES = 384 << 20
# what a worker holds before any task, with a margin: a pause (or restart) fraction of its limit below it stops
# the worker at once (Dask's 80% of WORKER_MIN_BYTES)
WORKER_IDLE_BYTES = WORKER_MIN_BYTES * 4 // 5


def local_cluster_size(workers: int | None) -> int:
    """Worker processes of a local-cluster: ``workers``, or one per core when no count is given."""
    return int(workers or available_cores())


def check_local_workers(n: int | None, what: str) -> None:
    """Refuse, with one line, a local-cluster of ``n`` worker processes (None: one per core) that the memory
    Dask divides among them cannot hold, :data:`WORKER_MIN_BYTES` each, naming the count as ``what`` (for
    None: the scheduler, to which " on N cores" is added) and the most workers that fit; and Dask's settings
    such a cluster cannot start or run with (:func:`_check_local_cluster_settings`).

    The memory is Dask's figure (:func:`streamcov._config.total_memory` with ``soft=True``): a container's
    soft limits count, since Dask pauses a worker beyond 80% of its share of them."""
    import dask

    from .._config import check_memory, total_memory

    total = total_memory(soft=True)
    fits, count = max(1, total // WORKER_MIN_BYTES), local_cluster_size(n)
    if count > fits:
        check_memory(count * WORKER_MIN_BYTES, f"{what}{'' if n else f' on {count} cores'} ({count} worker "
                     f"processes of a local-cluster, at least {WORKER_MIN_BYTES >> 20} MiB each)",
                     f"use at most {fits} worker{'s' * (fits > 1)}", total=total)
    _check_local_cluster_settings(dask, count)   # before any work, as the cluster's start checks them again


# the security (TLS certificates) of the clients and clusters given as schedulers, by their address: the run's
# own client connects with it (a tls:// cluster refused a client without it)
_SECURITY: dict = {}


def _address_of(scheduler):
    """A notebook's ``distributed.Client`` or cluster object (``LocalCluster``) given as the scheduler: its
    scheduler's address, which the run connects to with the object's security (the user's client and cluster
    are left as they are); anything else as given. A closed one is refused."""
    try:
        from distributed import Client
        from distributed.deploy import Cluster
    except ImportError:   # pragma: no cover - a dependency
        return scheduler
    if isinstance(scheduler, Client):
        running = scheduler.scheduler is not None and scheduler.status == "running"
        address = scheduler.scheduler.address if running else None
    elif isinstance(scheduler, Cluster):
        running = scheduler.status.name == "running"
        address = scheduler.scheduler_address if running else None
    else:
        return scheduler
    if address is None:
        raise ConfigError(f"{arg('scheduler', scheduler)}: that {type(scheduler).__name__} is closed (no scheduler "
                          f"connected); give a running one, or its scheduler's address")
    security = getattr(scheduler, "security", None)
    if security is not None:
        _SECURITY[address] = security
    return address


def resolve_runtime(scheduler, workers) -> tuple:
    """``(scheduler or None, workers or None)`` checked, the same for the command line and the Python API:
    a scheduler name or address, a worker count >= 1 that the scheduler reads; a count alone is a
    LocalCluster of that many single-threaded workers. Errors name the two as the caller typed them
    (:func:`streamcov.errors.arg`)."""
    fw = arg_name("workers")
    scheduler = _address_of(scheduler)
    if workers is not None:
        workers = int_arg("workers", workers)
        from .._config import MAX_WORKERS

        if workers > MAX_WORKERS:   # a count of many digits would start processes until memory runs out
            raise ConfigError(f"{arg('workers', workers)}: expected at most {MAX_WORKERS} workers (this machine "
                              f"has {os.cpu_count()} cores)")
    if scheduler is not None and (not isinstance(scheduler, str) or not is_scheduler(scheduler)):
        raise ConfigError(f"{arg('scheduler', scheduler)}: expected {expected_scheduler(scheduler)}")
    why = workers_unread(scheduler)
    if workers is not None and why is not None:
        raise ConfigError(f"{arg('workers', workers)} {arg('scheduler', scheduler)}: {fw} sets the threads of "
                          f"{arg('scheduler', 'threads')} or the processes of a local-cluster; {why}")
    if workers is not None and scheduler is None:
        scheduler = "local-cluster"
    if workers is not None and scheduler == "local-cluster":
        check_local_workers(workers, arg("workers", workers))
    return scheduler, workers


# times a computation (a fit, a featurization window) starts again after losing a worker, before it gives up
MAX_RECOVERIES = 3
# seconds a computation that lost a worker waits for as many workers as it had (a nanny's restart) before it
# goes on with those there are
RECOVERY_WAIT = 30.0


def lost_worker_errors() -> tuple:
    """The errors a cluster raises for work it lost with a worker (not for errors of the tasks themselves):
    ``KilledWorker``, ``CancelledError`` (a future the scheduler forgot when its worker died), and
    ``CommClosedError`` (a connection to a worker that died during a scatter or a plugin's registration)."""
    from concurrent.futures import CancelledError

    from distributed import KilledWorker
    from distributed.comm.core import CommClosedError

    return (KilledWorker, CancelledError, CommClosedError)


def workers_lost(client) -> StreamcovError:
    """The one line for a run on a cluster that lost every worker and got none back in :data:`RECOVERY_WAIT`
    seconds: it hung, waiting for results no worker would compute, or ended in a traceback."""
    address = getattr(getattr(client, "scheduler", None), "address", None)
    paused = _paused_workers(client)
    if paused:
        return StreamcovError(
            f"{address or 'the scheduler'}: {paused}, and none resumed in {RECOVERY_WAIT:g} s: Dask pauses a worker "
            f"whose memory passes the fraction distributed.worker.memory.pause of its limit; give that setting a "
            f"larger fraction (environment variable DASK_DISTRIBUTED__WORKER__MEMORY__PAUSE or a Dask configuration "
            f"file; its default is {_DASK_MEMORY_DEFAULTS['pause']:g}) or the workers more memory, or use smaller "
            f"blocks (dask.block_size), and run the command again (a run continues from what it wrote with "
            f"{arg('resume', True)})")
    start = f"`dask worker {address}`" if address else "`dask worker` with the scheduler's address"
    return StreamcovError(f"{address or 'the scheduler'}: every worker left the cluster and none came back in "
                          f"{RECOVERY_WAIT:g} s; start workers ({start}) and run the command again (a run "
                          f"continues from what it wrote with {arg('resume', True)})")


def _task_count(info: dict, state: str) -> int:
    """Tasks of a worker (the scheduler's ``info`` of it) in ``state`` (``executing``, ``ready``): 0 where not said."""
    return int(((info.get("metrics") or {}).get("task_counts") or {}).get(state, 0) or 0)


def _status(info: dict) -> str:
    """A worker's status in the scheduler's ``info`` of it (``running``, ``paused``, ...)."""
    return str(info.get("status", "")).lower()


def _paused(info: dict) -> bool:
    return _status(info) == "paused"


def _paused_workers(client) -> str:
    """The workers that stop the run by being paused by Dask's memory monitor, in words: every worker, which
    Dask's wait for workers counts as none (said as "every worker left the cluster" before), or those holding
    tasks ready to run that no running worker takes (the run waited forever); "" where none (or not known)."""
    from dask.utils import format_bytes

    workers = _scheduler_workers(client)
    if not workers:
        return ""
    paused = [w for w in workers.values() if _paused(w)]
    holding = [w for w in paused if _task_count(w, "ready")]
    if len(paused) < len(workers) and not holding:
        return ""
    limits = sorted({int(w.get("memory_limit") or 0) for w in paused})
    each = f" (a limit of {format_bytes(limits[0])} each)" if len(limits) == 1 and limits[0] else ""
    if len(paused) == len(workers):
        return f"every worker ({len(workers)}) is paused by Dask for its memory{each}"
    return (f"{len(holding)} of the {len(workers)} workers {'is' if len(holding) == 1 else 'are'} paused by Dask for "
            f"{'its' if len(holding) == 1 else 'their'} memory{each}, holding tasks no other worker takes")


def _scheduler_workers(client) -> dict | None:
    """The scheduler's record of every worker (address: its info: ``status``, ``memory_limit``, ``metrics``),
    or None when the scheduler does not answer."""
    try:
        try:
            return client.scheduler_info(n_workers=-1)["workers"]   # all of them (the default lists 5 in some)
        except TypeError:   # a distributed before n_workers: all of them
            return client.scheduler_info()["workers"]
    except Exception:   # noqa: BLE001 - a scheduler gone too: the callers' plain lines say it
        return None


def _workers_at_work(client) -> bool:
    """Whether the cluster can go on computing: a worker executing a task (a paused one too: its memory may
    fall when the task ends, and it resumes), or a running worker while no paused one holds tasks ready to
    run. Workers all paused and idle compute nothing, and Dask leaves the tasks it gave a paused worker there
    while another worker idles: the run waited forever."""
    workers = _scheduler_workers(client)
    if workers is None:
        return bool(client.nthreads())
    if any(_task_count(w, "executing") for w in workers.values()):
        return True
    return (any(_status(w) == "running" for w in workers.values())
            and not any(_paused(w) and _task_count(w, "ready") for w in workers.values()))


def await_with_workers(client, futures) -> None:
    """Wait until ``futures`` are finished (their errors are raised by the gather that follows), while the
    cluster has a worker at work (:func:`_workers_at_work`): with none for :data:`RECOVERY_WAIT` seconds,
    :func:`workers_lost` is raised (a nanny restarts a killed worker in a few seconds; without one, or with
    every worker paused at its memory limit, nothing would ever compute them)."""
    import time
    from concurrent.futures import CancelledError

    from distributed import wait

    futures = [f for f in futures if hasattr(f, "key")]
    gone_since = None
    while True:
        try:
            with client.as_current():
                wait(futures, timeout=2.0)
            return
        except CancelledError:   # wait may raise it for a cancelled future: the gather after raises its own
            return
        except TimeoutError:
            pass
        if _workers_at_work(client):
            gone_since = None
        elif gone_since is None:
            gone_since = time.monotonic()
        elif time.monotonic() - gone_since > RECOVERY_WAIT:
            raise workers_lost(client)


def scatter_to_all(client, key: str, obj):
    """``obj`` scattered to every worker under ``key`` (its future), sent again where a worker dies meanwhile
    (:func:`retry_lost`); with no worker there (Dask's "No valid workers found"), after waiting for one up to
    :data:`RECOVERY_WAIT` seconds, or :func:`workers_lost`.

    A Ctrl-C, SIGTERM or SIGHUP during the scatter is held until it returns (:func:`_signal_held`), then
    delivered: one raised inside it left the object on workers whose copy the scheduler had lost track of ("Key
    lost during replication"), a fitted map of 163 MB held by a user's worker until it restarted. A second Ctrl-C
    a second or more after the first interrupts the scatter at once (it may wait up to :data:`RECOVERY_WAIT`
    seconds for a worker), as a second SIGTERM ends the process."""
    held_int: list = []
    held_term: list = []
    with _signal_held(signal.SIGINT, held_int, _interrupt_again), _sigterm_held(held_term):
        future = _scatter_to_all(client, key, obj)
    deliver_held(held_term)
    deliver_held(held_int)
    return future


def _interrupt_again(first: float, signum=None) -> None:
    """A Ctrl-C after the one held at ``first`` (``time.monotonic()``): within :data:`~streamcov._config.SIGTERM_ECHO`
    seconds ignored (a terminal's Ctrl-C pressed twice in a hurry), later raised at once."""
    from .._config import SIGTERM_ECHO

    if time.monotonic() - first >= SIGTERM_ECHO:
        raise KeyboardInterrupt


def _scatter_to_all(client, key: str, obj):
    def attempt():
        try:
            return client.scatter({key: obj}, broadcast=True)[key]
        except TimeoutError:
            try:
                client.wait_for_workers(1, timeout=RECOVERY_WAIT)
            except TimeoutError:
                raise workers_lost(client) from None
            return client.scatter({key: obj}, broadcast=True)[key]

    return retry_lost(client, attempt)


def retry_lost(client, attempt: Callable, before_retry: Callable | None = None):
    """``attempt()``; on a cluster that loses a worker meanwhile (:func:`lost_worker_errors`), again after
    waiting up to :data:`RECOVERY_WAIT` seconds for a worker (a nanny restarts a killed one), at most
    :data:`MAX_RECOVERIES` times; then the last error is raised (:func:`workers_lost` when no worker came
    back). Errors of the tasks themselves, and any error on threads (``client`` None: no worker to lose), are
    raised at once.

    The scheduler recomputes the tasks of a lost worker by itself, but a future it forgot meanwhile comes
    back cancelled ("already forgotten"), and a task that killed workers too often comes back as
    ``KilledWorker``: the whole computation is then submitted again. Only for work that gives the same
    result when repeated (reads, and writes of the same bytes to the same place). ``before_retry()`` runs
    before each new attempt (:meth:`Runtime.reshare`: data scattered to a lost worker is sent again)."""
    if client is None:
        return attempt()
    lost = lost_worker_errors()
    for n in range(MAX_RECOVERIES + 1):
        try:
            return attempt()
        except lost:
            if n == MAX_RECOVERIES:
                raise
        try:
            client.wait_for_workers(1, timeout=RECOVERY_WAIT)
        except TimeoutError:   # no worker: nothing would compute the next attempt (it hung, or a traceback)
            raise workers_lost(client) from None
        if before_retry is not None:
            before_retry()


def _normalize_by_state(obj):
    """dask's token of an estimator (or a saved pipeline) from its class and instance state, arrays hashed
    where they lie. Without it dask tokenizes such an object by pickling it whole: a feature map of
    ``n_components x n_features`` projections (1.7 GB at nu = 20000 on 121 x 121 windows) was copied into a
    pickle every time it was shared."""
    from dask.base import normalize_token

    cls = type(obj)
    return (f"{cls.__module__}.{cls.__qualname__}", normalize_token(vars(obj)))


def register_tokens(obj=None) -> None:
    """Tokenize scikit-learn estimators and :class:`~streamcov.stream.model.FittedPipeline` by their state
    (:func:`_normalize_by_state`); idempotent. ``obj``: also the concrete classes of the estimators in it,
    nested ones included: dask's dispatch caches the handler it resolved for a class, so a class tokenized
    before this registration (or claimed by another package's handler for ``BaseEstimator``, e.g.
    dask-ml's) would otherwise keep its old handler.

    A class is registered only when its handler is not already :func:`_normalize_by_state` (one dict
    look-up per class): calls on every share of a model leave dask's table alone, while a class that
    another package claimed since is taken back.
    """
    from dask.base import normalize_token
    from sklearn.base import BaseEstimator

    from .model import FittedPipeline

    # dask.utils.Dispatch's table (class -> handler, resolved subclasses cached); without it, register always
    table = getattr(normalize_token, "_lookup", {})

    def claim(cls):
        if table.get(cls) is not _normalize_by_state:
            normalize_token.register(cls, _normalize_by_state)

    claim(BaseEstimator)
    claim(FittedPipeline)
    seen: set = set()

    def walk(o):
        if id(o) in seen:
            return
        seen.add(id(o))
        if isinstance(o, (BaseEstimator, FittedPipeline)):
            claim(type(o))
            for v in vars(o).values():
                walk(v)
        elif isinstance(o, (list, tuple)):
            for v in o:
                walk(v)
        elif isinstance(o, dict):
            for v in o.values():
                walk(v)

    walk(obj)


@dataclass
class Runtime:
    """A place to compute delayed objects.

    ``compute(*delayed)`` returns their values, computed again if a cluster
    loses a worker meanwhile (:func:`retry_lost`); ``compute_once`` is the
    same without the retries, for callers that resume a computation their
    own way (the featurization resubmits only the blocks not yet written);
    ``numba_threads`` is the share
    of numba threads a task may use (the thread plan, :mod:`streamcov._config`);
    ``parallelism`` is how many tasks run at once (threads or worker threads);
    ``info`` describes it for result lines.
    """

    compute: Callable
    info: dict
    numba_threads: int
    parallelism: int
    client: object = field(default=None, repr=False)
    compute_once: Callable | None = field(default=None, repr=False)
    _shared: list = field(default_factory=list, repr=False)   # (weak reference to the future, key, object)

    def __post_init__(self):
        if self.compute_once is None:
            self.compute_once = self.compute

    def share(self, obj):
        """``obj`` for use as an argument of many tasks, sent to the workers once.

        On a cluster a large object (a fitted feature map of 100 MB) embedded in
        every task would travel with each; it is scattered to every worker
        instead, as one future under a key of its own. On threads it is simply a
        delayed constant.
        """
        import dask

        register_tokens(obj)   # its classes tokenized by their state wherever they appear in a graph
        if self.client is None:
            return dask.delayed(obj, pure=True)
        # a key per call, not the content's hash: sharing an object equal to one whose future was just dropped
        # reused the key that the scheduler was releasing, and the tasks waiting on it hung
        key = f"streamcov-shared-{type(obj).__name__}-{uuid.uuid4().hex}"
        future = scatter_to_all(self.client, key, obj)
        # kept only while its future is: a learner shares a model per pass, and those of passes gone are
        # neither held nor sent again
        self._shared = [(ref, k, o) for ref, k, o in self._shared if ref() is not None]
        self._shared.append((weakref.ref(future), key, obj))
        return future

    def reshare(self):
        """Scatter every shared object still in use again, under its key: after a worker is lost, data it
        alone held (scattered before the other workers had joined) is back, so the same graph can be
        submitted again. Nothing on threads."""
        if self.client is not None:
            for ref, key, obj in self._shared:
                if ref() is not None:
                    scatter_to_all(self.client, key, obj)


def _spec_clusters():
    """distributed's set of the clusters its exit hook closes (empty where it has none)."""
    from distributed.deploy import spec

    return getattr(getattr(spec, "SpecCluster", None), "_instances", ())


def _forget_half_made(before) -> None:
    """The clusters made since ``before`` (a start interrupted by a signal held :data:`START_HOLD` seconds: its
    workers killed, distributed before 2026.7 never finished it) left out of distributed's exit hook, which
    failed on them with a 20-line traceback ("AssertionError: Status.init") under the command's line, and their
    IO loops stopped. The process ends next; its workers are gone."""
    instances = _spec_clusters()
    for cluster in [c for c in list(instances) if c not in before]:
        instances.discard(cluster)
        with contextlib.suppress(Exception):
            cluster._loop_runner.stop()


# seconds a Ctrl-C, SIGTERM or SIGHUP is held while a LocalCluster starts (_signal_held's at_most): enough for the
# start to end (a few seconds) once the signal came, not forever where it never ends (distributed before 2026.7)
START_HOLD = 10.0

PLUGIN_NAME = "streamcov-thread-plan"
WORKER_PRELOAD = "streamcov.stream._worker_preload"   # what the LocalCluster's workers run first (SIGINT ignored)


def _thread_plan_plugin():
    """A worker plugin that applies the thread plan to every worker, including those that join or are
    restarted later: zarr's decoding pool sized to the worker's threads (workers own their cores; zarr makes
    the pool on first use, so a worker that has already decoded keeps its pool).

    Its name is the run's own (two runs on one cluster each remove their own). Its class is pickled by value
    and its methods use zarr alone: a run killed before it could unregister the plugin left it on the
    scheduler, and a worker started later from an environment without streamcov failed to start on it, left
    closing, holding every later client of that cluster."""
    import uuid

    from distributed import WorkerPlugin

    class ThreadPlan(WorkerPlugin):
        name = f"{PLUGIN_NAME}-{uuid.uuid4().hex[:12]}"

        def setup(self, worker):
            import zarr

            self.previous = zarr.config.get("threading.max_workers")
            zarr.config.set({"threading.max_workers": max(1, int(worker.state.nthreads))})

        def teardown(self, worker):
            # unregistered when the run ends: a user's cluster (its in-process workers share the user's
            # process and zarr config) is left as it was found
            import zarr

            zarr.config.set({"threading.max_workers": getattr(self, "previous", None)})

    return ThreadPlan()


SETTLE_PLUGIN_NAME = "streamcov-settle"
# what the engine's tasks run on a worker: featurization and the learners' passes
WORKER_MODULES = ("streamcov.stream.featurize", "streamcov.stream.lbfgs", "streamcov.stream.sgd")


def _settle_plugin():
    """A worker plugin for the LocalClusters streamcov starts (never a user's cluster): each worker imports
    the modules its tasks run, then moves the objects it holds after those imports (about 200,000: dask,
    numpy, numba, scikit-learn, streamcov) out of the garbage collector's reach (``gc.freeze``).

    Why: a full collection scans every tracked object; on a worker that holds them it pauses the worker's task
    for 140-160 ms (measured by ``gc.callbacks`` during an L-BFGS fit on the generated store: one such pause per
    worker and fit, each stalling the pass it fell in while the other workers waited). Frozen objects are
    never scanned; objects made later (a fit's own) are collected as before. A frozen object is never
    collected, so only what the worker holds after a collection is frozen: its imports, which live as
    long as the worker process does.
    """
    from distributed import WorkerPlugin

    class Settle(WorkerPlugin):
        name = SETTLE_PLUGIN_NAME

        def setup(self, worker):
            import gc
            import importlib

            # by name: modules above this one (they import it), loaded on the worker, not used here
            for name in WORKER_MODULES:
                importlib.import_module(name)
            gc.collect()
            gc.freeze()

    return Settle()


def task_path(path) -> str:
    """A path that goes into a task: absolute. A cluster's workers do not run in this process's working
    directory, so a relative store or output path named another folder there (or none: a FileNotFoundError
    traceback, or a store blamed for damage it does not have)."""
    return os.path.abspath(os.fspath(path))


class _ContextPool(ThreadPoolExecutor):
    """A thread pool whose tasks run in a copy of the submitter's context, as Dask's own pool runs them: what
    the caller set in context variables (the command whose flags messages name, linalg.gamma_named) holds in
    the tasks."""

    def submit(self, fn, /, *args, **kwargs):
        return super().submit(contextvars.copy_context().run, fn, *args, **kwargs)


@contextlib.contextmanager
def dask_runtime(scheduler: str = "threads", workers: int | None = None):
    """Yield a :class:`Runtime`.

    ``scheduler``: ``threads`` (embedded default), ``synchronous``
    (debugging), ``local-cluster`` (a LocalCluster of ``workers``
    single-threaded worker processes) or a scheduler address
    ``tcp://host:port``. ``workers`` is the thread count on ``threads``.
    """
    import dask
    from .._config import blas_threads

    if scheduler in ("threads", "synchronous"):
        import dataclasses

        import numba

        # synchronous: one task at a time, whose kernels take every core (they took one)
        plan = thread_plan(workers if scheduler == "threads" else 1)
        # numba's count as the caller has it (NUMBA_NUM_THREADS, or a notebook's numba.set_num_threads) bounds
        # the kernels' share: it was raised to the plan's without a word, and reported though numba capped it
        if numba.get_num_threads() < plan.numba_threads:
            plan = dataclasses.replace(plan, numba_threads=numba.get_num_threads())
        n = plan.dask_threads if scheduler == "threads" else 1
        if scheduler == "threads" and workers is not None and int(workers) > n:
            import warnings

            # threads beyond the cores only contend (numba and BLAS are planned per core): said, not silently cut
            warnings.warn(f"{int(workers)} threads asked for (--workers, dask.workers) and {plan.cores} cores "
                          f"available: {n} threads used", stacklevel=3)
        info = {"scheduler": scheduler, **plan.as_dict(), "dask_threads": n}

        if scheduler == "synchronous":
            def compute(*objs):
                with blas_threads(plan.blas_threads):
                    return dask.compute(*objs, scheduler=scheduler)

            yield Runtime(compute, info, plan.numba_threads, n)
            return
        # the runtime's own pool: on Ctrl-C (or any error) dask stops submitting, but the tasks already running
        # go on writing their chunks; the pool is shut down here, waiting for them, before the caller's lock on
        # the store or output folder is released (a run started in that moment saw its chunks change under it)
        pool = _ContextPool(n, thread_name_prefix="streamcov-dask")

        def compute(*objs):
            with blas_threads(plan.blas_threads):
                return dask.compute(*objs, scheduler=scheduler, pool=pool)

        try:
            yield Runtime(compute, info, plan.numba_threads, n)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return

    from distributed import Client, LocalCluster

    from .._config import blas_threads_kept

    with blas_threads_kept():   # in-process workers share the user's BLAS: left as it was found
        yield from _cluster_runtime(scheduler, workers, Client, LocalCluster)


# seconds beyond Dask's connect timeout that creating a Client may take before the run gives up: Client waits
# forever on a port that accepts the connection and then says nothing (a dashboard's 8787, another server)
CONNECT_GRACE = 10.0
#: seconds a scheduler address is given to have a worker: one with none took the work and held it, without
#: a word, for as long as the run was left to wait. The environment variable STREAMCOV_WORKER_WAIT sets
#: another (a cluster that starts its workers once there is work, or through a batch queue, needs longer)
WORKER_WAIT = 30.0
WORKER_WAIT_ENV = "STREAMCOV_WORKER_WAIT"


def _connect(Client, scheduler: str):
    """``Client(scheduler)``, given up (one line) when it has neither connected nor failed
    :data:`CONNECT_GRACE` seconds after Dask's connect timeout (``distributed.comm.timeouts.connect``),
    within which Dask itself retries a refused port and raises. The client is not made the process's
    default (streamcov hands it to every call), so one given up, or one a Ctrl-C left connecting, takes
    no dask work of the user's; it is closed whenever it connects after all."""
    import threading

    import dask
    from dask.utils import parse_timedelta

    box: dict = {}
    lock = threading.Lock()

    def connect():
        try:
            security = _SECURITY.get(scheduler)
            client = (Client(scheduler, set_as_default=False) if security is None else
                      Client(scheduler, set_as_default=False, security=security))
        except BaseException as exc:   # noqa: BLE001 - handed to the caller's thread as it was raised
            _close_half_made(Client, exc)
            box["error"] = exc
            return
        with lock:
            if box.get("abandoned"):
                client.close()
            else:
                box["client"] = client

    wait = _connect_timeout(dask, parse_timedelta)
    if scheduler.startswith(("tcp://", "tls://")):
        answered = _handshake(scheduler, wait, wait + CONNECT_GRACE)
        if not answered:
            raise _no_answer(scheduler, wait)
    t = threading.Thread(target=connect, name="streamcov-connect", daemon=True)
    t.start()
    try:
        t.join(wait + CONNECT_GRACE)
    finally:
        with lock:
            if t.is_alive() or "client" not in box:
                box["abandoned"] = True
    if t.is_alive():
        raise _no_answer(scheduler, wait)
    if "error" in box:
        raise box["error"]
    return box["client"]


def _no_answer(scheduler: str, wait: float) -> StreamcovError:
    return StreamcovError(f"{arg('scheduler', scheduler)}: something accepted the connection but no Dask "
                          f"scheduler answered in {wait + CONNECT_GRACE:g} s; give the scheduler's address (its "
                          f"default port is 8786; 8787 is its dashboard)")


def _handshake(scheduler: str, wait: float, limit: float) -> bool:
    """Whether the Dask server at the tcp:// or tls:// address ``scheduler`` completes Dask's handshake within
    ``limit`` seconds (False: something accepted the connection and said nothing); Dask's own error of a
    refused or timed-out connection (``wait`` seconds of retries, an OSError) is raised as ``Client`` raises it.

    ``Client`` waits forever for the handshake of a port that accepts and says nothing (a dashboard's 8787),
    and its IO loop thread and descriptors then stay for the life of the process: a notebook retrying the
    address gained one of each per try. This probe runs in an event loop of its own, in a thread (a notebook's
    thread has a running loop), and cancels the handshake it gives up on, so nothing of it stays. Anything
    but an OSError (a malformed address, tls:// without its settings) is left to ``Client``, which says it."""
    import asyncio

    from distributed.comm import connect
    from distributed.security import Security

    security = _SECURITY.get(scheduler) or Security()

    async def probe() -> bool:
        task = asyncio.ensure_future(connect(scheduler, timeout=wait, **security.get_connection_args("client")))
        done, _ = await asyncio.wait({task}, timeout=limit)
        if not done:
            task.cancel()
            return False
        await task.result().close()   # raises Dask's error of the connection, if it failed
        return True

    done = _in_thread(lambda: asyncio.run(probe()), None, "streamcov-probe")
    exc = done.get("error")
    if exc is None:
        return done["result"]
    if isinstance(exc, OSError) or not isinstance(exc, Exception):
        raise exc
    return True   # Client(...) raises it again, in the words its callers expect


def worker_wait() -> float:
    """Seconds to wait for a worker of a scheduler address: :data:`WORKER_WAIT`, or the environment's
    ``STREAMCOV_WORKER_WAIT`` (a number of seconds > 0), refused in one line when it is not one."""
    raw = os.environ.get(WORKER_WAIT_ENV)
    if raw is None:
        return WORKER_WAIT
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{WORKER_WAIT_ENV}={raw!r}: expected the seconds to wait for a worker of a scheduler "
                          f"address (a number > 0), or leave it unset ({WORKER_WAIT:g} s)")
    return value


def _wait_for_a_worker(client, scheduler: str) -> None:
    """Refuse, in one line, a scheduler that has no worker :func:`worker_wait` seconds after connecting."""
    wait = worker_wait()
    if client.nthreads():
        return
    try:
        client.wait_for_workers(1, timeout=wait)
    except TimeoutError:   # asyncio.TimeoutError too (one class since Python 3.11)
        raise StreamcovError(f"{arg('scheduler', scheduler)}: the scheduler there has no workers (waited "
                             f"{wait:g} s); start some with `dask worker {scheduler}`, or give them longer with "
                             f"{WORKER_WAIT_ENV}=SECONDS, or use {arg('scheduler', 'local-cluster')} or "
                             f"{arg('scheduler', 'threads')}") from None


def _dask_setting(key: str, raw) -> str:
    """Dask's setting ``key`` with its value ``raw``, as a user sets it: its environment variable, or a Dask
    configuration file."""
    env = "DASK_" + key.upper().replace(".", "__").replace("-", "_")
    return f"Dask's setting {key} = {raw!r} (from the environment variable {env} or a Dask configuration file)"


def _dask_duration(dask, parse_timedelta, key: str) -> float:
    """Dask's duration setting ``key`` in seconds, refused in one line when it is not a duration: set in the
    environment (``DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=abc``) or in a Dask configuration file, it was a
    KeyError traceback (of the client, or of a LocalCluster's start)."""
    raw = dask.config.get(key, None)
    try:
        wait = parse_timedelta(raw, default="seconds")
    except (KeyError, ValueError, TypeError, IndexError):   # IndexError: an empty text
        wait = None
    if wait is None or not math.isfinite(wait) or wait < 0:
        raise ConfigError(_dask_setting(key, raw) + ": expected a duration such as 30s; correct or remove it")
    return wait


def _connect_timeout(dask, parse_timedelta) -> float:
    """Dask's connect timeout in seconds (``distributed.comm.timeouts.connect``), checked (:func:`_dask_duration`)."""
    return _dask_duration(dask, parse_timedelta, "distributed.comm.timeouts.connect")


#: Dask's settings of a worker's memory: the fractions of its limit at which it spills, pauses, is restarted
WORKER_MEMORY_FRACTIONS = ("target", "spill", "pause", "terminate")
# their defaults in distributed's own configuration file (distributed.yaml), named in advice
_DASK_MEMORY_DEFAULTS = {"target": 0.6, "spill": 0.7, "pause": 0.8, "terminate": 0.95}


def _check_local_cluster_settings(dask, n: int) -> None:
    """Refuse, in one line, Dask's settings that a LocalCluster of ``n`` workers cannot start or run with: a
    timeout that is not a duration (a KeyError traceback), a worker memory fraction that is neither a number in
    (0, 1] nor false (``abc`` was multiplied by the memory limit: "out of memory", the wrong cause), a pause or
    restart fraction below what an idle worker holds (:data:`WORKER_IDLE_BYTES` of the 1/n of the memory Dask
    gives it: ``pause = 0.0001`` paused every worker at once, and the run waited forever), a temporary directory
    that cannot be written ("Cluster failed to start")."""
    from pathlib import Path

    from dask.utils import format_bytes, parse_timedelta

    from .._config import _writable, total_memory

    for key in ("distributed.comm.timeouts.connect", "distributed.comm.timeouts.tcp"):
        _dask_duration(dask, parse_timedelta, key)
    share = total_memory(soft=True) / max(1, int(n))   # what Dask gives each worker
    for name in WORKER_MEMORY_FRACTIONS:
        key = f"distributed.worker.memory.{name}"
        raw = dask.config.get(key, False)
        ok = raw is False or raw is None or (isinstance(raw, (int, float)) and not isinstance(raw, bool)
                                             and 0 < raw <= 1)
        if not ok:
            raise ConfigError(_dask_setting(key, raw) + ": expected a fraction of the worker's memory "
                              "limit (a number above 0 and at most 1) or false; correct or remove it")
        if name in ("pause", "terminate") and raw not in (False, None) and raw * share < WORKER_IDLE_BYTES:
            raise ConfigError(_dask_setting(key, raw) + f": each of the {int(n)} workers would "
                              f"{'pause' if name == 'pause' else 'be restarted'} above {format_bytes(raw * share)} of "
                              f"its {format_bytes(share)}, less than the {format_bytes(WORKER_IDLE_BYTES)} a worker "
                              f"holds before any task, so no task would run; give more than "
                              f"{math.ceil(WORKER_IDLE_BYTES / share * 100) / 100:g} (Dask's default is "
                              f"{_DASK_MEMORY_DEFAULTS[name]:g}), or false, or fewer workers")
    folder = dask.config.get("temporary-directory", None)
    if folder and not _writable(Path(folder)):
        raise ConfigError(_dask_setting("temporary-directory", folder) + ": the workers cannot write "
                          "their files there; give a folder this user can write, or remove it")


def _close_half_made(Client, exc: BaseException) -> None:
    """Close the client that a ``Client(...)`` raising ``exc`` left half made, found in the frames of the
    traceback, and stop its IO loop. When it raises anything but a refused connection (an address it cannot
    parse, tls:// without its settings, ucx:// without ucx, inproc:// naming no scheduler) the client's loop
    was left running, and its ``__del__`` waited 60 s to close it, then printed a traceback, after the
    command's one line. When the connection is refused or times out, Dask marks the client closed itself, so
    ``close()`` returns at once and leaves the loop's thread running with 3 descriptors: one more of each per
    failed call in a notebook that retries an address."""
    tb = exc.__traceback__
    while tb is not None:
        client = tb.tb_frame.f_locals.get("self")
        if isinstance(client, Client):
            for stop in (client.close, getattr(getattr(client, "_loop_runner", None), "stop", None)):
                try:
                    if stop is not None:
                        stop()   # LoopRunner.stop returns at once when close() stopped it already
                except Exception:   # noqa: BLE001 - the error that matters is the one that stopped the connection
                    pass
            return
        tb = tb.tb_next


def _check_workers(client, wait: float) -> None:
    """Every worker imports the client's streamcov, and its numba environment
    (:func:`~streamcov._config.numba_environment_problem`) can run the kernels; refused in one line naming the
    first worker at fault.

    A worker that cannot import streamcov (another environment, a job script without the package) failed the
    numba check itself with an "internal error" traceback; one of another version runs other kernels on the
    same keys. The import is asked by ``eval`` of a builtin, which a worker unpickles without streamcov. The
    client's own numba check says nothing of the workers' (another machine, a job script's variables, the
    nannies' ``pre-spawn-environ``), and a layer a worker cannot start failed the first kernel of the run there,
    after the store was written. Only workers the scheduler lists as running are asked, and for ``wait``
    seconds: a worker left closing (one whose start failed) or stopped held the run forever."""
    from .. import __version__
    from .._config import numba_environment_problem

    answers = _ask_workers(client, wait, eval, "__import__('streamcov').__version__", on_error="return")
    lost = [a for a in answers.values() if isinstance(a, OSError)]   # the broadcast's own errors (CommClosedError too)
    if lost:
        raise _lost_in_check(lost[0])
    wrong = {w: a for w, a in answers.items() if a != __version__}
    if wrong:
        worker, answer = min(wrong.items(), key=lambda item: item[0])
        first = (str(answer).splitlines() or [''])[0][:120]
        said = (f"cannot import streamcov ({answer.__class__.__name__}: {first})" if isinstance(answer, ImportError)
                else f"failed to import streamcov ({answer.__class__.__name__}: {first})"
                if isinstance(answer, BaseException) else f"runs streamcov {answer!r}, this command {__version__!r}")
        others = f" (and {len(wrong) - 1} other worker(s))" if len(wrong) > 1 else ""
        raise ConfigError(f"Dask worker {worker}{others}: {said}; install this streamcov in the workers' "
                          f"environment and restart them")
    problems = {w: p for w, p in _ask_workers(client, wait, numba_environment_problem).items() if p is not None}
    if problems:
        worker, problem = min(problems.items())
        others = f" (and {len(problems) - 1} other worker(s))" if len(problems) > 1 else ""
        raise ConfigError(f"Dask worker {worker}{others}: {problem}")


#: seconds the end of a run on a user's cluster waits for its worker plugin to be removed
UNREGISTER_WAIT = 10.0


def _in_thread(call, seconds: float | None, name: str) -> dict | None:
    """``call()`` in a daemon thread of its own, waited for ``seconds`` (None: until it returns):
    ``{"result": ...}`` or ``{"error": what it raised}``, or None when it is still running then, given up (Dask
    calls with no timeout of their own, which a worker or scheduler that does not answer held forever)."""
    box: dict = {}

    def target():
        try:
            box["result"] = call()
        except BaseException as exc:   # noqa: BLE001 - handed to the caller's thread
            box["error"] = exc

    t = threading.Thread(target=target, name=name, daemon=True)
    t.start()
    t.join(seconds)
    return None if t.is_alive() else box


def _ask_workers(client, wait: float, function, *args, **kwargs) -> dict:
    """``client.run(function, *args)`` on the workers the scheduler lists as running, given up after ``wait``
    seconds (``Client.run`` has no timeout: a worker that does not answer held it forever)."""
    from distributed.comm.core import CommClosedError

    # none running (every worker paused): nothing to ask; the run's waits say it (await_with_workers)
    running = [w for w, info in (_scheduler_workers(client) or {}).items()
               if info.get("status", "running") == "running"]
    done = _in_thread(lambda: client.run(function, *args, workers=running, **kwargs), wait, "streamcov-ask-workers")
    if done is None:
        raise StreamcovError(f"the Dask workers {', '.join(sorted(running)[:3])}{' ...' if len(running) > 3 else ''} "
                             f"did not answer the run's check of their environment in {wait:g} s (a worker stopped, "
                             f"or left closing by a failed start); restart them, or give them longer with "
                             f"{WORKER_WAIT_ENV}=SECONDS")
    exc = done.get("error")
    if isinstance(exc, (CommClosedError, OSError)):   # a worker lost as it answered: the cluster's doing, not a bug
        raise _lost_in_check(exc) from None
    if exc is not None:
        raise exc
    return done["result"]


def _lost_in_check(exc: BaseException) -> StreamcovError:
    said = (str(exc).splitlines() or [""])[0][:160]
    return StreamcovError(f"a Dask worker was lost while the run checked the workers' environment "
                          f"({exc.__class__.__name__}{': ' + said if said else ''}); check the cluster's "
                          f"workers (their logs, their memory) and run the command again")


def _restore_environ(saved: dict) -> None:
    """Put the environment variables of ``saved`` back as they were (None: not set)."""
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        elif os.environ.get(key) != value:
            os.environ[key] = value


@contextlib.contextmanager
def workers_ignore_sigint():
    """SIGINT ignored while worker processes are spawned, which inherit that (Python installs its KeyboardInterrupt
    handler only where SIGINT is not ignored): a terminal's Ctrl-C reaches the whole process group, and every
    worker printed a KeyboardInterrupt traceback under the command's one line; the command stops its workers
    itself. A Ctrl-C while they are spawned is lost: keep it short (loky's workers of ``study --jobs``: 30 ms).
    Only from the main thread, where signals are handled."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:   # None: a handler set outside Python (none to put back but the default)
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)


def resource_trackers_outlive_hangup(loky: bool = False) -> None:
    """multiprocessing's resource tracker (and, with ``loky``, joblib's loky one) started, if it is not running
    yet, with SIGHUP blocked, which it inherits. Each ignores SIGINT and SIGTERM, not SIGHUP: a hangup sent to
    the command's process group (a closed terminal or SSH session) killed it, the command's cleanup relaunched
    it ("resource_tracker: process died unexpectedly") and each semaphore or memory-mapped folder released then
    printed a KeyError traceback in it (the local cluster's; ``study --jobs``'s loky workers'). A hangup that
    arrives meanwhile waits in this process for the unblock, and is not lost."""
    if not hasattr(signal, "SIGHUP") or not hasattr(signal, "pthread_sigmask"):
        return
    from multiprocessing import resource_tracker

    trackers = [resource_tracker.ensure_running]
    if loky:
        from joblib.externals.loky.backend import resource_tracker as loky_tracker

        trackers.append(loky_tracker.ensure_running)
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
    try:
        for start in trackers:
            start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextlib.contextmanager
def _signal_held(signum, held: list, again=None, at_most: float | None = None):
    """A signal that arrives while a LocalCluster and its client are made recorded in ``held``, not raised
    inside Dask's constructor (Ctrl-C's KeyboardInterrupt, the command's Terminated for SIGTERM: see
    :func:`streamcov.cli._sigterm_interrupts`), which left a half-made cluster that Dask's exit hook then failed
    to close: a 28-line traceback under the command's line. The caller delivers it again once the cluster is in
    the hands of its cleanup (:func:`deliver_held`); so does a start that fails with the signal held (a SIGTERM
    to the whole process group kills the nannies' workers too, and the cluster fails to start): the command ends
    as interrupted or terminated, not with Dask's failure. ``again(first)``: what a further one does while one is
    held (SIGTERM's echo rule, :func:`streamcov._config.sigterm_again`), called with the time the first was held
    and the signal. ``held`` records ``(time.monotonic(), signal)`` pairs, so that one list may hold several
    signals (:func:`_sigterm_held`). ``at_most`` (seconds): a signal held that long is delivered where the main
    thread is, inside Dask's constructor: distributed before 2026.7 never returned from a LocalCluster's start
    whose workers a SIGTERM or SIGHUP to the process group had killed, and the command, holding the signal,
    waited forever. Only a handler of Python's, in the main thread, is replaced; with another the caller
    decides."""
    previous = signal.getsignal(signum) if threading.current_thread() is threading.main_thread() else None
    if not callable(previous):
        yield
        return
    main = threading.get_ident()
    timers: list = []

    def hold(signo, frame):
        if held and at_most is not None and time.monotonic() - held[0][0] >= at_most:
            # held too long (the watchdog's own signal, or a later one): delivered now, where the main thread is
            signal.signal(signum, previous)
            held.clear()
            previous(signo, frame)
            return
        if held and again is not None:
            again(held[0][0], signo)
        held.append((time.monotonic(), signo))
        if at_most is not None and not timers:
            timer = threading.Timer(at_most, signal.pthread_kill, (main, signo))
            timer.daemon = True
            timers.append(timer)
            timer.start()

    signal.signal(signum, hold)
    try:
        yield
    except BaseException:
        for timer in timers:
            timer.cancel()
        signal.signal(signum, previous)
        if held and held[0][1] == signum:   # (another signal's hold, still in place, delivers its own)
            deliver_held(held)
        raise
    finally:
        for timer in timers:
            timer.cancel()
        signal.signal(signum, previous)


@contextlib.contextmanager
def _sigint_held(held: list, at_most: float | None = None):
    """A Ctrl-C while a LocalCluster and its client are made held in ``held`` (:func:`_signal_held`). SIGINT used
    to be ignored then, so that the workers inherited that; the Ctrl-C was lost and the run went on. The workers
    now ignore it themselves (:data:`WORKER_PRELOAD`). Where SIGINT has no handler of Python's (the default
    action, in the main thread), it is ignored while the workers start, as before."""
    main = threading.current_thread() is threading.main_thread()
    if main and not callable(signal.getsignal(signal.SIGINT)):
        with workers_ignore_sigint():
            yield
        return
    with _signal_held(signal.SIGINT, held, at_most=at_most):
        yield


@contextlib.contextmanager
def _sigterm_held(held: list, at_most: float | None = None):
    """A SIGTERM or SIGHUP (the command's :class:`streamcov.cli.Terminated`) while a LocalCluster and its client
    are made, or a fitted map is scattered, held in ``held`` (:func:`_signal_held`); a further one within a
    second is its echo (GNU timeout sends two; a closed terminal's hangup comes from the kernel and the shell),
    a later one ends the process at once. With the default action the process ends at once, as it would have;
    with SIGHUP ignored (``nohup``) nothing is held."""
    with contextlib.ExitStack() as stack:
        for signum in ending_signals():
            stack.enter_context(_signal_held(signum, held, sigterm_again, at_most))
        yield


def deliver_held(held: list) -> None:
    """The first signal :func:`_sigterm_held` held (or the SIGINT of :func:`_sigint_held`), if any, delivered
    again to this thread's handler (the command's, Python's KeyboardInterrupt), which raises at the next bytecode
    (waited for at most a second)."""
    if held:
        signum = held[0][1]
        held.clear()   # once: the failure path and the cleanup both deliver
        if hasattr(signal, "pthread_kill"):   # to this thread: its sleep below ends at once
            signal.pthread_kill(threading.get_ident(), signum)
        else:
            os.kill(os.getpid(), signum)
        time.sleep(1.0)


def _worker_preloads(dask) -> tuple[list, list]:
    """``(preload, preload_argv)`` of a LocalCluster's workers: the user's (Dask's configuration: one name or a
    list, and their arguments, one list for all or one per preload) and :data:`WORKER_PRELOAD`, which takes none.
    A name given alone was spread into its letters, and one list per preload lacked ours: the workers failed to
    start."""
    user = dask.config.get("distributed.worker.preload", None) or []
    user = [user] if isinstance(user, str) else list(user)
    argv = dask.config.get("distributed.worker.preload-argv", None) or []
    if isinstance(argv, str):
        argv = [argv]
    argv = list(argv)
    if argv and isinstance(argv[0], (list, tuple)):   # one list per preload: ours takes none
        argv = [*map(list, argv), []]
    return [*user, WORKER_PRELOAD], argv


_LOGS_HELD = {"clusters": 0, "levels": {}}   # local clusters running in this process, the loggers' levels before
_LOGS_LOCK = threading.Lock()


def _hold_distributed_logs() -> bool:
    """The ``distributed`` and ``asyncio`` loggers held at CRITICAL while a LocalCluster of this process runs
    (the first of overlapping ones, in a notebook's threads, saves their levels; the last puts them back:
    :func:`_release_distributed_logs`). ``silence_logs`` quiets only the stream handlers Dask adds to the
    ``distributed`` logger, which it adds only when the root logger has none: in a session whose user
    configured logging (``logging.basicConfig``), the in-process scheduler's and nannies' INFO lines (about 35
    a run) went up to the user's handlers. ``asyncio`` logs the in-process scheduler's handlers that failed as
    the cluster closed under them (a scatter to a worker already removed, on Ctrl-C): "Task exception was never
    retrieved" and a traceback under the command's one line."""
    with _LOGS_LOCK:
        if _LOGS_HELD["clusters"] == 0:
            _LOGS_HELD["levels"] = {name: logging.getLogger(name).level for name in ("distributed", "asyncio")}
            for name in _LOGS_HELD["levels"]:
                logging.getLogger(name).setLevel(logging.CRITICAL)
        _LOGS_HELD["clusters"] += 1
    return True


def _release_distributed_logs(held: bool) -> None:
    if not held:
        return
    import gc

    # a failed task sits in a reference cycle with its traceback: it says "never retrieved" when the cycle is
    # collected, at any later moment; collected now, while the loggers are held
    gc.collect()
    with _LOGS_LOCK:
        _LOGS_HELD["clusters"] -= 1
        if _LOGS_HELD["clusters"] == 0:
            for name, level in _LOGS_HELD["levels"].items():
                logging.getLogger(name).setLevel(level)


def _cluster_runtime(scheduler, workers, Client, LocalCluster):
    """:func:`dask_runtime` on a LocalCluster or a scheduler address (a generator: one yield)."""
    import dask

    cluster = None
    plan = None   # the thread plan's worker plugin, once registered
    environ = None
    logs_held = False   # the loggers held for a local cluster (_hold_distributed_logs)
    held: list = []   # a SIGTERM or SIGHUP received while the cluster was made (_sigterm_held)
    held_int: list = []   # a Ctrl-C received then (_sigint_held)
    if scheduler == "local-cluster":
        n = local_cluster_size(workers)
        _check_local_cluster_settings(dask, n)
        if n > available_cores():
            import warnings

            # processes beyond the cores only contend (each runs its kernels on one thread): said, as the threads
            # scheduler says it (which cuts the count; worker processes may be asked for their memory, so not cut)
            warnings.warn(f"{n} worker processes asked for (--workers, dask.workers) and {available_cores()} cores "
                          f"available: they take turns on the cores", stacklevel=3)
        spawn = worker_spawn_environ()
        # a nanny sets these in the environment of the process that hosts it (this one) before it spawns its
        # worker, and leaves them: put back as they were once the workers are up (and after the cluster, since
        # a nanny restarting a worker sets them again), so that the caller's later subprocesses do not inherit
        # the workers' malloc policy
        environ = {k: os.environ.get(k) for k in (*spawn, "PYTHONHASHSEED")}
        logs_held = _hold_distributed_logs()
        # the malloc policy of _config.WORKER_MALLOC_ENV, read by the nannies when they spawn the workers; also
        # set here, since a nanny lets a variable already in this environment win over its pre-spawn-environ
        # (and an earlier nanny of Dask's own defaults leaves MALLOC_TRIM_THRESHOLD_=65536 there)
        try:
            os.environ.update({k: str(v) for k, v in WORKER_MALLOC_ENV.items()})
            resource_trackers_outlive_hangup()   # before the cluster's processes start it
            with dask.config.set({"distributed.nanny.pre-spawn-environ": spawn}), \
                    _sigint_held(held_int, START_HOLD), _sigterm_held(held, START_HOLD):
                # CRITICAL: a task's error is said once, by the command's line; at ERROR every worker also logged
                # "Compute Failed" with its traceback above it
                # the scheduler's HTTP server on a free port of the loopback interface, no dashboard: on port 8787
                # (the default it took with dashboard_address=None) a second cluster of the machine warned "Port
                # 8787 is already in use"; a port without a host would listen on every interface
                try:
                    # the preload in the workers' options, not the configuration: a worker started later (scale)
                    # runs it too; a preload of the user's configuration kept
                    preload, preload_argv = _worker_preloads(dask)
                    before = set(_spec_clusters())
                    cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                           dashboard_address="127.0.0.1:0", scheduler_kwargs={"dashboard": False},
                                           silence_logs=logging.CRITICAL, preload=preload,
                                           preload_argv=preload_argv)
                except KeyboardInterrupt:   # a signal held START_HOLD seconds, delivered inside the start
                    _forget_half_made(before)
                    raise
                except (RuntimeError, OSError, TimeoutError) as exc:   # "Cluster failed to start": say why, once
                    cause = exc.__cause__ or exc.__context__ or exc
                    said = " ".join(str(cause).split())[:200] or cause.__class__.__name__
                    # (the count may come from --workers, dask.workers or the cores: said as a count)
                    raise StreamcovError(f"Dask's local cluster of {n} worker processes failed to start "
                                         f"({cause.__class__.__name__}: {said}); check Dask's settings (DASK_* "
                                         f"variables, Dask configuration files) and the free memory, or use fewer "
                                         f"workers or the threads scheduler") from None
                try:
                    client = Client(cluster)
                except BaseException:
                    cluster.close()
                    raise
        except BaseException:
            _release_distributed_logs(logs_held)
            raise
        finally:
            _restore_environ(environ)
    elif scheduler.startswith(ADDRESS_PROTOCOLS):
        try:
            client = _connect(Client, scheduler)
        except StreamcovError:   # said in its own words (Dask's configuration)
            raise
        except (OSError, TimeoutError) as exc:
            raise StreamcovError(f"{arg('scheduler', scheduler)}: no Dask scheduler answers there "
                                 f"({exc.__class__.__name__}); start one with `dask scheduler` or "
                                 f"use {arg('scheduler', 'threads')}") from None
        except (TypeError, ValueError, ImportError) as exc:   # tls:// without Dask's TLS settings, ucx:// without
            # ucx, inproc:// naming no scheduler of this process (from a command line it cannot)
            need = ("the TLS settings of Dask's configuration (distributed.comm.tls: the CA file and the client's "
                    "certificate and key)" if scheduler.startswith("tls://") else
                    "a scheduler running inside this process (a notebook's Client(processes=False))"
                    if scheduler.startswith("inproc://") else "the package of that protocol")
            raise ConfigError(f"{arg('scheduler', scheduler)}: Dask cannot connect ({exc.__class__.__name__}: "
                              f"{str(exc).splitlines()[0][:160]}); this address needs {need}, or use a tcp:// "
                              f"address") from None
    else:
        raise ConfigError(f"unknown scheduler {scheduler!r}: use threads, synchronous, "
                          f"local-cluster or a scheduler address tcp://HOST:PORT")
    try:
        deliver_held(held)   # now that the cleanup below closes the cluster: the command's handler raises it
        deliver_held(held_int)
        if cluster is None:
            _wait_for_a_worker(client, scheduler)
        # a LocalCluster's workers are this machine's: the wait of an address (STREAMCOV_WORKER_WAIT) is not read
        _check_workers(client, worker_wait() if cluster is None else WORKER_WAIT)
        # a worker that dies as a plugin is registered broke the registration (CommClosedError): again
        plan = _thread_plan_plugin()
        retry_lost(client, lambda: client.register_plugin(plan))
        if cluster is not None:
            retry_lost(client, lambda: client.register_plugin(_settle_plugin()))
        nthreads = client.nthreads()
        # One numba thread per Dask thread on a user's cluster: its workers own their cores. The workers of a
        # LocalCluster streamcov starts (one thread each) share this machine's: fewer workers than cores give
        # each task's kernels the rest (--workers 1 on 8 cores ran every kernel on one)
        share = thread_plan(sum(nthreads.values())).numba_threads if cluster is not None else 1
        info = {"scheduler": scheduler if cluster is None else "local-cluster",
                "workers": len(nthreads), "threads_per_worker": sorted(set(nthreads.values())),
                "numba_threads": share}

        def compute_once(*objs):
            futures = client.compute(list(objs))
            try:
                await_with_workers(client, futures)   # a cluster left without workers: one line, not a hang
                return client.gather(futures)
            finally:
                # Released now, not when collected: a failed gather leaves them in a reference cycle with its
                # traceback, and while they live a resubmission of the same keys (retry_lost) is handed
                # their cancelled state back and fails at once with the first attempt's error.
                for f in futures:
                    if hasattr(f, "release"):   # a non-collection argument comes back as it was
                        f.release()

        def compute(*objs):
            return retry_lost(client, lambda: compute_once(*objs), rt.reshare)

        rt = Runtime(compute, info, share, max(1, sum(nthreads.values())), client, compute_once)
        # the client of an address is not the process's default (_connect): current while the run uses it,
        # for what finds its client as the default one (distributed.wait)
        with client.as_current():
            try:
                yield rt
            except StreamcovError:
                raise
            except Exception as exc:   # CommClosedError, OSError, "ConnectionPool is closed": whatever the call was
                # the client is "connecting" (or "closed") once its comm to the scheduler has gone: a slow or busy
                # scheduler keeps it "running", and a task's own error passes as it was
                if cluster is not None or client.status == "running":
                    raise
                raise StreamcovError(f"{arg('scheduler', scheduler)}: the run lost its Dask scheduler "
                                     f"({exc.__class__.__name__}); restart the scheduler and its workers, then run the "
                                     f"command again (what was written is reused)") from exc
    finally:
        try:
            if cluster is None and plan is not None:   # a user's cluster: the plugin goes (its teardown restores
                # the workers), in bounded time: a worker that does not answer held the unregistration forever
                # (its errors ignored: the run's own outcome is what the command says)
                _in_thread(lambda: client.unregister_worker_plugin(plan.name), UNREGISTER_WAIT, "streamcov-cleanup")
            client.close()
            if cluster is not None:
                cluster.close()
                _restore_environ(environ)
        finally:   # also when a close fails, or a second Ctrl-C interrupts it
            _release_distributed_logs(logs_held)
