"""Kernel-preserving conditioning of explicit features for SGD."""
from __future__ import annotations

import contextlib
import contextvars

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data


class GlobalCenterScaler(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Subtract the mean row, then divide everything by one number.

    Random features of a Gaussian kernel on descriptors that lie close
    together share most of their norm: on MSR-Action3D about 98% of
    ||Phi(x)||^2 is common to all sequences, and SGD spends its steps on it.
    Translating by the training mean is absorbed exactly by an unregularized
    intercept (w.(phi - c) + b = w.phi + (b - w.c), same ||w||), and a single
    global factor only rescales the kernel, so the linear SVM problem is the
    same while SGD sees a well-conditioned one. Unlike per-column
    standardization this does not change the approximated kernel.

    ``partial_fit`` merges each batch's count, mean and sums of squared
    deviations into the running ones (Chan et al.'s pairwise update,
    :func:`streamcov.linalg.merge_moments`), so one streaming pass gives the
    mean and scale, without the cancellation of ``E||x||^2 - ||mean||^2``
    on rows that lie close together far from the origin.

    Attributes
    ----------
    mean_ : ndarray of shape (n_features,)
    m2_ : ndarray of shape (n_features,)
        Sums of squared deviations from ``mean_``, per column.
    scale_ : float
        sqrt of the mean squared norm of the centred rows, ``sqrt(sum(m2_) / n)``
        (1 when the rows are all equal).
    n_samples_seen_ : int
    n_features_in_ : int
    """

    _parameter_constraints: dict = {}

    def __init__(self):
        pass

    def partial_fit(self, X, y=None):
        from .linalg import merge_moments

        first = not hasattr(self, "n_samples_seen_")
        X = validate_data(self, X, reset=first, dtype=[np.float64, np.float32])
        seen = (0, np.zeros(X.shape[1]), np.zeros(X.shape[1])) if first else \
            (self.n_samples_seen_, self.mean_, self.m2_)
        with np.errstate(over="ignore", invalid="ignore"):   # overflow is refused below, in one line
            mean = X.mean(axis=0, dtype=np.float64)
            dev = X - mean          # float64: the batch's deviations from its own mean
            batch = (X.shape[0], mean, np.einsum("ij,ij->j", dev, dev))
            del dev
            n, mean, m2 = merge_moments(seen, batch)
        var = float(m2.sum()) / n
        if not (np.isfinite(var) and np.isfinite(mean).all()):   # an infinite scale: every row transformed to 0
            if first:   # a refused first batch leaves the scaler unfitted, not fixed to that batch's width
                for attr in ("n_features_in_", "feature_names_in_"):
                    self.__dict__.pop(attr, None)
            raise ValueError(f"X: the squared deviations of its rows overflow float64 (values up to "
                             f"{float(np.abs(X).max()):.3g}); scale X down")
        self.n_samples_seen_, self.mean_, self.m2_ = n, mean, m2
        self.scale_ = float(np.sqrt(var)) if var > 0 else 1.0
        return self

    def fit(self, X, y=None):
        for attr in ("n_samples_seen_", "m2_", "mean_", "scale_"):
            if hasattr(self, attr):
                delattr(self, attr)
        return self.partial_fit(X, y)

    def transform(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32])
        return ((X - self.mean_.astype(X.dtype)) / X.dtype.type(self.scale_)).astype(X.dtype, copy=False)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


# the training rows' spread (root mean squared deviation from their mean row), relative to their size (root
# mean square), at or below which they are equal to rounding: a few units in the last place of their dtype.
# Measured on a synthetic store with descriptor.gamma = 1e20: 3.7 float64 eps (accuracy at chance); at 1e12:
# 14 eps, and still learnable (95%).
ROUNDING_ULPS = 8


#: the settings a message about training rows that are all alike suspects, as the running task names them: its
#: regularization of the covariances and the bandwidth of its feature map (:func:`suspects_named`)
_SUSPECTS = contextvars.ContextVar("streamcov_swamp_suspects", default=("descriptor.gamma", "features.sigma"))


@contextlib.contextmanager
def suspects_named(gamma: str, bandwidth: str):
    """Within the block, :func:`check_rows_differ` names the task's keys ``gamma`` and ``bandwidth`` (the image
    tasks' ``method.gamma`` and ``method.sigma2``; it named the skeleton tasks' keys, which they lack)."""
    token = _SUSPECTS.set((gamma, bandwidth))
    try:
        yield
    finally:
        _SUSPECTS.reset(token)


def check_rows_differ(n: int, mean: np.ndarray, m2: np.ndarray, dtype=np.float64) -> None:
    """Refuse training rows that are all equal to within rounding (moments: count, mean row, sums of
    squared deviations; ``dtype``: the rows' own): scaling would blow their rounding up into features, and
    the learner would fit noise and report an accuracy for it. Seen when a setting swamps the data
    (``descriptor.gamma = 1e20`` far above the covariances: every descriptor the log of nearly the same
    matrix)."""
    from .errors import ConfigError

    n = int(n)
    if n < 2:
        return
    var = float(np.sum(m2)) / n
    size = var + float(np.dot(mean, mean))
    spread = np.sqrt(var / size) if size > 0 else 0.0
    if spread <= ROUNDING_ULPS * np.finfo(np.dtype(dtype)).eps:
        gamma, bandwidth = _SUSPECTS.get()
        raise ConfigError(f"the {n} training rows' features are all equal to within rounding (relative spread "
                          f"{spread:.2g}): nothing can be learned from them; a setting swamps the data, e.g. "
                          f"{gamma} far above the covariances, or a bandwidth ({bandwidth}) far from the distances")
