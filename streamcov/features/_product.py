"""Explicit features of paper 004's conv + head kernel: a Gaussian kernel times a linear kernel, by tensor sketch.

Paper 004 (sections 5 and 6.3.2) combines the Gaussian kernel K2 of the
approximate Log-HS distance (eq. (31)) between hypercolumn operators with a linear kernel on the
fully connected layer by a pointwise product. streamcov weights the head
(``w`` in [0, 1], chosen by inner cross-validation; ``w = 1`` is the
paper's product, ``w = 0`` the operators alone):

    K(x, y) = K2(v, v') ((1 - w) + w <h, h'>) = K2(v, v') <a(h), a(h')>,
    a(h) = [sqrt(1 - w), sqrt(w) h],

for rows ``x = [v, h]`` (``v`` the log-operator vector, ``h`` the unit head
vector, the last ``n_head`` columns). With random Fourier features ``z`` of
K2 (``E[z(v) . z(v')] = K2(v, v')``) the exact feature map of K is the
tensor product ``z(v) (x) a(h)``, of width n_rff x (n_head + 1): 5 million
for 4096 x 1281. A TensorSketch (Pham and Pagh, KDD 2013) compresses it to
``n_components`` numbers without forming it:

    CS1(z)[k] = sum_{i: h1(i) = k} s1(i) z_i,  CS2(a)[k] likewise (independent h2, s2),
    TS(x) = IFFT(FFT(CS1(z)) * FFT(CS2(a)))   (circular convolution, length n_components),

and ``TS(x) . TS(y)`` is an unbiased estimate of ``(z . z') <a, a'>``, hence
of K once z is. It is the count sketch of ``z (x) a`` under the hash
``(h1(i) + h2(j)) mod n`` and sign ``s1(i) s2(j)``. The signs of the pairs
are not 4-wise independent (``s(i,j) s(i,j') s(i',j) s(i',j') = 1``), so its
variance over the hashes is that of a count sketch plus two more terms: to
first order in 1/n,

    Var = (|z|^2 |z'|^2 |a|^2 |a'|^2 + (z.z')^2 |a|^2 |a'|^2 + |z|^2 |z'|^2 <a,a'>^2
           + (z.z')^2 <a,a'>^2) / n  <=  4 |z|^2 |z'|^2 / n   for unit a

(tested against 3000 draws of the hashes: within 10%). ``|a| = 1`` for a
unit head, so at n = 4096 and |z| about 1 the standard error is at most
0.031 per kernel entry (measured 0.021), the size of the Fourier features'
own error. A linear model on TS(x) is a kernel machine on K, as SGD on z(v) is
one on K2.

Why not concatenate ``[z(v), c h]`` for the product: that is the sum kernel
``K2 + c^2 <h, h'>`` (an additive model), not the paper's product, which
lets the head modulate the operators' similarity (for w = 1 two images are
alike only when both their operators and their heads are). The sum is the
other combination offered (``head_combine="sum"``, chosen against the
product by inner cross-validation in the ``image-classification`` task):

    K(x, y) = (1 - w) K2(v, v') + w <h, h'>,

whose explicit map is the concatenation ``[sqrt(1 - w) z(v), sqrt(w) h]``
(``n_rff + n_head`` numbers, no sketch): unbiased for K with the variance
of the Fourier features alone, ``(1 - w)^2 Var(z(v) . z(v'))``. Unlike the
product it reaches the head alone at ``w = 1`` (the product reaches it
only as K2 flattens, for a large bandwidth).
"""
from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .._fitparams import FitParams


class HeadProductSketch(FitParams, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Explicit features of the conv + head kernel for rows ``[v, h]``; see the module docstring.

    ``head_combine="product"``: tensor-sketch features of
    ``K2(v, v') ((1 - w) + w <h, h'>)``; ``"sum"``: ``[sqrt(1 - w) z(v), sqrt(w) h]``
    for ``(1 - w) K2(v, v') + w <h, h'>``, the two kernels of
    :func:`streamcov.stream.exact.combine_head_kernel`.

    Parameters
    ----------
    n_components : int, default=4096
        Width of the sketch (the output of the product; the sum's output has
        ``n_rff + n_head`` columns).
    sigma : float, default=1.0
        Bandwidth of K2 on ``v``, ``exp(-||v - v'||^2 / (2 sigma^2))``.
    n_head : int, default=1280
        The last ``n_head`` input columns are the head ``h`` (unit vectors).
    head_weight : float in [0, 1], default=1.0
        ``w``; 1 is paper 004's product (the head alone for the sum), 0 the Gaussian kernel alone.
    head_combine : {"product", "sum"}, default="product"
    n_rff : int or None, default=None
        Random Fourier features of K2 before sketching (None: ``n_components``).
    block_size : int, default=4096
        Input columns per regenerated block of frequencies (see
        :class:`~streamcov.features.GaussianRandomFeatures`).
    random_state : int, RandomState instance or None, default=None

    Attributes
    ----------
    rff_ : GaussianRandomFeatures
        The Fourier features of K2 on ``v``.
    hash_z_, sign_z_ : ndarray (n_rff,)
    hash_a_, sign_a_ : ndarray (n_head + 1,)
        Count-sketch hashes (int64) and signs (+-1.0) of z and of a(h).
    n_features_in_ : int
    """

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "sigma": [Interval(Real, 0, None, closed="neither")],
        "n_head": [Interval(Integral, 1, None, closed="left")],
        "head_weight": [Interval(Real, 0, 1, closed="both")],
        "head_combine": [StrOptions({"product", "sum"})],
        "n_rff": [Interval(Integral, 1, None, closed="left"), None],
        "block_size": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(self, *, n_components=4096, sigma=1.0, n_head=1280, head_weight=1.0, head_combine="product",
                 n_rff=None, block_size=4096, random_state=None):
        self.n_components = n_components
        self.sigma = sigma
        self.n_head = n_head
        self.head_weight = head_weight
        self.head_combine = head_combine
        self.n_rff = n_rff
        self.block_size = block_size
        self.random_state = random_state

    @property
    def n_output(self) -> int:
        """Width of the output, known before fitting: ``n_components`` (product) or ``n_rff + n_head`` (sum)."""
        if self.head_combine == "sum":
            return int(self.n_rff or self.n_components) + int(self.n_head)
        return int(self.n_components)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Draw the Fourier features and the hashes; only the width of X is used."""
        from ._gaussian import GaussianRandomFeatures

        X = validate_data(self, X, dtype=[np.float64, np.float32])
        p = X.shape[1] - int(self.n_head)
        if p < 1:
            raise ValueError(f"X has {X.shape[1]} feature(s): it needs at least one before the {self.n_head} of "
                             f"the head")
        rng = check_random_state(self.random_state)
        n_rff = int(self.n_rff or self.n_components)
        self.rff_ = GaussianRandomFeatures(n_components=n_rff, sigma=float(self.sigma),
                                           block_size=int(self.block_size),
                                           random_state=int(rng.randint(np.iinfo(np.int32).max))).fit(X[:1, :p])
        d = int(self.n_components)
        self.hash_z_ = rng.randint(d, size=n_rff).astype(np.int64)
        self.sign_z_ = rng.choice([-1.0, 1.0], size=n_rff)
        self.hash_a_ = rng.randint(d, size=int(self.n_head) + 1).astype(np.int64)
        self.sign_a_ = rng.choice([-1.0, 1.0], size=int(self.n_head) + 1)
        self._n_features_out = self.n_output
        self._remember_params()
        return self

    def head_factor(self, H) -> np.ndarray:
        """``a(h) = [sqrt(1 - w), sqrt(w) h]`` for the rows of ``H``, float64."""
        w = float(self.head_weight)
        H = np.asarray(H, dtype=np.float64)
        return np.hstack([np.full((len(H), 1), np.sqrt(1.0 - w)), np.sqrt(w) * H])

    def _count_sketch(self, X, hashes, signs):
        from scipy.sparse import csr_matrix

        S = csr_matrix((signs, (np.arange(len(hashes)), hashes)), shape=(len(hashes), int(self.n_components)))
        return np.asarray(S.T.dot(X.T).T)

    def transform(self, X):
        """Features (n_samples, n_features_out); float32 stays float32."""
        from .._config import blas_threads

        check_is_fitted(self)
        self._check_params_unchanged()
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        p = X.shape[1] - int(self.n_head)
        with blas_threads(1):   # the same sums on every worker
            Z = self.rff_.transform(X[:, :p]).astype(np.float64)
            if self.head_combine == "sum":
                w = float(self.head_weight)
                out = np.hstack([np.sqrt(1.0 - w) * Z, np.sqrt(w) * X[:, p:].astype(np.float64)])
                return out.astype(X.dtype, copy=False)
            A = self.head_factor(X[:, p:])
            d = int(self.n_components)
            fz = np.fft.rfft(self._count_sketch(Z, self.hash_z_, self.sign_z_), axis=1)
            fa = np.fft.rfft(self._count_sketch(A, self.hash_a_, self.sign_a_), axis=1)
            out = np.fft.irfft(fz * fa, n=d, axis=1)
        return out.astype(X.dtype, copy=False)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


__all__ = ["HeadProductSketch"]
