"""The incremental learner: ``partial_fit`` over a feature store, epochs of shuffled blocks.

:func:`train_sgd` takes any scikit-learn classifier with ``partial_fit``
(``SGDClassifier`` by default, built from a pipeline's ``[model]`` by
:func:`make_sgd`) and an :class:`SGDPlan`; it reads the feature store block
by block with a bounded prefetch, so memory does not grow with the store,
checkpoints exactly, and resumes to the same model after a crash.
"""
from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.linear_model import SGDClassifier

from ..errors import ConfigError
from ..splits import holdout, holdout_size
from .memory import use_cache


def iter_blocks(fstore, order, prefetch: int):
    """Yield ``(i, X_i)`` in ``order`` with at most ``prefetch`` blocks loaded ahead.

    A reader thread fills a bounded queue; when the learner is slower than
    the reader, the reader blocks, so memory stays at ``prefetch + 1`` blocks.
    """
    prefetch = max(1, int(prefetch))
    q: queue.Queue = queue.Queue(maxsize=prefetch)
    stop = threading.Event()
    failure = []

    def reader():
        try:
            for i in order:
                if stop.is_set():
                    return
                X = fstore.read_block(int(i))
                while not stop.is_set():
                    try:
                        q.put((int(i), X), timeout=0.1)
                        break
                    except queue.Full:
                        continue
        except BaseException as exc:  # surfaced in the consumer
            failure.append(exc)
        finally:
            q.put(None)

    t = threading.Thread(target=reader, daemon=True, name="streamcov-prefetch")
    t.start()
    try:
        while True:
            item = q.get()
            if item is None:
                break
            yield item
        if failure:
            raise failure[0]
    finally:
        stop.set()
        while t.is_alive():
            try:
                q.get_nowait()
            except queue.Empty:
                pass
            t.join(timeout=0.05)


@dataclass(frozen=True)
class SGDPlan:
    """How the incremental learner walks the feature store.

    ``shuffle_blocks``: blocks pooled and shuffled together (memory: this many
    blocks); ``checkpoint_blocks``: also checkpoint every N blocks within an
    epoch; ``validation_fraction > 0``: hold out that share of the training
    rows (stratified by class) and stop when their accuracy has not improved for
    ``n_iter_no_change`` epochs; ``prefetch``: blocks read ahead.
    """

    epochs: int = 40
    shuffle_blocks: int = 8
    checkpoint_blocks: int = 0
    validation_fraction: float = 0.0
    n_iter_no_change: int = 5
    prefetch: int = 2

    @classmethod
    def from_model(cls, model, prefetch: int = 2) -> "SGDPlan":
        """The plan of a ``[model]`` table."""
        return cls(epochs=int(model.epochs), shuffle_blocks=int(model.shuffle_blocks),
                   checkpoint_blocks=int(model.checkpoint_blocks),
                   validation_fraction=float(model.validation_fraction),
                   n_iter_no_change=int(model.n_iter_no_change), prefetch=int(prefetch))


def n_fit_rows(n_train: int, validation_fraction: float) -> int:
    """Training rows the learner fits on once the validation rows are held out (at least 2 are left, or
    ``model.validation_fraction`` is refused, for either learner)."""
    if validation_fraction > 0:
        n_fit = n_train - holdout_size(n_train, validation_fraction)
        if n_fit < 2:
            from ..errors import ConfigError

            raise ConfigError(f"model.validation_fraction = {validation_fraction}: leaves {max(n_fit, 0)} of "
                              f"{n_train} training rows to fit on; lower it (0.1 is usual)")
        return n_fit
    return n_train


def l2_penalty(C: float, n: int) -> float:
    """``1 / (C n)``, the weight of the L2 penalty that ``C`` gives both learners on ``n`` rows (sgd's
    ``alpha``, lbfgs's ``lam``; at least one row), infinite when ``C n`` is 0 in floating point. Neither learner
    can take a value that is 0 (``C n`` beyond the float range) or infinite: their callers refuse it."""
    denominator = float(C) * max(int(n), 1)
    return 1.0 / denominator if denominator != 0.0 else float("inf")


# scikit-learn's default exponent of the invscaling steps eta0 / t^power_t (make_sgd leaves it)
POWER_T = 0.5


def _check_decay(model, alpha: float, n_train: int) -> None:
    """Refuse steps that zero the weights: the l2 part of the penalty multiplies them by max(0, 1 - eta alpha)
    at every step, so with ``eta >= 1 / alpha`` at every step (``constant``, ``adaptive``, ``pa1``, ``pa2``:
    eta is eta0; ``invscaling`` even at its last, smallest step ``eta0 / T^power_t``) each step starts from 0
    and the model is the last row's step alone (chance accuracy, without a word from scikit-learn). Steps just
    below that forget each row within a few steps: the run's check of what its model learned says so
    (:func:`streamcov.tasks.classify.learned_nothing`)."""
    share = {"l2": 1.0, "elasticnet": 0.85}.get(model.penalty, 0.0)   # elastic net: l1_ratio 0.15, its default
    # eta is eta0 at every step under constant, pa1 and pa2, and under adaptive as streamcov trains (one
    # partial_fit epoch at a time, so scikit-learn never lowers it); invscaling lowers it from eta0
    if model.learning_rate not in ("constant", "invscaling", "adaptive", "pa1", "pa2") or not share:
        return
    last = float(model.eta0)
    if model.learning_rate == "invscaling":
        last /= float(max(1, int(model.epochs) * int(n_train))) ** POWER_T
    if last * share * alpha >= 1.0:
        where = "" if model.learning_rate != "invscaling" else \
            f", even at its last step (eta0 / T^{POWER_T} = {last:.3g} after T = {int(model.epochs) * int(n_train)})"
        raise ConfigError(f"model.eta0 = {float(model.eta0):g}: with model.learning_rate = "
                          f'"{model.learning_rate}" every step multiplies the weights by max(0, 1 - eta alpha) = 0 '
                          f"(alpha = {alpha:.3g}{where}), so the model would be one row's step; give model.eta0 "
                          f"well below {float(model.eta0) / (last * share * alpha):.3g} (each step keeps 1 - eta alpha "
                          f"of the weights)")


def make_sgd(model, n_train: int, seed: int):
    """The ``SGDClassifier`` of a ``[model]`` table for ``n_train`` fitted rows.

    With no ``alpha``, ``alpha = 1 / (C n)``: the hinge-loss SGD objective
    ``alpha/2 ||w||^2 + mean(hinge)`` then equals the SVM objective with C.
    """
    alpha = model.alpha
    if alpha is None:
        alpha = l2_penalty(model.C, n_train)
        if not 0.0 < alpha < float("inf"):   # C n beyond the float range, or its inverse below it
            raise ConfigError(f"model.C = {model.C!r} gives the SGD learner alpha = 1 / (C n) = {alpha!r} for "
                              f"{n_train} training rows, which it cannot take; give C between 1e-300 and 1e300")
    _check_decay(model, float(alpha), n_train)
    kwargs = dict(loss=model.loss, alpha=float(alpha), average=model.average,
                  learning_rate=model.learning_rate, eta0=float(model.eta0), random_state=int(seed))
    if model.penalty != "l2":
        kwargs["penalty"] = None if model.penalty == "none" else model.penalty
    return SGDClassifier(**kwargs)


def fit_scaler(fstore, train_mask: np.ndarray, prefetch: int = 2, kind: str = "standard"):
    """One streaming pass of ``partial_fit`` over the training rows.

    ``kind``: ``standard`` (StandardScaler, per column: changes the kernel the
    features approximate) or ``center`` (:class:`GlobalCenterScaler`: mean
    row and one global factor, kernel-preserving).
    """
    from sklearn.preprocessing import StandardScaler

    from ..preprocessing import GlobalCenterScaler, check_rows_differ

    if kind not in ("standard", "center"):  # pragma: no cover - the schema allows only these
        raise ValueError(f"model.scale must be none, standard or center, got {kind!r}")
    scaler = StandardScaler() if kind == "standard" else GlobalCenterScaler()
    bounds = fstore.bounds
    blocks = [i for i in range(fstore.n_blocks) if train_mask[bounds[i]:bounds[i + 1]].any()]
    for i, X in iter_blocks(fstore, blocks, prefetch):
        scaler.partial_fit(X[train_mask[bounds[i]:bounds[i + 1]]])
    n = int(np.max(scaler.n_samples_seen_))
    check_rows_differ(n, scaler.mean_, scaler.m2_ if kind == "center" else scaler.var_ * n, fstore.dtype)
    return scaler


def _checkpoint_arrays(clf, state: dict) -> dict:
    """The learner and ``state`` as npz arrays, copied: ``partial_fit`` changes the coefficients in place."""
    from .model import checkpoint_arrays, dump_estimator

    arrays: dict = {}
    desc = dump_estimator(clf, "clf.", arrays) if hasattr(clf, "coef_") else None
    arrays = {k: np.array(v, copy=True) for k, v in arrays.items()}
    return checkpoint_arrays(arrays, {"state": state, "classifier": desc})


def _save_checkpoint(path, clf, state: dict):
    from .model import atomic_write_npz

    atomic_write_npz(path, _checkpoint_arrays(clf, state))


def _load_checkpoint(path):
    """``(classifier, state)`` of an SGD checkpoint; ``(None, {})`` for another learner's file."""
    from .model import load_estimator, read_checkpoint

    with np.load(path, allow_pickle=False) as npz:
        doc, arrays = read_checkpoint(npz)
        if "classifier" not in doc:
            return None, {}
        clf = None if doc["classifier"] is None else load_estimator(doc["classifier"], arrays)
    return clf, doc["state"]


class _CachedRows:
    """Scaled training (or validation) rows of each block, read and transformed once."""

    def __init__(self, fstore, mask, y, prefetch: int, transform):
        bounds = fstore.bounds
        self.blocks = [i for i in range(fstore.n_blocks) if mask[bounds[i]:bounds[i + 1]].any()]
        self.rows: dict = {}
        for i, X in iter_blocks(fstore, self.blocks, prefetch):
            rows = np.flatnonzero(mask[bounds[i]:bounds[i + 1]])
            self.rows[i] = (transform(X[rows]), y[bounds[i] + rows], rows)


def train_sgd(fstore, y: np.ndarray, train_mask: np.ndarray, classes: np.ndarray, estimator,
              plan: SGDPlan, seed: int, progress: bool = False, checkpoint=None, resume: bool = False,
              scaler=None, fingerprint: str = "", cache: str = "stream"):
    """Fit ``estimator`` by ``partial_fit`` over the blocks of ``fstore``; returns it fitted.

    Each epoch visits the blocks in a fresh random order, takes them in
    groups of ``plan.shuffle_blocks`` and feeds the pooled rows of a group
    in a random order (a shuffle buffer), all drawn from ``seed``; classes
    are declared on the first call. Stores are written in archive order
    (often sorted by class), so rows shuffled only within a block would
    give the learner runs of a few classes; pooling blocks brings the order
    close to a global shuffle while memory stays at ``shuffle_blocks +
    prefetch`` blocks. With ``checkpoint`` (a path), the learner, the random
    generator state and the position in the epoch are written atomically
    after every epoch and every ``plan.checkpoint_blocks`` blocks;
    ``resume=True`` continues from that file (when its ``fingerprint``
    matches), giving the same model as an uninterrupted run.
    ``plan.validation_fraction > 0`` holds out that share of the training
    rows (stratified by class) and stops when the validation accuracy has not improved for
    ``plan.n_iter_no_change`` epochs.

    ``cache``: ``memory`` reads the training (and validation) rows once and
    keeps them scaled in this process, ``stream`` reads and scales them at
    every epoch, ``auto`` caches when they take at most a quarter of the
    memory available here (:func:`streamcov.stream.memory.use_cache`). The rows, their order and every ``partial_fit`` call are the same
    either way, so is the model. Checkpoints are written in the background
    (:class:`~streamcov.stream.model.AsyncCheckpointWriter`).
    """
    rng = np.random.default_rng(seed)
    vf = float(plan.validation_fraction)
    if vf > 0:
        n_fit_rows(int(np.count_nonzero(train_mask)), vf)        # the one line for a share that leaves nothing
    train_mask, valid_mask = holdout(y, train_mask, vf, rng, "model.validation_fraction")
    clf = estimator
    bounds = fstore.bounds
    has_train = [i for i in range(fstore.n_blocks) if train_mask[bounds[i]:bounds[i + 1]].any()]
    epochs = int(plan.epochs)
    every = int(plan.checkpoint_blocks)
    group = max(1, int(plan.shuffle_blocks))
    patience = int(plan.n_iter_no_change)
    prefetch = int(plan.prefetch)
    state = {"epoch": 0, "pos": 0, "order": None, "rng": None, "best": -1.0, "stale": 0,
             "stopped": False, "fingerprint": fingerprint, "history": []}
    ignored = False
    if resume and checkpoint is not None and Path(checkpoint).is_file():
        from .model import UNREADABLE_CHECKPOINT

        try:
            saved_clf, saved = _load_checkpoint(checkpoint)
        except UNREADABLE_CHECKPOINT:
            saved_clf, saved = None, {}
        if saved.get("fingerprint") == fingerprint:
            state = saved
            if saved_clf is not None:
                clf = saved_clf
            rng.bit_generator.state = state["rng"]
        else:
            ignored = True
    bar = None
    if progress:
        from .._config import new_bar

        bar = new_bar(total=epochs * len(has_train), desc="train", unit="block",
                   initial=state["epoch"] * len(has_train) + state["pos"])

    def transform(X):
        return X if scaler is None else scaler.transform(X)

    # the scaler is elementwise, so scaling rows once, block by block, gives the very numbers
    # that scaling each shuffled group would
    itemsize = np.dtype(getattr(fstore, "dtype", np.float64)).itemsize
    nbytes = int(train_mask.sum() + valid_mask.sum()) * int(getattr(fstore, "dim", 1)) * itemsize
    cached = cached_val = None
    if state["epoch"] < epochs and not state["stopped"] and use_cache(cache, nbytes):
        cached = _CachedRows(fstore, train_mask, y, prefetch, transform)
        if valid_mask.any():
            cached_val = _CachedRows(fstore, valid_mask, y, prefetch, transform)

    def training_blocks(order):
        if cached is None:
            for i, X in iter_blocks(fstore, order, prefetch):
                rows = np.flatnonzero(train_mask[bounds[i]:bounds[i + 1]])
                yield transform(X[rows]), y[bounds[i] + rows]
        else:
            for i in order:
                yield cached.rows[i][:2]

    writer = None
    if checkpoint is not None:
        from .model import AsyncCheckpointWriter

        writer = AsyncCheckpointWriter(checkpoint)

    def save():
        if writer is not None:
            state["rng"] = rng.bit_generator.state
            writer.save(_checkpoint_arrays(clf, state))

    try:
        while state["epoch"] < epochs and not state["stopped"]:
            if state["order"] is None:
                state["order"] = [int(i) for i in rng.permutation(has_train)]
                state["pos"] = 0
            order = state["order"][state["pos"]:]
            pool_X, pool_y = [], []
            for k, (Xr, yr) in enumerate(training_blocks(order), start=1):
                pool_X.append(Xr)
                pool_y.append(yr)
                if k % group and k < len(order):
                    continue
                # a checkpoint is only ever written here, at a group boundary, so a
                # resumed epoch forms the same groups from order[pos:]
                Xg = pool_X[0] if len(pool_X) == 1 else np.concatenate(pool_X)
                yg = pool_y[0] if len(pool_y) == 1 else np.concatenate(pool_y)
                pool_X, pool_y = [], []
                perm = rng.permutation(len(yg))
                try:
                    clf.partial_fit(Xg[perm], yg[perm], classes=classes)
                except ValueError as exc:
                    if "under-/overflow" not in str(exc):
                        raise
                    # scikit-learn stops an SGD whose weights leave the float range; a setting did that
                    raise ConfigError(
                        f"the SGD learner's weights overflowed in epoch {state['epoch'] + 1} (alpha = "
                        f"{clf.alpha:g}, learning_rate = {clf.learning_rate!r}, eta0 = {clf.eta0:g}): lower "
                        f"model.eta0 or model.alpha, raise model.C, or use model.learner = \"lbfgs\"") from None
                done = len(state["order"]) - len(order) + k
                if bar is not None:
                    bar.update(done - state["pos"])
                crossed = every and done // every > state["pos"] // every
                state["pos"] = done
                if crossed and state["pos"] < len(state["order"]):
                    save()
            state["epoch"] += 1
            state["order"] = None
            state["pos"] = 0
            if valid_mask.any():
                if cached_val is None:
                    pred = predict_mask(fstore, clf, valid_mask, prefetch, scaler)
                else:
                    pred = np.concatenate([clf.predict(cached_val.rows[i][0]) for i in cached_val.blocks])
                score = float((pred == y[valid_mask]).mean())
                state["history"].append(score)
                if score > state["best"] + 1e-12:
                    state["best"], state["stale"] = score, 0
                else:
                    state["stale"] += 1
                    if state["stale"] >= patience:
                        state["stopped"] = True
            save()
    finally:
        if writer is not None:
            writer.close()
        if bar is not None:
            bar.close()
    clf.streamcov_epochs_ = state["epoch"]
    clf.streamcov_checkpoint_ignored_ = ignored
    clf.streamcov_cache_ = "memory" if cached is not None else "stream"   # what cache = "auto" chose
    return clf


def predict_mask(fstore, clf, mask: np.ndarray, prefetch: int = 2, scaler=None) -> np.ndarray:
    """Predictions for the rows of ``mask``, streaming block by block."""
    bounds = fstore.bounds
    pred = np.empty(int(mask.sum()), dtype=np.int64)
    blocks = [i for i in range(fstore.n_blocks) if mask[bounds[i]:bounds[i + 1]].any()]
    pos = np.cumsum(mask) - 1
    for i, X in iter_blocks(fstore, blocks, prefetch):
        rows = np.flatnonzero(mask[bounds[i]:bounds[i + 1]])
        Xr = X[rows] if scaler is None else scaler.transform(X[rows])
        pred[pos[bounds[i] + rows]] = clf.predict(Xr)
    return pred


class _ArrayBlocks:
    """In-memory stand-in for a FeatureStore: the same training code, no disk."""

    path = None

    def __init__(self, X: np.ndarray, block: int):
        self.X = X
        self.bounds = np.append(np.arange(0, len(X), block), len(X))

    @property
    def n_blocks(self) -> int:
        return len(self.bounds) - 1

    @property
    def dim(self) -> int:
        return int(self.X.shape[1])

    @property
    def dtype(self):
        return self.X.dtype

    def read_block(self, i: int) -> np.ndarray:
        return self.X[self.bounds[i]:self.bounds[i + 1]]


class _ScaledClassifier:
    def __init__(self, clf, scaler):
        self.clf, self.scaler = clf, scaler

    def predict(self, X):
        return self.clf.predict(X if self.scaler is None else self.scaler.transform(X))


def train_sgd_arrays(X: np.ndarray, y: np.ndarray, train_mask: np.ndarray, classes: np.ndarray,
                     model, seed: int, block: int = 64):
    """:func:`train_sgd` (with the scaler of ``model.scale``) on an in-memory array.

    ``model`` is a ``[model]`` table. Returns an object with ``predict``;
    used by studies and cross-validation.
    """
    blocks = _ArrayBlocks(X, block)
    scaler = None if model.scale == "none" else fit_scaler(blocks, train_mask, 1, model.scale)
    plan = SGDPlan.from_model(model, prefetch=1)
    n_fit = n_fit_rows(int(np.asarray(train_mask, dtype=bool).sum()), plan.validation_fraction)
    clf = train_sgd(blocks, y, train_mask, classes, make_sgd(model, n_fit, seed), plan, seed, scaler=scaler,
                    cache=model.cache)
    return _ScaledClassifier(clf, scaler)
