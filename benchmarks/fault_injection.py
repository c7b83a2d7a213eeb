"""Fault injection: a killed Dask worker, a killed training run, a killed ingestion.

Usage: ``python benchmarks/fault_injection.py [--quick] [--workdir DIR] [--keep]``

Four scenarios, each driven through the ``streamcov`` command in
subprocesses, on loopback addresses only:

``worker_kill_same_features``
    A ``dask scheduler`` and two ``dask worker --nthreads 1`` processes on
    127.0.0.1; ``streamcov run --scheduler tcp://...`` on a synthetic store
    with many small blocks; as soon as the feature store's ``done`` array
    shows a finished block (and not all), one worker is killed with SIGKILL
    (its whole process group: nanny and worker). The run must finish on the
    remaining worker (the scheduler recomputes the lost tasks) with
    ``features.zarr`` bitwise equal to an undisturbed threaded run's (same
    seed) and the same accuracy.
``predict_worker_kill_same_predictions``
    ``streamcov predict`` of that threaded run's model on a fresh 2-worker
    cluster; one worker is SIGKILLed as soon as the scheduler shows a task
    processing. The predictions CSV must be byte-equal to a threaded
    predict's (work lost with the worker is recomputed by the scheduler, or
    submitted again by ``runtime.retry_lost``).
``resume_same_model``
    ``streamcov run --set model.learner="sgd" --set model.epochs=30 --set
    model.checkpoint_blocks=2``
    is killed with SIGKILL once a training checkpoint appears; ``streamcov
    run --resume`` in the same output folder must save a model whose arrays
    (``model/model.npz``) are bitwise equal to an uninterrupted run's.
``ingest_resume_ok``
    ``streamcov synth --sequences N`` with small frame chunks is killed with
    SIGKILL once about a third of the sequences are committed; ``streamcov
    info`` must say incomplete (exit code 3); re-running the same command
    must complete the store with every sequence id exactly once and frames,
    offsets, labels and subjects equal to those of a clean run's store.

Every subprocess runs in its own process group with a time limit, and every
group is killed at the end. The last line printed is a JSON object with the
four booleans and the details of each scenario.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
PIPELINE = REPO / "pipelines" / "msr_action3d.toml"
_PROCS: list[subprocess.Popen] = []


def log(msg: str) -> None:
    print(f"[fault_injection {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _bin(name: str) -> Path | None:
    exe = Path(sys.executable).parent / name
    return exe if exe.is_file() else None


def streamcov_cmd() -> list[str]:
    exe = _bin("streamcov")
    return [str(exe)] if exe else [sys.executable, "-m", "streamcov.cli"]


def spawn(cmd, log_path: Path | None = None, **kw) -> subprocess.Popen:
    """Start a command in its own process group (killed as a whole at the end)."""
    out = open(log_path, "wb") if log_path else subprocess.DEVNULL
    p = subprocess.Popen([str(c) for c in cmd], stdout=out, stderr=subprocess.STDOUT,
                         start_new_session=True, **kw)
    if log_path:
        out.close()
    _PROCS.append(p)
    return p


def kill_group(p: subprocess.Popen) -> None:
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - a zombie that will not go
        pass


def cleanup() -> None:
    while _PROCS:
        kill_group(_PROCS.pop())


def wait(p: subprocess.Popen, timeout: float, what: str) -> int:
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(p)
        raise RuntimeError(f"{what} exceeded {timeout} s") from None


def poll_until(cond, timeout: float, proc: subprocess.Popen | None = None, interval=0.02):
    """Return cond()'s first truthy value, or None when proc ends or time runs out first."""
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        v = cond()
        if v:
            return v
        if proc is not None and proc.poll() is not None:
            return cond() or None
        time.sleep(interval)
    return None


def run_cli(args, timeout: float, what: str, log_path: Path | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(streamcov_cmd() + [str(a) for a in args], capture_output=True,
                          text=True, timeout=timeout, start_new_session=True)
    if log_path:
        log_path.write_text(proc.stdout + proc.stderr)
    return proc


def last_json(text: str) -> dict:
    return json.loads(text.strip().splitlines()[-1])


def pipeline_args(store: Path, out: Path, sets: list[str]) -> list[str]:
    args = ["run", str(PIPELINE), "--store", str(store), "--output", str(out), "--json"]
    for s in sets:
        args += ["--set", s]
    return args


# -- a dask.distributed cluster of separate processes on loopback -----------------

class ProcessCluster:
    """``dask scheduler`` + N ``dask worker --nthreads 1`` processes on 127.0.0.1.

    Every worker (its nanny and the worker process the nanny starts) is a
    process group of its own, so one SIGKILL to the group removes the worker
    for good instead of letting the nanny restart it.
    """

    def __init__(self, folder: Path, n_workers: int = 2, timeout: float = 90.0):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        sfile = self.folder / "scheduler.json"
        sfile.unlink(missing_ok=True)     # a kept work folder's file names a scheduler that is gone
        dask = _bin("dask")
        sched = [dask, "scheduler"] if dask else [sys.executable, "-m", "distributed.cli.dask_scheduler"]
        work = [dask, "worker"] if dask else [sys.executable, "-m", "distributed.cli.dask_worker"]
        self.scheduler = spawn(sched + ["--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                        "--scheduler-file", sfile, "--idle-timeout", "3600"],
                               self.folder / "scheduler.log")
        self.address = None
        self.workers: list[subprocess.Popen] = []
        try:
            info = poll_until(lambda: _read_json(sfile), timeout, self.scheduler, 0.1)
            if not info:
                raise RuntimeError(f"dask scheduler did not start; see {self.folder / 'scheduler.log'}")
            self.address = info["address"]
            if not self.address.startswith("tcp://127.0.0.1:"):
                raise RuntimeError(f"scheduler not on loopback: {self.address}")
            for i in range(n_workers):
                self.workers.append(spawn(
                    work + ["--scheduler-file", sfile, "--nthreads", "1",
                            "--host", "127.0.0.1", "--no-dashboard", "--death-timeout", "60",
                            "--local-directory", self.folder / f"worker{i}", "--name", f"w{i}"],
                    self.folder / f"worker{i}.log"))
            from distributed import Client

            with Client(self.address, timeout=timeout) as client:
                client.wait_for_workers(n_workers, timeout=timeout)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for p in self.workers + [self.scheduler]:
            kill_group(p)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _read_json(path: Path):
    try:
        return json.loads(Path(path).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def done_blocks(features: Path) -> tuple[int, int | None]:
    """(blocks marked done, total blocks or None) of a feature store being written."""
    meta = _read_json(features / "zarr.json")
    bounds = (meta or {}).get("attributes", {}).get("bounds")  # absent while being created
    total = len(bounds) - 1 if bounds else None
    c = features / "done" / "c"
    try:
        n = sum(1 for f in os.listdir(c) if f.isdigit())
    except FileNotFoundError:
        n = 0
    return n, total


def features_equal(a: Path, b: Path) -> tuple[bool, str]:
    import zarr

    ga, gb = zarr.open_group(str(a), mode="r"), zarr.open_group(str(b), mode="r")
    if ga["X"].shape != gb["X"].shape:
        return False, f"shapes {ga['X'].shape} vs {gb['X'].shape}"
    step = ga["X"].chunks[0] * 16
    for r in range(0, ga["X"].shape[0], step):
        if np.asarray(ga["X"][r:r + step]).tobytes() != np.asarray(gb["X"][r:r + step]).tobytes():
            return False, f"X differs in rows {r}..{r + step}"
    if not np.array_equal(ga["done"][:], gb["done"][:]):
        return False, "done flags differ"
    if not np.asarray(ga["done"][:]).all():
        return False, "not every block done"
    return True, "bitwise equal"


def synth(path: Path, n: int, timeout: float, chunk_frames: int | None = None) -> None:
    args = ["synth", "--sequences", n, path, "--quiet"]
    if chunk_frames:
        args += ["--chunk-frames", chunk_frames]
    proc = run_cli(args, timeout, "synth")
    if proc.returncode != 0:
        raise RuntimeError(f"streamcov synth failed: {proc.stderr[-2000:]}")


# -- scenarios ---------------------------------------------------------------

def threaded_run(work: Path, cfg: dict) -> tuple[Path, list, dict]:
    """The worker scenarios' store, ``--set`` values and undisturbed threaded run (its model in
    ``wk_threads/model``): ``(store, sets, result)``."""
    store = work / "wk_store.zarr"
    synth(store, cfg["wk_sequences"], cfg["timeout"])
    sets = [f"features.n_components={cfg['wk_components']}", 'model.learner="sgd"', "model.epochs=2",
            f"dask.block_size={cfg['wk_block']}"]
    log("worker kill: undisturbed threaded run ...")
    base = run_cli(pipeline_args(store, work / "wk_threads", sets), cfg["timeout"], "threaded run")
    if base.returncode != 0:
        raise RuntimeError(f"threaded run failed: {base.stderr[-2000:]}")
    return store, sets, last_json(base.stdout)


def worker_kill(work: Path, cfg: dict) -> dict:
    store, sets, base_res = threaded_run(work, cfg)
    out = work / "wk_cluster"
    with ProcessCluster(work / "cluster", 2) as cluster:
        log(f"worker kill: cluster at {cluster.address}, run --scheduler {cluster.address} ...")
        p = spawn(streamcov_cmd() + pipeline_args(store, out, sets) + ["--scheduler", cluster.address],
                  work / "wk_cluster.log")
        feats = out / "features.zarr"

        def some_done():
            n, total = done_blocks(feats)
            return (n, total) if n >= 1 else None

        seen = poll_until(some_done, cfg["timeout"], p, 0.01)
        killed_mid = False
        at_kill = None
        if seen and p.poll() is None:
            victim = cluster.workers[0]
            os.killpg(victim.pid, signal.SIGKILL)
            victim.wait(timeout=10)
            at_kill = done_blocks(feats)
            killed_mid = at_kill[1] is not None and at_kill[0] < at_kill[1]
            log(f"worker kill: SIGKILL worker w0 (pid {victim.pid}) with {at_kill[0]}/{at_kill[1]} blocks done")
        rc = wait(p, cfg["timeout"], "cluster run")
        alive = [w.poll() is None for w in cluster.workers]
    text = (work / "wk_cluster.log").read_text()
    detail = {"n_sequences": cfg["wk_sequences"], "block_sequences": cfg["wk_block"],
              "n_components": cfg["wk_components"], "run_exit_code": rc,
              "done_blocks_at_kill": None if at_kill is None else at_kill[0],
              "n_blocks": None if at_kill is None else at_kill[1],
              "killed_mid_featurization": killed_mid, "workers_alive_after": alive,
              "threaded_accuracy": base_res["accuracy"]}
    if rc != 0:
        detail["error"] = text[-2000:]
        return {"ok": False, **detail}
    res = last_json(text)
    same, why = features_equal(work / "wk_threads" / "features.zarr", out / "features.zarr")
    detail.update(cluster_accuracy=res["accuracy"], features=why,
                  cluster_featurize_seconds=res["featurize_seconds"],
                  threaded_featurize_seconds=base_res["featurize_seconds"])
    ok = killed_mid and same and res["accuracy"] == base_res["accuracy"]
    return {"ok": bool(ok), **detail}


def predict_kill(work: Path, cfg: dict) -> dict:
    """``streamcov predict`` of the threaded run's model on a 2-worker cluster, one worker SIGKILLed as soon
    as the scheduler shows a task processing: the predictions must equal a threaded predict's."""
    store = work / "wk_store.zarr"
    model = work / "wk_threads" / "model"
    if not model.is_dir():                  # run alone (--only predict): make the store and the model
        threaded_run(work, cfg)
    ref = run_cli(["predict", str(model), str(store), "--out", str(work / "pk_threads.csv")],
                  cfg["timeout"], "threaded predict")
    if ref.returncode != 0:
        raise RuntimeError(f"threaded predict failed: {ref.stderr[-2000:]}")
    with ProcessCluster(work / "pk_cluster", 2) as cluster:
        from distributed import Client

        log(f"predict kill: cluster at {cluster.address}, predict --scheduler {cluster.address} ...")
        p = spawn(streamcov_cmd() + ["predict", str(model), str(store), "--out", str(work / "pk_cluster.csv"),
                                     "--scheduler", cluster.address], work / "pk_cluster.log")
        with Client(cluster.address, timeout=cfg["timeout"]) as client:
            def busy():
                return sum(len(v) for v in client.processing().values()) or None

            seen = poll_until(busy, cfg["timeout"], p, 0.01)
            killed_mid = bool(seen) and p.poll() is None
            if killed_mid:
                victim = cluster.workers[0]
                os.killpg(victim.pid, signal.SIGKILL)
                victim.wait(timeout=10)
                log(f"predict kill: SIGKILL worker w0 (pid {victim.pid}) with {seen} tasks processing")
        rc = wait(p, cfg["timeout"], "cluster predict")
    text = (work / "pk_cluster.log").read_text()
    detail = {"run_exit_code": rc, "killed_mid_predict": killed_mid, "tasks_processing_at_kill": seen}
    if rc != 0:
        detail["error"] = text[-2000:]
        return {"ok": False, **detail}
    same = (work / "pk_threads.csv").read_bytes() == (work / "pk_cluster.csv").read_bytes()
    detail.update(same_predictions=same, threaded=last_json(ref.stdout).get("accuracy"),
                  cluster=last_json(text).get("accuracy"))
    return {"ok": bool(killed_mid and same), **detail}


def _load_npz(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def resume(work: Path, cfg: dict) -> dict:
    store = work / "rs_store.zarr"
    synth(store, cfg["rs_sequences"], cfg["timeout"])
    sets = [f"features.n_components={cfg['rs_components']}", 'model.learner="sgd"', "model.epochs=30",
            "model.checkpoint_blocks=2", f"dask.block_size={cfg['rs_block']}"]
    log("resume: uninterrupted run ...")
    full = run_cli(pipeline_args(store, work / "rs_full", sets), cfg["timeout"], "full run")
    if full.returncode != 0:
        raise RuntimeError(f"uninterrupted run failed: {full.stderr[-2000:]}")
    full_res = last_json(full.stdout)
    out = work / "rs_part"
    p = spawn(streamcov_cmd() + pipeline_args(store, out, sets), work / "rs_part.log")
    ck = out / "checkpoints"

    def checkpoint():
        try:
            return [f for f in os.listdir(ck) if f.endswith(".npz")]
        except FileNotFoundError:
            return None

    found = poll_until(checkpoint, cfg["timeout"], p, 0.01)
    if cfg["rs_delay"]:
        time.sleep(cfg["rs_delay"])
    alive = p.poll() is None
    kill_group(p)
    model_before = (out / "model" / "model.npz").exists()
    killed_mid = bool(found) and alive and not model_before
    state = None
    if found:
        import json as _json
        with np.load(ck / found[0], allow_pickle=False) as z:
            state = _json.loads(z["checkpoint_json"].tobytes().decode())["state"]
    log(f"resume: SIGKILL during training at checkpoint epoch "
        f"{state and state['epoch']}, block {state and state['pos']}; run --resume ...")
    again = run_cli(pipeline_args(store, out, sets) + ["--resume"], cfg["timeout"], "resumed run")
    detail = {"n_sequences": cfg["rs_sequences"], "killed_mid_training": killed_mid,
              "checkpoint_at_kill": None if state is None else
              {"epoch": state["epoch"], "pos": state["pos"]},
              "resume_exit_code": again.returncode, "full_accuracy": full_res["accuracy"],
              "full_train_seconds": full_res.get("train_seconds")}
    if again.returncode != 0:
        return {"ok": False, **detail, "error": again.stderr[-2000:]}
    res = last_json(again.stdout)
    a = _load_npz(work / "rs_full" / "model" / "model.npz")
    b = _load_npz(out / "model" / "model.npz")
    diff = sorted(k for k in set(a) | set(b)
                  if k not in a or k not in b or a[k].dtype != b[k].dtype
                  or a[k].tobytes() != b[k].tobytes())
    detail.update(resumed_accuracy=res["accuracy"], model_arrays=len(a), differing_arrays=diff,
                  resumed_featurized_sequences=res["featurized_sequences"])
    ok = killed_mid and not diff and res["accuracy"] == full_res["accuracy"]
    return {"ok": bool(ok), **detail}


def ingest_resume(work: Path, cfg: dict) -> dict:
    from streamcov.data.skeletons import open_store

    n, cf = cfg["ig_sequences"], cfg["ig_chunk"]
    clean = work / "ig_clean.zarr"
    part = work / "ig_part.zarr"
    synth(clean, n, cfg["timeout"], cf)
    cmd = streamcov_cmd() + ["synth", "--sequences", str(n), str(part), "--chunk-frames", str(cf),
                             "--quiet"]
    p = spawn(cmd, work / "ig_part.log")

    def committed():
        meta = _read_json(part / "zarr.json")
        k = meta["attributes"].get("committed", {}).get("sequences", 0) if meta else 0
        return k if k >= n // 3 else None

    at = poll_until(committed, cfg["timeout"], p, 0.01)
    alive = p.poll() is None
    kill_group(p)
    meta = _read_json(part / "zarr.json")["attributes"]
    killed_mid = alive and not meta.get("complete", False)
    info1 = run_cli(["info", part, "--json"], 60, "info")
    log(f"ingest: SIGKILL synth at {meta['committed']['sequences']}/{n} committed sequences; "
        f"info exit {info1.returncode}; re-running ...")
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=cfg["timeout"],
                           start_new_session=True)
    info2 = run_cli(["info", part, "--json"], 60, "info")
    detail = {"n_sequences": n, "chunk_frames": cf, "killed_mid_ingest": killed_mid,
              "committed_at_kill": meta["committed"]["sequences"],
              "info_exit_code_after_kill": info1.returncode,
              "rerun_exit_code": again.returncode, "info_exit_code_after_rerun": info2.returncode}
    if again.returncode != 0:
        return {"ok": False, **detail, "error": again.stderr[-2000:]}
    a, b = open_store(clean), open_store(part)
    ids = b.ids()
    counts = collections.Counter(ids)
    once = len(ids) == n and max(counts.values()) == 1 and set(ids) == set(a.ids())
    same_order = ids == a.ids()
    equal = {name: bool(np.array_equal(np.asarray(a.group[name][:]), np.asarray(b.group[name][:])))
             for name in ("frames", "offsets", "labels", "subjects")}
    detail.update(ids_exactly_once=once, same_id_order=same_order, arrays_equal=equal,
                  duplicates=[k for k, v in counts.items() if v > 1][:5])
    ok = (killed_mid and info1.returncode == 3 and info2.returncode == 0 and once
          and all(equal.values()))
    return {"ok": bool(ok), **detail}


SIZES = {
    "quick": dict(wk_sequences=1500, wk_block=16, wk_components=1500, rs_sequences=1500,
                  rs_components=256, rs_block=32, rs_delay=0.2, ig_sequences=1500, ig_chunk=2000),
    "full": dict(wk_sequences=6000, wk_block=32, wk_components=2000, rs_sequences=6000,
                 rs_components=512, rs_block=64, rs_delay=1.0, ig_sequences=8000, ig_chunk=8192),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small stores")
    ap.add_argument("--workdir", help="default: a temporary folder")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per subprocess")
    ap.add_argument("--only", choices=["worker", "predict", "resume", "ingest"], action="append")
    args = ap.parse_args(argv)
    cfg = dict(SIZES["quick" if args.quick else "full"], timeout=args.timeout)
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="streamcov-faults-"))
    work.mkdir(parents=True, exist_ok=True)
    only = set(args.only or ["worker", "predict", "resume", "ingest"])
    out: dict = {"benchmark": "fault_injection", "scale": "quick" if args.quick else "full"}
    scenarios = [("worker", "worker_kill_same_features", worker_kill),
                 ("predict", "predict_worker_kill_same_predictions", predict_kill),
                 ("resume", "resume_same_model", resume),
                 ("ingest", "ingest_resume_ok", ingest_resume)]
    t0 = time.perf_counter()
    try:
        for key, name, fn in scenarios:
            if key not in only:
                continue
            t1 = time.perf_counter()
            try:
                r = fn(work, cfg)
            except Exception as exc:  # reported, the other scenarios still run
                r = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            finally:
                cleanup()
            r["seconds"] = round(time.perf_counter() - t1, 2)
            out[name] = r.pop("ok")
            out[f"{name}_detail"] = r
            log(f"{name}: {out[name]} ({r['seconds']} s)")
    finally:
        cleanup()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    out["seconds"] = round(time.perf_counter() - t0, 2)
    out["load_average"] = os.getloadavg()
    print(json.dumps(out, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
