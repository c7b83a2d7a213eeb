"""The float32 path on MSR-Action3D: accuracy effect and time saved, side by side.

``descriptor.dtype = "float32"`` in a pipeline file stores the log vectors in
float32, and everything after them follows the input dtype: the random
feature maps multiply in float32 (sgemm), the feature store holds float32
(half the bytes) and SGD reads it. The covariance and its matrix log stay in
float64: a float32 log would be no faster (LAPACK's ssyevd through numpy is
as slow as dsyevd on 60 x 60 matrices, 1.84 s against 1.82 s for 5000 of
them, and the float64 lane eigensolver of streamcov takes 0.37 s for the
whole featurization), so rounding is applied to its output. This script
measures, on the real MSR-Action3D descriptors, cross-subject split, with the
eq. (3) map (RGW, nu = 5000, the options of streamcov.tasks.study.map_params) and the file's learner:

* ``float64``: the default path;
* ``float32``: float64 log vectors rounded to float32, then map + SGD;
* ``float32_eig``: what a float32 log would give (covariances rounded to
  float32, ``np.linalg.eigh`` in float32), mapped in float64.

Per seed the map and the learner get the same seed in every variant, so the
accuracy differences are paired. Prints a table and a final JSON line.

    python benchmarks/float32_path.py [--seeds 5] [--nu 5000] [--data PATH]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from streamcov import linalg  # noqa: E402
from streamcov.descriptors import skeleton as C  # noqa: E402
from streamcov.features.registry import make_feature_map  # noqa: E402
from streamcov.stream.sgd import train_sgd_arrays  # noqa: E402
from streamcov.splits import folds  # noqa: E402
from streamcov.tasks.study import PAPER000_GAMMA, dataset_descriptors, map_params, sgd_model  # noqa: E402


def float32_eig_vectors(store, cfg):
    """Log vectors from a float32 eigendecomposition (numpy/LAPACK ssyevd)."""
    # paper 000's descriptor, as dataset_descriptors computes the float64 vectors it is compared with (its gamma,
    # normalized): the pipeline file's own gamma is the shipped descriptor's (1e-2), another descriptor
    sel = C.JointSelection.hip_relative(store.n_joints, store.center)
    covs = C.sequence_covariances(np.asarray(store.frames[:]), store.offsets, sel)
    covs = covs + PAPER000_GAMMA * np.eye(covs.shape[1])
    w, u = np.linalg.eigh(covs.astype(np.float32))
    logs = np.matmul(u * np.log(np.maximum(w, np.finfo(np.float32).tiny))[:, None, :],
                     u.transpose(0, 2, 1)).astype(np.float64)
    V = linalg.sym_vec(0.5 * (logs + logs.transpose(0, 2, 1)))
    V /= np.linalg.norm(V, axis=1, keepdims=True)
    return V


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--nu", type=int, default=5000)
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        store, cfg, V64, _ = dataset_descriptors("msr", Path(args.data), tmp)
        V32e = float32_eig_vectors(store, cfg)
    y = store.labels.astype(np.int64)
    classes = np.arange(len(store.label_names))
    (_, tr, te), = folds(cfg.split, store.labels, store.subjects, store_split=store.split,
                         split_names=store.split_names, seed=cfg.seed)
    variants = {"float64": V64, "float32": V64.astype(np.float32), "float32_eig": V32e}
    rel = {k: float(np.abs(v.astype(np.float64) - V64).max() / np.abs(V64).max()) for k, v in variants.items()}
    acc = {k: [] for k in variants}
    map_s = {k: [] for k in variants}
    feat_bytes = {}
    for seed in range(args.seeds):
        for k, V in variants.items():
            fmap = make_feature_map(dict(map_params("msr", cfg), map="rgw", n_components=args.nu), seed).fit(V[tr])
            fmap.transform(V[:8])
            t = time.perf_counter()
            Z = fmap.transform(V)
            map_s[k].append(time.perf_counter() - t)
            feat_bytes[k] = int(Z.nbytes)
            clf = train_sgd_arrays(Z, y, tr, classes, sgd_model("msr"), seed)
            acc[k].append(float((clf.predict(Z[te]) == y[te]).mean()))
        print(f"seed {seed}: " + ", ".join(f"{k} {100 * acc[k][-1]:.2f}" for k in variants), flush=True)
    diff = {k: 100 * (np.array(acc[k]) - np.array(acc["float64"])) for k in variants if k != "float64"}
    res = {
        "benchmark": "float32_path", "dataset": "msr_action3d cross-subject", "nu": args.nu,
        "seeds": args.seeds, "map": "rgw",
        "accuracy_mean": {k: 100 * float(np.mean(v)) for k, v in acc.items()},
        "accuracy_std": {k: 100 * float(np.std(v)) for k, v in acc.items()},
        "paired_difference_points_mean": {k: float(v.mean()) for k, v in diff.items()},
        "paired_difference_points_max_abs": {k: float(np.abs(v).max()) for k, v in diff.items()},
        "max_rel_descriptor_error_vs_float64": rel,
        "map_transform_s_median": {k: float(np.median(v)) for k, v in map_s.items()},
        "map_speedup_float32": float(np.median(map_s["float64"]) / np.median(map_s["float32"])),
        "feature_bytes": feat_bytes,
    }
    print("| variant | accuracy % | paired diff (points) | max rel. descriptor error | map transform s |")
    print("|---|---|---|---|---|")
    for k in variants:
        d = diff.get(k)
        print(f"| {k} | {res['accuracy_mean'][k]:.2f} ± {res['accuracy_std'][k]:.2f} | "
              f"{'' if d is None else f'{d.mean():+.2f}'} | {rel[k]:.1e} | "
              f"{res['map_transform_s_median'][k]:.3f} |")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
