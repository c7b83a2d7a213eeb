"""Matrix log of small SPD matrices: LAPACK eigh path vs the lane eigensolver.

2000 regularized 60 x 60 covariance matrices (random-walk frames, 64 per
sequence, gamma = 1e-4: the matrices of ``featurize_vs_pyriemann.py``).
Per matrix, best of several repeats, all in one process:

* old path, single thread: ``np.linalg.eigh`` inside numba (LAPACK dsyevd),
  then the whole LAPACK route of one matrix, ``spd._recon_one`` (eigh +
  reconstruction GEMM) followed by ``spd._vec_into`` (vec);
* new path, single thread, stage by stage (cumulative, groups of LANES = 8
  matrices): power-of-two scaling + Householder tridiagonalization, forming
  Q^T, the lane QL (scalar recurrences of 8 matrices in one SIMD register;
  also timed without the vector updates), and the whole lane group
  ``spd._group`` (eig_lanes + reconstruction + vec, as the kernels run it);
* stage 2 alternatives on the same tridiagonals, through scipy's
  cython_lapack function pointers: dsteqr (QL/QR), dstedc (divide and
  conquer), dstemr (MRRR), dsterf (eigenvalues only);
* both paths in a prange kernel over all numba threads (the new one is
  ``spd.stack_vec``, the kernel behind :func:`streamcov.linalg.log_vectors`).

Agreement of the two paths (max abs difference of the vectors relative to
their largest entry) is checked. Prints a final JSON line.

``--lowrank``: instead, the low-rank route (``streamcov._kernels.lowrank``,
pivoted Cholesky + an r x r eigenproblem) against the lane route
(``spd.stack_vec``) on covariances of r + 1 frames (rank r) of side ``--d``
(the pyramid windows of a short sequence: d = 115, r ~ 10), single thread,
round robin; the crossover sets ``linalg.LOWRANK_FRACTION``.

Usage: python benchmarks/spd_log_kernels.py [--n 2000] [--d 60] [--repeats 5]
       python benchmarks/spd_log_kernels.py --lowrank [--d 115] [--n 256]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import time

import numpy as np
import numba
from numba import njit, prange
from numba.extending import get_cython_function_address

from streamcov._config import FASTMATH
from streamcov._kernels import spd as ks
from streamcov._kernels import symeig as se

OPTS = dict(nogil=True, fastmath=FASTMATH)
L = se.LANES

_P = ctypes.c_void_p


def _lapack(name, nargs):
    addr = get_cython_function_address("scipy.linalg.cython_lapack", name)
    return ctypes.CFUNCTYPE(None, *([_P] * nargs))(addr)


_dstemr = _lapack("dstemr", 21)
_dstedc = _lapack("dstedc", 11)
_dsteqr = _lapack("dsteqr", 8)
_dsterf = _lapack("dsterf", 4)


@njit(**OPTS)
def _i32(x):
    a = np.empty(1, dtype=np.int32)
    a[0] = x
    return a


@njit(**OPTS)
def _ch(c):
    a = np.empty(1, dtype=np.uint8)
    a[0] = ord(c)
    return a


@njit(**OPTS)
def lapack_tridiagonal(D, E, which):
    """Eigenpairs of the tridiagonals (D[s], E[s]) by a LAPACK routine;
    returns the number of calls with info != 0."""
    n = D.shape[1]
    work = np.empty(20 * n * n + 100)
    iwork = np.empty(10 * n + 100, dtype=np.int32)
    isuppz = np.empty(2 * n, dtype=np.int32)
    d = np.empty(n)
    e = np.empty(n)
    w = np.empty(n)
    z = np.empty((n, n))
    info = _i32(0)
    m = _i32(0)
    vlu = np.zeros(2)
    bad = 0
    for s in range(D.shape[0]):
        d[:] = D[s]
        e[:] = E[s]
        if which == 0:
            _dsteqr(_ch("I").ctypes, _i32(n).ctypes, d.ctypes, e.ctypes, z.ctypes,
                    _i32(n).ctypes, work.ctypes, info.ctypes)
        elif which == 1:
            _dstedc(_ch("I").ctypes, _i32(n).ctypes, d.ctypes, e.ctypes, z.ctypes,
                    _i32(n).ctypes, work.ctypes, _i32(work.shape[0]).ctypes, iwork.ctypes,
                    _i32(iwork.shape[0]).ctypes, info.ctypes)
        elif which == 2:
            _dstemr(_ch("V").ctypes, _ch("A").ctypes, _i32(n).ctypes, d.ctypes, e.ctypes,
                    vlu[:1].ctypes, vlu[1:].ctypes, _i32(1).ctypes, _i32(n).ctypes, m.ctypes,
                    w.ctypes, z.ctypes, _i32(n).ctypes, _i32(n).ctypes, isuppz.ctypes,
                    _i32(1).ctypes, work.ctypes, _i32(work.shape[0]).ctypes, iwork.ctypes,
                    _i32(iwork.shape[0]).ctypes, info.ctypes)
        else:
            _dsterf(_i32(n).ctypes, d.ctypes, e.ctypes, info.ctypes)
        if info[0] != 0:
            bad += 1
    return bad


@njit(**OPTS)
def old_eigh(C):
    acc = 0.0
    for s in range(C.shape[0]):
        w, u = np.linalg.eigh(C[s])
        acc += w[0]
    return acc


@njit(**OPTS)
def old_log(C, out, min_eig):
    d = C.shape[1]
    ul = np.empty((d, d))
    lg = np.empty((d, d))
    for s in range(C.shape[0]):
        min_eig[s] = ks._recon_one(C[s], 0, ul, lg)
        ks._vec_into(lg, False, out[s])


@njit(**OPTS)
def new_stages(C, stage, D, E):
    """stage 0: scale + tridiagonalize; 1: + form Q^T; 2: + lane QL without
    vector updates; 3: + lane QL with vector updates (the whole eig_lanes)."""
    n = C.shape[1]
    ws = se.lanes_workspace(n)
    a, z, d, e, dl, st, mq, it, status, vecs, scale, usable, slog, flog = ws
    for g0 in range(0, C.shape[0], L):
        cnt = min(L, C.shape[0] - g0)
        if stage == 3:
            se.eig_lanes(C[g0:g0 + cnt], cnt, ws)
            continue
        for q in range(cnt):
            amax = 0.0
            for i in range(n):
                for j in range(n):
                    amax = max(amax, abs(C[g0 + q, i, j]))
            mant, ex = math.frexp(amax)
            sc = math.ldexp(1.0, -ex)
            for i in range(n):
                for j in range(n):
                    a[i, j] = C[g0 + q, i, j] * sc
            se.tridiagonalize(a, n, d[:, q], e[:, q], vecs[0], vecs[2:6])
            D[g0 + q] = d[:, q]
            E[g0 + q] = e[:, q]
            if stage >= 1:
                se.form_qt(a, n, vecs[0], z[q], vecs[1])
        if stage == 2:
            se.tql_lanes(d, e, dl, z[:, :, :0], n, 30, st, mq, it, status, slog, flog)


@njit(**OPTS)
def new_log(C, out, min_eig):
    n = C.shape[1]
    ws = se.lanes_workspace(n)
    ul = np.empty((n, n))
    lg = np.empty((n, n))
    no_mats = np.empty((0, 0, 0))
    for g0 in range(0, C.shape[0], L):
        cnt = min(L, C.shape[0] - g0)
        # kind 0 (log), vectors into out[g0:g0 + cnt], lane solver on
        ks._group(C[g0:g0 + cnt], cnt, ws, 0, ul, lg, out, no_mats, True, min_eig, g0, False, True)


@njit(parallel=True, **OPTS)
def old_log_prange(C, out, min_eig):
    """The previous log-vec kernel: chunks of 16 matrices, the LAPACK route of one matrix each."""
    batch = C.shape[0]
    d = C.shape[1]
    n_chunks = (batch + 15) // 16
    for ch in prange(n_chunks):
        lo = ch * batch // n_chunks
        hi = (ch + 1) * batch // n_chunks
        c = np.empty((d, d))
        ul = np.empty((d, d))
        lg = np.empty((d, d))
        for s in range(lo, hi):
            c[:, :] = C[s]
            min_eig[s] = ks._recon_one(c, 0, ul, lg)
            ks._vec_into(lg, False, out[s])


def covariances(n, d, t=64, gamma=1e-4, seed=0):
    rng = np.random.default_rng(seed)
    x = np.cumsum(rng.normal(scale=0.05, size=(n, t, d)), axis=1)
    x += rng.normal(scale=0.01, size=x.shape)
    x -= x.mean(axis=1, keepdims=True)
    return np.ascontiguousarray(np.matmul(x.transpose(0, 2, 1), x) / (t - 1) + gamma * np.eye(d))


def best_of(fn, repeats):
    best = np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def lowrank_table(n, d, reps, ranks=(5, 10, 20, 30, 38, 50, 70)):
    from threadpoolctl import threadpool_limits

    from streamcov._kernels import lowrank as klr

    rng = np.random.default_rng(0)
    rows = []
    numba.set_num_threads(1)
    for r in ranks:
        x = rng.standard_normal((n, d, r + 1)).cumsum(axis=2)
        x -= x.mean(axis=2, keepdims=True)
        M = np.ascontiguousarray(np.einsum("nik,njk->nij", x, x) / r)
        M /= np.trace(M, axis1=1, axis2=2)[:, None, None] / d      # unit mean eigenvalue
        ones, idx = np.ones(n), np.arange(n)
        lane, low = np.empty((n, d * (d + 1) // 2)), np.empty((n, d * (d + 1) // 2))
        me, done = np.empty(n), np.zeros(n, dtype=bool)
        runs = {"lane": lambda: ks.stack_vec(M, ones, 1e-3, 0, True, lane, me),
                "lowrank": lambda: klr.stack_log_vec(M, idx, ones, 1e-3, True, d - 1, low, done)}
        best = {k: np.inf for k in runs}
        with threadpool_limits(limits=1):
            for fn in runs.values():
                fn()
            for _ in range(reps):
                for k, fn in runs.items():
                    best[k] = min(best[k], best_of(fn, 1))
        assert done.all()
        rows.append(dict(rank=r, lane_us=1e6 * best["lane"] / n, lowrank_us=1e6 * best["lowrank"] / n,
                         speedup=best["lane"] / best["lowrank"], max_abs_diff=float(np.abs(low - lane).max())))
        print(f"d={d} rank {r:3d}: lane {rows[-1]['lane_us']:7.1f} us  low-rank {rows[-1]['lowrank_us']:7.1f} us  "
              f"{rows[-1]['speedup']:5.2f}x  max |diff| {rows[-1]['max_abs_diff']:.1e}", flush=True)
    print(json.dumps(dict(benchmark="spd_log_lowrank", dim=d, n_matrices=n, repeats=reps, rows=rows,
                          load_avg_1min=os.getloadavg()[0])))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=None, help="matrices (default 2000; 256 with --lowrank)")
    ap.add_argument("--d", type=int, default=None, help="side (default 60; 115 with --lowrank)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--lowrank", action="store_true", help="the low-rank route against the lane route")
    args = ap.parse_args()
    if args.lowrank:
        return lowrank_table(args.n or 256, args.d or 115, args.repeats)
    args.n, args.d = args.n or 2000, args.d or 60
    n, d, reps = args.n, args.d, args.repeats
    from threadpoolctl import threadpool_limits

    C = covariances(n, d)
    D = np.empty((n, d))
    E = np.empty((n, d))
    out_old = np.empty((n, d * (d + 1) // 2))
    out_new = np.empty_like(out_old)
    me_old = np.empty(n)
    me_new = np.empty(n)
    us = 1e6 / n  # seconds for the batch -> microseconds per matrix

    # compile everything on a small slice first
    small = C[:L + 3]
    old_eigh(small)
    old_log(small, out_old, me_old)
    for stage in range(4):
        new_stages(small, stage, D, E)
    new_log(small, out_new, me_new)
    old_log_prange(small, out_old, me_old)
    # vec(log(scale M2 + gamma I)) with the scale of moments, 1 / (n - ddof) = 1 / 63
    ks.stack_vec(small * 63, np.full(len(small), 1.0 / 63), 0.0, 0, False, out_new, me_new)
    new_stages(C, 0, D, E)
    for which in range(4):
        lapack_tridiagonal(D[:4], E[:4], which)

    ones = np.ones(n)
    single = {
        "old_eigh": lambda: old_eigh(C),
        "old_log_vec": lambda: old_log(C, out_old, me_old),
        "new_tridiagonalize": lambda: new_stages(C, 0, D, E),
        "new_plus_form_qt": lambda: new_stages(C, 1, D, E),
        "new_plus_ql_no_vectors": lambda: new_stages(C, 2, D, E),
        "new_eig_lanes": lambda: new_stages(C, 3, D, E),
        "new_log_vec": lambda: new_log(C, out_new, me_new),
    }
    lapack = {name: (lambda which=which: lapack_tridiagonal(D, E, which))
              for which, name in enumerate(["dsteqr", "dstedc", "dstemr", "dsterf"])}
    parallel = {
        # both paths with all numba threads (BLAS single-threaded inside)
        "prange_old": lambda: old_log_prange(C, out_old, me_old),
        "prange_new": lambda: ks.stack_vec(C, ones, 0.0, 0, False, out_new, me_new),
    }
    for name, fn in lapack.items():
        assert fn() == 0, name
    # round robin: every repeat times every variant once, so that load from
    # other processes hits them alike; the best repeat counts
    best = {k: np.inf for k in [*single, *lapack, *parallel]}
    with threadpool_limits(limits=1):
        for _ in range(reps):
            for k, fn in [*single.items(), *lapack.items(), *parallel.items()]:
                best[k] = min(best[k], best_of(fn, 1))
    t = {k: best[k] * us for k in [*single, *parallel]}
    lap = {k: best[k] * us for k in lapack}

    old_log(C, out_old, me_old)
    new_log(C, out_new, me_new)
    scale = np.abs(out_old).max(axis=1, keepdims=True)
    err = float(np.abs(out_new - out_old).max() / scale.max())
    err_rows = float((np.abs(out_new - out_old) / scale).max())
    err_min_eig = float(np.abs(me_new - me_old).max() / np.abs(me_old).max())

    stages = {
        "tridiagonalize": t["new_tridiagonalize"],
        "form_qt": t["new_plus_form_qt"] - t["new_tridiagonalize"],
        "ql_scalar_part": t["new_plus_ql_no_vectors"] - t["new_plus_form_qt"],
        "ql_vector_updates": t["new_eig_lanes"] - t["new_plus_ql_no_vectors"],
        "reconstruct_and_vec": t["new_log_vec"] - t["new_eig_lanes"],
    }
    print(f"per matrix (d={d}, single thread): old eigh {t['old_eigh']:.1f} us, "
          f"old log-vec {t['old_log_vec']:.1f} us | new eig {t['new_eig_lanes']:.1f} us, "
          f"new log-vec {t['new_log_vec']:.1f} us")
    print("new stages (us): " + ", ".join(f"{k} {v:.1f}" for k, v in stages.items()))
    print("LAPACK on the same tridiagonals (us): " + ", ".join(f"{k} {v:.1f}" for k, v in lap.items()))
    print(f"prange ({numba.get_num_threads()} threads, us per matrix): old {t['prange_old']:.1f}, "
          f"new {t['prange_new']:.1f}")
    print(f"agreement: max |new - old| / max|old| {err:.2e} (per row {err_rows:.2e}), "
          f"min eigenvalue {err_min_eig:.2e}")
    res = dict(
        benchmark="spd_log_kernels", n_matrices=n, dim=d, repeats=reps, lanes=L,
        us_per_matrix_single_thread={k: round(v, 2) for k, v in t.items() if not k.startswith("prange")},
        new_stages_us={k: round(v, 2) for k, v in stages.items()},
        lapack_tridiagonal_us=({k: round(v, 2) for k, v in lap.items()}),
        prange_threads=numba.get_num_threads(),
        prange_us_per_matrix={"old": round(t["prange_old"], 2), "new": round(t["prange_new"], 2)},
        speedup_eig=t["old_eigh"] / t["new_eig_lanes"],
        speedup_log_vec=t["old_log_vec"] / t["new_log_vec"],
        speedup_prange=t["prange_old"] / t["prange_new"],
        max_rel_diff=err, max_rel_diff_per_row=err_rows, max_rel_diff_min_eig=err_min_eig,
        load_avg_1min=os.getloadavg()[0],
    )
    print(json.dumps(res))


if __name__ == "__main__":
    main()
