"""Images out of core on Dask: paper 004's scalable path, ``task = "image-stream-classification"``.

The in-memory scalable path (:func:`streamcov.images.evaluation.select_and_test_sgd`,
``classifier = "sgd"`` of the ``image-classification`` task) holds every image,
every log-operator vector and every random feature in RAM. This module runs the
same representation block by block, exactly like the skeleton pipeline
(:mod:`streamcov.pipeline.graph`, :mod:`streamcov.pipeline.run`): Dask tasks
receive the image store's *path* and open it themselves, so the same code runs
on the threaded scheduler and on dask.distributed workers, and the rows land in
a :class:`~streamcov.pipeline.featurestore.FeatureStore` that the incremental
learner streams over.

::

    image store (zarr, `streamcov ingest images`)
      │ pass 1, training images only: per-pixel features -> moments (n, mean, M2) per block,
      │         merged (Chan) -> feature scale (one number, or one per feature)
      │ pass 2, a seeded sample of `fit_sample` training images: log-operator vectors ->
      │         median pairwise distance -> K2 bandwidth sigma2 * median
      ▼ pass 3, every block of `block_images` images:
    pixel features (numba) -> / scale -> random (or Halton) Fourier features, frequencies
    fixed by the seed -> 2D x 2D approximate covariance operator (eq. (20)) ->
    vec(log(I + C / gamma)) (eq. (21); the constant log(gamma) I cancels in distances) ->
    random features of K2 (GaussianRandomFeatures, R = n_components) -> feature store
    (one chunk per block, a done flag per block: a restart skips finished blocks)
      ▼
    SGDClassifier.partial_fit over shuffled pooled blocks (streamcov.pipeline.train.train_sgd)
      ▼
    predictions on the test rows (predict_mask), accuracy, result.json

Everything data-dependent (feature scale, K2 bandwidth, the optional
``model.scale`` scaler) is fitted on training images only. The scale and the
bandwidth are kept in the feature store's attributes, so a restarted run with
the same inputs reuses them and featurizes only the blocks not yet done.

Pipeline tables (fixed hyperparameters: no grid search here; the
cross-validated grids over sigma1, gamma, sigma2 and C live in the in-memory
``image-classification`` task, :mod:`streamcov.tasks.images`)::

    [dataset]  path (an image store); optional source + format = "folders" (+ group_level,
               exclude): the folder is ingested into `path` when the store is missing or
               incomplete (resumed)
    [features] preset and/or features, gabor_*, stride (as the image task)
    [method]   name ("approx_loghs": random Fourier features; "qapprox_loghs": Halton),
               D, sigma1 (x sqrt(n_features) x feature scale), gamma, sigma2 (x median
               training distance), n_components (K2 random features), scaling ("global"
               or "per-feature"), fit_sample (training images for the median, default 256)
    [model]    passed to streamcov.pipeline.train.train_sgd over the skeleton defaults:
               loss, learning_rate, eta0, alpha or C, epochs, average, scale,
               shuffle_blocks, ...
    [split]    kind = "stratified-fold" (n_splits, fold, seed), "per-class" (n_train,
               n_test, seed) or "store" (the store's split column: train / test)
    [dask]     scheduler (threads, synchronous, local-cluster, tcp://...), workers,
               block_images (images per block = per feature chunk), prefetch

One run evaluates one split (the scale and the bandwidth depend on its training
images); run the other folds with ``--set split.fold=K``.
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .._config import kernel_threads
from ..pipeline.config import DEFAULTS as _PIPELINE_DEFAULTS
from ..pipeline.config import ConfigError

TASK = "image-stream-classification"

_KEYS = {
    "dataset": {"path", "source", "format", "group_level", "exclude"},
    "method": {"name", "D", "sigma1", "gamma", "sigma2", "n_components", "scaling", "fit_sample"},
    "split": {"kind", "n_splits", "fold", "n_train", "n_test", "seed"},
    "dask": {"scheduler", "workers", "block_images", "prefetch"},
}
_TOP_KEYS = {"task", "name", "seed", "output", "paper_accuracy", "_file", "features", "model", *_KEYS}
SPLIT_KINDS = ("stratified-fold", "per-class", "store")
METHODS = ("approx_loghs", "qapprox_loghs")
MODEL_SCALES = ("none", "center", "standard")


# ------------------------------------------------------------------ config
@dataclass(frozen=True)
class MethodParams:
    """Fixed hyperparameters of the streamed representation."""

    name: str = "approx_loghs"
    D: int = 200
    sigma1: float = 1.0
    gamma: float = 1e-3
    sigma2: float = 1.0
    n_components: int = 4096
    scaling: str = "global"
    fit_sample: int = 256

    @property
    def kind(self) -> str:
        return "halton" if self.name == "qapprox_loghs" else "random"


def _table(cfg: dict, name: str) -> dict:
    t = cfg.get(name, {})
    if not isinstance(t, dict):
        raise ConfigError(f"[{name}] must be a table, got {type(t).__name__}")
    known = _KEYS.get(name)
    if known is not None:
        extra = set(t) - known
        if extra:
            raise ConfigError(f"unknown key(s) {sorted(extra)} in [{name}]; known: {sorted(known)}")
    return dict(t)


def _number(table: dict, section: str, key: str, default):
    v = table.get(key, default)
    if isinstance(v, list):
        raise ConfigError(f"{section}.{key} must be one number, got the list {v!r}: the streaming "
                          f"path takes fixed hyperparameters (the grid search lives in the "
                          f"in-memory task image-classification)")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise ConfigError(f"{section}.{key} must be a finite number > 0, got {v!r}")
    return float(v)


def _integer(table: dict, section: str, key: str, default, minimum: int = 1):
    v = table.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ConfigError(f"{section}.{key} must be an integer >= {minimum}, got {v!r}")
    return int(v)


def method_params(mcfg: dict) -> MethodParams:
    """Validated ``[method]`` table."""
    name = mcfg.get("name", "approx_loghs")
    if name not in METHODS:
        raise ConfigError(f"method.name must be one of {', '.join(METHODS)} (the streamed "
                          f"representations), got {name!r}")
    scaling = mcfg.get("scaling", "global")
    if scaling not in ("global", "per-feature"):
        raise ConfigError(f"method.scaling must be 'global' or 'per-feature', got {scaling!r}")
    return MethodParams(
        name=name, D=_integer(mcfg, "method", "D", 200), sigma1=_number(mcfg, "method", "sigma1", 1.0),
        gamma=_number(mcfg, "method", "gamma", 1e-3), sigma2=_number(mcfg, "method", "sigma2", 1.0),
        n_components=_integer(mcfg, "method", "n_components", 4096), scaling=scaling,
        fit_sample=_integer(mcfg, "method", "fit_sample", 256, minimum=2))


def model_params(cfg: dict) -> dict:
    """``[model]`` over the skeleton pipeline's model defaults; passed unchanged to train_sgd."""
    raw = _table(cfg, "model")
    known = set(_PIPELINE_DEFAULTS["model"])
    extra = set(raw) - known
    if extra:
        raise ConfigError(f"unknown key(s) {sorted(extra)} in [model]; known: {sorted(known)}")
    model = {**_PIPELINE_DEFAULTS["model"], **raw}
    if model.get("learner", "sgd") != "sgd":
        raise ConfigError(f"model.learner must be 'sgd' here (incremental learning over the feature "
                          f"store), got {model['learner']!r}")
    scale = model.get("scale") or "none"
    if scale not in MODEL_SCALES:
        raise ConfigError(f"model.scale must be one of {', '.join(MODEL_SCALES)}, got {scale!r}")
    _integer(model, "model", "epochs", 40)
    _integer(model, "model", "shuffle_blocks", 8)
    if model.get("alpha") is not None:
        _number(model, "model", "alpha", None)
    else:
        _number(model, "model", "C", 10.0)
    return model


def dask_params(cfg: dict) -> dict:
    d = _table(cfg, "dask")
    scheduler = d.get("scheduler", "threads")
    if not isinstance(scheduler, str) or not (
            scheduler in ("threads", "synchronous", "local-cluster") or "://" in scheduler):
        raise ConfigError(f"dask.scheduler must be threads, synchronous, local-cluster or a scheduler "
                          f"address tcp://HOST:PORT, got {scheduler!r}")
    return {"scheduler": scheduler,
            "workers": None if d.get("workers") is None else _integer(d, "dask", "workers", None),
            "block_images": _integer(d, "dask", "block_images", 64),
            "prefetch": _integer(d, "dask", "prefetch", 2)}


def _resolve(path, cfg):
    from ..tasks.images import _resolve as resolve
    return resolve(str(path), cfg)


# ------------------------------------------------------------------ data
def resolve_image_store(dcfg: dict, cfg: dict, progress: bool = False):
    """Open ``dataset.path``; ingest ``dataset.source`` into it first when missing or incomplete."""
    from ..images.store import ingest_images, open_image_store
    from ..store import IncompleteStoreError

    if not dcfg.get("path"):
        raise ConfigError("[dataset] needs `path` (an image store written by `streamcov ingest images`)")
    path = _resolve(dcfg["path"], cfg)
    source = dcfg.get("source")
    if path.exists():
        try:
            return open_image_store(path)
        except IncompleteStoreError:
            if not source:
                raise
    elif not source:
        raise ConfigError(f"image store {path} does not exist; create it with `streamcov ingest images "
                          f"--format folders SRC {path}` or set dataset.source (and dataset.format)")
    fmt = dcfg.get("format", "folders")
    if fmt != "folders":
        raise ConfigError(f"dataset.format must be 'folders' (the format of dataset.source), got {fmt!r}")
    src = _resolve(source, cfg)
    if not src.is_dir():
        raise ConfigError(f"dataset.source {str(src)!r}: folder not found")
    group_level = _integer(dcfg, "dataset", "group_level", 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    return ingest_images(src, path, group_level=group_level,
                         exclude=tuple(dcfg.get("exclude", ("maps",))), mode="resume", progress=progress)


def split_masks(scfg: dict, store, seed: int):
    """``(name, train_mask, test_mask)`` of the one split a run evaluates."""
    from . import evaluation as ev

    kind = scfg.get("kind", "stratified-fold")
    labels = store.labels
    n = len(labels)
    sseed = scfg.get("seed", seed)
    if isinstance(sseed, bool) or not isinstance(sseed, int):
        raise ConfigError(f"split.seed must be an integer, got {sseed!r}")
    if kind == "stratified-fold":
        k = _integer(scfg, "split", "n_splits", 10, minimum=2)
        fold = _integer(scfg, "split", "fold", 0, minimum=0)
        if fold >= k:
            raise ConfigError(f"split.fold must be in 0..{k - 1} (n_splits = {k}), got {fold}")
        counts = np.bincount(labels)
        if counts[counts > 0].min() < k:
            c = int(np.flatnonzero((counts > 0) & (counts < k))[0])
            raise ConfigError(f"split.n_splits = {k} but class {store.label_names[c]!r} has only "
                              f"{counts[c]} images")
        name, tr, te = ev.protocol_splits({"kind": "stratified-kfold", "n_splits": k, "seed": sseed},
                                          labels)[fold]
    elif kind == "per-class":
        if "n_train" not in scfg:
            raise ConfigError("split.kind = 'per-class' needs split.n_train (training images per class)")
        spec = {"kind": "per-class", "n_train": _integer(scfg, "split", "n_train", None),
                "n_repeats": 1, "seed": sseed}
        if scfg.get("n_test") is not None:
            spec["n_test"] = _integer(scfg, "split", "n_test", None)
        try:
            name, tr, te = ev.protocol_splits(spec, labels)[0]
        except ValueError as exc:
            raise ConfigError(f"[split]: {exc}") from None
    elif kind == "store":
        names = store.split_names
        if not (store.split >= 0).any() or "train" not in names or "test" not in names:
            raise ConfigError(f"split.kind = 'store' but the store has no train/test split column "
                              f"(split names {names})")
        name = "store"
        tr = np.flatnonzero(store.split == names.index("train"))
        te = np.flatnonzero(store.split == names.index("test"))
    else:
        raise ConfigError(f"unknown split.kind {kind!r}; choose {', '.join(SPLIT_KINDS)}")
    train = np.zeros(n, dtype=bool)
    test = np.zeros(n, dtype=bool)
    train[tr] = True
    test[te] = True
    if train.sum() < 2 or not test.any():
        raise ConfigError(f"split {name!r} has {int(train.sum())} training and {int(test.sum())} "
                          f"test images; it needs at least 2 training images and 1 test image")
    return name, train, test


# ------------------------------------------------------------------ tasks (run on workers)
def _image_id(store_path: str, i: int) -> str:
    import zarr
    g = zarr.open_group(store_path, mode="r")
    a, b = (int(v) for v in g["id_offsets"][i:i + 2])
    return bytes(np.asarray(g["id_bytes"][a:b], dtype=np.uint8)).decode("utf-8")


def read_images(store_path: str, offsets: np.ndarray, shapes: np.ndarray, rows) -> list[np.ndarray]:
    """Images ``rows`` (indices into ``offsets[:-1]``) of a block whose pixels are contiguous."""
    import zarr

    flat = np.asarray(zarr.open_group(store_path, mode="r")["pixels"][int(offsets[0]):int(offsets[-1])])
    out = []
    for r in rows:
        a = flat[offsets[r] - offsets[0]:offsets[r + 1] - offsets[0]]
        h, w, c = (int(v) for v in shapes[r])
        out.append(a.reshape(h, w) if c == 1 else a.reshape(h, w, c))
    return out


def _features(store_path, i0, offsets, shapes, rows, spec):
    from .features import pixel_features
    for r, img in zip(rows, read_images(store_path, offsets, shapes, rows)):
        try:
            yield r, pixel_features(img, spec)
        except ValueError as exc:
            raise ValueError(f"image {i0 + r} ({_image_id(store_path, i0 + r)}): {exc}") from None


def block_pixel_moments(store_path: str, i0: int, offsets, shapes, rows, spec, numba_threads: int = 1):
    """Pixel count, mean and M2 (sum of squared deviations) per feature over images ``rows``."""
    n, mean, m2 = 0, None, None
    with kernel_threads(numba_threads):
        for _, f in _features(store_path, i0, offsets, shapes, rows, spec):
            nb = len(f)
            mb = f.mean(axis=0)
            m2b = ((f - mb) ** 2).sum(axis=0)
            n, mean, m2 = (nb, mb, m2b) if mean is None else _merge((n, mean, m2), (nb, mb, m2b))
    return n, mean, m2


def _merge(a, b):
    """Chan et al.'s pairwise update of (n, mean, M2)."""
    na, ma, sa = a
    nb, mb, sb = b
    n = na + nb
    delta = mb - ma
    return n, ma + delta * (nb / n), sa + sb + delta ** 2 * (na * nb / n)


def block_log_vectors(store_path: str, i0: int, offsets, shapes, rows, spec, W, gamma: float,
                      numba_threads: int = 1, batch: int = 16) -> np.ndarray:
    """``vec(log(I + C_D / gamma))`` (float32) of the images ``rows`` of one block.

    ``W`` holds the Fourier frequencies already divided by the feature scale,
    so ``x @ W`` is the projection of the standardized features.
    """
    from . import distances as dist

    d2 = 2 * W.shape[1]
    out = np.empty((len(rows), d2 * (d2 + 1) // 2), dtype=np.float32)
    covs, where = [], []

    def flush():
        out[where[0]:where[-1] + 1] = dist.log_vectors(np.stack(covs), gamma, dtype=np.float32)
        covs.clear()
        where.clear()

    with kernel_threads(numba_threads):
        for k, (r, f) in enumerate(_features(store_path, i0, offsets, shapes, rows, spec)):
            try:
                covs.append(dist.approx_covariance_operator(f, W))
            except ValueError as exc:
                raise ValueError(f"image {i0 + r} ({_image_id(store_path, i0 + r)}): {exc}") from None
            where.append(k)
            if len(covs) == batch:
                flush()
        if covs:
            flush()
    return out


def k2_features(rff, V: np.ndarray) -> np.ndarray:
    """Random features of K2; one BLAS thread, so every worker sums in the same order."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        return rff.transform(V)


# ------------------------------------------------------------------ graph
def image_blocks(n_images: int, block_images: int) -> np.ndarray:
    from ..pipeline.graph import block_bounds
    return block_bounds(n_images, block_images)


def _block_args(store, b0, b1):
    off = store.offsets[b0:b1 + 1]
    return str(store.path), int(b0), off, store.shapes[b0:b1]


def moment_tasks(store, bounds, mask, spec, numba_threads=1):
    """One delayed (n, mean, M2) per block holding rows of ``mask``."""
    import dask

    out = []
    for b0, b1 in zip(bounds[:-1], bounds[1:]):
        rows = np.flatnonzero(mask[b0:b1])
        if len(rows):
            out.append(dask.delayed(block_pixel_moments, pure=True)(
                *_block_args(store, b0, b1), rows, spec, numba_threads))
    return out


def log_vector_tasks(store, bounds, mask, spec, W, gamma, numba_threads=1):
    """``[(b0, b1, rows, delayed vectors)]`` for the rows of ``mask`` (None: every row) per block."""
    import dask

    out = []
    for b0, b1 in zip(bounds[:-1], bounds[1:]):
        rows = np.arange(b1 - b0) if mask is None else np.flatnonzero(mask[b0:b1])
        if len(rows):
            task = dask.delayed(block_log_vectors, pure=True)(
                *_block_args(store, b0, b1), rows, spec, W, float(gamma), numba_threads)
            out.append((int(b0), int(b1), rows, task))
    return out


def merge_moments(parts):
    """One (n, mean, M2) from the per-block results of :func:`moment_tasks`."""
    acc = parts[0]
    for p in parts[1:]:
        acc = _merge(acc, p)
    return acc


def feature_scale_from_moments(n, mean, m2, scaling: str) -> np.ndarray:
    """As :func:`streamcov.images.evaluation.feature_scale`, from merged moments."""
    var = np.maximum(m2 / n, 0.0)
    if scaling == "global":
        rms = float(np.sqrt(np.mean(var)))
        return np.full(len(var), rms if rms > 0 else 1.0)
    sd = np.sqrt(var)
    sd[sd <= 1e-12 * max(sd.max(), 1.0)] = 1.0
    return sd


def frequencies(n_features: int, scale: np.ndarray, m: MethodParams, seed: int) -> np.ndarray:
    """Fourier frequencies of K1 for standardized features, folded with the scale: x @ W."""
    from .distances import fourier_frequencies
    s1 = m.sigma1 * np.sqrt(n_features)
    return fourier_frequencies(n_features, m.D, s1, kind=m.kind, random_state=seed) / scale[:, None]


def fit_representation(compute, store, bounds, train, spec, m: MethodParams, seed: int,
                       numba_threads: int = 1) -> dict:
    """Passes 1 and 2 on training images only: feature scale, then K2 bandwidth."""
    from . import evaluation as ev
    from .distances import pairwise_vector_distances

    moments = merge_moments(compute(*moment_tasks(store, bounds, train, spec, numba_threads)))
    scale = feature_scale_from_moments(*moments, m.scaling)
    W = frequencies(spec.n_features, scale, m, seed)
    rng = np.random.default_rng(seed)
    tr = np.flatnonzero(train)
    picked = np.sort(rng.choice(tr, size=min(m.fit_sample, len(tr)), replace=False))
    sample = np.zeros(len(train), dtype=bool)
    sample[picked] = True
    tasks = log_vector_tasks(store, bounds, sample, spec, W, m.gamma, numba_threads)
    V = np.concatenate(compute(*[t for *_, t in tasks]))
    median = ev._median_offdiag(pairwise_vector_distances(V))
    return {"scale": [float(s) for s in scale], "median": float(median),
            "bandwidth": float(m.sigma2 * median), "fit_images": int(len(picked))}


def make_k2_map(p: int, m: MethodParams, bandwidth: float, seed: int):
    from .estimators import GaussianRandomFeatures
    # only the width of the input is used by fit: W and b come from the seed
    return GaussianRandomFeatures(n_components=m.n_components, sigma=float(bandwidth),
                                  random_state=seed).fit(np.zeros((1, p), dtype=np.float32))


def feature_tasks(store, bounds, spec, W, gamma, rff, fpath, done, numba_threads=1):
    """Delayed writes of the blocks not yet ``done``: vectors -> K2 features -> feature store."""
    import dask

    from ..pipeline.featurestore import write_block

    rff_d = dask.delayed(rff, pure=True)
    out = []
    for i, (b0, b1, _, task) in enumerate(log_vector_tasks(store, bounds, None, spec, W, gamma,
                                                           numba_threads)):
        if done[i]:
            continue
        X = dask.delayed(k2_features, pure=True)(rff_d, task)
        out.append((b0, b1, dask.delayed(write_block)(str(fpath), i, b0, b1, X)))
    return out


# ------------------------------------------------------------------ run
def _fingerprint(store, spec, m: MethodParams, seed, split_cfg, train, bounds) -> dict:
    spec_d = {k: v for k, v in asdict(spec).items() if k != "name"}
    return {"store": str(Path(store.path).resolve()), "n_images": len(store),
            "n_pixels": int(store.offsets[-1]), "features": spec_d, "method": asdict(m), "seed": seed,
            "split": split_cfg, "train": hashlib.sha1(np.packbits(train).tobytes()).hexdigest(),
            "bounds": [int(b) for b in bounds], "dtype": "float32"}


def run_image_stream(cfg: dict, out: Path, progress: bool = False, scheduler: str | None = None,
                     workers: int | None = None, resume: bool = False) -> dict:
    """Run the pipeline of the module docstring on one split; returns the result dict."""
    from ..pipeline.executor import dask_runtime
    from ..pipeline.featurestore import FeatureStore
    from ..pipeline.train import fit_scaler, predict_mask, train_sgd
    from .features import get_spec

    t_start = time.perf_counter()
    extra = set(cfg) - _TOP_KEYS
    if extra:
        raise ConfigError(f"unknown top-level key(s) {sorted(extra)}; known: {sorted(_TOP_KEYS - {'_file'})}")
    seed = cfg.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed must be an integer >= 0, got {seed!r}")
    dcfg = _table(cfg, "dataset")
    fcfg = cfg.get("features", {})
    try:
        spec = get_spec(fcfg if isinstance(fcfg, (dict, str)) else {})
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"[features]: {exc}") from None
    m = method_params(_table(cfg, "method"))
    model = model_params(cfg)
    scfg = _table(cfg, "split")
    dk = dask_params(cfg)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    store = resolve_image_store(dcfg, cfg, progress)
    if spec.needs_color and (store.shapes[:, 2] != 3).any():
        i = int(np.flatnonzero(store.shapes[:, 2] != 3)[0])
        raise ConfigError(f"[features]: spec {spec.name!r} uses R, G, B but image {i} "
                          f"({store.ids()[i]}) is grey; use a grey spec")
    split_name, train, test = split_masks(scfg, store, seed)
    y = store.labels.astype(np.int64)
    classes = np.arange(len(store.label_names))
    bounds = image_blocks(len(store), dk["block_images"])
    p = (2 * m.D) * (2 * m.D + 1) // 2
    fingerprint = _fingerprint(store, spec, m, seed, scfg, train, bounds)
    fpath = out / "features.zarr"
    fstore = FeatureStore.open_or_create(fpath, len(store), m.n_components, bounds, "float32", fingerprint)
    result = {"pipeline": cfg.get("name"), "store": str(store.path), "n_images": len(store),
              "n_classes": len(classes), "features": spec.name if spec.name != "custom" else list(spec.features),
              "n_features": spec.n_features, "method": m.name, "D": m.D, "sigma1": m.sigma1,
              "gamma": m.gamma, "sigma2": m.sigma2, "n_components": m.n_components,
              "vector_dim": p, "seed": seed, "split": split_name}

    with dask_runtime(scheduler or dk["scheduler"], workers if workers is not None else dk["workers"]) \
            as (compute, runtime, numba_threads):
        result["runtime"] = runtime
        t0 = time.perf_counter()
        fitted = fstore.group.attrs.get("fitted")
        result["fit_reused"] = fitted is not None
        if fitted is None:
            fitted = fit_representation(compute, store, bounds, train, spec, m, seed, numba_threads)
            fstore.group.attrs.update({"fitted": fitted})
        t_fit = time.perf_counter() - t0
        scale = np.asarray(fitted["scale"])
        W = frequencies(spec.n_features, scale, m, seed)
        rff = make_k2_map(p, m, fitted["bandwidth"], seed)
        done = fstore.done()
        todo = feature_tasks(store, bounds, spec, W, m.gamma, rff, fpath, done, numba_threads)
        # windows of a few blocks per compute call: at most that many blocks' vectors in memory
        width = 2 * int(runtime.get("dask_threads") or runtime.get("workers") or 1)
        t1 = time.perf_counter()
        bar = None
        if progress and todo:
            from tqdm.auto import tqdm
            bar = tqdm(total=len(todo), desc="featurize", unit="block")
        for a in range(0, len(todo), width):
            window = todo[a:a + width]
            compute(*[t for *_, t in window])
            if bar is not None:
                bar.update(len(window))
        if bar is not None:
            bar.close()
        t_feat = time.perf_counter() - t1
    featurized = int(sum(b1 - b0 for b0, b1, _ in todo))
    if not fstore.done().all():
        raise RuntimeError(f"{fpath}: blocks {np.flatnonzero(~fstore.done()).tolist()} were not written")

    prefetch = dk["prefetch"]
    ckdir = out / "checkpoints"
    ckdir.mkdir(exist_ok=True)
    fp_text = json.dumps({"features": fingerprint, "model": model}, sort_keys=True, default=str)
    t2 = time.perf_counter()
    kind = model.get("scale") or "none"
    scaler = None if kind == "none" else fit_scaler(fstore, train, prefetch, kind)
    clf = train_sgd(fstore, y, train, classes, model, seed, prefetch, progress,
                    checkpoint=ckdir / f"{split_name}.npz", resume=resume, scaler=scaler,
                    fingerprint=fp_text)
    t_train = time.perf_counter() - t2
    pred = predict_mask(fstore, clf, test, prefetch, scaler)
    result.update({
        "accuracy": float((pred == y[test]).mean()),
        "n_train": int(train.sum()), "n_test": int(test.sum()),
        "feature_scale": fitted["scale"][0] if m.scaling == "global" else fitted["scale"],
        "median_distance": fitted["median"], "bandwidth": fitted["bandwidth"],
        "fit_images": fitted["fit_images"],
        "model": {k: v for k, v in model.items() if k not in ("sigma_grid", "C_grid")},
        "epochs_run": int(getattr(clf, "streamcov_epochs_", model["epochs"])),
        "fit_seconds": round(t_fit, 3), "featurize_seconds": round(t_feat, 3),
        "featurized_images": featurized, "train_seconds": round(t_train, 3),
        "features_path": str(fpath),
    })
    if "paper_accuracy" in cfg:
        result["paper_accuracy"] = float(cfg["paper_accuracy"])
    result["seconds"] = round(time.perf_counter() - t_start, 3)
    return result
