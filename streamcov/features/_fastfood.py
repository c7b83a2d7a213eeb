"""Fastfood features (Le, Sarlos, Smola 2013) for the Gaussian RBF kernel."""
from __future__ import annotations

from numbers import Integral

import numba
import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .._config import run_parallel
from .._kernels import fwht as _kf
from ._fourier import _FourierBase, _resolve_gamma, _validate_data


def _next_pow2(n):
    return 1 << max(0, int(n) - 1).bit_length()


class FastfoodSampler(_FourierBase):
    """Fastfood approximation of random Fourier features for the Gaussian RBF kernel.

    Approximates ``k(x, y) = exp(-gamma ||x - y||^2)`` (the kernel and
    ``gamma`` of :class:`sklearn.kernel_approximation.RBFSampler`; in the
    notation of Le et al., ``sigma = 1 / sqrt(2 gamma)``) by
    ``z(x) = sqrt(2 / D) cos(V x + b)``, the same real, random-phase form as
    RBFSampler, with b ~ U[0, 2 pi). The dense Gaussian matrix is replaced by
    ``ceil(D / d')`` stacked blocks (Le, Sarlos, Smola, "Fastfood", ICML 2013,
    eq. (8)):

    ``V_k = 1 / (sigma sqrt(d')) S_k H G_k Pi_k H B_k``,

    where the input is zero-padded to d' = the next power of two >= d, H is
    the unnormalized d' x d' Walsh-Hadamard matrix, B_k a diagonal of random
    signs, Pi_k a random permutation, G_k a diagonal of N(0, 1) entries and
    ``S_k = diag(s_i / ||G_k||_F)`` with s_i ~ chi(d'), so each row of V_k has
    the norm distribution of a N(0, I_d' / sigma^2) row. Only the first D rows
    of the stack are used. Applying V costs O(D log d') per input instead of
    O(D d), with O(D) memory for the fitted parameters.

    Parameters
    ----------
    gamma : float or "scale", default=1.0
        Kernel width in ``exp(-gamma ||x - y||^2)``; ``"scale"`` uses
        ``1 / (n_features * X.var())`` of the data passed to ``fit``.
    n_components : int, default=100
        Number of output features D.
    random_state : int, RandomState instance or None, default=None
        Seeds B, Pi, G, S and the phases b.

    Attributes
    ----------
    gamma_ : float
    n_padded_ : int
        d', the padded input length (power of two).
    signs_ : ndarray of shape (n_blocks, d')
        Diagonals of B_k (+-1).
    permutations_ : ndarray of shape (n_blocks, d'), int64
        Pi_k as index arrays: ``(Pi_k v)[i] = v[permutations_[k, i]]``.
    gaussians_ : ndarray of shape (n_blocks, d')
        Diagonals of G_k.
    scalings_ : ndarray of shape (n_blocks, d')
        Diagonals of S_k times 1 / (sigma sqrt(d')).
    random_offset_ : ndarray of shape (n_components,)
        Phases b.
    n_features_in_ : int

    Notes
    -----
    The transform is one fused numba pass per row (sign flip, FWHT,
    permutation, Gaussian scaling, FWHT, scaling, phase, cosine); see
    :func:`streamcov._kernels.fwht.fastfood_cos`. Internally it works in
    float64; the output has the dtype of the input.
    """

    def __init__(self, *, gamma=1.0, n_components=100, random_state=None):
        self.gamma = gamma
        self.n_components = n_components
        self.random_state = random_state

    def _nbytes_per_component(self, n_features: int) -> float:
        """Fastfood holds no frequency matrix: four vectors of the padded width per block of outputs and a
        phase per output, whatever the input width."""
        n, dp = max(int(self.n_components), 1), _next_pow2(n_features)
        return 8.0 * (4 * -(-n // dp) * dp + n) / n

    def fit(self, X, y=None):
        """Draw the Fastfood blocks for ``X.shape[1]`` inputs.

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
        dp = _next_pow2(X.shape[1])
        n_blocks = -(-n_out // dp)
        signs = rng.randint(0, 2, size=(n_blocks, dp)) * 2.0 - 1.0
        perms = np.stack([rng.permutation(dp) for _ in range(n_blocks)]).astype(np.int64)
        gauss = rng.standard_normal((n_blocks, dp))
        chi = np.sqrt(rng.chisquare(dp, size=(n_blocks, dp)))
        g_norm = np.linalg.norm(gauss, axis=1, keepdims=True)
        # 1 / (sigma sqrt(d')) with sigma = 1 / sqrt(2 gamma).
        scal = chi / g_norm * np.sqrt(2.0 * self.gamma_ / dp)
        self.n_padded_ = dp
        self.signs_ = signs
        self.permutations_ = perms
        self.gaussians_ = gauss
        self.scalings_ = scal
        self.random_offset_ = rng.uniform(0.0, 2.0 * np.pi, size=n_out)
        self._n_features_out = n_out
        self._remember_params()
        return self

    def check_fitted(self) -> None:
        """ValueError when the fitted arrays do not fit together (a model file edited by hand):
        :func:`~streamcov._kernels.fwht.fastfood_cos` indexes them without bounds checks."""
        if not hasattr(self, "permutations_"):
            return
        dp, n_out = self.n_padded_, self._n_features_out
        if not (isinstance(dp, Integral) and isinstance(n_out, Integral) and dp >= 1 and dp & (dp - 1) == 0
                and n_out >= 1):
            raise ValueError(f"n_padded_ = {dp!r} and n_components {n_out!r} are not a padded width and a count")
        shape = (-(-n_out // dp), dp)
        perm = self.permutations_
        for name in ("signs_", "permutations_", "gaussians_", "scalings_"):
            a = getattr(self, name)
            if not isinstance(a, np.ndarray) or a.shape != shape or a.dtype.kind not in ("iu" if a is perm else "f"):
                raise ValueError(f"{name} is not a {shape} array of "
                                 f"{'indices' if a is perm else 'numbers'}")
        if (perm.min() < 0 or perm.max() >= dp) or self.random_offset_.shape != (n_out,):
            raise ValueError(f"permutations_ indices outside 0..{dp - 1}, or random_offset_ not of {n_out} numbers")
        if not isinstance(self.n_features_in_, Integral) or not 1 <= self.n_features_in_ <= dp:
            raise ValueError(f"n_features_in_ = {self.n_features_in_!r} does not fit the padded width {dp}")

    def transform(self, X):
        """Map ``X`` to ``sqrt(2 / D) cos(V x + b)``.

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
        self.check_fitted()
        X = np.ascontiguousarray(_validate_data(self, X, reset=False))
        n_out = self._n_features_out
        out = np.empty((X.shape[0], n_out), dtype=X.dtype)
        run_parallel(_kf.fastfood_cos, X, self.signs_, self.permutations_, self.gaussians_, self.scalings_,
                     self.random_offset_, np.sqrt(2.0 / n_out), numba.get_num_threads(), out)
        return out
