"""The pipeline on a real dask.distributed cluster: a scheduler and two worker processes.

The scheduler and the workers are separate ``dask`` processes bound to
127.0.0.1, started the way a user starts them (``dask scheduler
--scheduler-file``, ``dask worker --scheduler-file``); the pipeline reaches
them through ``tcp://`` like ``streamcov run --scheduler tcp://HOST:PORT``.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, assert_same_bits
from streamcov.tasks.config import load_config
from streamcov.tasks import run as run_pipeline
from streamcov.data.skeletons import ingest
from streamcov.data.synth import SyntheticSkeletons

# separate processes (a scheduler, workers, kill -9): the minimum-versions CI job skips them
pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent


def spawn(cmd, log_path=None, cwd=None, env=None):
    """Start ``cmd`` in a process group of its own so that it can be killed as a whole; ``env`` is added to
    this process's environment."""
    out = open(log_path, "wb") if log_path else subprocess.DEVNULL
    try:
        return subprocess.Popen([str(c) for c in cmd], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=cwd, env={**os.environ, **env} if env else None)
    finally:
        if log_path:
            out.close()


def kill_group(p):
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    p.wait(timeout=10)


def streamcov_cmd():
    exe = BIN / "streamcov"
    return [exe] if exe.is_file() else [sys.executable, "-m", "streamcov.cli"]


class ProcessCluster:
    """``dask scheduler`` and ``n`` single-threaded ``dask worker`` processes on loopback.

    Each worker is started as users start one (with its nanny, which also
    pins BLAS/OpenMP to one thread in the worker process) in a process group
    of its own: killing the group takes nanny and worker away for good.
    ``close`` kills every process group, also after a failed start. ``worker_env`` is added to the workers'
    environment.
    """

    def __init__(self, folder, n_workers=2, timeout=60.0, worker_env=None):
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        sfile = folder / "scheduler.json"
        dask = BIN / "dask"
        sched = [dask, "scheduler"] if dask.is_file() else [sys.executable, "-m", "distributed.cli.dask_scheduler"]
        work = [dask, "worker"] if dask.is_file() else [sys.executable, "-m", "distributed.cli.dask_worker"]
        self.folder = folder
        self.workers = []
        self.scheduler = spawn(sched + ["--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                        "--scheduler-file", sfile, "--idle-timeout", "600"],
                               folder / "scheduler.log")
        try:
            t_end = time.monotonic() + timeout
            info = None
            while info is None:
                try:
                    info = json.loads(sfile.read_text())
                except (FileNotFoundError, json.JSONDecodeError):
                    if time.monotonic() > t_end or self.scheduler.poll() is not None:
                        raise RuntimeError("dask scheduler did not start:\n"
                                           + (folder / "scheduler.log").read_text()[-2000:])
                    time.sleep(0.05)
            self.address = info["address"]
            for i in range(n_workers):
                self.workers.append(spawn(
                    work + ["--scheduler-file", sfile, "--nthreads", "1",
                            "--host", "127.0.0.1", "--no-dashboard", "--death-timeout", "60",
                            "--local-directory", folder / f"worker{i}"],
                    folder / f"worker{i}.log", cwd=folder, env=worker_env))   # as on a cluster: not the
                # command's working folder
            self.cwd = folder
            from distributed import Client

            with Client(self.address, timeout=timeout) as client:
                client.wait_for_workers(n_workers, timeout=timeout)
        except BaseException:
            self.close()
            raise

    def close(self):
        for p in self.workers + [self.scheduler]:
            kill_group(p)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = ProcessCluster(tmp_path_factory.mktemp("cluster"), n_workers=2)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def synth_store(tmp_path_factory):
    """200 generated sequences in small frame chunks, so many sequences (12) cross a chunk boundary."""
    path = tmp_path_factory.mktemp("store") / "synth.zarr"
    return ingest(SyntheticSkeletons(n_sequences=200, seed=5), path, chunk_frames=700)


def pipeline_cfg(store, out, *sets):
    # the mirror view too: its chunk tasks compute the windows of both views (the first is the plain descriptor)
    base = [f'output="{out}"', "features.n_components=300", "dask.block_size=24", "descriptor.mirror=true", *sets]
    return load_config(REPO / "pipelines" / "msr_action3d.toml", base, store=store.path)


def read_features(result):
    import zarr

    g = zarr.open_group(result["features_path"], mode="r")
    return np.asarray(g["X"][:]), np.asarray(g["done"][:])


@pytest.fixture(scope="module")
def threaded(synth_store, tmp_path_factory):
    """The reference: the same pipeline and seed on the threaded scheduler."""
    return run_pipeline(pipeline_cfg(synth_store, tmp_path_factory.mktemp("threads")),
                        scheduler="threads")


def test_cli_on_a_cluster_of_processes_matches_threads(cluster, synth_store, threaded, tmp_path):
    """``streamcov run --scheduler tcp://...`` reaches the cluster, reports it, and gives what the threaded
    scheduler gives with the same seed: bitwise equal features and model, equal accuracy. (One run through the
    command: the command calls the runner that the Python API calls.) The store and output are given relative to
    the command's working folder, which is not the workers': paths went to the tasks as typed, and the workers
    found no store there (a FileNotFoundError traceback), or another folder's."""
    cmd = streamcov_cmd() + ["run", REPO / "pipelines" / "msr_action3d.toml", "--store",
                             os.path.relpath(synth_store.path, tmp_path), "--output", "cli", "--json", "--scheduler",
                             cluster.address, "--set", "features.n_components=300",
                             "--set", "dask.block_size=24", "--set", "descriptor.mirror=true"]
    assert os.path.realpath(cluster.cwd) != os.path.realpath(tmp_path)
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    # absolute, as the store: the result is read from any folder (the output was given relative to the command's)
    assert res["features_path"] == str((tmp_path / "cli" / "features.zarr").absolute())
    assert res["model_path"] == str((tmp_path / "cli" / "model").absolute())
    assert res["runtime"] == {"scheduler": cluster.address, "workers": 2, "threads_per_worker": [1],
                              "numba_threads": 1}
    assert res["featurized_sequences"] == 200
    X, done = read_features(res)
    Xb, doneb = read_features(threaded)
    assert done.all() and doneb.all()
    assert X.shape == (200, 100)   # the file's Nystroem map: one landmark per training row (100 < 300)
    assert_same_bits(X, Xb)  # bitwise, not approximately
    assert res["accuracy"] == threaded["accuracy"]
    # 10 balanced classes, 100 test sequences: chance is 0.10 with a standard deviation of 0.03; 0.3 is 6.7 of
    # them above it (measured: 0.98)
    assert res["accuracy"] > 0.3
    model = np.load(Path(res["model_path"]) / "model.npz", allow_pickle=False)
    model_b = np.load(Path(threaded["model_path"]) / "model.npz", allow_pickle=False)
    assert sorted(model.files) == sorted(model_b.files)
    for k in model.files:
        assert_same_bits(model[k], model_b[k], k)


def test_a_notebooks_client_or_cluster_object_is_taken_as_the_scheduler(synth_store, threaded, tmp_path):
    """scheduler=client (a notebook's distributed.Client) or its cluster object was refused with the names and
    the address form; its scheduler's address is used, the features are the threaded run's, and the user's client
    is left working."""
    from distributed import Client

    with Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=":0") as client:
        for i, given in enumerate((client, client.cluster)):
            res = run_pipeline(pipeline_cfg(synth_store, tmp_path / f"o{i}"), scheduler=given)
            assert res["runtime"]["scheduler"] == client.scheduler.address
            X, done = read_features(res)
            X0, _ = read_features(threaded)
            assert done.all() and np.array_equal(X, X0)
        assert client.submit(lambda x: x + 1, 1).result() == 2
    # once closed: one line, not an AttributeError on its missing scheduler
    from streamcov.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^scheduler=<Client: No scheduler connected>: that Client is closed \(no "
                                          r"scheduler connected\); give a running one, or its scheduler's address$"):
        run_pipeline(pipeline_cfg(synth_store, tmp_path / "o3"), scheduler=client)


def test_a_scheduler_without_workers_is_an_error(synth_store, tmp_path, monkeypatch):
    """A scheduler that has no worker took the run's work and held it without a word (a run waited until it
    was killed, its output folder made); it is refused WORKER_WAIT seconds after connecting, before any
    output is written."""
    from distributed import LocalCluster

    import streamcov.stream.runtime as runtime
    from streamcov.errors import StreamcovError

    from streamcov.errors import ConfigError

    monkeypatch.setenv("STREAMCOV_WORKER_WAIT", "1")
    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as empty:
        addr = empty.scheduler_address
        with pytest.raises(StreamcovError, match=rf"^scheduler='{re.escape(addr)}': the scheduler there has no "
                                                 rf"workers \(waited 1 s\); start some with `dask worker "
                                                 rf"{re.escape(addr)}`, or give them longer with "
                                                 rf"STREAMCOV_WORKER_WAIT=SECONDS, or use scheduler='local-cluster' "
                                                 rf"or scheduler='threads'$"):
            run_pipeline(pipeline_cfg(synth_store, tmp_path / "x"), scheduler=addr)
        for bad in ("soon", "0", "-5", "inf"):
            monkeypatch.setenv("STREAMCOV_WORKER_WAIT", bad)
            with pytest.raises(ConfigError, match=rf"^STREAMCOV_WORKER_WAIT='{bad}': expected the seconds to wait "
                                                  rf"for a worker of a scheduler address \(a number > 0\), or leave "
                                                  rf"it unset \(30 s\)$"):
                run_pipeline(pipeline_cfg(synth_store, tmp_path / "x"), scheduler=addr)
    assert not (tmp_path / "x").exists()
    monkeypatch.delenv("STREAMCOV_WORKER_WAIT")
    assert runtime.worker_wait() == runtime.WORKER_WAIT


def test_unreachable_scheduler_is_an_error(synth_store, tmp_path, monkeypatch):
    """A scheduler address nobody listens on fails after Dask's connect timeout, in one line; one where
    something accepts and says nothing (not a Dask scheduler) fails CONNECT_GRACE seconds after it, where
    Client had waited forever."""
    import socket

    import dask
    import distributed  # noqa: F401  (its config defaults loaded before dask.config.set, which restores the old dict)

    import streamcov.stream.runtime as runtime
    from streamcov.errors import StreamcovError

    with socket.socket() as s:  # a free port, closed again: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        with pytest.raises(StreamcovError, match=r"^scheduler='tcp://127.0.0.1:\d+': no Dask scheduler answers there "
                                                 r"\((OSError|TimeoutError)\); start one with `dask scheduler` or use "
                                                 r"scheduler='threads'$"):
            run_pipeline(pipeline_cfg(synth_store, tmp_path / "x"), scheduler=f"tcp://127.0.0.1:{port}")
    monkeypatch.setattr(runtime, "CONNECT_GRACE", 1.0)
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen(8)
        with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
            with pytest.raises(StreamcovError, match=r"^scheduler='tcp://127.0.0.1:\d+': something accepted the "
                                                     r"connection but no Dask scheduler answered in 2 s; give the "
                                                     r"scheduler's address \(its default port is 8786; 8787 is its "
                                                     r"dashboard\)$"):
                run_pipeline(pipeline_cfg(synth_store, tmp_path / "x"),
                             scheduler=f"tcp://127.0.0.1:{mute.getsockname()[1]}")
        # the client given up (still connecting) is nobody's default: the user's own dask work runs on
        import dask.array as da
        from distributed import default_client

        with pytest.raises(ValueError, match="No clients found"):
            default_client()
        assert dask.config.get("scheduler", None) != "dask.distributed"
        assert int(da.ones(4).sum().compute(scheduler="threads")) == 4
        assert int(da.ones(4).sum().compute()) == 4

def test_a_failed_connection_leaves_no_thread_or_descriptor(synth_store, tmp_path, monkeypatch):
    """Each run given an address where no scheduler answers (refused, or accepted and silent) left the IO
    loop thread of Dask's half-made client running, with 3 descriptors: a notebook retrying a mistyped port
    gained a thread and 3 descriptors per try. The second and third tries now leave what the first left."""
    import os
    import socket
    import threading

    import dask
    import distributed  # noqa: F401  (its config defaults loaded before dask.config.set)

    import streamcov.stream.runtime as runtime
    from streamcov.errors import StreamcovError

    def held():
        for t in threading.enumerate():   # the run gave up on its connecting thread: let it end
            if t.name == "streamcov-connect":
                t.join(10)
        return threading.active_count(), len(os.listdir("/proc/self/fd"))

    monkeypatch.setattr(runtime, "CONNECT_GRACE", 0.5)
    with socket.socket() as s:  # a free port, closed again: nothing listens there
        s.bind(("127.0.0.1", 0))
        refused = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    with socket.socket() as mute, dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        mute.bind(("127.0.0.1", 0))
        mute.listen(8)
        silent = f"tcp://127.0.0.1:{mute.getsockname()[1]}"
        counts = []
        for _ in range(3):
            for address in (refused, silent):
                with pytest.raises(StreamcovError, match=r"^scheduler='tcp://127.0.0.1:\d+': "):
                    run_pipeline(pipeline_cfg(synth_store, tmp_path / "x"), scheduler=address)
            counts.append(held())
    assert counts[1] == counts[0] and counts[2] == counts[0], f"(threads, descriptors) after each try: {counts}"


def test_the_security_of_a_client_given_as_scheduler_goes_to_the_runs_own_client(monkeypatch):
    """A tls:// cluster's client given as the scheduler: the run's own client connected to its address without
    its certificates and was refused (TypeError: TLS expects a ssl_context). The given object's security is kept
    by address and passed to the run's client; an address typed alone connects as before."""
    from distributed import Client

    import streamcov.stream.runtime as runtime

    class Given(Client):   # what _address_of reads of a running client, without a cluster to run
        def __init__(self):
            pass

        scheduler = type("S", (), {"address": "tls://127.0.0.1:8786"})()
        status = "running"
        security = "its certificates"

    made = []

    class Fake:
        def __init__(self, address, **kwargs):
            made.append((address, kwargs))

    monkeypatch.setattr(runtime, "_SECURITY", {})
    monkeypatch.setattr(runtime, "_handshake", lambda *a: True)   # no server to probe: Fake stands for Client
    assert runtime._address_of(Given()) == "tls://127.0.0.1:8786"
    runtime._connect(Fake, "tls://127.0.0.1:8786")
    runtime._connect(Fake, "tcp://127.0.0.1:8786")
    assert made == [("tls://127.0.0.1:8786", {"set_as_default": False, "security": "its certificates"}),
                    ("tcp://127.0.0.1:8786", {"set_as_default": False})]


@pytest.mark.parametrize("kill", ["os.kill(os.getpid(), signal.SIGTERM)", "os.killpg(0, signal.SIGTERM)",
                                  "os.killpg(0, signal.SIGHUP)"])
def test_sigterm_while_a_local_cluster_starts_is_one_line(tmp_path, kill):
    """SIGTERM (``timeout``, a batch scheduler) while Dask's LocalCluster was being made raised inside its
    constructor: the half-made cluster was closed by Dask's exit hook, which failed with a 28-line traceback
    under the command's line. The signal is held until the cluster is in the hands of the run's cleanup, then
    ends the command as anywhere else: one line, 143, no traceback. Sent to the whole process group (as
    ``timeout`` and batch schedulers do), it also kills the nannies' workers and the cluster fails to start:
    the command is terminated all the same, not "failed to start". A hangup of its terminal (SIGHUP to the
    group) is the same, 129: it also killed multiprocessing's resource tracker (which ignores SIGINT and SIGTERM
    only), and the cleanup printed "process died unexpectedly" and a KeyError traceback per semaphore."""
    script = tmp_path / "term.py"
    script.write_text(
        "import os, signal, sys, threading\n"
        "from distributed import LocalCluster\n"
        "made = LocalCluster.__init__\n"
        "def init(self, *a, **k):\n"
        f"    threading.Timer(0.3, lambda: {kill}).start()\n"
        "    return made(self, *a, **k)\n"
        "LocalCluster.__init__ = init\n"
        "from streamcov.cli import main\n"
        "if __name__ == '__main__':\n"
        "    sys.exit(main(sys.argv[1:]))\n")
    done = subprocess.run([sys.executable, str(script), "run", str(REPO / "pipelines" / "synthetic.toml"),
                           "--workers", "2", "--output", str(tmp_path / "o"), "--quiet"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, start_new_session=True)
    hup = "SIGHUP" in kill
    assert done.returncode == (129 if hup else 143), done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[-1] == \
        ("streamcov run: hung up (SIGHUP)" if hup else "streamcov run: terminated"), done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr[-3000:]
    assert "resource_tracker" not in done.stderr, done.stderr[-3000:]


def test_ctrl_c_while_a_local_cluster_starts_is_one_line(tmp_path):
    """A terminal's Ctrl-C (SIGINT to the whole process group) while the LocalCluster was being made was lost:
    SIGINT was ignored then, so that the workers inherited that, and the run went on. It is now held until the
    cluster is in the hands of the run's cleanup, then ends the command: one line, 130, no worker's traceback
    (the workers ignore SIGINT themselves, from their preload)."""
    import signal
    import time

    marker = tmp_path / "up"
    script = tmp_path / "intr.py"
    script.write_text(
        "import sys, time\n"
        "from distributed import LocalCluster\n"
        "made = LocalCluster.__init__\n"
        "def init(self, *a, **k):\n"
        "    made(self, *a, **k)\n"
        f"    open({str(marker)!r}, 'w').close()\n"
        "    time.sleep(3.0)   # still in the making: the Ctrl-C comes now\n"
        "LocalCluster.__init__ = init\n"
        "from streamcov.cli import main\n"
        "if __name__ == '__main__':\n"
        "    sys.exit(main(sys.argv[1:]))\n")
    proc = subprocess.Popen([sys.executable, str(script), "run", str(REPO / "pipelines" / "synthetic.toml"),
                             "--workers", "2", "--output", str(tmp_path / "o"), "--quiet", "--set",
                             "model.epochs=10000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path, start_new_session=True,
                            # as from a terminal: a process of the test suite may ignore SIGINT, which a child inherits
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        t0 = time.monotonic()
        while not marker.exists() and proc.poll() is None and time.monotonic() - t0 < 120:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)   # lost, the run went on for 10,000 epochs
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130 and err.strip() == "streamcov run: interrupted", err[-3000:]


def test_the_workers_of_a_local_cluster_ignore_sigint_and_a_users_preload_stays():
    """Every worker of a LocalCluster streamcov starts ignores SIGINT (its preload), a worker started after the
    cluster too: one started when SIGINT was no longer ignored here printed a traceback at the next Ctrl-C. A
    preload of the user's Dask configuration is kept beside it."""
    import signal

    import dask

    from streamcov.stream.runtime import WORKER_PRELOAD, dask_runtime

    here = signal.getsignal(signal.SIGINT)   # (a test process may ignore it)
    with dask.config.set({"distributed.worker.preload": ["json"]}):
        with dask_runtime("local-cluster", 1) as rt:
            client = rt.client
            assert set(client.run(lambda: int(signal.getsignal(signal.SIGINT))).values()) == {int(signal.SIG_IGN)}
            client.cluster.scale(2)   # a worker started now, after the start held its Ctrl-C
            client.wait_for_workers(2, timeout=120)
            assert set(client.run(lambda: int(signal.getsignal(signal.SIGINT))).values()) == {int(signal.SIG_IGN)}
            assert set(map(tuple, client.run(lambda dask_worker: [p.name for p in dask_worker.preloads]).values())) \
                == {("json", WORKER_PRELOAD)}
    assert signal.getsignal(signal.SIGINT) is here   # put back


def test_the_loggers_held_for_overlapping_local_clusters_come_back_after_the_last():
    """Two local clusters overlapping (runs in a notebook's threads): the second's hold saved CRITICAL as the
    level to put back, and the loggers stayed silenced for good."""
    import logging

    from streamcov.stream.runtime import _hold_distributed_logs, _release_distributed_logs

    before = {n: logging.getLogger(n).level for n in ("distributed", "asyncio")}
    a = _hold_distributed_logs()
    b = _hold_distributed_logs()
    _release_distributed_logs(a)
    assert {n: logging.getLogger(n).level for n in before} == {n: logging.CRITICAL for n in before}   # b runs
    _release_distributed_logs(b)
    assert {n: logging.getLogger(n).level for n in before} == before


WORKER = "streamcov.stream._worker_preload"


@pytest.mark.parametrize("preload, argv, expected", [
    (None, None, ([WORKER], [])),
    ("mymod", None, (["mymod", WORKER], [])),                          # one name: not spread into letters
    (["a"], ["--x"], (["a", WORKER], ["--x"])),                       # one argument list for every preload
    (["a", "b"], [["--x"], []], (["a", "b", WORKER], [["--x"], [], []])),   # one per preload: ours takes none
])
def test_the_workers_preloads_keep_the_users(preload, argv, expected):
    """A user's Dask preload given as one name was spread into its letters (each worker imported ``m``), and
    arguments given one list per preload lacked ours: every worker failed to start."""
    import dask

    from streamcov.stream.runtime import _worker_preloads

    with dask.config.set({"distributed.worker.preload": preload, "distributed.worker.preload-argv": argv}):
        assert _worker_preloads(dask) == expected


@pytest.mark.parametrize("worker_has", ["no streamcov", "another version"])
def test_a_worker_without_this_streamcov_is_one_line(synth_store, tmp_path, worker_has):
    """A worker started from an environment without streamcov failed the numba check with an "internal error"
    traceback (ModuleNotFoundError unpickling it); one of another version would run other kernels. Both are
    refused in one line naming the worker, before anything is written."""
    from streamcov.errors import ConfigError

    shadow = tmp_path / "shadow"
    shadow.mkdir()
    if worker_has == "no streamcov":
        (shadow / "sitecustomize.py").write_text(
            "import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'streamcov' or name.startswith('streamcov.'):\n"
            "            raise ModuleNotFoundError(f'No module named {name!r}')\n"
            "sys.meta_path.insert(0, Block())\n")
        said = r"cannot import streamcov \(ModuleNotFoundError: No module named 'streamcov'\)"
    else:
        (shadow / "streamcov").mkdir()
        (shadow / "streamcov" / "__init__.py").write_text("__version__ = '0.0.1'\n")
        said = r"runs streamcov '0\.0\.1', this command '[^']+'"
    cluster = ProcessCluster(tmp_path / "cluster", n_workers=1, worker_env={"PYTHONPATH": str(shadow)})
    try:
        with pytest.raises(ConfigError, match=rf"^Dask worker tcp://[\d.]+:\d+: {said}; install this streamcov in "
                                              rf"the workers' environment and restart them$"):
            run_pipeline(pipeline_cfg(synth_store, tmp_path / "x"), scheduler=cluster.address)
        assert not (tmp_path / "x").exists()
    finally:
        cluster.close()


def test_a_scheduler_lost_mid_run_is_one_line(tmp_path):
    """The scheduler of an address killed during a run: the calls of the run failed with whatever Dask raised
    there (OSError from retry_lost, "Unable to contact Actor's worker", RuntimeError "ConnectionPool is
    closed"), each an "internal error" traceback. Now one line that says the scheduler was lost."""
    import dask

    from streamcov.errors import StreamcovError
    from streamcov.stream.runtime import dask_runtime

    def fails():
        raise ValueError("the task's own error")

    cluster = ProcessCluster(tmp_path / "cluster", n_workers=1)
    address = cluster.address
    try:
        with dask.config.set({"distributed.comm.timeouts.connect": "3s"}):
            with pytest.raises(ValueError, match="^the task's own error$"):   # the scheduler alive: as it was
                with dask_runtime(scheduler=address) as rt:
                    rt.compute(dask.delayed(fails)())
            with pytest.raises(StreamcovError, match=rf"^scheduler='{re.escape(address)}': the run lost its Dask "
                                                     rf"scheduler \(\w+\); restart the scheduler and its workers, "
                                                     rf"then run the command again \(what was written is reused\)$"):
                with dask_runtime(scheduler=address) as rt:
                    assert list(rt.compute(dask.delayed(sum)([1, 2]))) == [3]   # the cluster works until then
                    kill_group(cluster.scheduler)
                    rt.compute(dask.delayed(sum)([1, 2]))
    finally:
        cluster.close()


def test_the_thread_plan_plugin_unpickles_without_streamcov():
    """The run's worker plugin stays on a cluster whose run was killed (kill -9, a lost session): a worker
    started later from an environment without streamcov failed to start on it and was left closing, holding
    every later client of that cluster. Its pickle needs zarr and distributed alone, and its name is the run's."""
    import cloudpickle

    from streamcov.stream.runtime import PLUGIN_NAME, _thread_plan_plugin

    plugin = _thread_plan_plugin()
    assert plugin.name.startswith(PLUGIN_NAME) and plugin.name != _thread_plan_plugin().name
    code = ("import sys, pickle\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] == 'streamcov':\n"
            "            raise ModuleNotFoundError(name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "import zarr\n"
            "plugin = pickle.loads(sys.stdin.buffer.read())\n"
            "worker = type('W', (), {'state': type('S', (), {'nthreads': 3})()})()\n"
            "plugin.setup(worker)\n"
            "print(zarr.config.get('threading.max_workers'), 'streamcov' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], input=cloudpickle.dumps(plugin), capture_output=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.decode().split() == ["3", "False"]


def test_a_worker_lost_in_the_version_check_is_not_called_an_install_problem():
    """With on_error="return" the broadcast's own errors come back as answers: a worker gone as it was asked
    was reported as one that cannot import streamcov. It is the lost-worker line; an error other than an
    import's is named as itself."""
    from distributed.comm.core import CommClosedError

    from streamcov import __version__
    from streamcov.errors import ConfigError, StreamcovError
    from streamcov.stream.runtime import _check_workers

    class Client:
        def __init__(self, answer):
            self.answer = answer

        def scheduler_info(self, n_workers=5):
            return {"workers": {"tcp://127.0.0.1:1": {"status": "running"}, "tcp://127.0.0.1:2": {}}}

        def run(self, func, *args, workers=None, **kwargs):
            return {"tcp://127.0.0.1:1": __version__, "tcp://127.0.0.1:2": self.answer}

    with pytest.raises(StreamcovError, match=r"^a Dask worker was lost while the run checked the workers' "
                                             r"environment \(CommClosedError: Stream is closed\); "):
        _check_workers(Client(CommClosedError("Stream is closed")), 5.0)
    with pytest.raises(ConfigError, match=r"^Dask worker tcp://127.0.0.1:2: failed to import streamcov "
                                          r"\(RuntimeError: numpy ABI\); install this streamcov "):
        _check_workers(Client(RuntimeError("numpy ABI")), 5.0)


def test_workers_that_do_not_answer_the_check_are_one_line():
    """Client.run has no timeout: a worker stopped (SIGSTOP) or left closing by a failed start held every run
    on that cluster at its check, without a word. Only running workers are asked, for the worker wait."""
    import threading

    from streamcov.errors import StreamcovError
    from streamcov.stream.runtime import _check_workers

    asked, forever = [], threading.Event()

    class Client:
        def scheduler_info(self, n_workers=5):
            return {"workers": {"tcp://127.0.0.1:1": {"status": "running"},
                                "tcp://127.0.0.1:2": {"status": "closing"}}}

        def run(self, func, *args, workers=None, **kwargs):
            asked.append(workers)
            forever.wait(30)

    with pytest.raises(StreamcovError, match=r"^the Dask workers tcp://127.0.0.1:1 did not answer the run's check of "
                                             r"their environment in 0.5 s \(a worker stopped, or left closing by a "
                                             r"failed start\); restart them, or give them longer with "
                                             r"STREAMCOV_WORKER_WAIT=SECONDS$"):
        _check_workers(Client(), 0.5)
    forever.set()
    assert asked == [["tcp://127.0.0.1:1"]]


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_signal_held_while_a_cluster_starts_is_delivered_when_the_start_never_ends(signame):
    """distributed before 2026.7 never returned from a LocalCluster's start whose workers a SIGTERM or SIGHUP to
    the process group had killed: the command held the signal until the start returned, and waited forever (the
    declared floor, 2024.8). A signal held START_HOLD seconds is now delivered where the main thread is (here a
    start that sleeps); the handler there before is put back. (0.5 s here in place of START_HOLD.)"""
    code = ("import os, signal, sys, time\n"
            "from streamcov.stream import runtime\n"
            "class Stop(KeyboardInterrupt):\n"
            "    pass\n"
            "def stop(signo, frame):\n"
            "    raise Stop\n"
            f"S = signal.{signame}\n"
            "signal.signal(S, stop)\n"
            "held = []\n"
            "hold = runtime._sigint_held(held, 0.5) if S == signal.SIGINT else runtime._sigterm_held(held, 0.5)\n"
            "t0 = time.monotonic()\n"
            "try:\n"
            "    with hold:\n"
            "        os.kill(os.getpid(), S)\n"
            "        time.sleep(0.1)\n"
            "        print('held', len(held), flush=True)\n"
            "        time.sleep(30)\n"
            "    print('not reached', flush=True)\n"
            "except Stop:\n"
            "    print('delivered', 0.5 <= time.monotonic() - t0 < 5, flush=True)\n"
            "print(signal.getsignal(S) is stop)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:3] == ["held 1", "delivered True", "True"], done.stdout


def test_the_resource_trackers_start_with_sighup_blocked():
    """multiprocessing's resource tracker (a local cluster's) and joblib's loky one (study --jobs) ignore SIGINT
    and SIGTERM, not SIGHUP: a hangup to the process group killed them, and the command's cleanup printed
    "resource_tracker: process died unexpectedly" and a KeyError traceback per semaphore or memory-mapped folder.
    Each is now started with SIGHUP blocked (its status's SigBlk), and the starting thread's mask is put back."""
    code = ("import signal\n"
            "from multiprocessing import resource_tracker as mp\n"
            "from joblib.externals.loky.backend import resource_tracker as lk\n"
            "from streamcov.stream.runtime import resource_trackers_outlive_hangup\n"
            "resource_trackers_outlive_hangup(loky=True)\n"
            "def blocked(pid):\n"
            "    line = [l for l in open(f'/proc/{pid}/status') if l.startswith('SigBlk:')][0]\n"
            "    return bool(int(line.split()[1], 16) >> (signal.SIGHUP - 1) & 1)\n"
            "print(blocked(mp._resource_tracker._pid), blocked(lk._resource_tracker._pid),\n"
            "      signal.SIGHUP in signal.pthread_sigmask(signal.SIG_BLOCK, []))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "True", "False"], done.stdout


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_during_a_scatter_comes_after_it(signum, monkeypatch):
    """A Ctrl-C, SIGTERM or SIGHUP raised inside the scatter of a fitted map left its copy on workers whose copy the
    scheduler had lost track of (163 MB held until the worker restarted). It is held until the scatter returns,
    then raised; a second Ctrl-C a second or more later interrupts the scatter at once."""
    import threading

    from streamcov.stream import runtime

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are handled in the main thread")
    done = []

    class Terminated(KeyboardInterrupt):
        pass

    def terminated(signo, frame):
        raise Terminated

    class Client:
        def __init__(self, second=False):
            self.second = second

        def scatter(self, data, broadcast):
            signal.raise_signal(getattr(signal, signum))
            time.sleep(0.2)
            if self.second:
                time.sleep(1.0)
                signal.raise_signal(signal.SIGINT)
                time.sleep(0.2)
            done.append(broadcast)
            return {key: "future" for key in data}

    previous = signal.signal(signal.SIGTERM, terminated)
    previous_hup = signal.signal(signal.SIGHUP, terminated)
    # Python's own Ctrl-C handler, whatever an earlier test of this process left (an ignored SIGINT is not held)
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(Terminated if signum != "SIGINT" else KeyboardInterrupt):
            runtime.scatter_to_all(Client(), "k", object())
        assert done == [True]
        if signum == "SIGINT":
            with pytest.raises(KeyboardInterrupt):
                runtime.scatter_to_all(Client(second=True), "k", object())
            assert done == [True]   # the second Ctrl-C ended the scatter
            echo = Client()

            def twice(data, broadcast):
                signal.raise_signal(signal.SIGINT)
                signal.raise_signal(signal.SIGINT)
                time.sleep(0.2)
                done.append(broadcast)
                return {key: "future" for key in data}

            echo.scatter = twice
            with pytest.raises(KeyboardInterrupt):
                runtime.scatter_to_all(echo, "k", object())
            assert done == [True, True]   # one within a second of the first (a key pressed twice) is not a second
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGHUP, previous_hup)
        signal.signal(signal.SIGINT, previous_int)
