"""One place for numba compile flags, the thread plan, and what the machine offers (memory, disk, cache).

numba, BLAS and Dask each start their own threads; left alone they multiply
(Dask threads x numba threads x BLAS threads) and oversubscribe the cores.
The plan below gives every level a share so the product never exceeds the
cores available to the process. zarr decodes chunks in a thread pool of its
own (cores + 4 threads by default): in this process it keeps that pool (a
read of consecutive blocks decodes them in parallel), on a Dask worker the
pool is sized to the worker's threads (a worker plugin of the run, ``stream.runtime``), since
workers own their cores.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from dataclasses import dataclass, asdict
from pathlib import Path

# fastmath without nnan/ninf: a NaN or inf in the input must survive to the
# finiteness checks instead of being assumed away by the compiler.
FASTMATH = set({"nsz", "arcp", "contract", "afn", "reassoc"})

# Whether kernels are cached on disk (numba's cache=True): False only where no folder can be written
# (plan_numba_cache, below).
CACHE = True
# Compile-time options shared by every kernel.
JIT_OPTS = dict(cache=True, nogil=True, fastmath=FASTMATH)
# Kernels whose accuracy rests on the order of operations (Cody-Waite range
# reduction: reassociation would fold its split constants back together), and
# those whose results must be the same bits in every process (scatter matrices,
# the low-rank log, the pixel features: a reassociated sum may be regrouped differently where a
# function is inlined into a caller compiled in this process and where it is
# called from another process's cache), get contraction to FMA only.
ORDERED_JIT_OPTS = dict(cache=True, nogil=True, fastmath={"contract"})


def _writable(folder) -> bool:
    """Whether a file can be made in ``folder`` (made if missing), as numba's cache locators test it."""
    import tempfile

    try:
        os.makedirs(folder, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
        return True
    except OSError:
        return False


def _private_folder(folder: Path) -> bool:
    """Make ``folder`` (mode 0700) or accept it only if it is this user's own and not a link (made writable by
    this user alone): numba loads its cache index with pickle, so a folder another user of a shared temporary
    directory made first (and filled) would run their code as this user."""
    import stat

    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return False
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    own = not hasattr(os, "getuid") or st.st_uid == os.getuid()
    if not (stat.S_ISDIR(st.st_mode) and own):   # another user's, or a link: not taken
        return False
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):   # this user's own, made by an earlier streamcov under its umask
        try:
            os.chmod(folder, 0o700)
        except OSError:
            return False
    return True


def _numba_user_cache() -> Path | None:
    """numba's user-wide cache folder (its ``AppDirs("numba").user_cache_dir`` on Linux), or None without a
    home (``HOME`` unset and a user the system does not name: a container's numeric user)."""
    try:
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "numba"
    except (RuntimeError, KeyError, OSError):
        return None


def numba_cache_dir() -> str:
    """Where numba keeps streamcov's compiled kernels: ``NUMBA_CACHE_DIR``, else the ``__pycache__`` folders of
    the package, else numba's user-wide cache folder."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return os.environ["NUMBA_CACHE_DIR"]
    here = Path(__file__).parent
    if _writable(here / "__pycache__"):
        return f"{here}/**/__pycache__"
    user = _numba_user_cache()
    return str(user) if CACHE and user is not None else "nowhere (kernels are compiled without a cache)"


#: how many names ``<prefix>-<uid>-<n>`` are tried after ``<prefix>-<uid>`` (:func:`private_temp_folder`)
SPARE_TEMP_NAMES = 3


def private_temp_folder(prefix: str, writable=_writable) -> Path | None:
    """``<temporary folder>/<prefix>-<uid>``, made this user's own (:func:`_private_folder`) and writable, or None
    where there is none: the place of a cache whose usual folder cannot be written (a read-only or missing home,
    as a container's numeric user has). Where another user of a shared temporary folder took that name first
    (a folder of theirs, a link), ``<prefix>-<uid>-1`` to ``-3`` are tried: the cache is still kept between
    commands, where it had been turned off without a word and every command compiled the kernels again."""
    import tempfile

    try:
        base = Path(tempfile.gettempdir()) / f"{prefix}-{os.getuid() if hasattr(os, 'getuid') else 0}"
    except OSError:   # no usable temporary folder: tempfile found none it can write
        return None
    for folder in (base, *(Path(f"{base}-{n}") for n in range(1, SPARE_TEMP_NAMES + 1))):
        if _private_folder(folder) and writable(folder):
            return folder
    return None


def plan_numba_cache(writable=_writable) -> str | None:
    """Give numba's cache a folder it can write when it has none, before any kernel is compiled; returns it, or
    None when numba's own places serve.

    numba caches a kernel beside its module (``__pycache__``), else in its user-wide folder. On a read-only
    install (a container's read-only root) with a read-only home, every kernel's ``cache=True`` raised
    "cannot cache function ...: no locator available" (a traceback). The cache then goes to
    ``<temporary folder>/streamcov-numba-<uid>`` (``NUMBA_CACHE_DIR``, inherited by the workers a run starts);
    where nothing can be written (no temporary folder, no home), kernels are compiled without a cache
    (:data:`JIT_OPTS`). A ``NUMBA_CACHE_DIR`` that cannot be written is numba's first place, and its fallbacks
    are the package's and the user's folders: where neither serves either, kernels are compiled without a
    cache and :data:`CACHE_PROBLEM` says so (the commands refuse it in one line, :func:`numba_environment_problem`;
    it was numba's "no locator available" traceback at the first kernel)."""
    global CACHE, CACHE_PROBLEM, CACHE_NOTE
    given = os.environ.get("NUMBA_CACHE_DIR")
    user = _numba_user_cache()
    if (given and writable(Path(given))) or writable(Path(__file__).parent / "__pycache__") or \
            (user is not None and writable(user)):
        return None
    if given:
        CACHE = JIT_OPTS["cache"] = ORDERED_JIT_OPTS["cache"] = False
        CACHE_PROBLEM = (f"environment variable NUMBA_CACHE_DIR={given!r}: cannot write there (nor in the package's "
                         f"folders or the home folder, numba's other places for its cache of compiled kernels); "
                         f"give a folder this user can write, or unset it")
        return None
    folder = private_temp_folder("streamcov-numba", writable)
    if folder is None:
        CACHE = JIT_OPTS["cache"] = ORDERED_JIT_OPTS["cache"] = False
        CACHE_NOTE = ("numba's cache of compiled kernels is off: neither the package's folders, nor the home "
                      "folder's cache, nor a folder of this user's own in the temporary folder can be written, "
                      "so every command compiles the kernels again (about a minute); set NUMBA_CACHE_DIR to a "
                      "folder this user can write")
        return None
    os.environ["NUMBA_CACHE_DIR"] = str(folder)
    config = sys.modules.get("numba.core.config")   # numba imported first (a notebook): its setting, read now
    if config is not None:
        config.CACHE_DIR = str(folder)
    return str(folder)


#: why numba's cache cannot be used as the environment asks (:func:`plan_numba_cache`), or None
CACHE_PROBLEM: str | None = None
#: why numba's cache is off where the environment asked nothing of it (:func:`plan_numba_cache`), or None: said
#: once by a command (:func:`check_numba_environment`)
CACHE_NOTE: str | None = None
plan_numba_cache()


def kernel_sources_stamp() -> str:
    """A digest of the size and modification time of every module of streamcov that compiles numba kernels (its
    text names ``njit`` or ``intrinsic``), and of this one (the compile flags): computed once per process."""
    global _SOURCES_STAMP
    if _SOURCES_STAMP is None:
        import hashlib

        here = Path(__file__).resolve().parent
        h = hashlib.sha256()
        for path in sorted(here.rglob("*.py")):
            try:
                st = path.stat()
                if path.name != "_config.py" and not any(w in path.read_text(errors="replace")
                                                         for w in ("njit", "intrinsic")):
                    continue
            except OSError:
                continue
            h.update(f"{path.relative_to(here)}\0{st.st_mtime_ns}\0{st.st_size}\n".encode())
        _SOURCES_STAMP = h.hexdigest()
    return _SOURCES_STAMP


_SOURCES_STAMP: str | None = None


#: the modules whose code shapes the numbers of each part of a run (folders: every module in them), for
#: :func:`code_identity`: an edit elsewhere (the command line, a message, the docs) keeps what was computed
CODE_PARTS = {
    "features": ("_kernels/", "descriptors/", "features/", "_config.py", "_fitparams.py", "kernels.py", "linalg.py",
                 "preprocessing.py", "stream/featurestore.py", "stream/featurize.py", "stream/image.py",
                 "stream/skeleton.py", "stream/source.py"),
    "learners": ("_kernels/linear.py", "_config.py", "linear.py", "optimize.py", "preprocessing.py", "stream/exact.py",
                 "stream/lbfgs.py", "stream/memory.py", "stream/sgd.py"),
    "package": ("",),   # every module: what a result records of the code that ran it
}


def code_identity(part: str = "features") -> dict:
    """What computed a part of a run besides its settings, for the fingerprints of what is reused: a SHA-256 of
    the text of the modules of streamcov that shape its numbers (:data:`CODE_PARTS`: ``__version__`` names a
    release, not the code a checkout runs: features computed before a ``git pull`` or an edit of a kernel were
    reused by the next run without a word) and the versions of the libraries whose arithmetic they hold.
    Computed once per process, every part in one reading of the modules (a few ms)."""
    if not _CODE_IDENTITY:
        import hashlib

        here = Path(__file__).resolve().parent
        hashes = {name: hashlib.sha256() for name in CODE_PARTS}
        for path in sorted(here.rglob("*.py")):
            rel = path.relative_to(here).as_posix()
            parts = [name for name, modules in CODE_PARTS.items()
                     if any(m in ("", rel) or (m.endswith("/") and rel.startswith(m)) for m in modules)]
            if not parts:
                continue
            try:
                text = f"{rel}\0".encode() + path.read_bytes() + b"\0"
            except OSError:   # a module that cannot be read is not run either
                continue
            for name in parts:
                hashes[name].update(text)
        versions = library_versions("numpy", "numba", "scipy", "scikit-learn")
        _CODE_IDENTITY.update({name: {"streamcov": h.hexdigest(), **versions} for name, h in hashes.items()})
    return dict(_CODE_IDENTITY[part])


_CODE_IDENTITY: dict = {}


def library_versions(*dists: str) -> dict:
    """The installed version of each distribution named (None where it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in dists:
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    return out


def stamp_kernels_by_their_sources() -> None:
    """Stamp the numba cache of streamcov's kernels with every kernel module (:func:`kernel_sources_stamp`), not
    only the kernel's own file, as numba does: a kernel that calls another file's (``spd._stack`` calls the lane
    eigensolver of ``symeig``) kept its machine code after that file changed, as a ``git pull`` of an editable
    install (the README's) changes it, and ran the old code without a word. Called by every module that compiles
    kernels before its first ``njit``; idempotent. A locator placed first in numba's list serves streamcov's
    files, and lets numba's own locators (``NUMBA_CACHE_DIR``, beside the module, the user's folder) say where
    the cache lies; numba's ``NUMBA_CACHE_LOCATOR_CLASSES``, where set, is kept as it is."""
    try:
        from numba.core import caching

        impl, base = caching.CacheImpl, caching._CacheLocator
    except (ImportError, AttributeError):   # another numba's internals: its own stamps, as before
        return
    if any(getattr(c, "_streamcov", False) for c in impl._locator_classes):
        return
    package = str(Path(__file__).resolve().parent) + os.sep

    class _StampedBySources(base):
        _streamcov = True

        def __init__(self, inner):
            self._inner = inner

        def ensure_cache_path(self):
            return self._inner.ensure_cache_path()

        def get_cache_path(self):
            return self._inner.get_cache_path()

        def get_source_stamp(self):
            return self._inner.get_source_stamp(), kernel_sources_stamp()

        def get_disambiguator(self):
            return self._inner.get_disambiguator()

        def __getattr__(self, name):   # what numba reads of its own locators (_py_file, in a warning)
            return getattr(self._inner, name)

        @classmethod
        def from_function(cls, py_func, py_file):
            if not str(Path(py_file).resolve()).startswith(package):
                return None
            for other in impl._locator_classes:
                if other is not cls:
                    inner = other.from_function(py_func, py_file)
                    if inner is not None:
                        return cls(inner)
            return None

    impl._locator_classes = [_StampedBySources, *impl._locator_classes]


def jit_started() -> bool:
    """Whether numba's JIT has started in this process: it has compiled, or loaded from its cache, a
    function (its start imports its registries, ``numba.np.arraymath`` among them).

    Its start costs about 0.2 s once per process, longer than a whole small L-BFGS fit; once it has
    started, a cached kernel loads in a millisecond or two. Code with an exact numpy equivalent of a
    kernel uses the kernel only then (:mod:`streamcov._kernels.vector`): the same numbers either way.
    """
    import sys

    return "numba.np.arraymath" in sys.modules


# seconds after a SIGTERM in which another one is the same request: GNU timeout (and a shell's kill of a job's
# process group) sends SIGTERM to the command and then to its whole group, microseconds apart, and a process
# whose second delivery found the default action back died without its cleanup or its line (1 run in 6-10).
# The same holds for SIGHUP: a closed terminal's hangup reaches the foreground process group from the kernel and
# again from the shell, which sends it to each of its jobs.
SIGTERM_ECHO = 1.0


def ending_signals() -> tuple:
    """The signals that end a command as an interruption (:class:`streamcov.cli.Terminated`), and that a local
    cluster's start holds (``stream.runtime._sigterm_held``): SIGTERM, and SIGHUP where the platform has it."""
    import signal

    return tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


def sigterm_again(first: float, signum: int | None = None) -> None:
    """A SIGTERM (or ``signum``: SIGHUP) after the one handled at ``first`` (``time.monotonic()``): within
    :data:`SIGTERM_ECHO` seconds its echo, ignored; later, one that ends the process at once (the default
    action), as a second SIGTERM does while the first waits for a C call to return and for the cleanup. The
    command's handler and the hold of a local cluster's start (``stream.runtime._sigterm_held``) both answer a
    further SIGTERM or SIGHUP so."""
    import signal

    if time.monotonic() - first < SIGTERM_ECHO:
        return
    signum = signal.SIGTERM if signum is None else signum
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def available_cores() -> int:
    """Cores this process may use: the affinity mask and a cgroup CPU quota (a container's or a batch
    job's ``--cpus``), not the machine total, as Dask counts them (``dask.system.cpu_count``, which also
    sizes Dask's own default thread pool). A quota of 2 CPUs on a 64-core host had planned 64 threads,
    which the quota then throttled."""
    from dask.system import cpu_count

    return max(1, int(cpu_count()))


def check_numba_environment() -> None:
    """Refuse, with one line, numba settings of the environment that numba cannot start with
    (:func:`numba_environment_problem`). A run on a Dask cluster asks every worker the same
    (``stream.runtime``)."""
    from .errors import ConfigError

    problem = numba_environment_problem()
    if problem is not None:
        raise ConfigError(problem)
    if CACHE_NOTE is not None:
        import warnings

        warnings.warn(CACHE_NOTE, stacklevel=2)


def numba_environment_problem() -> str | None:
    """The numba setting of this process's environment that numba cannot start with, in one line that says
    what to do, or None: a ``NUMBA_NUM_THREADS`` that is not an integer >= 1 (0 or a negative count made
    ``import numba`` fail; text or an empty value was a warning quoting numba's traceback, then numba's
    default), or a ``NUMBA_THREADING_LAYER`` numba does not know or cannot load here (the first kernel of a
    run failed, after the store was written). Imports numba and starts its threads, as the first parallel
    kernel would. Also a ``NUMBA_DISABLE_JIT`` that turns the compiler off (the kernels use intrinsics that
    run compiled only: a NotImplementedError traceback after the store was written) and a ``NUMBA_CACHE_DIR``
    nothing can be written to (:data:`CACHE_PROBLEM`)."""
    if CACHE_PROBLEM is not None:
        return CACHE_PROBLEM
    jit_off = os.environ.get("NUMBA_DISABLE_JIT", "")
    try:
        off = int(jit_off) != 0   # as numba reads it (text: a warning of its own, and the compiler on)
    except ValueError:
        off = False
    if off:
        return (f"environment variable NUMBA_DISABLE_JIT={jit_off!r}: streamcov's kernels run compiled only (some "
                f"are numba intrinsics, which have no Python version); unset it or set it to 0")
    value = os.environ.get("NUMBA_NUM_THREADS")
    if value is not None:
        try:
            count = int(value)   # numba reads it with int()
        except ValueError:
            count = 0
        if count < 1:
            return (f"environment variable NUMBA_NUM_THREADS={value!r}: expected an integer >= 1 (the threads of "
                    f"numba's kernels); set it to a count (this process may use {available_cores()} cores) or "
                    f"unset it")
    try:
        import numba
    except (ImportError, OSError) as exc:   # a damaged install, a library it loads missing: not a lost worker
        said = " ".join(str(exc).split())[:200]
        return (f"numba cannot be imported ({exc.__class__.__name__}: {said}); install it again in this "
                f"environment (pip install --force-reinstall numba)")
    try:
        numba.get_num_threads()   # starts numba's threading layer (NUMBA_THREADING_LAYER) if not yet started
    except ValueError as exc:
        layer = os.environ.get("NUMBA_THREADING_LAYER")
        where = (f"environment variable NUMBA_THREADING_LAYER={layer!r}" if layer is not None else
                 f"numba's threading layer {numba.config.THREADING_LAYER!r}")
        return (f"{where}: numba cannot start it ({' '.join(str(exc).split())}); unset it, or name a layer numba "
                f"has here (workqueue is built in; streamcov runs its kernels one at a time under it)")
    return None


# numba's workqueue threading layer (its fallback where neither TBB nor OpenMP loads: a slim image, a Mac
# without tbb) aborts the process when two threads run parallel kernels at once, and every Dask thread of the
# engine, or a user's thread pool, does. Under it the parallel kernels take turns on this lock.
_SERIAL_LOCK = threading.RLock()
_SERIAL: bool | None = None


def parallel_kernels():
    """The context of a call of a parallel numba kernel: under the workqueue layer, a process-wide lock (the
    kernels take turns: slower, never an abort), else nothing."""
    global _SERIAL
    if _SERIAL is None:
        import numba

        try:
            numba.get_num_threads()   # starts the layer, as the first parallel kernel would
            _SERIAL = numba.threading_layer() == "workqueue"
        except ValueError:   # a layer that cannot start: the kernel's own call says so (numba_environment_problem)
            _SERIAL = False
    return _SERIAL_LOCK if _SERIAL else contextlib.nullcontext()


def run_parallel(kernel, *args, **kwargs):
    """``kernel(*args, **kwargs)``, a parallel numba kernel called from Python, in :func:`parallel_kernels`."""
    with parallel_kernels():
        return kernel(*args, **kwargs)


class CompileClock:
    """Seconds this process spent compiling numba kernels while :func:`compile_clock` was open (``seconds``).

    A kernel loaded from numba's cache costs nothing here: only a compilation (a kernel's first use with an empty
    or stale cache) counts, once however deeply its callees nest, in any thread. Other processes (a cluster's
    workers, the study's ``--jobs``) compile in their own, which this does not see; two runs in threads of one
    process count each other's."""

    def __init__(self):
        self.seconds = 0.0
        self._depth = 0
        self._since = 0.0

    # numba's compile events, under its global compiler lock: one thread at a time
    def on_start(self):
        if self._depth == 0:
            self._since = time.perf_counter()
        self._depth += 1

    def on_end(self):
        if self._depth == 0:   # the end of one under way (in another thread) when the clock opened: not counted
            return
        self._depth -= 1
        if self._depth == 0:
            self.seconds += time.perf_counter() - self._since

    def close(self):
        if self._depth > 0:   # one still under way (in another thread) when the block ends: counted up to here
            self.seconds += time.perf_counter() - self._since
            self._depth = 0


@contextlib.contextmanager
def compile_clock():
    """Measure the compilation inside the block (:class:`CompileClock`): a first run's timings (``seconds``,
    ``fit_seconds``, ``featurize_ms_per_sequence``) include it where it falls within them, and a user is told how
    much it was."""
    from numba.core import event

    clock = CompileClock()

    class Listener(event.Listener):
        def on_start(self, ev):
            clock.on_start()

        def on_end(self, ev):
            clock.on_end()

    # numba's own TimingListener takes the end of a compilation begun before it was installed (in another thread)
    # for one of its own: its depth went below 0 and every later compilation read 0 s
    with event.install_listener("numba:compile", Listener()):
        try:
            yield clock
        finally:
            clock.close()


@dataclass(frozen=True)
class ThreadPlan:
    """How the cores are split between the levels of parallelism."""

    cores: int
    dask_threads: int
    numba_threads: int
    blas_threads: int

    def as_dict(self) -> dict:
        return asdict(self)


def thread_plan(dask_threads: int | None = None, cores: int | None = None) -> ThreadPlan:
    """Split ``cores`` so that dask_threads * numba_threads <= cores.

    Dask gets the outer parallelism (blocks are independent); numba kernels run
    single-threaded inside a Dask task unless Dask has fewer threads than cores,
    in which case numba takes the remainder. BLAS always gets one thread inside
    a task: the matrices here are small, and BLAS threads would multiply again.
    """
    cores = available_cores() if cores is None else int(cores)
    if dask_threads is None:
        dask_threads = cores
    dask_threads = max(1, min(int(dask_threads), cores))
    numba_threads = max(1, cores // dask_threads)
    return ThreadPlan(cores=cores, dask_threads=dask_threads,
                      numba_threads=numba_threads, blas_threads=1)


# the most Dask workers (local-cluster processes, or threads of "threads") a command starts: beyond any machine's
# cores; a typo of many digits would otherwise start processes until memory runs out, with no message
MAX_WORKERS = 1024

# glibc's malloc in the worker processes of the LocalClusters streamcov starts. Dask's nanny sets
# MALLOC_TRIM_THRESHOLD_=65536, which hands every freed block back to the kernel: each zarr read, decoded
# chunk and per-chunk copy then lands on fresh pages, and faulting fresh pages is the slow part of reading
# a store on a virtual machine (the L-BFGS rows of the 200,000-sequence store, 800 MB: 1.8-4.6 s in a
# process under that setting, 0.5-0.9 s under this one). Blocks up to 32 MB come from the heap and up to
# 128 MB of free heap is kept for the next reads: a bounded amount of memory held back, not a leak.
WORKER_MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": 32 << 20, "MALLOC_TRIM_THRESHOLD_": 128 << 20}


def worker_spawn_environ() -> dict:
    """Dask's ``distributed.nanny.pre-spawn-environ`` with :data:`WORKER_MALLOC_ENV` laid over it."""
    import dask

    return {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), **WORKER_MALLOC_ENV}


@contextlib.contextmanager
def kernel_threads(n_numba: int, n_blas: int = 1):
    """Limit numba and BLAS threads for the duration of a kernel call.

    Used inside Dask tasks so that a threaded scheduler and numba's own pool do
    not oversubscribe the cores.
    """
    import numba

    n_numba = max(1, min(int(n_numba), numba.config.NUMBA_NUM_THREADS))
    previous = numba.get_num_threads()
    numba.set_num_threads(n_numba)   # numba's count is per thread
    try:
        with blas_threads(n_blas):   # BLAS's is per process: shared, counted (tasks run in parallel threads)
            yield
    finally:
        numba.set_num_threads(previous)


_BLAS = None
# BLAS limits are process-wide, and blocks asking for them run in parallel threads (Dask's tasks, the
# learner's passes): one record of the blocks inside, in the order they entered. The first in saves the
# libraries' own limits and the last out restores them; in between the limit is the newest block's, set
# again whenever it changes. Saving and restoring per block (threadpoolctl's own contexts) races across
# threads and could leave the process at a block's limit after every block had left.
#
# A block sets the count it needs whenever a library is not at it, read from the library itself (a ctypes
# call per library) rather than from a record of what was last set: other code changes the count while a
# block is held (threadpoolctl in the user's code, a scikit-learn estimator), and a block held for long (a
# generator kept alive by a traceback in a notebook) made every later block trust a stale record. The
# products then ran on the library's own count, and OpenBLAS rounds some shapes differently on 1 and 2
# threads: features differed in the last bits from a fresh process's (35% of the entries of a run).
#
# threadpoolctl >= 3.8 lets one thread set OpenBLAS's process-wide count: the first to set it, until that
# thread clears its control; a set from any other thread does nothing, silently. The blocks here are
# coordinated by their own lock, and run in whichever thread the caller, Dask or the learner uses, so each
# set takes control for itself and gives it back (measured: a run called from a second thread of a process
# whose main thread had limited BLAS computed on 2 threads, and its features differed in the last bits).
#
# Best effort against other threads of the process: a thread of the user's that sets BLAS between a block's
# clear and its set keeps control, and the block's set is then ignored; there is no way to hold
# threadpoolctl's control across both without its private lock.
#
# The garbage collector can close a generator that holds a block (one left in a reference cycle) at any
# allocation, including one made while this thread holds the blocks' lock: that block's exit then waits for
# the lock its own thread holds. Such an exit is recorded and done when the section ends (measured: a sweep
# of collection thresholds hung the process before).
_BLAS_LOCK = threading.Lock()
_BLAS_HELD = {"active": [], "limiter": None, "kept": None, "owner": None, "deferred": []}
_CLEAR_CONTROL = []   # threadpoolctl's clear_controlling_thread, found once (a block may leave at shutdown)


def _with_control(fn) -> None:
    """``fn()`` with this thread's sets reaching OpenBLAS (threadpoolctl's controlling thread cleared before
    and after; nothing to do with threadpoolctl < 3.8). Called under ``_BLAS_LOCK``."""
    if not _CLEAR_CONTROL:
        from threadpoolctl import OpenBLASController

        _CLEAR_CONTROL.append(getattr(OpenBLASController, "clear_controlling_thread", None))
    clear = _CLEAR_CONTROL[0]
    if clear is not None:
        clear(force=True)
    try:
        fn()
    finally:
        if clear is not None:
            clear(force=True)


def _set_blas(n: int) -> None:
    off = [c for c in _BLAS.lib_controllers if c.get_num_threads() != n]
    if off:   # control is taken only to set (the common nested block reads its count and sets nothing)
        def sets():
            for c in off:
                c.set_num_threads(n)

        _with_control(sets)


def _set_counts(counts: dict) -> None:
    """Every BLAS library loaded now to its count in ``counts`` (by file path)."""
    from threadpoolctl import ThreadpoolController

    def sets():
        for c in ThreadpoolController().select(user_api="blas").lib_controllers:
            if c.filepath in counts:
                c.set_num_threads(counts[c.filepath])

    _with_control(sets)


def _locked(step) -> None:
    """``step()`` under the blocks' lock, then the exits that the garbage collector ran inside it."""
    with _BLAS_LOCK:
        _BLAS_HELD["owner"] = threading.get_ident()
        try:
            step()
            while _BLAS_HELD["deferred"]:
                _leave(_BLAS_HELD["deferred"].pop(0))
        finally:
            _BLAS_HELD["owner"] = None


def _enter(n: int) -> None:
    global _BLAS
    if _BLAS is None:
        # numpy and scipy each bring their own OpenBLAS; the libraries are listed once, so scipy's must be
        # loaded first, or it is never limited (a process that used this before importing scipy.linalg
        # ran scipy's eigh on every core, and rounded differently from one that had imported it)
        import scipy.linalg  # noqa: F401
        from threadpoolctl import ThreadpoolController

        _BLAS = ThreadpoolController().select(user_api="blas")
    if not _BLAS_HELD["active"]:
        def first():   # the limiter saves the libraries' own counts, for the last out
            _BLAS_HELD["limiter"] = _BLAS.limit(limits=n)

        _with_control(first)
    else:
        _set_blas(n)
    _BLAS_HELD["active"].append(n)


def _leave(n: int) -> None:
    active = _BLAS_HELD["active"]
    del active[len(active) - 1 - active[::-1].index(n)]   # this block's entry (the last of its n)
    if active:
        _set_blas(active[-1])
        return
    _with_control(_BLAS_HELD["limiter"].restore_original_limits)
    _BLAS_HELD["limiter"] = None
    if _BLAS_HELD["kept"] is not None:   # a user's counts that blas_threads_kept left to the last block out
        kept, _BLAS_HELD["kept"] = _BLAS_HELD["kept"], None
        _set_counts(kept)


@contextlib.contextmanager
def blas_threads(n: int):
    """Limit BLAS to ``n`` threads for the duration of the block; microseconds per use.

    ``threadpoolctl.threadpool_limits`` finds the loaded libraries afresh at
    every call (milliseconds once numba and LLVM are loaded), too slow for a
    learner that multiplies a block every few milliseconds; the BLAS
    controller here is found once per process (BLAS is loaded with numpy).
    Blocks of the same ``n`` (nested, or in several threads) share one limit;
    a block of another ``n`` sets its own until it leaves; when the last block
    leaves, the limits the libraries had before the first are restored.
    """
    n = int(n)
    if _BLAS_HELD["owner"] == threading.get_ident():
        _enter(n)   # entered from a finalizer inside this thread's own section: the lock is already held
    else:
        _locked(lambda: _enter(n))
    try:
        yield
    finally:
        if _BLAS_HELD["owner"] == threading.get_ident():
            _BLAS_HELD["deferred"].append(n)   # closed by the garbage collector inside this thread's section
        else:
            _locked(lambda: _leave(n))


@contextlib.contextmanager
def blas_threads_kept():
    """Put every BLAS library's thread count back as it was on entry, when the block leaves.

    For a run on a user's cluster whose workers are threads of the user's own
    process (``Client(processes=False)``): their tasks limit BLAS in parallel
    threads (measured: a run left the process at 1 thread in 2 of 3 tries);
    what the user's thread had is restored from here. While blocks are still
    inside (another run's, or tasks a failed run left running), they keep
    their limit and the last out restores these counts.
    """
    from threadpoolctl import ThreadpoolController

    before = {c.filepath: c.num_threads for c in ThreadpoolController().select(user_api="blas").lib_controllers}
    try:
        yield
    finally:
        def restore():
            if _BLAS_HELD["active"]:
                _BLAS_HELD["kept"] = {**(_BLAS_HELD["kept"] or {}), **before}
            else:
                _set_counts(before)

        _locked(restore)


def _thread_count(n_jobs, available: int) -> int:
    """``n_jobs`` as scikit-learn and joblib read it: a count >= 1, or -1 for all ``available`` threads, -2 for all
    but one, ...; 0 and what is not an integer are refused (-1 ran on one thread, "2" was taken)."""
    from numbers import Integral

    if isinstance(n_jobs, bool) or not isinstance(n_jobs, Integral) or n_jobs == 0:
        raise ValueError(f"n_jobs: expected an integer >= 1, or -1 for all threads (-2 all but one, ...), got "
                         f"{n_jobs!r}")
    return int(n_jobs) if n_jobs > 0 else max(1, available + 1 + int(n_jobs))


def map_threads(fn, items, n_jobs: int | None = None):
    """``map(fn, items)`` in threads, BLAS limited to one thread per call; results in order.

    For Python-level loops over matrices whose work is in LAPACK/BLAS or in
    numba kernels that release the GIL. LAPACK's own threads on small
    matrices slow down badly when the cores are shared; one BLAS thread per
    worker and one worker per core does not. ``n_jobs`` defaults to numba's
    current thread count, so inside a Dask task (where :func:`kernel_threads`
    applies the thread plan) the loop takes the task's share of the cores,
    and elsewhere all of them. At most ``2 * n_jobs`` calls are in flight,
    so results not yet consumed never pile up in memory.
    """
    import contextvars
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    import numba

    caller = numba.get_num_threads()
    n_jobs = caller if n_jobs is None else _thread_count(n_jobs, caller)
    # numba's count is per thread, and a new thread starts at numba's default (every core): each of the n_jobs
    # threads gets its share of the caller's, so that their parallel kernels do not oversubscribe the cores
    share = max(1, caller // n_jobs)

    def one(item):
        # the limit is taken per call, in the thread that computes (microseconds), not across the generator's
        # yields: a generator abandoned by an exception lives as long as its traceback (a notebook keeps the
        # last one) and held the caller's BLAS at one thread until then
        with blas_threads(1):
            if numba.get_num_threads() != share:
                numba.set_num_threads(share)
            return fn(item)

    if n_jobs == 1:
        for item in items:
            yield one(item)
        return
    with ThreadPoolExecutor(max_workers=n_jobs) as ex:
        pending = deque()
        for item in items:
            # each call in a copy of the caller's context: what the caller set (linalg.gamma_named) holds there
            pending.append(ex.submit(contextvars.copy_context().run, one, item))
            if len(pending) >= 2 * n_jobs:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


# a container's memory limits (cgroups v1 and v2): the hard ones, past which the process is killed, and the soft
# ones Dask's distributed.system.memory_limit also reads to divide memory among a local-cluster's workers
HARD_LIMITS = ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory.max")
SOFT_LIMITS = ("/sys/fs/cgroup/memory/memory.soft_limit_in_bytes", "/sys/fs/cgroup/memory.high",
               "/sys/fs/cgroup/memory.low")


def total_memory(soft: bool = False) -> int:
    """Bytes of memory this process may use: the machine's physical memory, or less where a container's limit
    (:data:`HARD_LIMITS`), ``RLIMIT_RSS`` or ``RLIMIT_AS`` (``ulimit -v``, a bound of each process) says so;
    with ``soft``, the memory a local cluster's workers share: also below a container's soft limits
    (:data:`SOFT_LIMITS`), which is Dask's figure, and not ``RLIMIT_AS``. 0 when the system does not say."""
    try:
        total = int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):   # pragma: no cover - non-POSIX
        return 0
    for path in HARD_LIMITS + (SOFT_LIMITS if soft else ()):
        try:
            with open(path) as fh:
                limit = int(fh.read())
        except (OSError, ValueError):   # no such limit, or "max" (none)
            continue
        if limit > 0:
            total = min(total, limit)
    try:
        import resource

        hard = resource.getrlimit(resource.RLIMIT_RSS)[1]
        # ``ulimit -v``: an allocation past the address space it allows fails (Linux ignores RLIMIT_RSS)
        space = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError):   # pragma: no cover - non-POSIX
        return total
    # ulimit -v bounds each process, not a local cluster's workers together (the soft figure is divided
    # among them): read for this process's own allocations only
    for limit in (hard,) if soft else (hard, space):
        if 0 < limit < total:
            total = limit
    return total


#: what a container's processes use now (cgroups v1 and v2), beside :data:`HARD_LIMITS`, and the statistics whose
#: inactive file cache (reclaimed before the limit kills anything) is not counted as used, as ``docker stats`` does
USAGE = ("/sys/fs/cgroup/memory/memory.usage_in_bytes", "/sys/fs/cgroup/memory.current")
STATS = ("/sys/fs/cgroup/memory/memory.stat", "/sys/fs/cgroup/memory.stat")


def _inactive_file(path: str) -> int:
    try:
        with open(path) as fh:
            for line in fh:
                key, _, value = line.partition(" ")
                if key in ("total_inactive_file", "inactive_file"):
                    return int(value)
    except (OSError, ValueError):
        pass
    return 0


def container_room() -> int | None:
    """Bytes a container's hard memory limit leaves to its processes now (limit minus usage, less the inactive
    file cache), or None outside a container's limit: ``/proc/meminfo`` shows the host's memory inside a
    container."""
    room = None
    for limit_path, usage_path, stats_path in zip(HARD_LIMITS, USAGE, STATS):
        try:
            with open(limit_path) as fh:
                limit = int(fh.read())
            with open(usage_path) as fh:
                used = int(fh.read())
        except (OSError, ValueError):   # no such limit, or "max" (none)
            continue
        used = max(0, used - _inactive_file(stats_path))   # the feature store just written sits in the cache
        if 0 < limit < (1 << 60):   # cgroups v1 writes "no limit" as a number near 2^63
            room = max(0, limit - used) if room is None else min(room, max(0, limit - used))
    return room


def check_memory(nbytes: float, what: str, fix: str, total: int | None = None) -> None:
    """Refuse, with one line, an allocation larger than the memory this process may use (:func:`total_memory`).

    ``what`` names the culprit as the user set it (``features.n_components =
    1000000000000``), ``fix`` says how to bring it down; ``total``, when given,
    is the figure to compare with. Anything larger would fail later with a
    MemoryError, make the machine swap, or have a container's limit kill the
    process; smaller sizes are left to the operating system.
    """
    from .errors import ConfigError

    total = total_memory() if total is None else total
    if total and nbytes > total:
        raise ConfigError(f"{what}: needs {_size(nbytes)} of memory, this process may use {_size(total)}; {fix}")


def check_disk(nbytes: float, path, what: str, fix: str) -> None:
    """Refuse, with one line, a store larger than the free space where it is to be written.

    ``path`` need not exist yet: the free space is that of its nearest existing
    folder. ``what`` names the culprit as the user set it, ``fix`` says what to
    do. Without it the writer fills the disk first (and the user learns of it
    after the hours that takes).
    """
    import shutil
    from pathlib import Path

    from .errors import ConfigError

    where = Path(path).absolute()
    while where != where.parent:
        try:
            if where.exists():
                break
        except OSError:   # a name too long: the writer says so
            pass
        where = where.parent
    try:
        free = shutil.disk_usage(where).free
    except OSError:   # a file system that does not say: the writer finds out
        return
    if nbytes > free:
        raise ConfigError(f"{what}: needs about {_size(nbytes)} of disk, {where} has {_size(free)} free; {fix}")


def _size(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024


def default_cache_dir() -> Path:
    """``$STREAMCOV_CACHE_DIR``, else a ``streamcov`` folder in the user cache (XDG_CACHE_HOME or ~/.cache): the
    network weights (:mod:`streamcov.descriptors.cnn`) and the archives known by their contents
    (:func:`streamcov.data.ragged.same_files`). Where that folder cannot be written (a read-only or missing
    home: a container's numeric user), ``<temporary folder>/streamcov-cache-<uid>`` (:func:`private_temp_folder`),
    as numba's cache falls back: every process had warned that it could not write the weights' cache and read
    the 19 MB network again. A RuntimeError where there is neither a home nor a temporary folder."""
    env = os.environ.get("STREAMCOV_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    try:
        user = _user_cache_dir()
    except (RuntimeError, KeyError, OSError):   # no home folder (HOME unset for a user the system does not name)
        user = None
    if user is not None and _writable(user):
        return user
    fallback = private_temp_folder("streamcov-cache")
    if fallback is not None:
        return fallback
    if user is None:
        raise RuntimeError("no home folder and no temporary folder for streamcov's cache")
    return user


def _user_cache_dir() -> Path:
    """The ``streamcov`` folder of the platform's user cache."""
    if sys.platform.startswith("win"):
        return Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local")) / "streamcov" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "streamcov"
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    # a relative value is invalid by the XDG spec (it would put the cache in each command's working folder)
    return (Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache") / "streamcov"


def progress_bar(iterable, enabled: bool, **kw):
    """A tqdm bar over ``iterable`` when ``enabled`` (else the iterable), as a context manager: the bar is
    closed when the block ends, by an error too, so that the error's line starts a line of its own (it ran
    on after the bar's carriage return, and ``grep '^streamcov run: error'`` missed it)."""
    if not enabled:
        return contextlib.nullcontext(iterable)
    return new_bar(iterable, **kw)


#: tqdm's ``disable`` for every bar: None hides it where stderr is not a terminal (tqdm's rule; a notebook shows it)
BAR_DISABLE = None


def new_bar(iterable=None, **kw):
    """A tqdm bar, shown on a terminal and in a notebook, not when stderr goes to a file or a pipe (a batch job's
    log got a carriage-return update several times a second: about 1 MB an hour on one line)."""
    from tqdm.auto import tqdm

    return tqdm(iterable, disable=BAR_DISABLE, **kw)
