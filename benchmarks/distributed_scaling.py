"""Featurization speed-up from 1 to 2 dask.distributed workers, and identical results.

Usage: ``python benchmarks/distributed_scaling.py [--quick] [--sequences N] [--components D]``

One synthetic store (``streamcov synth``, setup), then the same pipeline
(``msr_action3d`` with ``--store``, same seed) twice with ``streamcov run
--scheduler local-cluster --workers N``: a LocalCluster of N single-threaded
worker processes, N = 1 then 2. The featurization time is the pipeline's own
``featurize_seconds`` (the Dask computation of descriptors, RGW features and
feature-store writes; cluster start-up and training are not in it). With
many sequences and many RGW components featurization dominates the fixed
overheads (task scheduling, transfers of chunk moments between workers).

Keys of the final JSON line:

* ``speedup`` = featurize_seconds with 1 worker / with 2 workers (goal >= 1.6
  on 2 cores; the load average is recorded because other work on the cores
  takes from the 2-worker run first);
* ``same_result``: true iff the two ``features.zarr`` arrays (``X`` and the
  ``done`` flags) are bitwise identical and the accuracies are equal;
* raw timings of both runs.

``--repeats k`` runs each worker count k times (alternating) and uses the
best featurization time of each.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
PIPELINE = REPO / "pipelines" / "msr_action3d.toml"


def log(msg: str) -> None:
    print(f"[distributed_scaling {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def streamcov_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "streamcov"
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "streamcov.cli"]


def ensure_store(path: Path, n: int, timeout: float) -> bool:
    """Write a synthetic store of n sequences unless a complete one is there; True if written."""
    from streamcov.data.ragged import store_status
    from streamcov.errors import StoreError

    try:
        st = store_status(path)
        if st["complete"] and st.get("n_sequences") == n:
            log(f"reusing {path}")
            return False
        if st["complete"]:
            shutil.rmtree(path)
    except StoreError:
        pass
    log(f"setup: streamcov synth --sequences {n} {path}")
    t0 = time.perf_counter()
    subprocess.run(streamcov_cmd() + ["synth", "--sequences", str(n), str(path), "--quiet"],
                   check=True, timeout=timeout, stdout=subprocess.DEVNULL)
    log(f"setup done in {time.perf_counter() - t0:.1f} s")
    return True


def run(store: Path, out: Path, workers: int, args) -> dict:
    from streamcov.tasks.study import rgw_sets

    if out.exists():
        shutil.rmtree(out)
    cmd = streamcov_cmd() + [
        "run", str(PIPELINE), "--store", str(store), "--output", str(out), "--json",
        "--scheduler", "local-cluster", "--workers", str(workers),
        "--set", f"features.n_components={args.components}",
        *[w for s in rgw_sets("msr") for w in ("--set", s)],   # the eq. (3) map, as the figures were measured
        "--set", 'model.learner="sgd"',   # the file's learner is lbfgs; --epochs are SGD epochs
        "--set", f"model.epochs={args.epochs}",
        "--set", f"dask.block_size={args.block_sequences}",
        "--set", f"seed={args.seed}"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout,
                          start_new_session=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"streamcov run --workers {workers} failed (exit {proc.returncode}):\n"
                           f"{proc.stderr[-3000:]}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res["wall_seconds"] = round(wall, 3)
    return res


def features_identical(a: Path, b: Path) -> dict:
    """Compare two feature stores chunk-row block by block (bounded memory)."""
    import zarr

    ga, gb = zarr.open_group(str(a), mode="r"), zarr.open_group(str(b), mode="r")
    Xa, Xb = ga["X"], gb["X"]
    if Xa.shape != Xb.shape or Xa.dtype != Xb.dtype:
        return {"identical": False, "why": f"shapes {Xa.shape} vs {Xb.shape}"}
    step = Xa.chunks[0] * 16
    for r in range(0, Xa.shape[0], step):
        xa, xb = np.asarray(Xa[r:r + step]), np.asarray(Xb[r:r + step])
        # bitwise: compare the raw bytes, so -0.0/0.0 or NaN payloads would count
        if xa.tobytes() != xb.tobytes():
            diff = np.flatnonzero((xa != xb).any(axis=1))
            return {"identical": False, "why": f"rows differ from {r + int(diff[0]) if len(diff) else r}"}
    done_equal = bool(np.array_equal(ga["done"][:], gb["done"][:]))
    return {"identical": done_equal, "rows": int(Xa.shape[0]), "dim": int(Xa.shape[1]),
            "done_equal": done_equal}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sequences", type=int, help="store size (default 20000; 4000 with --quick)")
    ap.add_argument("--components", type=int, help="RGW n_components (default 2000; 1000 with --quick)")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--block-sequences", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--workdir", default="runs/distributed_scaling")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--timeout", type=float, default=3600.0)
    args = ap.parse_args(argv)
    n = args.sequences or (4000 if args.quick else 20000)
    args.components = args.components or (1000 if args.quick else 2000)
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    store = work / f"synth_{n}.zarr"
    created = ensure_store(store, n, args.timeout)
    runs = {1: [], 2: []}
    try:
        for rep in range(args.repeats):
            for w in (1, 2):
                out = work / f"run_w{w}" if rep == 0 else work / f"run_w{w}_rep{rep}"
                log(f"run {rep + 1}/{args.repeats}: LocalCluster of {w} single-threaded worker(s) ...")
                r = run(store, out, w, args)
                runs[w].append(r)
                log(f"  featurize {r['featurize_seconds']} s, train {r.get('train_seconds')} s, "
                    f"accuracy {r['accuracy']:.4f}, wall {r['wall_seconds']} s")
        cmp = features_identical(work / "run_w1" / "features.zarr", work / "run_w2" / "features.zarr")
        accs = {r["accuracy"] for w in runs for r in runs[w]}
    finally:
        if not args.keep:
            for w in runs:
                for rep in range(args.repeats):
                    shutil.rmtree(work / (f"run_w{w}" if rep == 0 else f"run_w{w}_rep{rep}"),
                                  ignore_errors=True)
            if created:
                shutil.rmtree(store, ignore_errors=True)
            try:
                work.rmdir()
            except OSError:
                pass
    t1 = min(r["featurize_seconds"] for r in runs[1])
    t2 = min(r["featurize_seconds"] for r in runs[2])
    keep = ("featurize_seconds", "featurize_ms_per_sequence", "train_seconds", "seconds",
            "wall_seconds", "accuracy", "runtime")
    summary = {
        "benchmark": "distributed_scaling",
        "speedup": round(t1 / t2, 4),
        "speedup_goal": 1.6,
        "same_result": bool(cmp["identical"] and len(accs) == 1),
        "features_compare": cmp,
        "featurize_seconds_1_worker": t1,
        "featurize_seconds_2_workers": t2,
        "n_sequences": n,
        "settings": {"pipeline": str(PIPELINE.relative_to(REPO)), "map": "rgw",
                     "n_components": args.components, "epochs": args.epochs,
                     "block_sequences": args.block_sequences, "seed": args.seed,
                     "repeats": args.repeats},
        "load_average": os.getloadavg(),
        "cpu_count": os.cpu_count(),
        "runs": {f"{w}_worker{'s' if w > 1 else ''}": [{k: r.get(k) for k in keep} for r in runs[w]]
                 for w in runs},
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
