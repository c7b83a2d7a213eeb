"""Leave-one-subject-out CV of the pipeline's learner on the MSR-Action3D training subjects.

Chooses the passive-aggressive step bound ``eta0`` of ``pipelines/msr_action3d.toml``:
for each candidate, every training subject (1, 3, 5, 7, 9) is held out in turn; the
RGW map (its mean row too) and the learner are fitted on the other four with the
pipeline's own training loop (`train_sgd_arrays`: shuffle buffer, centre scaling,
epochs of the file), over several map seeds. The test subjects are never read.

    python benchmarks/msr_learner_cv.py [--etas 0.1,0.3,1] [--seeds 3] [--nu 5000]

Prints one line per candidate and a final JSON line {eta0: mean CV accuracy}.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from streamcov.study import accuracies, dataset_descriptors  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--etas", default="0.1,0.3,1")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--nu", type=int, default=5000)
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        store, cfg, V, _ = dataset_descriptors("msr", Path(args.data), tmp)
    y = store.labels.astype(np.int64)
    subj = store.subjects
    train = subj % 2 == 1
    loso = [(s, train & (subj != s), train & (subj == s)) for s in np.unique(subj[train])]
    classes = np.arange(len(store.label_names))
    out = {}
    for eta in (float(e) for e in args.etas.split(",")):
        cv_cfg = dict(cfg, model=dict(cfg["model"], eta0=eta))
        (row,) = accuracies(V, y, loso, classes, cv_cfg, ["rgw"], [args.nu], args.seeds)
        out[eta] = row["accuracy"]
        print(f"eta0 {eta}: LOSO CV accuracy {100 * out[eta]:.2f}", flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
