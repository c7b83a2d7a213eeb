"""The exact Gaussian-kernel SVM (paper 000, eq. (1)): the baseline every explicit map approximates.

The kernel is :func:`streamcov.kernels.gaussian_kernel` on the descriptor
vectors, ``K = exp(-||v_i - v_j||^2 / (2 sigma^2))`` (the Log-Euclidean
kernel on vec(log X)), given to scikit-learn's SVC as a precomputed Gram
matrix. sigma and C are chosen by leave-one-subject-out cross-validation on
the training subjects only. A descriptor made of blocks (the windows of a
temporal pyramid, :attr:`streamcov.stream.skeleton.SkeletonSource.kernel_blocks`)
gets the weighted sum of the blocks' kernels,
``K = sum_b w_b exp(-||v_b,i - v_b,j||^2 / (2 sigma^2))``. It holds every training descriptor in memory:
for datasets that fit, as a reference.
"""
from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .._fitparams import FitParams
from ..kernels import block_distances, block_kernel, check_blocks as _check_blocks, degenerate_kernel


class GaussianKernelSVC(FitParams, ClassifierMixin, BaseEstimator):
    """One-vs-one SVC on the precomputed Gaussian kernel of its input rows (times a head kernel).

    Equivalent to ``SVC(kernel="rbf", gamma=1 / (2 sigma^2), C=C)`` but with
    the Gram matrix computed by one GEMM (:func:`streamcov.kernels.squared_distances`),
    which long descriptor vectors need. Keeps only the support vectors, so it
    can be saved in a model folder without pickle.

    With ``n_head > 0`` the last ``n_head`` columns of a row ``[v, h]`` are a
    (normalised) head vector and the kernel combines the Gaussian kernel K2 of
    eq. (31) on ``v`` with the linear kernel of the heads, ``w = head_weight``:
    ``head_combine="product"``, paper 004's conv + head product (section 5),
    weighted, ``K2(v, v') ((1 - w) + w <h, h'>)``; ``head_combine="sum"``,
    ``(1 - w) K2(v, v') + w <h, h'>``. :class:`~streamcov.features.HeadProductSketch`
    is the explicit counterpart of both.

    Parameters
    ----------
    sigma : float, default=1.0
    C : float, default=1.0
    n_head : int, default=0
    head_weight : float in [0, 1], default=1.0
    head_combine : {"product", "sum"}, default="product"
    blocks : list of [width, weight], optional
        Consecutive column blocks of the input (before the head columns) and their weights: the
        kernel is ``sum_b weight_b exp(-||x_b - y_b||^2 / (2 sigma^2))``; None: one block.
    views : int, default=1
        Views per row, each laid out in ``blocks`` (a sequence and its mirror image: 2): the kernel is the
        mean over the pairs of views (:mod:`streamcov.kernels`).

    Attributes
    ----------
    svc_ : SVC
        The fitted precomputed-kernel SVC.
    support_vectors_ : ndarray (n_SV, n_features)
    n_train_ : int
    classes_ : ndarray
    n_features_in_ : int
    """

    _parameter_constraints: dict = {
        "sigma": [Interval(Real, 0, None, closed="neither")],
        "C": [Interval(Real, 0, None, closed="neither")],
        "n_head": [Interval(Integral, 0, None, closed="left")],
        "head_weight": [Interval(Real, 0, 1, closed="both")],
        "head_combine": [StrOptions({"product", "sum"})],
        "blocks": [list, None],
        "views": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(self, *, sigma=1.0, C=1.0, n_head=0, head_weight=1.0, head_combine="product", blocks=None,
                 views=1):
        self.sigma = sigma
        self.C = C
        self.n_head = n_head
        self.head_weight = head_weight
        self.head_combine = head_combine
        self.blocks = blocks
        self.views = views

    def _gram(self, X, Y=None):
        """The Gaussian kernel (a weighted sum over ``blocks``) of the first columns, combined with the
        linear kernel of the ``n_head`` trailing head columns (:func:`combine_head_kernel`)."""
        p = X.shape[1] - int(self.n_head)
        if p < 1:
            raise ValueError(f"X has {X.shape[1]} feature(s); n_head = {self.n_head} leaves none for the Gaussian "
                             f"kernel")
        K = block_kernel(block_distances(X[:, :p], None if Y is None else Y[:, :p], self.blocks, self.views),
                         self.blocks, self.sigma, self.views)
        if not self.n_head:
            return K
        Yh = X if Y is None else Y
        L = X[:, p:].astype(np.float64) @ Yh[:, p:].astype(np.float64).T
        return combine_head_kernel(K, L, float(self.head_weight), self.head_combine)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        from sklearn.svm import SVC

        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32])
        _check_blocks(self.blocks, X.shape[1] - int(self.n_head), self.views)
        self.svc_ = SVC(kernel="precomputed", C=float(self.C)).fit(self._gram(X), y)
        self.support_vectors_ = np.ascontiguousarray(X[self.svc_.support_])
        self.n_train_ = len(X)
        self.classes_ = self.svc_.classes_
        self._remember_params()
        return self

    def check_fitted(self) -> None:
        """ValueError when the fitted arrays do not fit together (a model file edited by hand): libsvm reads
        the SVC's without bounds checks, and a support index past the training rows reads past the kernel."""
        svc = getattr(self, "svc_", None)
        if svc is None:
            return
        check_fitted_svc(svc)
        n_train, width = getattr(self, "n_train_", None), getattr(self, "n_features_in_", None)
        if not (isinstance(n_train, Integral) and not isinstance(n_train, bool) and n_train >= 1):
            raise ValueError(f"n_train_ = {n_train!r} is not a count of training rows")
        if svc.kernel != "precomputed" or tuple(svc.shape_fit_) != (n_train, n_train):
            raise ValueError(f"svc_ is not an SVC of a precomputed kernel on the {n_train} training rows "
                             f"(kernel {svc.kernel!r}, shape_fit_ {tuple(svc.shape_fit_)})")
        sv = np.asarray(getattr(self, "support_vectors_", None))
        if sv.ndim != 2 or sv.shape != (len(svc.support_), width) or sv.dtype.kind != "f":
            raise ValueError(f"support_vectors_ of shape {sv.shape} ({sv.dtype}) for {len(svc.support_)} support "
                             f"vectors of {width} features")
        if not np.array_equal(np.asarray(self.classes_), np.asarray(svc.classes_)):
            raise ValueError(f"classes_ {np.asarray(self.classes_).tolist()} differ from svc_.classes_ "
                             f"{np.asarray(svc.classes_).tolist()}")

    def _kernel(self, X):
        check_is_fitted(self)
        self.check_fitted()
        # sigma, blocks, views and the head's settings are read again here: changed after fit (set_params), the
        # fitted support vectors and dual coefficients met another kernel and predictions moved without a word
        self._check_params_unchanged()
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32])
        K = np.zeros((len(X), self.n_train_))
        K[:, self.svc_.support_] = self._gram(X, self.support_vectors_)
        return K

    def predict(self, X):
        K = self._kernel(X)
        return self.svc_.predict(K)

    def decision_function(self, X):
        K = self._kernel(X)
        return self.svc_.decision_function(K)


def check_fitted_svc(svc) -> None:
    """ValueError when a fitted scikit-learn SVC's arrays do not fit together: libsvm's predict reads them
    without bounds checks (a dual coefficient matrix narrower than the support vectors crashed the process)."""
    def arr(name, kind, ndim):
        a = getattr(svc, name, None)
        if not isinstance(a, np.ndarray) or (kind and a.dtype.kind not in kind) or a.ndim != ndim:
            raise ValueError(f"svc {name} is not a {ndim}-D array of {'integers' if kind == 'iu' else 'numbers'}")
        return a

    classes = arr("classes_", "", 1)
    k = len(classes)
    n_support = arr("_n_support", "iu", 1)
    support = arr("support_", "iu", 1)
    if k < 2 or len(n_support) != k or (n_support < 0).any():
        raise ValueError(f"svc _n_support {n_support.tolist()} does not count the support vectors of {k} classes")
    n_sv = int(n_support.sum())
    if len(support) != n_sv:
        raise ValueError(f"svc has {len(support)} support indices but _n_support counts {n_sv}")
    pairs = k * (k - 1) // 2
    for name in ("_dual_coef_", "dual_coef_"):
        if arr(name, "f", 2).shape != (k - 1, n_sv):
            raise ValueError(f"svc {name} of shape {getattr(svc, name).shape}, not ({k - 1}, {n_sv}) for {k} "
                             f"classes and {n_sv} support vectors")
    for name in ("_intercept_", "intercept_"):
        if arr(name, "f", 1).shape != (pairs,):
            raise ValueError(f"svc {name} holds {len(getattr(svc, name))} numbers, not {pairs} (one per pair of "
                             f"its {k} classes)")
    for name in ("_probA", "_probB"):
        if len(arr(name, "f", 1)) not in (0, pairs):
            raise ValueError(f"svc {name} holds {len(getattr(svc, name))} numbers, not 0 or {pairs}")
    if getattr(svc, "_sparse", False) is not False:
        raise ValueError("svc was fitted on sparse data, which a model file does not hold")
    shape_fit = tuple(getattr(svc, "shape_fit_", ()))
    if len(shape_fit) != 2 or not all(isinstance(n, Integral) and not isinstance(n, bool) and n >= 1
                                      for n in shape_fit):
        raise ValueError(f"svc shape_fit_ {shape_fit} is not the shape of its training data")
    sv = arr("support_vectors_", "f", 2)
    if svc.kernel == "precomputed":
        # the support indices pick the columns of the precomputed kernel: its training rows
        if n_sv and (support.min() < 0 or support.max() >= shape_fit[0]):
            raise ValueError(f"svc support_ indices outside the {shape_fit[0]} training rows")
        if sv.size:
            raise ValueError("svc of a precomputed kernel holds support vectors")
    elif sv.shape != (n_sv, getattr(svc, "n_features_in_", None)):
        raise ValueError(f"svc support_vectors_ of shape {sv.shape}, not ({n_sv}, {svc.n_features_in_})")


HEAD_COMBINES = ("product", "sum")


def combine_head_kernel(K, L, weight: float, combine: str = "product"):
    """The conv + head kernel from the Gaussian kernel ``K`` (K2 of paper 004, eq. (31)) and the head's linear kernel ``L``.

    Parameters
    ----------
    K, L : ndarray (n, m)
        Gaussian kernel of the operator vectors and linear kernel ``<h, h'>``
        of the normalised heads, on the same pairs.
    weight : float in [0, 1]
        ``w``, the head's weight.
    combine : {"product", "sum"}
        ``"product"``: ``K ((1 - w) + w L)``, paper 004's pointwise product
        (section 5) at ``w = 1``, the operators alone at ``w = 0``; positive
        definite as the product of two positive definite kernels.
        ``"sum"``: ``(1 - w) K + w L``, the operators alone at ``w = 0`` and
        the head alone at ``w = 1``.

    Returns
    -------
    ndarray (n, m), float64
    """
    if combine not in HEAD_COMBINES:
        raise ValueError(f"head_combine must be one of {', '.join(HEAD_COMBINES)}, got {combine!r}")
    w = float(weight)
    if not 0.0 <= w <= 1.0:
        raise ValueError(f"head_weight must lie in [0, 1], got {weight!r}")
    if combine == "sum":
        return (1.0 - w) * K + w * L
    return K * ((1.0 - w) + w * L)


def aligned_head_weight(K, L, y) -> tuple[float, dict]:
    """The head weight ``w`` of the sum ``(1 - w) K + w L`` that maximises the centred alignment with the labels.

    alignf (:func:`streamcov.kernels.alignment_weights`; Cortes, Mohri and
    Rostamizadeh, JMLR 2012, section 3.2) on the two base kernels, each
    divided by the Frobenius norm of its centred Gram matrix: weights
    ``mu = (mu_K, mu_L)`` of ``K / ||K_c||_F`` and ``L / ||L_c||_F``. The
    same kernel up to a positive factor (which C absorbs; the SVM with an
    offset is unchanged by centring) is the sum of :func:`combine_head_kernel`
    with

        w = (mu_L / ||L_c||_F) / (mu_K / ||K_c||_F + mu_L / ||L_c||_F),

    whose diagonal stays 1 when both kernels have a unit diagonal (K2 and the
    linear kernel of unit heads), so C keeps the scale of the operators'
    kernel alone. Computed from training rows only.

    Parameters
    ----------
    K, L : array (n, n)
        The operators' Gaussian kernel K2 and the heads' linear kernel on the
        same n training images.
    y : array (n,)
        Their labels.

    Returns
    -------
    w : float in [0, 1]
    info : dict
        ``mu`` (the alignf weights of the normalised kernels), ``alignment``
        (the centred alignment of K, L and of the combination with the label
        kernel) and ``norms`` (the Frobenius norms of the centred kernels).
    """
    from ..kernels import _alignment, _center, alignment_weights, label_kernel

    K = np.asarray(K, dtype=np.float64)
    L = np.asarray(L, dtype=np.float64)
    mu = alignment_weights([K, L], y)   # validates K, L and y; neither kernel is constant after centring
    Kc, Lc, Yc = _center(K), _center(L), _center(label_kernel(y))
    norms = [float(np.linalg.norm(Kc)), float(np.linalg.norm(Lc))]
    sk, sl = mu[0] / norms[0], mu[1] / norms[1]
    w = float(sl / (sk + sl))
    # centring is linear: the centred sum is the sum of the centred kernels
    info = {"mu": [float(m) for m in mu], "norms": norms,
            "alignment": {"conv": _alignment(Kc, Yc), "head": _alignment(Lc, Yc),
                          "combined": _alignment(combine_head_kernel(Kc, Lc, w, "sum"), Yc)}}
    return w, info


def _fold_accuracy(K: np.ndarray, y: np.ndarray, tr: np.ndarray, te: np.ndarray, C: float) -> float:
    """Accuracy on rows ``te`` of an SVM on the precomputed kernel ``K`` trained on rows ``tr``
    (the split of scikit-learn's ``cross_val_score`` for a precomputed kernel)."""
    from sklearn.svm import SVC

    present = np.unique(y[tr])
    if len(present) == 1:
        # an inner fold whose training subjects performed one class only (small or unbalanced archives):
        # SVC refuses to fit it, and any classifier trained there predicts that class
        return float(np.mean(y[te] == present[0]))
    clf = SVC(kernel="precomputed", C=C).fit(K[np.ix_(tr, tr)], y[tr])
    return float(np.mean(clf.predict(K[np.ix_(te, tr)]) == y[te]))


def select_sigma_C(d2_train, y: np.ndarray, groups: np.ndarray, sigma_grid, C_grid, blocks=None, views: int = 1):
    """Grid search of (sigma, C) by leave-one-group-out CV on a precomputed kernel.

    ``d2_train``: squared distances, or one array per block with ``blocks``
    (:func:`block_kernel`). Returns ``(sigma, C, cv_accuracy, table)`` with
    ``table`` the CV accuracy of every pair (rows sigma, columns C). A grid
    of one pair has nothing to choose: no CV is run (``cv_accuracy`` None,
    ``table`` NaN), so that one training subject is enough. An inner fold
    whose training rows hold one class scores the constant prediction of
    that class.
    """
    from ..splits import inner_folds

    table = np.full((len(sigma_grid), len(C_grid)), np.nan)
    if table.size == 1:
        return float(sigma_grid[0]), float(C_grid[0]), None, table
    cv = inner_folds(y, groups)
    if all(len(np.unique(y[tr])) == 1 for tr, _ in cv):
        import warnings

        warnings.warn("the exact SVM's inner cross-validation: in every inner fold the training subjects performed "
                      "one class, so every (sigma, C) scores alike and the first of each grid is taken; give "
                      "one value to each grid, or more training subjects", stacklevel=2)
    for a, sigma in enumerate(sigma_grid):
        K = block_kernel(d2_train, blocks, sigma, views)
        for b, C in enumerate(C_grid):
            table[a, b] = np.mean([_fold_accuracy(K, y, tr, te, C) for tr, te in cv])
    a, b = np.unravel_index(np.argmax(table), table.shape)
    return float(sigma_grid[a]), float(C_grid[b]), float(table[a, b]), table


# off the diagonal, a Gaussian kernel within this of 0 everywhere is the identity, within this of 1 a constant
DEGENERATE_KERNEL = 1e-10


def _warn_degenerate_kernel(K: np.ndarray, sigma: float) -> None:
    """Warn when the chosen bandwidth leaves the SVM nothing to learn from: every pair of training rows at
    kernel value 0 (sigma far below their distances: the identity, each row its own class) or 1 (far above:
    a constant). Chance accuracy follows, and only the grid can change it."""
    import warnings

    kind = degenerate_kernel(K, DEGENERATE_KERNEL)
    if kind == "identity":
        warnings.warn(f"model.sigma_grid: the bandwidth chosen, sigma = {sigma:g}, is far below the distances "
                      f"between the training rows: the Gaussian kernel is the identity on them and the SVM cannot "
                      f"generalize; give larger values", stacklevel=3)
    elif kind == "constant":
        warnings.warn(f"model.sigma_grid: the bandwidth chosen, sigma = {sigma:g}, is far above the distances "
                      f"between the training rows: the Gaussian kernel is a constant on them and the SVM cannot "
                      f"tell them apart; give smaller values", stacklevel=3)


def exact_svm_fold(V: np.ndarray, y: np.ndarray, subjects: np.ndarray, train: np.ndarray,
                   test: np.ndarray, sigma_grid, C_grid, return_model: bool = False, blocks=None, views: int = 1):
    """Train on ``train`` rows with CV-chosen (sigma, C); accuracy on ``test`` rows.

    ``blocks``: ``[(width, weight)]`` of the descriptor (a sum of kernels);
    one block is the plain Gaussian kernel; ``views``: views per row (:class:`GaussianKernelSVC`).
    Returns the result dict, and the fitted :class:`GaussianKernelSVC` with ``return_model=True``.
    """
    blocks = None if blocks is None or (len(blocks) < 2 and views == 1) else [[int(w), float(c)] for w, c in blocks]
    d2_tr = block_distances(V[train], None, blocks, views)
    sigma, C, cv_acc, _ = select_sigma_C(d2_tr, y[train], subjects[train], sigma_grid, C_grid, blocks, views)
    _warn_degenerate_kernel(block_kernel(d2_tr, blocks, sigma, views), sigma)
    clf = GaussianKernelSVC(sigma=sigma, C=C, blocks=blocks, views=views).fit(V[train], y[train])
    pred = clf.predict(V[test])
    res = {"accuracy": float((pred == y[test]).mean()), "sigma": sigma, "C": C, "cv_accuracy": cv_acc}
    return (res, clf, pred) if return_model else res
