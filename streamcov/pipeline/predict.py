"""Streaming predictions of a saved model on a store."""
from __future__ import annotations

import csv
import time
from pathlib import Path

import numpy as np

from .. import covariance as cov
from ..model import FittedPipeline
from ..store import SequenceStore
from .executor import dask_runtime
from .graph import descriptor_blocks


def predict_store(model_dir, store_path, out_csv=None, scheduler="threads", workers=None,
                  block_sequences: int = 512) -> dict:
    """Predict every sequence of a store, block by block; returns a summary.

    The descriptor settings (centre joints, gamma, normalization) come from the
    model, so the features match those it was trained on.
    """
    t0 = time.perf_counter()
    model = FittedPipeline.load(model_dir)
    store = SequenceStore(store_path)
    if store.n_joints != model.n_joints:
        raise ValueError(f"model was trained on {model.n_joints} joints, store {store_path} has "
                         f"{store.n_joints}")
    d = model.descriptor
    center = model.center if model.center is not None else store.center
    sel = (cov.JointSelection.hip_relative(store.n_joints, center) if center
           else cov.JointSelection.raw(store.n_joints))
    predictions = np.empty(store.n_sequences, dtype=np.int64)
    with dask_runtime(scheduler, workers) as (compute, runtime, numba_threads):
        blocks = descriptor_blocks(store, sel, float(d["gamma"]), bool(d["normalize"]),
                                   int(d.get("ddof", 1)), d.get("dtype", "float64"),
                                   block_sequences, numba_threads)
        import dask
        tasks = [dask.delayed(model.predict_codes)(t) for _, _, t in blocks]
        for (b0, b1, _), p in zip(blocks, compute(*tasks)):
            predictions[b0:b1] = p
    names = np.asarray(model.label_names, dtype=object)
    pred_names = names[predictions]
    summary = {"model": str(model_dir), "store": str(store_path), "n": store.n_sequences,
               "seconds": round(time.perf_counter() - t0, 3), "runtime": runtime}
    true = store.label_strings()
    known = np.isin(true, names)
    if known.any():
        summary["accuracy"] = float((pred_names[known] == true[known]).mean())
        summary["n_labelled"] = int(known.sum())
    if out_csv is not None:
        Path(out_csv).parent.mkdir(parents=True, exist_ok=True)
        with open(out_csv, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["id", "predicted", "label"])
            for sid, p, t in zip(store.ids(), pred_names, true):
                w.writerow([sid, p, t])
        summary["predictions"] = str(out_csv)
    return summary
