"""Image classification with covariance matrices and operators (paper 004, section 6).

Methods (paper names):

``e``              E: Frobenius distance between region covariances, Gaussian K2 + SVM
``loge``           LogE: Log-Euclidean distance (eq. (9)), Gaussian K2 + SVM
``stein``          Stein: symmetric Stein divergence, 1-nearest neighbour (as [11])
``hs``             HS: exact Hilbert-Schmidt distance of covariance operators (eq. (59))
``approx_hs``      HS between approximate (random Fourier) covariance operators (Lemma 6)
``loghs``          LogHS: exact Log-HS distance (eq. (16)), closed form via Gram matrices
``approx_loghs``   Approx LogHS: random Fourier features (eqs. (20), (21), (29))
``qapprox_loghs``  QApprox LogHS: quasi-random (Halton) Fourier features (appendix C)

Classifiers: ``svc`` (SVC on the precomputed Gaussian kernel K2 of eq. (31)),
``1nn`` (nearest neighbour on the distance), and for ``approx_loghs`` /
``qapprox_loghs`` also ``sgd``: the scalable path, where the log of each
D x D operator is vectorized (:func:`streamcov.covariance.sym_vec`) and K2 is
replaced by its random Fourier features (:class:`GaussianRandomFeatures`) and
a linear SGDClassifier.

Hyperparameters are chosen, as in the paper ("all parameters were chosen by
cross-validation"), by an inner stratified cross-validation on the training
images of each split only: the K1 bandwidth ``sigma1`` (multiples of
sqrt(n_features) times the feature scale of the training images, see
:func:`feature_scale`), the regularizer ``gamma = mu``, the K2
bandwidth ``sigma2`` (multiples of the median training distance) and the SVM
``C``.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .. import covariance as _cov
from . import distances as dist
from .distances import _map_blas1
from .features import get_spec, pixel_features

METHODS = ("e", "loge", "stein", "hs", "approx_hs", "loghs", "approx_loghs", "qapprox_loghs")
CLASSIFIERS = ("svc", "1nn", "sgd")

DEFAULT_GRIDS = {
    "sigma1": [0.5, 1.0, 2.0],
    "gamma": [1e-4, 1e-3, 1e-2],
    "sigma2": [0.25, 0.5, 1.0, 2.0],
    "C": [1.0, 10.0, 100.0],
}


# ------------------------------------------------------------------ features
def extract_features(images, spec, ids=None, progress: bool = False, n_jobs: int = 2,
                     dtype=np.float32) -> list[np.ndarray]:
    """Per-pixel features of every image; the numba kernels release the GIL, so threads run in parallel."""
    spec = get_spec(spec)
    images = list(images)

    def one(i):
        try:
            return pixel_features(images[i], spec).astype(dtype)
        except ValueError as exc:
            name = ids[i] if ids is not None else f"image {i}"
            raise ValueError(f"{name}: {exc}") from None

    pixel_features(images[0][:2, :2], spec)  # compile once before threading
    with ThreadPoolExecutor(max_workers=max(1, n_jobs)) as ex:
        it = ex.map(one, range(len(images)))
        if progress:
            from tqdm.auto import tqdm
            it = tqdm(it, total=len(images), desc="pixel features", unit="img")
        return list(it)


def feature_scale(feats, idx, scaling: str = "global") -> np.ndarray:
    """Feature scale from all pixels of the images ``idx``.

    ``per-feature``: each feature's standard deviation (1 where constant);
    ``global``: one number for all features, the root mean square of those
    standard deviations, so the features keep their relative weights (as raw
    features with a tuned kernel bandwidth) while sigma1 stays in units of
    the data.
    """
    if scaling not in ("global", "per-feature"):
        raise ValueError(f"feature scaling must be 'global' or 'per-feature', got {scaling!r}")
    n = feats[idx[0]].shape[1]
    s1 = np.zeros(n)
    s2 = np.zeros(n)
    m = 0
    for i in idx:
        f = feats[i].astype(np.float64)
        mu = f.mean(axis=0)
        s1 += mu * len(f)
        s2 += ((f - mu) ** 2).sum(axis=0) + len(f) * mu ** 2
        m += len(f)
    mean = s1 / m
    var = np.maximum(s2 / m - mean ** 2, 0.0)
    sd = np.sqrt(var)
    if scaling == "global":
        rms = float(np.sqrt(np.mean(var)))
        return np.full(n, rms if rms > 0 else 1.0)
    sd[sd <= 1e-12 * max(sd.max(), 1.0)] = 1.0
    return sd


def subsample(f, m_max: int, seed: int = 0):
    """At most ``m_max`` pixels of a feature matrix, drawn without replacement (fixed seed)."""
    if m_max is None or len(f) <= m_max:
        return f
    rng = np.random.default_rng(seed)
    return f[np.sort(rng.choice(len(f), m_max, replace=False))]


# ----------------------------------------------------------------- protocols
def protocol_splits(protocol: dict, labels, groups=None, group_names=None, seed: int = 0):
    """Train/test index pairs ``[(name, train, test), ...]`` for a protocol table.

    kinds:
      ``stratified-kfold``: ``n_splits`` folds, shuffled with ``seed`` (Virus:
      the official 10 folds are lost, see data/images_protocols.md);
      ``per-class``: ``n_train`` random training images per class and
      ``n_test`` test images per class (default: all the others), ``n_repeats``
      times (KTH-TIPS 40 per class, Fish Exp1 5 + 10 per class);
      ``leave-objects-out``: one fold per distinct last folder of the group name
      (ETH-80: fold k tests object k of every category);
      ``group-kfold``: ``n_splits`` folds of whole groups.
    """
    from sklearn.model_selection import GroupKFold, StratifiedKFold

    labels = np.asarray(labels)
    kind = protocol.get("kind", "stratified-kfold")
    seed = int(protocol.get("seed", seed))
    out = []
    if kind == "stratified-kfold":
        k = int(protocol.get("n_splits", 10))
        skf = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
        for f, (tr, te) in enumerate(skf.split(np.zeros(len(labels)), labels)):
            out.append((f"fold-{f}", tr, te))
    elif kind == "per-class":
        n_train = protocol.get("n_train")
        if n_train is None:
            raise ValueError("protocol kind 'per-class' needs n_train (training images per class)")
        n_train = int(n_train)
        n_test = protocol.get("n_test")
        reps = int(protocol.get("n_repeats", 10))
        rng = np.random.default_rng(seed)
        for r in range(reps):
            tr, te = [], []
            for c in np.unique(labels):
                idx = rng.permutation(np.flatnonzero(labels == c))
                need = n_train + (int(n_test) if n_test is not None else 1)
                if len(idx) < need:
                    raise ValueError(f"class {c} has {len(idx)} images; protocol needs {need} "
                                     f"({n_train} train + {n_test if n_test is not None else '>= 1'} test)")
                tr.append(idx[:n_train])
                te.append(idx[n_train:] if n_test is None else idx[n_train:n_train + int(n_test)])
            out.append((f"split-{r}", np.sort(np.concatenate(tr)), np.sort(np.concatenate(te))))
    elif kind == "leave-objects-out":
        if groups is None or group_names is None:
            raise ValueError("protocol 'leave-objects-out' needs groups (dataset.group_level >= 2)")
        suffix = np.array([group_names[g].split("/")[-1] for g in groups])
        for s in sorted(set(suffix), key=lambda t: (len(t), t)):
            te = np.flatnonzero(suffix == s)
            out.append((f"object-{s}", np.flatnonzero(suffix != s), te))
    elif kind == "group-kfold":
        if groups is None:
            raise ValueError("protocol 'group-kfold' needs groups")
        k = int(protocol.get("n_splits", 5))
        for f, (tr, te) in enumerate(GroupKFold(n_splits=k).split(np.zeros(len(labels)), labels, groups)):
            out.append((f"fold-{f}", tr, te))
    else:
        raise ValueError(f"unknown protocol kind {kind!r}; known: stratified-kfold, per-class, "
                         f"leave-objects-out, group-kfold")
    max_splits = protocol.get("max_splits")
    return out[:int(max_splits)] if max_splits else out


# ----------------------------------------------------------- representations
@dataclass
class Candidate:
    params: dict
    D: np.ndarray   # distances between the images of `idx` (in that order)


def _eig_log_vecs(covs, gammas):
    """``sym_vec(log(I + C / gamma))`` for several gammas from one eigendecomposition per matrix.

    LAPACK's divide and conquer (``dsyevd``) through scipy is about 20% faster
    than numpy's batched ``eigh`` on the 400 x 400 operators of D = 200, and
    ``log(I + C / gamma)`` is positive semidefinite, so ``B B^T`` with
    ``B = U diag(sqrt(log(1 + w / gamma)))`` is a symmetric rank-k update
    (``dsyrk``, half the flops of a general product) whose upper triangle is
    all that the vector needs.
    """
    from scipy.linalg import eigh
    from scipy.linalg.blas import dsyrk

    covs = np.asarray(covs, dtype=np.float64)
    d = covs.shape[1]
    iu = np.triu_indices(d)
    coef = np.where(iu[0] == iu[1], 1.0, np.sqrt(2.0))
    out = [np.empty((len(covs), len(coef))) for _ in gammas]
    for i, c in enumerate(covs):
        w, u = eigh(c, driver="evd", check_finite=False)
        w = np.maximum(w, 0.0)
        for k, g in enumerate(gammas):
            up = dsyrk(1.0, u * np.sqrt(np.log1p(w / g)))   # upper triangle of B B^T
            out[k][i] = up[iu] * coef
    return out


def log_vectors_multi(covs, gammas, dtype=np.float32, batch: int = 16, n_jobs: int | None = None):
    """``sym_vec(log(I + C / gamma))`` for each gamma, (N, d(d+1)/2) per gamma.

    One eigendecomposition per matrix serves every gamma. Batches run in
    ``n_jobs`` threads with single-threaded BLAS (LAPACK's own threads on
    small matrices slow down badly when cores are shared).
    """
    covs = np.asarray(covs)
    n, d = covs.shape[0], covs.shape[1]
    out = [np.empty((n, d * (d + 1) // 2), dtype=dtype) for _ in gammas]
    starts = list(range(0, n, batch))
    for a, vecs in zip(starts, _map_blas1(lambda a: _eig_log_vecs(covs[a:a + batch], gammas), starts, n_jobs)):
        for k, v in enumerate(vecs):
            out[k][a:a + len(v)] = v
    return out


def approx_operator_vectors(feats, idx, scale, sigma1, gammas, D, kind, seed, progress=False,
                            what="approx_loghs", n_jobs=None):
    """Per image: approximate covariance operator of the standardized features (eq. (20));
    returns one (len(idx), p) array per gamma of log vectors, or of sym_vec(C) for ``approx_hs``.

    Only the feature scale matters: a common shift of the features rotates each
    (cos, sin) pair by the same angle in every image, which leaves all
    distances unchanged.
    """
    n = len(scale)
    W = dist.fourier_frequencies(n, D, sigma1, kind=kind, random_state=seed) / scale[:, None]
    batch = 8
    starts = list(range(0, len(idx), batch))

    def work(a):
        covs = np.stack([dist._approx_cov(feats[i].astype(np.float64), W) for i in idx[a:a + batch]])
        return [_cov.sym_vec(covs)] if what == "approx_hs" else _eig_log_vecs(covs, gammas)

    it = zip(starts, _map_blas1(work, starts, n_jobs))
    if progress:
        from tqdm.auto import tqdm
        it = tqdm(it, total=len(starts), desc=f"{kind} operators sigma1={sigma1:.3g}", unit="batch")
    outs = None
    for a, vecs in it:
        if outs is None:
            outs = [np.empty((len(idx), v.shape[1]), dtype=np.float32) for v in vecs]
        for k, v in enumerate(vecs):
            outs[k][a:a + len(v)] = v
    return outs


def build_candidates(method: str, feats, idx, scale, grids: dict, mcfg: dict, seed: int,
                     raw_covs=None, progress: bool = False) -> list[Candidate]:
    """Distance matrices over the images ``idx`` for every representation hyperparameter."""
    n = len(scale)
    sig1 = [float(s) * np.sqrt(n) for s in grids["sigma1"]]
    gammas = [float(g) for g in grids["gamma"]]
    cands = []
    if method in ("e", "loge", "stein"):
        covs = raw_covs[idx] / np.outer(scale, scale)[None]
        if method == "e":
            return [Candidate({}, dist.euclidean_distances(covs))]
        for g in gammas:
            if method == "loge":
                cands.append(Candidate({"gamma": g}, dist.log_euclidean_distances(covs, gamma=g)))
            else:
                cands.append(Candidate({"gamma": g}, dist.stein_divergences(covs, gamma=g)))
        return cands
    if method in ("approx_loghs", "qapprox_loghs", "approx_hs"):
        kind = "halton" if method == "qapprox_loghs" else "random"
        D = int(mcfg.get("D", 200))
        for s1, rel in zip(sig1, grids["sigma1"]):
            vecs = approx_operator_vectors(feats, idx, scale, s1, gammas, D, kind, seed, progress,
                                           what=method)
            if method == "approx_hs":
                cands.append(Candidate({"sigma1": rel}, dist.pairwise_vector_distances(vecs[0])))
                continue
            for g, v in zip(gammas, vecs):
                cands.append(Candidate({"sigma1": rel, "gamma": g}, dist.pairwise_vector_distances(v)))
        return cands
    if method in ("hs", "loghs"):
        m_max = mcfg.get("max_pixels_exact", 256)
        sub = [subsample(feats[i].astype(np.float64) / scale, m_max, seed) for i in idx]
        for s1, rel in zip(sig1, grids["sigma1"]):
            if method == "hs":
                cands.append(Candidate({"sigma1": rel}, dist.pairwise_hs(sub, sigma=s1)))
                continue
            for g in gammas:
                Dm = dist.pairwise_log_hs(sub, sigma=s1, gamma=g, progress=progress)
                cands.append(Candidate({"sigma1": rel, "gamma": g}, Dm))
        return cands
    raise ValueError(f"unknown method {method!r}; known: {', '.join(METHODS)}")


# ------------------------------------------------------------ model selection
def _inner_folds(y, n_inner, seed):
    from sklearn.model_selection import StratifiedKFold
    counts = np.bincount(y)
    k = int(min(n_inner, counts[counts > 0].min()))
    if k < 2:
        raise ValueError("every class needs at least 2 training images for the inner cross-validation")
    return list(StratifiedKFold(n_splits=k, shuffle=True, random_state=seed).split(np.zeros(len(y)), y))


def _median_offdiag(Dtr):
    iu = np.triu_indices(len(Dtr), 1)
    med = float(np.median(Dtr[iu]))
    return med if med > 0 else 1.0


def select_and_test_svc(cands, y, tr, te, grids, n_inner=5, seed=0, n_jobs=None):
    """Inner CV over candidates x sigma2 x C with SVC on K2 = exp(-d^2 / sigma2^2); then test.

    sigma2 is a multiple of the median training distance. Ties go to the
    earliest grid point. The grid runs in threads (libsvm releases the GIL).
    """
    from sklearn.svm import SVC
    ytr = y[tr]
    folds = _inner_folds(ytr, n_inner, seed)
    meds = [_median_offdiag(c.D[np.ix_(tr, tr)]) for c in cands]
    grid = [(ci, float(s2), float(C)) for ci in range(len(cands)) for s2 in grids["sigma2"]
            for C in grids["C"]]

    def score(point):
        ci, s2, C = point
        K = np.exp(-(cands[ci].D[np.ix_(tr, tr)] / (s2 * meds[ci])) ** 2)
        accs = []
        for a, b in folds:
            clf = SVC(kernel="precomputed", C=C).fit(K[np.ix_(a, a)], ytr[a])
            accs.append(np.mean(clf.predict(K[np.ix_(b, a)]) == ytr[b]))
        return float(np.mean(accs))

    scores = list(_map_blas1(score, grid, n_jobs))
    k = int(np.argmax(scores))  # first maximum
    ci, s2, C = grid[k]
    K = np.exp(-(cands[ci].D / (s2 * meds[ci])) ** 2)
    clf = SVC(kernel="precomputed", C=C).fit(K[np.ix_(tr, tr)], ytr)
    pred = clf.predict(K[np.ix_(te, tr)])
    params = dict(cands[ci].params, sigma2=s2, C=C)
    return float(np.mean(pred == y[te])), params, scores[k]


def select_and_test_1nn(cands, y, tr, te):
    """Leave-one-out 1-NN accuracy on the training images picks the candidate; then test."""
    ytr = y[tr]
    best = (-1.0, 0)
    for ci, cand in enumerate(cands):
        Dtr = cand.D[np.ix_(tr, tr)].copy()
        np.fill_diagonal(Dtr, np.inf)
        score = float(np.mean(ytr[np.argmin(Dtr, axis=1)] == ytr))
        if score > best[0] + 1e-12:
            best = (score, ci)
    score, ci = best
    pred = ytr[np.argmin(cands[ci].D[np.ix_(te, tr)], axis=1)]
    return float(np.mean(pred == y[te])), dict(cands[ci].params), score


def select_and_test_sgd(method, feats, y, idx, tr, te, scale, grids, mcfg, seed, n_inner=3,
                        progress=False, cache=None):
    """Scalable path: vec(log(C_D + gamma I)) -> random features of K2 -> SGDClassifier.

    ``tr``/``te`` index into ``idx``. Vectors of one sigma1 are held at a time,
    unless ``cache`` (a dict) keeps them across calls with the same ``idx`` and scale.
    """
    from sklearn.linear_model import SGDClassifier
    from .estimators import GaussianRandomFeatures

    kind = "halton" if method == "qapprox_loghs" else "random"
    n = len(scale)
    D = int(mcfg.get("D", 200))
    R = int(mcfg.get("n_components", 4096))
    epochs = int(mcfg.get("epochs", 30))
    ytr = y[idx][tr]
    folds = _inner_folds(ytr, n_inner, seed)
    best = (-1.0, None)
    kept = None

    def make_sgd(C, n_train):
        return SGDClassifier(loss="hinge", alpha=1.0 / (float(C) * n_train), max_iter=epochs, tol=None,
                             average=True, random_state=seed)

    for rel in grids["sigma1"]:
        if cache is not None and rel in cache:
            vecs = cache[rel]
        else:
            vecs = approx_operator_vectors(feats, idx, scale, float(rel) * np.sqrt(n), grids["gamma"], D,
                                           kind, seed, progress)
            if cache is not None:
                cache[rel] = vecs
        for g, v in zip(grids["gamma"], vecs):
            vtr = v[tr]
            med = _median_offdiag(dist.pairwise_vector_distances(vtr[:min(len(vtr), 500)]))
            for s2 in grids["sigma2"]:
                rff = GaussianRandomFeatures(n_components=R, sigma=float(s2) * med,
                                             random_state=seed).fit(vtr)
                Z = rff.transform(vtr)
                for C in grids["C"]:
                    accs = []
                    for a, b in folds:
                        clf = make_sgd(C, len(a)).fit(Z[a], ytr[a])
                        accs.append(np.mean(clf.predict(Z[b]) == ytr[b]))
                    score = float(np.mean(accs))
                    if score > best[0] + 1e-12:
                        best = (score, dict(sigma1=float(rel), gamma=float(g), sigma2=float(s2),
                                            C=float(C), median=med))
                        kept = v
    score, p = best
    rff = GaussianRandomFeatures(n_components=R, sigma=p["sigma2"] * p["median"],
                                 random_state=seed).fit(kept[tr])
    clf = make_sgd(p["C"], len(tr)).fit(rff.transform(kept[tr]), ytr)
    pred = clf.predict(rff.transform(kept[te]))
    p.pop("median")
    return float(np.mean(pred == y[idx][te])), p, score


# ----------------------------------------------------------------- run it all
def evaluate(method: str, feats, labels, splits, grids=None, mcfg=None, classifier=None,
             raw_covs=None, seed: int = 0, n_inner: int = 5, standardize: str = "train",
             scaling: str = "global", progress: bool = False) -> dict:
    """Run one method over all splits; returns accuracies and chosen hyperparameters per split.

    Parameters
    ----------
    feats : list of arrays (m_i, n)
        Per-pixel features of every image.
    labels : array (N,)
    splits : list of (name, train_idx, test_idx)
        From :func:`protocol_splits`.
    raw_covs : array (N, n, n), optional
        Region covariances of the unscaled features (needed by e, loge, stein).
    standardize : {"train", "all"}
        Feature scale from the training images of each split (strict;
        representations are recomputed per split), or from all images once
        (labels are never used; representations are computed once and shared
        by the splits).
    scaling : {"global", "per-feature"}
        See :func:`feature_scale`.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; known: {', '.join(METHODS)}")
    if standardize not in ("train", "all"):
        raise ValueError(f"standardize must be 'train' or 'all', got {standardize!r}")
    if scaling not in ("global", "per-feature"):
        raise ValueError(f"scaling must be 'global' or 'per-feature', got {scaling!r}")
    grids = {**DEFAULT_GRIDS, **(grids or {})}
    mcfg = dict(mcfg or {})
    classifier = classifier or ("1nn" if method == "stein" else "svc")
    if classifier not in CLASSIFIERS:
        raise ValueError(f"unknown classifier {classifier!r}; known: {', '.join(CLASSIFIERS)}")
    if classifier == "sgd" and method not in ("approx_loghs", "qapprox_loghs"):
        raise ValueError(f"classifier 'sgd' (the scalable path) needs method approx_loghs or "
                         f"qapprox_loghs, got {method!r}")
    labels = np.asarray(labels)
    results = []
    t0 = time.perf_counter()
    universe = np.unique(np.concatenate([np.concatenate([a, b]) for _, a, b in splits]))
    pos = np.full(len(labels), -1)
    pos[universe] = np.arange(len(universe))
    shared = None
    sgd_cache = {} if standardize == "all" else None
    if standardize == "all" and classifier != "sgd":
        scale = feature_scale(feats, universe, scaling)
        shared = build_candidates(method, feats, universe, scale, grids, mcfg, seed,
                                  raw_covs=raw_covs, progress=progress)
    for name, tr_g, te_g in splits:
        ts = time.perf_counter()
        if classifier == "sgd":
            if standardize == "all":   # vectors of all images once, shared by the splits
                idx, tr, te = universe, pos[tr_g], pos[te_g]
                scale = feature_scale(feats, universe, scaling)
            else:
                idx = np.concatenate([tr_g, te_g])
                tr = np.arange(len(tr_g))
                te = np.arange(len(tr_g), len(idx))
                scale = feature_scale(feats, tr_g, scaling)
            acc, params, cv = select_and_test_sgd(method, feats, labels, idx, tr, te, scale, grids,
                                                  mcfg, seed, n_inner=min(n_inner, 3), progress=progress,
                                                  cache=sgd_cache)
        else:
            if shared is None:
                cands = build_candidates(method, feats, universe, feature_scale(feats, tr_g, scaling), grids,
                                         mcfg, seed, raw_covs=raw_covs, progress=progress)
            else:
                cands = shared
            y = labels[universe]
            tr, te = pos[tr_g], pos[te_g]
            if classifier == "svc":
                acc, params, cv = select_and_test_svc(cands, y, tr, te, grids, n_inner, seed)
            else:
                acc, params, cv = select_and_test_1nn(cands, y, tr, te)
        results.append({"split": name, "accuracy": acc, "inner_cv_accuracy": cv, "params": params,
                        "n_train": int(len(tr_g)), "n_test": int(len(te_g)),
                        "seconds": time.perf_counter() - ts})
        if progress:
            print(f"{method} {name}: accuracy {acc:.4f} (inner CV {cv:.4f}) {params}", flush=True)
    accs = np.array([r["accuracy"] for r in results])
    return {
        "method": method,
        "classifier": classifier,
        "accuracy": float(accs.mean()),
        "accuracy_std": float(accs.std()),
        "n_folds": len(results),
        "n_train": int(np.mean([r["n_train"] for r in results])),
        "n_test": int(np.mean([r["n_test"] for r in results])),
        "standardize": standardize,
        "scaling": scaling,
        "seconds": time.perf_counter() - t0,
        "splits": results,
    }
