"""Polynomial kernel transformations learned by maximizing HSIC (paper 003).

Tonde & Elgammal expand a target kernel as a non-negative combination of
polynomials applied entry-wise to a normalized base kernel matrix,

    phi(K) = sum_i alpha_i P_i(K),    psi(G) = sum_j beta_j P_j(G),

with ``P_i(t) = t**i`` (monomial / Schoenberg basis, Theorem 2.1, eq. (1)) or
the Gegenbauer polynomials ``G_i^w(t)`` (Theorem 2.2, eq. (2)-(4)). The
coefficients maximize the empirical HSIC (eq. (11)) between the transformed
input and output kernels under ``||alpha|| = ||beta|| = 1`` (eq. (12)-(16));
the maximizer is the top left/right singular pair of the matrix
``C_ij = HSIC(K^(i), G^(j))`` (Theorem 4.1).

Everything here is dense numpy (BLAS-bound); the cost of :func:`hsic_matrix`
is ``O((d1 + 1) (d2 + 1) m^2)`` for ``m`` samples, which is why the estimator
fits on at most ``max_samples`` rows.
"""
from __future__ import annotations

import itertools
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.model_selection import KFold
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from .._config import check_memory
from ..kernels import (_alignment, _bandwidth, _center, _real, center_kernel, gaussian_kernel, sigma_from_gamma,
                       squared_distances)

BASES = ("monomial", "gegenbauer")

# Relative size below which a negative singular-vector entry is rounding noise
# (the degree-0 rows of C are zero up to cancellation error).
_NEG_TOL = 1e-8


# --------------------------------------------------------------------------
# base kernels
# --------------------------------------------------------------------------
def rbf_kernel(A, B=None, *, gamma: float) -> np.ndarray:
    """Gaussian kernel ``exp(-gamma ||a - b||^2)``, normalized so ``k(x, x) = 1``.

    This is the base kernel of section 6 of paper 003, written with paper
    003's ``gamma``; it is :func:`streamcov.kernels.gaussian_kernel` with
    ``sigma = 1 / sqrt(2 gamma)``.
    """
    A = np.asarray(A, dtype=np.float64)
    B = None if B is None else np.asarray(B, dtype=np.float64)
    if A.ndim != 2 or (B is not None and (B.ndim != 2 or A.shape[1] != B.shape[1])):
        raise ValueError(
            f"rbf_kernel needs two 2-D arrays with the same number of columns, "
            f"got shapes {A.shape} and {None if B is None else B.shape}")
    if not (np.isfinite(gamma) and gamma > 0):
        raise ValueError(f"gamma must be a finite positive number, got {gamma!r}")
    return gaussian_kernel(squared_distances(A, B), sigma_from_gamma(gamma))


def median_heuristic_gamma(X, *, max_samples: int = 1000, random_state=None, name: str = "X") -> float:
    """Bandwidth by the median heuristic: ``gamma = 1 / (2 median ||x_i - x_j||^2)``.

    At most ``max_samples`` rows (chosen at random beyond that) enter the
    median, so the cost stays ``O(max_samples^2)``. When more than half the
    pairs coincide the median is zero; the median of the non-zero distances is
    used instead, and ``gamma = 1`` when all rows are equal (any bandwidth then
    gives the same all-ones kernel). The distances are taken on the centred
    rows divided by their largest entry, so that rows near 1e-170 or 1e150 are
    measured (their squared distances underflowed to 0, giving gamma = 1 and
    a constant kernel, or overflowed); a gamma that float64 cannot hold is
    refused naming ``name``, the data it was measured on.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[:, None]
    n = X.shape[0]
    if n < 2:
        raise ValueError(f"the median heuristic needs at least 2 samples, got {n}")
    if n > max_samples:
        rng = check_random_state(random_state)
        X = X[rng.choice(n, max_samples, replace=False)]
    if not np.isfinite(X).all():
        raise ValueError(f"the median heuristic: {name} holds NaN or infinite values")
    # scaled by the largest entry, then centred (distances do not see a shift): the second scale is then the
    # spread, not the offset; two factors, so that neither the mean nor the scale overflows near 1e308
    s0 = float(np.abs(X).max()) if X.size else 0.0
    if s0 == 0.0:
        return 1.0
    X = X / s0
    X = X - X.mean(axis=0)
    s1 = float(np.abs(X).max())
    if s1 == 0.0:
        return 1.0
    d2 = squared_distances(X / s1)[np.triu_indices(X.shape[0], k=1)]
    med = float(np.median(d2))
    if med <= 0.0:
        pos = d2[d2 > 0]
        if pos.size == 0:
            return 1.0
        med = float(np.median(pos))
    with np.errstate(over="ignore", under="ignore"):
        gamma = 1.0 / (2.0 * med) / s1 / s1 / s0 / s0
        apart = s0 * (s1 * np.sqrt(med))
    try:   # the bandwidth check every kernel of streamcov makes: its square a normal float
        return _bandwidth(gamma, "gamma")
    except ValueError:
        raise ValueError(f"the median heuristic on {name}: its rows lie about {apart:.3g} apart, beyond "
                         f"the range of a Gaussian kernel's bandwidth in float64; scale {name} (e.g. standardize it) "
                         f"or give its gamma") from None


# --------------------------------------------------------------------------
# HSIC, eq. (11)
# --------------------------------------------------------------------------
def empirical_hsic(K, G) -> float:
    """Empirical HSIC of eq. (11): ``(m - 1)^-2 trace(K H G H)``.

    ``trace(K H G H) = <H K H, G>_F`` (H is idempotent), which costs O(m^2)
    instead of the O(m^3) of the matrix products.
    """
    K = np.asarray(K, dtype=np.float64)
    G = np.asarray(G, dtype=np.float64)
    if K.ndim != 2 or K.shape[0] != K.shape[1] or K.shape != G.shape:
        raise ValueError(
            f"empirical_hsic needs two square kernel matrices of the same shape, "
            f"got {K.shape} and {G.shape}")
    m = K.shape[0]
    if m < 2:
        raise ValueError("empirical_hsic needs at least 2 samples")
    return float(np.vdot(center_kernel(K), G)) / (m - 1) ** 2


def kernel_alignment(K, G) -> float:
    """Centred kernel alignment ``HSIC(K, G) / sqrt(HSIC(K, K) HSIC(G, G))``.

    Scale-free version of eq. (11), used to compare degrees on held-out data
    (raw HSIC grows with the scale of the transformed kernels). Returns 0 when
    either centred kernel vanishes.
    """
    # the alignment of streamcov.kernels (centered_alignment), 0 instead of an error for a vanishing kernel;
    # called for every degree and fold of the degree CV: no validation of the kernels built here
    K, G = np.asarray(K, dtype=np.float64), np.asarray(G, dtype=np.float64)
    if K.ndim != 2 or K.shape[0] != K.shape[1] or K.shape != G.shape:   # a reshape or an AxisError from numpy
        raise ValueError(f"kernel_alignment needs two square kernel matrices of the same shape, got {K.shape} and "
                         f"{G.shape}")
    with np.errstate(invalid="ignore", over="ignore"):   # a NaN or inf is refused below, in one line, not warned of
        Kc, Gc = _center(K), _center(G)
        a = _alignment(Kc, Gc)
    if not np.isfinite(np.vdot(Kc, Kc) * np.vdot(Gc, Gc) if a is None else a):   # NaN was an alignment of 0
        raise ValueError("kernel_alignment: the kernels hold NaN or infinity")
    return 0.0 if a is None else a


# --------------------------------------------------------------------------
# polynomial bases
# --------------------------------------------------------------------------
class NonFiniteBasisError(ValueError):
    """The polynomial basis of a kernel transformation overflows float64 (a Gegenbauer weight of 1e300 makes
    ``G_2`` about 1e600): the settings, not the data, are to change."""


def _check_basis(basis, weight, name="weight"):
    """The basis, and the weight ``name`` when the basis reads it (monomials read none: any value is unused)."""
    if basis not in BASES:
        raise ValueError(f"basis must be one of {BASES}, got {basis!r}")
    if basis == "gegenbauer":
        if not isinstance(weight, Real) or not np.isfinite(weight) or weight <= -0.5 or weight == 0:
            raise ValueError(
                f"{name}: the Gegenbauer weight parameter must be a real number > -1/2 and != 0 "
                f"(paper 003, section 2.3; 0 makes every G_i, i >= 1, vanish), got {weight!r}")


def _grid_values(grid, name: str, expected: str, valid=lambda value: True) -> list:
    """The candidates of a grid, each ``valid``, or ValueError: a bare number was "'float' object is not
    iterable"."""
    try:
        values = list(grid)
    except TypeError:
        values = []
    if not values or not all(valid(v) for v in values):
        raise ValueError(f"{name} must be a non-empty sequence of {expected}, got {grid!r}")
    return values


#: the largest polynomial degree of a kernel transformation: the basis of degree D holds D + 1 matrices of
#: kernel values (a degree of 100000 asked for 75 GiB and was a MemoryError traceback), and powers of kernel
#: values in [0, 1] far beyond the grids of section 6.2.1 (up to 11) vanish
MAX_DEGREE = 100


def _check_grid(grid):
    _grid_values(grid, "degree_grid", f"integers in 1..{MAX_DEGREE}",
                 lambda d: not isinstance(d, bool) and isinstance(d, Integral) and 1 <= d <= MAX_DEGREE)


def _check_gamma(v, name: str) -> None:
    """A kernel's gamma: a positive real number, or None (the median heuristic); True was taken as 1.0."""
    if v is None:
        return
    g = _real(v)
    if g is None or not (np.isfinite(g) and g > 0):
        raise ValueError(f"{name} must be a positive number or None, got {v!r}")


def _check_degree(degree, name="degree"):
    if isinstance(degree, bool) or not isinstance(degree, Integral) or not 0 <= degree <= MAX_DEGREE:
        raise ValueError(f"{name} must be an integer in 0..{MAX_DEGREE}, got {degree!r}")


def _finite_values(t, name: str, what: str) -> np.ndarray:
    """``t`` as float64, or ValueError: a NaN or infinite kernel value gave NaN polynomials, silently."""
    t = np.asarray(t, dtype=np.float64)
    if not np.isfinite(t).all():
        bad = int(np.count_nonzero(~np.isfinite(t)))
        raise ValueError(f"{what}: {name} holds {bad} NaN or infinite value{'s' if bad > 1 else ''}; give finite "
                         f"kernel values (a normalized kernel has entries in [-1, 1])")
    return t


def _check_basis_values(out, t, degree, basis, weight, what: str) -> np.ndarray:
    """``out``, or NonFiniteBasisError when the polynomials of finite ``t`` left float64 (|t| > 1 or a large
    Gegenbauer weight at a high degree: inf, or NaN from inf - inf)."""
    if not np.isfinite(out).all():
        weights = f" with weight {weight:g}" if basis == "gegenbauer" else ""
        raise NonFiniteBasisError(
            f"{what}: the {basis} basis of degree {degree}{weights} overflows float64 for |t| up to "
            f"{np.abs(t).max():.4g}; give t in [-1, 1] (the values of a normalized kernel) or lower the degree"
            + (" or the weight" if basis == "gegenbauer" else ""))
    return out


def basis_polynomials(t, degree: int, basis: str = "monomial", weight: float = 0.5) -> np.ndarray:
    """Values ``P_0(t) .. P_degree(t)`` stacked along a new first axis.

    ``basis="monomial"``: ``t**i`` (eq. (1)). ``basis="gegenbauer"``: the
    recurrence of eq. (3)-(4), ``G_0 = 1``, ``G_1 = 2 w t``,
    ``G_{i+1} = 2 (w + i) / (i + 1) t G_i - (2 w + i - 1) / (i + 1) G_{i-1}``,
    which is the standard normalization of ``scipy.special.eval_gegenbauer``.
    """
    _check_basis(basis, weight)
    _check_degree(degree)
    t = _finite_values(t, "t", "basis_polynomials")
    return _check_basis_values(_polynomials(t, degree, basis, weight), t, degree, basis, weight,
                               "basis_polynomials")


def _polynomials(t, degree, basis, weight) -> np.ndarray:
    """:func:`basis_polynomials` of a float64 ``t`` without checks: inf or NaN where the values overflow."""
    check_memory(8.0 * (degree + 1) * t.size, f"a polynomial basis of degree {degree} over {t.size} kernel values",
                 "lower the degree or the number of training rows")
    out = np.empty((degree + 1,) + t.shape)
    out[0] = 1.0
    if degree == 0:
        return out
    with np.errstate(over="ignore", invalid="ignore"):   # an overflow is refused by the caller, in one line
        if basis == "monomial":
            out[1] = t
            for i in range(1, degree):
                np.multiply(out[i], t, out=out[i + 1])
        else:
            w = float(weight)
            out[1] = 2.0 * w * t
            for i in range(1, degree):
                a, b = 2.0 * (w + i) / (i + 1), (2.0 * w + i - 1) / (i + 1)
                out[i + 1] = a * t * out[i] - b * out[i - 1]
    return out


def basis_derivatives(t, degree: int, basis: str = "monomial", weight: float = 0.5) -> np.ndarray:
    """Derivatives ``P_i'(t)``, ``i = 0 .. degree``, stacked along the first axis.

    Gegenbauer: the recurrence of appendix B, eq. (23)-(24),
    ``H_0 = 0``, ``H_1 = 2 w``,
    ``H_{i+1} = 2 (w + i) / (i + 1) (t H_i + G_i) - (2 w + i - 1) / (i + 1) H_{i-1}``.
    """
    _check_basis(basis, weight)
    _check_degree(degree)
    t = _finite_values(t, "t", "basis_derivatives")
    out = np.zeros((degree + 1,) + t.shape)
    if degree == 0:
        return out
    G = _polynomials(t, degree, basis, weight) if basis == "gegenbauer" else None   # an overflow in G reaches out
    with np.errstate(over="ignore", invalid="ignore"):   # an overflow is refused below, in one line
        if basis == "monomial":
            out[1] = 1.0
            power = np.ones_like(t)
            for i in range(2, degree + 1):
                power = power * t
                out[i] = i * power
        else:
            w = float(weight)
            out[1] = 2.0 * w
            for i in range(1, degree):
                out[i + 1] = ((2.0 * (w + i) / (i + 1)) * (t * out[i] + G[i])
                              - ((2.0 * w + i - 1) / (i + 1)) * out[i - 1])
    return _check_basis_values(out, t, degree, basis, weight, "basis_derivatives")


class PolynomialKernelMap:
    """``phi(t) = sum_i coef[i] P_i(t)`` applied entry-wise to kernel values.

    Evaluation runs the basis recurrence once, accumulating the sum, so no
    ``(degree + 1) x shape`` stack is held in memory.

    Parameters
    ----------
    coef : array of shape (degree + 1,)
        Non-negative coefficients (``alpha`` or ``beta`` of eq. (14)-(15)).
    basis : {"monomial", "gegenbauer"}
    weight : float
        Gegenbauer weight parameter (ignored for monomials).
    """

    def __init__(self, coef, basis: str = "monomial", weight: float = 0.5):
        _check_basis(basis, weight)
        self.coef = np.asarray(coef, dtype=np.float64).ravel()
        if self.coef.size < 1:
            raise ValueError("coef must hold at least one coefficient")
        self.basis = basis
        self.weight = float(weight)

    @property
    def degree(self) -> int:
        return self.coef.size - 1

    @classmethod
    def identity(cls) -> "PolynomialKernelMap":
        """``phi(t) = t``: no transformation."""
        return cls(identity_coef(1), "monomial")

    def __call__(self, t) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        c = self.coef
        if self.basis == "monomial":
            out = np.full(t.shape, c[-1])
            for ci in c[-2::-1]:  # Horner
                out *= t
                out += ci
            return out
        w = self.weight
        prev = np.ones_like(t)
        out = c[0] * prev
        if self.degree == 0:
            return out
        cur = 2.0 * w * t
        out += c[1] * cur
        for i in range(1, self.degree):
            nxt = (2.0 * (w + i) / (i + 1)) * t * cur - ((2.0 * w + i - 1) / (i + 1)) * prev
            out += c[i + 1] * nxt
            prev, cur = cur, nxt
        return out

    def derivative(self, t) -> np.ndarray:
        """``phi'(t)`` (appendix B of paper 003 for the Gegenbauer basis)."""
        t = np.asarray(t, dtype=np.float64)
        c = self.coef
        d = self.degree
        if d == 0:
            return np.zeros_like(t)
        if self.basis == "monomial":
            out = np.full(t.shape, d * c[-1])
            for i in range(d - 1, 0, -1):  # Horner on sum_i i c_i t^(i-1)
                out *= t
                out += i * c[i]
            return out
        w = self.weight
        g_prev, g_cur = np.ones_like(t), 2.0 * w * t
        h_prev, h_cur = np.zeros_like(t), np.full(t.shape, 2.0 * w)
        out = c[1] * h_cur
        for i in range(1, d):
            a = 2.0 * (w + i) / (i + 1)
            b = (2.0 * w + i - 1) / (i + 1)
            h_next = a * (t * h_cur + g_cur) - b * h_prev
            g_next = a * t * g_cur - b * g_prev
            out += c[i + 1] * h_next
            g_prev, g_cur = g_cur, g_next
            h_prev, h_cur = h_cur, h_next
        return out

    def value_and_derivative(self, t) -> tuple[np.ndarray, np.ndarray]:
        """``(phi(t), phi'(t))`` in one pass of the recurrences."""
        if self.basis == "monomial" or self.degree == 0:
            return self(t), self.derivative(t)
        t = np.asarray(t, dtype=np.float64)
        c, w = self.coef, self.weight
        g_prev, g_cur = np.ones_like(t), 2.0 * w * t
        h_prev, h_cur = np.zeros_like(t), np.full(t.shape, 2.0 * w)
        val = c[0] + c[1] * g_cur
        der = c[1] * h_cur
        for i in range(1, self.degree):
            a = 2.0 * (w + i) / (i + 1)
            b = (2.0 * w + i - 1) / (i + 1)
            h_next = a * (t * h_cur + g_cur) - b * h_prev
            g_next = a * t * g_cur - b * g_prev
            val += c[i + 1] * g_next
            der += c[i + 1] * h_next
            g_prev, g_cur = g_cur, g_next
            h_prev, h_cur = h_cur, h_next
        return val, der

    def __repr__(self):
        return (f"PolynomialKernelMap(coef={np.array2string(self.coef, precision=4)}, "
                f"basis={self.basis!r}, weight={self.weight})")


# --------------------------------------------------------------------------
# C matrix and its top singular pair (Theorem 4.1)
# --------------------------------------------------------------------------
def hsic_matrix(K, G, degree_input: int, degree_output: int, *, basis: str = "monomial",
                weight_input: float = 0.51, weight_output: float = 0.52) -> np.ndarray:
    """The C matrix of eq. (16): ``C_ij = HSIC(K^(i), G^(j))``, eq. (11).

    Returns an array of shape ``(degree_input + 1, degree_output + 1)``.
    Row 0 and column 0 (the constant polynomial) are zero: centring removes
    constants.
    """
    K = np.asarray(K, dtype=np.float64)
    G = np.asarray(G, dtype=np.float64)
    if K.ndim != 2 or K.shape[0] != K.shape[1] or K.shape != G.shape:
        raise ValueError(
            f"hsic_matrix needs two square kernel matrices of the same shape, "
            f"got {K.shape} and {G.shape}")
    _check_degree(degree_input, "degree_input")
    _check_degree(degree_output, "degree_output")
    m = K.shape[0]
    if m < 2:
        raise ValueError("hsic_matrix needs at least 2 samples")
    _finite_values(K, "K", "hsic_matrix")   # it was said as an overflowing basis
    _finite_values(G, "G", "hsic_matrix")
    _check_basis(basis, weight_input, "weight_input")
    _check_basis(basis, weight_output, "weight_output")
    with np.errstate(over="ignore", invalid="ignore"):   # an overflowing basis is refused below, in one line
        Gs = _polynomials(G, degree_output, basis, weight_output).reshape(degree_output + 1, -1)
        Ks = _polynomials(K, degree_input, basis, weight_input)
        Kc = np.stack([_center(Ki) for Ki in Ks]).reshape(degree_input + 1, -1)
        C = (Kc @ Gs.T) / (m - 1) ** 2
    if not np.isfinite(C).all():   # it was top_singular_pair's "C must be a finite ... array", a traceback
        weights = f" with weights ({weight_input:g}, {weight_output:g})" if basis == "gegenbauer" else ""
        raise NonFiniteBasisError(f"the {basis} basis of degrees ({degree_input}, {degree_output}){weights} "
                                  f"overflows float64")
    # Exact zeros where only cancellation error remains, so alpha_0 = beta_0 = 0
    # as in section 4.
    C[0, :] = 0.0
    C[:, 0] = 0.0
    return C


def identity_coef(degree: int, basis: str = "monomial", weight: float = 0.5) -> np.ndarray:
    """The coefficients of ``phi(t) = t`` in ``basis`` up to ``degree`` (at least 1): ``e_1`` for monomials,
    ``e_1 / (2 weight)`` for Gegenbauer polynomials, whose ``G_1 = 2 weight t`` (negated for a negative
    weight, vanishing for a weight near 0: the fallback identity was that)."""
    coef = np.zeros(max(int(degree), 1) + 1)
    coef[1] = 1.0 / (2.0 * float(weight)) if basis == "gegenbauer" else 1.0
    return coef


def top_singular_pair(C, identity=None) -> tuple[np.ndarray, np.ndarray, float, str | None]:
    """Top left/right singular vectors of C with the sign fixed (Theorem 4.1).

    For a non-negative C, Perron-Frobenius makes both vectors non-negative up
    to a common sign, which is fixed so that their entries sum to a positive
    number. Entries of magnitude below ``1e-8 max|entry|`` are rounding noise
    and are set to zero. A clearly negative entry (possible for the Gegenbauer basis,
    whose transformed kernels need not be positive semi-definite so C may have
    negative entries) violates the constraint (13): it is clipped to zero, the
    vector renormalized, and a message returned. A vector with no positive entry at all falls back to the
    identity map: ``identity = (alpha, beta)``, its coefficients in the basis of each side
    (:func:`identity_coef`), by default ``e_1``.

    Returns
    -------
    alpha, beta : ndarray
        Unit-norm non-negative coefficient vectors; a vector that falls back to the identity map is
        ``identity``'s (in the Gegenbauer basis ``e_1 / (2 w)``: negative for a negative weight).
    sigma : float
        ``alpha^T C beta`` after any clipping (the attained objective).
    message : str or None
        What was clipped, or None.
    """
    C = np.asarray(C, dtype=np.float64)
    if C.ndim != 2 or C.size == 0 or not np.isfinite(C).all():
        raise ValueError(f"C must be a finite non-empty 2-D array, got shape {C.shape}")
    U, s, Vt = np.linalg.svd(C)
    a, b = U[:, 0].copy(), Vt[0].copy()
    if a.sum() + b.sum() < 0:
        a, b = -a, -b
    messages = []
    for name, v in (("alpha", a), ("beta", b)):
        scale = np.abs(v).max()
        v[np.abs(v) <= _NEG_TOL * scale] = 0.0
        neg = v < 0
        if neg.any():
            messages.append(
                f"{name} had {int(neg.sum())} negative entr{'y' if neg.sum() == 1 else 'ies'} "
                f"(most negative {v[neg].min():.3g} at index {int(np.argmin(v))}); clipped to 0 "
                f"and renormalized")
            v[neg] = 0.0
        nrm = np.linalg.norm(v)
        if nrm == 0:
            # Degenerate C (no positive dependence at any degree): identity map.
            v[:] = 0.0
            if identity is None or v.size < 2:
                v[min(1, v.size - 1)] = 1.0
            else:
                v[:] = identity[0 if name == "alpha" else 1][: v.size]
            messages.append(f"{name} had no positive entry; fell back to the identity map")
        else:
            v /= nrm
    sigma = float(a @ C @ b)
    return a, b, sigma, ("; ".join(messages) if messages else None)


# --------------------------------------------------------------------------
# estimator
# --------------------------------------------------------------------------
class HSICKernelTransform(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Learn polynomial transformations of input and output kernels (paper 003).

    Fits ``phi`` and ``psi`` of eq. (14)-(15) on Gaussian base kernels
    ``k(x, x') = exp(-gamma_input ||x - x'||^2)`` and
    ``g(y, y') = exp(-gamma_output ||y - y'||^2)`` (both with unit diagonal) so
    that ``HSIC(phi(K), psi(G))`` is maximal (eq. (12)-(16)); ``alpha_`` and
    ``beta_`` are the top singular vectors of ``C_`` (Theorem 4.1).

    ``transform(X)`` returns the transformed empirical kernel map
    ``phi(k(X, X_fit_))``; ``transform_kernel`` / ``transform_output_kernel``
    apply ``phi`` / ``psi`` to any base kernel matrix.

    Parameters
    ----------
    basis : {"monomial", "gegenbauer"}, default="monomial"
        Theorem 2.1 (monomials ``t**i``) or Theorem 2.2 (Gegenbauer ``G_i^w``).
    degree_input, degree_output : int >= 1 or None, default=None
        Degrees ``d1`` and ``d2`` of the expansions. ``None``: chosen by
        ``cv``-fold cross-validation over ``degree_grid`` (see Notes).
    weight_input, weight_output : float or None, default=0.51, 0.52
        Gegenbauer weight parameters (the paper's ``lambda_1 = 0.51`` and
        ``lambda_2 = 0.52``, section 6). ``None``: chosen by cross-validation
        over ``weight_grid``. Ignored for monomials.
    gamma_input, gamma_output : float or None, default=None
        Base kernel bandwidths; ``None`` uses :func:`median_heuristic_gamma`.
    degree_grid : sequence of int, default=(1, 2, 3, 5, 7, 11)
        Candidate degrees (the grid of section 6.2.1).
    weight_grid : sequence of float, default=(0.51, 1.0, 2.0)
        Candidate Gegenbauer weights, read (and checked) when a weight is
        None. Ignored for monomials, which have no weight.
    cv : int, default=3
        Folds for the selection.
    max_samples : int, default=2000
        Coefficients are fitted on at most this many rows (a random subset
        beyond it): ``C_`` costs ``O(d1 d2 m^2)`` time and ``O(d2 m^2)`` memory.
    random_state : int, RandomState or None, default=None
        Drives the subset, the median heuristic subset and the CV folds.

    Attributes
    ----------
    alpha_, beta_ : ndarray of shape (d1 + 1,), (d2 + 1,)
        Non-negative unit-norm coefficients of ``phi`` and ``psi``.
    C_ : ndarray of shape (d1 + 1, d2 + 1)
        ``C_ij = HSIC(K^(i), G^(j))`` on the fitted rows.
    singular_value_ : float
        ``alpha_^T C_ beta_``, the maximized HSIC of eq. (16).
    phi_, psi_ : PolynomialKernelMap
        The learned maps.
    degree_input_, degree_output_, weight_input_, weight_output_ : int, float
        The degrees and weights used.
    gamma_input_, gamma_output_ : float
        Base kernel bandwidths used.
    nonnegativity_warning_ : str or None
        Set when a singular vector had clearly negative entries that had to
        be clipped (see :func:`top_singular_pair`); a ``UserWarning`` is also
        issued.
    cv_results_ : dict or None
        ``{"params": [...], "mean_alignment": [...]}`` when a CV ran.
    X_fit_ : ndarray
        Rows the coefficients were fitted on (the columns of ``transform``).
    n_features_in_ : int

    Notes
    -----
    The training objective ``sigma_max(C)`` can only grow with the degrees
    (C for lower degrees is a leading block), so degrees cannot be chosen on
    the training HSIC. On its own, this estimator picks the candidate with the
    best held-out centred kernel alignment of ``phi(K)`` and ``psi(G)``
    (coefficients fitted on the other folds); the paper instead picks degrees
    by the error of the downstream predictor, which
    :class:`~streamcov.structured.TwinGaussianProcess` does.

    For the Gegenbauer basis the transformed kernel of a Gaussian Gram matrix
    is not guaranteed to be positive semi-definite: Theorem 2.2 holds for
    points on a sphere of dimension at most ``2 w + 1``, whereas Gaussian
    features live on the sphere of an infinite-dimensional space, where only
    non-negative monomial combinations are positive definite (Theorem 2.1).
    """

    def __init__(self, *, basis="monomial", degree_input=None, degree_output=None,
                 weight_input=0.51, weight_output=0.52, gamma_input=None, gamma_output=None,
                 degree_grid=(1, 2, 3, 5, 7, 11), weight_grid=(0.51, 1.0, 2.0), cv=3,
                 max_samples=2000, random_state=None):
        self.basis = basis
        self.degree_input = degree_input
        self.degree_output = degree_output
        self.weight_input = weight_input
        self.weight_output = weight_output
        self.gamma_input = gamma_input
        self.gamma_output = gamma_output
        self.degree_grid = degree_grid
        self.weight_grid = weight_grid
        self.cv = cv
        self.max_samples = max_samples
        self.random_state = random_state

    # -- validation ---------------------------------------------------------
    def _validate_params_(self):
        if self.basis not in BASES:
            raise ValueError(f"basis must be one of {BASES}, got {self.basis!r}")
        for name in ("degree_input", "degree_output"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, Integral) or not 1 <= v <= MAX_DEGREE):
                raise ValueError(f"{name} must be an integer in 1..{MAX_DEGREE} or None, got {v!r}")
        _check_grid(self.degree_grid)
        if self.basis == "gegenbauer":
            for name in ("weight_input", "weight_output"):
                v = getattr(self, name)
                if v is not None:
                    _check_basis("gegenbauer", v, name)
            if self.weight_input is None or self.weight_output is None:
                wg = _grid_values(self.weight_grid, "weight_grid", "Gegenbauer weights")
                for i, w in enumerate(wg):
                    _check_basis("gegenbauer", w, f"weight_grid[{i}]")
        for name in ("gamma_input", "gamma_output"):
            _check_gamma(getattr(self, name), name)
        if isinstance(self.cv, bool) or not isinstance(self.cv, Integral) or self.cv < 2:
            raise ValueError(f"cv must be an integer >= 2, got {self.cv!r}")
        if (isinstance(self.max_samples, bool) or not isinstance(self.max_samples, Integral)
                or self.max_samples < 2):
            raise ValueError(f"max_samples must be an integer >= 2, got {self.max_samples!r}")

    # -- fitting ------------------------------------------------------------
    def fit(self, X, y):
        """Fit ``phi`` and ``psi`` on inputs ``X`` (n, p) and outputs ``y`` (n,) or (n, q)."""
        self._validate_params_()
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True,
                             dtype=[np.float64, np.float32], ensure_min_samples=2)
        Y = np.asarray(y, dtype=np.float64).reshape(X.shape[0], -1)
        rng = check_random_state(self.random_state)
        n = X.shape[0]
        idx = np.sort(rng.choice(n, self.max_samples, replace=False)) if n > self.max_samples \
            else np.arange(n)
        Xf = np.asarray(X[idx], dtype=np.float64)
        Yf = Y[idx]
        self.gamma_input_ = (float(self.gamma_input) if self.gamma_input is not None
                             else median_heuristic_gamma(Xf, random_state=rng, name="X"))
        self.gamma_output_ = (float(self.gamma_output) if self.gamma_output is not None
                              else median_heuristic_gamma(Yf, random_state=rng, name="y"))
        K = rbf_kernel(Xf, gamma=self.gamma_input_)
        G = rbf_kernel(Yf, gamma=self.gamma_output_)

        d1, d2 = self.degree_input, self.degree_output
        w1 = self.weight_input if self.basis == "gegenbauer" else 0.5
        w2 = self.weight_output if self.basis == "gegenbauer" else 0.5
        self.cv_results_ = None
        if d1 is None or d2 is None or w1 is None or w2 is None:
            d1, d2, w1, w2 = self._select(K, G, d1, d2, w1, w2, rng)

        C = hsic_matrix(K, G, d1, d2, basis=self.basis, weight_input=w1, weight_output=w2)
        alpha, beta, sigma, msg = top_singular_pair(C, (identity_coef(d1, self.basis, w1),
                                                        identity_coef(d2, self.basis, w2)))
        self.nonnegativity_warning_ = msg
        if msg is not None:
            warnings.warn(f"HSICKernelTransform: {msg}", UserWarning, stacklevel=2)
        self.C_ = C
        self.alpha_, self.beta_, self.singular_value_ = alpha, beta, sigma
        self.degree_input_, self.degree_output_ = int(d1), int(d2)
        self.weight_input_, self.weight_output_ = float(w1), float(w2)
        self.phi_ = PolynomialKernelMap(alpha, self.basis, w1)
        self.psi_ = PolynomialKernelMap(beta, self.basis, w2)
        self.X_fit_ = Xf
        self._n_features_out = len(Xf)   # get_feature_names_out (and set_output): one column per fitted row
        return self

    def _select(self, K, G, d1, d2, w1, w2, rng):
        """Pick degrees / weights by held-out centred kernel alignment."""
        m = K.shape[0]
        if m < 2 * self.cv:
            raise ValueError(
                f"choosing degrees or weights by {self.cv}-fold cross-validation needs at least "
                f"{2 * self.cv} samples, got {m}; pass degree_input/degree_output (and the "
                f"Gegenbauer weights) explicitly or lower cv")
        grid = sorted(set(int(d) for d in self.degree_grid))
        d1s = grid if d1 is None else [d1]
        d2s = grid if d2 is None else [d2]
        w1s = list(self.weight_grid) if w1 is None else [w1]
        w2s = list(self.weight_grid) if w2 is None else [w2]
        D1, D2 = max(d1s), max(d2s)
        params = [(a, b, u, v) for u, v in itertools.product(w1s, w2s)
                  for a, b in itertools.product(d1s, d2s)]
        scores = np.zeros(len(params))
        folds = KFold(self.cv, shuffle=True, random_state=rng.randint(2 ** 31 - 1))
        for tr, te in folds.split(np.zeros(m)):
            Ktr, Gtr = K[np.ix_(tr, tr)], G[np.ix_(tr, tr)]
            Kte, Gte = K[np.ix_(te, te)], G[np.ix_(te, te)]
            for u, v in itertools.product(w1s, w2s):
                # One C per weight pair; every degree pair is a leading block of it.
                C = hsic_matrix(Ktr, Gtr, D1, D2, basis=self.basis, weight_input=u, weight_output=v)
                Bk = basis_polynomials(Kte, D1, self.basis, u)
                Bg = basis_polynomials(Gte, D2, self.basis, v)
                for p, (a, b, uu, vv) in enumerate(params):
                    if uu != u or vv != v:
                        continue
                    al, be, _, _ = top_singular_pair(C[: a + 1, : b + 1], (identity_coef(a, self.basis, u),
                                                                            identity_coef(b, self.basis, v)))
                    Kp = np.tensordot(al, Bk[: a + 1], axes=1)
                    Gp = np.tensordot(be, Bg[: b + 1], axes=1)
                    scores[p] += kernel_alignment(Kp, Gp) / self.cv
        best = int(np.argmax(scores))  # first maximum: lowest degrees among ties
        self.cv_results_ = {"params": [dict(degree_input=a, degree_output=b, weight_input=u,
                                            weight_output=v) for a, b, u, v in params],
                            "mean_alignment": scores.tolist()}
        return params[best]

    # -- using the maps -----------------------------------------------------
    def input_kernel(self, X, Z=None) -> np.ndarray:
        """Base input kernel ``k(X, Z)`` with the fitted bandwidth (``Z = X`` if None)."""
        check_is_fitted(self)
        return rbf_kernel(X, Z, gamma=self.gamma_input_)

    def output_kernel(self, Y, Z=None) -> np.ndarray:
        """Base output kernel ``g(Y, Z)`` with the fitted bandwidth (``Z = Y`` if None)."""
        check_is_fitted(self)
        Y = np.asarray(Y, dtype=np.float64)
        Y = Y[:, None] if Y.ndim == 1 else Y
        if Z is not None:
            Z = np.asarray(Z, dtype=np.float64)
            Z = Z[:, None] if Z.ndim == 1 else Z
        return rbf_kernel(Y, Z, gamma=self.gamma_output_)

    @staticmethod
    def _check_kernel_values(K, what):
        K = np.asarray(K, dtype=np.float64)
        if K.ndim != 2:
            raise ValueError(f"{what} expects a 2-D kernel matrix, got shape {K.shape}")
        K = _finite_values(K, "the kernel matrix", what)
        if K.size and (K.max() > 1 + 1e-8 or K.min() < -1 - 1e-8):
            raise ValueError(
                f"{what} expects a normalized base kernel with entries in [-1, 1] "
                f"(k(x, x) = 1); got entries in [{K.min():.4g}, {K.max():.4g}]. "
                f"Normalize with K_ij / sqrt(K_ii K_jj) first")
        return K

    def transform_kernel(self, K) -> np.ndarray:
        """``phi(K)`` of eq. (14), entry-wise, for a normalized input base kernel."""
        check_is_fitted(self)
        return self.phi_(self._check_kernel_values(K, "transform_kernel"))

    def transform_output_kernel(self, G) -> np.ndarray:
        """``psi(G)`` of eq. (15), entry-wise, for a normalized output base kernel."""
        check_is_fitted(self)
        return self.psi_(self._check_kernel_values(G, "transform_output_kernel"))

    def transform(self, X):
        """Transformed empirical kernel map ``phi(k(X, X_fit_))``, shape (n, n_fit)."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32])
        out = self.phi_(rbf_kernel(X, self.X_fit_, gamma=self.gamma_input_))
        return out.astype(X.dtype, copy=False)

    def hsic_score(self, X, y) -> float:
        """``HSIC(phi(K), psi(G))`` (eq. (11)) of the learned maps on new data."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32])
        K = self.phi_(self.input_kernel(X))
        G = self.psi_(self.output_kernel(y))
        return empirical_hsic(K, G)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.target_tags.multi_output = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
