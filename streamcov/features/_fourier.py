"""Structured and quasi-random Fourier features for the Gaussian RBF kernel.

Both maps approximate ``k(x, y) = exp(-gamma ||x - y||^2)`` (the kernel of
:class:`sklearn.kernel_approximation.RBFSampler`, same ``gamma``). By
Bochner's theorem (paper 004, eqs. (24)-(25)) ``k(x, y) = E cos(<w, x - y>)``
with ``w ~ N(0, 2 gamma I)``; the maps differ only in how the frequencies
``w`` are chosen:

* :class:`OrthogonalRBFSampler`: orthogonal random features (Yu, Suresh,
  Choromanski, Holtmann-Rice, Kumar 2016), frequencies orthogonal within
  blocks of ``n_features`` rows, with the norms of Gaussian vectors.
* :class:`QuasiRandomRBFSampler`: quasi-Monte Carlo features (Yang et al.
  2014; paper 004 Appendix C, paper 002 Sec. 3), frequencies from a scrambled
  Halton sequence pushed through the inverse Gaussian CDF, eq. (61).
"""
from __future__ import annotations

import math
import numbers

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import validate_data

from .._fitparams import FitParams

_FLOAT_DTYPES = (np.float64, np.float32)


def _validate_data(estimator, X, reset):
    """``validate_data`` for float32/float64 dense 2-D input, all values finite; at fit (``reset``), a map whose
    parameters (``estimator._nbytes_per_component``) would not fit in memory is refused first."""
    X = validate_data(estimator, X, reset=reset, dtype=_FLOAT_DTYPES)
    if reset:
        check_map_memory(estimator.n_components, estimator._nbytes_per_component(X.shape[1]))
    return X


def check_map_memory(n_components, bytes_per_component: float) -> None:
    """Refuse a map of ``n_components`` features larger than this machine's memory, before it is drawn
    (OrthogonalRBFSampler(n_components=10**12) drew QR blocks for hours, the others were numpy's
    MemoryError)."""
    from .._config import check_memory

    check_memory(float(n_components) * bytes_per_component, f"n_components = {n_components}", "lower n_components")


def _resolve_gamma(estimator, X):
    """``gamma`` as a float; ``"scale"`` means 1 / (n_features * X.var()) as in RBFSampler."""
    gamma = estimator.gamma
    if isinstance(gamma, str) and gamma == "scale":
        var = float(np.var(X, dtype=np.float64))
        return 1.0 / (X.shape[1] * var) if var > 0 else 1.0
    from ..kernels import _real, sigma_from_gamma

    g = _real(gamma)   # np.isfinite(10**20) was a TypeError
    if g is None or not math.isfinite(g) or g <= 0:
        raise ValueError(
            f"{type(estimator).__name__}: gamma must be a finite float > 0 or 'scale'; "
            f"got {gamma!r}.")
    sigma_from_gamma(g)   # frequencies of sqrt(2 gamma): 1e308 made every feature NaN
    return g


def orthogonal_gaussian_rows(n_rows, dim, rng):
    """``n_rows`` x ``dim`` matrix of orthogonal random features (Yu et al. 2016).

    Stacks ``ceil(n_rows / dim)`` independent blocks ``S Q``: Q is Haar
    orthogonal (QR of a standard Gaussian matrix with the signs of diag(R)
    moved into Q, Mezzadri 2007), S is diagonal with chi(dim) entries, so each
    row has the norm distribution of a N(0, I_dim) vector while rows within a
    block are exactly orthogonal. Rows past ``n_rows`` are dropped.

    Parameters
    ----------
    n_rows, dim : int
    rng : numpy.random.RandomState

    Returns
    -------
    ndarray of shape (n_rows, dim), float64
    """
    from scipy.linalg import qr

    n_blocks = -(-n_rows // dim)
    blocks = []
    for _ in range(n_blocks):
        q, r = qr(rng.standard_normal((dim, dim)), overwrite_a=True, check_finite=False)
        q *= np.where(np.diag(r) < 0, -1.0, 1.0)
        norms = np.sqrt(rng.chisquare(dim, size=dim))
        blocks.append(norms[:, None] * q)
    return np.concatenate(blocks, axis=0)[:n_rows]


def halton_gaussian(n_points, dim, rng):
    """``n_points`` quasi-random N(0, I_dim) points, as rows (paper 004, eq. (61)).

    A scrambled Halton sequence in [0, 1]^dim, seeded from ``rng``, mapped
    coordinate-wise by the standard normal inverse CDF. Points are clipped
    away from exactly 0 and 1, where the inverse CDF is infinite.
    """
    from scipy.stats import norm, qmc

    seed = int(rng.randint(np.iinfo(np.int32).max))
    try:
        sampler = qmc.Halton(dim, scramble=True, rng=seed)
    except TypeError:  # pragma: no cover - scipy < 1.15 names it seed
        sampler = qmc.Halton(dim, scramble=True, seed=seed)
    t = sampler.random(n_points)
    eps = np.finfo(np.float64).eps
    np.clip(t, eps, 1.0 - eps, out=t)
    return norm.ppf(t)


class _FourierBase(FitParams, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    # the Gaussian maps with a gamma; subclasses with other parameters declare their own
    _parameter_constraints: dict = {
        "gamma": [StrOptions({"scale"}), Interval(numbers.Real, 0, None, closed="neither")],
        "n_components": [Interval(numbers.Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

    def _nbytes_per_component(self, n_features: int) -> float:
        """Bytes of the fitted map per output feature on ``n_features`` inputs (for the memory check at fit):
        a row of frequencies and a phase."""
        return 8.0 * (n_features + 4)


class OrthogonalRBFSampler(_FourierBase):
    """Orthogonal random Fourier features for the Gaussian RBF kernel.

    Approximates ``k(x, y) = exp(-gamma ||x - y||^2)`` by
    ``z(x) = sqrt(2 / D) cos(W^T x + b)`` exactly like
    :class:`sklearn.kernel_approximation.RBFSampler`, but the D columns of W
    come from orthogonal random features (Yu et al., "Orthogonal Random
    Features", NeurIPS 2016): ``W^T = sqrt(2 gamma) [S_1 Q_1; S_2 Q_2; ...]``,
    each Q_i an independent Haar orthogonal d x d matrix and S_i diagonal with
    chi(d) entries, truncated to D rows (see
    :func:`orthogonal_gaussian_rows`). Each column is marginally
    N(0, 2 gamma I), so the estimate stays unbiased, and orthogonality within a
    block lowers its variance relative to i.i.d. Gaussian columns.

    Parameters
    ----------
    gamma : float or "scale", default=1.0
        Kernel width in ``exp(-gamma ||x - y||^2)``; ``"scale"`` uses
        ``1 / (n_features * X.var())`` of the data passed to ``fit``.
    n_components : int, default=100
        Number of output features D.
    random_state : int, RandomState instance or None, default=None
        Seeds the orthogonal blocks and the phases b.

    Attributes
    ----------
    gamma_ : float
        The kernel width used.
    random_weights_ : ndarray of shape (n_features, n_components)
        W, in the dtype of the data passed to ``fit``.
    random_offset_ : ndarray of shape (n_components,)
        Phases b ~ U[0, 2 pi).
    n_features_in_ : int
    """

    def __init__(self, *, gamma=1.0, n_components=100, random_state=None):
        self.gamma = gamma
        self.n_components = n_components
        self.random_state = random_state

    def fit(self, X, y=None):
        """Draw the orthogonal frequencies and phases for ``X.shape[1]`` inputs.

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
        X = _validate_data(self, X, reset=True)
        self.gamma_ = _resolve_gamma(self, X)
        rng = check_random_state(self.random_state)
        w = orthogonal_gaussian_rows(n_out, X.shape[1], rng).T
        w *= np.sqrt(2.0 * self.gamma_)
        self.random_weights_ = np.ascontiguousarray(w, dtype=X.dtype)
        self.random_offset_ = rng.uniform(0.0, 2.0 * np.pi, size=n_out).astype(X.dtype)
        self._n_features_out = n_out
        self._remember_params()
        return self

    def transform(self, X):
        """Map ``X`` to ``sqrt(2 / D) cos(X W + b)``.

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
        proj = X @ self.random_weights_.astype(X.dtype, copy=False)
        proj += self.random_offset_.astype(X.dtype, copy=False)
        np.cos(proj, out=proj)
        proj *= np.sqrt(2.0 / self._n_features_out).astype(X.dtype)
        return proj


class QuasiRandomRBFSampler(_FourierBase):
    """Quasi-random Fourier features for the Gaussian RBF kernel.

    Approximates ``k(x, y) = exp(-gamma ||x - y||^2)`` by quasi-Monte Carlo
    integration of Bochner's integral (Yang, Sindhwani, Avron, Mahoney 2014),
    as in paper 004, Appendix C, eqs. (60)-(61), and paper 002, Sec. 3: m
    points t_j of a scrambled Halton sequence in [0, 1]^d give the
    frequencies ``w_j = sqrt(2 gamma) Phi^{-1}(t_j)`` (Phi the standard normal
    CDF; this equals eq. (69) with sigma^2 = 1 / gamma), and the map is the
    cos/sin concatenation of paper 004, eqs. (27)-(29):

    ``z(x) = (1 / sqrt(m)) (cos(W^T x); sin(W^T x))``, with m = D / 2,

    so that ``<z(x), z(y)> = (1/m) sum_j cos(<w_j, x - y>)`` (eq. (26)) with no
    random phases. ``n_components`` counts output features (2m). When it is
    odd, one extra Halton frequency contributes a single feature
    ``sqrt(2 / D) cos(<w, x> + b)`` with a uniform random phase b; every
    feature then carries the factor sqrt(2 / D) (equal to 1/sqrt(m) for even
    D) and the estimate keeps the expectation of the randomized construction.

    The scrambling (Owen-type digit permutations, seeded by ``random_state``)
    makes the point set a randomized QMC design: different seeds give
    different, equally low-discrepancy frequency sets.

    Parameters
    ----------
    gamma : float or "scale", default=1.0
        Kernel width in ``exp(-gamma ||x - y||^2)``; ``"scale"`` uses
        ``1 / (n_features * X.var())`` of the data passed to ``fit``.
    n_components : int, default=100
        Number of output features D (cosines first, then sines).
    random_state : int, RandomState instance or None, default=None
        Seeds the Halton scrambling (and the phase of the odd feature).

    Attributes
    ----------
    gamma_ : float
    frequencies_ : ndarray of shape (n_features, ceil(n_components / 2))
        Columns w_j, in the dtype of the data passed to ``fit``.
    n_pairs_ : int
        m = n_components // 2 frequencies used as cos/sin pairs.
    random_offset_ : ndarray of shape (n_components % 2,)
        Phase of the unpaired cosine feature (empty when D is even).
    n_features_in_ : int
    """

    def __init__(self, *, gamma=1.0, n_components=100, random_state=None):
        self.gamma = gamma
        self.n_components = n_components
        self.random_state = random_state

    def fit(self, X, y=None):
        """Build the quasi-random frequencies for ``X.shape[1]`` inputs.

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
        X = _validate_data(self, X, reset=True)
        self.gamma_ = _resolve_gamma(self, X)
        rng = check_random_state(self.random_state)
        n_freq = (n_out + 1) // 2
        w = halton_gaussian(n_freq, X.shape[1], rng).T
        w *= np.sqrt(2.0 * self.gamma_)
        self.frequencies_ = np.ascontiguousarray(w, dtype=X.dtype)
        self.n_pairs_ = n_out // 2
        self.random_offset_ = rng.uniform(0.0, 2.0 * np.pi, size=n_out % 2).astype(X.dtype)
        self._n_features_out = n_out
        self._remember_params()
        return self

    def transform(self, X):
        """Map ``X`` to ``sqrt(2 / D) (cos(X W), sin(X W))``.

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
        proj = X @ self.frequencies_.astype(X.dtype, copy=False)
        m = self.n_pairs_
        n_out = self._n_features_out
        out = np.empty((X.shape[0], n_out), dtype=X.dtype)
        np.cos(proj[:, :m], out=out[:, :m])
        np.sin(proj[:, :m], out=out[:, m:2 * m])
        if n_out % 2:
            np.cos(proj[:, m] + self.random_offset_[0].astype(X.dtype), out=out[:, 2 * m])
        out *= np.sqrt(2.0 / n_out).astype(X.dtype)
        return out
