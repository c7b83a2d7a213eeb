"""Incremental training over a feature store: epochs, shuffled blocks, bounded prefetch."""
from __future__ import annotations

import queue
import threading

import numpy as np


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


def make_sgd(model: dict, n_train: int, seed: int):
    from sklearn.linear_model import SGDClassifier

    alpha = model.get("alpha")
    if alpha is None:
        # The hinge-loss SGD objective alpha/2 ||w||^2 + mean(hinge) equals the
        # SVM objective with C when alpha = 1 / (C n).
        alpha = 1.0 / (float(model.get("C", 10.0)) * max(n_train, 1))
    return SGDClassifier(loss=model.get("loss", "hinge"), alpha=float(alpha),
                         average=model.get("average", True),
                         learning_rate=model.get("learning_rate", "optimal"),
                         eta0=float(model.get("eta0", 0.01)), random_state=int(seed))


def train_sgd(fstore, y: np.ndarray, train_mask: np.ndarray, classes: np.ndarray, model: dict,
              seed: int, prefetch: int = 2, progress: bool = False):
    """Fit an SGDClassifier by ``partial_fit`` over the blocks of ``fstore``.

    Each epoch visits the blocks in a fresh random order and shuffles the
    rows inside each block, both drawn from ``seed``; classes are declared
    on the first call.
    """
    rng = np.random.default_rng(seed)
    clf = make_sgd(model, int(train_mask.sum()), seed)
    bounds = fstore.bounds
    has_train = [i for i in range(fstore.n_blocks) if train_mask[bounds[i]:bounds[i + 1]].any()]
    epochs = int(model.get("epochs", 40))
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=epochs * len(has_train), desc="train", unit="block")
    for _ in range(epochs):
        order = rng.permutation(has_train)
        for i, X in iter_blocks(fstore, order, prefetch):
            rows = np.flatnonzero(train_mask[bounds[i]:bounds[i + 1]])
            rows = rng.permutation(rows)
            clf.partial_fit(X[rows], y[bounds[i] + rows], classes=classes)
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    return clf


def predict_mask(fstore, clf, mask: np.ndarray, prefetch: int = 2) -> np.ndarray:
    """Predictions for the rows of ``mask``, streaming block by block."""
    bounds = fstore.bounds
    pred = np.empty(int(mask.sum()), dtype=np.int64)
    blocks = [i for i in range(fstore.n_blocks) if mask[bounds[i]:bounds[i + 1]].any()]
    pos = np.cumsum(mask) - 1
    for i, X in iter_blocks(fstore, blocks, prefetch):
        rows = np.flatnonzero(mask[bounds[i]:bounds[i + 1]])
        pred[pos[bounds[i] + rows]] = clf.predict(X[rows])
    return pred


class _ArrayBlocks:
    """In-memory stand-in for a FeatureStore: the same training code, no disk."""

    def __init__(self, X: np.ndarray, block: int):
        self.X = X
        self.bounds = np.append(np.arange(0, len(X), block), len(X))

    @property
    def n_blocks(self) -> int:
        return len(self.bounds) - 1

    def read_block(self, i: int) -> np.ndarray:
        return self.X[self.bounds[i]:self.bounds[i + 1]]


def train_sgd_arrays(X: np.ndarray, y: np.ndarray, train_mask: np.ndarray, classes: np.ndarray,
                     model: dict, seed: int, block: int = 512):
    """:func:`train_sgd` on an in-memory array (studies, cross-validation)."""
    return train_sgd(_ArrayBlocks(X, block), y, train_mask, classes, model, seed, prefetch=1)
