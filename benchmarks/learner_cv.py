"""Leave-one-subject-out CV of the pipeline's incremental learner on the training subjects.

Chooses the ``[model]`` settings of a skeleton pipeline file: for each
candidate (a TOML inline table of ``[model]`` overrides), every training
subject is held out in turn; the feature map (its mean row too), the scaler
and the learner are fitted on the other training subjects with the
pipeline's own training loop (`train_sgd_arrays`: shuffle buffer, scaling,
epochs of the file), over several map seeds. The test subjects are never
read.

    python benchmarks/learner_cv.py --dataset msr --seeds 3 \\
        --candidate 'learning_rate="pa1", eta0=0.3, loss="hinge", penalty="none"' \\
        --candidate 'loss="squared_hinge", learning_rate="constant", eta0=0.1, C=3, penalty="l2"'

Prints one line per candidate and a final JSON line {candidate: mean CV accuracy}.
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

from streamcov.tasks.schema import ModelTable  # noqa: E402
from streamcov.tasks.study import DATASETS, accuracies, dataset_descriptors  # noqa: E402


def training_folds(store, name: str, cfg):
    """LOSO folds over the subjects that the pipeline's split trains on (``cfg``: the typed pipeline)."""
    from streamcov.splits import folds as outer_folds

    subj = store.subjects
    split = cfg.split.model_dump()
    if split.get("file") and not Path(split["file"]).is_absolute():
        split["file"] = str(REPO / split["file"])
    # the first outer fold's training subjects: its test subjects are never read
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
    ap.add_argument("--nu", type=int, default=5000)
    ap.add_argument("--sigma", type=float, action="append", default=[],
                    help="kernel bandwidth(s) of the map to try (default: the pipeline file's); repeatable")
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--jobs", type=int, default=1, help="fits run in this many processes")
    args = ap.parse_args(argv)
    cands = args.candidate or ['learning_rate="pa1"']
    with tempfile.TemporaryDirectory() as tmp:
        store, cfg, V, _ = dataset_descriptors(args.dataset, Path(args.data), tmp)
        folds = training_folds(store, args.dataset, cfg)
    y = store.labels.astype(np.int64)
    classes = np.arange(len(store.label_names))
    fmap = args.map or cfg.features.map
    out = {}
    sigmas = args.sigma or [None]
    for text in cands:
        over = tomllib.loads(f"m = {{{text}}}")["m"]
        for sigma in sigmas:
            feats = cfg.features.params() if sigma is None else dict(cfg.features.params(), sigma=sigma)
            # validated like a [model] table of a pipeline file: a misspelt key or a bad value fails here
            model = ModelTable.model_validate({**cfg.model.model_dump(), **over})
            (row,) = accuracies(V, y, folds, classes, feats, model, [fmap], [args.nu], args.seeds,
                                jobs=args.jobs)
            key = text if sigma is None else f"{text}; sigma={sigma:g}"
            out[key] = row["accuracy"]
            print(f"{key}: LOSO CV accuracy {100 * row['accuracy']:.2f} +- {100 * row['accuracy_std']:.2f}",
                  flush=True)
    print(json.dumps({"dataset": args.dataset, "map": fmap, "nu": args.nu, "seeds": args.seeds,
                      "n_folds": len(folds), "cv_accuracy": out}))


if __name__ == "__main__":
    main()
