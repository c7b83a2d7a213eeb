"""Approx LogHS vs exact Log-HS on one split of the Fish subset (paper 004, Table 1, Exp1).

Usage: ``python benchmarks/approx_vs_exact_loghs.py [--pixels M] [--split K] [--data PATH]``

One split of the Exp1 protocol (5 training and 10 test images per class, 23
classes: 115 / 230 images), R, G, B per-pixel features, both methods on the
same M pixels per image (drawn once, default 1536: the exact method costs
O(M^3) per image and O(M^2 r) per pair of images, r <= M the numerical rank,
so it cannot use the 1,600-30,000 pixels of a Fish image that paper 004 used;
the approximation costs O(M D^2 + D^3) per image, so the speedup grows with M.
Measured per image / pair on a quiet 2-vCPU machine: exact factor 0.11 / 0.31 /
0.68 s and exact pair 5.8 / 14 / 32 ms at M = 1024 / 1536 / 2048, approx
19-22 ms per image for both gammas at any of these M; the whole benchmark
gives speedup 51 at M = 1024), features standardized with the training
images' scale, K1 Gaussian exp(-d^2 / sigma1^2) with paper 004's sigma1 =
s * sqrt(3) (streamcov's sigma = sigma1 / sqrt(2), :mod:`streamcov.kernels`).

* exact: :func:`streamcov.descriptors.operators.pairwise_log_hs` (closed form
  through M x M Gram matrices) for the train x train and test x train pairs;
* approx: D = 200 random Fourier features, one 400 x 400 covariance operator
  and its log per image (eqs. (20), (21)), distances by one Gram matrix.

Both search the same grid by 5-fold cross-validation on the training images
(sigma1, gamma = mu, sigma2, C) and train an SVM on the Gaussian kernel K2.

Keys of the final JSON line: ``speedup`` = exact distance seconds / approx
distance seconds over the whole grid (goal >= 100), ``accuracy_gap_points`` =
100 * (exact accuracy - approx accuracy) (goal <= 2), both accuracies, the
chosen hyperparameters, timings and the load average.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from streamcov._config import map_threads  # noqa: E402
from streamcov.data.imageio import load_folders  # noqa: E402
from streamcov.descriptors import operators as dist  # noqa: E402
from streamcov.kernels import distances, sigma_from_paper004  # noqa: E402
from streamcov.tasks import image_eval as ev  # noqa: E402
from streamcov.splits import folds  # noqa: E402

GRID = {"sigma1": [1.0], "gamma": [1e-3, 1e-2], "sigma2": [0.25, 0.5, 1.0, 2.0],
        "C": [1.0, 10.0, 100.0]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "fish4knowledge" / "raw" /
                                          "fish_image"))
    ap.add_argument("--pixels", type=int, default=1536)
    ap.add_argument("--split", type=int, default=0)
    ap.add_argument("--D", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    data = load_folders(args.data)
    splits = folds({"kind": "per-class", "n_train": 5, "n_test": 10, "n_repeats": args.split + 1,
                    "seed": args.seed}, data.labels, data.groups, seed=args.seed)
    _, tr_mask, te_mask = splits[args.split]
    tr_g, te_g = np.flatnonzero(tr_mask), np.flatnonzero(te_mask)
    idx = np.concatenate([tr_g, te_g])
    feats = ev.extract_features([data.images[i] for i in idx], "fish")
    n_tr = len(tr_g)
    tr, te = np.arange(n_tr), np.arange(n_tr, len(idx))
    scale = ev.scale_of(feats, tr, "global")
    sub = [ev.subsample(f.astype(np.float64) / scale, args.pixels, args.seed) for f in feats]
    ones = np.ones(3)
    y = data.labels[idx]

    # approximate: per-image operators and logs, one Gram matrix per grid point; sigma1 is in
    # units of sqrt(n_features) = sqrt(3) (the features are already divided by their scale)
    t = time.perf_counter()
    approx = []
    for rel in GRID["sigma1"]:
        vecs = ev.approx_operator_vectors(sub, np.arange(len(sub)), ones, rel, GRID["gamma"],
                                          args.D, "random", args.seed)
        for g, v in zip(GRID["gamma"], vecs):
            approx.append(ev.Candidate({"sigma1": rel, "gamma": g}, distances(v)))
    t_approx = time.perf_counter() - t

    # exact: factors of every image, then train x train and test x train pairs
    t = time.perf_counter()
    exact = []
    for rel in GRID["sigma1"]:
        for g in GRID["gamma"]:
            s1 = sigma_from_paper004(rel * np.sqrt(3))   # the same K1 as the approximation's
            fac = list(map_threads(lambda x: dist._factor(x, s1, g, 1e-12), sub))
            D = np.zeros((len(sub), len(sub)))
            D[np.ix_(tr, tr)] = dist.pairwise_log_hs(fac[:n_tr], sigma=s1, gamma=g)
            dte = dist.pairwise_log_hs(fac[n_tr:], fac[:n_tr], sigma=s1, gamma=g)
            D[np.ix_(te, tr)] = dte
            D[np.ix_(tr, te)] = dte.T
            exact.append(ev.Candidate({"sigma1": rel, "gamma": g}, D))
    t_exact = time.perf_counter() - t

    acc_a, p_a, cv_a, _ = ev.select_and_test_svc(approx, y, tr, te, GRID, 5, args.seed)
    acc_e, p_e, cv_e, _ = ev.select_and_test_svc(exact, y, tr, te, GRID, 5, args.seed)
    # how close the distances themselves are, at the same hyperparameters
    rel_err = [float(np.median(np.abs(a.D[np.ix_(te, tr)] - e.D[np.ix_(te, tr)]) / e.D[np.ix_(te, tr)]))
               for a, e in zip(approx, exact)]
    out = {
        "benchmark": "approx_vs_exact_loghs",
        "dataset": "fish4knowledge subset, Exp1 protocol (5 train / 10 test per class)",
        "split": args.split, "n_train": int(n_tr), "n_test": int(len(te)), "pixels_per_image": args.pixels,
        "D": args.D, "grid": GRID,
        "exact_seconds": round(t_exact, 2), "approx_seconds": round(t_approx, 2),
        "speedup": round(t_exact / t_approx, 1),
        "exact_accuracy": acc_e, "approx_accuracy": acc_a,
        "accuracy_gap_points": round(100 * (acc_e - acc_a), 2),
        "exact_params": p_e, "approx_params": p_a,
        "exact_inner_cv": cv_e, "approx_inner_cv": cv_a,
        "median_relative_distance_error": dict(zip([f"{c.params}" for c in exact], rel_err)),
        "loadavg": os.getloadavg()[0],
        "goals": {"speedup": 100, "accuracy_gap_points": 2},
    }
    print(json.dumps(out, default=float))
    return out


if __name__ == "__main__":
    main()
