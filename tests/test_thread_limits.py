"""Thread limits: the BLAS limit of the learner's blocks (streamcov._config.blas_threads), shared, nested, restored; zarr's decoding pool on Dask workers."""
import gc
import os
import subprocess
import sys
import threading

import numpy as np  # noqa: F401  (BLAS loaded)
import pytest
from conftest import REPO, assert_same_bits
from threadpoolctl import threadpool_info

from streamcov._config import blas_threads


def blas_limit() -> int:
    return min(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")


@pytest.fixture
def two_threads():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=2, user_api="blas"):
        if blas_limit() != 2:
            pytest.skip("this BLAS does not take a limit of 2 threads")
        yield


def test_nested_blocks_share_one_limit_and_restore_it(two_threads):
    with blas_threads(1):
        assert blas_limit() == 1
        with blas_threads(1):
            assert blas_limit() == 1
        assert blas_limit() == 1          # the inner block leaving does not lift the outer one's limit
        with blas_threads(2):             # another limit nests and restores
            assert blas_limit() == 2
        assert blas_limit() == 1
    assert blas_limit() == 2


class FakeBLAS:
    """Stands in for the process's BLAS controller: records the limit in force."""

    def __init__(self):
        self.limit_now = 2
        self.calls = []
        fake = self

        class Lib:   # the one library: its count is the limit in force
            def get_num_threads(self):
                return fake.limit_now

            def set_num_threads(self, n):
                fake.limit_now = n
                fake.calls.append(n)

        self.lib_controllers = [Lib()]

    def limit(self, limits):
        fake, before = self, self.limit_now
        self.limit_now = limits
        self.calls.append(limits)

        class Limiter:
            def restore_original_limits(self):
                fake.limit_now = before

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.restore_original_limits()

        return Limiter()


def test_limit_held_until_the_last_concurrent_block_leaves(monkeypatch):
    import streamcov._config as cfg

    fake = FakeBLAS()
    monkeypatch.setattr(cfg, "_BLAS", fake)
    entered, release_first, first_left, release_second = (threading.Event() for _ in range(4))
    seen = {}

    def first():
        with blas_threads(1):
            entered.set()
            release_first.wait(10)
        first_left.set()

    def second():
        entered.wait(10)
        with blas_threads(1):
            release_first.set()
            first_left.wait(10)
            seen["inside"] = fake.limit_now   # the first block has left; this one still holds the limit
            release_second.wait(10)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    first_left.wait(10)
    release_second.set()
    for t in threads:
        t.join(10)
    assert seen["inside"] == 1
    assert fake.limit_now == 2 and fake.calls == [1]     # one limit set for both blocks, restored once


def test_a_limit_changed_by_other_code_is_set_again_by_the_next_block(two_threads):
    """Other code (threadpoolctl in a notebook, a scikit-learn estimator) may set BLAS while a block is held,
    e.g. by a generator that a traceback keeps alive: the next block reads the libraries' counts and sets its
    own. Before, it trusted its record of the limit it had set, left BLAS at 2 threads, and OpenBLAS rounded
    some products differently from a fresh process (a synchronous run's features: 35% of entries, 1e-12)."""
    from threadpoolctl import ThreadpoolController

    def held():
        with blas_threads(1):
            yield

    block = held()
    next(block)                       # a block held open
    try:
        assert blas_limit() == 1
        ThreadpoolController().select(user_api="blas").limit(limits=2)   # set by other code, not restored
        assert blas_limit() == 2
        with blas_threads(1):
            assert blas_limit() == 1
            with blas_threads(1):     # a nested block of the same limit reads it too
                assert blas_limit() == 1
    finally:
        block.close()
    assert blas_limit() == 2          # the last block out restores what the first found


def test_a_block_in_another_thread_sets_its_limit(two_threads):
    """threadpoolctl >= 3.8 lets one thread set OpenBLAS's count (the first to set it, until it clears its
    control) and ignores the others silently. A block entered in another thread (a run called from a
    thread of a notebook or a service; a Dask thread) still sets its own limit, and gives control back."""
    from threadpoolctl import ThreadpoolController

    ThreadpoolController().select(user_api="blas").limit(limits=2)   # this thread takes control and keeps it
    seen = []

    def work():
        with blas_threads(1):
            seen.append(blas_limit())
        seen.append(blas_limit())

    t = threading.Thread(target=work)
    t.start()
    t.join(10)
    assert seen == [1, 2]
    ThreadpoolController().select(user_api="blas").limit(limits=1)   # and the main thread still can
    assert blas_limit() == 1


def test_a_run_from_another_thread_gives_the_same_bits(tmp_path, two_threads):
    """The user's scenario: a pipeline run from a second thread of a process whose main thread had limited
    BLAS (which made that thread threadpoolctl's controller) gives a run's bits from the main thread. Before,
    its one-thread limits were ignored and OpenBLAS rounded some products on 2 threads."""
    import zarr
    from threadpoolctl import ThreadpoolController

    from streamcov.data.skeletons import ingest
    from streamcov.data.synth import SyntheticSkeletons
    from streamcov.tasks import run as run_pipeline
    from streamcov.tasks.config import load_config
    from conftest import REPO, RGW_SETS

    store = ingest(SyntheticSkeletons(n_sequences=120, seed=3), tmp_path / "s.zarr", chunk_frames=1500)

    def run(out):
        sets = [f'output="{out}"', *RGW_SETS, "features.n_components=300", "dask.block_size=17"]
        res = run_pipeline(load_config(REPO / "pipelines" / "msr_action3d.toml", sets, store=store.path),
                           scheduler="synchronous")
        return np.asarray(zarr.open_group(res["features_path"], mode="r")["X"][:])

    main = run(tmp_path / "main")
    # the main thread limits BLAS again and, as threadpoolctl's contexts do, keeps control while inside
    with ThreadpoolController().select(user_api="blas").limit(limits=2):
        got = []
        t = threading.Thread(target=lambda: got.append(run(tmp_path / "thread")))
        t.start()
        t.join(300)
        assert not t.is_alive() and len(got) == 1
    assert_same_bits(got[0], main, "features")


def test_limit_restored_after_an_exception(two_threads):
    with pytest.raises(RuntimeError, match="inside"):
        with blas_threads(1):
            raise RuntimeError("inside")
    assert blas_limit() == 2


def _decode_pool_of_this_worker(path):
    """Read a zarr array here (zarr makes its decoding pool on first use); the pool's size."""
    import zarr
    import zarr.core.sync as zsync

    np.asarray(zarr.open_array(path, mode="r")[:])
    return zarr.config.get("threading.max_workers"), zsync._executor._max_workers


def test_workers_decode_on_their_own_threads(tmp_path, monkeypatch):
    """On a cluster of single-threaded workers zarr decodes chunks on one thread per worker (the thread
    plan: workers own their cores), not on a pool of cores + 4 threads of its own."""
    import zarr

    # what a LocalCluster of Dask's defaults leaves in the process that hosted its nannies, and a nanny lets a
    # variable already there win over its pre-spawn-environ: the workers got Dask's malloc policy, not streamcov's
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")

    from streamcov.stream.runtime import dask_runtime

    path = str(tmp_path / "a.zarr")
    zarr.create_array(path, shape=(64, 8), chunks=(8, 8), dtype="f4")[:] = 1.0
    host = _malloc_environ() | {"PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED")}
    with dask_runtime("local-cluster", 2) as rt:
        pools = rt.client.run(_decode_pool_of_this_worker, path)
        malloc = rt.client.run(_malloc_environ)
        settled = rt.client.run(_settled)
        during = _malloc_environ() | {"PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED")}
    # the nannies set the workers' settings in the environment of the process that hosts them, this one: put
    # back as they were, during the run and after it (the caller's later subprocesses inherited them)
    assert during == host and _malloc_environ() | {"PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED")} == host
    assert len(pools) == 2 and set(pools.values()) == {(1, 1)}, pools
    # the workers streamcov starts hold their imports out of the collector's reach (runtime._settle_plugin):
    # the learners' modules imported, then tens of thousands of objects frozen
    assert all(modules and frozen > 50_000 for modules, frozen in settled.values()), settled
    # the workers' malloc keeps freed blocks for the next reads (_config.WORKER_MALLOC_ENV), where Dask's
    # default hands them back to the kernel; Dask's other pre-spawn settings stay
    from streamcov._config import WORKER_MALLOC_ENV

    want = {k: str(v) for k, v in WORKER_MALLOC_ENV.items()} | {"OMP_NUM_THREADS": "1"}
    assert list(malloc.values()) == [want, want], malloc


def _settled():
    import gc
    import sys

    return all(m in sys.modules for m in ("streamcov.stream.lbfgs", "streamcov.stream.featurize")), gc.get_freeze_count()


def _malloc_environ():
    import os

    return {k: os.environ.get(k) for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "OMP_NUM_THREADS")}


# 21 training rows and 2 epochs learn nothing, which the run rightly warns of: the user's process is the subject here
@pytest.mark.filterwarnings("ignore:fold 'odd-even':streamcov.errors.RunWarning")
def test_a_users_in_process_cluster_is_left_as_it_was(tmp_path):
    """A notebook's Client(processes=False) runs streamcov's tasks in the user's own process: its BLAS
    limit (concurrent tasks saved and restored it with threadpoolctl, and a race left 1 thread), its zarr
    decoding pool and its worker plugins are as they were once the run returns."""
    import zarr
    from distributed import Client

    from streamcov.data.skeletons import ingest
    from streamcov.data.synth import SyntheticSkeletons
    from streamcov.stream.runtime import PLUGIN_NAME, SETTLE_PLUGIN_NAME
    from streamcov.tasks.runner import run

    store = ingest(SyntheticSkeletons(n_sequences=40, n_subjects=4, n_classes=3, seed=0), tmp_path / "s.zarr")
    import scipy.linalg  # noqa: F401  (every BLAS the run uses loaded before the limits are read)
    import sklearn.linear_model  # noqa: F401

    limits = {i["filepath"]: i["num_threads"] for i in threadpool_info()}
    before = zarr.config.get("threading.max_workers")
    cfg = {"task": "skeleton-classification", "name": "t", "output": str(tmp_path / "o"),
           "data": {"store": str(store.path)}, "features": {"n_components": 64},
           "model": {"learner": "sgd", "epochs": 2}, "split": {"kind": "subject-parity"}, "dask": {"block_size": 4}}
    frozen = gc.get_freeze_count()
    with Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=":0") as client:
        for _ in range(2):
            run(cfg, scheduler=client.scheduler.address, progress=False)
        plugins = client.run(lambda dask_worker: sorted(dask_worker.plugins))
        assert {i["filepath"]: i["num_threads"] for i in threadpool_info() if i["filepath"] in limits} == limits
        assert zarr.config.get("threading.max_workers") == before
        assert not any(n.startswith((PLUGIN_NAME, SETTLE_PLUGIN_NAME)) for p in plugins.values() for n in p), plugins
        assert gc.get_freeze_count() == frozen    # the user's own process: nothing frozen


def test_an_in_process_cluster_gives_a_synchronous_runs_bits(tmp_path):
    """Client(processes=False) with 2 threads per worker runs the tasks in threads of this process, each
    limiting BLAS for itself (threadpoolctl lets one thread set OpenBLAS's count): the features are a
    synchronous run's bits."""
    import zarr
    from distributed import Client

    from streamcov.data.skeletons import ingest
    from streamcov.data.synth import SyntheticSkeletons
    from streamcov.tasks import run as run_pipeline
    from streamcov.tasks.config import load_config
    from conftest import REPO, RGW_SETS

    store = ingest(SyntheticSkeletons(n_sequences=120, seed=3), tmp_path / "s.zarr", chunk_frames=1500)

    def run(out, scheduler):
        sets = [f'output="{out}"', *RGW_SETS, "features.n_components=300", "dask.block_size=17"]
        res = run_pipeline(load_config(REPO / "pipelines" / "msr_action3d.toml", sets, store=store.path),
                           scheduler=scheduler)
        return np.asarray(zarr.open_group(res["features_path"], mode="r")["X"][:])

    base = run(tmp_path / "sync", "synchronous")
    with Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=":0") as client:
        got = run(tmp_path / "cluster", client.scheduler.address)
    assert_same_bits(got, base, "features")


GC_SWEEP = """
import faulthandler, gc, sys
from streamcov._config import blas_threads

def held():
    with blas_threads(1):
        yield

def held_in_a_cycle():
    # a generator holding a block, left in a reference cycle: only the garbage collector closes it
    g = held()
    next(g)
    box = [g]
    box.append(box)

faulthandler.dump_traceback_later(60, exit=True)
with blas_threads(1):
    for m in range(1, 300):
        for n in (1, 2):
            gc.collect()
            held_in_a_cycle()
            gc.set_threshold(m)   # a collection lands at the m-th allocation, inside the blocks' lock
            with blas_threads(n):
                pass
            gc.set_threshold(700)
gc.collect()
print("done")
"""


def test_a_block_closed_by_the_garbage_collector_inside_the_lock_does_not_hang():
    """A generator holding a block, left in a reference cycle, is closed by the garbage collector at an
    allocation, possibly while its own thread holds the blocks' lock (entering or leaving another block):
    its exit is done when that section ends instead of waiting for the lock forever. A sweep of collection
    thresholds puts a collection at every allocation of the sections; it hung before."""
    proc = subprocess.run([sys.executable, "-c", GC_SWEEP], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr[-3000:]


def test_map_threads_limits_each_call_and_holds_nothing_between_them(two_threads):
    """``map_threads`` runs every call on one BLAS thread, in the pool's threads too, and leaves the
    caller's BLAS alone between items: a generator abandoned by an exception (kept alive by its traceback,
    as a notebook keeps the last one) no longer holds the caller at one thread."""
    from streamcov._config import map_threads

    seen = []

    def square(i):
        seen.append(blas_limit())
        return i * i

    it = map_threads(square, range(6), 1)
    assert next(it) == 0 and next(it) == 1
    assert blas_limit() == 2          # between items, the generator suspended (it held 1 before)
    assert list(it) == [4, 9, 16, 25]
    assert list(map_threads(square, range(6), 2)) == [0, 1, 4, 9, 16, 25]
    assert seen == [1] * 12
    assert blas_limit() == 2


def test_map_threads_gives_each_thread_its_share_of_numba_threads():
    """numba's thread count is per thread, and a new thread starts at numba's default (every core): each of
    map_threads' n_jobs threads ran the caller's numba kernels on every core (the pixel features of an image
    run: 4 numba threads at once on 2 cores). Each gets the caller's count divided by n_jobs; the caller's own
    count is left as it was."""
    import numba

    from streamcov._config import map_threads

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba has a single thread here")
    before = numba.get_num_threads()
    numba.set_num_threads(2)
    try:
        counts = lambda i: numba.get_num_threads()   # noqa: E731
        assert list(map_threads(counts, range(6), 2)) == [1] * 6
        assert list(map_threads(counts, range(3), 1)) == [2] * 3   # in the caller's thread: its own count
        assert numba.get_num_threads() == 2
    finally:
        numba.set_num_threads(before)


def test_feature_map_and_predict_kernels_keep_to_the_thread_plan(tmp_path, monkeypatch):
    """The descriptor kernels ran within the task's share of the thread plan, but the feature map's (RGW's
    grouped products, in featurize and predict) at numba's default, every core in every Dask thread: 2 x 2
    numba threads on 2 cores. Every parallel kernel of a threaded run's tasks now keeps to the plan's share."""
    import numba

    from streamcov import _config
    from streamcov.stream.predict import predict
    from streamcov.tasks import run

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba has a single thread here")
    seen: dict = {}
    real = _config.run_parallel

    def counted(kernel, *args, **kwargs):   # in Dask's threads (the driver's own fit may use every core)
        if threading.current_thread() is not threading.main_thread():
            seen.setdefault(getattr(kernel, "__name__", str(kernel)), set()).add(numba.get_num_threads())
        return real(kernel, *args, **kwargs)

    for module in ("streamcov.features._rgw", "streamcov._config"):
        monkeypatch.setattr(f"{module}.run_parallel", counted)
    from streamcov.tasks.config import load_config

    cfg = load_config(REPO / "pipelines" / "synthetic.toml", overrides=[
        "data.synthetic.n_sequences=120", f'output="{tmp_path / "o"}"', f'data.store="{tmp_path / "s.zarr"}"',
        'features.map="rgw"', "features.n_components=64", "model.epochs=2"])
    res = run(cfg, scheduler="threads", workers=2)
    assert res["runtime"]["numba_threads"] == 1
    predict(tmp_path / "o" / "model", tmp_path / "s.zarr", scheduler="threads", workers=2)
    assert "grouped_products" in seen and seen["grouped_products"] == {1}, seen


def test_the_plan_takes_the_callers_numba_count_and_synchronous_takes_every_core():
    """A notebook's numba.set_num_threads(1) (or NUMBA_NUM_THREADS=1) was raised to the plan's share inside the
    tasks without a word, and the run reported the plan's count where numba had capped it; the synchronous
    scheduler runs one task at a time, whose kernels had one thread of the machine's cores."""
    import numba

    from streamcov._config import available_cores
    from streamcov.stream.runtime import dask_runtime

    if numba.config.NUMBA_NUM_THREADS < 2 or available_cores() < 2:
        pytest.skip("one core or one numba thread here")
    with dask_runtime("synchronous") as rt:
        assert rt.numba_threads == min(available_cores(), numba.config.NUMBA_NUM_THREADS)
        assert rt.info["numba_threads"] == rt.numba_threads
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        for scheduler, workers in (("threads", 1), ("synchronous", None)):
            with dask_runtime(scheduler, workers) as rt:
                assert rt.numba_threads == 1 and rt.info["numba_threads"] == 1
        assert numba.get_num_threads() == 1
    finally:
        numba.set_num_threads(before)


def test_a_users_counts_wait_for_the_blocks_still_inside(two_threads):
    """``blas_threads_kept`` (a run on a user's in-process cluster) puts the user's counts back when it
    leaves, but not under a block still inside (another run's, or a task a failed run left running): that
    block keeps its limit, and the last block out restores the user's counts."""
    from streamcov._config import blas_threads_kept

    inside, release = threading.Event(), threading.Event()
    seen = []

    def task():
        with blas_threads(1):
            inside.set()
            release.wait(10)
            seen.append(blas_limit())

    with blas_threads_kept():
        t = threading.Thread(target=task)
        t.start()
        inside.wait(10)
    assert blas_limit() == 1          # the block still inside keeps its limit
    release.set()
    t.join(10)
    assert seen == [1] and blas_limit() == 2


def test_more_threads_than_cores_are_said_not_silently_cut(monkeypatch):
    """--workers 3 on 2 cores ran 2 threads with no word (the result's runtime showed it); the study's --jobs
    likewise. Both are said, with the count used."""
    import warnings

    from streamcov import _config
    from streamcov.stream import runtime
    from streamcov.tasks import study

    monkeypatch.setattr(_config, "available_cores", lambda: 2)
    with pytest.warns(UserWarning, match=r"^3 threads asked for \(--workers, dask\.workers\) and 2 cores available: "
                                         r"2 threads used$"):
        with runtime.dask_runtime("threads", 3) as rt:
            assert rt.info["dask_threads"] == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with runtime.dask_runtime("threads", 2):
            pass
        with runtime.dask_runtime("synchronous", None):
            pass
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 3))
    y = (X[:, 0] > 0).astype(np.int64)
    tr = np.arange(20) < 14
    from streamcov.tasks.schema import ModelTable

    model = ModelTable(loss="log_loss", learning_rate="optimal", C=10.0, epochs=2, scale="center", shuffle_blocks=2)
    with pytest.warns(UserWarning, match=r"^study\.jobs = 8 \(--jobs\) and 2 cores available: 2 processes used$"):
        study.accuracies(X, y, [("f", tr, ~tr)], np.arange(2), {"sigma": 1.0}, model, ["rff"], [4], 1, jobs=8)


WORKQUEUE_SCRIPT = r"""
import sys, threading, tomllib
import numpy as np
import numba
import streamcov as sc
from streamcov import linalg

rng = np.random.default_rng(0)
X = [rng.normal(size=(30, 60)) for _ in range(16)]
mats = np.stack([np.cov(rng.normal(size=(40, 20)), rowvar=False) for _ in range(32)])
errors = []

def work():
    try:
        for _ in range(10):
            sc.LogCovariance(center=(6,)).fit_transform(X)
            linalg.log_vectors(mats, 1e-3)
    except BaseException as exc:   # noqa: BLE001
        errors.append(exc)

threads = [threading.Thread(target=work) for _ in range(3)]
[t.start() for t in threads]
[t.join() for t in threads]
assert not errors, errors
d = tomllib.load(open(sys.argv[1], "rb"))
d["data"]["synthetic"]["n_sequences"] = 120
d["features"]["n_components"] = 50
d["model"]["epochs"] = 2
d["output"] = sys.argv[2]
result = sc.run(d, scheduler="threads", workers=2)
print(numba.threading_layer(), result["runtime"]["dask_threads"])
"""


def test_parallel_kernels_take_turns_under_numba_workqueue_layer(tmp_path):
    """numba's workqueue layer (its fallback where neither TBB nor OpenMP loads) aborts the process (SIGABRT: a
    notebook's kernel dies) when two threads run parallel kernels at once, as the engine's Dask threads and a
    user's thread pool do. Under it the kernels take turns (_config.parallel_kernels): three threads of
    in-memory descriptors and a run on two Dask threads finish."""
    env = {**os.environ, "NUMBA_THREADING_LAYER": "workqueue"}
    done = subprocess.run([sys.executable, "-c", WORKQUEUE_SCRIPT, str(REPO / "pipelines" / "synthetic.toml"),
                           str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    from streamcov._config import available_cores

    assert done.stdout.split()[-2:] == ["workqueue", str(min(2, available_cores()))], done.stdout


def test_an_interrupted_threaded_compute_waits_for_its_running_tasks():
    """Ctrl-C during a threaded computation: dask stops submitting tasks, but those running went on writing
    their chunks after the runtime (and the lock of the store or output folder held around it) was left. The
    runtime's pool is shut down on the way out, waiting for them; the tasks not yet started never run."""
    import signal
    import time

    import dask

    from streamcov.stream.runtime import dask_runtime

    started, finished = [], []

    def slow(i):
        started.append(i)
        time.sleep(0.4)
        finished.append(i)
        return i

    # Python's own SIGINT handler, whatever the test process inherited (a pytest-xdist worker may ignore SIGINT)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _interrupt_a_compute(dask_runtime, dask, started, slow)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert started and sorted(finished) == sorted(started) and len(started) < 8


def _interrupt_a_compute(dask_runtime, dask, started, slow):
    """Ctrl-C (a real SIGINT) once two tasks of a threaded computation of eight run."""
    import os
    import signal
    import time

    with pytest.raises(KeyboardInterrupt):
        with dask_runtime("threads", 2) as rt:
            def interrupt():   # Ctrl-C (a real SIGINT: it wakes the main thread's wait) once two tasks run
                while len(started) < 2:
                    time.sleep(0.01)
                os.kill(os.getpid(), signal.SIGINT)

            threading.Thread(target=interrupt, daemon=True).start()
            rt.compute(*[dask.delayed(slow, pure=False)(i) for i in range(8)])


def test_threaded_tasks_run_in_the_callers_context():
    """The runtime's own pool runs each task in a copy of the caller's context, as Dask's pool does: a message
    made inside a task names the flag as the command typed it (--workers), not the Python keyword."""
    import dask

    from streamcov.errors import arg, command_line
    from streamcov.stream.runtime import dask_runtime

    with command_line("run"), dask_runtime("threads", 2) as rt:
        inside = rt.compute(dask.delayed(arg, pure=False)("workers", 3))[0]
        assert inside == arg("workers", 3) == "--workers 3"


def test_a_local_cluster_of_fewer_workers_than_cores_gives_their_kernels_the_rest():
    """The workers of a LocalCluster streamcov starts share this machine's cores: --workers 1 on 2 cores ran
    every kernel on one thread. Each task's kernels now get the cores the workers leave; workers beyond the
    cores are said (they are not cut: processes may be asked for their memory)."""
    from streamcov._config import available_cores
    from streamcov.stream.runtime import dask_runtime

    cores = available_cores()
    with dask_runtime("local-cluster", 1) as rt:
        assert rt.numba_threads == cores and rt.info["numba_threads"] == cores
    with pytest.warns(UserWarning, match=rf"^{cores + 1} worker processes asked for \(--workers, dask\.workers\) and "
                                         rf"{cores} cores available: they take turns on the cores$"):
        with dask_runtime("local-cluster", cores + 1) as rt:
            assert rt.numba_threads == 1 and rt.info["workers"] == cores + 1


def test_available_cores_keeps_to_the_affinity_mask_and_a_cgroup_quota(monkeypatch):
    """A batch job's or a container's CPU quota bounds the plan, as the affinity mask does: a quota of
    1.5 CPUs on this machine plans 2 threads at most (dask rounds a quota up), a quota of 1 CPU one."""
    import dask.system

    from streamcov import _config

    # the affinity mask, set for real in a child process
    code = ("import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
            "from streamcov._config import available_cores, thread_plan; "
            "print(available_cores(), thread_plan().dask_threads)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1"], done.stdout
    # the quota as dask reads it from /sys/fs/cgroup (cpu.max, or cpu.cfs_quota_us / cpu.cfs_period_us)
    cores = len(os.sched_getaffinity(0))
    monkeypatch.setattr(dask.system, "_try_extract_cgroup_cpu_quota", lambda: (100_000, 100_000))
    assert _config.available_cores() == 1
    assert _config.thread_plan().dask_threads == 1
    monkeypatch.setattr(dask.system, "_try_extract_cgroup_cpu_quota", lambda: (150_000, 100_000))
    assert _config.available_cores() == min(2, cores)
    monkeypatch.setattr(dask.system, "_try_extract_cgroup_cpu_quota", lambda: (-1, 100_000))   # no quota
    assert _config.available_cores() == cores
