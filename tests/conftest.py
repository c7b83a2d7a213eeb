import csv
import os
import sys
from pathlib import Path

import numpy as np
import pytest

# GNU OpenMP's idle threads (numba's omp layer, scikit-learn's OpenMP code) spin after each parallel region: in
# the two test processes on two cores they spun on the core the other process needed. libgomp reads this once, when
# it loads: set before a test module imports numba or scikit-learn (numpy's OpenBLAS does not read it). A run of
# streamcov gives each Dask thread one numba thread, so it has no idle ones (the skeleton demo took the same time).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

sys.path.insert(0, str(Path(__file__).resolve().parent))

REPO = Path(__file__).resolve().parents[1]
# Real datasets live beside the repository (../shared/data); STREAMCOV_DATA overrides.
DATA = Path(os.environ.get("STREAMCOV_DATA", REPO.parent / "shared" / "data"))


# paper 000's eq. (3) map with the options the skeleton files had for it (they now ship Nystroem features): for the
# tests of what a random map does (its projections drawn from the seed, one map per pyramid window, its width)
RGW_SETS = ['features.map="rgw"', "features.theta=0.7", 'features.sampling="stratified"', "features.center=true"]


# The heaviest test files first (seconds of a run in two processes from a fresh numba cache, 2026-12-02, with
# OMP_WAIT_POLICY above: training 166, fault tolerance 110, pipeline 108, cluster 104, bad input 103, lbfgs 81,
# benchmarks 62, mocap 59, descriptor options 52, image features 45, study 43): with `-n 2 --dist loadfile` (the
# README's command) each file runs whole in one of the two processes, taken in collection order
# (--no-loadscope-reorder), and the two end together only when no long file is left for last. Each process starts
# with one file; the second starts with the image features, which need none of the skeleton kernels: both processes
# began with a skeleton file and compiled the same kernels side by side (about 40 s each), where now the second
# finds some of them in numba's cache. That gain is within the spread of runs (the whole suite took 987 s before
# and 882 s after in a worktree, one run each). The fault-tolerance file comes after a skeleton file: its worker
# processes then load the kernels from the cache, where as the first file each of them compiled them again (95 s
# of its 219 on 2026-11-30).
HEAVY_FIRST = ("test_training.py", "test_images_features.py", "test_pipeline.py", "test_fault_tolerance.py",
               "test_cluster.py", "test_lbfgs.py", "test_bad_input.py", "test_benchmarks.py", "test_mocap_asf_amc.py",
               "test_kernels_fast.py", "test_descriptor_options.py", "test_study.py", "test_mirror.py",
               "test_readme_api.py")


# POSIX named semaphores (Linux: /dev/shm/sem.*) of the processes the tests kill with SIGKILL (a run and its
# resource tracker, a nanny and its worker: every kill -9 test kills the whole group): nothing is left to unlink
# them, and each run of the suite left about a hundred. The suite removes, when it ends, those made while it ran
# that no living process maps any more; one a process still holds (mapped) is never touched.
SHM = Path("/dev/shm")


def _semaphores() -> set:
    try:
        return {p.name for p in SHM.iterdir() if p.name.startswith("sem.")}
    except OSError:   # no /dev/shm (not Linux): nothing to look after
        return set()


def _mapped_semaphores() -> set:
    """The names of /dev/shm/sem.* some living process maps (every process of this user that /proc shows), by
    inode: glibc maps a semaphore's file under a temporary name, then links it to the semaphore's."""
    held = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/maps") as fh:
                held.update(int(line.split()[4]) for line in fh if " /dev/shm/" in line)
        except (OSError, ValueError, IndexError):   # a process gone meanwhile, or another user's
            continue
    names = set()
    for name in _semaphores():
        try:
            if (SHM / name).stat().st_ino in held:
                names.add(name)
        except OSError:
            continue
    return names


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput"):   # the controller (or a run without xdist) only
        session.config._semaphores_before = _semaphores()


def pytest_sessionfinish(session, exitstatus):
    before = getattr(session.config, "_semaphores_before", None)
    if before is None:
        return
    for name in sorted((_semaphores() - before) - _mapped_semaphores()):
        try:
            (SHM / name).unlink()
        except OSError:
            pass


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))   # stable: each file's own order kept


def dataset(name: str) -> Path:
    path = DATA / name / "raw"
    if not path.is_dir():
        pytest.skip(f"real dataset {name} not found under {DATA}")
    return path


def assert_same_bits(a, b, what: str = "arrays") -> None:
    """``a`` and ``b`` are the same dtype, shape and bytes; a failure says how many entries differ and by how much
    (pytest's own diff of two long byte strings runs for minutes)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, f"{what}: {a.dtype}{a.shape} against {b.dtype}{b.shape}"
    if a.tobytes() != b.tobytes():
        differ = a != b if a.dtype.kind in "fiub" else np.ones(a.shape, dtype=bool)
        worst = float(np.max(np.abs(a.astype(float) - b.astype(float)))) if a.dtype.kind in "fiu" else None
        raise AssertionError(f"{what}: {int(np.count_nonzero(differ))} of {a.size} entries differ "
                             f"(largest difference {worst})")


def predictions(path, key=lambda i: i) -> dict:
    """``{key(id): predicted}`` of a predictions CSV (a run's or ``streamcov predict``'s; both name the
    columns ``id`` and ``predicted``)."""
    with open(path, newline="") as fh:
        return {key(r["id"]): r["predicted"] for r in csv.DictReader(fh)}


@pytest.fixture(scope="session", autouse=True)
def own_cache(tmp_path_factory):
    """The user cache (network weights, archives known by their contents) of this test session alone: tests
    write nothing into the user's, and find nothing a run outside them left there."""
    old = os.environ.get("STREAMCOV_CACHE_DIR")
    os.environ["STREAMCOV_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if old is None:
        os.environ.pop("STREAMCOV_CACHE_DIR", None)
    else:
        os.environ["STREAMCOV_CACHE_DIR"] = old


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(params=["threads", "local-cluster"])
def scheduler(request):
    """The same test on the threaded scheduler and on a 2-worker LocalCluster."""
    return request.param


@pytest.fixture(scope="module")
def one_blas_thread():
    """OpenBLAS threads on many small matrices thrash when the cores are shared; speed only."""
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="session")
def hdm05():
    """The HDM05 11-class ASF/AMC archive (../shared/data/hdm05/raw)."""
    return dataset("hdm05")


@pytest.fixture
def as_command():
    """Messages as the ``streamcov`` command shows them (``--set k=v: ...``): the tests that use it call what
    the command calls; the Python spellings (``overrides item 'k=v': ...``) are tested in test_bad_input.py
    (test_messages_name_arguments_as_typed)."""
    from streamcov.errors import command_line

    with command_line():
        yield
