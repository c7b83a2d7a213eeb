"""Faults at small scale: a worker killed mid-featurization or mid-predict, a run killed mid-training,
an ingestion killed midway. Every kill is a SIGKILL: nothing gets to clean up."""
import collections
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, assert_same_bits
from test_training import ONE_LEVEL, SGD_SETS
from streamcov.tasks.config import load_config
from streamcov.tasks import run as run_pipeline
from streamcov.data.skeletons import ingest, open_store
from streamcov.data.synth import SyntheticSkeletons
from test_cluster import ProcessCluster, kill_group, spawn, streamcov_cmd

# separate processes (a scheduler, workers, kill -9): the minimum-versions CI job skips them
pytestmark = pytest.mark.slow

PIPELINE = REPO / "pipelines" / "msr_action3d.toml"
TIMEOUT = 300.0   # a bound on a hang, not a speed test: the other test process shares the cores


def poll_until(cond, proc, timeout=TIMEOUT, interval=0.01):
    """cond()'s first truthy value; None if ``proc`` ended or time ran out first."""
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        v = cond()
        if v:
            return v
        if proc.poll() is not None:
            return cond() or None
        time.sleep(interval)
    return None


def read_json(path):
    try:
        return json.loads(Path(path).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def cli_args(store, out, sets):
    args = ["run", PIPELINE, "--store", store, "--output", out, "--json"]
    for s in sets:
        args += ["--set", s]
    return [str(a) for a in args]


def fresh_run(store, out, sets) -> dict:
    """The uninterrupted run to compare with, a CLI run in a fresh process as the interrupted one is (the
    runs inside the pytest process are compared with cluster and CLI runs in tests/test_pipeline.py)."""
    proc = subprocess.run(streamcov_cmd() + cli_args(store, out, sets) + ["--scheduler", "threads"],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cfg_for(store, out, sets):
    return load_config(PIPELINE, [f'output="{out}"', *sets], store=store)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("faults") / "synth.zarr"
    return ingest(SyntheticSkeletons(n_sequences=600, seed=11), path, chunk_frames=2000).path


@pytest.fixture
def procs():
    """Process groups started by a test; all killed at teardown, whatever happened."""
    started = []
    yield started
    for p in started:
        kill_group(p)


def test_worker_killed_mid_featurization_gives_same_features(store, tmp_path, procs):
    # Many small blocks (150 of 4 sequences): the first done flag appears long
    # before the last, so the kill lands mid-featurization. One pyramid level: the pipeline file's three
    # (7 windows) made each run four times longer and tested nothing more
    sets = ["features.n_components=500", "dask.block_size=4", ONE_LEVEL]
    cluster = ProcessCluster(tmp_path / "cluster", n_workers=2)
    procs.extend(cluster.workers + [cluster.scheduler])
    out = tmp_path / "cluster_run"
    run = spawn(streamcov_cmd() + cli_args(store, out, sets) + ["--scheduler", cluster.address],
                tmp_path / "run.log")
    procs.append(run)
    done_dir = out / "features.zarr" / "done" / "c"

    def n_done():
        try:
            return sum(1 for f in os.listdir(done_dir) if f.isdigit())
        except FileNotFoundError:
            return 0

    assert poll_until(lambda: n_done() >= 1, run), (tmp_path / "run.log").read_text()[-2000:]
    assert run.poll() is None
    os.killpg(cluster.workers[0].pid, signal.SIGKILL)
    cluster.workers[0].wait(timeout=10)
    at_kill = n_done()
    assert at_kill < 150, "featurization ended before the kill: nothing was tested"
    assert run.wait(timeout=TIMEOUT) == 0, (tmp_path / "run.log").read_text()[-2000:]
    assert cluster.workers[1].poll() is None  # the survivor did the rest
    res = json.loads((tmp_path / "run.log").read_text().strip().splitlines()[-1])
    base = fresh_run(store, tmp_path / "threads", sets)
    import zarr

    g, gb = (zarr.open_group(r["features_path"], mode="r") for r in (res, base))
    assert np.asarray(g["done"][:]).all()
    assert_same_bits(np.asarray(g["X"][:]), np.asarray(gb["X"][:]))
    assert res["accuracy"] == base["accuracy"]


def _run_until_a_block_then(store, tmp_path, procs, monkeypatch, act):
    """A run on a one-worker cluster of processes (RECOVERY_WAIT 3 s), ``act(cluster)`` once its first feature
    block is done; the StreamcovError it then ends with, and the cluster. Fails when the run still waits after
    two minutes."""
    import threading

    from streamcov.errors import StreamcovError
    from streamcov.stream import lbfgs, runtime

    monkeypatch.setattr(runtime, "RECOVERY_WAIT", 3.0)
    monkeypatch.setattr(lbfgs, "RECOVERY_WAIT", 3.0)
    sets = ["features.n_components=500", "dask.block_size=4", ONE_LEVEL]
    cluster = ProcessCluster(tmp_path / "cluster", n_workers=1)
    procs.extend(cluster.workers + [cluster.scheduler])
    out = tmp_path / "run"
    ended: dict = {}

    def run():
        try:
            ended["result"] = run_pipeline(cfg_for(store, out, sets), scheduler=cluster.address)
        except BaseException as exc:   # noqa: BLE001 - examined below
            ended["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    done_dir = out / "features.zarr" / "done" / "c"
    t_end = time.monotonic() + TIMEOUT
    while not (done_dir.is_dir() and any(f.isdigit() for f in os.listdir(done_dir))) and t.is_alive():
        assert time.monotonic() < t_end
        time.sleep(0.01)
    assert t.is_alive(), ended
    act(cluster)
    t0 = time.monotonic()
    t.join(120)
    assert not t.is_alive(), "the run still waits for a cluster that computes nothing"
    assert isinstance(ended.get("error"), StreamcovError), ended
    assert time.monotonic() - t0 < 60
    return str(ended["error"]), cluster


def test_a_cluster_that_loses_every_worker_ends_in_one_line(store, tmp_path, procs, monkeypatch):
    """Every worker of the cluster killed mid-featurization, none coming back: the run waited for ever on results
    no worker would compute (or ended in a traceback when a scatter or an L-BFGS pass met the empty cluster). It
    ends with one line after RECOVERY_WAIT seconds without a worker (3 here, 30 by default), saying to start
    workers and resume."""
    def kill(cluster):   # the nanny and its worker: nothing restarts it
        os.killpg(cluster.workers[0].pid, signal.SIGKILL)

    said, cluster = _run_until_a_block_then(store, tmp_path, procs, monkeypatch, kill)
    assert re.fullmatch(rf"{re.escape(cluster.address)}: every worker left the cluster and none came back in 3 s; "
                        rf"start workers \(`dask worker {re.escape(cluster.address)}`\) and run the command again "
                        rf"\(a run continues from what it wrote with resume=True\)", said), said


def test_a_cluster_whose_workers_are_paused_for_memory_ends_in_one_line(store, tmp_path, procs, monkeypatch):
    """The worker paused by Dask's memory monitor mid-featurization and never resuming (its memory above the
    pause fraction of its limit: here the fraction lowered on the running worker, as a low
    distributed.worker.memory.pause or a worker short of memory does): the run waited for ever, since Dask counts
    a paused worker as a worker. It ends with one line after RECOVERY_WAIT seconds naming the pause and what to
    change. (The tasks Dask leaves on one paused worker while another idles are the same wait:
    ``test_paused_workers_are_named_from_the_schedulers_record``.)"""
    from distributed import Client

    def pause(cluster):
        def lower(dask_worker):   # the memory monitor pauses it at its next look (every 100 ms) and keeps it paused
            dask_worker.memory_manager.memory_pause_fraction = 1e-9

        with Client(cluster.address, timeout=60) as client:
            client.run(lower)

    said, cluster = _run_until_a_block_then(store, tmp_path, procs, monkeypatch, pause)
    assert re.fullmatch(rf"{re.escape(cluster.address)}: every worker \(1\) is paused by Dask for its memory "
                        r"\(a limit of \S+ \S+ each\), and none resumed in 3 s: Dask pauses a worker whose memory "
                        r"passes the fraction distributed\.worker\.memory\.pause of its limit; give that setting a "
                        r"larger fraction \(environment variable DASK_DISTRIBUTED__WORKER__MEMORY__PAUSE or a Dask "
                        r"configuration file; its default is 0\.8\) or the workers more memory, or use smaller "
                        r"blocks \(dask\.block_size\), and run the command again \(a run continues from what it "
                        r"wrote with resume=True\)", said), said


def test_paused_workers_are_named_from_the_schedulers_record():
    """What stops a run on a cluster, from the scheduler's record of its workers: every worker paused, or a
    paused worker holding ready tasks while the others idle (Dask does not move them: the run waited for ever);
    a worker executing a task, paused or not, is at work, and so is a running one while no paused worker holds
    tasks. Dask versions whose record has no task counts are judged by the running workers alone."""
    from streamcov.stream import runtime

    class Fake:
        def __init__(self, *workers):
            self.workers = {f"tcp://w{i}": w for i, w in enumerate(workers)}

        def scheduler_info(self, n_workers=5):
            return {"workers": self.workers}

        def nthreads(self):
            return {a: 1 for a in self.workers}

    def w(status, **counts):
        return {"status": status, "memory_limit": 2 << 30, "metrics": {"task_counts": counts}}

    cases = [
        ((w("paused"), w("paused")), False, "every worker (2) is paused by Dask for its memory (a limit of 2.00 GiB "
                                            "each)"),
        ((w("paused", ready=3), w("running")), False, "1 of the 2 workers is paused by Dask for its memory (a limit "
                                                      "of 2.00 GiB each), holding tasks no other worker takes"),
        ((w("paused", ready=3, executing=1), w("running")), True, "1 of the 2 workers is paused"),
        ((w("paused"), w("running", executing=1)), True, ""),
        ((w("paused"), w("running")), True, ""),
        ((w("running", ready=2),), True, ""),
        (({"status": "running"},), True, ""),
        (({"status": "paused"}, {"status": "paused"}), False, "every worker (2) is paused by Dask for its memory"),
    ]
    for workers, at_work, said in cases:
        client = Fake(*workers)
        assert runtime._workers_at_work(client) is at_work, workers
        assert runtime._paused_workers(client).startswith(said) and bool(said) == bool(runtime._paused_workers(client)), \
            (workers, runtime._paused_workers(client))


def test_worker_killed_mid_predict_gives_same_predictions(store, tmp_path, procs):
    """``streamcov predict`` on a 2-worker cluster, one worker killed as soon as the scheduler shows a task
    processing: the predictions file equals a threaded predict's byte for byte."""
    from distributed import Client

    sets = ["features.n_components=500", "dask.block_size=4", ONE_LEVEL, *SGD_SETS, "model.epochs=2"]
    base = run_pipeline(cfg_for(store, tmp_path / "threads", sets), scheduler="threads")
    model = Path(base["model_path"])
    ref = subprocess.run(streamcov_cmd() + ["predict", str(model), str(store), "--out", str(tmp_path / "t.csv")],
                         capture_output=True, text=True, timeout=TIMEOUT)
    assert ref.returncode == 0, ref.stderr[-2000:]
    cluster = ProcessCluster(tmp_path / "cluster", n_workers=2)
    procs.extend(cluster.workers + [cluster.scheduler])
    run = spawn(streamcov_cmd() + ["predict", str(model), str(store), "--out", str(tmp_path / "c.csv"),
                                   "--scheduler", cluster.address], tmp_path / "predict.log")
    procs.append(run)
    with Client(cluster.address, timeout=TIMEOUT) as client:
        busy = poll_until(lambda: sum(len(v) for v in client.processing().values()), run)
        assert busy and run.poll() is None, "predict ended before the kill: nothing was tested"
        os.killpg(cluster.workers[0].pid, signal.SIGKILL)
        cluster.workers[0].wait(timeout=10)
    assert run.wait(timeout=TIMEOUT) == 0, (tmp_path / "predict.log").read_text()[-2000:]
    assert (tmp_path / "c.csv").read_bytes() == (tmp_path / "t.csv").read_bytes()


def test_run_killed_mid_training_resumes_to_the_same_model(store, tmp_path, procs):
    sets = ["features.n_components=200", ONE_LEVEL, *SGD_SETS, "model.epochs=10", "model.checkpoint_blocks=2",
            "dask.block_size=32"]
    full = fresh_run(store, tmp_path / "full", sets)
    out = tmp_path / "part"
    run = spawn(streamcov_cmd() + cli_args(store, out, sets), tmp_path / "part.log")
    procs.append(run)
    ckdir = out / "checkpoints"

    def checkpoint():
        try:
            return [f for f in os.listdir(ckdir) if f.endswith(".npz")]
        except FileNotFoundError:
            return None

    found = poll_until(checkpoint, run)
    assert found, (tmp_path / "part.log").read_text()[-2000:]
    assert run.poll() is None, "training ended before the kill: nothing was tested"
    kill_group(run)
    assert not (out / "model").exists() and not (out / "result.json").exists()
    with np.load(ckdir / found[0], allow_pickle=False) as z:
        state = json.loads(z["checkpoint_json"].tobytes().decode())["state"]
    assert state["epoch"] < 10
    proc = subprocess.run(streamcov_cmd() + cli_args(store, out, sets) + ["--resume"],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["featurized_sequences"] == 0  # features were complete before the kill
    assert res["epochs_run"] == 10
    a = np.load(Path(full["model_path"]) / "model.npz", allow_pickle=False)
    b = np.load(out / "model" / "model.npz", allow_pickle=False)
    assert sorted(a.files) == sorted(b.files) and len(a.files) > 0
    for k in a.files:
        assert_same_bits(a[k], b[k], k)
    assert res["accuracy"] == full["accuracy"]


def test_ingest_killed_midway_resumes_every_sequence_once(tmp_path, procs):
    n, cf = 600, 300
    clean = ingest(SyntheticSkeletons(n_sequences=n), tmp_path / "clean.zarr", chunk_frames=cf)
    part = tmp_path / "part.zarr"
    cmd = streamcov_cmd() + ["synth", "--sequences", str(n), str(part), "--chunk-frames", str(cf),
                             "--quiet"]
    run = spawn(cmd, tmp_path / "synth.log")
    procs.append(run)

    def committed():
        meta = read_json(part / "zarr.json")
        k = meta["attributes"].get("committed", {}).get("sequences", 0) if meta else 0
        return k if k >= n // 4 else None

    assert poll_until(committed, run)
    assert run.poll() is None, "synth ended before the kill: nothing was tested"
    kill_group(run)
    attrs = read_json(part / "zarr.json")["attributes"]
    assert not attrs["complete"] and attrs["committed"]["sequences"] < n
    info = subprocess.run([str(c) for c in streamcov_cmd() + ["info", part, "--json"]],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert info.returncode == 3 and "INCOMPLETE" in info.stderr
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    assert again.returncode == 0, again.stderr[-2000:]
    info = subprocess.run([str(c) for c in streamcov_cmd() + ["info", part, "--json"]],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert info.returncode == 0
    st = open_store(part)
    ids = st.ids()
    counts = collections.Counter(ids)
    assert len(ids) == n and max(counts.values()) == 1
    assert ids == clean.ids()
    for name in ("frames", "offsets", "labels", "subjects", "split"):
        a, b = np.asarray(clean.group[name][:]), np.asarray(st.group[name][:])
        assert_same_bits(a, b, name)
