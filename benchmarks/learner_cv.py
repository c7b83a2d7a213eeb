"""Leave-one-subject-out CV of the pipeline's learners on the training subjects.

Chooses the ``[model]`` settings of a skeleton pipeline file: for each
candidate (a TOML inline table of ``[model]`` overrides), every training
subject is held out in turn; the feature map (its mean row too), the scaler
and the learner are fitted on the other training subjects with the
pipeline's own training code (`train_sgd_arrays`: shuffle buffer, scaling,
epochs of the file; `train_lbfgs_arrays` for ``learner = "lbfgs"``), over
several map seeds. The folds are those of the training subjects of the
protocol's first fold: its test subjects are never read. On a protocol of
several folds (Florence3D, UTKinect) they are other folds' test subjects, so
a setting chosen here and reported over every fold is not held out there
(README, "What the Florence3D and UTKinect figures are not").

    python benchmarks/learner_cv.py --dataset msr --seeds 3 \\
        --candidate 'learner="sgd", learning_rate="pa1", eta0=0.3, loss="hinge", penalty="none"' \\
        --candidate 'learner="lbfgs", loss="log_loss", C=10.0'

``--pipeline`` runs the CV through the pipeline file itself (its
descriptor, feature map and bandwidth, block sums over pyramid windows
included): the held-out training subjects become the folds of a
``subject-splits-file`` split, and every candidate and map seed is one
``streamcov run`` of the file with ``[model]`` (and ``features.sigma``)
overridden; features are computed once per seed and fold and reused by
every candidate (the feature store's fingerprint covers everything but the
learner). Without it the descriptor is paper 000's (one covariance of
hip-relative positions), as in the study.

``--grid`` tries the pipeline's own settings (its learner as the file has
it) and the full-batch learner with both of its losses over a grid of C
(:data:`GRID_C`); ``--test`` then runs the pipeline with the candidate of
the best CV accuracy (ties: the smallest C, the strongest regularization and
the best-conditioned problem; then the first) and reports its test accuracy (mean
over the protocol's folds), beside the pipeline's own settings.

Prints one line per candidate and a final JSON line {candidate: mean CV
accuracy, chosen, test accuracies}.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import tomllib
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from streamcov.tasks.schema import LEARNER_KEYS, ModelTable  # noqa: E402
from streamcov.tasks.study import (DATASETS, accuracies, dataset_descriptors, ingest_dataset,  # noqa: E402
                                   map_params, rgw_sets)

GRID_C = (0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0)
PIPELINE = "the pipeline's settings"


def grid_candidates() -> list[str]:
    """The pipeline's settings, then lbfgs log loss and squared hinge over :data:`GRID_C`."""
    return [PIPELINE] + [f'learner="lbfgs", loss="{loss}", C={c!r}, penalty="l2"'
                         for loss in ("log_loss", "squared_hinge") for c in GRID_C]


def overrides(text: str) -> dict:
    return {} if text == PIPELINE else tomllib.loads(f"m = {{{text}}}")["m"]


def map_sets(dataset: str, fmap: str | None) -> list[str]:
    """``--set`` overrides for another map than the file's: eq. (3) with the options the files had for it
    (study.rgw_sets), any other map by its name alone."""
    if fmap == "rgw":
        return rgw_sets(dataset)
    return [] if fmap is None else [f"features.map={json.dumps(fmap)}"]


def test_accuracy(dataset: str, over: dict, data_root: Path, sigma: str | None = None,
                  fmap: str | None = None, nu: int | None = None, extra: tuple = ()) -> dict:
    """The pipeline file run with ``over`` (and the map's ``sigma``, the ``extra`` overrides) on its own
    protocol: mean test accuracy, train seconds."""
    from streamcov.tasks import run

    pipe = DATASETS[dataset]
    sets = list(extra) + [f"model.{k}={json.dumps(v)}" for k, v in over.items()]
    if sigma is not None:
        sets.append(f"features.sigma={sigma}")
    sets += map_sets(dataset, fmap)
    if nu is not None:
        sets.append(f"features.n_components={int(nu)}")
    with tempfile.TemporaryDirectory() as tmp:
        store, _ = ingest_dataset(dataset, data_root, Path(tmp))
        res = run(REPO / "pipelines" / f"{pipe}.toml", overrides=sets, store=Path(store.path),
                  output=Path(tmp) / "out")
    folds = res.get("folds", [res])
    return {"accuracy": res["accuracy"], "accuracy_std": res.get("accuracy_std", 0.0),
            "train_seconds": float(sum(f["train_seconds"] for f in folds)), "n_folds": len(folds)}


def pipeline_cv(dataset: str, store, folds, cands, sigmas, seeds: int, workdir: Path, nu: int | None = None,
                fmap: str | None = None, extra: tuple = ()) -> dict:
    """``{key: (mean, std over seeds)}``: LOSO CV accuracy of each candidate through the pipeline file
    (``fmap``: another feature map in place of the file's; its keys that the new map does not read are
    dropped with a note, as ``--set features.map=...`` does)."""
    from streamcov.tasks import run

    pipe = DATASETS[dataset]
    splits = Path(workdir) / "training_subjects.toml"
    subj = store.subjects
    splits.write_text("".join(
        f"[[split]]\ntrain_subjects = {sorted(set(subj[tr].tolist()))}\ntest_subjects = {sorted(set(subj[te].tolist()))}\n"
        for _, tr, te in folds))
    base = ['split.kind="subject-splits-file"', f"split.file={json.dumps(str(splits))}"]
    if nu is not None:
        base.append(f"features.n_components={int(nu)}")
    base += map_sets(dataset, fmap) + list(extra)
    out = {}
    for text in cands:
        over = overrides(text)
        for sigma in sigmas:
            accs = []
            for seed in range(seeds):
                sets = base + [f"seed={seed}"] + [f"model.{k}={json.dumps(v)}" for k, v in over.items()]
                if sigma is not None:
                    sets.append(f"features.sigma={sigma!r}")
                # one output folder per seed and sigma: the features of its folds are reused by every candidate
                res = run(REPO / "pipelines" / f"{pipe}.toml", overrides=sets, store=Path(store.path),
                          output=Path(workdir) / f"out-{seed}-{sigma}")
                accs.append(res["accuracy"])
            key = text if sigma is None else f"{text}; sigma={sigma:g}"
            out[key] = (float(np.mean(accs)), float(np.std(accs)))
            print(f"{key}: LOSO CV accuracy {100 * out[key][0]:.2f} +- {100 * out[key][1]:.2f}", flush=True)
    return out


def training_folds(store, name: str, cfg):
    """LOSO folds over the subjects that the pipeline's split trains on (``cfg``: the typed pipeline)."""
    from streamcov.splits import folds as outer_folds

    subj = store.subjects
    split = cfg.split.model_dump()
    if split.get("file") and not Path(split["file"]).is_absolute():
        split["file"] = str(REPO / split["file"])
    # the first outer fold's training subjects: its test subjects are never read (the other folds' are)
    _, train, _ = outer_folds(split, store.labels, subj, store_split=store.split,
                              split_names=store.split_names, seed=cfg.seed)[0]
    return [(f"hold-{s}", train & (subj != s), train & (subj == s)) for s in np.unique(subj[train])]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="msr", choices=sorted(DATASETS))
    ap.add_argument("--candidate", action="append", default=[],
                    help="TOML inline-table body of [model] overrides (repeatable)")
    ap.add_argument("--map", default=None, help="feature map (default: the pipeline file's)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--nu", type=int, default=None,
                    help="features of the map (default: 5000 on paper 000's descriptor; with --pipeline the "
                         "file's n_components)")
    ap.add_argument("--sigma", type=float, action="append", default=[],
                    help="kernel bandwidth(s) of the map to try (default: the pipeline file's); repeatable")
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--jobs", type=int, default=1, help="fits run in this many processes")
    ap.add_argument("--grid", action="store_true", help="the pipeline's settings and lbfgs x losses x C")
    ap.add_argument("--pipeline", action="store_true",
                    help="CV through the pipeline file itself (its descriptor and map), not paper 000's descriptor")
    ap.add_argument("--set", dest="sets", action="append", default=[],
                    help="with --pipeline: any other override of the file (e.g. descriptor.mirror=true), in every run")
    ap.add_argument("--test", action="store_true",
                    help="run the pipeline with the chosen candidate and report its test accuracy")
    args = ap.parse_args(argv)
    if args.sets and not args.pipeline:
        ap.error("--set needs --pipeline (without it the descriptor is paper 000's)")
    cands = args.candidate + (grid_candidates() if args.grid else [])
    cands = cands or [PIPELINE]   # the file's own learner (lbfgs now: the sgd step rule pa1 it once was is no key of it)
    sigmas = args.sigma or [None]
    if args.pipeline:
        with tempfile.TemporaryDirectory() as tmp:
            store, cfg = ingest_dataset(args.dataset, Path(args.data), Path(tmp))
            folds = training_folds(store, args.dataset, cfg)
            res = pipeline_cv(args.dataset, store, folds, cands, sigmas, args.seeds, Path(tmp), args.nu, args.map,
                              args.sets)
        out = {k: v[0] for k, v in res.items()}
        fmap = args.map or cfg.features.map
        args.nu = args.nu or cfg.features.n_components
    else:
        args.nu = args.nu or 5000
        out = cv_paper000(args, cands, sigmas)
        fmap = out.pop("__map__")
    summary = {"dataset": args.dataset, "map": fmap, "nu": args.nu, "seeds": args.seeds, "sets": args.sets,
               "descriptor": "pipeline" if args.pipeline else "paper000", "cv_accuracy": out}
    if args.test:
        best = choose(out, cfg_of(args.dataset).model.C)
        summary["chosen"] = best
        summary["test"] = {best: test_accuracy(args.dataset, overrides(best.split("; sigma=")[0]), Path(args.data),
                                               best.split("; sigma=")[1] if "; sigma=" in best else None,
                                               args.map if args.pipeline else None, args.nu if args.pipeline else None,
                                               args.sets)}
        if best != PIPELINE and PIPELINE in out:
            summary["test"][PIPELINE] = test_accuracy(args.dataset, {}, Path(args.data), None,
                                                      args.map if args.pipeline else None,
                                                      args.nu if args.pipeline else None, args.sets)
        for k, v in summary["test"].items():
            print(f"test ({k}): {100 * v['accuracy']:.2f} +- {100 * v['accuracy_std']:.2f} over {v['n_folds']} "
                  f"fold(s), training {v['train_seconds']:.1f} s", flush=True)
    print(json.dumps(summary))


def cfg_of(dataset: str):
    from streamcov.tasks.config import load_config

    return load_config(REPO / "pipelines" / f"{DATASETS[dataset]}.toml")


def choose(cv: dict, default_C: float) -> str:
    """The candidate of the best CV accuracy; among equal accuracies (the same predictions on every
    held-out subject, to rounding) the smallest C, then the first listed."""
    top = max(cv.values())
    tied = [k for k in cv if cv[k] >= top - 1e-9]
    return min(tied, key=lambda k: float(overrides(k.split("; sigma=")[0]).get("C", default_C)))


def cv_paper000(args, cands, sigmas) -> dict:
    """CV of every candidate on paper 000's descriptor (the study's), one map block."""
    with tempfile.TemporaryDirectory() as tmp:
        store, cfg, V, _ = dataset_descriptors(args.dataset, Path(args.data), tmp)
        folds = training_folds(store, args.dataset, cfg)
    y = store.labels.astype(np.int64)
    classes = np.arange(len(store.label_names))
    # paper 000's study: its eq. (3) map unless told otherwise, with the random maps' options of the study
    fmap = args.map or "rgw"
    params = map_params(args.dataset, cfg)
    out = {"__map__": fmap}
    for text in cands:
        over = overrides(text)
        for sigma in sigmas:
            feats = params if sigma is None else dict(params, sigma=sigma)
            # validated like a [model] table of a pipeline file: a misspelt key, a bad value or a key the
            # learner does not read fails here; a candidate that changes the learner drops the file's keys
            # that its learner does not read, as --set model.learner does
            base = cfg.model.model_dump(exclude_unset=True)
            learner = over.get("learner", cfg.model.learner)
            if learner != cfg.model.learner and learner in LEARNER_KEYS:
                base = {k: v for k, v in base.items() if k in LEARNER_KEYS[learner]}
            model = ModelTable.model_validate({**base, **over})
            (row,) = accuracies(V, y, folds, classes, feats, model, [fmap], [args.nu], args.seeds,
                                jobs=args.jobs)
            key = text if sigma is None else f"{text}; sigma={sigma:g}"
            out[key] = row["accuracy"]
            print(f"{key}: LOSO CV accuracy {100 * row['accuracy']:.2f} +- {100 * row['accuracy_std']:.2f}",
                  flush=True)
    return out


if __name__ == "__main__":
    main()
