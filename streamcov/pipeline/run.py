"""Run a pipeline: store -> descriptors -> features -> incremental SGD (or exact SVM)."""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from .. import covariance as cov
from ..store import IncompleteStoreError, SequenceStore, ingest, store_status
from . import maps
from .config import ConfigError
from .executor import dask_runtime
from .featurestore import FeatureStore, write_block
from .graph import block_bounds, descriptor_blocks
from .splits import folds
from ..model import FittedPipeline
from .train import fit_scaler, predict_mask, train_sgd


def output_dir(cfg: dict) -> Path:
    return Path(str(cfg.get("output", "runs/{name}")).format(name=cfg.get("name", "pipeline")))


def resolve_store(cfg: dict, out: Path, progress: bool) -> SequenceStore:
    """Open the pipeline's store, ingesting or generating it first when needed."""
    d = cfg["data"]
    if d.get("synthetic") is not None:
        from ..synth import SyntheticSkeletonSource

        params = dict(d["synthetic"])
        path = Path(d["store"]) if d.get("store") else out / "synthetic.zarr"
        source = SyntheticSkeletonSource(**params)
        if not (path.exists() and store_status(path)["complete"]):
            ingest(source, path, mode="resume", progress=progress)
        return SequenceStore(path)
    path = Path(d["store"])
    if path.exists():
        try:
            return SequenceStore(path)
        except IncompleteStoreError:
            if not d.get("source"):
                raise
    elif not d.get("source"):
        raise ConfigError(f"store {path} does not exist; create it with `streamcov ingest "
                          f"skeleton --format FORMAT SRC {path}` or set data.source/data.format")
    from ..readers import open_source

    source = open_source(d["format"], d["source"], **d.get("reader_options", {}))
    return ingest(source, path, mode="resume", progress=progress)


def selection_for(store: SequenceStore, descriptor: dict) -> cov.JointSelection:
    center = descriptor.get("center", "store")
    if center == "store":
        return cov.JointSelection.hip_relative(store.n_joints, store.center)
    if center in ("none", None):
        return cov.JointSelection.raw(store.n_joints)
    return cov.JointSelection.hip_relative(store.n_joints, list(center))


def run_skeleton(cfg: dict, out: Path, progress: bool = False, scheduler: str | None = None,
                 workers: int | None = None, resume: bool = False) -> dict:
    t_start = time.perf_counter()
    seed = int(cfg["seed"])
    store = resolve_store(cfg, out, progress)
    desc = cfg["descriptor"]
    sel = selection_for(store, desc)
    p = cov.vec_dim(sel.dim)
    y = store.labels.astype(np.int64)
    classes = np.arange(len(store.label_names))
    subjects = store.subjects
    fold_list = list(folds(cfg["split"], subjects, store.split, store.split_names))
    dcfg = cfg["dask"]
    scheduler = scheduler or dcfg["scheduler"]
    workers = workers if workers is not None else dcfg["workers"]
    bs = int(dcfg["block_sequences"])
    result: dict = {"pipeline": cfg.get("name"), "store": str(store.path),
                    "n_sequences": store.n_sequences, "descriptor_dim": p, "seed": seed}

    with dask_runtime(scheduler, workers) as (compute, runtime, numba_threads):
        result["runtime"] = runtime
        blocks = descriptor_blocks(store, sel, float(desc["gamma"]), bool(desc["normalize"]),
                                   int(desc["ddof"]), desc["dtype"], bs, numba_threads)
        if cfg["model"]["learner"] == "exact-svm":
            t0 = time.perf_counter()
            V = np.concatenate(compute(*[t for _, _, t in blocks]))
            t_feat = time.perf_counter() - t0
            result.update(_exact(cfg, V, y, subjects, fold_list))
            result.update({"feature_map": "exact", "n_components": None,
                           "featurize_seconds": round(t_feat, 3),
                           "featurize_ms_per_sequence": round(1e3 * t_feat / store.n_sequences, 4)})
        else:
            result.update(_sgd(cfg, store, blocks, p, y, classes, subjects, fold_list, compute,
                               out, seed, progress, resume, sel))
    result["seconds"] = round(time.perf_counter() - t_start, 3)
    return result


def _exact(cfg, V, y, subjects, fold_list) -> dict:
    from ..exact import exact_svm_fold

    m = cfg["model"]
    per = []
    for name, train, test in fold_list:
        r = exact_svm_fold(V, y, subjects, train, test, m["sigma_grid"], m["C_grid"])
        r.update(fold=name, n_train=int(train.sum()), n_test=int(test.sum()))
        per.append(r)
    return _summarize(per)


def _summarize(per: list[dict]) -> dict:
    accs = np.array([r["accuracy"] for r in per])
    out = {"accuracy": float(accs.mean()), "accuracy_std": float(accs.std()),
           "n_train": int(np.mean([r["n_train"] for r in per])),
           "n_test": int(np.mean([r["n_test"] for r in per])), "n_folds": len(per)}
    if len(per) == 1:
        out.update({k: v for k, v in per[0].items() if k not in out and k != "fold"})
    else:
        out["folds"] = per
    return out


def _sgd(cfg, store, blocks, p, y, classes, subjects, fold_list, compute, out, seed,
         progress, resume=False, sel=None) -> dict:
    import dask

    fcfg = dict(cfg["features"])
    fmap = maps.make_feature_map({k: v for k, v in fcfg.items() if k != "fit_sample"}, seed)
    sample = None
    if maps.needs_data(fcfg):
        # Fitted on training sequences of the first fold only (up to
        # features.fit_sample of them), never on test rows.
        train0 = fold_list[0][1]
        limit = int(fcfg.get("fit_sample", 2048))
        picked, count = [], 0
        for b0, b1, t in blocks:
            rows = np.flatnonzero(train0[b0:b1])
            if len(rows):
                picked.append((rows, t))
                count += len(rows)
            if count >= limit:
                break
        parts = compute(*[t for _, t in picked])
        sample = np.concatenate([V[rows] for (rows, _), V in zip(picked, parts)])[:limit]
    fmap = maps.fit_feature_map(fmap, p, sample)
    dim = maps.output_dim(fmap, p)
    dtype = cfg["descriptor"]["dtype"]
    bounds = block_bounds(store.n_sequences, int(cfg["dask"]["block_sequences"]))
    fingerprint = {"store": str(Path(store.path).resolve()), "n": store.n_sequences,
                   "descriptor": cfg["descriptor"], "features": cfg["features"],
                   "seed": seed, "bounds": [int(b) for b in bounds]}
    fpath = out / "features.zarr"
    fstore = FeatureStore.open_or_create(fpath, store.n_sequences, dim, bounds, dtype, fingerprint)
    done = fstore.done()
    todo = []
    transform = dask.delayed(fmap, pure=True) if fmap is not None else None
    for i, (b0, b1, task) in enumerate(blocks):
        if done[i]:
            continue
        X = task if transform is None else dask.delayed(_transform)(transform, task)
        todo.append((b0, dask.delayed(write_block)(str(fpath), i, b0, b1, X)))
    t0 = time.perf_counter()
    # Windows of consecutive blocks: a chunk's partial moments stay alive only
    # until the blocks that need them are done, so memory does not grow with
    # the store (one graph for everything lets Dask run chunks out of order
    # and keep many chunk results alive at once).
    # Blocks are grouped by the chunk their first frame lies in, W chunks per
    # window (chunk results are not shared between compute calls, so a chunk
    # cut by a window boundary is read twice: at most once per window).
    w_chunks = max(1, int(runtime_threads(cfg)))
    cf = store.chunk_frames
    groups, key_of = [], None
    for start, task in todo:
        key = int(store.offsets[start] // cf) // w_chunks
        if key != key_of:
            groups.append([])
            key_of = key
        groups[-1].append(task)
    bar = None
    if progress and groups:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(todo), desc="featurize", unit="block")
    for group in groups:
        compute(*group)
        if bar is not None:
            bar.update(len(group))
    if bar is not None:
        bar.close()
    t_feat = time.perf_counter() - t0
    featurized = sum(int(b1 - b0) for i, (b0, b1, _) in enumerate(blocks) if not done[i])
    per = []
    prefetch = int(cfg["dask"]["prefetch"])
    mcfg = cfg["model"]
    ckdir = out / "checkpoints"
    ckdir.mkdir(exist_ok=True)
    fp_text = json.dumps({"features": fingerprint, "model": mcfg, "split": cfg["split"]},
                         sort_keys=True, default=str)
    for name, train, test in fold_list:
        done_file = ckdir / f"{name}.result.json"
        if resume and done_file.is_file():
            saved = json.loads(done_file.read_text())
            if saved.get("fingerprint") == fp_text:
                per.append(saved["result"])
                continue
        t1 = time.perf_counter()
        kind = mcfg.get("scale", "none")
        scaler = None if kind in ("none", None) else fit_scaler(fstore, train, prefetch, kind)
        clf = train_sgd(fstore, y, train, classes, mcfg, seed, prefetch, progress,
                        checkpoint=ckdir / f"{name}.npz", resume=resume, scaler=scaler,
                        fingerprint=fp_text)
        t_train = time.perf_counter() - t1
        pred = predict_mask(fstore, clf, test, prefetch, scaler)
        acc = float((pred == y[test]).mean()) if test.any() else float("nan")
        r = {"fold": name, "accuracy": acc, "n_train": int(train.sum()),
             "n_test": int(test.sum()), "train_seconds": round(t_train, 3),
             "epochs_run": int(getattr(clf, "streamcov_epochs_", mcfg["epochs"]))}
        per.append(r)
        if len(fold_list) == 1 or name == fold_list[-1][0]:
            FittedPipeline(fmap, scaler, clf, store.label_names, cfg["descriptor"],
                           list(sel.center) if sel is not None else None, store.n_joints,
                           {"pipeline": cfg.get("name"), "fold": name, "seed": seed}).save(out / "model")
        from ..model import atomic_write_text
        atomic_write_text(done_file, json.dumps({"fingerprint": fp_text, "result": r}))
    res = _summarize(per)
    res.update({
        "feature_map": cfg["features"].get("map", "rgw"),
        "n_components": None if fmap is None else int(fmap.n_components),
        "feature_params": {k: v for k, v in cfg["features"].items() if k != "map"},
        "featurize_seconds": round(t_feat, 3),
        "featurized_sequences": featurized,
        "featurize_ms_per_sequence": round(1e3 * t_feat / max(featurized, 1), 4),
        "epochs": int(cfg["model"]["epochs"]),
        "features_path": str(fpath),
        "model_path": str(out / "model"),
    })
    return res


def runtime_threads(cfg) -> int:
    """Blocks that can run at once (threads or workers); sizes the windows."""
    from .._config import thread_plan

    w = cfg["dask"].get("workers")
    return int(w) if w else thread_plan().cores


def _transform(fmap, X):
    # One BLAS thread: the projection GEMM then sums in the same order on every
    # worker, whatever threads its process was started with (bitwise-equal features).
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        return fmap.transform(X)


TASK_MODULES = {
    "skeleton-classification": None,
    "tgp-sshape": "streamcov.tasks.tgp", "tgp-digits": "streamcov.tasks.tgp",
    "tgp-pose": "streamcov.tasks.tgp",
    "image-classification": "streamcov.tasks.images",
    "image-stream-classification": "streamcov.tasks.images",
}
# Tasks that run a Dask graph: they also take the scheduler, workers and resume options.
DASK_TASKS = {"image-stream-classification"}


def run_pipeline(cfg: dict, progress: bool = False, scheduler: str | None = None,
                 workers: int | None = None, resume: bool = False) -> dict:
    """Run the task named by ``cfg["task"]``; write and return its result."""
    import importlib

    task = cfg.get("task", "skeleton-classification")
    if task not in TASK_MODULES:
        raise ConfigError(f"unknown task {task!r}; known: {', '.join(TASK_MODULES)}")
    out = output_dir(cfg)
    out.mkdir(parents=True, exist_ok=True)
    if task == "skeleton-classification":
        result = run_skeleton(cfg, out, progress, scheduler, workers, resume)
    else:
        module = importlib.import_module(TASK_MODULES[task])
        if task in DASK_TASKS:
            result = module.TASKS[task](cfg, out, progress, scheduler=scheduler, workers=workers,
                                        resume=resume)
        else:
            result = module.TASKS[task](cfg, out, progress)
    result = {"task": task, **result}
    (out / "result.json").write_text(json.dumps(result, indent=2, default=_json_default) + "\n")
    return result


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)
