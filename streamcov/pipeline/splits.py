"""Evaluation protocols: which sequences train and which test, fold by fold."""
from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np

from .config import ConfigError


def folds(split: dict, subjects: np.ndarray, store_split: np.ndarray | None = None,
          split_names: list[str] | None = None):
    """Yield ``(name, train_mask, test_mask)`` for each fold of a protocol.

    kinds:
      ``subject-parity``: odd subject ids train, even ids test (MSR-Action3D
      cross-subject when subjects are 1..10);
      ``subjects``: explicit ``train_subjects`` (and optional ``test_subjects``,
      default: all others);
      ``leave-one-subject-out``: one fold per subject;
      ``subject-splits-file``: a TOML file with ``[[split]]`` tables holding
      ``train_subjects`` and ``test_subjects`` (e.g. 10 random 5/5 splits);
      ``store``: the store's own ``split`` column (values ``train``/``test``).
    """
    kind = split.get("kind", "subject-parity")
    subjects = np.asarray(subjects)
    if kind == "subject-parity":
        train = subjects % 2 == 1
        yield "odd-even", train, ~train
    elif kind == "subjects":
        tr = split.get("train_subjects")
        if not tr:
            raise ConfigError("split.kind = 'subjects' needs split.train_subjects = [..]")
        train = np.isin(subjects, tr)
        te = split.get("test_subjects")
        test = np.isin(subjects, te) if te else ~train
        yield "subjects", train, test
    elif kind == "leave-one-subject-out":
        for s in np.unique(subjects):
            test = subjects == s
            yield f"subject-{s}", ~test, test
    elif kind == "subject-splits-file":
        path = split.get("file")
        if not path or not Path(path).is_file():
            raise ConfigError(f"split.file {path!r} not found (kind subject-splits-file)")
        doc = tomllib.loads(Path(path).read_text())
        entries = doc.get("split", [])
        if not entries:
            raise ConfigError(f"{path}: no [[split]] tables")
        for i, e in enumerate(entries):
            train = np.isin(subjects, e["train_subjects"])
            test = np.isin(subjects, e["test_subjects"])
            yield f"split-{i + 1}", train, test
    elif kind == "store":
        if store_split is None or not split_names:
            raise ConfigError("split.kind = 'store' but the store has no split column")
        names = list(split_names)
        if "train" not in names or "test" not in names:
            raise ConfigError(f"store split names {names} lack 'train'/'test'")
        yield "store", store_split == names.index("train"), store_split == names.index("test")
    else:
        raise ConfigError(f"unknown split.kind {kind!r}; choose subject-parity, subjects, "
                          f"leave-one-subject-out, subject-splits-file or store")
