"""Pipeline files (TOML): loading, defaults, ``--set key=value`` overrides."""
from __future__ import annotations

import copy
import tomllib
from pathlib import Path


class ConfigError(ValueError):
    """A pipeline file or override is invalid; the message says which key."""


DEFAULTS: dict = {
    "task": "skeleton-classification",
    "name": "pipeline",
    "seed": 0,
    "output": "runs/{name}",
    "data": {
        "store": None,      # path of a skeleton store
        "source": None,     # raw archive, ingested into `store` when the store is missing
        "format": None,     # reader format of `source`
        "synthetic": None,  # table of generator parameters: use the built-in generator
    },
    "descriptor": {
        "kind": "log-covariance",
        "center": "store",  # "store" (the store's hip joints) or "none"
        "gamma": 1e-4,
        "normalize": True,
        "ddof": 1,
        "dtype": "float64",
    },
    "features": {
        "map": "rgw",
        "n_components": 1000,
        "sigma": 1.0,
        "theta": 0.5,
    },
    "model": {
        "learner": "sgd",
        "loss": "hinge",
        "C": 10.0,
        "alpha": None,       # default: 1 / (C * n_train), the SVM of the paper with C
        "epochs": 40,
        "average": True,
        "learning_rate": "optimal",
        "eta0": 0.01,
        "penalty": "l2",
        "scale": "none",             # "standard": one streaming StandardScaler pass first
        "validation_fraction": 0.0,  # > 0: hold out training rows, early stopping
        "n_iter_no_change": 5,
        "checkpoint_blocks": 0,      # also checkpoint every N blocks within an epoch
        "shuffle_blocks": 8,         # blocks pooled and shuffled together (memory: this many blocks)
        "sigma_grid": [0.125, 0.25, 0.5, 1.0, 2.0, 4.0],
        "C_grid": [0.1, 1.0, 10.0, 100.0, 1000.0],
    },
    "split": {
        "kind": "subject-parity",   # odd subjects train, even test
        "train_subjects": None,
        "test_subjects": None,
        "file": None,
    },
    "dask": {
        "scheduler": "threads",   # threads | synchronous | processes-free address tcp://...
        "workers": None,          # threads (threaded) or LocalCluster workers
        "block_sequences": 512,
        "prefetch": 2,
    },
}


def _deep_merge(base: dict, extra: dict, path: str = "") -> dict:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value, f"{path}{key}.")
        else:
            out[key] = copy.deepcopy(value)
    return out


def parse_value(text: str):
    """A ``--set`` value: TOML literal (number, bool, list, quoted string) or a bare string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def apply_override(cfg: dict, assignment: str) -> None:
    """Apply ``key.sub=value`` in place."""
    if "=" not in assignment:
        raise ConfigError(f"--set {assignment!r}: expected key=value, e.g. features.n_components=2000")
    key, _, text = assignment.partition("=")
    parts = [p for p in key.strip().split(".") if p]
    if not parts:
        raise ConfigError(f"--set {assignment!r}: empty key")
    node = cfg
    for p in parts[:-1]:
        if p not in node:
            node[p] = {}
        if not isinstance(node[p], dict):
            raise ConfigError(f"--set {assignment!r}: {p!r} is a value, not a table")
        node = node[p]
    node[parts[-1]] = parse_value(text.strip())


def load_pipeline(path=None, overrides=(), store=None, text: str | None = None) -> dict:
    """Read a pipeline file (or TOML ``text``), apply overrides, fill defaults."""
    raw: dict = {}
    if text is not None:
        raw = tomllib.loads(text)
    elif path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"{path}: pipeline file not found")
        try:
            raw = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    for assignment in overrides:
        apply_override(raw, assignment)
    if store is not None:
        raw.setdefault("data", {})
        raw["data"]["store"] = str(store)
        raw["data"]["source"] = None
        raw["data"]["synthetic"] = None
    task = raw.get("task", DEFAULTS["task"])
    cfg = _deep_merge(DEFAULTS, raw) if task == DEFAULTS["task"] else raw
    cfg.setdefault("task", task)
    cfg.setdefault("name", Path(path).stem if path else "pipeline")
    path = None if text is not None else path
    cfg["_file"] = str(path) if path else None
    # A split file is written relative to the pipeline file that names it.
    split = cfg.get("split")
    if path is not None and isinstance(split, dict) and split.get("file"):
        f = Path(split["file"])
        if not f.is_absolute() and (Path(path).parent / f).is_file():
            split["file"] = str(Path(path).parent / f)
    if task == DEFAULTS["task"]:
        _validate_skeleton(cfg)
    return cfg


def _validate_skeleton(cfg: dict) -> None:
    unknown = set(cfg) - set(DEFAULTS) - {"_file"}
    if unknown:
        raise ConfigError(f"unknown top-level key(s) {sorted(unknown)}; known: {sorted(DEFAULTS)}")
    for section, defaults in DEFAULTS.items():
        if isinstance(defaults, dict):
            if not isinstance(cfg[section], dict):
                raise ConfigError(f"[{section}] must be a table")
            extra = set(cfg[section]) - set(defaults)
            # feature maps take map-specific parameters; everything else is closed
            if extra and section not in ("features",):
                raise ConfigError(f"unknown key(s) {sorted(extra)} in [{section}]; "
                                  f"known: {sorted(defaults)}")
    d = cfg["data"]
    if not (d["store"] or d["synthetic"] is not None):
        raise ConfigError("[data] needs `store` (a skeleton store path) or a [data.synthetic] table")
    if d["source"] and not d["format"]:
        raise ConfigError("[data] `source` needs `format` (msr-action3d, florence3d, utkinect, generic)")
    if cfg["model"]["learner"] not in ("sgd", "exact-svm"):
        raise ConfigError(f"model.learner must be 'sgd' or 'exact-svm', got {cfg['model']['learner']!r}")
    if cfg["descriptor"]["dtype"] not in ("float32", "float64"):
        raise ConfigError("descriptor.dtype must be float32 or float64")
    if int(cfg["dask"]["block_sequences"]) < 1:
        raise ConfigError("dask.block_sequences must be >= 1")
