"""Nystroem features of the Gaussian kernel, or of a weighted sum of Gaussian kernels over column blocks.

For landmarks ``L`` (rows drawn from the fitted rows) and the kernel ``k``,
``z(x) = K_LL^{-1/2} k(L, x)`` gives ``z(x) . z(y) = k(x, L) K_LL^+ k(L, y)``,
the projection of ``k`` onto the span of the landmarks (Williams and Seeger
2001): exact on the landmarks themselves, so with every fitted row as a
landmark ``Z Z^T`` is the exact Gram matrix of those rows.

The kernel is :func:`streamcov.kernels.block_kernel`: the Gaussian kernel of
paper 000, eq. (1), or, for a descriptor made of blocks (the windows of a
temporal pyramid), ``sum_b w_b exp(-||x_b - y_b||^2 / (2 sigma^2))``. A sum
is approximated with *one* landmark set shared by its terms, so the
``n_components`` landmarks all serve every block: a map per block
(:class:`~streamcov.features.registry.BlockSumFeatures`) would divide them
among the blocks by weight, and a block of weight 1/21 would see 1/21 of them.
scikit-learn's ``Nystroem`` takes one kernel; a sum over column blocks with a
shared landmark set is why this class exists.
"""
from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from scipy.linalg import eigh
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted, validate_data

from .._fitparams import FitParams
from ..kernels import block_gaussian_kernel, check_blocks


def inverse_sqrt(K_LL: np.ndarray, dtype=np.float64) -> np.ndarray:
    """``K_LL^{-1/2}`` of a landmarks' Gram matrix, the map's normalization (``z(x) = k(x, L) K_LL^{-1/2}``).

    K_LL is PSD; round-off (or repeated rows) leaves eigenvalues at the noise level, whose inverse square roots
    would amplify noise: those directions are dropped (pseudo-inverse), at the precision of the rows
    (``dtype``: float32 landmarks give a K_LL good to float32's eps only).
    """
    s, U = eigh(K_LL)
    keep = s > len(s) * np.finfo(dtype).eps * max(float(s.max()), 0.0)
    inv = np.zeros_like(s)
    inv[keep] = 1.0 / np.sqrt(s[keep])
    return (U * inv) @ U.T


class GaussianNystroem(FitParams, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Nystroem map of ``k(x, y) = sum_b w_b exp(-||x_b - y_b||^2 / (2 sigma^2))`` (one block: eq. (1)).

    Parameters
    ----------
    n_components : int, default=100
        Landmarks, drawn without replacement from the rows given to ``fit``; all of them when there are
        fewer rows (the map is then exact on those rows). The map gives one feature per landmark.
    sigma : float, default=1.0
        Bandwidth (:mod:`streamcov.kernels` convention).
    blocks : list of [width, weight] or None, default=None
        Consecutive column blocks and their kernel weights; None is one Gaussian kernel on all columns.
    views : int, default=1
        Views per row, each laid out in ``blocks`` (a sequence and its mirror image: 2); the kernel is the
        mean over the pairs of views (:mod:`streamcov.kernels`).
    random_state : int, RandomState instance or None, default=None
        Draws the landmarks.

    Attributes
    ----------
    components_ : ndarray (n_landmarks, n_features)
        The landmark rows, in the dtype of the fitted rows.
    component_indices_ : ndarray (n_landmarks,)
        Their indices among the fitted rows.
    normalization_ : ndarray (n_landmarks, n_landmarks)
        ``K_LL^{-1/2}`` (float64; eigenvalues below ``n_landmarks * eps * max`` are treated as 0).
    n_features_in_ : int
    """

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "sigma": [Interval(Real, 0, None, closed="neither")],
        "blocks": [list, None],
        "views": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }
    # fitted arrays that depend on the rows (feature stores and models keep them; nothing here is drawn
    # from the seed alone)
    _data_arrays = ("components_", "component_indices_", "normalization_")

    def __init__(self, *, n_components=100, sigma=1.0, blocks=None, views=1, random_state=None):
        self.n_components = n_components
        self.sigma = sigma
        self.blocks = blocks
        self.views = views
        self.random_state = random_state

    def _kernel(self, X, Y=None):
        return block_gaussian_kernel(X, Y, self.blocks, self.sigma, self.views)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Draw ``min(n_components, n_samples)`` landmarks among the rows of X and factor their Gram matrix."""
        X = validate_data(self, X, dtype=[np.float64, np.float32])
        check_blocks(self.blocks, X.shape[1], self.views)
        idx = self.landmark_indices(X.shape[0])
        L = X[idx]   # a copy: the landmarks must not change with the caller's rows
        self.components_ = L
        self.component_indices_ = idx
        self.normalization_ = inverse_sqrt(self._kernel(L), X.dtype)
        self._remember_params()
        return self

    def landmark_indices(self, n_samples: int) -> np.ndarray:
        """The rows ``fit`` takes as landmarks among ``n_samples`` rows (sorted), from ``random_state`` alone.

        ``fit`` reads only these rows, so a caller that computes its rows out of core computes just these, and
        fits on them: the landmarks are then the same rows in the same order (every row of a sample of at most
        ``n_components`` rows is a landmark), hence the same map. An integer ``random_state`` gives the same
        draw at every call; a ``RandomState`` instance advances."""
        rng = check_random_state(self.random_state)
        m = min(int(self.n_components), int(n_samples))
        return np.sort(rng.permutation(int(n_samples))[:m])

    def transform(self, X):
        """``k(X, L) K_LL^{-1/2}``, (n_samples, n_landmarks); float32 stays float32."""
        check_is_fitted(self)
        self._check_params_unchanged()
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        Z = self._kernel(X, self.components_) @ self.normalization_
        return Z.astype(X.dtype, copy=False)

    @property
    def _n_features_out(self):
        # one feature per landmark, derived from the fitted rows (a stored count could disagree with them)
        return len(self.components_)

    @property
    def n_output(self) -> int:
        """Width of the features: one per landmark once fitted (fewer than ``n_components`` when it was
        fitted on fewer rows), ``n_components`` before."""
        return len(self.components_) if hasattr(self, "components_") else int(self.n_components)
