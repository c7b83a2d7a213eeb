"""Accuracy of the exact Log-E SVM and of incremental SGD on RGW / RFF features.

Real data: MSR-Action3D (cross-subject), Florence3D (leave-one-actor-out),
UTKinect (10 subject splits). Descriptors are computed once per dataset by the
same kernels as the pipeline; SGD runs the pipeline's training loop
(`train_sgd_arrays`) with the settings of the dataset's pipeline file.

    python benchmarks/skeleton_accuracy.py [--quick] [--datasets msr,florence,utkinect]
        [--nus 10,20,...] [--seeds 10] [--out runs/skeleton_accuracy]

Prints a markdown table and a final JSON line with every number.
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

from streamcov.splits import folds  # noqa: E402
from streamcov.tasks.study import (accuracies, dataset_descriptors, exact_accuracies, map_params,  # noqa: E402
                                   sgd_model)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 seeds, nu in {50, 500, 5000}, MSR only")
    ap.add_argument("--datasets", default="msr,florence,utkinect")
    ap.add_argument("--nus", default="10,20,50,100,200,500,1000,2000,5000")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--maps", default="rgw,rff")
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--out", default="runs/skeleton_accuracy")
    args = ap.parse_args(argv)
    nus = [int(x) for x in args.nus.split(",")]
    seeds = args.seeds
    names = args.datasets.split(",")
    if args.quick:
        nus, seeds, names = [50, 500, 5000], 3, ["msr"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {"nus": nus, "seeds": seeds, "datasets": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            store, cfg, V, t_desc = dataset_descriptors(name, Path(args.data), tmp)
            y = store.labels.astype(np.int64)
            classes = np.arange(len(store.label_names))
            fl = folds(cfg.split, store.labels, store.subjects, store_split=store.split,
                       split_names=store.split_names, seed=cfg.seed)
            t0 = time.perf_counter()
            ex = exact_accuracies(V, y, store.subjects, fl, name)
            t_exact = time.perf_counter() - t0
            ex_acc = np.array([r["accuracy"] for r in ex])
            entry = {"n_sequences": store.n_sequences, "descriptor_dim": V.shape[1],
                     "descriptor_ms_per_sequence": 1e3 * t_desc / store.n_sequences,
                     "exact": {"mean": ex_acc.mean(), "std": ex_acc.std(),
                               "chosen": [(r["sigma"], r["C"]) for r in ex], "seconds": t_exact},
                     "maps": {}}
            print(f"{name}: exact {100 * ex_acc.mean():.2f} +- {100 * ex_acc.std():.2f} "
                  f"({len(fl)} folds, {t_exact:.1f} s)", flush=True)
            for r in accuracies(V, y, fl, classes, map_params(name, cfg), sgd_model(name), args.maps.split(","),
                                nus, seeds, log=lambda msg: print(msg, flush=True)):
                entry["maps"].setdefault(r["map"], {})[r["nu"]] = {
                    "mean": r["accuracy"], "std": r["accuracy_std"],
                    "map_ms_per_sequence": r["map_ms_per_sequence"]}
            results["datasets"][name] = entry
    # markdown table
    lines = ["| dataset | exact Log-E SVM | map | " + " | ".join(f"nu={n}" for n in nus) + " |",
             "|---|---|---|" + "---|" * len(nus)]
    for name, e in results["datasets"].items():
        for mname, rows in e["maps"].items():
            lines.append(f"| {name} | {100 * e['exact']['mean']:.1f} ± {100 * e['exact']['std']:.1f} | "
                         f"{mname} | " + " | ".join(f"{100 * rows[n]['mean']:.1f} ± {100 * rows[n]['std']:.1f}"
                                                    for n in nus) + " |")
    table = "\n".join(lines)
    print(table)
    (out / "table.md").write_text(table + "\n")
    (out / "results.json").write_text(json.dumps(results, indent=1, default=float))
    print(json.dumps(results, default=float))


if __name__ == "__main__":
    main()
