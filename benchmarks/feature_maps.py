"""Transform speed of the explicit feature maps against sklearn's RBFSampler.

Usage: ``python benchmarks/feature_maps.py [--quick]``

Side by side, in one process, on the same input batch:

(a) ``RBFSampler`` vs ``FastfoodSampler``: input dim 4096, n_components 8192.
    Key ``fastfood_over_rbf`` = best Fastfood time / best RBFSampler time
    (goal < 1).
(b) ``RGWSampler`` vs ``RBFSampler``: n_components 5000 on unit-norm 1830-dim
    vectors (the log-covariance length for 60-dim frames). Key
    ``rgw_over_rbf`` (goal <= 1.5). Skipped, with a note, when RGWSampler is
    not available.

Each timing is the best of k calls after one warm-up call; the warm-up of a
numba-backed map (compilation, or loading it from numba's cache) is reported
separately as ``first_call_s`` (with whether numba compiled the kernel or
loaded it from its on-disk cache), and the cold compile time of the Fastfood
kernel is measured on an uncached copy of it (``fastfood_compile_s``), so
the on-disk cache is never touched. The load average is recorded too: with
other work on the cores, absolute times inflate, the side-by-side ratios
much less. The last line printed is a JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np


def _best_of(fn, k):
    times = []
    for _ in range(k):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def _first_call(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _cache_state(dispatcher):
    """'compiled' or 'loaded from cache', from numba's per-dispatcher counters."""
    stats = dispatcher.stats
    if sum(stats.cache_misses.values()):
        return "compiled"
    return "loaded from cache" if sum(stats.cache_hits.values()) else "unknown"


def _cold_compile_seconds(dispatcher, *args):
    """Compile an uncached copy of a kernel for ``args`` and time it."""
    import numba

    from streamcov._config import JIT_OPTS

    fresh = numba.njit(parallel=True, **{**JIT_OPTS, "cache": False})(dispatcher.py_func)
    t0 = time.perf_counter()
    fresh.compile(tuple(numba.typeof(a) for a in args))
    return time.perf_counter() - t0


def _thread_config():
    import numba
    from threadpoolctl import threadpool_info

    pools = [{k: p.get(k) for k in ("user_api", "internal_api", "num_threads", "architecture")}
             for p in threadpool_info()]
    try:  # only known once a parallel kernel has run
        layer = numba.threading_layer()
    except ValueError:
        layer = f"not started (configured: {numba.config.THREADING_LAYER})"
    return {"numba_threads": numba.get_num_threads(), "numba_threading_layer": layer,
            "threadpools": pools}


def bench_fastfood(n_rows, k, rng):
    from sklearn.kernel_approximation import RBFSampler

    from streamcov._kernels.fwht import fastfood_cos
    from streamcov.features import FastfoodSampler

    d, n_out, gamma = 4096, 8192, 1.0 / 4096
    X = rng.standard_normal((n_rows, d))
    rbf = RBFSampler(gamma=gamma, n_components=n_out, random_state=0).fit(X[:1])
    ff = FastfoodSampler(gamma=gamma, n_components=n_out, random_state=0).fit(X[:1])
    first = _first_call(lambda: ff.transform(X[:2]))
    rbf.transform(X)
    ff.transform(X)
    t_rbf = _best_of(lambda: rbf.transform(X), k)
    t_ff = _best_of(lambda: ff.transform(X), k)
    out = np.empty((2, n_out))
    compile_s = _cold_compile_seconds(
        fastfood_cos, X[:2], ff.signs_, ff.permutations_, ff.gaussians_, ff.scalings_,
        ff.random_offset_, 1.0, 1, out)
    return {"n_rows": n_rows, "n_features": d, "n_components": n_out,
            "rbf_s": t_rbf, "fastfood_s": t_ff, "fastfood_first_call_s": first,
            "fastfood_first_call": _cache_state(fastfood_cos),
            "fastfood_compile_s": compile_s,
            "fastfood_over_rbf": t_ff / t_rbf}


def bench_rgw(n_rows, k, rng):
    from sklearn.kernel_approximation import RBFSampler

    try:
        from streamcov.features import RGWSampler
    except (ImportError, AttributeError) as exc:
        return {"skipped": f"RGWSampler not available ({type(exc).__name__}: {exc})"}

    d, n_out, sigma = 1830, 5000, 1.0
    X = rng.standard_normal((n_rows, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    rbf = RBFSampler(gamma=0.5 / sigma ** 2, n_components=n_out, random_state=0).fit(X[:1])
    rgw = RGWSampler(n_components=n_out, sigma=sigma, theta=0.5, random_state=0).fit(X[:1])
    first = _first_call(lambda: rgw.transform(X[:2]))
    rbf.transform(X)
    rgw.transform(X)
    t_rbf = _best_of(lambda: rbf.transform(X), k)
    t_rgw = _best_of(lambda: rgw.transform(X), k)
    return {"n_rows": n_rows, "n_features": d, "n_components": n_out,
            "rbf_s": t_rbf, "rgw_s": t_rgw, "rgw_first_call_s": first,
            "rgw_over_rbf": t_rgw / t_rbf}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rows and repeats")
    args = parser.parse_args(argv)
    n_rows, k = (500, 2) if args.quick else (2000, 5)
    rng = np.random.default_rng(0)

    result = {"quick": args.quick, "repeats": k, "python": platform.python_version(),
              "loadavg_start": list(os.getloadavg())}

    ff = bench_fastfood(n_rows, k, rng)
    result["fastfood"] = ff
    print(f"(a) d=4096 D=8192 rows={n_rows}: RBFSampler {ff['rbf_s']:.3f} s, "
          f"Fastfood {ff['fastfood_s']:.3f} s (first call {ff['fastfood_first_call_s']:.2f} s, "
          f"{ff['fastfood_first_call']}; cold compile {ff['fastfood_compile_s']:.2f} s), "
          f"ratio {ff['fastfood_over_rbf']:.3f}")

    rgw = bench_rgw(n_rows, k, rng)
    result["rgw"] = rgw
    if "skipped" in rgw:
        print(f"(b) skipped: {rgw['skipped']}")
    else:
        print(f"(b) d=1830 D=5000 rows={n_rows}: RBFSampler {rgw['rbf_s']:.3f} s, "
              f"RGW {rgw['rgw_s']:.3f} s (first call {rgw['rgw_first_call_s']:.2f} s), "
              f"ratio {rgw['rgw_over_rbf']:.3f}")

    result["loadavg_end"] = list(os.getloadavg())
    result["threads"] = _thread_config()
    print(f"threads: {result['threads']}")
    print(f"load average (1 min) at start/end: {result['loadavg_start'][0]:.2f} / "
          f"{result['loadavg_end'][0]:.2f} on {os.cpu_count()} cpus")
    result["fastfood_over_rbf"] = ff["fastfood_over_rbf"]
    result["rgw_over_rbf"] = rgw.get("rgw_over_rbf")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
