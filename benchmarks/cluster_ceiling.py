"""What bounds the 2-worker / 1-worker training speed-up on this machine, measured side by side in one run.

Usage: ``python benchmarks/cluster_ceiling.py [--rows 100000] [--dim 2000] [--classes 10] [--seconds 6]
[--reps 300]``

``benchmarks/learner_speed.py`` times L-BFGS fits on a LocalCluster of 1
and of 2 single-threaded workers. This benchmark times the parts of such a
fit's pass apart, with nothing of the fit around them:

* ``bandwidth``: reading ``rows x dim`` float32 from memory (``numpy.sum``)
  in one process, against half of them in each of two processes at once
  (GB/s; best of a loop of ``--seconds``);
* ``kernel``: the learner's pass kernel (:func:`streamcov.linear.chunk_sums`
  with the numba kernel: scores, losses and gradient of ``--classes``
  classes) over ``rows`` rows in one process, against ``rows / 2`` in each
  of two processes at once (one numba and one BLAS thread each): the
  speed-up of a pass's work when nothing else runs;
* ``empty_pass``: a pass with nothing to compute on a LocalCluster of 1 and
  of 2 single-threaded worker processes started as streamcov starts them
  (:func:`streamcov.stream.runtime.dask_runtime`): one task per worker,
  placed on it, given a (classes x dim) float32 model and returning it,
  submitted and gathered ``--reps`` times (median and min ms): Dask's round
  trip, paid by every pass.

``pass_ceiling`` = (kernel 1 + empty pass 1) / (kernel 2 + empty pass 2):
the speed-up of a pass over cached rows if a pass were its kernel plus an
empty pass; what a fit reaches is lower where its tasks share the two cores
with the driver, the scheduler and the workers' own threads. Nothing else
should run on the machine. The final line is JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

ONE_THREAD = {"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "MKL_NUM_THREADS": "1"}


def _child(kind: str, rows: int, dim: int, classes: int, seconds: float) -> dict:
    """Best seconds of ``kind`` on ``rows`` rows in this process, looped for ``seconds``."""
    rng = np.random.default_rng(0)
    if kind == "bandwidth":
        a = np.ones(rows * dim, dtype=np.float32)

        def once():
            a.sum(dtype=np.float32)
    else:
        from streamcov.linear import LOSSES, chunk_sums

        X = rng.standard_normal((rows, dim), dtype=np.float32)
        y = rng.integers(0, classes, rows).astype(np.int64)
        W = (0.01 * rng.standard_normal((classes, dim))).astype(np.float32)
        b = np.zeros(classes)
        loss = LOSSES["squared_hinge"]
        chunk = 4096

        def once():
            for s in range(0, rows, chunk):
                chunk_sums(X[s:s + chunk], y[s:s + chunk], W, b, loss, False, True, True)
    once()
    best, end = float("inf"), time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.perf_counter()
        once()
        best = min(best, time.perf_counter() - t0)
    return {"kind": kind, "rows": rows, "best_s": best}


def side_by_side(kind: str, rows: int, dim: int, classes: int, seconds: float) -> dict:
    """Best seconds of ``kind`` on ``rows`` rows in one process, and on ``rows // 2`` in each of two at once."""
    env = {**os.environ, **ONE_THREAD}

    def start(n):
        return subprocess.Popen([sys.executable, __file__, "--child", kind, str(n), str(dim), str(classes),
                                 str(seconds)], stdout=subprocess.PIPE, text=True, env=env)

    def result(p):
        out, _ = p.communicate()
        if p.returncode:
            raise SystemExit(f"the {kind} child failed (exit {p.returncode})")
        return json.loads(out.strip().splitlines()[-1])["best_s"]

    one = result(start(rows))
    pair = [start(rows // 2), start(rows // 2)]
    two = max(result(p) for p in pair)          # the pass waits for the slower worker
    return {"one_process_s": round(one, 5), "two_processes_s": round(two, 5), "speedup": round(one / two, 3)}


def _echo(model):
    return model


def empty_pass(n_workers: int, classes: int, dim: int, reps: int) -> dict:
    from distributed import wait

    from streamcov.stream.runtime import dask_runtime

    model = np.zeros((classes, dim), dtype=np.float32)
    with dask_runtime("local-cluster", n_workers) as rt:
        client = rt.client
        workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
        times = []
        for i in range(reps + 20):             # the first 20: connections and imports
            t0 = time.perf_counter()
            futs = [client.submit(_echo, model, workers=[w], allow_other_workers=True, pure=False)
                    for w in workers]
            wait(futs)
            client.gather(futs)
            times.append(time.perf_counter() - t0)
            del futs
        times = times[20:]
    return {"median_ms": round(1e3 * statistics.median(times), 2), "min_ms": round(1e3 * min(times), 2)}


def main(argv=None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--child":
        kind, rows, dim, classes, seconds = sys.argv[2:7]
        print(json.dumps(_child(kind, int(rows), int(dim), int(classes), float(seconds))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=2000)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--reps", type=int, default=300)
    args = ap.parse_args(argv)
    out = {"benchmark": "cluster_ceiling", "rows": args.rows, "dim": args.dim, "classes": args.classes,
           "cores": os.cpu_count(), "load_average_start": list(os.getloadavg())}
    bw = side_by_side("bandwidth", args.rows, args.dim, args.classes, args.seconds)
    gb = 4 * args.rows * args.dim / 2 ** 30
    bw.update(one_process_gbs=round(gb / bw["one_process_s"], 2),
              two_processes_gbs=round(gb / bw["two_processes_s"], 2))
    out["bandwidth"] = bw
    print(f"memory read, {gb:.2f} GiB: 1 process {bw['one_process_gbs']} GB/s, 2 processes {bw['two_processes_gbs']} "
          f"GB/s together: {bw['speedup']}x", flush=True)
    k = side_by_side("kernel", args.rows, args.dim, args.classes, args.seconds)
    out["kernel"] = k
    print(f"pass kernel, {args.rows} x {args.dim} x {args.classes}: 1 process {1e3 * k['one_process_s']:.1f} ms, "
          f"2 processes on half each {1e3 * k['two_processes_s']:.1f} ms: {k['speedup']}x", flush=True)
    out["empty_pass"] = {}
    for n in (1, 2):
        e = out["empty_pass"][str(n)] = empty_pass(n, args.classes, args.dim, args.reps)
        print(f"empty pass on {n} worker(s): median {e['median_ms']} ms, min {e['min_ms']} ms", flush=True)
    one = 1e3 * k["one_process_s"] + out["empty_pass"]["1"]["median_ms"]
    two = 1e3 * k["two_processes_s"] + out["empty_pass"]["2"]["median_ms"]
    out["pass_ceiling"] = round(one / two, 3)
    print(f"pass ceiling (kernel + empty pass): {one:.1f} ms / {two:.1f} ms = {out['pass_ceiling']}x", flush=True)
    out["load_average_end"] = list(os.getloadavg())
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
