"""The one splits module: every evaluation protocol, for skeletons and images alike.

:func:`folds` turns a ``[split]`` table into ``(name, train_mask, test_mask)``
per fold. Rows carry a label, a group (the subject of a skeleton sequence,
the object or image set of an image) and optionally the store's own
train/test column. Kinds:

``subject-parity``        odd group ids train, even ids test (MSR-Action3D cross-subject)
``subjects``              explicit ``train_subjects`` (and ``test_subjects``, default: the rest)
``leave-one-subject-out`` one fold per group (Florence3D leave-one-actor-out)
``subject-splits-file``   a TOML file of ``[[split]]`` tables with train/test subjects (UTKinect)
``store``                 the store's ``split`` column (values ``train`` / ``test``)
``stratified-kfold``      ``n_splits`` class-stratified folds shuffled with ``seed`` (Virus)
``per-class``             ``n_train`` (+ ``n_test``) random rows per class, ``n_repeats`` times (KTH-TIPS, Fish)
``leave-objects-out``     one fold per object: the last folder of the group name (ETH-80)
``group-kfold``           ``n_splits`` folds of whole groups

:func:`holdout` holds out the early-stopping rows of both incremental learners (class-stratified).

``folds = [0, 2]`` keeps those folds only. ``seed`` defaults to the pipeline's.
Every fold needs at least two training rows and one test row.
"""
from __future__ import annotations

import tomllib
from numbers import Integral
from pathlib import Path

import numpy as np

from .errors import DEEP, ConfigError, did_you_mean, ingest_option, loads_within_depth, toml_error, toml_value

# the protocols of :func:`folds` (``split.kind``)
SPLIT_KINDS = ("subject-parity", "subjects", "leave-one-subject-out", "subject-splits-file", "store",
               "stratified-kfold", "per-class", "leave-objects-out", "group-kfold")


SPLIT_FILE_KEYS = ("train_subjects", "test_subjects")


def _no_unknown_keys(path, text: str, doc: dict) -> None:
    """Refuse a key a splits file does not read, with its line and the key it may mean: a typo
    (``test_subject``) or an extra list (``validation_subjects``) was ignored, or named only as a missing key."""
    import re

    def refuse(key, known, where, after: int = 0):
        m = re.compile(rf"^\s*{re.escape(key)}\s*=", re.M).search(text, after)
        line = f", line {text.count(chr(10), 0, m.start()) + 1}" if m else ""
        hint = did_you_mean(key, known, cutoff=0.5)   # "train" for "train_subjects"
        raise ConfigError(f"{path}{line}: {where}unknown key {key!r}{hint}; a splits file holds [[split]] tables "
                          f"of {' and '.join(SPLIT_FILE_KEYS)}")

    for key in doc:
        if key != "split":
            refuse(key, ["split"], "")
    entries = doc.get("split")
    if not isinstance(entries, list):
        return
    starts = [m.end() for m in re.finditer(r"^\s*\[\[\s*split\s*\]\]", text, re.M)]
    for i, e in enumerate(entries):
        for key in (e if isinstance(e, dict) else ()):
            if key not in SPLIT_FILE_KEYS:
                refuse(key, list(SPLIT_FILE_KEYS), f"[[split]] number {i + 1}: ", starts[i] if i < len(starts) else 0)


def subjects_twice(subjects) -> str | None:
    """What to say of a list of subjects that names one more than once (``names subject(s) [1] more than
    once; list each subject once``), or None: a splits file's lists and ``split.train_subjects`` /
    ``test_subjects`` alike."""
    # first-seen order: names and numbers may be mixed (a store that names its subjects), which sort cannot order
    twice = list(dict.fromkeys(v for v in subjects if subjects.count(v) > 1))
    return f"names subject(s) {toml_value(twice)} more than once; list each subject once" if twice else None


def subject_codes(values, known, names=None, *, where: str, other_store: str = "") -> list[int]:
    """The subject codes that ``values`` name: numbers as they are, and names of a store that names its subjects
    (``names[code]``; HDM05's ``bd``, ``bk``, ...), refused in one line (``where``: the key as written) when the
    store has no such subject, or names none (``other_store`` added: what to do where the values are another
    store's), or when two values name one subject."""
    names = list(names or [])
    if names == [] and any(isinstance(v, str) for v in values):
        raise ConfigError(f"{where} gives subjects by name, but the store's subjects are numbers "
                          f"({_some(sorted(known))}); give their numbers{other_store}")
    code = {n: c for c, n in enumerate(names)}
    codes = [code.get(v, -1) if isinstance(v, str) else int(v) for v in values]
    unknown = [v for v, c in zip(values, codes) if c not in known]
    if unknown:   # a mistyped subject would be left out of the fold without a word
        hint = did_you_mean(unknown[0], names) if isinstance(unknown[0], str) else ""
        raise ConfigError(f"{where} names subject(s) {toml_value(unknown)} that no row of the store has{hint} "
                          f"(its subjects: {named_subjects(sorted(known), names)}){other_store}")
    twice = sorted({c for c in codes if codes.count(c) > 1})
    if twice:   # "bd" and 0 on a store whose subject 0 is bd
        raise ConfigError(f"{where} names subject(s) {named_subjects(twice, names)} twice, by number and by name; "
                          f"list each subject once")
    return codes


def named_subjects(codes, names=None) -> str:
    """Subject codes as a user reads them: ``[1, 2, 3]``, or ``[0 (bd), 1 (bk)]`` where the store names them."""
    codes = [int(c) for c in codes]
    if not names:
        return _some(codes)
    shown = [f"{c} ({names[c]})" if 0 <= c < len(names) else str(c) for c in codes]
    return "[" + ", ".join(shown[:12]) + "]" + (f" and {len(shown) - 12} more" if len(shown) > 12 else "")


def folds(split, labels, groups, *, group_names=None, subject_names=None, store_split=None, split_names=None,
          seed: int = 0, label_names=None) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """``[(name, train_mask, test_mask), ...]`` for the protocol of ``split`` (a ``[split]`` table).

    Parameters
    ----------
    split : SplitTable or dict
    labels, groups : int arrays (n,)
        Class codes; subjects or groups.
    group_names : list of str, optional
        Names of the group codes (leave-objects-out reads the last folder).
    subject_names : list of str, optional
        Names of the subject codes of a store that names its subjects: ``train_subjects`` and
        ``test_subjects`` (and a splits file's lists) may give them by name.
    store_split, split_names : optional
        The store's split column and its names (kind ``store``).
    seed : int
        Default seed of the random protocols.
    label_names : list of str, optional
        For messages.
    """
    s = split if isinstance(split, dict) else split.model_dump()
    kind = s.get("kind", "subject-parity")
    labels = np.asarray(labels)
    groups = np.asarray(groups)
    n = len(labels)
    seed = int(s["seed"]) if s.get("seed") is not None else int(seed)
    out: list = []

    def mask(idx):
        m = np.zeros(n, dtype=bool)
        m[np.asarray(idx, dtype=np.int64)] = True
        return m

    if kind == "subject-parity":
        train = groups % 2 == 1
        out.append(("odd-even", train, ~train))
    elif kind == "subjects":
        tr = s.get("train_subjects")
        if not tr:
            raise ConfigError("split.kind = 'subjects' needs split.train_subjects = [..]")
        te = s.get("test_subjects")
        known = set(np.unique(groups).tolist())
        tr = subject_codes(tr, known, subject_names, where=f"split.train_subjects = {toml_value(list(tr))}")
        if te:
            te = subject_codes(te, known, subject_names, where=f"split.test_subjects = {toml_value(list(te))}")
            both = sorted(set(tr) & set(te))
            if both:
                raise ConfigError(f"subject(s) {named_subjects(both, subject_names)} are in both split.train_subjects "
                                  f"and split.test_subjects; a subject trains or tests, not both")
        train = np.isin(groups, tr)
        out.append(("subjects", train, np.isin(groups, te) if te else ~train))
    elif kind == "leave-one-subject-out":
        for g in np.unique(groups):
            test = groups == g
            out.append((f"subject-{g}", ~test, test))
    elif kind == "subject-splits-file":
        path = s.get("file")
        if path and Path(path).is_dir():
            raise ConfigError(f"split.file = {toml_value(path)}: a folder; give the TOML file of [[split]] tables")
        if path and Path(path).exists() and not Path(path).is_file():   # it was "not found"
            raise ConfigError(f"split.file = {toml_value(path)}: a device or a pipe, not a file; give the TOML file "
                              f"of [[split]] tables")
        if not path or not Path(path).is_file():
            raise ConfigError(f"split.file = {toml_value(path)}: not found (kind subject-splits-file)")
        try:
            text = Path(path).read_text(encoding="utf-8-sig")   # a BOM as editors write it
            doc = loads_within_depth(tomllib.loads, text)
        except tomllib.TOMLDecodeError as exc:
            raise toml_error(path, exc) from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not a UTF-8 text file ({exc.reason} at byte {exc.start})") from None
        if doc is None:
            raise ConfigError(f"{path}: {DEEP}; a splits file holds [[split]] tables of train_subjects = [..] and "
                              f"test_subjects = [..]")
        _no_unknown_keys(path, text, doc)
        entries = doc.get("split", [])
        if not entries or not isinstance(entries, list):
            raise ConfigError(f"{path}: no [[split]] tables; write one per fold: [[split]] with "
                              f"train_subjects = [..] and test_subjects = [..]")
        for i, e in enumerate(entries):
            if not isinstance(e, dict):   # split = [1, 2] or ["a b"]: a TypeError traceback below
                raise ConfigError(f"{path}: [[split]] number {i + 1} is {toml_value(e)}, not a table; write one "
                                  f"[[split]] table per fold, with train_subjects = [..] and test_subjects = [..]")
        known = set(np.unique(groups).tolist())
        seen: dict = {}
        for i, e in enumerate(entries):
            if "train_subjects" not in e or "test_subjects" not in e:
                raise ConfigError(f"{path}: [[split]] number {i + 1} needs train_subjects and test_subjects")
            codes = {}
            for key in ("train_subjects", "test_subjects"):
                vals = e[key]
                if not isinstance(vals, list) or not vals or not all(
                        (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, str) and v)
                        for v in vals):   # true read as subject 1
                    raise ConfigError(f"{path}: [[split]] number {i + 1}: {key} = {toml_value(vals)}: expected a "
                                      f"non-empty list of subject numbers{' or names' if subject_names else ''}")
                twice = subjects_twice(vals)
                if twice:
                    raise ConfigError(f"{path}: [[split]] number {i + 1}: {key} {twice}")
                codes[key] = subject_codes(vals, known, subject_names, where=f"{path}: [[split]] number {i + 1}: {key}",
                                           other_store="; the file fixes the subjects of one archive: for this store, "
                                           "write its own file or --set split.kind=\"leave-one-subject-out\" (or "
                                           "\"subject-parity\")")
            both = sorted(set(codes["train_subjects"]) & set(codes["test_subjects"]))
            if both:
                raise ConfigError(f"{path}: [[split]] number {i + 1}: subjects {named_subjects(both, subject_names)} "
                                  f"are in both train_subjects and test_subjects")
            same = seen.setdefault((frozenset(codes["train_subjects"]), frozenset(codes["test_subjects"])), i + 1)
            if same != i + 1:   # a fold counted twice in the mean accuracy
                raise ConfigError(f"{path}: [[split]] number {i + 1} is the same split as number {same}; "
                                  f"remove one of them")
            out.append((f"split-{i + 1}", np.isin(groups, codes["train_subjects"]),
                        np.isin(groups, codes["test_subjects"])))
    elif kind == "store":
        names = list(split_names or [])
        # "Train", "TEST ": the names as written, compared without case and surrounding spaces
        plain = [str(v).strip().lower() for v in names]
        if store_split is None or not names or not (np.asarray(store_split) >= 0).any():
            raise ConfigError("split.kind = 'store' reads the train/test split recorded in the store, which records "
                              "none; add a split column (train or test per row) to the data (the generic format: "
                              "index.csv) and ingest it again, or choose another split.kind")
        if plain.count("train") != 1 or plain.count("test") != 1:
            raise ConfigError(f"split.kind = 'store' needs the store's split values train and test, but they are "
                              f"{names}; write train and test in the split column and ingest the data again")
        store_split = np.asarray(store_split)
        out.append(("store", store_split == plain.index("train"), store_split == plain.index("test")))
    elif kind == "stratified-kfold":
        from sklearn.model_selection import StratifiedKFold

        k = int(s.get("n_splits", 10))
        counts = np.bincount(labels)
        small = np.flatnonzero((counts > 0) & (counts < k))
        if len(small):
            c = int(small[0])
            name = label_names[c] if label_names is not None else c
            raise ConfigError(f"split.n_splits = {k} but class {name!r} has only {counts[c]} rows; "
                              f"lower split.n_splits")
        skf = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
        for f, (tr, te) in enumerate(skf.split(np.zeros(n), labels)):
            out.append((f"fold-{f}", mask(tr), mask(te)))
    elif kind == "per-class":
        n_train = s.get("n_train")
        if n_train is None:
            raise ConfigError("split.kind = 'per-class' needs split.n_train (training rows per class)")
        n_test = s.get("n_test")
        need = int(n_train) + (int(n_test) if n_test is not None else 1)
        codes, counts = np.unique(labels, return_counts=True)
        if counts.min() < need:
            # the smallest class, named after the keys as typed: where they were given goes in front of the line
            # (Origins.naming), and how far to lower them
            c, have = int(codes[np.argmin(counts)]), int(counts.min())
            name = label_names[c] if label_names is not None else c
            keys = f"split.n_train = {n_train}" + (f", split.n_test = {n_test}" if n_test is not None else "")
            if have < 2:
                fix = "a class needs at least 2 rows (1 train + 1 test): give it more rows or choose another split.kind"
            elif n_test is None:
                fix = f"lower split.n_train to {have - 1} or less"
            else:
                fix = f"lower split.n_train or split.n_test so that together they are {have} or less"
            raise ConfigError(f"{keys}: class {name!r} has {have} rows; the protocol needs {need} of every class "
                              f"({n_train} train + {n_test if n_test is not None else '>= 1'} test); {fix}")
        rng = np.random.default_rng(seed)
        for r in range(int(s.get("n_repeats", 1))):
            tr, te = [], []
            for c in np.unique(labels):
                idx = rng.permutation(np.flatnonzero(labels == c))
                tr.append(idx[:n_train])
                te.append(idx[n_train:] if n_test is None else idx[n_train:n_train + int(n_test)])
            out.append((f"split-{r}", mask(np.concatenate(tr)), mask(np.concatenate(te))))
    elif kind == "leave-objects-out":
        if group_names is None:
            raise ConfigError("split.kind = 'leave-objects-out' needs named groups (ingest with "
                              f"{ingest_option('group_level', 2)}, so that the group is <class>/<object>)")
        if all("/" not in str(g) for g in group_names):
            raise ConfigError(f"split.kind = 'leave-objects-out' needs groups <class>/<object>, but the store's "
                              f"groups are {sorted(group_names)[:3]}...: ingest the images with "
                              f"{ingest_option('group_level', 2)}")
        suffix = np.array([group_names[g].split("/")[-1] for g in groups])
        for o in sorted(set(suffix), key=lambda t: (len(t), t)):
            test = suffix == o
            out.append((f"object-{o}", ~test, test))
    elif kind == "group-kfold":
        from sklearn.model_selection import GroupKFold

        k = int(s.get("n_splits", 5))
        if len(np.unique(groups)) < k:
            raise ConfigError(f"split.n_splits = {k} but there are only {len(np.unique(groups))} groups")
        for f, (tr, te) in enumerate(GroupKFold(n_splits=k).split(np.zeros(n), labels, groups)):
            out.append((f"fold-{f}", mask(tr), mask(te)))
    else:
        raise ConfigError(f"unknown split.kind {kind!r}; choose subject-parity, subjects, "
                          f"leave-one-subject-out, subject-splits-file, store, stratified-kfold, "
                          f"per-class, leave-objects-out or group-kfold")
    keep = s.get("folds")
    if keep is not None:
        bad = [k for k in keep if k >= len(out)]
        if bad:
            raise ConfigError(f"split.folds = {list(keep)}: the protocol has {len(out)} folds "
                              f"(0..{len(out) - 1})")
        out = [out[k] for k in keep]
    rule = {"subject-parity": f"split.kind = 'subject-parity' trains on odd subject numbers and tests on even "
                              f"ones; the store's subjects: {_some(np.unique(groups))}",
            "leave-one-subject-out": f"split.kind = 'leave-one-subject-out' tests each subject in turn; the store "
                                     f"has {len(np.unique(groups))} subject(s)",
            "leave-objects-out": "split.kind = 'leave-objects-out' tests each object number in turn and trains on "
                                 "the other objects: every class needs at least 2 objects"}.get(kind)
    for name, train, test in out:
        if train.sum() < 2 or not test.any():
            raise ConfigError(f"split: fold {name!r} has {int(train.sum())} training and "
                              f"{int(test.sum())} test rows; every fold needs at least 2 training "
                              f"rows and 1 test row" + (f" ({rule})" if rule else ""))
        seen = np.unique(labels[train])
        if len(seen) < 2:
            cls = label_names[seen[0]] if label_names is not None else int(seen[0])
            raise ConfigError(f"split: the training rows of fold {name!r} hold one class ({cls!r}); a "
                              f"classifier needs at least 2")
    return out


def fold_warnings(folds_list, labels, label_names=None, groups=None) -> list[str]:
    """One line per fold whose test rows hold classes that none of its training rows has, and, with ``groups``,
    one for the rows that no fold uses.

    Those rows cannot be classified right; they stay in the accuracy (as
    errors), and the result says so instead of hiding a 0% class. Rows in
    no fold's training or test rows (subjects that a splits file does not
    name, ``val`` rows of a store split) are left out of everything: said,
    with the subjects (``groups``) whose every row is left out. Callers pass
    ``groups`` for the protocols that are meant to use every row (not for
    per-class draws or a chosen subset of folds, which leave rows out by design).
    """
    labels = np.asarray(labels)
    out = []
    used = np.zeros(len(labels), dtype=bool)
    for _, train, test in folds_list:
        used |= np.asarray(train) | np.asarray(test)
    if groups is not None and not used.all():
        line = f"{int((~used).sum())} rows are in no fold's training or test rows: the protocol does not use them"
        groups = np.asarray(groups)
        left = np.setdiff1d(np.unique(groups[~used]), np.unique(groups[used]))
        if len(left):
            line += f" (every row of subject(s) {_some(left)})"
        out.append(line)
    for name, train, test in folds_list:
        missing = np.setdiff1d(np.unique(labels[test]), np.unique(labels[train]))
        if len(missing):
            names = [label_names[c] if label_names is not None else int(c) for c in missing]
            n = int(np.isin(labels[test], missing).sum())
            out.append(f"fold {name!r}: {n} test rows of class(es) {names} that no training row has; "
                       f"they are counted as errors")
    return out


def _some(values, n: int = 12) -> str:
    """At most ``n`` values as a list, then how many more."""
    values = [v.item() if hasattr(v, "item") else v for v in values]
    return str(values[:n]) + (f" and {len(values) - n} more" if len(values) > n else "")


#: the kinds of split whose folds keep a group's rows (a subject's sequences, an object's images) on one side: an
#: inner cross-validation within their training rows keeps them together too (:func:`inner_folds`), or it scores
#: the grid on views of objects it trained on, and chooses for a protocol that the outer one is not
GROUPED_KINDS = ("subject-parity", "subjects", "leave-one-subject-out", "subject-splits-file", "leave-objects-out",
                 "group-kfold")


def keeps_groups_apart(split) -> bool:
    """Whether a ``[split]`` table (or its model) is of a kind in :data:`GROUPED_KINDS`."""
    s = split if isinstance(split, dict) else split.model_dump()
    return s.get("kind", "subject-parity") in GROUPED_KINDS


def groups_per_class(labels, groups) -> np.ndarray:
    """How many distinct ``groups`` each class of ``labels`` has, classes in sorted order (as ``np.unique``)."""
    classes, _ = _class_counts(labels)
    labels, groups = np.asarray(labels), np.asarray(groups)
    return np.array([len(np.unique(groups[labels == c])) for c in classes])


def groups_to_keep(labels, groups):
    """``groups`` where every class of ``labels`` has 2 of them or more, so that inner folds of whole groups hold
    each class on both sides; else None (a class of one training group, e.g. leave-objects-out on 2 objects a
    class): the inner folds are then of rows, and views of one group lie on both sides of them."""
    return groups if groups is not None and groups_per_class(labels, groups).min() >= 2 else None


def inner_fold_count(labels, n_splits: int, groups=None) -> int:
    """How many class-stratified folds :func:`inner_folds` makes of ``labels``: ``n_splits``, fewer when a class
    has fewer rows, or with ``groups`` (folds of whole groups) fewer groups."""
    _, counts = _class_counts(labels)
    if groups is not None:
        counts = groups_per_class(labels, groups)
    return int(min(_n_splits(n_splits), counts.min()))


def _class_counts(labels) -> tuple[np.ndarray, np.ndarray]:
    """The classes of ``labels`` (any labels: codes, strings) and their row counts, or ValueError."""
    labels = np.asarray(labels)
    if labels.ndim != 1 or not len(labels):
        raise ValueError(f"labels: expected one label per row (a non-empty 1-D array), got shape {labels.shape}")
    return np.unique(labels, return_counts=True)   # np.bincount took non-negative integer codes only


def _n_splits(n_splits) -> int:
    if isinstance(n_splits, bool) or not isinstance(n_splits, Integral) or n_splits < 2:
        raise ValueError(f"n_splits: expected an integer >= 2 (folds of a cross-validation), got {n_splits!r}")
    return int(n_splits)


def inner_folds(labels, groups=None, n_splits: int = 5, seed: int = 0,
                group_folds: bool = False) -> list[tuple[np.ndarray, np.ndarray]]:
    """Cross-validation folds *within* training rows, for choosing hyperparameters.

    ``(train_idx, test_idx)`` pairs: leave-one-group-out when ``groups`` are
    given (subjects of skeleton sequences); with ``group_folds``, ``n_splits``
    class-stratified folds of whole groups (the objects of an image protocol
    that leaves objects out: each inner fold's rows are views of objects the
    others do not hold), or of rows where a class has one group
    (:func:`groups_to_keep`); else ``n_splits`` class-stratified folds.
    Shuffled with ``seed``; fewer folds when a class has fewer rows (groups).
    """
    labels = np.asarray(labels)
    if group_folds:
        kept = groups_to_keep(labels, None if groups is None else np.asarray(groups))
        if kept is not None:
            from sklearn.model_selection import StratifiedGroupKFold

            return list(StratifiedGroupKFold(n_splits=inner_fold_count(labels, n_splits, kept), shuffle=True,
                                             random_state=seed).split(np.zeros(len(labels)), labels, kept))
        groups = None
    if groups is not None:
        from sklearn.model_selection import LeaveOneGroupOut

        groups = np.asarray(groups)
        if len(np.unique(groups)) < 2:
            raise ConfigError("choosing hyperparameters by cross-validation over training subjects needs "
                              "at least 2 training subjects in every fold; with one, give one value to each "
                              "grid (e.g. --set model.sigma_grid=[1.0] --set model.C_grid=[10.0])")
        return list(LeaveOneGroupOut().split(np.zeros(len(labels)), labels, groups))
    from sklearn.model_selection import StratifiedKFold

    classes, counts = _class_counts(labels)
    k = inner_fold_count(labels, n_splits)
    if k < 2:
        c = classes[np.flatnonzero(counts == 1)[0]]
        named = f"code {int(c)}" if isinstance(c, np.integer) else repr(c.item() if hasattr(c, "item") else c)
        raise ConfigError(f"every class needs at least 2 training images for the inner cross-validation, but class "
                          f"{named} has 1 in a fold's training images; give that class more images, or a "
                          f"protocol that trains on more of them")
    return list(StratifiedKFold(n_splits=k, shuffle=True, random_state=seed).split(np.zeros(len(labels)), labels))


def holdout_size(n_train: int, fraction: float) -> int:
    """Rows :func:`holdout` holds out of ``n_train``: ``round(fraction * n_train)``, at least one (0 for
    ``fraction = 0``)."""
    return max(1, int(round(fraction * n_train))) if fraction > 0 else 0


def holdout(labels, train_mask, fraction: float, rng,
            name: str = "validation_fraction") -> tuple[np.ndarray, np.ndarray]:
    """``(fit_mask, val_mask)``: ``round(fraction * n)`` (at least one) of the ``n`` training rows held out
    for early stopping, stratified by class, drawn from ``rng`` (a ``numpy.random.Generator``).

    Each class gives its share of the held-out rows (largest remainders round them), as scikit-learn's
    ``SGDClassifier(early_stopping=True)`` does: a plain random draw could hold out every row of a small
    class, which the learner then never saw. A class keeps at least one row to fit on while others can
    give the rows instead; a share that would leave some class no row to fit on is refused
    (:class:`~streamcov.errors.ConfigError` naming ``name``). ``fraction = 0`` holds out nothing.
    """
    fit = np.asarray(train_mask, dtype=bool).copy()
    val = np.zeros_like(fit)
    if not fraction > 0:
        return fit, val
    rows = np.flatnonzero(fit)
    n_val = holdout_size(len(rows), fraction)
    if n_val >= len(rows):
        raise ValueError(f"{name} = {fraction} leaves no training row of {len(rows)}")
    y = np.asarray(labels)[rows]
    _, inverse, counts = np.unique(y, return_inverse=True, return_counts=True)
    if n_val > len(rows) - len(counts):
        raise ConfigError(f"{name} = {fraction} holds out {n_val} of the {len(rows)} training rows, which leaves "
                          f"fewer rows to fit on than the {len(counts)} classes (each needs one); lower it")
    quota = n_val * counts / len(rows)
    take = np.floor(quota).astype(np.int64)
    order = np.lexsort((np.arange(len(counts)), -(quota - take)))    # largest remainder first, then class order
    take[order[:n_val - int(take.sum())]] += 1
    take = np.minimum(take, counts - 1)                              # a class keeps one row to fit on ...
    for c in np.argsort(-(counts - 1 - take), kind="stable"):        # ... while classes with rows to spare give
        take[c] += min(n_val - int(take.sum()), int(counts[c] - 1 - take[c]))
    for c in range(len(counts)):
        if take[c]:
            val[rng.choice(rows[inverse == c], size=int(take[c]), replace=False)] = True
    fit[val] = False
    return fit, val


def rows_sha256(train: np.ndarray, test: np.ndarray) -> str:
    """SHA-256 of a fold's training and test rows (boolean masks): what a fold's saved result and model are
    tied to beside the settings, so that a split that now gives other rows (an edited splits file, a store
    of other subjects) is never answered by them."""
    import hashlib

    bits = np.packbits(np.asarray(train, dtype=bool)).tobytes() + np.packbits(np.asarray(test, dtype=bool)).tobytes()
    return hashlib.sha256(f"{len(train)}:".encode() + bits).hexdigest()


def rows_per_fold(results: list) -> dict:
    """``n_train`` and ``n_test`` of a run's summary: the training and test rows of its folds (``results``, each
    with its own counts), their mean to the nearest count with several folds (it was cut down: 66 for folds of
    67, 67 and 66)."""
    return {k: int(np.rint(np.mean([r[k] for r in results]))) for k in ("n_train", "n_test")}
