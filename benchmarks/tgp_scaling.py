"""Twin GP cost against training size, and the largest exact fit in a memory budget.

Each training size runs in a fresh subprocess, which reports its wall times
(fit; predict of ``--n-test`` points) and its peak resident memory
(``ru_maxrss``). Sizes grow until one run takes longer than ``--stop-after``
seconds. The exact KL twin GP holds ``O(n^2)`` memory and costs ``O(n^3)`` to
fit and ``O(n^2)`` per L-BFGS evaluation; from the largest measured sizes the
script fits ``peak = m0 + b n^2`` and reports the largest ``n`` whose peak
stays under ``--memory-gib`` together with the fit time (scaled by ``n^3``)
and the prediction time per test point (scaled by ``n^2``) extrapolated from
the largest measured size. Extrapolated figures are labelled as such. The
HSIC criterion (``O(n)`` memory, ``O(n)`` per evaluation) is timed at the
same sizes for comparison.

Data: 10-dimensional inputs, 3-dimensional outputs (a smooth nonlinear map plus
noise), median-heuristic bandwidths.

Usage::

    python benchmarks/tgp_scaling.py [--sizes 250 500 ...] [--n-test 50]
        [--stop-after 60] [--memory-gib 24]

The last line printed is a JSON object.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np


def _data(n, n_test, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n + n_test, 10))
    W = rng.normal(size=(10, 3))
    Y = np.sin(X @ W) + 0.05 * rng.normal(size=(n + n_test, 3))
    return X[:n], Y[:n], X[n:]


def child(n: int, n_test: int, criterion: str) -> dict:
    from streamcov.structured import TwinGaussianProcess

    X, Y, Xte = _data(n, n_test)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t0 = time.perf_counter()
    m = TwinGaussianProcess(criterion=criterion, random_state=0).fit(X, Y)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    m.predict(Xte)
    pred_s = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"n_train": n, "criterion": criterion, "fit_s": fit_s, "predict_s": pred_s,
            "predict_ms_per_point": 1e3 * pred_s / n_test, "total_s": fit_s + pred_s,
            "peak_rss_bytes": peak, "rss_before_fit_bytes": base}


def run_size(n: int, n_test: int, criterion: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", str(n), "--n-test", str(n_test),
                          "--criterion", criterion], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def extrapolate(rows: list[dict], memory_bytes: float) -> dict:
    """Largest n under the budget from ``peak = m0 + b n^2`` on the two largest sizes."""
    a, b = rows[-2], rows[-1]
    slope = (b["peak_rss_bytes"] - a["peak_rss_bytes"]) / (b["n_train"] ** 2 - a["n_train"] ** 2)
    slope = max(slope, 1e-9)
    m0 = b["peak_rss_bytes"] - slope * b["n_train"] ** 2
    n_max = int(np.sqrt(max(memory_bytes - m0, 0.0) / slope))
    r = n_max / b["n_train"]
    return {"bytes_per_n2": slope, "bytes_per_n2_in_units_of_float64": slope / 8,
            "baseline_bytes": m0, "largest_n_train_in_budget": n_max,
            "extrapolated_from_n_train": b["n_train"],
            "extrapolated_fit_s": b["fit_s"] * r ** 3,
            "extrapolated_predict_ms_per_point": b["predict_ms_per_point"] * r ** 2,
            "measured": n_max <= b["n_train"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+",
                    default=[250, 500, 1000, 2000, 3000, 4000, 6000, 8000, 12000])
    ap.add_argument("--n-test", type=int, default=50)
    ap.add_argument("--stop-after", type=float, default=60.0,
                    help="stop growing once one KL run (fit + predict) takes longer than this")
    ap.add_argument("--memory-gib", type=float, default=24.0)
    ap.add_argument("--criterion", default="kl")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        print(json.dumps(child(args.child, args.n_test, args.criterion)))
        return

    kl, hsic = [], []
    for n in args.sizes:
        row = run_size(n, args.n_test, "kl")
        kl.append(row)
        hrow = run_size(n, args.n_test, "hsic")
        hsic.append(hrow)
        print(f"n={n:6d}  KL fit {row['fit_s']:7.2f}s  predict {row['predict_ms_per_point']:8.1f}"
              f" ms/pt  peak {row['peak_rss_bytes'] / 2 ** 30:6.2f} GiB | HSIC fit "
              f"{hrow['fit_s']:6.2f}s  predict {hrow['predict_ms_per_point']:7.1f} ms/pt  peak "
              f"{hrow['peak_rss_bytes'] / 2 ** 30:5.2f} GiB", flush=True)
        if row["total_s"] > args.stop_after:
            break
    ext = extrapolate(kl, args.memory_gib * 2 ** 30)
    largest = kl[-1]
    print(json.dumps({
        "benchmark": "tgp_scaling", "n_test": args.n_test, "memory_budget_gib": args.memory_gib,
        "kl": kl, "hsic": hsic, "kl_memory_model": ext,
        "largest_measured_n_train": largest["n_train"],
        "largest_measured_total_s": largest["total_s"],
        "kl_vs_hsic_fit_ratio_at_largest": largest["fit_s"] / max(hsic[-1]["fit_s"], 1e-9),
        "kl_vs_hsic_predict_ratio_at_largest":
            largest["predict_s"] / max(hsic[-1]["predict_s"], 1e-9),
    }))


if __name__ == "__main__":
    main()
