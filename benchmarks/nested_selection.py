"""Held-out accuracy of the skeleton pipelines' choices on the 10-fold protocols, by nested CV.

Florence3D (leave-one-actor-out) and UTKinect (10 subject splits) have one
pipeline file for all their folds, whose choices (the mirror view, the map's
sigma, the learner's loss and C) were made by CVs on the training subjects
of the first fold or of every fold: subjects that other folds test. Their
10-fold means are therefore not held out. This benchmark makes every one of
those choices again inside each fold, from that fold's training subjects
alone (leave-one-subject-out among them), then trains on the fold's
training rows with the choice and tests on its test rows, which no choice
read. The mean over the folds is a held-out figure of the procedure.

Everything runs through the engine's own code on the dataset's pipeline
file: the descriptors of the file's ``[descriptor]`` (with and without the
mirror view) by its Dask graph and kernels, the file's feature map fitted by
``fit_feature_map`` on each (inner or outer) training set, and
``train_lbfgs_arrays``, the file's L-BFGS learner with its scaler. The
descriptor options that every skeleton file shares (pyramid, velocities,
body frame, gamma, mean weight) stay as shipped: they were chosen by the mean
CV over the folds of three datasets, which this benchmark does not repeat.
The file's own setting is run beside, on the same folds, and must equal
``streamcov run``'s figure: the check that this is the pipeline's code.
``--learners exact``: the exact SVM of the dataset's ``*_exact.toml`` (same
descriptor), which chooses its sigma and C inside each fold already; the
mirror view is chosen by the same inner CV.

    python benchmarks/nested_selection.py [--datasets florence,utkinect] [--data ../shared/data]
        [--stores DIR] [--out runs/nested_selection.jsonl] [--learners streamed,exact]

The choice inside a fold: the best mean accuracy over its held-out training
subjects; ties go to the simpler setting: no mirror, then the smaller C,
then the loss and the sigma listed first (the file's own first).
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FILES = {"florence": ("florence3d.toml", "florence3d"), "utkinect": ("utkinect.toml", "utkinect_action3d")}
SIGMAS = (0.125, 0.25, 0.5, 1.0, 2.0)
GRID_C = (0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0)   # benchmarks/learner_cv.py's grid
LOSSES = ("squared_hinge", "log_loss")


def descriptors(cfg, store, mirror: bool, jobs: int | None):
    """The rows of every sequence with the file's descriptor (``mirror`` set as given), the map's params and
    the squared distances of every term of its kernel between all rows (:func:`streamcov.kernels.block_distances`)."""
    from streamcov.kernels import block_distances
    from streamcov.stream.featurize import rows_of
    from streamcov.stream.runtime import dask_runtime
    from streamcov.stream.skeleton import skeleton_source
    from streamcov.stream.source import block_bounds
    from streamcov.tasks.classify import kernel_map_params

    d = cfg.descriptor
    source = skeleton_source(store, d.center, d.gamma, d.normalize, d.ddof, d.dtype,
                             **{**d.options(), "mirror": mirror})
    with dask_runtime("threads", jobs) as rt:
        V = rows_of(source, np.arange(source.n), block_bounds(source.n, 128), rt)
    params = kernel_map_params(cfg, source)
    if params.get("map") != "nystroem":
        raise SystemExit(f"{cfg.name}: features.map = {params.get('map')!r}; this benchmark reads the Nystroem "
                         f"map's kernel from precomputed distances")
    return V, params, block_distances(V, None, params.get("blocks"), int(params.get("views", 1)))


def nystroem_features(K: np.ndarray, fit: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Nystroem features of ``rows`` (indices) with every ``fit`` row a landmark, from the kernel ``K`` between
    all rows: ``k(x, L) K_LL^{-1/2}``, what :class:`GaussianNystroem` computes when ``n_components`` and
    ``fit_sample`` are at least the number of fit rows (checked against it on every outer fold)."""
    from streamcov.features._nystroem import inverse_sqrt

    L = np.flatnonzero(fit)
    K_LL = K[np.ix_(L, L)]
    return K[np.ix_(rows, L)] @ inverse_sqrt(0.5 * (K_LL + K_LL.T))


def accuracies(Z, y, classes, fit, evaluate, models, seed):
    """Accuracy on the ``evaluate`` rows of each ``[model]`` in ``models`` trained on the ``fit`` rows
    (boolean masks over the rows of ``Z``) by the pipeline's L-BFGS learner and scaler."""
    from streamcov.stream.lbfgs import train_lbfgs_arrays

    return [float((train_lbfgs_arrays(Z, y, fit, classes, model, seed).predict(Z[evaluate]) == y[evaluate]).mean())
            for model in models]


def file_map_accuracy(V, params, sigma, y, classes, train, test, model, seed, fit_sample):
    """The fold's test accuracy with the map as ``featurize`` fits it (``fit_feature_map`` on at most
    ``fit_sample`` training rows), and its features: the reference for :func:`nystroem_features`."""
    from streamcov.features.registry import fit_feature_map
    from streamcov.stream.featurize import fit_sample_rows

    fmap, _ = fit_feature_map(dict(params, sigma=sigma), seed, V.shape[1], V[fit_sample_rows(train, fit_sample, seed)])
    Z = fmap.transform(V)
    return accuracies(Z, y, classes, train, test, [model], seed)[0], Z


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="florence,utkinect")
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--stores", default=None, help="folder of the datasets' stores (default: the pipelines')")
    ap.add_argument("--out", default="runs/nested_selection.jsonl")
    ap.add_argument("--jobs", type=int, default=None, help="threads (Dask, numba, BLAS); default: all cores")
    ap.add_argument("--learners", default="streamed,exact",
                    help="streamed (the file's map and L-BFGS learner), exact (the *_exact.toml SVM), or both")
    args = ap.parse_args(argv)
    learners = set(args.learners.split(","))
    if not learners or learners - {"streamed", "exact"}:
        ap.error(f"--learners {args.learners}: expected streamed, exact or streamed,exact")
    from threadpoolctl import threadpool_limits

    from streamcov.tasks.classify import protocol_folds, resolve_skeleton_store
    from streamcov.tasks.config import load_config

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)   # this run's folds only
    for ds in args.datasets.split(","):
        pipe, raw = FILES[ds]
        sets = [f'data.source="{Path(args.data).resolve() / raw / "raw"}"']
        if args.stores:
            sets.append(f'data.store="{Path(args.stores).resolve() / (ds + ".zarr")}"')
        if ds == "utkinect":
            sets.append(f'split.file="{REPO / "data" / "utkinect_splits.toml"}"')
        cfg = load_config(REPO / "pipelines" / pipe, sets)
        store = resolve_skeleton_store(cfg.data, Path("runs"))
        y = store.labels.astype(np.int64)
        classes = np.arange(len(store.label_names))
        subj = store.subjects
        all_rows = np.arange(len(y))
        seed, fit_sample, m = int(cfg.seed), int(cfg.features.fit_sample), cfg.model
        t0 = time.perf_counter()
        views = {mirror: descriptors(cfg, store, mirror, args.jobs) for mirror in (False, True)}
        # candidates in the order of the tie rule: no mirror first, then the smaller C, then the file's loss and
        # sigma first
        losses = sorted(LOSSES, key=lambda s: s != m.loss)
        sigmas = sorted({*SIGMAS, cfg.features.sigma}, key=lambda s: (s != cfg.features.sigma, s))
        models = [m.model_copy(update={"loss": loss, "C": C}) for C in GRID_C for loss in losses]
        cands = list(itertools.product((False, True), sigmas))
        order = [(mi, s, j) for j in range(len(models)) for mi, s in cands]
        order.sort(key=lambda k: (k[0], GRID_C.index(models[k[2]].C)))
        from streamcov.kernels import block_kernel

        kernels = {(mi, s): block_kernel(views[mi][2], views[mi][1].get("blocks"), s, int(views[mi][1].get("views", 1)))
                   for mi, s in cands}
        exact_cfg = load_config(REPO / "pipelines" / pipe.replace(".toml", "_exact.toml"), sets)
        if exact_cfg.descriptor.model_dump() != cfg.descriptor.model_dump():
            raise SystemExit(f"{pipe} and its _exact.toml differ in [descriptor]: this benchmark reuses the rows")
        per = []
        with threadpool_limits(limits=args.jobs):
            for name, train, test in protocol_folds(cfg, store):
                r = {"dataset": ds, "fold": name, "n_test": int(test.sum())}
                if "streamed" in learners:
                    r.update(streamed_fold(views, kernels, cands, order, models, cfg, y, classes, subj, train,
                                           test, all_rows, seed, fit_sample))
                    print(f"{ds:9s} fold {name:>10s}: chose mirror={r['mirror']!s:5s} sigma={r['sigma']:<5g} "
                          f"{r['loss']:13s} C={r['C']:<5g} (inner CV {100 * r['cv']:.1f}): test "
                          f"{100 * r['accuracy']:.1f}; the file's setting {100 * r['file_accuracy']:.1f} "
                          f"(precomputed kernel {100 * r['file_accuracy_precomputed']:.1f}, Gram gap "
                          f"{r['gram_gap']:.1e})", flush=True)
                if "exact" in learners:
                    r.update(exact_fold(views, exact_cfg, y, store.groups, train, test))
                    print(f"{ds:9s} fold {name:>10s}: exact SVM: chose mirror={r['exact_mirror']!s:5s} (inner CV "
                          f"{100 * r['exact_cv']:.1f}): test {100 * r['exact_accuracy']:.1f}; the file's mirror "
                          f"{100 * r['exact_file_accuracy']:.1f}", flush=True)
                per.append(r)
                with open(out, "a") as fh:
                    fh.write(json.dumps(r) + "\n")
        for key, what in (("accuracy", "streamed"), ("exact_accuracy", "exact SVM")):
            if key in per[0]:
                a = np.array([r[key] for r in per])
                f = np.array([r[key.replace("accuracy", "file_accuracy")] for r in per])
                print(f"{ds:9s} {what}: nested (held out) {100 * a.mean():.1f} +- {100 * a.std():.1f}   the file's "
                      f"setting {100 * f.mean():.1f} +- {100 * f.std():.1f}", flush=True)
        print(f"{ds:9s} {time.perf_counter() - t0:.0f} s", flush=True)


def streamed_fold(views, kernels, cands, order, models, cfg, y, classes, subj, train, test, all_rows, seed,
                  fit_sample) -> dict:
    """One outer fold of the streamed pipeline: every candidate by LOSO CV on the fold's training subjects,
    the best trained on them and tested; the file's own setting beside it (by the map as ``featurize`` fits
    it, and from the precomputed kernel: the check that both are one map)."""
    if train.sum() > min(fit_sample, int(cfg.features.n_components)):
        raise SystemExit(f"{int(train.sum())} training rows, more than the map's landmarks; this benchmark "
                         f"needs every training row a landmark")
    inner = [(train & (subj != s), train & (subj == s)) for s in np.unique(subj[train])]
    cv = {}   # (mirror, sigma, model index) -> mean accuracy over the held-out training subjects
    for mi, s in cands:
        accs = np.array([accuracies(nystroem_features(kernels[(mi, s)], fit, all_rows), y, classes, fit, held,
                                    models, seed) for fit, held in inner])
        cv.update({(mi, s, j): float(a) for j, a in enumerate(accs.mean(axis=0))})
    top = max(cv.values())   # the best; among ties (to rounding) the first in the tie rule's order
    mirror, sigma, j = next(k for k in order if cv[k] >= top - 1e-9)
    Z = nystroem_features(kernels[(mirror, sigma)], train, all_rows)
    (acc,) = accuracies(Z, y, classes, train, test, [models[j]], seed)
    fm, m = bool(cfg.descriptor.mirror), cfg.model
    acc_file, Z_file = file_map_accuracy(views[fm][0], views[fm][1], cfg.features.sigma, y, classes, train, test,
                                         m, seed, fit_sample)
    Z_fast = nystroem_features(kernels[(fm, cfg.features.sigma)], train, all_rows)
    (acc_fast,) = accuracies(Z_fast, y, classes, train, test, [m], seed)
    gap = float(np.abs(Z_fast @ Z_fast.T - Z_file @ Z_file.T).max())
    if acc_fast != acc_file or gap > 1e-8:   # (Gram entries of order 1; rounding leaves about 1e-14)
        raise SystemExit(f"the features from the precomputed kernel are not the pipeline map's: test accuracy "
                         f"{acc_fast} against {acc_file}, Gram matrices {gap:.1e} apart")
    return {"mirror": mirror, "sigma": sigma, "loss": models[j].loss, "C": models[j].C, "cv": top,
            "accuracy": acc, "file_accuracy": acc_file, "file_accuracy_precomputed": acc_fast, "gram_gap": gap}


def exact_fold(views, exact_cfg, y, groups, train, test) -> dict:
    """One outer fold of the exact SVM (``*_exact.toml``): its sigma and C are chosen inside the fold already
    (:func:`exact_svm_fold`); here the mirror view too, by the same inner CV (ties: without it)."""
    from streamcov.stream.exact import exact_svm_fold

    got = {}
    for mi in (False, True):
        V, params, _ = views[mi]
        got[mi] = exact_svm_fold(V, y, groups, train, test, exact_cfg.model.sigma_grid, exact_cfg.model.C_grid,
                                 blocks=params.get("blocks"), views=int(params.get("views", 1)))
    mirror = bool(got[True]["cv_accuracy"] > got[False]["cv_accuracy"] + 1e-9)
    return {"exact_mirror": mirror, "exact_cv": got[mirror]["cv_accuracy"], "exact_accuracy": got[mirror]["accuracy"],
            "exact_file_accuracy": got[bool(exact_cfg.descriptor.mirror)]["accuracy"],
            "exact_sigma": got[mirror]["sigma"], "exact_C": got[mirror]["C"]}


if __name__ == "__main__":
    main()
