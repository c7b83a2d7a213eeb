"""Random Maclaurin features (Kar & Karnick 2012) for an exponential dot-product kernel."""
from __future__ import annotations

import math
import numbers

import numpy as np
from scipy.special import gammaln
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._fourier import _FourierBase, _validate_data
from ._rgw import _degree_plan, _draw_degrees, product_features

_KERNELS = ("gaussian", "exp_dot")
# P(N = n) = 1 / p^(n + 1): Kar & Karnick's choice p = 2, a geometric law on n >= 0.
_P = 2.0
_SAMPLINGS = ("iid", "stratified")
# Stratified degrees use the law truncated here; the omitted tail sum_{n > 50} a_n <x', y'>^n is
# below 1e-33 of exp(<x', y'> / sigma^2) while ||x'|| ||y'|| / sigma^2 <= 4 (4^51 / 51! = 3e-36
# against e^-4), the centred regime; it is not negligible for ||x||^2 / sigma^2 of 50 or more.
_MAX_DEGREE = 50


class RandomMaclaurinSampler(_FourierBase):
    """Random Maclaurin feature map for ``f(<x, y>) = exp(<x, y> / sigma^2)``.

    Kar & Karnick ("Random Feature Maps for Dot Product Kernels", AISTATS
    2012, Algorithm 1) write a dot-product kernel as its Maclaurin series
    ``f(t) = sum_n a_n t^n``, here ``a_n = 1 / (sigma^(2n) n!)``. Each of the
    D output features draws a degree N with ``P(N = n) = 1 / p^(n + 1)``
    (p = 2) and N independent Rademacher vectors w_1..w_N, and is

    ``z_i(x) = sqrt(a_N p^(N + 1) / D) * prod_{k=1}^N <w_k, x>``

    (the empty product is 1), so that ``E <z(x), z(y)> = f(<x, y>)`` exactly.

    With ``kernel="gaussian"`` (default) every row's features are also
    multiplied by ``exp(-||x||^2 / (2 sigma^2))``. Since
    ``exp(-||x - y||^2 / (2 sigma^2)) = exp(-||x||^2 / (2 sigma^2))
    exp(-||y||^2 / (2 sigma^2)) exp(<x, y> / sigma^2)`` for any x and y, the
    map is then unbiased for the Gaussian kernel on inputs of any norm (on
    unit-norm inputs, e.g. the unit-Frobenius-norm ``log X`` of paper 000,
    the factor is the constant ``exp(-1 / (2 sigma^2))``).
    ``kernel="exp_dot"`` omits the factor and approximates
    ``exp(<x, y> / sigma^2)``.

    The variance of a degree-n feature scales with
    ``a_n p^(n + 1) ||x||^(2n) = 2^(n+1) (||x||^2 / sigma^2)^n / n!``, so it
    explodes once ``||x||^2 / sigma^2`` is much above 1: on unit-norm inputs
    with sigma = 0.125 the feature scales ``sqrt(a_n p^(n + 1))`` reach
    10^27. With ``center=True`` (Gaussian kernel only) ``fit`` stores the
    mean of X and the map expands the kernel around it, ``x' = x - mean_``;
    the Gaussian kernel is translation invariant, so the target is
    unchanged, but for data concentrated around its mean (the
    log-covariance vectors of one dataset) ``||x'||`` is a fraction of
    ``||x||`` and the variance drops by orders of magnitude.

    Parameters
    ----------
    sigma : float, default=1.0
        Kernel width, > 0.
    kernel : {"gaussian", "exp_dot"}, default="gaussian"
        Which kernel the map approximates (see above).
    n_components : int, default=100
        Number of output features D.
    sampling : {"iid", "stratified"}, default="iid"
        ``"iid"`` is Kar & Karnick's scheme: every feature draws its degree,
        so about half of them are the constant degree-0 term. ``"stratified"``
        allocates degrees as :class:`RGWSampler` does (same geometric law,
        truncated at degree 50): one feature carries the constant term
        exactly, the other D - 1 get degree n >= 1 in their expected
        proportions 2^-n, and each degree-n feature is weighted by
        ``a_n / E[count of n]``, so the estimate stays unbiased (for the
        series up to degree 50, which is the whole kernel to 1e-33 while
        ``||x|| ||y|| / sigma^2 <= 4``, e.g. with ``center=True``) with about
        twice as many informative features.
    center : bool, default=False
        Expand the Gaussian kernel around the mean of the data passed to
        ``fit`` (see above). Requires ``kernel="gaussian"``.
    random_state : int, RandomState instance or None, default=None
        Seeds the degrees and the Rademacher vectors.

    Attributes
    ----------
    degrees_ : ndarray of shape (n_components,), int64
        Degree N of each feature.
    offsets_ : ndarray of shape (n_components + 1,), int64
        Feature i uses the projection columns ``offsets_[i]:offsets_[i+1]``.
    random_weights_ : ndarray of shape (n_features, degrees_.sum())
        Stacked Rademacher vectors (+-1), in the dtype of the data passed to
        ``fit``.
    scales_ : ndarray of shape (n_components,), float64
        ``sqrt(a_N p^(N+1) / D)`` (stratified: ``sqrt(a_N / E[count of N])``);
        ``transform`` multiplies by the per-row factor
        ``exp(-||x'||^2 / (2 sigma^2))`` for the Gaussian kernel.
    mean_ : ndarray of shape (n_features,), float64
        Mean of the fitted X with ``center=True``, zeros otherwise.
    n_features_in_ : int
    """

    _parameter_constraints: dict = {
        "sigma": [Interval(numbers.Real, 0, None, closed="neither")],
        "kernel": [StrOptions(set(_KERNELS))],
        "n_components": [Interval(numbers.Integral, 1, None, closed="left")],
        "sampling": [StrOptions(set(_SAMPLINGS))],
        "center": ["boolean"],
        "random_state": ["random_state"],
    }

    def __init__(self, *, sigma=1.0, kernel="gaussian", n_components=100, sampling="iid",
                 center=False, random_state=None):
        self.sigma = sigma
        self.kernel = kernel
        self.n_components = n_components
        self.sampling = sampling
        self.center = center
        self.random_state = random_state

    def _nbytes_per_component(self, n_features: int) -> float:
        """A projection per degree of each feature: its mean degree (:func:`registry.projection_columns`)."""
        from .registry import projection_columns

        return 8.0 * (4 + n_features * projection_columns({"map": "maclaurin", "sampling": self.sampling}))

    def fit(self, X, y=None):
        """Draw degrees and Rademacher vectors for ``X.shape[1]`` inputs.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self
        """
        self._validate_params()
        n_out = int(self.n_components)
        from ..kernels import _bandwidth

        sigma = _bandwidth(self.sigma, "sigma")   # checked at fit, not first by transform's Gaussian factor
        if self.center and self.kernel != "gaussian":
            raise ValueError("RandomMaclaurinSampler: center=True expands the translation-invariant "
                             "Gaussian kernel; exp(<x, y> / sigma^2) is not translation invariant. "
                             "Use kernel='gaussian' or center=False.")
        X = _validate_data(self, X, reset=True)
        rng = check_random_state(self.random_state)
        if self.sampling == "iid":
            # numpy's geometric law starts at 1; shift it to start at 0.
            degrees = rng.geometric(1.0 - 1.0 / _P, size=n_out).astype(np.int64) - 1
        else:
            plan = _degree_plan(n_out, 1.0 - 1.0 / _P, _MAX_DEGREE, "stratified")
            degrees = _draw_degrees(plan, rng).astype(np.int64)
        offsets = np.zeros(n_out + 1, dtype=np.int64)
        np.cumsum(degrees, out=offsets[1:])
        w = rng.randint(0, 2, size=(X.shape[1], int(offsets[-1]))) * 2.0 - 1.0
        if self.sampling == "iid":
            # log(a_n p^(n+1)) with a_n = sigma^(-2n) / n!, in logs to avoid overflow.
            log_w = (-2.0 * math.log(sigma) * degrees - gammaln(degrees + 1.0)
                     + (degrees + 1) * math.log(_P))
            scales = np.exp(0.5 * log_w) / math.sqrt(n_out)
        else:
            log_a = -2.0 * math.log(sigma) * degrees - gammaln(degrees + 1.0)
            scales = np.exp(0.5 * (log_a - plan.log_expected_count[degrees]))
        self.mean_ = (X.mean(axis=0, dtype=np.float64) if self.center
                      else np.zeros(X.shape[1], dtype=np.float64))
        self.degrees_ = degrees
        self.offsets_ = offsets
        self.random_weights_ = np.ascontiguousarray(w, dtype=X.dtype)
        self.scales_ = scales
        self._n_features_out = n_out
        self._remember_params()
        return self

    def transform(self, X):
        """Map ``X`` to the random Maclaurin features.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_components), dtype of ``X``
            (float32 stays float32, anything else becomes float64).
        """
        check_is_fitted(self)
        self._check_params_unchanged()
        X = _validate_data(self, X, reset=False)
        if self.center:
            X = X - self.mean_.astype(X.dtype, copy=False)
        proj = np.ascontiguousarray(X @ self.random_weights_.astype(X.dtype, copy=False))
        out = np.empty((X.shape[0], self._n_features_out), dtype=X.dtype)
        sq = np.einsum("ij,ij->i", X, X, dtype=np.float64) if self.kernel == "gaussian" else None
        return product_features(proj, self.offsets_, self.scales_, out, sq, self.sigma, type(self).__name__, X)
