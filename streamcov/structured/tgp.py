"""Twin Gaussian Processes with learned polynomial kernel transformations.

Twin Gaussian Processes (Bo & Sminchisescu 2010, section 5 of paper 003)
place Gaussian-process priors with covariances ``K`` (inputs) and ``G``
(outputs) on the training set augmented by the test pair ``(x*, y*)`` and
predict ``y*`` by making the two augmented covariances agree:

* KL criterion, eq. (18)/(20): ``y* = argmin_y D_KL(N(0, G~) || N(0, K~))``.
  With ``A = K + lambda_x I``, ``u = A^-1 k_x``,
  ``eta = k(x*, x*) + lambda_x - k_x^T u`` and ``B = (G + lambda_y I)^-1``,
  the terms of ``2 eta D_KL`` that depend on ``y`` are

      L_KL(y) = g(y, y) - 2 u^T g_y - eta log(g(y, y) + lambda_y - g_y^T B g_y).

* HSIC criterion, eq. (19)/(21): ``y* = argmax_y HSIC(G~, K~)`` (eq. (11) on
  the ``n + 1`` augmented points). With ``M = H K~ H`` only the last column
  of ``M`` couples to ``y``: ``HSIC = const + 2 n^-2 m^T g_y`` with
  ``m_i = M_{i, n+1}``; we minimize ``L_HSIC(y) = -2 m^T g_y / n`` (the
  positive factor ``1 / n`` only rescales the objective for the optimizer).

With a learned transformation (``kernel_transform``) every kernel value is
passed through ``phi`` (inputs) or ``psi`` (outputs) from
:class:`~streamcov.structured.HSICKernelTransform`: HOTGP (KL, eq. (20)) and
HOHSIC (HSIC, eq. (21)). Gradients in ``y`` are analytic (appendix B):
``d psi(g_i) / dy = psi'(g_i) g_i (-2 gamma_y) (y - y_i)``. Each test point
is solved by L-BFGS started from the training output of its nearest training
input (optionally from its ``n_starts`` nearest).

Cost: exact KL training is ``O(n^3)`` time and ``O(n^2)`` memory (two
Cholesky factorizations and the explicit ``B``); each objective evaluation
is ``O(n^2)`` (the quadratic form ``g_y^T B g_y``). The HSIC criterion needs
only the row sums of ``phi(K)`` (``O(n^2)`` time, ``O(n)`` memory) and
``O(n)`` per evaluation. For large ``n`` set ``max_train``:

* ``approximation="subsample"``: train on a uniform random subset of
  ``max_train`` rows (the exact TGP of that subset).
* ``approximation="local"``: keep all rows; each test point uses the exact
  TGP of its ``max_train`` nearest training inputs, as in the released TGP
  code of Bo & Sminchisescu (its ``knn`` parameter). Per test point this
  costs ``O(max_train^3)``.
"""
from __future__ import annotations

import math
import warnings
from contextlib import nullcontext
from numbers import Integral

import numpy as np
from scipy.linalg import LinAlgError, cho_solve, cholesky
from scipy.optimize import fmin_l_bfgs_b
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.model_selection import GroupKFold, KFold
from sklearn.neighbors import NearestNeighbors
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data
from .._config import blas_threads, total_memory
from .._fitparams import FitParams

from ..kernels import _real, gaussian_kernel, sigma_from_gamma

from .hsic import (MAX_DEGREE, HSICKernelTransform, PolynomialKernelMap, _check_gamma, _check_grid,
                   median_heuristic_gamma, rbf_kernel)

CRITERIA = ("kl", "hsic")
# the start of predict's warning when a row's minimization diverged (its prediction is then the nearest training output)
DIVERGED = "TwinGaussianProcess: the criterion's minimization diverged"
APPROXIMATIONS = ("subsample", "local")
TRANSFORMS = (None, "monomial", "gegenbauer")


# the start of predict's warning when the KL criterion is undefined at a row (its prediction is then the nearest
# training output too)
UNDEFINED = "TwinGaussianProcess: the KL criterion is undefined"


def diverged_text(diverged: int, n: int, undefined: int = 0) -> str:
    """What :meth:`TwinGaussianProcess.predict` says of ``diverged`` and ``undefined`` of ``n`` rows predicted by
    their nearest training output."""
    said = []
    if undefined:
        said.append(f"{UNDEFINED} for {undefined} of {n} rows (the transformed input kernel with the row is not "
                    "positive definite: D_KL of eq. (20) has no value; a non-identity map of degree > 1 can do this)")
    if diverged:
        text = f"{DIVERGED} (no start ended finite and near the training outputs) for {diverged} of {n} rows"
        said.append(text.removeprefix("TwinGaussianProcess: ") if said else text)
    return "; ".join(said) + "; their prediction is the nearest training output"

# Bytes per n^2 held at the peak of an exact KL fit (float64 n x n arrays:
# the factors of K and G, B and temporaries). benchmarks/tgp_scaling.py
# measures about 4.05 of them in peak resident memory; 5 leaves a margin.
_BYTES_PER_N2 = 5 * 8
_SMALL = 1024


def _blas_threads(n: int):
    """One BLAS thread below ~1000 rows: thread start-up and spinning cost more
    than a small factorization (and hurt badly on a loaded machine)."""
    return blas_threads(1) if n < _SMALL else nullcontext()


def _factor_psd(M: np.ndarray, lam: float):
    """Cholesky factor of ``M + lam I``; shifts the diagonal if ``M`` is indefinite.

    Gegenbauer-transformed Gaussian kernels can be indefinite (see
    :class:`~streamcov.structured.HSICKernelTransform`); the shift makes the
    smallest eigenvalue ``lam`` and is reported so that test points get the
    same diagonal term. Returns ``(L, extra_shift)``.
    """
    n = M.shape[0]
    diag = np.arange(n)
    M = M.copy()
    M[diag, diag] += lam
    try:
        return cholesky(M, lower=True, check_finite=False), 0.0
    except LinAlgError:
        pass
    w_min = float(np.linalg.eigvalsh(M)[0])
    extra = max(0.0, lam - w_min)
    for _ in range(4):
        M[diag, diag] += extra
        try:
            return cholesky(M, lower=True, check_finite=False), extra
        except LinAlgError:  # pragma: no cover - rounding at the edge
            M[diag, diag] -= extra
            extra = 10.0 * extra + lam
    raise np.linalg.LinAlgError("could not factor the kernel matrix even after a diagonal shift")


# --------------------------------------------------------------------------
# objectives (value and analytic gradient in y, appendix B)
# --------------------------------------------------------------------------
def _out_sq_distances(y, Y, Ysq):
    """``||y - y_i||^2`` for every training output ``y_i`` (rows of ``Y``, ``Ysq`` their squared norms), >= 0."""
    d2 = Ysq + y @ y - 2.0 * (Y @ y)
    return np.maximum(d2, 0.0, out=d2)


def _out_kernel(y, Y, Ysq, gamma, psi):
    g = gaussian_kernel(_out_sq_distances(y, Y, Ysq), sigma_from_gamma(gamma))
    if psi is None:
        return g, g
    # dk/dy = psi'(g) g (-2 gamma)(y - y_i): fold psi'(g) g into one factor.
    val, der = psi.value_and_derivative(g)
    return val, der * g


def _grad_from_weights(w, dk, y, Y, gamma):
    v = w * dk
    return -2.0 * gamma * (v.sum() * y - v @ Y)


def kl_objective(y, Y, Ysq, gamma, psi, u, eta, B, c_y):
    """``L_KL(y)`` and its gradient (module docstring; ``g(y, y)`` dropped as constant).

    ``c_y = psi(1) + lambda_y (+ diagonal shift)`` is the augmented output
    kernel's diagonal entry for ``y``.
    """
    k, dk = _out_kernel(y, Y, Ysq, gamma, psi)
    Bk = B @ k
    s = c_y - k @ Bk
    s = max(s, 1e-300)  # s > 0 whenever the augmented G~ is positive definite
    f = -2.0 * (u @ k) - eta * np.log(s)
    w = -2.0 * u + (2.0 * eta / s) * Bk
    return f, _grad_from_weights(w, dk, y, Y, gamma)


def hsic_objective(y, Y, Ysq, gamma, psi, m):
    """``L_HSIC(y) = -2 m^T g_y / n`` and its gradient (module docstring)."""
    k, dk = _out_kernel(y, Y, Ysq, gamma, psi)
    scale = -2.0 / Y.shape[0]
    return scale * (m @ k), _grad_from_weights(scale * m, dk, y, Y, gamma)


#: the Gaussian kernel (before any map) of a run's end point with its nearest training output below which, at a
#: criterion no lower than far from every output, the run has left the data (its prediction was that far point)
LEFT_THE_DATA = 1e-2
#: training outputs (those of the largest weights: m, or u) at which the criterion is evaluated for one more
#: start when every run from the nearest outputs slid away from the data
FALLBACK_STARTS = 64


def _all_one_row(X) -> bool:
    """Whether every row of ``X`` (n, p) is the same (and there is a column to differ in)."""
    return bool(X.shape[1]) and not np.ptp(X, axis=0).any()


class TwinGaussianProcess(FitParams, RegressorMixin, BaseEstimator):
    """Twin Gaussian Process regressor, optionally with learned kernel maps.

    ``criterion="kl"`` with ``kernel_transform`` set is HOTGP and
    ``criterion="hsic"`` with it set is HOHSIC (paper 003, section 5.1).

    Parameters
    ----------
    criterion : {"kl", "hsic"}, default="kl"
        Eq. (18)/(20) or eq. (19)/(21).
    kernel_transform : {None, "monomial", "gegenbauer"}, default=None
        Learn ``phi``/``psi`` with :class:`HSICKernelTransform` in this basis;
        None uses the Gaussian base kernels unchanged.
    degree_input, degree_output : int >= 1 or None, default=None
        Degrees ``d1``, ``d2`` of the maps. None (with a transform): chosen by
        ``cv``-fold cross-validation of this estimator's mean absolute error
        over ``degree_grid`` (``len(degree_grid)^2`` candidates, each fitted
        ``cv`` times).
    gegenbauer_weight_input, gegenbauer_weight_output : float or None, default=0.51, 0.52
        Gegenbauer weight parameters (section 6 of the paper); None lets the
        transform choose them (held-out kernel alignment).
    gamma_x, gamma_y : float or None, default=None
        Gaussian bandwidths ``exp(-gamma ||a - b||^2)``; None: median heuristic.
    lambda_x, lambda_y : float, default=1e-3
        Regularizers added to the input / output kernel diagonals (KL only).
    n_starts : int, default=1
        L-BFGS starts per test point: the training outputs of the
        ``n_starts`` nearest training inputs; the lowest objective wins.
        A run that slides away from the training outputs (ending far from
        all of them, no lower than the criterion there) is dropped, and
        one more start is tried.
    max_iter : int, default=50
        L-BFGS iterations per start.
    tol : float, default=1e-6
        L-BFGS projected-gradient tolerance.
    max_train : int or None, default=None
        Largest training set solved exactly (see ``approximation``). None:
        all rows; an exact KL fit whose matrices would not fit in physical
        memory raises a ValueError.
    approximation : {"subsample", "local"}, default="subsample"
        What to do with more than ``max_train`` rows (module docstring).
    degree_grid : sequence of int, default=(1, 2, 3, 5, 7, 11)
        Candidate degrees (section 6.2.1).
    cv : int, default=3
        Folds of the degree selection: of rows shuffled, or of whole groups
        when ``fit`` is given ``groups`` (as many as there are, at most ``cv``).
    random_state : int, RandomState or None, default=None
        Drives the subsample, the bandwidth heuristic and the CV folds.

    Attributes
    ----------
    X_train_, y_train_ : ndarray
        Training rows used (the subsample, if one was drawn).
    gamma_x_, gamma_y_ : float
        Bandwidths used.
    transform_ : HSICKernelTransform or None
        The fitted transformation (``alpha_``, ``beta_``, ``C_``).
    phi_, psi_ : PolynomialKernelMap
        Input / output maps (the identity without a transform).
    degree_input_, degree_output_ : int
        Degrees used (1, 1 without a transform).
    shift_x_, shift_y_ : float
        Extra diagonal shift needed to factor an indefinite transformed
        kernel (0 for positive definite ones; KL, exact mode only).
    cv_results_ : dict or None
        ``{"params": [(d1, d2), ...], "mean_mae": [...]}`` when degrees were
        cross-validated.
    local_ : bool
        True when ``approximation="local"`` is in force (more rows than ``max_train``):
        ``predict`` then uses, per test row, the exact TGP of its ``max_train`` nearest training inputs.
    n_features_in_ : int
    """

    # read by predict, and free to change after fit (the per-row solver's budget); the others shape the fit
    _PREDICT_PARAMS = ("n_starts", "max_iter", "tol")

    def __init__(self, *, criterion="kl", kernel_transform=None, degree_input=None,
                 degree_output=None, gegenbauer_weight_input=0.51, gegenbauer_weight_output=0.52,
                 gamma_x=None, gamma_y=None, lambda_x=1e-3, lambda_y=1e-3, n_starts=1,
                 max_iter=50, tol=1e-6, max_train=None, approximation="subsample",
                 degree_grid=(1, 2, 3, 5, 7, 11), cv=3, random_state=None):
        self.criterion = criterion
        self.kernel_transform = kernel_transform
        self.degree_input = degree_input
        self.degree_output = degree_output
        self.gegenbauer_weight_input = gegenbauer_weight_input
        self.gegenbauer_weight_output = gegenbauer_weight_output
        self.gamma_x = gamma_x
        self.gamma_y = gamma_y
        self.lambda_x = lambda_x
        self.lambda_y = lambda_y
        self.n_starts = n_starts
        self.max_iter = max_iter
        self.tol = tol
        self.max_train = max_train
        self.approximation = approximation
        self.degree_grid = degree_grid
        self.cv = cv
        self.random_state = random_state

    # -- validation ---------------------------------------------------------
    def _validate_params_(self):
        if self.criterion not in CRITERIA:
            raise ValueError(f"criterion must be one of {CRITERIA}, got {self.criterion!r}")
        if self.kernel_transform not in TRANSFORMS:
            raise ValueError(
                f"kernel_transform must be one of {TRANSFORMS}, got {self.kernel_transform!r}")
        if self.approximation not in APPROXIMATIONS:
            raise ValueError(
                f"approximation must be one of {APPROXIMATIONS}, got {self.approximation!r}")

        def _int(name, lo, none_ok=False, hi=None):
            v = getattr(self, name)
            if v is None and none_ok:
                return
            if isinstance(v, bool) or not isinstance(v, Integral) or v < lo or (hi is not None and v > hi):
                raise ValueError(f"{name} must be an integer {f'in {lo}..{hi}' if hi is not None else f'>= {lo}'}"
                                 f"{' or None' if none_ok else ''}, got {v!r}")

        _int("degree_input", 1, True, MAX_DEGREE)
        _int("degree_output", 1, True, MAX_DEGREE)
        _int("n_starts", 1)
        _int("max_iter", 1)
        _int("max_train", 2, True)
        _int("cv", 2)
        for name in ("gamma_x", "gamma_y"):
            _check_gamma(getattr(self, name), name)
        for name in ("lambda_x", "lambda_y", "tol"):
            v = getattr(self, name)
            r = _real(v)   # np.isfinite(10**20) was a TypeError
            if r is None or not (math.isfinite(r) and r >= 0):
                raise ValueError(f"{name} must be a non-negative number, got {v!r}")
        if self.criterion == "kl" and (self.lambda_x <= 0 or self.lambda_y <= 0):
            raise ValueError("the KL criterion needs lambda_x > 0 and lambda_y > 0 "
                             "(the kernel matrices are inverted)")
        _check_grid(self.degree_grid)

    # -- fitting ------------------------------------------------------------
    def fit(self, X, y, groups=None):
        """Fit on inputs ``X`` (n, p) and outputs ``y`` (n,) or (n, q).

        ``groups`` (n,), optional: the group of each row (the subject of a frame), for the degree selection's
        cross-validation, whose folds then keep each group's rows on one side (frames of one sequence on both
        sides scored the degrees on near copies of training frames, where the test protocol is cross-subject).
        """
        self._validate_params_()
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True,
                             dtype=[np.float64, np.float32], ensure_min_samples=2)
        # copies: the caller's arrays held as the training data changed the predictions when the caller changed
        # them after fit, against factors computed from the old values (GaussianProcessRegressor copies too)
        Y = np.array(y, dtype=np.float64).reshape(X.shape[0], -1)
        X = np.array(X, dtype=np.float64)
        # every input the same: nothing to predict from; the median heuristic fell back to gamma_x = 1 and the KL
        # criterion then predicted outside the training outputs (-8.7 for outputs 0..9), without a word. Checked on
        # the caller's rows (not on a fold of the degree CV, which may hold only the rows that are alike)
        inner = getattr(self, "_inner_fit", False)
        if not inner and _all_one_row(X):
            raise ValueError(f"X: all {X.shape[0]} training inputs are the same row; a twin GP predicts from how "
                             f"the inputs differ: give inputs that vary")
        self._y_1d = np.ndim(y) == 1
        rng = check_random_state(self.random_state)
        n = X.shape[0]
        if groups is not None:
            groups = np.asarray(groups)
            if groups.shape != (n,):
                raise ValueError(f"groups: expected one group per training row ({n}), got shape {groups.shape}")

        self.local_ = False
        if self.max_train is not None and n > self.max_train:
            if self.approximation == "subsample":
                idx = np.sort(rng.choice(n, self.max_train, replace=False))
                X, Y = X[idx], Y[idx]
                groups = None if groups is None else groups[idx]
                if not inner and _all_one_row(X):
                    raise ValueError(f"X: the {self.max_train} training inputs drawn (max_train) are all the same "
                                     f"row; a twin GP predicts from how the inputs differ: raise max_train, or "
                                     f"give inputs that vary more")
            else:
                self.local_ = True
        n_exact = self.max_train if self.local_ else X.shape[0]
        if self.criterion == "kl":
            need = _BYTES_PER_N2 * n_exact ** 2
            total = total_memory()   # 0 where the system does not say: the factorization finds out
            if total and need > 0.8 * total:
                raise ValueError(
                    f"an exact KL twin GP on {n_exact} training rows needs about "
                    f"{need / 2 ** 30:.1f} GiB, more than 80% of the {total / 2 ** 30:.1f} GiB this process may "
                    f"use; set max_train "
                    f"(with approximation='subsample' or 'local') to a smaller size")

        self.X_train_, self.y_train_ = X, Y
        # the outputs' kernel in the criterion expands ||y - y_i||^2 as ||y||^2 + ||y_i||^2 - 2 y.y_i: on outputs
        # far from the origin (1e7 of spread 1) that cancels the digits the distances are made of (predictions off
        # by 0.3-1.2 without a word). The criterion is minimized over outputs centred on the training mean.
        self._y_offset = Y.mean(axis=0)
        self._Yc = Y - self._y_offset
        self._Ysq = (self._Yc * self._Yc).sum(1)
        self.gamma_x_ = (float(self.gamma_x) if self.gamma_x is not None
                         else median_heuristic_gamma(X, random_state=rng, name="X"))
        self.gamma_y_ = (float(self.gamma_y) if self.gamma_y is not None
                         else median_heuristic_gamma(Y, random_state=rng, name="y"))

        self.cv_results_ = None
        self.transform_ = None
        self.degree_input_ = self.degree_output_ = 1
        if self.kernel_transform is None:
            self.phi_ = self.psi_ = PolynomialKernelMap.identity()
            self._phi = self._psi = None
        else:
            d1, d2 = self.degree_input, self.degree_output
            if d1 is None or d2 is None:
                d1, d2 = self._select_degrees(X, Y, d1, d2, rng, groups)
            with _blas_threads(n_exact):
                self.transform_ = HSICKernelTransform(
                    basis=self.kernel_transform, degree_input=d1, degree_output=d2,
                    weight_input=self.gegenbauer_weight_input,
                    weight_output=self.gegenbauer_weight_output,
                    gamma_input=self.gamma_x_, gamma_output=self.gamma_y_,
                    max_samples=n_exact, random_state=rng).fit(X, Y)
            self.degree_input_, self.degree_output_ = d1, d2
            self.phi_, self.psi_ = self.transform_.phi_, self.transform_.psi_
            self._phi, self._psi = self.phi_, self.psi_

        self.shift_x_ = self.shift_y_ = 0.0
        if not self.local_:
            with _blas_threads(X.shape[0]):
                self._state = self._prepare(X, self._Yc, self._Ysq, record=True)
        self._nn = NearestNeighbors().fit(X)
        self._remember_params()
        return self

    def _kx(self, A, B=None):
        K = rbf_kernel(A, B, gamma=self.gamma_x_)
        return K if self._phi is None else self._phi(K)

    def _prepare(self, X, Y, Ysq, record=False):
        """Training-side quantities of the criterion for the rows X, Y."""
        c1x = float(self.phi_(np.array(1.0)))
        c1y = float(self.psi_(np.array(1.0)))
        if self.criterion == "kl":
            Lx, sx = _factor_psd(self._kx(X), self.lambda_x)
            G = rbf_kernel(Y, gamma=self.gamma_y_)
            if self._psi is not None:
                G = self._psi(G)
            Ly, sy = _factor_psd(G, self.lambda_y)
            del G
            B = cho_solve((Ly, True), np.eye(Y.shape[0]), check_finite=False)
            if record:
                self.shift_x_, self.shift_y_ = sx, sy
            return dict(X=X, Y=Y, Ysq=Ysq, Lx=Lx, B=B,
                        c_x=c1x + self.lambda_x + sx, c_y=c1y + self.lambda_y + sy)
        # HSIC: only the row sums of phi(K) are needed; blocks keep memory O(n).
        n = X.shape[0]
        r = np.empty(n)
        step = max(1, min(n, 2 ** 22 // max(n, 1)))
        for a in range(0, n, step):
            r[a:a + step] = self._kx(X[a:a + step], X).sum(1)
        return dict(X=X, Y=Y, Ysq=Ysq, r=r, S=float(r.sum()), c_x=c1x)

    def _point_params(self, state, kq):
        """Per-test-point coefficients from ``kq = phi(k(X_train, x*))``, shape (n, b); None for a row where the
        criterion is undefined (KL: the augmented input kernel ``K~`` is not positive definite)."""
        n = kq.shape[0]
        if self.criterion == "kl":
            U = cho_solve((state["Lx"], True), kq, check_finite=False)
            # eta, the Schur complement of the training block in K~, is > 0 exactly when K~ is positive definite
            # (with the training block's shift it is >= lambda_x for a positive semi-definite map). A transformed
            # kernel can be indefinite: the training block is shifted until it factors (_factor_psd), but the row
            # of a test input can still leave K~ indefinite; D_KL and its log-determinant then have no value, and
            # clamping eta to a tiny positive number minimized another function (-2 u^T g_y) without a word.
            eta = state["c_x"] - np.einsum("ij,ij->j", kq, U)
            # below zero by more than the rounding of the difference: indefinite; within it (a tiny lambda_x at a
            # training input), the clamp of before
            slack = 1e-10 * max(1.0, abs(state["c_x"]))
            return [(U[:, j], max(float(eta[j]), 1e-12)) if eta[j] > -slack else None for j in range(kq.shape[1])]
        N = n + 1
        ksum = kq.sum(0)
        r_star = (ksum + state["c_x"]) / N
        s = (state["S"] + 2.0 * ksum + state["c_x"]) / N ** 2
        M = kq - (state["r"][:, None] + kq) / N - r_star[None, :] + s[None, :]
        return [(M[:, j],) for j in range(kq.shape[1])]

    def _objective(self, state, params):
        Y, Ysq, g, psi = state["Y"], state["Ysq"], self.gamma_y_, self._psi
        if self.criterion == "kl":
            u, eta = params
            B, c_y = state["B"], state["c_y"]
            return lambda yv: kl_objective(yv, Y, Ysq, g, psi, u, eta, B, c_y)
        (m,) = params
        return lambda yv: hsic_objective(yv, Y, Ysq, g, psi, m)

    def _far_value(self, state, params) -> float:
        """The criterion far from every training output, where every ``g_y`` is 0 (``psi(0)`` with a map), less
        a rounding margin: KL ``-2 psi(0) sum(u) - eta log(c_y - psi(0)^2 1^T B 1)``, the largest variance
        term; HSIC ``-2 psi(0) sum(m) / n``."""
        psi0 = 0.0 if self._psi is None else float(self._psi(np.array(0.0)))
        if self.criterion == "hsic":
            (m,) = params
            value, scale = -2.0 * psi0 * float(m.sum()) / len(m), 2.0 * float(np.abs(m).sum()) / len(m)
        else:
            u, eta = params
            # g_y^T B g_y with every g_y = psi(0): psi(0)^2 1^T B 1, the sum of B once per state, not a product
            # with the n x n B for every test row
            if "B_sum" not in state:
                state["B_sum"] = float(state["B"].sum())
            log_s = float(np.log(max(state["c_y"] - psi0 * psi0 * state["B_sum"], 1e-300)))
            value = -2.0 * psi0 * float(u.sum()) - eta * log_s
            scale = 2.0 * float(np.abs(u).sum()) + eta * abs(log_s)
        # the rounding of sums of n terms: far below any minimum that the data makes
        return value - 1e-9 * scale

    def _solve(self, state, params, starts):
        """The best of the L-BFGS runs from ``starts`` (nearest training outputs first), and whether one
        was kept. A run whose output or objective is not finite (its line search stepped to where
        ``y . y`` overflows: the kernels vanish there and the gradient is 0 x inf) is dropped, with numpy's
        overflow warnings; so is a run that slid away from the data: it ends where the Gaussian kernel with every
        training output is below :data:`LEFT_THE_DATA`, no lower than the criterion's value far from all of
        them (:meth:`_far_value`). From a start where the nearby weights are negative (HSIC), or where the
        variance term outweighs them (KL, a test input far from the training inputs: eta near its largest), the
        descent leads there, and the prediction was that far point (4.8 for outputs in [0, 1]). A run that ends
        at a local minimum near the data is kept, even above that far value. When no
        run is kept, one more starts from the lowest criterion among the training outputs of the
        :data:`FALLBACK_STARTS` largest weights; when that fails too, the
        nearest training output is the prediction (counted and said by :meth:`predict`)."""
        fun = self._objective(state, params)
        far = self._far_value(state, params)
        Y, Ysq = state["Y"], state["Ysq"]
        best_f, best_y = np.inf, None

        def slid_away(yv, f) -> bool:
            d2 = float(_out_sq_distances(yv, Y, Ysq).min())
            return f >= far and self.gamma_y_ * d2 > -np.log(LEFT_THE_DATA)

        def guarded(yv):
            # a step to a point that is not finite (a gradient that overflowed, e.g. with a tiny lambda_y): an
            # infinite objective there, which the line search steps back from, not a NaN in the kernels
            if not np.isfinite(yv).all():
                return np.inf, np.zeros_like(yv)
            return fun(yv)

        def run(y0):
            nonlocal best_f, best_y
            yv, f, _ = fmin_l_bfgs_b(guarded, np.array(y0, dtype=np.float64), m=10,
                                     pgtol=self.tol, maxiter=self.max_iter)
            if np.isfinite(f) and np.isfinite(yv).all() and not slid_away(yv, f) and (best_y is None or f < best_f):
                best_f, best_y = f, yv

        with np.errstate(over="ignore", invalid="ignore"):
            for y0 in starts:
                run(y0)
            if best_y is None:
                # the training output, among those of the largest weights, where the criterion is lowest
                top = np.argsort(-params[0], kind="stable")[:FALLBACK_STARTS]
                values = [fun(Y[i])[0] for i in top]
                run(Y[top[int(np.argmin(values))]])
        return (starts[0], False) if best_y is None else (best_y, True)

    def _select_degrees(self, X, Y, d1, d2, rng, groups=None):
        grid = sorted(set(int(d) for d in self.degree_grid))
        d1s = grid if d1 is None else [d1]
        d2s = grid if d2 is None else [d2]
        n = X.shape[0]
        if n < 2 * self.cv:
            raise ValueError(
                f"choosing degrees by {self.cv}-fold cross-validation needs at least "
                f"{2 * self.cv} training rows, got {n}; pass degree_input and degree_output "
                f"or lower cv")
        seed = rng.randint(2 ** 31 - 1)
        if groups is None:
            folds = list(KFold(self.cv, shuffle=True, random_state=seed).split(X))
        else:
            k = min(self.cv, len(np.unique(groups)))
            if k < 2:
                raise ValueError(f"choosing degrees by cross-validation over groups needs at least 2 groups of "
                                 f"training rows, got {k}; pass degree_input and degree_output, or rows of more "
                                 f"groups")
            folds = list(GroupKFold(k).split(X, groups=groups))
        params = [(a, b) for a in d1s for b in d2s]
        scores = np.zeros(len(params))
        for p, (a, b) in enumerate(params):
            est = clone(self).set_params(degree_input=a, degree_output=b, gamma_x=self.gamma_x_,
                                         gamma_y=self.gamma_y_, random_state=seed)
            est._inner_fit = True   # a fold's rows: the caller's were checked
            for tr, te in folds:
                est.fit(X[tr], Y[tr])
                # a candidate whose solves diverge scores its fallbacks' error, without predict's warning
                scores[p] += np.abs(est._predict(X[te])[0].reshape(len(te), -1) - Y[te]).mean()
        scores /= len(folds)
        self.cv_results_ = {"params": params, "mean_mae": scores.tolist()}
        return params[int(np.argmin(scores))]

    # -- prediction ---------------------------------------------------------
    def prediction_objective(self, x):
        """The criterion minimized for one test input ``x`` (shape (p,)).

        Returns a function ``f(y) -> (value, gradient)``; value is ``L_KL`` or
        ``L_HSIC`` of the module docstring. Not available in local mode.
        """
        check_is_fitted(self)
        self._check_params_unchanged()
        if self.local_:
            raise ValueError("prediction_objective is not available with approximation='local'; "
                             "the training set differs per test point")
        x = validate_data(self, np.atleast_2d(x), reset=False, dtype=np.float64)
        kq = self._kx(self.X_train_, x[:1])
        params = self._point_params(self._state, kq)[0]
        if params is None:
            raise ValueError(f"{UNDEFINED} at this input: the transformed input kernel with it is not positive "
                             "definite, so D_KL of eq. (20) has no value (predict gives the nearest training output)")
        fun = self._objective(self._state, params)
        off = self._y_offset
        return lambda y: fun(np.asarray(y, dtype=np.float64) - off)   # the criterion works on centred outputs

    def predict(self, X):
        """Predict outputs by minimizing the TGP criterion per row of ``X``."""
        pred, (diverged, undefined) = self._predict(X)
        if diverged or undefined:
            warnings.warn(diverged_text(diverged, len(pred), undefined), RuntimeWarning, stacklevel=2)
        return pred

    def _predict(self, X):
        """:meth:`predict`'s outputs and how many rows fell back to their nearest training output: ``(diverged,
        undefined)``, where no start of the minimization ended well, and where the criterion has no value."""
        check_is_fitted(self)
        # the criterion, bandwidths and maps shape the fitted state: changed since fit, predict met a state of
        # another criterion (a KeyError) or mixed the two
        self._check_params_unchanged()
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32])
        out_dtype = X.dtype
        Xd = np.asarray(X, dtype=np.float64)
        q = self.y_train_.shape[1]
        pred = np.empty((Xd.shape[0], q))
        # One BLAS thread: per-evaluation products are matrix-vector sized, and
        # idle BLAS threads spinning between calls cost more than they save.
        with blas_threads(1):
            counts = self._predict_into(Xd, pred)
        pred = pred.astype(out_dtype if out_dtype == np.float32 else np.float64, copy=False)
        return (pred.ravel() if self._y_1d else pred), counts

    def _predict_into(self, Xd, pred) -> tuple[int, int]:
        """Fill ``pred``; returns how many rows fell back to their nearest training output: where no start of
        :meth:`_solve` ended well, and where the criterion is undefined (:meth:`_point_params`)."""
        n_tr = self.X_train_.shape[0]
        diverged = undefined = 0
        if self.local_:
            k = min(self.max_train, n_tr)
            _, nbrs = self._nn.kneighbors(Xd, n_neighbors=k)
            for j in range(Xd.shape[0]):
                idx = np.sort(nbrs[j])
                Xl = self.X_train_[idx]
                state = self._prepare(Xl, self._Yc[idx], self._Ysq[idx])
                kq = self._kx(Xl, Xd[j:j + 1])
                starts = self._Yc[nbrs[j][: min(self.n_starts, k)]]
                params = self._point_params(state, kq)[0]
                yc, ok = (None, False) if params is None else self._solve(state, params, starts)
                # a fallback is the nearest training output itself, not its centred copy moved back
                pred[j] = yc + self._y_offset if ok else self.y_train_[nbrs[j][0]]
                undefined += params is None
                diverged += not ok and params is not None
        else:
            n_starts = min(self.n_starts, n_tr)
            chunk = max(1, min(1024, 2 ** 24 // max(n_tr, 1)))
            for a in range(0, Xd.shape[0], chunk):
                Xq = Xd[a:a + chunk]
                _, nbrs = self._nn.kneighbors(Xq, n_neighbors=n_starts)
                kq = self._kx(self.X_train_, Xq)
                for j, params in enumerate(self._point_params(self._state, kq)):
                    yc, ok = (None, False) if params is None else self._solve(self._state, params, self._Yc[nbrs[j]])
                    pred[a + j] = yc + self._y_offset if ok else self.y_train_[nbrs[j][0]]
                    undefined += params is None
                    diverged += not ok and params is not None
        return diverged, undefined

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        # the HSIC criterion without learned maps is a poor regressor (README: worse than the mean predictor on
        # the S-shape at gamma = 1; R^2 about 0 on scikit-learn's check data, where KL reaches 0.99)
        tags.regressor_tags.poor_score = self.criterion == "hsic"
        return tags
