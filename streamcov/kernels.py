"""Squared distances and the one Gaussian kernel of streamcov, with one bandwidth convention.

Everywhere in streamcov the Gaussian kernel is

    k(x, y) = exp(-||x - y||^2 / (2 sigma^2))          (paper 000, eq. (1))

and every ``sigma`` (feature maps, exact SVM, studies) has this meaning.
Other conventions are converted where they enter, and only there:

* ``gamma`` of scikit-learn (``RBFSampler``, ``SVC``) and of the Twin GPs of
  paper 003, ``exp(-gamma ||x - y||^2)``: :func:`gamma_from_sigma`,
  :func:`sigma_from_gamma`;
* paper 004's ``exp(-||x - y||^2 / s^2)`` (eqs. (30)-(31)), in which the image
  pipeline files write ``sigma1`` (kernel K1 on pixel features) and
  ``sigma2`` (kernel K2 on Log-HS distances): :func:`sigma_from_paper004`.
"""
from __future__ import annotations

import math

import numpy as np


def gamma_from_sigma(sigma: float) -> float:
    """``gamma = 1 / (2 sigma^2)``: exp(-gamma d^2) = exp(-d^2 / (2 sigma^2))."""
    return 1.0 / (2.0 * float(sigma) ** 2)


def sigma_from_gamma(gamma: float) -> float:
    """Inverse of :func:`gamma_from_sigma`."""
    return math.sqrt(1.0 / (2.0 * float(gamma)))


def sigma_from_paper004(s: float) -> float:
    """``sigma = s / sqrt(2)``: exp(-d^2 / s^2) (paper 004) = exp(-d^2 / (2 sigma^2))."""
    return float(s) / math.sqrt(2.0)


def squared_distances(A, B=None) -> np.ndarray:
    """Pairwise squared Euclidean distances between the rows of ``A`` and ``B`` (``A`` when None).

    Through the Gram matrix, one BLAS call; clipped at 0 against round-off,
    with an exact zero diagonal and exact symmetry when ``B`` is None.
    float32 inputs (long log-operator vectors) use single-precision
    products with float64 norms: their rounding is far below the distances
    that matter. The result is float64.
    """
    A = np.asarray(A)
    if A.ndim != 2:
        raise ValueError(f"vectors must be 2-D (N, p), got shape {A.shape}")
    same = B is None
    B = A if same else np.asarray(B)
    if B.ndim != 2 or B.shape[1] != A.shape[1]:
        raise ValueError(f"vector sets have shapes {A.shape} and {B.shape}; lengths must match")
    dt = np.float32 if A.dtype == np.float32 and B.dtype == np.float32 else np.float64
    a = A.astype(dt, copy=False)
    b = a if same else B.astype(dt, copy=False)
    g = (a @ b.T).astype(np.float64, copy=False)
    na = np.einsum("ij,ij->i", a, a, dtype=np.float64)
    nb = na if same else np.einsum("ij,ij->i", b, b, dtype=np.float64)
    d2 = na[:, None] + nb[None, :] - 2.0 * g
    np.maximum(d2, 0.0, out=d2)
    if same:
        np.fill_diagonal(d2, 0.0)
        d2 = 0.5 * (d2 + d2.T)
    return d2


def distances(A, B=None) -> np.ndarray:
    """Pairwise Euclidean distances: the square root of :func:`squared_distances`."""
    return np.sqrt(squared_distances(A, B))


def gaussian_kernel(d2, sigma: float) -> np.ndarray:
    """``exp(-d2 / (2 sigma^2))`` of squared distances ``d2`` (paper 000, eq. (1)).

    Parameters
    ----------
    d2 : array
        Squared distances (>= 0), e.g. from :func:`squared_distances`.
    sigma : float
        Bandwidth, > 0.
    """
    sigma = float(sigma)
    if not np.isfinite(sigma) or sigma <= 0:
        raise ValueError(f"sigma must be a finite number > 0, got {sigma!r}")
    d2 = np.asarray(d2, dtype=np.float64)
    return np.exp(-d2 / (2.0 * sigma ** 2))


def median_distance(D) -> float:
    """Median of the off-diagonal entries of a symmetric distance matrix (1 if it is 0).

    The median heuristic: kernel bandwidths of the image pipelines are
    multiples of it, measured on training rows.
    """
    D = np.asarray(D)
    iu = np.triu_indices(len(D), 1)
    med = float(np.median(D[iu]))
    return med if med > 0 else 1.0


__all__ = ["distances", "gamma_from_sigma", "gaussian_kernel", "median_distance", "sigma_from_gamma",
           "sigma_from_paper004", "squared_distances"]
