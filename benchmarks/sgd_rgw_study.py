"""Incremental hinge-loss SGD on RGW random features (paper 000, eq. (3)) on MSR-Action3D.

Cross-subject protocol: odd subjects train (291 sequences), even subjects test
(275). sigma, theta and the learner's eta0 are chosen by leave-one-subject-out
cross-validation over the training subjects 1, 3, 5, 7, 9 only; the test set is
used once per map seed with the selected setting.

Learner: ``SGDClassifier(loss="hinge", learning_rate="pa1", eta0=C_pa, penalty=None,
average=False)`` fed by ``partial_fit`` over shuffled blocks for ``--epochs``
epochs. Before SGD the features are translated by their training mean and
multiplied by one global scalar (so the mean squared norm of the training rows
is 1). Translating every feature vector by the same constant vector ``c`` does
not change the set of decision functions of a linear classifier with a free
(unregularized) intercept: ``w.(phi - c) + b = w.phi + (b - w.c)``, with the
same ``||w||``, so the SVM problem and its solution are those of the original
features; one global scalar only rescales the kernel. What changes is the
conditioning seen by SGD: the log-covariance vectors of one dataset lie in a
small cap of the unit sphere, so ~98% of ||phi(x)||^2 is a component common to
all samples, which SGD otherwise spends its steps on.

Maps compared at equal nu:
  rgw-paper : RGWSampler(sampling="iid", center=False)      (eq. (3) as in the paper)
  rgw-sc    : RGWSampler(sampling="stratified", center=True) (unbiased, lower variance)
  rff       : RBFSampler(gamma=1/(2 sigma^2))                (Rahimi-Recht)

Usage: python benchmarks/sgd_rgw_study.py [--quick] [--seeds N] [--nus 5000,1000,...]
Prints a final JSON line.
"""
from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import time
from pathlib import Path

import numpy as np
from sklearn.kernel_approximation import RBFSampler
from sklearn.linear_model import SGDClassifier

from streamcov.descriptors.skeleton import JointSelection, log_covariance_vectors
from streamcov.features import RGWSampler
from streamcov.data.readers import open_reader
from streamcov.data.skeletons import ingest

RAW = Path(__file__).resolve().parents[2] / "shared" / "data" / "msr_action3d" / "raw"
BLOCK = 64


def load_descriptors(raw):
    with tempfile.TemporaryDirectory() as tmp:
        store = ingest(open_reader("msr-action3d", str(raw)), Path(tmp) / "msr.zarr")
        frames = np.asarray(store.frames[:])
        X = log_covariance_vectors(frames, store.offsets,
                                   JointSelection.hip_relative(store.n_joints, store.center),
                                   gamma=1e-4, normalize=True)
        return X, store.labels.copy(), store.subjects.copy()


def make_map(kind, nu, sigma, theta, seed):
    if kind == "rgw-paper":
        return RGWSampler(n_components=nu, sigma=sigma, theta=theta, random_state=seed)
    if kind == "rgw-sc":
        return RGWSampler(n_components=nu, sigma=sigma, theta=theta, sampling="stratified",
                          center=True, random_state=seed)
    if kind == "rff":
        return RBFSampler(n_components=nu, gamma=1.0 / (2 * sigma ** 2), random_state=seed)
    raise ValueError(kind)


def sgd_accuracy(Ftr, ytr, Fte, yte, eta0, epochs, seed, center_features=True, sgd_kwargs=None):
    """Incremental SGD over shuffled blocks; returns test accuracy."""
    if center_features:
        # one pass over the training blocks gives the mean and the global scale
        mean = Ftr.mean(axis=0)
        scale = 1.0 / np.sqrt(np.mean(np.sum((Ftr - mean) ** 2, axis=1)))
    else:
        mean, scale = 0.0, 1.0
    kw = dict(loss="hinge", learning_rate="pa1", eta0=eta0, penalty=None, random_state=seed)
    kw.update(sgd_kwargs or {})
    clf = SGDClassifier(**kw)
    classes = np.unique(ytr)
    rng = np.random.default_rng(seed)
    for _ in range(epochs):
        order = rng.permutation(len(Ftr))
        for start in range(0, len(order), BLOCK):
            b = order[start:start + BLOCK]
            clf.partial_fit((Ftr[b] - mean) * scale, ytr[b], classes=classes)
    return float(np.mean(clf.predict((Fte - mean) * scale) == yte))


def features(kind, nu, sigma, theta, seed, Xtr, Xte):
    m = make_map(kind, nu, sigma, theta, seed).fit(Xtr)
    return m.transform(Xtr), m.transform(Xte)


def loso_cv(kind, X, y, subj, nu, grid, epochs, seed=0, sgd_kwargs=None):
    """Leave-one-subject-out over the training subjects; returns (best, table)."""
    table = []
    for sigma, theta, eta0 in grid:
        accs = []
        for s in np.unique(subj):
            tr, va = subj != s, subj == s
            Ftr, Fva = features(kind, nu, sigma, theta, seed, X[tr], X[va])
            accs.append(sgd_accuracy(Ftr, y[tr], Fva, y[va], eta0, epochs, seed,
                                     sgd_kwargs=sgd_kwargs))
        table.append({"sigma": sigma, "theta": theta, "eta0": eta0,
                      "cv_acc": float(np.mean(accs))})
    best = max(table, key=lambda r: r["cv_acc"])
    return best, table


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seeds", type=int, default=None)
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--nus", default=None, help="comma list; default 5000 (quick) or the full sweep")
    ap.add_argument("--kinds", default="rgw-sc,rgw-paper,rff")
    ap.add_argument("--cv-nu", type=int, default=None)
    ap.add_argument("--average", type=int, default=0,
                    help="SGDClassifier average: 0 = False, 1 = True, k > 1 = start after k samples")
    ap.add_argument("--sigmas", default=None, help="comma list overriding the CV grid")
    ap.add_argument("--thetas", default=None, help="comma list overriding the CV grid")
    ap.add_argument("--etas", default=None, help="comma list overriding the CV grid")
    ap.add_argument("--fixed", default=None,
                    help="skip CV: 'sigma,theta,eta0' (only for exploring; not the protocol)")
    args = ap.parse_args(argv)
    t_start = time.time()
    quick = args.quick
    seeds = args.seeds or (3 if quick else 10)
    epochs = args.epochs or (50 if quick else 100)
    nus = [int(v) for v in args.nus.split(",")] if args.nus else (
        [5000] if quick else [5000, 10, 20, 50, 100, 200, 500, 1000, 2000])
    cv_nu = args.cv_nu or (2000 if quick else 5000)
    if quick:
        grid_sigma, grid_theta, grid_eta = [1.0, 1.5], [0.7], [1.0]
    else:
        grid_sigma, grid_theta, grid_eta = [0.75, 1.0, 1.5, 2.0], [0.3, 0.7], [0.3, 1.0, 3.0]
    floats = lambda v: [float(t) for t in v.split(",")]  # noqa: E731
    grid_sigma = floats(args.sigmas) if args.sigmas else grid_sigma
    grid_theta = floats(args.thetas) if args.thetas else grid_theta
    grid_eta = floats(args.etas) if args.etas else grid_eta

    X, y, subj = load_descriptors(RAW)
    tr = subj % 2 == 1
    Xtr, ytr, str_, Xte, yte = X[tr], y[tr], subj[tr], X[~tr], y[~tr]
    print(f"descriptors {X.shape}, train {tr.sum()}, test {(~tr).sum()}", flush=True)

    sgd_kwargs = {"average": bool(args.average) if args.average <= 1 else args.average}
    result = {"epochs": epochs, "seeds": seeds, "sgd_kwargs": sgd_kwargs, "cv": {}, "test": {}}
    for kind in args.kinds.split(","):
        t0 = time.time()
        if args.fixed:
            sigma, theta, eta0 = (float(v) for v in args.fixed.split(","))
            best = {"sigma": sigma, "theta": theta, "eta0": eta0, "cv_acc": None}
        else:
            thetas = grid_theta if kind.startswith("rgw") else [None]
            grid = list(itertools.product(grid_sigma, thetas, grid_eta))
            best, table = loso_cv(kind, Xtr, ytr, str_, cv_nu, grid, epochs, sgd_kwargs=sgd_kwargs)
            result["cv"][kind] = table
        print(kind, "selected", best, f"cv {time.time() - t0:.0f}s", flush=True)
        rows = {}
        for nu in nus:
            accs = []
            t1 = time.time()
            for seed in range(seeds):
                Ftr, Fte = features(kind, nu, best["sigma"], best["theta"], seed, Xtr, Xte)
                accs.append(sgd_accuracy(Ftr, ytr, Fte, yte, best["eta0"], epochs, seed,
                                         sgd_kwargs=sgd_kwargs))
            rows[nu] = {"mean": float(np.mean(accs)), "std": float(np.std(accs)),
                        "accs": accs, "seconds": time.time() - t1}
            print(f"{kind} nu={nu}: {100 * np.mean(accs):.1f} +- {100 * np.std(accs):.1f} "
                  f"({time.time() - t1:.0f}s)", flush=True)
        result["test"][kind] = {"selected": best, "by_nu": rows}
    result["seconds"] = time.time() - t_start
    print(json.dumps(result))


if __name__ == "__main__":
    main()
