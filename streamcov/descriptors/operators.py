"""Distances between covariance matrices and covariance operators (paper 004).

An image is a data matrix ``x`` of m pixels by n features (rows are pixels
here, the transpose of the paper's n x m convention). Its covariance
operator for a kernel K1 with feature map Phi is ``C = (1/m) Phi(x) J_m Phi(x)^*``
(eq. (12)).

* Approximate covariance operator (eq. (20)): Phi replaced by the 2D-dimensional
  random (eq. (29)) or quasi-random (appendix C) Fourier feature map of the
  Gaussian kernel ``K1(x, y) = exp(-||x - y||^2 / (2 sigma^2))``. Every
  ``sigma`` here follows streamcov's one convention
  (:mod:`streamcov.kernels`); paper 004 writes ``exp(-||x - y||^2 / s^2)``,
  i.e. ``s = sqrt(2) sigma`` (:func:`streamcov.kernels.sigma_from_paper004`).
* Approximate Log-HS distance (eq. (21)):
  ``||log(C_x + gamma I) - log(C_y + mu I)||_F``; it converges to the exact
  Log-HS distance as D grows iff gamma = mu (Theorems 1 and 2).
* Exact Log-HS distance (eq. (16), closed form of Minh et al., NIPS 2014, through
  m x m Gram matrices, as in the proof of Theorem 2): with
  ``A^*A = J K[x] J / (gamma m) = U diag(s) U^T``,

      d^2 = sum log(1 + s_x)^2 + sum log(1 + s_y)^2
            - 2 ||P_x K[x, y] P_y^T||_F^2 + (log gamma - log mu)^2,
      P = diag(sqrt(log(1 + s) / s)) U^T J / sqrt(gamma m).

  Eigenvalues below ``rtol * max(s)`` are dropped: their eigenvectors lie in
  the kernel of ``Phi(x) J`` up to rounding, so they contribute nothing.
* Hilbert-Schmidt distance via Gram matrices (appendix B, eq. (59)).
* Between region covariances: E (eq. (1)), LogE (eq. (9)) and the symmetric
  Stein divergence.

The Gaussian kernel K2 on these distances (eq. (31)) is
:func:`streamcov.kernels.gaussian_kernel` of their squares.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from .._config import blas_threads

from .. import linalg
from .._config import map_threads, progress_bar, run_parallel
from .._kernels import logHS as _kl
from ..errors import NotSPDError
from ..kernels import _bandwidth, distances, gaussian_kernel, squared_distances


# --------------------------------------------------------------------- checks
def _check_positive(value, name):
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {value!r}") from None
    if not np.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return v


def _check_features(x, name="features", n_features=None) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D (pixels x features), got shape {x.shape}")
    if x.shape[0] < 2 or x.shape[1] < 1:
        raise ValueError(f"{name} needs at least 2 pixels and 1 feature, got shape {x.shape}")
    if n_features is not None and x.shape[1] != n_features:
        raise ValueError(f"{name} has {x.shape[1]} features per pixel, expected {n_features}")
    if not np.isfinite(x).all():
        r, c = np.argwhere(~np.isfinite(x))[0]
        raise ValueError(f"{name} contains a non-finite value at row {r}, column {c}")
    return np.ascontiguousarray(x)


def _check_stack(mats, name) -> np.ndarray:
    return linalg._check_stack(mats, name)[0]


def _pair_stacks(a, b, name_a, name_b):
    a = _check_stack(a, name_a)
    b = a if b is None else _check_stack(b, name_b)
    if a.shape[1:] != b.shape[1:]:
        raise ValueError(f"{name_a} matrices are {a.shape[1]}x{a.shape[2]} but {name_b} are "
                         f"{b.shape[1]}x{b.shape[2]}")
    return a, b


# ------------------------------------------------------- Fourier feature maps
def fourier_frequencies(n_features: int, D: int = 200, sigma: float = 1.0, kind: str = "random",
                        random_state=None) -> np.ndarray:
    """Frequencies W (n_features, D) of the Gaussian kernel exp(-||x-y||^2 / (2 sigma^2)).

    Parameters
    ----------
    n_features : int
        Input dimension n.
    D : int
        Number of frequencies; the feature map has 2D components (eq. (29)).
    sigma : float
        Bandwidth of K1; the spectral density is N(0, sigma^-2 I) (eq. (30),
        with paper 004's bandwidth ``sqrt(2) sigma``).
    kind : {"random", "halton"}
        ``random``: Monte Carlo draws (random Fourier features, eq. (29)).
        ``halton``: quasi-random features (appendix C, eqs. (60)-(61), (69)):
        the Halton sequence in [0, 1]^n, first point (the origin) skipped,
        mapped by the inverse Gaussian CDF ``(sqrt(2) / sigma) erfinv(2t - 1)``.
        Deterministic; ``random_state`` is ignored.
    random_state : int, RandomState or None
        Seed for ``kind="random"``.
    """
    if int(n_features) != n_features or n_features < 1:
        raise ValueError(f"n_features must be a positive integer, got {n_features!r}")
    if int(D) != D or D < 1:
        raise ValueError(f"D must be a positive integer, got {D!r}")
    _check_positive(sigma, "sigma")
    sigma = _bandwidth(sigma, "sigma")   # 1e-300 drew frequencies of 1e300: features of nothing
    n_features, D = int(n_features), int(D)
    scale = 1.0 / sigma
    if kind == "random":
        from sklearn.utils import check_random_state
        rng = check_random_state(random_state)
        return rng.standard_normal((n_features, D)) * scale
    if kind == "halton":
        from scipy.special import ndtri
        from scipy.stats import qmc
        t = qmc.Halton(d=n_features, scramble=False).random(D + 1)[1:]
        return np.ascontiguousarray(ndtri(t).T * scale)
    raise ValueError(f"kind must be 'random' or 'halton', got {kind!r}")


def _check_frequencies(W) -> np.ndarray:
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2:
        raise ValueError(f"W must be 2-D (n_features, D), got shape {W.shape}")
    if not np.isfinite(W).all():   # a NaN frequency made the whole operator NaN, without a word
        raise ValueError("W: the frequencies hold NaN or infinity; draw them with fourier_frequencies")
    return W


def fourier_features(features, W) -> np.ndarray:
    """Approximate feature map (eq. (29)): ``[cos(x W), sin(x W)] / sqrt(D)``, shape (m, 2D)."""
    W = _check_frequencies(W)
    x = _check_features(features, n_features=W.shape[0])
    return np.concatenate(_cos_sin(x @ W), axis=1) / np.sqrt(W.shape[1])


def approx_covariance_operator(features, W, block: int = 8192) -> np.ndarray:
    """Approximate covariance operator ``(1/m) Phi_D(x) J_m Phi_D(x)^T`` (eq. (20)).

    Parameters
    ----------
    features : array (m, n)
        Pixel features of one image.
    W : array (n, D)
        Frequencies from :func:`fourier_frequencies`.
    block : int
        Pixels per block: memory stays O(block * D) however large the image.

    Returns
    -------
    ndarray (2D, 2D)
    """
    W = _check_frequencies(W)
    x = _check_features(features, n_features=W.shape[0])
    return _approx_cov(x, W, int(block))


def _cos_sin(z):
    """cos and sin of a block of phases (vectorized kernel; numpy beyond its range)."""
    from .._kernels.fourier import sincos_rows

    z = np.ascontiguousarray(z, dtype=np.float64)
    co, si = np.empty_like(z), np.empty_like(z)
    if not sincos_rows(z, co, si):   # huge or NaN phases: numpy reduces (or propagates) them
        np.cos(z, out=co)
        np.sin(z, out=si)
    return co, si


def _approx_cov(x, W, block=8192):
    # Phi = [cos, sin] is never formed: its Gram matrix is assembled from the
    # cos/cos, cos/sin and sin/sin blocks (3 of the 4 products), and the 1/D
    # scale is applied once to the sums instead of to every pixel's features.
    m = x.shape[0]
    D = W.shape[1]
    cc = np.zeros((D, D))
    cs = np.zeros((D, D))
    ss = np.zeros((D, D))
    mu = np.zeros(2 * D)
    for a in range(0, m, block):
        co, si = _cos_sin(x[a:a + block] @ W)
        cc += co.T @ co
        cs += co.T @ si
        ss += si.T @ si
        mu[:D] += co.sum(axis=0)
        mu[D:] += si.sum(axis=0)
    mu /= m
    c = np.block([[cc, cs], [cs.T, ss]]) / (m * D) - np.outer(mu, mu) / D
    return 0.5 * (c + c.T)


def approx_covariance_operators(feature_list, W, progress: bool = False) -> np.ndarray:
    """:func:`approx_covariance_operator` for a list of images, stacked (N, 2D, 2D)."""
    W = np.asarray(W, dtype=np.float64)
    feature_list = list(feature_list)
    out = np.empty((len(feature_list), 2 * W.shape[1], 2 * W.shape[1]))
    with progress_bar(enumerate(feature_list), progress, total=len(feature_list), desc="covariance operators") as it:
        for i, f in it:
            out[i] = _approx_cov(_check_features(f, f"features of image {i}", W.shape[0]), W)
    return out


# ---------------------------------------------------------- log and vectors
def regularized_log(covs, gamma: float) -> np.ndarray:
    """``log(C + gamma I)`` of a matrix or a stack of symmetric PSD matrices."""
    gamma = _check_positive(gamma, "gamma")
    a = np.asarray(covs, dtype=np.float64)
    c = _check_stack(a, "covs")
    out = linalg.spd_logm(c + gamma * np.eye(c.shape[1]))
    return out[0] if a.ndim == 2 else out


def approx_log_hs_distance(cov_x, cov_y, gamma: float, mu: float | None = None) -> float:
    """Approximate Log-HS distance (eq. (21)) between two approximate covariance operators.

    ``||log(C_x + gamma I_D) - log(C_y + mu I_D)||_F``; ``mu`` defaults to
    ``gamma``, the only choice for which it approximates the exact Log-HS
    distance (Theorem 2; with gamma != mu it diverges with D, Theorem 1).
    """
    mu = gamma if mu is None else _check_positive(mu, "mu")   # it was named gamma in the message
    cx = _check_stack(cov_x, "cov_x")
    cy = _check_stack(cov_y, "cov_y")
    if cx.shape != cy.shape or cx.shape[0] != 1:
        raise ValueError(f"cov_x and cov_y must be two matrices of one shape, got {np.shape(cov_x)} "
                         f"and {np.shape(cov_y)}")
    lx = regularized_log(cx[0], gamma)
    ly = regularized_log(cy[0], mu)
    return float(np.linalg.norm(lx - ly))


# -------------------------------------------- distances of region covariances
def euclidean_distances(covs_a, covs_b=None) -> np.ndarray:
    """E: ``||A - B||_F`` (eq. (1)) for all pairs, shape (Na, Nb)."""
    a, b = _pair_stacks(covs_a, covs_b, "covs_a", "covs_b")
    va = linalg.sym_vec(a)
    vb = va if covs_b is None else linalg.sym_vec(b)
    return distances(va, None if covs_b is None else vb)


def log_euclidean_distances(covs_a, covs_b=None, gamma: float = 1e-3) -> np.ndarray:
    """LogE: ``||log(A + gamma I) - log(B + gamma I)||_F`` (eq. (9)) for all pairs."""
    a, b = _pair_stacks(covs_a, covs_b, "covs_a", "covs_b")
    gamma = _check_positive(gamma, "gamma")
    va = linalg.log_vectors(a, gamma, relative=True, what="covs_a")
    if covs_b is None:
        return distances(va)
    return distances(va, linalg.log_vectors(b, gamma, relative=True, what="covs_b"))


def stein_divergences(covs_a, covs_b=None, gamma: float = 1e-3) -> np.ndarray:
    """Symmetric Stein divergence of the regularized matrices, all pairs.

    ``S(A, B) = log det((A + B) / 2) - (log det A + log det B) / 2`` with
    ``A = C_a + gamma I`` (Sra; Cherian et al. [11]). A divergence, not a
    metric: ``sqrt(S)`` is a metric.
    """
    gamma = _check_positive(gamma, "gamma")
    a, b = _pair_stacks(covs_a, covs_b, "covs_a", "covs_b")
    eye = np.eye(a.shape[1])
    a = np.ascontiguousarray(a + gamma * eye)
    b = a if covs_b is None else np.ascontiguousarray(b + gamma * eye)
    lda = np.empty(len(a))
    run_parallel(_kl.logdets, a, lda)  # numba Cholesky, no BLAS
    ldb = lda if covs_b is None else np.empty(len(b))
    if covs_b is not None:
        run_parallel(_kl.logdets, b, ldb)
    for name, ld in (("covs_a", lda), ("covs_b", ldb)):
        if not np.isfinite(ld).all():
            i = int(np.flatnonzero(~np.isfinite(ld))[0])
            raise NotSPDError(f"{name}: matrix {i} + gamma I is not positive definite; "
                                   f"increase gamma (now {gamma})")
    out = np.empty((len(a), len(b)))
    run_parallel(_kl.pairwise_stein, a, b, lda, ldb, out)
    return out


# ----------------------------------------------------- Gram-matrix distances
def gaussian_gram(x, y=None, sigma: float = 1.0) -> np.ndarray:
    """``K1[x, y]_ij = exp(-||x_i - y_j||^2 / (2 sigma^2))`` for pixel feature matrices."""
    sigma = _check_positive(sigma, "sigma")
    x = _check_features(x, "x")
    y = x if y is None else _check_features(y, "y", x.shape[1])
    return _gram(x, y, sigma)


def _gram(x, y, sigma):
    return gaussian_kernel(squared_distances(x, None if y is x else y), sigma)


def _double_center(k):
    k = k - k.mean(axis=0, keepdims=True)
    return k - k.mean(axis=1, keepdims=True)


def hs_distance(x, y, sigma: float = 1.0) -> float:
    """Hilbert-Schmidt distance ``||C_Phi(x) - C_Phi(y)||_HS`` via Gram matrices (eq. (59)).

    Exact for the Gaussian kernel K1 of bandwidth ``sigma``; the images may
    have different pixel counts (the 1/m^2 factors become 1/(m_x m_y)).
    """
    return float(pairwise_hs([x], [y], sigma)[0, 0])


def pairwise_hs(feats_a, feats_b=None, sigma: float = 1.0, n_jobs: int | None = None) -> np.ndarray:
    """HS distances (eq. (59)) between all pairs of images given as feature matrices."""
    sigma = _check_positive(sigma, "sigma")
    fa = [_check_features(f, f"features of image {i}") for i, f in enumerate(feats_a)]
    same = feats_b is None
    fb = fa if same else [_check_features(f, f"features of image {i} (second set)")
                          for i, f in enumerate(feats_b)]
    _same_width(fa, fb)
    # ||J K J||_F^2 / m^2 = ||C||_HS^2
    def self_term(f):
        return np.sum(_double_center(_gram(f, f, sigma)) ** 2) / len(f) ** 2

    sa = np.array(list(map_threads(self_term, fa, n_jobs)))
    sb = sa if same else np.array(list(map_threads(self_term, fb, n_jobs)))

    def row(i):
        x = fa[i]
        r = np.zeros(len(fb))
        for j in range(i + 1 if same else 0, len(fb)):
            y = fb[j]
            cross = np.sum(_double_center(_gram(x, y, sigma)) ** 2) / (len(x) * len(y))
            r[j] = np.sqrt(max(sa[i] + sb[j] - 2.0 * cross, 0.0))
        return r

    out = np.stack(list(map_threads(row, range(len(fa)), n_jobs)))
    if same:
        out = np.triu(out, 1)
        out = out + out.T
    return out


def _same_width(fa, fb):
    widths = {f.shape[1] for f in fa} | {f.shape[1] for f in fb}
    if len(widths) > 1:
        raise ValueError(f"images have different numbers of features per pixel: {sorted(widths)}")


@dataclass
class LogHSFactor:
    """Per-image part of the exact Log-HS distance (see module docstring).

    ``P`` (r, m): ``diag(sqrt(log(1+s)/s)) U^T J / sqrt(gamma m)`` over the r
    kept eigenvalues; ``self_term``: ``sum log(1 + s)^2``.
    """

    features: np.ndarray
    P: np.ndarray
    self_term: float
    log_gamma: float
    eigenvalues: np.ndarray


def log_hs_factor(x, sigma: float = 1.0, gamma: float = 1e-3, rtol: float = 1e-12) -> LogHSFactor:
    """Eigendecomposition of ``J K1[x] J / (gamma m)`` for the exact Log-HS distance."""
    sigma = _check_positive(sigma, "sigma")
    gamma = _check_positive(gamma, "gamma")
    x = _check_features(x, "x")
    return _factor(x, sigma, gamma, float(rtol))


def _factor(x, sigma, gamma, rtol):
    m = x.shape[0]
    kc = _double_center(_gram(x, x, sigma)) / (gamma * m)
    s, u = np.linalg.eigh(0.5 * (kc + kc.T))
    keep = s > max(rtol * s[-1], 0.0) if s[-1] > 0 else np.zeros_like(s, dtype=bool)
    s, u = s[keep], u[:, keep]
    g = np.log1p(s) / s
    ut = u.T - u.sum(axis=0)[:, None] / m          # U^T J
    P = np.sqrt(g)[:, None] * ut / np.sqrt(gamma * m)
    return LogHSFactor(features=x, P=np.ascontiguousarray(P), self_term=float(np.sum(np.log1p(s) ** 2)),
                       log_gamma=float(np.log(gamma)), eigenvalues=s)


def log_hs_distance(x, y, sigma: float = 1.0, gamma: float = 1e-3, mu: float | None = None,
                    rtol: float = 1e-12) -> float:
    """Exact Log-HS distance (eq. (16)) between the covariance operators of two images.

    ``||log(C_Phi(x) + gamma I) - log(C_Phi(y) + mu I)||_eHS`` for the Gaussian
    kernel K1 with bandwidth ``sigma``; closed form through m x m Gram
    matrices (module docstring). ``mu`` defaults to ``gamma``.
    """
    mu = gamma if mu is None else mu
    with blas_threads(1):
        fx = log_hs_factor(x, sigma, gamma, rtol)
        fy = log_hs_factor(y, sigma, mu, rtol)
    if fx.features.shape[1] != fy.features.shape[1]:
        raise ValueError(f"x has {fx.features.shape[1]} features per pixel but y has {fy.features.shape[1]}")
    return float(_loghs_pair(fx, fy, _check_positive(sigma, "sigma")))


def _loghs_pair(fx: LogHSFactor, fy: LogHSFactor, sigma: float) -> float:
    k = _gram(fx.features, fy.features, sigma)
    cross = np.sum((fx.P @ k @ fy.P.T) ** 2)
    d2 = fx.self_term + fy.self_term - 2.0 * cross + (fx.log_gamma - fy.log_gamma) ** 2
    return np.sqrt(max(d2, 0.0))


def pairwise_log_hs(feats_a, feats_b=None, sigma: float = 1.0, gamma: float = 1e-3,
                    rtol: float = 1e-12, progress: bool = False, n_jobs: int | None = None) -> np.ndarray:
    """Exact Log-HS distances between all pairs of images (feature matrices or factors).

    Cost O(m^3) per image and O(m^2 (n + r)) per pair, r the number of kept
    eigenvalues: use only for small sets of images with few pixels. Rows run in
    ``n_jobs`` threads (default: the available cores).
    """
    sigma = _check_positive(sigma, "sigma")
    gamma = _check_positive(gamma, "gamma")
    rtol = float(rtol)

    def factors(feats, label):
        feats = list(feats)
        if not feats:   # numpy's "need at least one array to stack"
            raise ValueError(f"{'feats_b' if label else 'feats_a'}: no images")
        checked = [f if isinstance(f, LogHSFactor) else
                   _check_features(f, f"features of image {i}{label}") for i, f in enumerate(feats)]
        return list(map_threads(lambda f: f if isinstance(f, LogHSFactor) else
                               _factor(f, sigma, gamma, rtol), checked, n_jobs))

    fa = factors(feats_a, "")
    same = feats_b is None
    fb = fa if same else factors(feats_b, " (second set)")
    _same_width([f.features for f in fa], [f.features for f in fb])

    def row(i):
        r = np.zeros(len(fb))
        for j in range(i + 1 if same else 0, len(fb)):
            r[j] = _loghs_pair(fa[i], fb[j], sigma)
        return r

    with progress_bar(map_threads(row, range(len(fa)), n_jobs), progress, total=len(fa), desc="exact Log-HS") as it:
        out = np.stack(list(it))
    if same:
        out = np.triu(out, 1)
        out = out + out.T
    return out
