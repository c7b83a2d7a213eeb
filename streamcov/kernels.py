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


def _real(value) -> float | None:
    """``value`` as a float when it is a real number (a Python or numpy int or float, or a 0-d array of one),
    else None: float() took "2" for 2 and True for 1, where a number is asked for, as the config schema asks."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    try:
        return float(value)
    except OverflowError:   # an int beyond float64 (10**400): a real number, infinite as a float
        return math.inf if value > 0 else -math.inf


def _bandwidth(value, name: str) -> float:
    """``value`` as a float, if it is a finite number > 0 whose square is neither 0 nor infinite."""
    v = _real(value)
    if v is None:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    if not (math.isfinite(v) and v > 0 and 0 < v * v < math.inf and math.isfinite(1.0 / (v * v))):
        raise ValueError(f"{name} must be a finite number > 0 whose square is a normal float, got {value!r}")
    return v


def gamma_from_sigma(sigma: float) -> float:
    """``gamma = 1 / (2 sigma^2)``: exp(-gamma d^2) = exp(-d^2 / (2 sigma^2))."""
    return 1.0 / (2.0 * _bandwidth(sigma, "sigma") ** 2)


def sigma_from_gamma(gamma: float) -> float:
    """Inverse of :func:`gamma_from_sigma`."""
    return math.sqrt(1.0 / (2.0 * _bandwidth(gamma, "gamma")))


def sigma_from_paper004(s: float) -> float:
    """``sigma = s / sqrt(2)``: exp(-d^2 / s^2) (paper 004) = exp(-d^2 / (2 sigma^2))."""
    return _bandwidth(s, "s") / math.sqrt(2.0)


def squared_distances(A, B=None) -> np.ndarray:
    """Pairwise squared Euclidean distances between the rows of ``A`` and ``B`` (``A`` when None).

    Through the Gram matrix, one BLAS call; clipped at 0 against round-off,
    with an exact zero diagonal and exact symmetry when ``B`` is None. Rows
    far from the origin (over 100 times their spread; float32 rows always)
    are first centred on the mean row of ``B`` (distances do not see a
    shift): ``||a||^2 + ||b||^2 - 2 a.b`` of rows far from the origin
    cancels the digits that the distances are made of (rows around 1e7 of
    spread 1 lost them all in float64: "Gaussian kernel" values above 1).
    float32 inputs (long log-operator vectors) are centred in float64, then
    use single-precision products with float64 norms. The result is float64.
    """
    A = _rows(A, "A")
    same = B is None
    B = A if same else _rows(B, "B")
    if B.shape[1] != A.shape[1]:
        raise ValueError(f"vector sets have shapes {A.shape} and {B.shape}; lengths must match")
    dt = np.float32 if A.dtype == np.float32 and B.dtype == np.float32 else np.float64
    # distances do not see a shift: rows far from the origin (operator vectors are, by about 55 times their
    # spread) are centred first, else ||a||^2 + ||b||^2 - 2 a.b cancels float32's 7 digits (float64's 16) away.
    # float64 rows are centred (a copy of A and B) only when their offset is over 100 times their spread: below,
    # the cancellation costs less than 1e4 eps (2e-12) of the distances
    with np.errstate(over="ignore", invalid="ignore"):   # rows near 1e308: refused below, in one line
        c = B.mean(axis=0, dtype=np.float64)
        centre = dt == np.float32
        if not centre:
            offset2 = float(c @ c)
            spread2 = float(np.einsum("ij,ij->", B, B, dtype=np.float64)) / max(len(B), 1) - offset2
            centre = bool(offset2 > 1e4 * max(spread2, 0.0)) and offset2 > 0
    a = (A - c).astype(dt, copy=False) if centre else A.astype(dt, copy=False)
    b = a if same else ((B - c).astype(dt, copy=False) if centre else B.astype(dt, copy=False))
    with np.errstate(over="ignore", invalid="ignore"):   # an overflow is refused just below, in one line
        g = (a @ b.T).astype(np.float64, copy=False)
        na = np.einsum("ij,ij->i", a, a, dtype=np.float64)
        nb = na if same else np.einsum("ij,ij->i", b, b, dtype=np.float64)
        d2 = na[:, None] + nb[None, :] - 2.0 * g
    # rows beyond about 1e154 (1e19 in float32) overflow the products: NaN distances, then NaN kernels. Only
    # norms that large can (|a.b| <= ||a|| ||b||), so the distances are scanned only then
    ma, mb = float(na.max(initial=0.0)), float(nb.max(initial=0.0))
    if (not ma + mb < 1e300 or (dt == np.float32 and not ma * mb < 1e76)) and not np.isfinite(d2).all():
        big = max(float(np.abs(A).max(initial=0.0)), float(np.abs(B).max(initial=0.0)))
        raise ValueError(f"the squared distances overflow {np.dtype(dt).name} (values up to {big:.3g}); scale the "
                         f"rows down (e.g. standardize them)")
    np.maximum(d2, 0.0, out=d2)
    if same:
        np.fill_diagonal(d2, 0.0)
        d2 = 0.5 * (d2 + d2.T)
    return d2


def _rows(A, name: str) -> np.ndarray:
    """``A`` as an array of real, finite row vectors (N, p), or ValueError naming it."""
    if np.iscomplexobj(A):   # casting to float dropped the imaginary parts with a mere warning
        raise ValueError(f"{name}: complex vectors are not supported; give real ones")
    A = np.asarray(A)
    if A.ndim != 2:
        raise ValueError(f"vectors must be 2-D (N, p), got shape {A.shape}")
    if A.dtype.kind == "O":   # numbers held as objects (pandas' nullable Float64 columns): taken as float64
        try:
            A = A.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: expected numbers, got an array of objects that are not") from None
    if A.dtype.kind not in "biuf":
        raise ValueError(f"{name}: expected numbers, got an array of dtype {A.dtype}")
    if A.dtype.kind == "f":   # a NaN row had distance 0 to itself, NaN to the others
        with np.errstate(over="ignore", invalid="ignore"):
            total = A.sum(dtype=np.float64)   # one pass, no array of flags: NaN or inf if any entry is
        if not np.isfinite(total) and not np.isfinite(A).all():
            i, j = (int(k) for k in np.argwhere(~np.isfinite(A))[0])
            raise ValueError(f"{name}: row {i} holds NaN or infinity (column {j})")
    return A


def distances(A, B=None) -> np.ndarray:
    """Pairwise Euclidean distances: the square root of :func:`squared_distances`."""
    return np.sqrt(squared_distances(A, B))


# squared distances below 0 by at most this share of the largest (or of 1) are rounding, read as 0
ROUNDING = 1e-12


def gaussian_kernel(d2, sigma: float) -> np.ndarray:
    """``exp(-d2 / (2 sigma^2))`` of squared distances ``d2`` (paper 000, eq. (1)).

    Parameters
    ----------
    d2 : array
        Squared distances (>= 0), e.g. from :func:`squared_distances`.
    sigma : float
        Bandwidth, > 0.
    """
    sigma = _bandwidth(sigma, "sigma")   # 1e-300 squared is 0: the kernel's diagonal was 0 / 0, NaN
    d2 = np.asarray(d2, dtype=np.float64)
    if d2.size:
        low, high = float(d2.min()), float(d2.max())   # NaN if any entry is
        tol = -ROUNDING * max(high, 1.0)
        if not low >= tol:   # a negative "distance" overflowed exp to inf, a NaN stayed NaN
            bad = d2[np.isnan(d2)] if np.isnan(high) else d2[d2 < tol]
            raise ValueError(f"d2: expected squared distances (numbers >= 0), got {float(bad.ravel()[0])!r}")
        if low < 0:   # the rounding of |a|^2 + |b|^2 - 2 <a, b>: a distance of 0
            d2 = np.maximum(d2, 0.0)
    return np.exp(-d2 / (2.0 * sigma ** 2))


# A descriptor made of column blocks (the windows of a temporal pyramid) has the kernel
# sum_b w_b exp(-||x_b - y_b||^2 / (2 sigma^2)): a sum of Log-E kernels, one per window.
# With V views in a row (the sequence and its mirror image: x = [x^1, ..., x^V], each laid out in the
# same blocks) the kernel is the mean over the V^2 pairs of views,
#     k(x, y) = (1 / V^2) sum_{s, t} sum_b w_b exp(-||x^s_b - y^t_b||^2 / (2 sigma^2)),
# the kernel of the mean of the views' feature maps: positive definite, and unchanged when the views of
# either row are permuted (a group-averaged kernel: Haasdonk and Burkhardt, Machine Learning 68, 2007).

def _check_views(views) -> None:
    if isinstance(views, bool) or not isinstance(views, (int, np.integer)) or views < 1:
        raise ValueError(f"views must be an integer >= 1, got {views!r}")


def check_blocks(blocks, width: int | None, views: int = 1) -> None:
    """``blocks`` (None, or [width, weight] pairs) cover ``width`` columns (``views`` times) with positive
    weights, or ValueError; ``width`` None: the pairs and ``views`` alone."""
    _check_views(views)
    if blocks is None and width is None:
        return
    if blocks is None:
        if width % views:
            raise ValueError(f"{width} columns do not split into {views} views")
        return

    def pair(b):   # [width, weight]: not a number, a string or a triple (len() of an int was a TypeError); a
        try:       # whole width (2.5 was read as 2, "3" as 3) and a finite weight (inf gave infinite features)
            return (len(b) == 2 and not isinstance(b, str) and not isinstance(b[0], (str, bool))
                    and not isinstance(b[1], (str, bytes, bool, np.bool_))   # float() read "1" and True as 1
                    and int(b[0]) == b[0] and int(b[0]) >= 1 and 0 < float(b[1]) < math.inf)
        except (TypeError, ValueError):
            return False

    if not blocks or not all(pair(b) for b in blocks):
        raise ValueError(f"blocks must be [width, weight] pairs with width >= 1 and weight > 0 (a whole width, a "
                         f"finite weight), got {blocks!r}")
    total = sum(int(b[0]) for b in blocks) * int(views)
    if width is not None and total != width:
        raise ValueError(f"blocks cover {total} columns{f' ({views} views)' if views > 1 else ''}, "
                         f"the input has {width}")


def _terms(blocks, views: int, width: int):
    """``(weight, columns of x, columns of y)`` of every term of the kernel (module comment above)."""
    views = int(views)
    blocks = [[width // views, 1.0]] if blocks is None else blocks
    view_width = sum(int(b) for b, _ in blocks)
    for s in range(views):
        for t in range(views):
            c = 0
            for b, w in blocks:
                yield (float(w) / views ** 2, slice(s * view_width + c, s * view_width + c + int(b)),
                       slice(t * view_width + c, t * view_width + c + int(b)))
                c += int(b)


def _term_distances(X, Y, sx, sy):
    """Squared distances between the columns ``sx`` of X and ``sy`` of Y (of X itself when Y is None)."""
    if Y is None and sx == sy:
        return squared_distances(X[:, sx])
    return squared_distances(X[:, sx], (X if Y is None else Y)[:, sy])


def _block_distances(X, Y, blocks, views: int = 1):
    """``(weight, squared distances)`` of each term in turn (one block of weight 1 without blocks or views)."""
    if blocks is None and views == 1:
        yield 1.0, squared_distances(X) if Y is None else squared_distances(X, Y)
        return
    for w, sx, sy in _terms(blocks, views, X.shape[1]):
        yield w, _term_distances(X, Y, sx, sy)


def block_distances(X, Y=None, blocks=None, views: int = 1):
    """Squared distances of every term (one array, or a list with ``blocks`` or ``views``): for a kernel
    evaluated at several bandwidths (the exact SVM's grid). On one set of rows the term of views (t, s) is
    the transpose of (s, t): computed once, the other a view of it."""
    check_blocks(blocks, np.shape(X)[1], views)
    if blocks is None and views == 1:
        return next(_block_distances(X, Y, None))[1]
    done: dict = {}
    out = []
    for _, sx, sy in _terms(blocks, views, X.shape[1]):
        if Y is None and (sy.start, sx.start) in done:
            out.append(done[(sy.start, sx.start)].T)
        else:
            done[(sx.start, sy.start)] = d2 = _term_distances(X, Y, sx, sy)
            out.append(d2)
    return out


def block_kernel(d2, blocks, sigma, views: int = 1):
    """``sum_terms w_term exp(-d2_term / (2 sigma^2))`` of :func:`block_distances` (one Gaussian kernel
    without blocks or views)."""
    if blocks is None and views == 1:
        return gaussian_kernel(d2, sigma)
    _check_views(views)
    terms = len(blocks or [None]) * int(views) ** 2
    if isinstance(d2, np.ndarray) or len(d2) != terms:   # zip() dropped the terms beyond the shorter list
        raise ValueError(f"d2: expected the {terms} arrays of block_distances(X, Y, blocks, views) for "
                         f"{len(blocks or [None])} block(s) and {views} view(s), got "
                         f"{'an array' if isinstance(d2, np.ndarray) else len(d2)}")
    weights = [float(w) / views ** 2 for _ in range(views ** 2) for _, w in (blocks or [(None, 1.0)])]
    return sum(w * gaussian_kernel(d, sigma) for d, w in zip(d2, weights))


def block_gaussian_kernel(X, Y=None, blocks=None, sigma: float = 1.0, views: int = 1) -> np.ndarray:
    """``block_kernel(block_distances(X, Y, blocks, views), blocks, sigma, views)`` holding one term's
    distances at a time (for one bandwidth: a Nystroem map's landmarks against many rows)."""
    check_blocks(blocks, np.shape(X)[1], views)   # blocks that miss columns, or views that do not divide them,
    K = None                                      # were a kernel of other columns, without a word
    for w, d2 in _block_distances(X, Y, blocks, views):
        part = gaussian_kernel(d2, sigma)
        if w != 1.0:
            part *= w
        if K is None:
            K = part
        else:
            K += part
    if Y is None and views > 1:
        K = 0.5 * (K + K.T)   # the cross-view terms come in transposed pairs: exactly symmetric
    return K


def degenerate_kernel(K, tol: float) -> str | None:
    """``"identity"`` when every value of the kernel matrix ``K`` between two different rows is below ``tol``
    (a bandwidth far below their distances: each row its own class), ``"constant"`` when every one is within
    ``tol`` of 1 (far above: the rows cannot be told apart) or one is not finite; None otherwise. An SVM learns
    nothing from either (the exact SVM's bandwidth warning, the in-memory image task's grid)."""
    K = np.asarray(K)
    off = K[~np.eye(len(K), dtype=bool)]
    if not len(off):
        return None
    if not np.isfinite(off).all():
        return "constant"
    if off.max() < tol:
        return "identity"
    return "constant" if off.min() > 1.0 - tol else None


def median_distance(D) -> float:
    """Median of the off-diagonal entries of a symmetric distance matrix (1 if it is 0).

    The median heuristic: kernel bandwidths of the image pipelines are
    multiples of it, measured on training rows.
    """
    D = np.asarray(D)
    if D.ndim != 2 or D.shape[0] != D.shape[1]:
        raise ValueError(f"median_distance: expected a square distance matrix (n, n), got shape {D.shape}")
    iu = np.triu_indices(len(D), 1)
    off = D[iu]
    if not np.isfinite(off).all():
        raise ValueError("median_distance: the distances hold NaN or infinity; the rows they were measured on "
                         "are not finite")
    med = float(np.median(off)) if len(off) else 0.0
    return med if med > 0 else 1.0


# ------------------------------------------------------------ centred alignment
def _square_kernels(kernels, what="kernels") -> list[np.ndarray]:
    """Validated float64 copies of one or more square, symmetric, finite Gram matrices of one size."""
    out = []
    for k, K in enumerate(kernels):
        if np.iscomplexobj(K):
            raise ValueError(f"{what}[{k}]: complex Gram matrices are not supported")
        K = np.asarray(K, dtype=np.float64)
        if K.ndim != 2 or K.shape[0] != K.shape[1] or K.shape[0] < 2:
            raise ValueError(f"{what}[{k}] must be a square Gram matrix of at least 2 x 2, got shape {K.shape}")
        if not np.all(np.isfinite(K)):
            raise ValueError(f"{what}[{k}] has non-finite entries")
        if not np.allclose(K, K.T, rtol=1e-6, atol=1e-9 * max(1.0, float(np.max(np.abs(K))))):
            raise ValueError(f"{what}[{k}] is not symmetric")
        if out and K.shape != out[0].shape:
            raise ValueError(f"{what}[{k}] has shape {K.shape}, {what}[0] has {out[0].shape}")
        out.append(K)
    if not out:
        raise ValueError(f"{what}: need at least one Gram matrix")
    return out


def center_kernel(K) -> np.ndarray:
    """The centred Gram matrix ``Kc = H K H``, ``H = I - 1 1^T / n`` (Cortes et al. 2012, section 2).

    ``Kc`` is the Gram matrix of the feature vectors minus their mean:
    ``Kc_ij = K_ij - mean_k K_ik - mean_k K_kj + mean_kl K_kl``.
    """
    return _center(_square_kernels([K], "K")[0])


def _center(K: np.ndarray) -> np.ndarray:
    """:func:`center_kernel` of a float64 Gram matrix the caller has checked (or built), in O(n^2)."""
    return K - K.mean(axis=0, keepdims=True) - K.mean(axis=1, keepdims=True) + K.mean()


def label_kernel(y) -> np.ndarray:
    """The one-vs-rest label kernel ``Y = sum_c y_c y_c^T`` of one-hot labels (``Y_ij = [y_i = y_j]``)."""
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be one label per row (1-d), got shape {y.shape}")
    if y.dtype.kind in "fc" and np.isnan(y).any():   # NaN != NaN: a NaN row was of no class, not even its own
        raise ValueError(f"y: label {int(np.flatnonzero(np.isnan(y))[0])} is NaN; give every row a class")
    return (y[:, None] == y[None, :]).astype(np.float64)


def centered_alignment(K1, K2) -> float:
    """Centred kernel alignment ``rho(K1, K2) = <K1c, K2c>_F / (||K1c||_F ||K2c||_F)``.

    Cortes, Mohri and Rostamizadeh, "Algorithms for Learning Kernels Based
    on Centered Alignment", JMLR 13 (2012) 795-828, section 2 (the
    alignment of centred kernel matrices), with ``Kc = H K H``
    (:func:`center_kernel`). It lies in [-1, 1], is 1 for ``K2 = c K1``
    (``c > 0``) and is invariant to scaling either kernel by a positive
    number and to adding a constant to it.

    Parameters
    ----------
    K1, K2 : array (n, n)
        Symmetric Gram matrices of the same n >= 2 points.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        On shapes that differ or are not square, non-finite or non-symmetric
        entries, or a kernel that is constant after centring (no alignment).
    """
    K1, K2 = _square_kernels([K1, K2])
    A, B = _center(K1), _center(K2)
    for k, c in enumerate((A, B)):
        if not np.vdot(c, c) > 0:
            raise ValueError(f"kernels[{k}] is constant after centring: its alignment is undefined")
    return _alignment(A, B)


def _alignment(A: np.ndarray, B: np.ndarray) -> float | None:
    """``<A, B>_F / (||A||_F ||B||_F)`` of two centred Gram matrices; None when one of them is 0."""
    den = np.sqrt(np.vdot(A, A) * np.vdot(B, B))
    return float(np.vdot(A, B) / den) if den > 0 else None


def alignment_weights(kernels, y, normalize: bool = True) -> np.ndarray:
    """The maximum-alignment weights of base kernels for labels ``y`` (alignf, Cortes et al. 2012).

    Cortes, Mohri and Rostamizadeh, "Algorithms for Learning Kernels Based
    on Centered Alignment", JMLR 13 (2012) 795-828, section 3.2 (the alignf
    algorithm): the weights ``mu >= 0``, ``||mu||_2 = 1``, that maximise the
    centred alignment ``rho(sum_k mu_k K_k, Y)`` of the combined kernel with
    the label kernel are ``mu = v* / ||v*||`` with

        v* = argmin_{v >= 0}  v^T M v - 2 v^T a,
        M_kl = <K_k,c, K_l,c>_F,   a_k = <K_k,c, Y_c>_F,

    ``K_c = H K H`` (:func:`center_kernel`) and ``Y = sum_c y_c y_c^T``
    the one-vs-rest kernel of the one-hot labels (:func:`label_kernel`;
    the paper's ``y y^T`` for one output). The QP is solved exactly as the
    non-negative least squares problem ``min_{v >= 0} ||B v - b||^2`` with
    ``B^T B = M``, ``B^T b = a`` (``a`` lies in the range of ``M``).

    Parameters
    ----------
    kernels : sequence of arrays (n, n)
        Symmetric Gram matrices of the same n >= 2 training points.
    y : array (n,)
        Class labels (at least two classes).
    normalize : bool, default=True
        Divide every centred kernel by its Frobenius norm first, so that the
        weights refer to ``K_k / ||K_k,c||_F`` and do not change when a base
        kernel is multiplied by a positive number; ``False``: the paper's
        weights of the kernels as given.

    Returns
    -------
    mu : ndarray (k,)
        Non-negative, unit Euclidean norm. With ``normalize=True`` the
        maximum-alignment kernel is ``sum_k mu_k K_k / ||K_k,c||_F``.

    Raises
    ------
    ValueError
        On invalid kernels (see :func:`centered_alignment`), labels of the
        wrong length or with one class, or when no non-negative combination
        is positively aligned with the labels (every ``a_k <= 0``).
    """
    from scipy.optimize import nnls

    Ks = _square_kernels(kernels)
    y = np.asarray(y)
    if y.shape != (len(Ks[0]),):
        raise ValueError(f"y must hold one label per row of the kernels ({len(Ks[0])}), got shape {y.shape}")
    if len(np.unique(y)) < 2:
        raise ValueError("y must hold at least two classes: the label kernel is constant after centring")
    Kc = []
    for k, K in enumerate(Ks):
        c = _center(K)
        nk = np.linalg.norm(c)
        if not nk > 0:
            raise ValueError(f"kernels[{k}] is constant after centring: its alignment is undefined")
        Kc.append(c / nk if normalize else c)
    Y = _center(label_kernel(y))
    F = np.stack([c.ravel() for c in Kc])
    M = F @ F.T
    a = F @ Y.ravel()
    if not np.any(a > 0):
        raise ValueError("no base kernel is positively aligned with the labels (every <K_c, Y_c>_F <= 0)")
    lam, Q = np.linalg.eigh(M)
    keep = lam > lam.max() * len(lam) * np.finfo(float).eps
    B = np.sqrt(lam[keep])[:, None] * Q[:, keep].T
    b = (Q[:, keep].T @ a) / np.sqrt(lam[keep])
    v, _ = nnls(B, b)
    return v / np.linalg.norm(v)


__all__ = ["alignment_weights", "center_kernel", "centered_alignment", "degenerate_kernel", "distances", "gamma_from_sigma",
           "gaussian_kernel", "label_kernel", "median_distance", "sigma_from_gamma", "sigma_from_paper004",
           "squared_distances"]
