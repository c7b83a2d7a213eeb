"""``task = "image-classification"``: paper 004's methods in memory, with nested cross-validation.

Methods (paper names):

``e``              E: Frobenius distance between region covariances, Gaussian K2 + SVM
``loge``           LogE: Log-Euclidean distance (eq. (9)), Gaussian K2 + SVM
``stein``          Stein: symmetric Stein divergence, 1-nearest neighbour (as [11])
``hs``             HS: exact Hilbert-Schmidt distance of covariance operators (eq. (59))
``approx_hs``      HS between approximate (random Fourier) covariance operators (Lemma 6)
``loghs``          LogHS: exact Log-HS distance (eq. (16)), closed form via Gram matrices
``approx_loghs``   Approx LogHS: random Fourier features (eqs. (20), (21), (29))
``qapprox_loghs``  QApprox LogHS: quasi-random (Halton) Fourier features (appendix C)
``head``           ConvNet features only: linear-kernel SVM on the unit pooled head
                   (paper 004's x^fc baseline, Tables 4-5)

With ``[pixels] source = "cnn"`` the data matrix of an image is its
hypercolumns (section 5) and every method above runs on them (x^conv).
``head_weight`` (a grid in [0, 1]) adds the head, normalised by
``head_norm`` (``l2``, or ``power``: signed square root then unit norm,
:func:`~streamcov.descriptors.image.normalize_heads`): the kernel becomes
``K2 (x) ((1 - w) + w <h, h'>)``, paper 004's pointwise product of the
Gaussian kernel of the distance with the linear kernel of the heads
(``w = 1``; x^conv + x^fc), or with ``head_combine = "sum"`` the sum
``(1 - w) K2 + w <h, h'>`` (:func:`~streamcov.stream.exact.combine_head_kernel`).
``w`` and the combination (a grid of ``product`` and ``sum``) are chosen by
the inner CV like the other hyperparameters; ``w = 0`` is the operators
alone and the sum at ``w = 1`` the head alone, so a grid that holds both
ends lets the inner CV fall back to either kernel. ``head_weight =
"alignment"`` sets ``w`` of the sum without a grid: the maximum centred
alignment weights (alignf, Cortes, Mohri and Rostamizadeh 2012) of the K2
that the operators alone choose and the head kernel, on the training images
(:func:`select_and_test_aligned`). For the scalable path
(``sgd``) the kernel is realised explicitly: a tensor sketch of the K2
random features and the head for the product, their weighted
concatenation for the sum (:class:`~streamcov.features.HeadProductSketch`).

Classifiers: ``svc`` (SVC on the precomputed Gaussian kernel K2 of eq. (31)),
``1nn`` (nearest neighbour on the distance), and for ``approx_loghs`` /
``qapprox_loghs`` also ``sgd``: the scalable path, where K2 is replaced by
its random Fourier features and a linear SGDClassifier.

Hyperparameters are chosen, as in the paper ("all parameters were chosen by
cross-validation"), by an inner stratified cross-validation on the training
images of each split only (of whole groups where the split keeps them apart,
leave-objects-out: :func:`streamcov.splits.keeps_groups_apart`; 1-NN's
leave-one-out then seeks an image's neighbours outside its group): the K1
bandwidth ``sigma1`` (multiples of
sqrt(n_features) times the feature scale of the training images), the
regularizer ``gamma = mu``, the K2 bandwidth ``sigma2`` (multiples of the
median training distance) and the SVM ``C``. ``sigma1`` and ``sigma2`` keep
paper 004's ``exp(-d^2 / s^2)``; they are converted to streamcov's
convention (:mod:`streamcov.kernels`) where kernels are built. Every split's
details go to ``<output>/image_classification_details.json``, every test
image's prediction to ``<output>/predictions.csv``; the model of
the last split (methods with an explicit vector per image: e, loge,
approx_hs, approx_loghs, qapprox_loghs) to ``<output>/model``.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._config import map_threads, progress_bar
from ..descriptors import operators as ops
from ..descriptors.image import (ImageDescriptor, feature_moments, feature_scale, is_cnn, operator_frequencies,
                                 normalize_heads, operator_vectors, region_vectors)
from ..descriptors.pixels import (GREY_FIX, check_sampled_pixels, get_spec, image_covariances, n_sampled_pixels,
                                  named, pipeline_key, pixel_features)
from ..errors import ConfigError
from ..kernels import degenerate_kernel, distances, gaussian_kernel, median_distance, sigma_from_paper004
from .. import splits
from .schema import EVAL_METHODS, eval_classifier

METHODS = EVAL_METHODS   # the methods of paper 004 (the schema's list)
VECTOR_METHODS = ("e", "loge", "approx_hs", "approx_loghs", "qapprox_loghs", "head")
CLASSIFIERS = ("svc", "1nn", "sgd")


# ------------------------------------------------------------------ data
def load_dataset(data, progress: bool = False):
    """An :class:`~streamcov.data.imageio.ImageSet` from the ``[data]`` table."""
    from ..data.imageio import load_folders, skimage_textures

    if data.format == "skimage-textures":
        return skimage_textures(tuple(data.textures), int(data.patch), data.max_per_class)
    if data.format == "folders":
        if not Path(data.source).is_dir():
            raise ConfigError(f"data.source {data.source!r}: folder not found")
        images = load_folders(data.source, group_level=data.group_level, exclude=tuple(data.exclude),
                              progress=progress)
    else:
        from ..data.images import open_image_store
        images = open_image_store(data.store).to_image_set()
    if data.max_per_class is not None:
        keep = np.sort(np.concatenate([np.flatnonzero(images.labels == c)[:int(data.max_per_class)]
                                       for c in np.unique(images.labels)]))
        images.images = [images.images[i] for i in keep]
        images.ids = [images.ids[i] for i in keep]
        images.labels = images.labels[keep]
        images.groups = images.groups[keep]
    return images


def extract_features(images, spec, ids=None, progress: bool = False, dtype=np.float32) -> list[np.ndarray]:
    """Per-pixel features of every image; the numba kernels release the GIL, so threads run in parallel."""
    images = list(images)

    names = ids if ids is not None else [f"image {i}" for i in range(len(images))]
    spec = get_spec(spec)
    shapes = [np.shape(im)[:2] for im in images]
    check_sampled_pixels(shapes, spec.stride, names)
    # every image's features are kept (the grid search reuses them), plus the float64 features of the images
    # in flight: large photographs fill the memory long before any distance matrix does
    from .._config import check_memory, thread_plan

    pixels = np.array([n_sampled_pixels(h, w, spec.stride) for h, w in shapes], dtype=np.float64)
    check_memory(spec.n_features * (np.dtype(dtype).itemsize * pixels.sum()
                                    + 8.0 * np.sort(pixels)[-thread_plan().cores:].sum()),
                 f"the per-pixel features of {len(images)} images ({int(pixels.sum())} sampled pixels x "
                 f"{spec.n_features} features, kept for the grid search)",
                 "raise pixels.stride, or run the out-of-core task (task = \"image-stream-classification\"), "
                 "which holds one image's features at a time")

    def one(i):
        try:
            return pixel_features(images[i], spec, names[i]).astype(dtype)
        except ValueError as exc:
            raise ConfigError(named(names[i], exc)) from None

    pixel_features(images[0][:2, :2], spec)  # compile once before threading
    with progress_bar(map_threads(one, range(len(images))), progress, total=len(images), desc="pixel features",
                      unit="img") as it:
        return list(it)


def extract_matrices(images, spec, ids=None, progress: bool = False, maps: bool = True):
    """``(feats, heads)``: the data matrix of every image and, for ConvNet features, the raw pooled heads
    (``maps = False``, for the head alone: feats None).

    Hand-crafted features: :func:`extract_features`, heads None. ConvNet
    features (:mod:`streamcov.descriptors.cnn`): batches of images through
    onnxruntime in as many threads as the thread plan has cores, one
    onnxruntime thread each (BLAS at one thread).
    """
    if not is_cnn(spec):
        return extract_features(images, spec, ids=ids, progress=progress), None
    from .._config import thread_plan
    from ..descriptors.cnn import extract
    from .._config import blas_threads

    names = ids if ids is not None else [f"image {i}" for i in range(len(images))]
    try:
        with blas_threads(1):
            return extract(images, spec, names=names, threads=1, jobs=thread_plan().cores, maps=maps)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def subsample(f, m_max: int, seed: int = 0):
    """At most ``m_max`` pixels of a feature matrix, drawn without replacement (fixed seed)."""
    if m_max is None or len(f) <= m_max:
        return f
    rng = np.random.default_rng(seed)
    return f[np.sort(rng.choice(len(f), m_max, replace=False))]


def scale_of(feats, idx, scaling: str) -> np.ndarray:
    """The feature scale of the pixels of images ``idx``."""
    return feature_scale(feature_moments(feats[i] for i in idx), scaling)


# ----------------------------------------------------------- representations
@dataclass
class Candidate:
    params: dict
    D: np.ndarray                     # distances between the images of `idx` (in that order)
    vectors: np.ndarray | None = None  # the vectors behind D, for methods that have them


def approx_operator_vectors(feats, idx, scale, sigma1, gammas, D, kind, seed, progress=False,
                            what="approx_loghs"):
    """Per image of ``idx``: its approximate covariance operator (eq. (20)) as vectors.

    One (len(idx), p) float32 array per gamma of log vectors, or a single one
    of ``vec(C)`` for ``approx_hs``. ``sigma1`` is paper 004's multiple of
    ``sqrt(n_features)`` feature scales. Only the feature scale matters: a
    common shift of the features rotates each (cos, sin) pair by the same
    angle in every image, which leaves all distances unchanged.
    """
    W = operator_frequencies(len(scale), D, sigma_from_paper004(sigma1), kind, seed, scale)
    batch = 8
    starts = list(range(0, len(idx), batch))
    log = what != "approx_hs"

    def work(a):
        out = operator_vectors((feats[i] for i in idx[a:a + batch]), W, list(gammas) if log else None,
                               log=log, dtype=np.float32, batch=batch, n_jobs=1)
        return out if log else [out]

    outs = None
    with progress_bar(zip(starts, map_threads(work, starts)), progress, total=len(starts),
                      desc=f"{kind} operators sigma1={sigma1:.3g}", unit="batch") as it:
        for a, vecs in it:
            if outs is None:
                outs = [np.empty((len(idx), v.shape[1]), dtype=np.float32) for v in vecs]
            for k, v in enumerate(vecs):
                outs[k][a:a + len(v)] = v
    return outs


def build_candidates(method: str, feats, idx, scale, grids: dict, mcfg, seed: int, raw_covs=None,
                     progress: bool = False) -> list[Candidate]:
    """Distance matrices over the images ``idx`` for every representation hyperparameter."""
    n = len(scale)
    gammas = [float(g) for g in grids["gamma"]]
    cands = []
    if method in ("e", "loge"):
        vecs = region_vectors(raw_covs[idx], scale, gammas if method == "loge" else None, log=method == "loge")
        if method == "e":
            return [Candidate({}, distances(vecs), vecs)]
        return [Candidate({"gamma": g}, distances(v), v) for g, v in zip(gammas, vecs)]
    if method == "stein":
        covs = raw_covs[idx] / np.outer(scale, scale)[None]
        return [Candidate({"gamma": g}, ops.stein_divergences(covs, gamma=g)) for g in gammas]
    if method in ("approx_loghs", "qapprox_loghs", "approx_hs"):
        kind = "halton" if method == "qapprox_loghs" else "random"
        for rel in grids["sigma1"]:
            vecs = approx_operator_vectors(feats, idx, scale, rel, gammas, mcfg.D, kind, seed, progress, method)
            if method == "approx_hs":
                cands.append(Candidate({"sigma1": rel}, distances(vecs[0]), vecs[0]))
                continue
            for g, v in zip(gammas, vecs):
                cands.append(Candidate({"sigma1": rel, "gamma": g}, distances(v), v))
        if method != "approx_hs":
            _refuse_logs_lost(cands)
        return cands
    if method in ("hs", "loghs"):
        sub = [subsample(feats[i].astype(np.float64) / scale, mcfg.max_pixels_exact, seed) for i in idx]
        for rel in grids["sigma1"]:
            s1 = sigma_from_paper004(float(rel) * np.sqrt(n))
            if method == "hs":
                cands.append(Candidate({"sigma1": rel}, ops.pairwise_hs(sub, sigma=s1)))
                continue
            for g in gammas:
                cands.append(Candidate({"sigma1": rel, "gamma": g},
                                       ops.pairwise_log_hs(sub, sigma=s1, gamma=g, progress=progress)))
        return cands
    raise ValueError(f"unknown method {method!r}; known: {', '.join(METHODS)}")


# ------------------------------------------------------------ model selection
def _inner_folds(y, n_inner, seed, groups=None):
    """The inner folds of the training rows' labels ``y``: of whole groups where ``groups`` (theirs) are given,
    for a protocol that keeps groups apart (:func:`streamcov.splits.keeps_groups_apart`)."""
    return splits.inner_folds(y, groups, n_splits=n_inner, seed=seed, group_folds=groups is not None)


SGD_INNER_FOLDS = 3   # the sgd classifier's inner cross-validation: at most this many folds (each fits the map)


def ungrouped_inner_folds_warning(classifier: str, split_idx, labels, groups) -> str | None:
    """The line that says the inner folds of some outer folds are of images although the split keeps ``groups``
    apart (a class with one training group: :func:`streamcov.splits.groups_to_keep`), or None."""
    if groups is None:
        return None
    labels, groups = np.asarray(labels), np.asarray(groups)
    loose = [name for name, tr, _ in split_idx if len(tr) and splits.groups_to_keep(labels[tr], groups[tr]) is None]
    if not loose:
        return None
    how = "1-NN's leave-one-out" if classifier == "1nn" else "the inner cross-validation"
    return (f"split.kind keeps groups apart, but a class has one group among the training images of {len(loose)} "
            f"fold(s) ({', '.join(map(repr, loose[:3]))}{', ...' if len(loose) > 3 else ''}): there {how} is of "
            f"images, views of one group on both sides of it, and may choose for a protocol easier than the "
            f"outer one; give each class 3 groups or more")


def inner_folds_warning(mcfg, classifier: str, split_idx, labels, label_names, groups=None) -> str | None:
    """The line that says ``method.inner_folds`` was lowered, once for the run, or None: the inner folds are
    stratified, so no more of them than the training images of a fold's smallest class, or with ``groups``
    (a protocol that keeps them apart) its groups (:func:`streamcov.splits.inner_folds`), and the sgd classifier
    uses at most :data:`SGD_INNER_FOLDS` (said when method.inner_folds was given). None for 1nn (leave-one-out,
    no inner folds)."""
    if classifier == "1nn":
        return None
    n_inner = int(mcfg.inner_folds)
    cap = min(n_inner, SGD_INNER_FOLDS) if classifier == "sgd" else n_inner
    labels = np.asarray(labels)
    used, smallest = set(), None
    for name, tr, _ in split_idx:
        counts = np.bincount(labels[tr], minlength=len(label_names)) if len(tr) else np.zeros(1, int)
        present = np.flatnonzero(counts)
        if not len(present):
            continue
        c = int(present[np.argmin(counts[present])])
        if counts[c] < 2:   # refused here, where the class and the fold have names (splits.inner_folds has codes)
            raise ConfigError(f"every class needs at least 2 training images for the inner cross-validation "
                              f"(method.inner_folds), but class {str(label_names[c])!r} has 1 in the training "
                              f"images of fold {name!r}; give that class more images, or a [split] that trains on "
                              f"more of them")
        kept = None if groups is None else splits.groups_to_keep(labels[tr], np.asarray(groups)[tr])
        if kept is not None:   # whole groups go to an inner fold: counted by class (present: sorted codes)
            counts[present] = splits.groups_per_class(labels[tr], kept)
            c = int(present[np.argmin(counts[present])])
        used.add(splits.inner_fold_count(labels[tr], cap, kept))   # the folds splits.inner_folds makes
        if smallest is None or counts[c] < smallest[0]:
            smallest = (int(counts[c]), c, name, kept is not None)
    if not used or max(used) >= n_inner:
        return None
    reasons = []
    if cap < n_inner and "inner_folds" in mcfg.model_fields_set:
        reasons.append(f"the sgd classifier uses at most {SGD_INNER_FOLDS}")
    if smallest is not None and smallest[0] < cap:
        n, c, fold, grouped = smallest
        reasons.append(f"the smallest class of a fold's training {'groups' if grouped else 'images'} has {n} (class "
                       f"{str(label_names[c])!r}, fold {fold!r}; the inner folds are stratified"
                       f"{', of whole groups' if grouped else ''})")
    if not reasons:
        return None
    if len(used) == 1:
        return (f"method.inner_folds = {n_inner}, but {' and '.join(reasons)}: {min(used)} inner folds used; "
                f"set method.inner_folds = {min(used)} to say so")
    return (f"method.inner_folds = {n_inner}, but {' and '.join(reasons)}: {min(used)} to {max(used)} inner "
            f"folds used (by outer fold)")


def _k2(D, s2, med):
    """K2 of eq. (31) on distances D with paper 004's bandwidth ``s2 x median``."""
    return gaussian_kernel(D ** 2, sigma_from_paper004(s2 * med))


#: an off-diagonal kernel value this close to 1 (or to 0) on every pair of training images: a constant (or the
#: identity), from which an SVM learns nothing
DEGENERATE_KERNEL = 1e-6


#: log(I + C / gamma) whose entries all stay below this in magnitude: C / gamma below float64's rounding of I,
#: and the logs are the eigensolver's rounding (entries near 1e-15)
LOST_IN_ROUNDING = 1e-12


def _refuse_logs_lost(cands) -> None:
    """Refuse a grid whose every gamma is so far above the operators that ``log(I + C / gamma)`` is the rounding
    of I: the vectors were noise of about 1e-15, the median bandwidth scaled it up into a kernel, and the SVM
    reported chance accuracy without a word (``method.gamma = 1e20``)."""
    tops = [float(np.abs(c.vectors).max(initial=0.0)) for c in cands if c.vectors is not None]
    if tops and 0.0 < max(tops) < LOST_IN_ROUNDING:
        gammas = sorted({c.params["gamma"] for c in cands if "gamma" in c.params})
        raise ConfigError(f"method.gamma = {', '.join(f'{g:g}' for g in gammas)}: far above the covariance operators "
                          f"(every entry of log(I + C / gamma) is below {LOST_IN_ROUNDING:g}, largest {max(tops):.2g}): "
                          f"I + C / gamma is I to within rounding and its logarithm is rounding noise; lower "
                          f"method.gamma")


def _refuse_degenerate_kernel(K: np.ndarray) -> None:
    """Refuse a grid whose every kernel, on the training images, is a constant or the identity (``K``: the first
    point's, which names the kind): the SVM reported chance accuracy without a word (``method.sigma2`` far
    above or below the distances). Such points of a grid with others are left out of the selection
    (:func:`select_and_test_svc`): on unbalanced classes the identity's majority vote could win the CV."""
    kind = degenerate_kernel(K, DEGENERATE_KERNEL)
    if kind == "constant":
        raise ConfigError(f"the kernel between the {len(K)} training images is a constant (every value within "
                          f"{DEGENERATE_KERNEL:g} of 1) for every setting of the grid: nothing can be learned from "
                          f"it; a setting swamps the data, e.g. method.gamma far above the covariances, or "
                          f"method.sigma2 far above the distances")
    if kind == "identity":
        raise ConfigError(f"the kernel between the {len(K)} training images is the identity (every value between "
                          f"two images below {DEGENERATE_KERNEL:g}) for every setting of the grid: nothing can be "
                          f"learned from it; give larger values of method.sigma2")


def head_options(grids) -> list:
    """The ``(combine, w)`` pairs of the head grid: ``grids["head_combine"]`` x ``grids["head_weight"]``.

    ``w = 0`` is the operators alone under either combination and appears
    once, as ``("product", 0.0)``. ``[None]`` without a head weight grid.
    """
    if grids.get("head_weight") is None:
        return [None]
    opts = []
    for combine in grids.get("head_combine", ["product"]):
        for w in grids["head_weight"]:
            opt = ("product", 0.0) if float(w) == 0.0 else (str(combine), float(w))
            if opt not in opts:
                opts.append(opt)
    return opts


def select_and_test_svc(cands, y, tr, te, grids, n_inner=5, seed=0, head_kernel=None, groups=None):
    """Inner CV over candidates x sigma2 x (head combination x head weight) x C with SVC on K2 = exp(-d^2 / (sigma2 median)^2); then test.

    sigma2 is a multiple of the median training distance. With
    ``head_kernel`` (the linear kernel of the normalised heads, same rows as
    the candidates' distances) the kernel is
    :func:`~streamcov.stream.exact.combine_head_kernel` of K2 and the head
    kernel for each pair of :func:`head_options`: ``K2 ((1 - w) + w L)``
    (paper 004's product at ``w = 1``) or ``(1 - w) K2 + w L``. Ties go to
    the earliest grid point (order: candidate, sigma2, combination, weight,
    C). The grid runs in threads (libsvm releases the GIL), one
    (candidate, sigma2) per task.
    """
    from sklearn.svm import SVC

    from ..stream.exact import combine_head_kernel

    ytr = y[tr]
    folds = _inner_folds(ytr, n_inner, seed, None if groups is None else groups[tr])
    meds = [median_distance(c.D[np.ix_(tr, tr)]) for c in cands]
    opts = head_options(grids) if head_kernel is not None else [None]
    Cs = [float(C) for C in grids["C"]]
    tasks = [(ci, float(s2)) for ci in range(len(cands)) for s2 in grids["sigma2"]]
    Ltr = None if head_kernel is None else head_kernel[np.ix_(tr, tr)]

    def kernel(ci, s2, opt, rows=None, cols=None):
        D = cands[ci].D if rows is None else cands[ci].D[np.ix_(rows, cols)]
        K = _k2(D, s2, meds[ci])
        if opt is not None:
            Lh = head_kernel if rows is None else head_kernel[np.ix_(rows, cols)]
            K = combine_head_kernel(K, Lh, opt[1], opt[0])
        return K

    def score(task):
        ci, s2 = task
        K2 = _k2(cands[ci].D[np.ix_(tr, tr)], s2, meds[ci])
        out = []
        for opt in opts:
            K = K2 if opt is None else combine_head_kernel(K2, Ltr, opt[1], opt[0])
            # nothing to learn: not a candidate (its majority vote may win the CV)
            if degenerate_kernel(K, DEGENERATE_KERNEL) is not None:
                out.extend([-np.inf] * len(Cs))
                continue
            for C in Cs:
                accs = []
                for a, b in folds:
                    clf = SVC(kernel="precomputed", C=C).fit(K[np.ix_(a, a)], ytr[a])
                    accs.append(np.mean(clf.predict(K[np.ix_(b, a)]) == ytr[b]))
                out.append(float(np.mean(accs)))
        return out

    grid = [(ci, s2, opt, C) for ci, s2 in tasks for opt in opts for C in Cs]
    scores = [v for vals in map_threads(score, tasks) for v in vals]
    k = int(np.argmax(scores))  # first maximum
    ci, s2, opt, C = grid[k]
    K = kernel(ci, s2, opt)
    if scores[k] == -np.inf:   # every point of the grid
        _refuse_degenerate_kernel(K[np.ix_(tr, tr)])
    clf = SVC(kernel="precomputed", C=C).fit(K[np.ix_(tr, tr)], ytr)
    pred = clf.predict(K[np.ix_(te, tr)])
    params = dict(cands[ci].params, sigma2=s2, C=C)
    if opt is not None:
        params["head_combine"], params["head_weight"] = opt
    return float(np.mean(pred == y[te])), params, scores[k], {"candidate": ci, "median": meds[ci], "pred": pred}


def select_and_test_aligned(cands, y, tr, te, grids, head_kernel, n_inner=5, seed=0, groups=None):
    """conv + head with the head's weight by centred kernel alignment (``head_weight = "alignment"``); then test.

    1. K2: the candidate and sigma2 that the inner CV of the operators alone
       chooses (:func:`select_and_test_svc` without the head: the same
       grids, folds and ties, so the same K2 as the conv-alone pipeline).
    2. w: :func:`~streamcov.stream.exact.aligned_head_weight` of K2 and the
       head kernel on the training images (alignf of Cortes, Mohri and
       Rostamizadeh 2012 on the two kernels, each normalised by the Frobenius
       norm of its centred Gram matrix); the kernel is the sum
       ``(1 - w) K2 + w L``.
    3. C: inner CV over ``grids["C"]`` on the same inner folds, with w
       recomputed from the training part of every inner fold (the held-out
       part's labels never set the weight that is scored on it).

    Returns ``(accuracy, params, inner_cv_score, fit)`` like
    :func:`select_and_test_svc`; ``params`` holds ``head_combine = "sum"``
    and the chosen ``head_weight``, ``fit["alignment"]`` the alignf details
    and the conv-alone choice with its test accuracy.
    """
    from sklearn.svm import SVC

    from ..stream.exact import aligned_head_weight, combine_head_kernel

    conv_acc, conv_params, conv_cv, conv_fit = select_and_test_svc(cands, y, tr, te, grids, n_inner, seed,
                                                                   groups=groups)
    ci, med, s2 = conv_fit["candidate"], conv_fit["median"], conv_params["sigma2"]
    ytr = y[tr]
    K2 = _k2(cands[ci].D, s2, med)
    K2tr, Ltr = K2[np.ix_(tr, tr)], head_kernel[np.ix_(tr, tr)]
    folds = _inner_folds(ytr, n_inner, seed, None if groups is None else groups[tr])
    Cs = [float(C) for C in grids["C"]]
    inner_w = []
    hits = np.zeros((len(folds), len(Cs)))
    for f, (a, b) in enumerate(folds):
        wf, _ = aligned_head_weight(K2tr[np.ix_(a, a)], Ltr[np.ix_(a, a)], ytr[a])
        inner_w.append(wf)
        K = combine_head_kernel(K2tr, Ltr, wf, "sum")
        for j, C in enumerate(Cs):
            clf = SVC(kernel="precomputed", C=C).fit(K[np.ix_(a, a)], ytr[a])
            hits[f, j] = np.mean(clf.predict(K[np.ix_(b, a)]) == ytr[b])
    scores = hits.mean(axis=0)
    j = int(np.argmax(scores))   # first maximum
    w, info = aligned_head_weight(K2tr, Ltr, ytr)
    K = combine_head_kernel(K2, head_kernel, w, "sum")
    clf = SVC(kernel="precomputed", C=Cs[j]).fit(K[np.ix_(tr, tr)], ytr)
    pred = clf.predict(K[np.ix_(te, tr)])
    params = dict(cands[ci].params, sigma2=s2, C=Cs[j], head_combine="sum", head_weight=w)
    info.update(inner_weights=inner_w, inner_cv_by_C=[float(v) for v in scores], conv_params=conv_params,
                conv_inner_cv=conv_cv, conv_accuracy=conv_acc)
    return float(np.mean(pred == y[te])), params, float(scores[j]), {"candidate": ci, "median": med,
                                                                     "alignment": info, "pred": pred}


def select_and_test_linear(L, y, tr, te, grids, n_inner=5, seed=0, groups=None):
    """Inner CV over C of an SVC on the precomputed linear kernel ``L`` (the head alone); then test."""
    from sklearn.svm import SVC
    ytr = y[tr]
    folds = _inner_folds(ytr, n_inner, seed, None if groups is None else groups[tr])
    Ltr = L[np.ix_(tr, tr)]

    def score(C):
        return float(np.mean([np.mean(SVC(kernel="precomputed", C=C).fit(Ltr[np.ix_(a, a)], ytr[a])
                                      .predict(Ltr[np.ix_(b, a)]) == ytr[b]) for a, b in folds]))

    Cs = [float(C) for C in grids["C"]]
    scores = list(map_threads(score, Cs))
    k = int(np.argmax(scores))
    clf = SVC(kernel="precomputed", C=Cs[k]).fit(Ltr, ytr)
    pred = clf.predict(L[np.ix_(te, tr)])
    return float(np.mean(pred == y[te])), {"C": Cs[k]}, scores[k], {"pred": pred}


def select_and_test_1nn(cands, y, tr, te, groups=None):
    """Leave-one-out 1-NN accuracy on the training images picks the candidate; then test. With ``groups`` (a
    protocol that keeps them apart) an image's neighbours are sought outside its group: leave one group out,
    as the test images have no view of their object among the training images."""
    ytr = y[tr]
    best = (-1.0, 0)
    kept = None if groups is None else splits.groups_to_keep(ytr, groups[tr])   # a class of one group: images
    same = None if kept is None else kept[:, None] == kept[None, :]
    for ci, cand in enumerate(cands):
        Dtr = cand.D[np.ix_(tr, tr)].copy()
        np.fill_diagonal(Dtr, np.inf)
        if same is not None:
            Dtr[same] = np.inf
        score = float(np.mean(ytr[np.argmin(Dtr, axis=1)] == ytr))
        if score > best[0] + 1e-12:
            best = (score, ci)
    score, ci = best
    pred = ytr[np.argmin(cands[ci].D[np.ix_(te, tr)], axis=1)]
    return float(np.mean(pred == y[te])), dict(cands[ci].params), score, {"candidate": ci, "pred": pred}


def _k2_features(R, s2, med, seed, head=None):
    """Random features of K2 (bandwidth ``s2 x med``, paper 004's convention); with ``head = (combine, w)``
    the explicit features of K2 combined with the head's kernel, for rows [v, normalised head]."""
    from ..features import GaussianRandomFeatures, HeadProductSketch

    sigma = sigma_from_paper004(float(s2) * med)
    if head is None:
        return GaussianRandomFeatures(n_components=R, sigma=sigma, random_state=seed)
    return HeadProductSketch(n_components=R, sigma=sigma, head_combine=head[0], head_weight=float(head[1]),
                             random_state=seed)


#: training rows whose pairwise distances give the median of the scalable path's bandwidth (a random sample)
MEDIAN_ROWS = 500


def select_and_test_sgd(method, feats, y, idx, tr, te, scale, grids, mcfg, seed, n_inner=3,
                        progress=False, cache=None, heads=None, groups=None):
    """Scalable path: vec(log(C_D + gamma I)) -> random features of K2 -> SGDClassifier.

    ``tr``/``te`` index into ``idx``. Vectors of one sigma1 are held at a time,
    unless ``cache`` (a dict) keeps them across calls with the same ``idx`` and scale.
    With ``heads`` (normalised head vectors of all images) and ``grids["head_weight"]``
    the rows are ``[v, h]`` and the map is the explicit map of the conv + head kernel
    (:class:`~streamcov.features.HeadProductSketch`) for each pair of :func:`head_options`.
    """
    from sklearn.linear_model import SGDClassifier

    kind = "halton" if method == "qapprox_loghs" else "random"
    weights = [None] if heads is None else head_options(grids)
    R = int(mcfg.n_components)
    epochs = int(mcfg.epochs)
    ytr = y[idx][tr]
    folds = _inner_folds(ytr, n_inner, seed, None if groups is None else np.asarray(groups)[idx][tr])
    best = (-1.0, None)
    kept = None

    def make_sgd(C, n_train):
        return SGDClassifier(loss="hinge", alpha=1.0 / (float(C) * n_train), max_iter=epochs, tol=None,
                             average=True, random_state=seed)

    for rel in grids["sigma1"]:
        if cache is not None and rel in cache:
            vecs = cache[rel]
        else:
            vecs = approx_operator_vectors(feats, idx, scale, float(rel), grids["gamma"], mcfg.D, kind, seed,
                                           progress)
            if cache is not None:
                cache[rel] = vecs
        # the median distance of up to 500 training rows drawn at random (the first 500 were the first classes':
        # the training rows are in class order)
        ref = np.sort(np.random.default_rng(seed).permutation(len(tr))[:MEDIAN_ROWS])
        for g, v in zip(grids["gamma"], vecs):
            med = median_distance(distances(v[tr][ref]))
            rows = v if heads is None else np.hstack([v, heads[idx].astype(v.dtype)])
            for s2 in grids["sigma2"]:
                for w in weights:
                    fmap = _k2_features(R, s2, med, seed, w).fit(rows[tr])
                    Z = fmap.transform(rows[tr])
                    for C in grids["C"]:
                        accs = []
                        for a, b in folds:
                            clf = make_sgd(C, len(a)).fit(Z[a], ytr[a])
                            accs.append(np.mean(clf.predict(Z[b]) == ytr[b]))
                        score = float(np.mean(accs))
                        if score > best[0] + 1e-12:
                            best = (score, dict(sigma1=float(rel), gamma=float(g), sigma2=float(s2),
                                                C=float(C), median=med,
                                                **({} if w is None else {"head_combine": w[0],
                                                                         "head_weight": w[1]})))
                            kept = rows
    score, p = best
    head = (p["head_combine"], p["head_weight"]) if "head_weight" in p else None
    fmap = _k2_features(R, p["sigma2"], p["median"], seed, head).fit(kept[tr])
    clf = make_sgd(p["C"], len(tr)).fit(fmap.transform(kept[tr]), ytr)
    pred = clf.predict(fmap.transform(kept[te]))
    med = p.pop("median")
    return float(np.mean(pred == y[idx][te])), p, score, {"rff": fmap, "clf": clf, "median": med, "pred": pred}


# ----------------------------------------------------------------- run it all
def evaluate(method: str, feats, labels, split_idx, mcfg, classifier=None, raw_covs=None, seed: int = 0,
             progress: bool = False, heads=None, groups=None) -> dict:
    """Run one method over all splits; returns accuracies and chosen hyperparameters per split.

    Parameters
    ----------
    feats : list of arrays (m_i, n)
        Per-pixel features of every image.
    labels : array (N,)
    split_idx : list of (name, train_idx, test_idx)
    mcfg : the ``[method]`` table
        ``standardize``: feature scale from the training images of each split
        (``train``: representations recomputed per split), or from all images
        once (``all``: no labels used; representations shared by the splits);
        not read by the ``head`` method (reported as None), nor is ``scaling``.
    raw_covs : array (N, n, n), optional
        Region covariances of the unscaled features (e, loge, stein).
    heads : array (N, 1280), optional
        ConvNet pooled heads (raw), normalised by ``mcfg.head_norm``
        (:func:`~streamcov.descriptors.image.normalize_heads`): the ``head``
        method, and conv + head with ``mcfg.head_weight`` (and
        ``mcfg.head_combine``; ``head_weight = "alignment"``:
        :func:`select_and_test_aligned`).
    groups : array (N,), optional
        The images' groups, given when the splits keep groups apart
        (:func:`streamcov.splits.keeps_groups_apart`: leave-objects-out): the
        inner cross-validation then keeps each group's images in one inner
        fold too.
    """
    grids = {k: mcfg.grid(k) for k in ("sigma1", "gamma", "sigma2", "C")}
    use_head = getattr(mcfg, "head_weight", None) is not None
    if (use_head or method == "head") and heads is None:
        raise ConfigError(f"method {method!r}{' with head_weight' if use_head else ''} needs the ConvNet's pooled "
                          f"heads: [pixels] source = \"cnn\" with head = true")
    aligned = use_head and getattr(mcfg, "head_alignment", False)
    if aligned and classifier not in (None, "svc"):
        raise ConfigError(f'method.head_weight = "alignment" needs the svc classifier, got {classifier!r}')
    if use_head and not aligned:
        grids["head_weight"] = mcfg.grid("head_weight")
        grids["head_combine"] = mcfg.combine_grid()
    elif aligned:
        grids["head_weight"], grids["head_combine"] = "alignment", ["sum"]
    head_norm = getattr(mcfg, "head_norm", "l2")
    unit = None if heads is None else normalize_heads(heads, head_norm).astype(np.float64)
    classifier = eval_classifier(method, classifier)
    # the head alone (unit pooled heads) measures no feature scale: standardize and scaling play no part
    standardize, scaling = (None, None) if method == "head" else (mcfg.standardize, mcfg.scaling)
    n_inner = int(mcfg.inner_folds)
    labels = np.asarray(labels)
    results, last, predictions = [], None, []
    t0 = time.perf_counter()
    universe = np.unique(np.concatenate([np.concatenate([a, b]) for _, a, b in split_idx]))
    pos = np.full(len(labels), -1)
    pos[universe] = np.arange(len(universe))
    shared = None
    sgd_cache = {} if standardize == "all" else None
    all_scale = scale_of(feats, universe, scaling) if standardize == "all" else None
    if standardize == "all" and classifier != "sgd" and method != "head":
        shared = build_candidates(method, feats, universe, all_scale, grids, mcfg, seed, raw_covs=raw_covs,
                                  progress=progress)
    g = None if groups is None else np.asarray(groups)[universe]   # as y = labels[universe]
    L = None
    if method == "head" or (use_head and classifier != "sgd"):
        L = unit[universe] @ unit[universe].T
    for name, tr_g, te_g in split_idx:
        ts = time.perf_counter()
        if method == "head":
            y = labels[universe]
            tr, te = pos[tr_g], pos[te_g]
            acc, params, cv, fit = select_and_test_linear(L, y, tr, te, grids, n_inner, seed, groups=g)
            last = {"params": params, "scale": None, "classifier": "linear", "vectors": unit[universe][tr],
                    "y": y[tr]}
        elif classifier == "sgd":
            if standardize == "all":   # vectors of all images once, shared by the splits
                idx, tr, te, scale = universe, pos[tr_g], pos[te_g], all_scale
            else:
                idx = np.concatenate([tr_g, te_g])
                tr = np.arange(len(tr_g))
                te = np.arange(len(tr_g), len(idx))
                scale = scale_of(feats, tr_g, scaling)
            acc, params, cv, fit = select_and_test_sgd(method, feats, labels, idx, tr, te, scale, grids, mcfg,
                                                       seed, n_inner=min(n_inner, SGD_INNER_FOLDS),
                                                       progress=progress,
                                                       cache=sgd_cache, heads=unit if use_head else None,
                                                       groups=groups)
            last = {"params": params, "scale": scale, "fit": fit, "classifier": "sgd"}
        else:
            scale = all_scale if shared is not None else scale_of(feats, tr_g, scaling)
            cands = shared if shared is not None else build_candidates(method, feats, universe, scale, grids,
                                                                      mcfg, seed, raw_covs=raw_covs,
                                                                      progress=progress)
            y = labels[universe]
            tr, te = pos[tr_g], pos[te_g]
            if classifier == "svc":
                if aligned:
                    acc, params, cv, fit = select_and_test_aligned(cands, y, tr, te, grids, L, n_inner, seed,
                                                                   groups=g)
                else:
                    acc, params, cv, fit = select_and_test_svc(cands, y, tr, te, grids, n_inner, seed,
                                                               head_kernel=L if use_head else None, groups=g)
                cand = cands[fit["candidate"]]
                vecs = None if cand.vectors is None else cand.vectors[tr]
                if vecs is not None and use_head:
                    vecs = np.hstack([vecs, unit[universe][tr].astype(vecs.dtype)])
                last = {"params": params, "scale": scale, "classifier": "svc", "median": fit["median"],
                        "vectors": vecs, "y": y[tr]}
            else:
                acc, params, cv, fit = select_and_test_1nn(cands, y, tr, te, groups=g)
                last = None
        predictions.append((name, te_g, fit["pred"]))   # label codes, in the order of te_g
        results.append({"split": name, "accuracy": acc, "inner_cv_accuracy": cv, "params": params,
                        "n_train": int(len(tr_g)), "n_test": int(len(te_g)),
                        "seconds": time.perf_counter() - ts})
        if aligned:
            results[-1]["alignment"] = fit["alignment"]
        if progress:
            # progress, on stderr: stdout holds the result alone (`streamcov run --demo images > r.json`)
            print(f"{method} {name}: accuracy {acc:.4f} (inner CV {cv:.4f}) {params}", file=sys.stderr, flush=True)
    accs = np.array([r["accuracy"] for r in results])
    return {
        "method": method, "classifier": classifier, "accuracy": float(accs.mean()),
        "accuracy_std": float(accs.std()), "n_folds": len(results),
        **splits.rows_per_fold(results),
        "standardize": standardize, "scaling": scaling, "seconds": time.perf_counter() - t0,
        "head_weight_grid": grids.get("head_weight"), "head_combine_grid": grids.get("head_combine"),
        "head_norm": head_norm if heads is not None and (use_head or method == "head") else None,
        "splits": results, "_last": last, "_predictions": predictions,
    }


def _provenance(cfg, data, store=None) -> dict:
    """What a model records of its training images for :func:`~streamcov.stream.predict.predict`'s checks, as
    the out-of-core task's model records them (``classify._model_info``): their orientation, pixel type and
    scale, sizes, and where they came from (the source record of a folder or a store, a store's path). Without
    them predict took float images on another scale without a word, refused the training images themselves
    when they carried an EXIF orientation, and scored a folder of training images as new data. ``store``: the
    image store of ``data.format = "store"``, opened once by the caller."""
    from ..data.imageio import ORIENTATION
    from ..data.images import pixel_summary, size_range, source_record

    d = cfg.data
    info = {}
    if d.format == "store":
        info.update(orientation=store.orientation, pixel_dtype=store.pixel_dtype,
                    pixel_scale=store.pixel_scale(), store_path=str(Path(store.path).absolute()))
        record = store.attrs.get("source_record")
        if isinstance(record, dict):
            info["source_record"] = record
    else:
        dtype, scale = pixel_summary(data.images)
        # a folder's images are read upright by their EXIF orientation (read_image); scikit-image's
        # textures are upright arrays
        info.update(orientation=ORIENTATION, pixel_dtype=dtype, pixel_scale=scale)
        if d.format == "folders":
            info["source_record"] = source_record(d.source, int(d.group_level), tuple(d.exclude))
    info["image_size"] = size_range([np.shape(a) for a in data.images])
    return info


def _last_model(cfg, spec, last, label_names, fold: str, store_identity: dict | None = None,
                provenance: dict | None = None, rows: str | None = None):
    """The model of the last split, for methods with an explicit vector per image (else None); ``provenance``
    (:func:`_provenance`) goes into its ``info``, with the store's identity and the fold's ``rows``
    (:func:`streamcov.splits.rows_sha256`) that predict checks."""
    from ..stream.exact import GaussianKernelSVC
    from ..stream.model import FittedPipeline

    m = cfg.method
    if last is None or m.name not in VECTOR_METHODS:
        return None
    p = last["params"]
    head = "head_weight" in p
    representation = {"e": "region", "loge": "region", "head": "head"}.get(m.name, "operator")
    descriptor = ImageDescriptor(spec, representation, m.D, sigma_from_paper004(p.get("sigma1", 1.0)),
                                 "halton" if m.name == "qapprox_loghs" else "random", float(p.get("gamma", 1e-3)),
                                 m.name not in ("e", "approx_hs"), m.scaling, int(cfg.seed), head=head,
                                 head_norm=getattr(m, "head_norm", "l2"))
    state = {} if last["scale"] is None else {"scale": [float(s) for s in last["scale"]]}
    source = {"kind": "image", "descriptor": descriptor.as_dict(), "state": state}
    info = {"pipeline": cfg.name, "task": cfg.task, "fold": fold, "seed": int(cfg.seed),
            "split": cfg.split.model_dump(), "method": m.name, "params": p}
    if store_identity:   # predict then scores the model on its own fold's test rows, if they are still those
        info.update(store=store_identity, rows_sha256=rows)
    info.update(provenance or {})
    if last["classifier"] == "sgd":
        return FittedPipeline(source, last["fit"]["rff"], None, last["fit"]["clf"], label_names, info)
    if last["vectors"] is None:
        return None
    if last["classifier"] == "linear":
        from sklearn.svm import SVC

        clf = SVC(kernel="linear", C=p["C"])
    else:
        clf = GaussianKernelSVC(sigma=sigma_from_paper004(p["sigma2"] * last["median"]), C=p["C"],
                                n_head=descriptor.n_head, head_weight=float(p.get("head_weight", 1.0)),
                                head_combine=p.get("head_combine", "product"))
    return FittedPipeline(source, None, None, clf.fit(last["vectors"], last["y"]), label_names, info)


def run_image_classification(cfg, ctx) -> dict:
    """Evaluate one method of paper 004 on one image dataset under one protocol."""
    from .classify import pixel_spec

    t0 = time.perf_counter()
    spec = pixel_spec(cfg.pixels)
    m = cfg.method
    seed = int(cfg.seed)
    data = load_dataset(cfg.data, ctx.progress)
    from .._config import check_memory

    if "approx" in m.name:
        # all in memory here, per image: its 2D x 2D operator and that operator's log (the stacks of
        # descriptors/operators), then its vector of (2D)(2D+1)/2 numbers; and the phases of a block of
        # 8192 pixels with their cos and sin (8192 x D, four arrays). Measured on 18 KTH-TIPS images at
        # D = 1000: peak RSS 1.38 GiB, against 1.34 GiB here (the vectors alone are 0.27 GiB).
        d2 = 2 * m.D
        check_memory(8.0 * len(data) * (2 * d2 * d2 + d2 * (d2 + 1) / 2) + 8.0 * 8192 * m.D * 4,
                     f"method.D = {m.D} on {len(data)} images",
                     "lower method.D, or use the out-of-core task image-stream-classification")
    if eval_classifier(m.name, m.classifier) != "sgd":
        # svc and 1nn hold an images x images distance matrix per representation candidate, and the
        # selection's kernel matrices beside them: measured on the image demo at data.patch = 8 (12288
        # images, 1 candidate, 2 sigma2; `/usr/bin/time -v streamcov run --demo images --set data.patch=8`),
        # peak RSS 6.77 GB, 5.6 matrices of 1.21 GB; 7.25 GB here
        n_cands = {"e": 1, "head": 1, "hs": len(m.grid("sigma1")), "approx_hs": len(m.grid("sigma1"))}.get(
            m.name, (len(m.grid("sigma1")) if m.name in ("loghs", "approx_loghs", "qapprox_loghs") else 1)
            * len(m.grid("gamma")))
        check_memory(8.0 * len(data) ** 2 * (n_cands + 5),
                     f"{len(data)} images ({n_cands} distance matrices of {len(data)} x {len(data)})",
                     "use fewer images (data.max_per_class; a larger data.patch for textures) or shorter "
                     "method grids, or the out-of-core task image-stream-classification")
    if is_cnn(spec):
        # every image's hypercolumns (float32, cells x channels) are held at once here, twice at the peak:
        # measured on 31 Virus images (152 channels), grid 128 -> 256 added 1.79 GB for 1.52 M cells, 7.7 bytes
        # per channel and cell (peak RSS 1.04 and 2.83 GB)
        cells = sum(spec.n_cells(np.shape(img)[:2]) for img in data.images)
        grid = '"finest"' if spec.grid == "finest" else str(spec.grid)
        check_memory(8.0 * cells * spec.n_features,
                     f"pixels.grid = {grid} on {len(data)} images ({cells} grid cells of {spec.n_features} channels)",
                     'lower pixels.grid ("finest", the grid of the finest block, is the default)')
    if spec.needs_color:
        grey = [i for i, img in enumerate(data.images) if np.ndim(img) != 3]
        if grey:
            raise ConfigError(f"{pipeline_key(spec)} uses R, G, B but image {data.ids[grey[0]]} is grey; {GREY_FIX}")
    t_load = time.perf_counter() - t0
    folds = splits.folds(cfg.split, data.labels, data.groups, group_names=data.group_names,
                         subject_names=data.group_names,
                         store_split=data.split, split_names=data.split_names, seed=seed,
                         label_names=data.label_names)
    split_idx = [(name, np.flatnonzero(tr), np.flatnonzero(te)) for name, tr, te in folds]
    from .classify import cnn_warnings

    warnings = cnn_warnings(cfg) + splits.fold_warnings(folds, data.labels, data.label_names)
    # a protocol that keeps groups apart (objects) has inner folds of whole groups: they were folds of images, and
    # chose the grid for views of objects the inner training held (ETH-80: 62-65 of 72 objects on both sides)
    inner_groups = data.groups if splits.keeps_groups_apart(cfg.split) else None
    for said in (inner_folds_warning(m, eval_classifier(m.name, m.classifier), split_idx, data.labels,
                                     data.label_names, inner_groups),
                 ungrouped_inner_folds_warning(eval_classifier(m.name, m.classifier), split_idx, data.labels,
                                               inner_groups)):
        if said is not None:
            warnings.append(said)
    from ..data.images import constant_warning, is_constant

    constant = [data.ids[i] for i, img in enumerate(data.images) if is_constant(img)]   # in memory already
    if constant:
        warnings.append(constant_warning(constant, len(data), cfg.data.source or cfg.data.store or data.source))
    feats, heads = extract_matrices(data.images, spec, ids=data.ids, progress=ctx.progress,
                                    maps=not (is_cnn(spec) and m.name == "head"))
    t_extract = time.perf_counter() - t0 - t_load
    raw = None
    if m.name in ("e", "loge", "stein"):
        if is_cnn(spec):
            from ..descriptors.pixels import region_covariance

            raw = np.stack([region_covariance(f) for f in feats])
        else:
            raw = image_covariances(data.images, spec, ids=data.ids)
    t_feat = time.perf_counter() - t0 - t_load
    from ..linalg import gamma_named

    with gamma_named("method.gamma"):
        res = evaluate(m.name, feats, data.labels, split_idx, m, classifier=m.classifier, raw_covs=raw, seed=seed,
                       progress=ctx.progress, heads=heads, groups=inner_groups)
    details = res.pop("splits")
    store = None
    if cfg.data.format == "store":
        from ..data.images import open_image_store
        store = open_image_store(cfg.data.store)
    # the store's identity only when every image of it was used (rows of predict = rows here)
    ident = store.identity if store is not None and cfg.data.max_per_class is None else None
    # what predict checks: only for a method that saves a model (the folder's record scans it again)
    provenance = _provenance(cfg, data, store) if m.name in VECTOR_METHODS else None
    model = _last_model(cfg, spec, res.pop("_last"), data.label_names, split_idx[-1][0], ident, provenance,
                        splits.rows_sha256(folds[-1][1], folds[-1][2]))
    from .classify import write_predictions

    # every test image of every split, as a streamed run writes them (error analysis, confusion matrices)
    write_predictions(ctx.output / "predictions.csv", data.ids, data.label_names, data.labels,
                      res.pop("_predictions"))
    out = {
        "pipeline": cfg.name,
        "dataset": str(cfg.data.source or cfg.data.store or cfg.data.format),
        "n_images": len(data),
        "n_classes": len(data.label_names),
        "features": (spec.as_dict() if is_cnn(spec) else spec.name if spec.name != "custom"
                     else list(spec.features)),
        "n_features": spec.n_features,
        "protocol": cfg.split.kind,
        **res,
        "D": int(m.D) if "approx" in m.name else None,
        "fold_accuracies": [d["accuracy"] for d in details],
        "chosen_params": [d["params"] for d in details],
        "seconds_load": round(t_load, 2),
        "seconds_features": round(t_feat, 2),
        "ms_per_image_features": round(1e3 * t_extract / max(len(data), 1), 3),
        "seconds": round(time.perf_counter() - t0, 2),
    }
    out["predictions_path"] = str((ctx.output / "predictions.csv").absolute())
    if model is not None:
        out["model_path"] = str(Path(model.save(ctx.output / "model")).absolute())
    else:
        out["model_path"] = None
        out["model_note"] = (f"method {m.name!r} compares images pairwise (no vector per image): no model "
                             f"is saved; approx_loghs gives a model that `streamcov predict` applies")
    if warnings:
        out["warnings"] = warnings
    from ..files import atomic_write_text

    atomic_write_text(ctx.output / "image_classification_details.json",
                      json.dumps({"summary": out, "splits": details}, indent=1, default=float) + "\n")
    return out
