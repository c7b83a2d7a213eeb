"""The objective of linear classifiers on explicit features: loss and gradient by GEMMs.

For ``n`` rows ``x_i`` with class codes ``y_i`` and a model ``(W, b)`` of
``k`` score columns (``k = n_classes``, or 1 for two classes)::

    f(W, b) = (1/n) sum_i loss(W x_i + b, y_i) + (lam / 2) ||W||_F^2,   lam = 1 / (C n)

with ``loss`` the multinomial log loss (logistic for two classes; the
objective of scikit-learn's ``LogisticRegression(C)``, divided by ``C n``)
or the one-vs-rest squared hinge ``sum_k max(0, 1 - t_k s_k)^2`` (that of
``LinearSVC(loss="squared_hinge", C)``, without its penalty on the
intercept). ``lam = 1 / (C n)`` is also the ``alpha`` the SGD learner uses
for ``C``, so one ``C`` means the same problem for every learner.

A chunk of rows costs two products, ``S = X W^T`` and ``G = R^T X`` with
``R`` the residuals dLoss/dS, run in float32 (the precision of the
features, at twice the speed of float64); the row losses and residuals and
every sum over chunks are float64. :func:`chunk_sums` is that per-chunk
step, the unit of the streamed learner (:mod:`streamcov.stream.lbfgs`);
:func:`linear_loss_gradient` the whole objective of an in-memory array.

Two implementations of the step, chosen by the size of the problem
(:func:`use_kernel`), never by the process: two BLAS GEMMs and numpy on the
``(n, k)`` scores (:func:`_rows_loss_residual`), or the numba kernel
:func:`streamcov._kernels.linear.chunk_pass`, which reads each row once and
runs the two narrow products up to 3x faster than OpenBLAS (one column per
class is far from a square GEMM) but costs about 10 ms to load from numba's
cache (0.12 s in a process where numba's JIT has not started): BLAS only for
passes too small to repay that. The two agree to float32 rounding, not bit for
bit, so one fit uses one of them in every process (and a checkpoint records
the threshold that decides which).
"""
from __future__ import annotations

import numpy as np

from .kernels import _real

LOG_LOSS = 0
SQUARED_HINGE = 1
LOSSES = {"log_loss": LOG_LOSS, "squared_hinge": SQUARED_HINGE}
# rows per GEMM pair: about 8 MB of float32 features, so that the second GEMM finds X in cache,
# and at least MIN_CHUNK_ROWS (narrow rows: GEMMs of fewer rows run below speed)
CHUNK_BYTES = 8 << 20
MIN_CHUNK_ROWS = 64
# multiply-adds of the scores of one pass (rows x features x score columns; the gradient's product adds as
# many again) from which passes run the numba kernel. It is as fast as OpenBLAS or faster on every shape
# measured (0.97-3.0x, benchmarks/pass_kernel.py; 1.05-1.8x on the pipelines' passes); what it costs is its load
# from numba's cache, about 10 ms in a process whose JIT has started (a `streamcov run` has, featurizing)
# and 0.12 s in one where it has not. Below 2^20 a pass takes under 0.1 ms and a whole fit less than that.
KERNEL_MIN_MACS = 1 << 20


def score_columns(n_classes: int) -> int:
    """Score columns of a model of ``n_classes`` classes: one for two classes, else one per class."""
    return 1 if int(n_classes) == 2 else int(n_classes)


def chunk_rows(n_features: int) -> int:
    """Rows of one GEMM pair for ``n_features`` float32 columns (at least :data:`MIN_CHUNK_ROWS`)."""
    return max(MIN_CHUNK_ROWS, CHUNK_BYTES // (4 * max(int(n_features), 1)))


def use_kernel(n_rows: int, n_features: int, k: int) -> bool:
    """Whether a pass over ``n_rows`` rows of ``n_features`` with ``k`` score columns runs the numba
    kernel (:data:`KERNEL_MIN_MACS`): a function of the problem alone, the same in every process."""
    return int(n_rows) * int(n_features) * int(k) >= KERNEL_MIN_MACS


def _rows_loss_residual(S, y, b, loss: int, binary: bool, want_grad: bool):
    """Row losses of the scores ``S + b`` and their residuals dLoss/dScore.

    ``S`` (n, k) in any float dtype, ``y`` (n,) class codes, ``b`` (k,)
    float64. ``loss``: ``LOG_LOSS`` (multinomial; ``binary``: the logistic
    loss of one column, class 1 positive) or ``SQUARED_HINGE`` (one-vs-rest
    ``sum_k max(0, 1 - t_k s_k)^2``, ``t_k = +1`` for the row's class;
    ``binary``: one column, class 1 positive). Everything in float64, on the
    (n, k) scores only (the GEMMs dominate).

    Returns ``(loss_sum, n_correct, R, r)``: ``R`` (n, k) in ``S``'s dtype and
    its column sums ``r`` (float64), or None for both unless ``want_grad``.
    """
    S = S.astype(np.float64) + b
    n = len(y)
    rows = np.arange(n)
    if binary:
        t = np.where(y == 1, 1.0, -1.0)
        correct = int(np.count_nonzero((S[:, 0] > 0) == (y == 1)))
    else:
        correct = int(np.count_nonzero(S.argmax(axis=1) == y))
    if loss == LOG_LOSS:
        if binary:
            z = t * S[:, 0]
            total = float(np.logaddexp(0.0, -z).sum())
            R = (-t / (1.0 + np.exp(np.minimum(z, 700.0))))[:, None] if want_grad else None
        else:
            mx = S.max(axis=1, keepdims=True)
            E = np.exp(S - mx)
            se = E.sum(axis=1, keepdims=True)
            total = float((mx[:, 0] + np.log(se[:, 0]) - S[rows, y]).sum())
            if want_grad:
                R = E / se
                R[rows, y] -= 1.0
    elif loss == SQUARED_HINGE:
        if binary:
            T = t[:, None]
        else:
            T = np.full(S.shape, -1.0)
            T[rows, y] = 1.0
        M = np.maximum(0.0, 1.0 - T * S)
        total = float(np.square(M).sum())
        R = -2.0 * T * M if want_grad else None
    else:
        raise ValueError(f"unknown loss code {loss!r}")
    if not want_grad:
        return total, correct, None, None
    return total, correct, R, R.sum(axis=0)


def chunk_sums(X, y, W, b, loss: int, binary: bool, want_grad: bool, kernel: bool = False):
    """Sums of one chunk of rows: ``(loss_sum, n_correct, G, r)``.

    ``X`` (n, D) and ``W`` (k, D), C-contiguous, share a dtype (float32 in
    the learner); ``y`` (n,) int64 class codes; ``b`` (k,) float64.
    ``G = R^T X`` (k, D) in ``X``'s dtype and ``r`` the column sums of
    ``R`` (k,) in float64 are None unless ``want_grad``. ``kernel``: the
    numba kernel instead of BLAS (:func:`use_kernel`). No validation: the
    caller's arrays are trusted.
    """
    if kernel:
        from ._kernels.linear import chunk_pass

        # one layout and dtype of every operand, hence one compiled specialization (the same bits everywhere)
        X, W = np.ascontiguousarray(X), np.ascontiguousarray(W, dtype=X.dtype)
        b = np.ascontiguousarray(b, dtype=np.float64)
        y = np.ascontiguousarray(y, dtype=np.int64)
        k, D = W.shape
        G = np.empty((k, D) if want_grad else (0, 0), dtype=X.dtype)
        r = np.empty(k if want_grad else 0)
        total, correct = chunk_pass(X, y, W, b, loss == SQUARED_HINGE, binary, want_grad, G, r)
        return (total, correct, G, r) if want_grad else (total, correct, None, None)
    total, correct, R, r = _rows_loss_residual(X @ W.T, y, b, loss, binary, want_grad)
    if not want_grad:
        return total, correct, None, None
    return total, correct, R.astype(X.dtype, copy=False).T @ X, r


def max_feature(dtype) -> float:
    """The largest feature value whose square still fits in ``dtype``: the passes square rows in it."""
    return float(np.sqrt(np.finfo(dtype).max))


def linear_loss_gradient(X, y, coef, intercept, *, loss: str = "log_loss", C: float = 1.0,
                         n_classes: int | None = None, dtype=np.float32, kernel: bool | None = None):
    """The objective ``f(W, b)`` of the module docstring and its gradient, on in-memory rows.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    y : array-like of int, shape (n_samples,)
        Class codes ``0 .. n_classes - 1``.
    coef : ndarray of shape (k, n_features)
        ``k = 1`` for two classes, else ``n_classes``.
    intercept : ndarray of shape (k,)
    loss : {"log_loss", "squared_hinge"}
    C : float > 0
        Inverse regularization: ``lam = 1 / (C n)``.
    n_classes : int, optional
        Default ``max(y) + 1`` (at least 2).
    dtype : {np.float32, np.float64}
        Precision of the products (sums are float64 either way).
    kernel : bool, optional
        The numba kernel (True) or BLAS (False); default by :func:`use_kernel`.

    Returns
    -------
    f : float
    grad_coef : ndarray of shape (k, n_features), float64
    grad_intercept : ndarray of shape (k,), float64
    """
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {sorted(LOSSES)}, got {loss!r}")
    c = _real(C)   # numpy scalars and 0-d arrays taken, strings and bools not
    if c is None or not (np.isfinite(c) and c > 0):
        raise ValueError(f"C must be a finite number > 0, got {C!r}")
    C = c
    if np.dtype(dtype) not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
    if np.iscomplexobj(X):    # the cast below would drop the imaginary parts with a mere warning
        raise ValueError("X: complex values are not supported; give real ones")
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0 or not np.issubdtype(X.dtype, np.number):
        raise ValueError(f"X must be a non-empty 2-D numeric array (rows and columns), got shape {X.shape}")
    if not np.isfinite(X).all():
        raise ValueError("X holds NaN or infinite values")
    big, limit = float(np.abs(X).max()), max_feature(dtype)
    if big > limit:
        raise ValueError(f"X holds values up to {big:.3g}; in {np.dtype(dtype).name} the products take values "
                         f"below {limit:.2g} (beyond, a row's square overflows): standardize X")
    y = np.asarray(y)
    if y.shape != (X.shape[0],) or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"y must be {X.shape[0]} integer class codes, got shape {y.shape} of {y.dtype}")
    if n_classes is not None and (isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer))
                                  or n_classes < 2):
        raise ValueError(f"n_classes must be an integer >= 2, got {n_classes!r}")
    n_classes = max(int(y.max()) + 1, 2) if n_classes is None else int(n_classes)
    if y.min() < 0 or y.max() >= n_classes:
        raise ValueError(f"class codes must lie in 0 .. {n_classes - 1}, got {y.min()} .. {y.max()}")
    k = score_columns(n_classes)
    if np.iscomplexobj(coef) or np.iscomplexobj(intercept):
        raise ValueError("coef and intercept: complex values are not supported; give real ones")
    W = np.asarray(coef, dtype=np.float64)
    b = np.asarray(intercept, dtype=np.float64)
    if W.shape != (k, X.shape[1]) or b.shape != (k,):
        raise ValueError(f"coef must have shape {(k, X.shape[1])} and intercept {(k,)} for {n_classes} "
                         f"classes, got {W.shape} and {b.shape}")
    if not (np.isfinite(W).all() and np.isfinite(b).all()):
        raise ValueError("coef or intercept holds NaN or infinite values")
    top = max(float(np.abs(W).max(initial=0.0)), float(np.abs(b).max(initial=0.0)))
    if top > float(np.finfo(dtype).max):   # the cast to the products' precision would make them infinite
        raise ValueError(f"coef or intercept holds values up to {top:.3g}, beyond {np.dtype(dtype).name} "
                         f"(at most {np.finfo(dtype).max:.3g}); scale them down or pass dtype=np.float64")
    n = X.shape[0]
    Wd = np.ascontiguousarray(W, dtype=dtype)
    y = y.astype(np.int64)
    kernel = use_kernel(n, X.shape[1], k) if kernel is None else bool(kernel)
    total, G, r = 0.0, np.zeros(W.shape), np.zeros(k)
    step = chunk_rows(X.shape[1])
    for a in range(0, n, step):
        Xc = np.ascontiguousarray(X[a:a + step], dtype=dtype)
        part, _, g, rc = chunk_sums(Xc, y[a:a + step], Wd, b, LOSSES[loss], k == 1, True, kernel)
        total += part
        G += g
        r += rc
    lam = 1.0 / (float(C) * n)
    with np.errstate(over="ignore", invalid="ignore"):   # said just below, in one line
        f = total / n + 0.5 * lam * float(np.vdot(W, W))
        grad = G / n + lam * W
    if not (np.isfinite(f) and np.isfinite(grad).all() and np.isfinite(r).all()):
        # scores X coef^T + intercept (or the penalty) beyond the float range: a NaN objective otherwise
        raise ValueError(f"the objective overflows at these coefficients (coef up to {top:.3g}, X up to {big:.3g}): "
                         f"the scores or the penalty exceed the float range; give smaller coef and intercept")
    return f, grad, r / n


__all__ = ["CHUNK_BYTES", "KERNEL_MIN_MACS", "LOSSES", "chunk_rows", "chunk_sums", "linear_loss_gradient", "max_feature",
           "score_columns", "use_kernel"]
