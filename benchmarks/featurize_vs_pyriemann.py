"""Log-covariance featurization: streamcov vs numpy vs pyRiemann, side by side.

N sequences of T frames x 20 joints (d = 60, ``JointSelection.raw(20)``: no
hip centring, so all three see the same 60-dim frames), covariance +
regularization + matrix log + vectorization.

* streamcov: ``log_covariance_vectors(..., normalize=False)`` (fused numba
  kernel: scatter GEMM, eigendecomposition, log, vec; one chunk of sequences
  per thread).
* numpy: batched covariance by matmul, ``np.linalg.eigh`` on the stack, log,
  reconstruction by matmul, upper triangle.
* pyRiemann: ``Covariances("scm")`` + ``TangentSpace(metric="logeuclid")``.

Agreement: streamcov and numpy compute the same vectors (same gamma, ddof=1).
pyRiemann's "scm" is the biased covariance (ddof = 0; gamma I is added to its
output, one cheap array add inside the timed region) and its log-Euclidean
tangent vectors (pyRiemann 0.12) are ``upper(Dexp_{log C_ref}(log C -
log C_ref))`` with ``log C_ref`` the mean of the ``log C``: a fixed linear map
of the centred log-matrices, not the log-matrices themselves. What is
comparable is the log step: streamcov is re-run (untimed) with ddof = 0 and
compared with ``upper(pyriemann.utils.base.logm(C))`` on pyRiemann's own
regularized "scm" covariances.

numpy and pyRiemann are timed with BLAS limited to one thread and with the
default BLAS threads; the faster of the two counts (on a loaded machine
OpenBLAS threads on 60 x 60 problems are mostly spinning).

FLOPs counted per sequence (stated, not measured): scatter 2*T*d^2, eigen-
decomposition 9*d^3 (Householder tridiagonalization + QL with vectors, the
usual textbook count), log reconstruction U diag(log w) U^T 2*d^3. The
machine's GEMM rate is measured in the same run with a large float64 np.dot.

Usage: python benchmarks/featurize_vs_pyriemann.py [--quick]
"""
from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import numpy as np


def numpy_features(frames3, gamma):
    x = frames3 - frames3.mean(axis=1, keepdims=True)
    cov = np.matmul(x.transpose(0, 2, 1), x) / (x.shape[1] - 1)
    d = cov.shape[-1]
    cov += gamma * np.eye(d)
    w, u = np.linalg.eigh(cov)
    lg = np.matmul(u * np.log(w)[:, None, :], u.transpose(0, 2, 1))
    iu = np.triu_indices(d)
    coef = np.where(iu[0] == iu[1], 1.0, np.sqrt(2.0))
    return lg[:, iu[0], iu[1]] * coef


def pyriemann_features(frames3, gamma):
    from pyriemann.estimation import Covariances
    from pyriemann.tangentspace import TangentSpace
    covs = Covariances(estimator="scm").fit_transform(frames3.transpose(0, 2, 1))
    covs += gamma * np.eye(covs.shape[-1])
    return TangentSpace(metric="logeuclid").fit_transform(covs)


def best_of(fn, repeats):
    best = np.inf
    out = None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def gemm_rate(n=3000, repeats=3):
    a = np.random.default_rng(1).standard_normal((n, n))
    np.dot(a, a)
    t, _ = best_of(lambda: np.dot(a, a), repeats)
    return 2.0 * n ** 3 / t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="N=1000, one repeat")
    ap.add_argument("--n", type=int, default=None, help="number of sequences")
    args = ap.parse_args()
    n_seq = args.n or (1000 if args.quick else 5000)
    repeats = 1 if args.quick else 3
    T, J = 64, 20
    gamma = 1e-4

    import numba
    from threadpoolctl import threadpool_info, threadpool_limits
    from streamcov.descriptors import skeleton as C

    rng = np.random.default_rng(0)
    # Smooth-ish random trajectories: a random walk per joint coordinate plus noise.
    frames3 = np.cumsum(rng.normal(scale=0.05, size=(n_seq, T, 3 * J)), axis=1)
    frames3 += rng.normal(scale=0.01, size=frames3.shape)
    frames = frames3.reshape(n_seq * T, 3 * J)
    offsets = np.arange(n_seq + 1) * T
    sel = C.JointSelection.raw(J)
    d = sel.dim

    def streamcov_run():
        return C.log_covariance_vectors(frames, offsets, sel, gamma, normalize=False)

    C.log_covariance_vectors(frames[: 4 * T], offsets[:5], sel, gamma, normalize=False)  # compile
    # BLAS inside the numba threads must stay single-threaded (the library's
    # thread plan, streamcov._config.kernel_threads); the default is timed too.
    sc_timings = {}
    with threadpool_limits(limits=1):
        sc_timings["blas_limit_1"], v_sc = best_of(streamcov_run, repeats)
    sc_timings["blas_limit_None"], _ = best_of(streamcov_run, repeats)
    t_sc = min(sc_timings.values())
    timings = {}
    for blas_limit in (1, None):
        with threadpool_limits(limits=blas_limit), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t_np, v_np = best_of(lambda: numpy_features(frames3, gamma), repeats)
            t_pr, v_pr = best_of(lambda: pyriemann_features(frames3, gamma), repeats)
        timings[f"blas_limit_{blas_limit}"] = dict(numpy_s=t_np, pyriemann_s=t_pr)
    t_np = min(v["numpy_s"] for v in timings.values())
    t_pr = min(v["pyriemann_s"] for v in timings.values())
    gemm = gemm_rate(1500 if args.quick else 3000)

    # agreement
    err_np = float(np.abs(v_sc - v_np).max() / np.abs(v_np).max())
    from pyriemann.estimation import Covariances
    from pyriemann.utils.base import logm as pr_logm
    from pyriemann.utils.tangentspace import upper as pr_upper
    covs = Covariances(estimator="scm").fit_transform(frames3.transpose(0, 2, 1))
    covs += gamma * np.eye(d)
    v_pr_log = pr_upper(pr_logm(covs))
    v_sc0 = C.log_covariance_vectors(frames, offsets, sel, gamma, normalize=False, ddof=0)
    err_pr = float(np.abs(v_sc0 - v_pr_log).max() / np.abs(v_pr_log).max())
    assert v_pr.shape == v_sc0.shape

    flops = n_seq * (2.0 * T * d * d + 9.0 * d ** 3 + 2.0 * d ** 3)
    blas = [dict(api=i["internal_api"], threads=i["num_threads"]) for i in threadpool_info()]
    res = dict(
        n_sequences=n_seq, frames_per_sequence=T, dim=d, gamma=gamma, repeats=repeats,
        time_streamcov_s=t_sc, time_numpy_s=t_np, time_pyriemann_s=t_pr,
        streamcov_timings=sc_timings, competitor_timings=timings,
        speedup_vs_pyriemann=t_pr / t_sc, speedup_vs_numpy=t_np / t_sc,
        flops_counted=flops, streamcov_gflops=flops / t_sc / 1e9,
        gemm_gflops=gemm / 1e9, gflops_fraction=flops / t_sc / gemm,
        max_rel_diff_vs_numpy=err_np,
        max_rel_diff_vs_pyriemann_logm=err_pr,
        numba_threads=numba.get_num_threads(), threading_layer=numba.threading_layer(),
        blas_threads=blas, cpu_count=os.cpu_count(),
        load_avg_1min=os.getloadavg()[0],
    )
    print(f"streamcov {t_sc:.3f} s | numpy {t_np:.3f} s | pyRiemann {t_pr:.3f} s | "
          f"GEMM {gemm / 1e9:.1f} GFLOP/s | streamcov {flops / t_sc / 1e9:.1f} GFLOP/s counted")
    print(f"max rel diff vs numpy {err_np:.2e}, vs pyRiemann logm+upper (ddof=0) {err_pr:.2e}")
    assert err_np < 1e-8 and err_pr < 1e-8, "implementations disagree"
    print(json.dumps(res))


if __name__ == "__main__":
    main()
