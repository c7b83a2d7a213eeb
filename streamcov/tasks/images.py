"""Image classification with covariance operators (paper 004), ``task = "image-classification"``.

(Out of core on Dask, with fixed hyperparameters: ``task = "image-stream-classification"``,
:mod:`streamcov.images.stream`.)

Pipeline tables::

    [dataset]    path (folder per class, or an image store), format ("folders",
                 "store" or "skimage-textures"), group_level, exclude,
                 patch (skimage-textures: patch side), max_per_class
    [features]   preset (streamcov.images.PRESETS) and/or features, gabor_*, stride
    [method]     name (e, loge, stein, hs, approx_hs, loghs, approx_loghs,
                 qapprox_loghs), classifier (svc, 1nn, sgd), D, sigma1, gamma,
                 mu (must equal gamma), sigma2, C, inner_folds, max_pixels_exact,
                 n_components, epochs, standardize ("train" or "all"),
                 scaling ("global" or "per-feature")
    [protocol]   kind, n_splits, n_train, n_test, n_repeats, seed, max_splits
    paper_accuracy (optional, top level): the figure of paper 004 for comparison.

Grid values (sigma1, gamma, sigma2, C) may be a number or a list; lists are
searched by cross-validation on the training images of each split.
Per-split details go to ``out_dir / "image_classification_details.json"``.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from ..images import evaluation as ev
from ..images.features import get_spec, image_covariances


class TaskConfigError(ValueError):
    """A pipeline table holds a value the task cannot use."""


_DATASET_KEYS = {"path", "format", "group_level", "exclude", "patch", "max_per_class", "textures"}
_METHOD_KEYS = {"name", "classifier", "D", "sigma1", "gamma", "mu", "sigma2", "C", "inner_folds",
                "max_pixels_exact", "n_components", "epochs", "standardize", "scaling"}
_PROTOCOL_KEYS = {"kind", "n_splits", "n_train", "n_test", "n_repeats", "seed", "max_splits"}


def _table(cfg, name, known):
    t = cfg.get(name, {})
    if not isinstance(t, dict):
        raise TaskConfigError(f"[{name}] must be a table, got {type(t).__name__}")
    extra = set(t) - known
    if extra:
        raise TaskConfigError(f"unknown key(s) {sorted(extra)} in [{name}]; known: {sorted(known)}")
    return dict(t)


def _as_list(v, key):
    vals = v if isinstance(v, list) else [v]
    for x in vals:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not x > 0:
            raise TaskConfigError(f"method.{key} values must be numbers > 0, got {v!r}")
    return [float(x) for x in vals]


def _resolve(path: str, cfg: dict) -> Path:
    p = Path(path).expanduser()
    if p.is_absolute() or p.exists():
        return p
    if cfg.get("_file"):
        # pipelines/<file>.toml: paths are relative to the repository root
        alt = Path(cfg["_file"]).resolve().parent.parent / p
        if alt.exists():
            return alt
    return p


def skimage_textures(names=("brick", "grass", "gravel"), patch: int = 64, max_per_class=None):
    """scikit-image's bundled texture images cut into non-overlapping square patches."""
    import skimage.data
    from ..images.io import ImageSet

    images, labels, groups, ids = [], [], [], []
    for c, name in enumerate(names):
        if not hasattr(skimage.data, name):
            raise TaskConfigError(f"dataset.textures: skimage.data has no image {name!r}")
        img = np.asarray(getattr(skimage.data, name)())
        k = 0
        for y in range(0, img.shape[0] - patch + 1, patch):
            for x in range(0, img.shape[1] - patch + 1, patch):
                if max_per_class is not None and k >= max_per_class:
                    break
                images.append(np.ascontiguousarray(img[y:y + patch, x:x + patch]))
                labels.append(c)
                groups.append(c)
                ids.append(f"{name}/{y}_{x}")
                k += 1
    return ImageSet(images=images, labels=np.array(labels, dtype=np.int32), label_names=list(names),
                    groups=np.array(groups, dtype=np.int32), group_names=list(names), ids=ids,
                    source="skimage.data")


def load_dataset(dcfg: dict, cfg: dict, progress: bool = False):
    """An :class:`~streamcov.images.io.ImageSet` from the [dataset] table."""
    fmt = dcfg.get("format", "folders")
    if fmt == "skimage-textures":
        return skimage_textures(tuple(dcfg.get("textures", ("brick", "grass", "gravel"))),
                                int(dcfg.get("patch", 64)), dcfg.get("max_per_class"))
    if "path" not in dcfg:
        raise TaskConfigError("[dataset] needs `path` (a folder per class, or an image store)")
    path = _resolve(str(dcfg["path"]), cfg)
    if fmt == "folders":
        from ..images.io import load_folders
        if not path.is_dir():
            raise TaskConfigError(f"dataset.path {str(path)!r}: folder not found")
        data = load_folders(path, group_level=int(dcfg.get("group_level", 1)),
                            exclude=tuple(dcfg.get("exclude", ("maps",))), progress=progress)
    elif fmt == "store":
        from ..images.store import open_image_store
        data = open_image_store(path).to_image_set()
    else:
        raise TaskConfigError(f"dataset.format must be folders, store or skimage-textures, got {fmt!r}")
    mpc = dcfg.get("max_per_class")
    if mpc is not None:
        keep = np.concatenate([np.flatnonzero(data.labels == c)[:int(mpc)]
                               for c in np.unique(data.labels)])
        keep.sort()
        data.images = [data.images[i] for i in keep]
        data.ids = [data.ids[i] for i in keep]
        data.labels = data.labels[keep]
        data.groups = data.groups[keep]
    return data


def run_image_classification(cfg: dict, out_dir: Path, progress: bool = False) -> dict:
    """Evaluate one method of paper 004 on one image dataset under one protocol."""
    t0 = time.perf_counter()
    dcfg = _table(cfg, "dataset", _DATASET_KEYS)
    fcfg = cfg.get("features", {})
    mcfg = _table(cfg, "method", _METHOD_KEYS)
    pcfg = _table(cfg, "protocol", _PROTOCOL_KEYS)
    try:
        spec = get_spec(fcfg if isinstance(fcfg, (dict, str)) else {})
    except (ValueError, TypeError) as exc:
        raise TaskConfigError(f"[features]: {exc}") from None
    method = mcfg.get("name", "approx_loghs")
    if method not in ev.METHODS:
        raise TaskConfigError(f"method.name must be one of {', '.join(ev.METHODS)}, got {method!r}")
    grids = {}
    for key in ("sigma1", "gamma", "sigma2", "C"):
        if key in mcfg:
            grids[key] = _as_list(mcfg[key], key)
    if "mu" in mcfg and _as_list(mcfg["mu"], "mu") != grids.get("gamma", ev.DEFAULT_GRIDS["gamma"]):
        raise TaskConfigError("method.mu must equal method.gamma: with gamma != mu the approximate "
                              "Log-HS distance grows without bound as D grows (paper 004, Theorem 1)")
    seed = int(cfg.get("seed", 0))
    data = load_dataset(dcfg, cfg, progress)
    t_load = time.perf_counter() - t0
    try:
        splits = ev.protocol_splits(pcfg, data.labels, data.groups, data.group_names, seed)
    except ValueError as exc:
        raise TaskConfigError(f"[protocol]: {exc}") from None
    for key, ok in (("standardize", ("train", "all")), ("scaling", ("global", "per-feature")),
                    ("classifier", ev.CLASSIFIERS)):
        if key in mcfg and mcfg[key] not in ok:
            raise TaskConfigError(f"method.{key} must be one of {', '.join(ok)}, got {mcfg[key]!r}")
    feats = ev.extract_features(data.images, spec, ids=data.ids, progress=progress)
    raw = image_covariances(data.images, spec, ids=data.ids) if method in ("e", "loge", "stein") else None
    t_feat = time.perf_counter() - t0 - t_load
    res = ev.evaluate(method, feats, data.labels, splits, grids=grids, mcfg=mcfg,
                      classifier=mcfg.get("classifier"), raw_covs=raw, seed=seed,
                      n_inner=int(mcfg.get("inner_folds", 5)),
                      standardize=mcfg.get("standardize", "train"),
                      scaling=mcfg.get("scaling", "global"), progress=progress)
    details = res.pop("splits")
    out = {
        "task": "image-classification",
        "pipeline": cfg.get("name"),
        "dataset": str(dcfg.get("path", dcfg.get("format"))),
        "n_images": len(data),
        "n_classes": len(data.label_names),
        "features": spec.name if spec.name != "custom" else list(spec.features),
        "n_features": spec.n_features,
        "protocol": pcfg.get("kind", "stratified-kfold"),
        **res,
        "D": int(mcfg.get("D", 200)) if "approx" in method else None,
        "fold_accuracies": [d["accuracy"] for d in details],
        "chosen_params": [d["params"] for d in details],
        "seconds_load": round(t_load, 2),
        "seconds_features": round(t_feat, 2),
        "seconds": round(time.perf_counter() - t0, 2),
    }
    if "paper_accuracy" in cfg:
        out["paper_accuracy"] = float(cfg["paper_accuracy"])
    if out_dir is not None:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "image_classification_details.json").write_text(
            json.dumps({"summary": out, "splits": details}, indent=1, default=float) + "\n")
    return out


def run_image_stream(cfg: dict, out_dir: Path, progress: bool = False, scheduler=None, workers=None,
                     resume: bool = False) -> dict:
    """``task = "image-stream-classification"``: see :mod:`streamcov.images.stream`."""
    from ..images.stream import run_image_stream as run
    return run(cfg, out_dir, progress, scheduler=scheduler, workers=workers, resume=resume)


TASKS = {"image-classification": run_image_classification,
         "image-stream-classification": run_image_stream}
