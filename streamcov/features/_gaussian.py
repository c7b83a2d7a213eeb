"""Random Fourier features whose frequencies are regenerated from a seed, for very wide inputs.

The Gaussian kernel K2 of paper 004, eq. (31), on approximate Log-HS
distances is a Gaussian kernel on the vectors ``vec(log(C_D + gamma I))``
(upper triangle, off-diagonals x sqrt 2, so Euclidean distance = Frobenius
distance). Its random Fourier features turn K2 into a linear model. The
vectors are long (D(2D+1) = 80,200 for D = 200): a stored frequency matrix
(``RBFSampler``) would take gigabytes, so it is regenerated block by block.
"""
from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted, validate_data

from .._fitparams import FitParams
from ..kernels import _bandwidth


class GaussianRandomFeatures(FitParams, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Random Fourier features of ``k(u, v) = exp(-||u - v||^2 / (2 sigma^2))``.

    ``z(u) = sqrt(2 / R) cos(W^T u + b)`` with ``W ~ N(0, sigma^-2 I)``
    (paper 004, eq. (30), in streamcov's bandwidth convention,
    :mod:`streamcov.kernels`) and ``b ~ U[0, 2 pi)``, so ``z(u) . z(v)`` is an
    unbiased estimate of ``k(u, v)``. W (n_features x R) is never stored: rows
    ``[b * block_size, (b + 1) * block_size)`` are drawn from a generator
    seeded with ``(seed_, b)`` when needed, so memory is
    O(block_size * n_components) for any input dimension.

    Parameters
    ----------
    n_components : int, default=1000
        Number of random features R.
    sigma : float, default=1.0
        Kernel bandwidth.
    block_size : int, default=4096
        Input features per block of W.
    random_state : int, RandomState instance or None, default=None
        Seeds W and b.

    Attributes
    ----------
    seed_ : int
        Seed of the blocks of W.
    offset_ : ndarray (n_components,)
        Phases b.
    n_features_in_ : int
    """

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "sigma": [Interval(Real, 0, None, closed="neither")],
        "block_size": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(self, *, n_components=1000, sigma=1.0, block_size=4096, random_state=None):
        self.n_components = n_components
        self.sigma = sigma
        self.block_size = block_size
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Draw the seed of W and the phases b; only the width of X is used."""
        X = validate_data(self, X, dtype=[np.float64, np.float32])
        _bandwidth(self.sigma, "sigma")   # frequencies of 1 / sigma: 1e-300 made every feature NaN
        from ._fourier import check_map_memory

        n = int(self.n_components)   # True passed the Integral constraint and reached numpy as a bool
        check_map_memory(n, 8.0 * (min(int(self.block_size), X.shape[1]) + 2))   # a block of W
        rng = check_random_state(self.random_state)
        self.seed_ = int(rng.randint(np.iinfo(np.int32).max))
        self.offset_ = rng.uniform(0.0, 2.0 * np.pi, size=n)
        self._n_features_out = n
        self._remember_params()
        return self

    def weight_block(self, b: int) -> np.ndarray:
        """Rows ``[b * block_size, ...)`` of W, shape (rows, n_components), float64."""
        check_is_fitted(self)
        start = b * self.block_size
        stop = min(start + self.block_size, self.n_features_in_)
        if not 0 <= start < self.n_features_in_:
            raise IndexError(f"block {b} outside the {self.n_features_in_} input features")
        rng = np.random.default_rng([self.seed_, b])
        return rng.standard_normal((stop - start, len(self.offset_))) * (1.0 / self.sigma)

    def transform(self, X):
        """Map X (n_samples, n_features) to (n_samples, n_components); float32 stays float32."""
        check_is_fitted(self)
        self._check_params_unchanged()
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        dtype = X.dtype
        n = len(self.offset_)
        proj = np.zeros((X.shape[0], n), dtype=np.float64)
        n_blocks = -(-self.n_features_in_ // self.block_size)
        for b in range(n_blocks):
            w = self.weight_block(b).astype(dtype, copy=False)
            start = b * self.block_size
            proj += X[:, start:start + w.shape[0]] @ w
        proj += self.offset_
        np.cos(proj, out=proj)
        proj *= np.sqrt(2.0 / n)
        return proj.astype(dtype, copy=False)
