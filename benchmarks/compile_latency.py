"""First-call latency of the covariance/SPD kernels: cold vs warm numba cache.

Each measurement runs in a fresh subprocess with ``NUMBA_CACHE_DIR`` pointing
at a new temporary directory: the first subprocess finds it empty (compile
from scratch, then write the cache), the second finds it warm (load from
cache). Also reported: ``import streamcov`` and ``import
streamcov.descriptors.skeleton`` with ``streamcov.linalg`` (which import numba
and define the kernels) in a fresh interpreter (goal: < 1 s); the JSON key
keeps its historical name ``import_streamcov_covariance_s``.

Usage: python benchmarks/compile_latency.py [--quick]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, time
t0 = time.perf_counter()
import streamcov
t1 = time.perf_counter()
import numpy as np
from streamcov.descriptors import skeleton as C
from streamcov import linalg as L
t2 = time.perf_counter()
rng = np.random.default_rng(0)
frames = rng.normal(size=(128, 60))
sel = C.JointSelection.raw(20)
res = {"import_streamcov_s": t1 - t0, "import_streamcov_covariance_s": t2 - t1}
for name, fn in [
    ("log_covariance_vectors", lambda: C.log_covariance_vectors(frames, [0, 64, 128], sel, 1e-3)),
    ("segment_moments", lambda: C.segment_moments(frames, np.array([0]), np.array([128]), sel)),
    ("log_vectors_from_moments",
     lambda: C.log_vectors_from_moments(np.array([64]), np.eye(60)[None] * 63.0, 1e-3, True)),
    ("spd_logm", lambda: L.spd_logm(np.eye(5))),
]:
    t = time.perf_counter(); fn(); res["first_call_" + name + "_s"] = time.perf_counter() - t
    t = time.perf_counter(); fn(); res["second_call_" + name + "_s"] = time.perf_counter() - t
print(json.dumps(res))
"""


def run_child(cache_dir):
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="accepted for symmetry; same run")
    ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="streamcov-numba-") as cache:
        cold = run_child(cache)
        warm = run_child(cache)
    first = [k for k in cold if k.startswith("first_call_")]
    res = dict(
        cold=cold, warm=warm,
        cold_first_calls_total_s=sum(cold[k] for k in first),
        warm_first_calls_total_s=sum(warm[k] for k in first),
        import_streamcov_s=warm["import_streamcov_s"],
        import_streamcov_covariance_s=warm["import_streamcov_covariance_s"],
        import_goal_met=warm["import_streamcov_s"] + warm["import_streamcov_covariance_s"] < 1.0,
        load_avg_1min=os.getloadavg()[0],
    )
    for k in first:
        print(f"{k[len('first_call_'):-2]:28s} cold {cold[k]:7.2f} s   warm {warm[k]:6.3f} s")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
