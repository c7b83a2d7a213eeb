"""Milliseconds per sequence of each skeleton descriptor, beside paper 000's and beside pyRiemann.

The sequences of a store (default: MSR-Action3D, 557+ sequences, 20 joints,
ragged lengths) are featurized by

* streamcov in memory: :func:`~streamcov.descriptors.skeleton.log_covariance_vectors`
  (paper 000's descriptor, the fused kernel) or
  :func:`~streamcov.descriptors.skeleton.pyramid_vectors` (the descriptor
  with options: frame features, windows, body frame, embedding, log, vec);
* streamcov streamed: the engine's Dask graph on the store (chunk tasks,
  merges, block tasks; 2 threads), as ``streamcov run`` computes it;
* pyRiemann (where it can compute the same thing): ``Covariances("scm")`` +
  ``TangentSpace(metric="logeuclid")`` on the windows' frame-feature series,
  windows of equal length batched together. The frame features, windows,
  body frame and the Gaussian embedding are computed for pyRiemann by
  streamcov's own code *outside* the timed region: pyRiemann is timed on the
  covariance, log and vectorization only (it has no Savitzky-Golay
  features, pyramid or embedding), which favours it. Its ``scm`` is the
  biased covariance (ddof 0). It has no kernelized covariance: "-" for
  ``matrix = "rbf"`` and ``"rbf-raw"``.

Prints one table (ms per sequence and the ratios) and a JSON line.

    python benchmarks/descriptor_speed.py [--store runs/stores/msr_action3d.zarr] [--repeats 3] [--jobs 1]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PV = {"features": ["positions", "velocities"], "scale": "body", "gamma": 1e-3}
PAIRS = [["left_wrist", "right_wrist"], ["left_wrist", "head"], ["right_wrist", "head"],
         ["left_ankle", "right_ankle"], ["left_wrist", "left_ankle"], ["right_wrist", "right_ankle"]]
SETTINGS = {
    "paper000": {},
    "PV": PV,
    "PVA": dict(PV, features=["positions", "velocities", "accelerations"]),
    "PV-L2o": dict(PV, levels=2, overlap=True),
    "PV-L3o": dict(PV, levels=3, overlap=True),
    "PV-L2o-yaw-mean0.3": dict(PV, levels=2, overlap=True, body_frame="yaw", mean_weight=0.3),
    "PV-L3o-yaw-mean0.3": dict(PV, levels=3, overlap=True, body_frame="yaw", mean_weight=0.3),
    # issue 17's further options: joint pairs and the kernelized covariance (Cavazza et al., ICPR 2016)
    "PV-pairs": dict(PV, pairs=PAIRS),
    "PV-rbf1": dict(PV, matrix="rbf", kernel_sigma=1.0),
    "PV-L3o-yaw-mean0.3-pairs": dict(PV, levels=3, overlap=True, body_frame="yaw", mean_weight=0.3, pairs=PAIRS),
    "PV-L3o-yaw-rbf1": dict(PV, levels=3, overlap=True, body_frame="yaw", matrix="rbf", kernel_sigma=1.0),
    # the shipped setting (gamma 1e-2, mean weight 1), and with the torso frame per sequence or per frame
    "shipped": dict(PV, levels=3, overlap=True, body_frame="yaw", mean_weight=1.0, gamma=1e-2),
    "shipped-torso": dict(PV, levels=3, overlap=True, body_frame="torso", mean_weight=1.0, gamma=1e-2),
    "shipped-torso-frames": dict(PV, levels=3, overlap=True, body_frame="torso-frames", mean_weight=1.0, gamma=1e-2),
    # the kernelized covariance of the raw series in place of the shipped setting's covariance
    "shipped-rbf-raw1": dict(PV, levels=3, overlap=True, body_frame="yaw", gamma=1e-2, matrix="rbf-raw",
                             kernel_sigma=1.0),
    # with the mirror view (Florence3D and UTKinect): the windows of the sequence and of its mirror image
    "shipped-mirror": dict(PV, levels=3, overlap=True, body_frame="yaw", mean_weight=1.0, gamma=1e-2, mirror=True),
}


def best_of(fn, repeats):
    best, out = np.inf, None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def window_series(frames, offsets, source):
    """The matrices' inputs for pyRiemann: per window, the (d, t) frame-feature series in the body frame
    (with the embedding's mean column when the plan has one)."""
    from streamcov.descriptors import skeleton as sk

    plan = source.plan
    if plan is not None and plan.mirror:   # both views: the sequence's windows, then its mirror image's
        single = plan.single_view()
        return [x for view in plan.view_frames(frames) for x in _window_series(view, offsets, source, single)]
    return _window_series(frames, offsets, source, plan)


def _window_series(frames, offsets, source, plan):
    from streamcov.descriptors import skeleton as sk

    out = []
    for i in range(len(offsets) - 1):
        a, b = int(offsets[i]), int(offsets[i + 1])
        T = b - a
        if plan is None:
            F = sk.piece_features(frames[a:b], 0, 0, T, T, sk.PyramidPlan(selection=source.selection))
            out.append(F.T)
            continue
        ext = sk.torso_frames(frames[a:b], plan) if plan.body_frame == "torso-frames" else frames[a:b]
        F = sk.piece_features(ext, 0, 0, T, T, plan)
        if plan.needs_body:
            R, s = sk.body_transform(sk.body_sums(frames[a:b], plan), T, plan)
            F = (F.reshape(T, -1, 3) @ R.T).reshape(T, -1) / s
        for s0, e0 in sk.window_bounds(T, plan.levels, plan.overlap, plan.min_window):
            out.append(F[s0:e0].T)
    return out


def pyriemann_run(series, gamma, mean_weight):
    from pyriemann.estimation import Covariances
    from pyriemann.tangentspace import TangentSpace

    by_len: dict = {}
    for k, X in enumerate(series):
        by_len.setdefault(X.shape[1], []).append(k)
    d = series[0].shape[0]
    D = d + (1 if mean_weight > 0 else 0)
    covs = np.empty((len(series), D, D))
    for t, idx in by_len.items():
        X = np.stack([series[k] for k in idx])
        C = Covariances(estimator="scm").fit_transform(X) if t > 1 else np.zeros((len(idx), d, d))
        if mean_weight > 0:      # the embedding: pyRiemann has none; numpy on its covariances
            m = mean_weight * X.mean(axis=2)
            M = np.empty((len(idx), D, D))
            M[:, :d, :d] = C + m[:, :, None] * m[:, None, :]
            M[:, :d, d] = m
            M[:, d, :d] = m
            M[:, d, d] = 1.0
            C = M
        covs[idx] = C
    covs += gamma * np.eye(D)
    return TangentSpace(metric="logeuclid").fit_transform(covs)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default="runs/stores/msr_action3d.zarr")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", default=None)
    ap.add_argument("--jobs", type=int, default=None, help="threads of the streamed run (default: all cores)")
    args = ap.parse_args(argv)

    from threadpoolctl import threadpool_limits

    from streamcov.data.skeletons import SequenceStore
    from streamcov.descriptors import skeleton as sk
    from streamcov.stream.runtime import dask_runtime
    from streamcov.stream.skeleton import skeleton_source
    from streamcov.stream.source import block_bounds

    store = SequenceStore(args.store)
    frames = np.asarray(store.read("frames"), dtype=np.float64)
    offsets = store.offsets
    n = store.n_sequences
    settings = SETTINGS if not args.only else {k: SETTINGS[k] for k in args.only.split(",")}
    rows = []
    for name, opts in settings.items():
        opts = dict(opts)
        gamma = opts.pop("gamma", 1e-4)
        source = skeleton_source(store, "store", gamma, True, **opts)
        plan = source.plan
        if plan is None:
            def mem():
                return sk.log_covariance_vectors(frames, offsets, source.selection, gamma, True)
        else:
            def mem():
                return sk.pyramid_vectors(frames, offsets, plan)
        mem()                                                    # compile
        with threadpool_limits(limits=1):
            t_mem, V = best_of(mem, args.repeats)

        def streamed():
            with dask_runtime("threads", args.jobs) as rt:
                tasks = source.block_tasks(block_bounds(n, 64), rt.numba_threads)
                return np.concatenate(rt.compute(*[t for *_, t in tasks]))
        streamed()
        t_str, V2 = best_of(streamed, args.repeats)
        assert np.allclose(V, V2, atol=1e-8)
        if plan is not None and plan.matrix != "covariance":
            t_pr = np.nan
        else:
            series = window_series(frames, offsets, source)
            mw = 0.0 if plan is None else plan.mean_weight
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t_pr = min(best_of(lambda: pyriemann_run(series, gamma, mw), args.repeats)[0]
                           for _ in (0,))
                with threadpool_limits(limits=1):
                    t_pr1, _ = best_of(lambda: pyriemann_run(series, gamma, mw), args.repeats)
            t_pr = min(t_pr, t_pr1)
        rows.append({"descriptor": name, "dim": int(source.dim), "windows": len(source.kernel_blocks) * source.kernel_views,
                     "matrix_dim": int(plan.matrix_dim if plan else source.selection.dim),
                     "streamcov_ms": 1e3 * t_mem / n, "streamed_ms": 1e3 * t_str / n,
                     "pyriemann_ms": 1e3 * t_pr / n})
        r = rows[-1]
        print(f"{name:22s} d={r['matrix_dim']:4d} W={r['windows']:2d}  streamcov {r['streamcov_ms']:.3f}  "
              f"streamed {r['streamed_ms']:.3f}  pyRiemann {r['pyriemann_ms']:.3f} ms/seq  "
              f"load {os.getloadavg()[0]:.2f}", flush=True)
    base = rows[0]["streamcov_ms"] if rows and rows[0]["descriptor"].startswith("paper000") else None
    print("\n| descriptor | matrix d | windows | streamcov ms/seq | streamed ms/seq | pyRiemann ms/seq "
          "| pyRiemann / streamcov | streamcov / paper000 |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        rel = f"{r['streamcov_ms'] / base:.1f}x" if base else "-"
        pr = "-" if np.isnan(r["pyriemann_ms"]) else f"{r['pyriemann_ms']:.3f}"
        ratio = "-" if np.isnan(r["pyriemann_ms"]) else f"{r['pyriemann_ms'] / r['streamcov_ms']:.1f}x"
        print(f"| {r['descriptor']} | {r['matrix_dim']} | {r['windows']} | {r['streamcov_ms']:.3f} | "
              f"{r['streamed_ms']:.3f} | {pr} | {ratio} | {rel} |")
    rows = [dict(r, pyriemann_ms=None if np.isnan(r["pyriemann_ms"]) else r["pyriemann_ms"]) for r in rows]
    print(json.dumps({"store": str(args.store), "n_sequences": n, "rows": rows}))


if __name__ == "__main__":
    main()
