"""One L-BFGS pass over a chunk of rows: OpenBLAS against the numba kernel, side by side.

Usage: ``python benchmarks/pass_kernel.py [--repeats 40] [--loads 3]``

:func:`streamcov.linear.chunk_sums` computes a chunk's loss and gradient
sums either by two BLAS GEMMs (``S = X W^T``, ``G = R^T X``) and numpy on
the scores, or by the kernel :func:`streamcov._kernels.linear.chunk_pass`,
which reads each row once. Which one a fit runs is decided by the size of
its pass alone (:data:`streamcov.linear.KERNEL_MIN_MACS`, the same in every
process). This benchmark times both on the shapes of the real pipelines'
passes (rows x features x score columns: MSR-Action3D, Florence3D,
UTKinect at nu = 5000, the generated store at nu = 2000) and on small and
narrow ones, one BLAS thread, median of ``--repeats`` calls after 5 warm-up
calls, both losses; and the kernel's load from numba's cache in fresh
processes, with and without another numba kernel run first (a ``streamcov
run`` has run its featurization kernels). The final line is JSON.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np

SHAPES = [  # rows, features, score columns
    (64, 256, 2), (64, 1000, 5), (400, 30, 5), (128, 1000, 10), (100, 2000, 10), (400, 2000, 1),
    (400, 5000, 3), (64, 5000, 20), (200, 2000, 20),
    (193, 5000, 9),     # Florence3D's pass
    (179, 5000, 10),    # UTKinect's
    (291, 5000, 20),    # MSR-Action3D's
    (100, 20000, 10), (2048, 2000, 10),   # a chunk of the generated store
]

LOAD = """
import time, numpy as np
import streamcov.stream.lbfgs
from streamcov.linear import chunk_sums
if {other}:
    from streamcov._kernels.vector import add_scaled
    add_scaled(np.zeros(4), 1.0, np.ones(4))
X = np.zeros((4, 3), np.float32)
t0 = time.perf_counter()
chunk_sums(X, np.zeros(4, np.int64), np.zeros((2, 3), np.float32), np.zeros(2), 0, False, True, kernel=True)
print(time.perf_counter() - t0)
"""


def load_seconds(other: bool) -> float:
    out = subprocess.run([sys.executable, "-c", LOAD.format(other=other)], capture_output=True, text=True,
                         check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    from streamcov._config import blas_threads
    from streamcov.linear import KERNEL_MIN_MACS, LOSSES, chunk_sums, use_kernel

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--loads", type=int, default=3, help="fresh processes per load time (the least is kept)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []

    def median_ms(X, y, W, b, loss, kernel):
        ts = []
        for i in range(5 + args.repeats):
            t0 = time.perf_counter()
            chunk_sums(X, y, W, b, loss, W.shape[0] == 1, True, kernel)
            if i >= 5:
                ts.append(time.perf_counter() - t0)
        return 1e3 * float(np.median(ts))

    with blas_threads(1):
        for n, D, k in SHAPES:
            X = rng.standard_normal((n, D)).astype(np.float32)
            y = rng.integers(0, max(k, 2), n).astype(np.int64)
            W = (0.01 * rng.standard_normal((k, D))).astype(np.float32)
            b = np.zeros(k)
            for name, loss in LOSSES.items():
                blas, kern = median_ms(X, y, W, b, loss, False), median_ms(X, y, W, b, loss, True)
                row = {"rows": n, "features": D, "columns": k, "loss": name, "macs_log2": round(np.log2(n * D * k), 1),
                       "blas_ms": round(blas, 4), "kernel_ms": round(kern, 4), "kernel_speedup": round(blas / kern, 2),
                       "gflops_kernel": round(4 * n * D * k / kern / 1e6, 1), "runs_kernel": use_kernel(n, D, k)}
                rows.append(row)
                print(f"{n:6d} x {D:6d} x {k:3d} (2^{row['macs_log2']:4.1f} MACs) {name:13s} BLAS {blas:8.3f} ms  "
                      f"kernel {kern:8.3f} ms  kernel/BLAS speed {blas / kern:5.2f}  "
                      f"{'kernel' if row['runs_kernel'] else 'BLAS'} in a fit", file=sys.stderr, flush=True)
    cold = min(load_seconds(False) for _ in range(args.loads))
    warm = min(load_seconds(True) for _ in range(args.loads))
    print(f"kernel load from numba's cache: {1e3 * cold:.0f} ms as a process's first kernel, {1e3 * warm:.0f} ms "
          f"after another", file=sys.stderr)
    speed = [r["kernel_speedup"] for r in rows]
    print(json.dumps({"benchmark": "pass_kernel", "kernel_min_macs_log2": int(np.log2(KERNEL_MIN_MACS)),
                      "kernel_speedup_min": min(speed), "kernel_speedup_max": max(speed),
                      "load_ms_first_kernel": round(1e3 * cold, 1), "load_ms_after_another": round(1e3 * warm, 1),
                      "shapes": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
