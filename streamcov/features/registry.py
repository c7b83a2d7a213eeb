"""Explicit feature maps by name, as pipeline files write them, and their data-dependent fits.

Every map targets the Gaussian kernel ``exp(-||x - y||^2 / (2 sigma^2))``
(:mod:`streamcov.kernels`): ``sigma`` is translated to ``gamma = 1 / (2
sigma^2)`` for the maps that take a gamma. With ``bandwidth = "median"`` the
given ``sigma`` is a multiple of the median pairwise distance of the rows
the map is fitted on (the median heuristic; paper 004 sets the bandwidth of
its kernel K2 so).
"""
from __future__ import annotations

from collections.abc import Mapping
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from .._fitparams import FitParams
from ..errors import ConfigError, did_you_mean, toml_value
from ..kernels import _bandwidth, check_blocks, distances, gamma_from_sigma, median_distance, sigma_from_gamma

# name -> (module, class)
MAPS = {
    "rgw": ("streamcov.features", "RGWSampler"),
    "rff": ("sklearn.kernel_approximation", "RBFSampler"),
    "rff-blocks": ("streamcov.features", "GaussianRandomFeatures"),
    # paper 004's conv + head kernel: rows [v, h], Gaussian on v times (1 - w) + w <h, h'>, tensor-sketched
    "rff-head": ("streamcov.features", "HeadProductSketch"),
    "orf": ("streamcov.features", "OrthogonalRBFSampler"),
    "qmc": ("streamcov.features", "QuasiRandomRBFSampler"),
    "maclaurin": ("streamcov.features", "RandomMaclaurinSampler"),
    "fastfood": ("streamcov.features", "FastfoodSampler"),
    # one landmark set for a sum of Gaussian kernels over column blocks (the pyramid's windows)
    "nystroem": ("streamcov.features", "GaussianNystroem"),
    "none": (None, None),
}

# Options of RGWSampler that pipeline files share between maps; a map that
# does not take one ignores it (Maclaurin takes ``center`` and ``sampling``).
RGW_ONLY = ("theta", "sampling", "center", "max_degree")
# Options of the fit, not of the estimator.
FIT_OPTIONS = ("fit_sample", "bandwidth")
BANDWIDTHS = ("absolute", "median")


def map_class(name: str):
    """The estimator class of map ``name`` (None for ``"none"``)."""
    import importlib

    name = str(name).lower()
    if name not in MAPS:
        raise ConfigError(f"features.map {name!r} unknown; choose one of {', '.join(MAPS)}")
    module, cls_name = MAPS[name]
    return None if module is None else getattr(importlib.import_module(module), cls_name)


def needs_data(params: dict) -> bool:
    """Whether fitting the map reads rows, not only their width.

    Nystroem picks landmarks, a centred RGW or Maclaurin map its mean row and
    a median bandwidth its scale from data; the other random maps only need
    the input dimension.
    """
    name = str(params.get("map", "rgw")).lower()
    return (name == "nystroem" or (name in ("rgw", "maclaurin") and bool(params.get("center", False)))
            or params.get("bandwidth", "absolute") == "median")


def make_feature_map(params: dict, seed: int, sigma_scale: float = 1.0):
    """Build the transformer named by ``params["map"]`` (``none`` gives None).

    ``sigma`` (times ``sigma_scale``, the median distance of a median
    bandwidth) goes to the maps that take a sigma, and as ``gamma = 1 / (2
    sigma^2)`` to those that take a gamma, so every map targets the same
    Gaussian kernel of eq. (1) of paper 000.

    Parameters
    ----------
    params : dict
        The ``[features]`` table: ``map`` (default ``rgw``), ``sigma``, ``blocks``, ``views`` and the map's
        own options; ``fit_sample`` and ``bandwidth`` are read by the fit, not here.
    seed : int
        An integer >= 0, the map's ``random_state`` (a model saves its map's draws as this seed).
    sigma_scale : float
        Factor of ``sigma`` (default 1; the median distance of a median bandwidth).
    """
    if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
        # the maps' draws are saved as their seed (models leave the drawn arrays out): an integer, always
        raise ValueError(f"seed: expected an integer >= 0 (a model saves its map's draws as this seed), got {seed!r}")
    if not isinstance(params, Mapping):   # a map's name alone was an AttributeError ('str' has no 'items')
        raise TypeError(f"params: expected a dict of the map's options, e.g. {{'map': 'rff', 'sigma': 1.0}}, got "
                        f"{params!r}")
    if params.get("sigma") is not None:
        _bandwidth(params["sigma"], "features.sigma")   # a string was float()'s words, without the key
    params = {k: v for k, v in params.items() if k not in FIT_OPTIONS}
    blocks = params.pop("blocks", None)
    views = int(params.pop("views", 1))
    if views > 1 and blocks is None:
        raise ValueError("views > 1 needs the blocks of one view")
    if blocks is not None and str(params.get("map", "rgw")).lower() == "nystroem":
        # one Nystroem map of the whole sum: its landmarks serve every block (and every view)
        params["blocks"] = [[int(w), float(c)] for w, c in blocks]
        if views > 1:
            params["views"] = views
    elif blocks is not None and str(params.get("map", "rgw")).lower() != "none":
        # a sum of Gaussian kernels over column blocks: one map per block (BlockSumFeatures)
        inner = dict(params)
        n = int(inner.pop("n_components", 100))
        if inner.get("sigma") is not None:
            inner["sigma"] = float(inner["sigma"]) * float(sigma_scale)
        make_feature_map({**inner, "n_components": 1}, seed)      # the map's options are checked here
        return BlockSumFeatures(map_params=inner, blocks=[[int(w), float(c)] for w, c in blocks],
                                views=views, n_components=n, random_state=int(seed))
    name = str(params.pop("map", "rgw")).lower()
    cls = map_class(name)
    if cls is None:
        return None
    defaults = cls().get_params()
    accepted = set(defaults)
    kwargs = {}
    sigma = params.pop("sigma", None)
    if sigma is not None:
        sigma = float(sigma) * float(sigma_scale)
        if "sigma" in accepted:
            kwargs["sigma"] = sigma
        elif "gamma" in accepted:
            kwargs["gamma"] = gamma_from_sigma(sigma)
    for key in ("gamma", "kernel"):   # set from sigma above: one bandwidth convention everywhere
        if key in params and key in kwargs:
            hint = (f"; for gamma = {params['gamma']} set sigma = {sigma_from_gamma(float(params['gamma'])):.6g}"
                    if key == "gamma" and isinstance(params["gamma"], (int, float)) and params["gamma"] > 0 else "")
            raise ConfigError(f"features.{key} is set by streamcov from features.sigma (every map targets "
                              f"exp(-||x - y||^2 / (2 sigma^2))); remove it{hint}")
    for key, value in params.items():
        if key not in accepted:
            if key in RGW_ONLY and name != "rgw":
                continue  # shared pipeline files carry RGW's own options
            # what a pipeline may set: the seed, the kernel's blocks and its gamma come from elsewhere; the
            # [features] keys every map reads (the fit sample, the bandwidth rule) are read before the map
            settable = sorted((accepted - {"random_state", "blocks", "views", "gamma", "kernel"})
                              | {"fit_sample", "bandwidth", "sigma"})   # sigma: a map's gamma, or its own
            raise ConfigError(f"features.{key} is not a parameter of {cls.__name__}{did_you_mean(key, settable)}; "
                              f"accepted: {', '.join(settable)}")
        default = defaults[key]
        if isinstance(value, bool) and not isinstance(default, bool) and isinstance(default, (int, float)):
            # strict as the declared keys are: true was taken as 1 (a block size of 1)
            raise ConfigError(f"features.{key} = {str(value).lower()}: expected a number (as "
                              f"{cls.__name__}'s {key}, default {default!r})")
        kwargs[key] = value
    if "random_state" in accepted:
        kwargs["random_state"] = int(seed)
    return cls(**kwargs)


def fit_feature_map(params: dict, seed: int, n_features: int, sample: np.ndarray | None = None,
                    check: np.ndarray | None = None):
    """Build and fit the map of ``params``; returns ``(map or None, fit record)``.

    ``sample``: training rows, required when :func:`needs_data`; random maps
    only need the dimension (a zero row stands in). The record holds what
    was learned from data (the median distance of a median bandwidth).
    ``check``: the training rows the bandwidth (and an RGW series, :func:`check_map_on_rows`) is checked on,
    when not the sample (a fit given only the rows it reads, :func:`rows_read_by_fit`, or only their mean row,
    :func:`fit_reads_mean_only`).
    """
    record: dict = {}
    scale = 1.0
    if params.get("sigma", 1.0) is None:   # the [features] default, in every map and in the checks below
        params = {**params, "sigma": 1.0}
    # a map of [v, h] rows measures and checks the bandwidth of its Gaussian kernel on v only
    n_head = int(params.get("n_head", 0)) if str(params.get("map", "")).lower() == "rff-head" else 0
    if params.get("bandwidth", "absolute") == "median":
        if sample is None or len(sample) < 2:
            raise ConfigError("features.bandwidth = 'median' needs at least 2 training rows to measure "
                              "the median distance on")
        # and a row of several views (the mirror) on its first view: the kernel compares views one to one
        views = int(params.get("views", 1))
        cols = (sample.shape[1] - n_head) // views
        scale = median_distance(distances(sample[:, :cols] if cols < sample.shape[1] else sample))
        record["median_distance"] = scale
        record["sigma"] = float(params.get("sigma", 1.0)) * scale
    fmap = make_feature_map(params, seed, scale)
    if fmap is None:
        return None, record
    if needs_data(params) and (sample is None or len(sample) == 0):   # scikit-learn's "array=nan" before
        raise ValueError(f"features.map = {toml_value(str(params.get('map', 'rgw')))} is fitted on training rows "
                         f"(its landmarks, mean row or median distance): give them as sample")
    if str(params.get("map", "rgw")).lower() != "rff-blocks":   # rff-blocks draws its frequencies per block
        from .._config import check_memory

        # a dense map holds n_components x n_features numbers (its frequencies or projections; the
        # product maps a projection per degree of each feature)
        n = int(params.get("n_components", 0))
        if str(params.get("map", "rgw")).lower() == "nystroem":
            # n landmark rows of the full width, and while fitting, one block's n x n distances, the kernel
            # and its eigenvectors; the rows it is fitted on are held by the caller
            n = min(n, len(sample)) if sample is not None else n
            need = 8.0 * (n * n_features + 4.0 * n * n)
        else:
            # one map per block holds its share of the features on its block's columns only
            width = max(int(w) for w, _ in params["blocks"]) if params.get("blocks") else n_features
            need = map_nbytes(params, width)
        check_memory(need, f"features.n_components = {n} on {n_features}-dimensional descriptors",
                     "lower features.n_components (or use map = \"rff-blocks\")")
    from .._config import blas_threads

    # one BLAS thread, as the transform has: a fit's products and eigendecomposition (Nystroem's K_LL, on scipy's
    # BLAS) round with the thread count, and the map must be the same bits in every process (a CLI run and a
    # notebook, a driver whose BLAS another library limited)
    import warnings

    from ._series import CutSeriesWarning

    with blas_threads(1):
        with warnings.catch_warnings():   # said below in the [features] table's words (check_map_on_rows)
            warnings.simplefilter("ignore", CutSeriesWarning)
            fmap.fit(sample if needs_data(params) else np.zeros((1, n_features)))
        if check is None:
            check = sample
        if check is not None and len(check) >= 2:
            check_map_on_rows(params, fmap, check, scale, cut_rows=sample if check is sample else None)
    return fmap, record


def check_map_on_rows(params: dict, fmap, rows: np.ndarray, scale: float = 1.0, cut_rows=None) -> None:
    """Warn of what a fitted map does to training ``rows``: a bandwidth far below their distances
    (:func:`warn_narrow_bandwidth`), and an RGW series cut short of their norms
    (:func:`~streamcov.features._series.cut_series`, on ``cut_rows`` when given, e.g. the whole fit sample), in
    the words of the ``[features]`` table. A map drawn
    from the width alone (an uncentred RGW) is fitted on no rows, so its own fit cannot see either: the caller
    checks a few training rows (:func:`streamcov.stream.featurize.featurize`); ``features.max_degree = 3`` at
    ``sigma = 0.125`` had lost a tenth of the accuracy without a word."""
    import warnings

    from ._series import cut_series

    RGWSampler = map_class("rgw")
    warn_narrow_bandwidth(params, rows, scale)
    rows = rows if cut_rows is None else cut_rows
    if isinstance(fmap, BlockSumFeatures):   # each block's map on its columns, every view's rows
        parts = [(getattr(fmap, f"block{b}_"), np.concatenate([rows[:, v] for v in sl]))
                 for b, sl in enumerate(fmap._slices()[0])]
    else:
        parts = [(fmap, rows)]
    for m, X in parts:
        if isinstance(m, RGWSampler):
            said = cut_series(np.asarray(X), m.mean_ if m.center else None, _bandwidth(m.sigma, "sigma") ** 2,
                              int(m.max_degree), prefix="features.")
            if said is not None:
                warnings.warn(f"features.max_degree = {int(m.max_degree)}: {said}", stacklevel=3)
                return


#: rows of the fit sample on which a map's bandwidth is checked against the distances between them
BANDWIDTH_CHECK_ROWS = 256
#: the median over rows of the kernel value of each row's nearest neighbour (relative to the diagonal) below
#: which a map's bandwidth is called far below the distances: a map of D random features estimates a kernel
#: value with a standard error of about 1/sqrt(D), 0.01 or more for D below 10^4, so that most rows' nearest
#: neighbour is lost in its noise, and even the exact kernel is nearly the identity (on the generated actions:
#: 0.0024 at sigma = 0.05, 17% accuracy for 10 classes; 5e-8 at 0.03, 10%; 0.22 at 0.1, 33%; 0.69 at 0.2, 60%)
NARROW_KERNEL = 1e-2


def warn_narrow_bandwidth(params: dict, sample: np.ndarray, scale: float = 1.0) -> None:
    """Warn when the Gaussian kernel a map approximates is, on training rows, nearly the identity (sigma far
    below their distances): the learner then reaches chance accuracy or near it, without a word (the exact
    SVM's grid warns of the same, :func:`streamcov.stream.exact._warn_degenerate_kernel`). Checked on the first
    :data:`BANDWIDTH_CHECK_ROWS` rows of the sample a data-dependent map is fitted on, less a head's columns; a
    map drawn from the width alone is checked on that many training rows drawn for the check
    (:func:`streamcov.stream.featurize.featurize`). A bandwidth far above the distances is not warned of: the
    features are then nearly linear in the rows, which a scaled linear learner still separates."""
    import warnings

    from ..kernels import block_gaussian_kernel

    n_head = int(params.get("n_head", 0)) if str(params.get("map", "")).lower() == "rff-head" else 0
    X = np.asarray(sample[:BANDWIDTH_CHECK_ROWS, :sample.shape[1] - n_head], dtype=np.float64)
    sigma = float(params.get("sigma", 1.0)) * float(scale)
    try:
        K = block_gaussian_kernel(X, blocks=params.get("blocks"), sigma=sigma, views=int(params.get("views", 1)))
    except ValueError:   # blocks that do not fit the rows: said by the map's own fit
        return
    diag = np.diag(K).copy()
    np.fill_diagonal(K, -np.inf)
    nearest = float(np.median(K.max(axis=1) / np.maximum(diag, np.finfo(float).tiny)))
    if nearest < NARROW_KERNEL:
        shown = f"sigma = {sigma:g}" + (" (features.sigma x the median distance)" if scale != 1.0 else "")
        warnings.warn(f"features.sigma: the bandwidth, {shown}, is far below the distances between the training "
                      f"rows: the kernel value of a row's nearest neighbour is {nearest:.2g} (median over "
                      f"{len(X)} rows), so the kernel the map approximates is nearly the identity on them and the "
                      f"learner cannot generalize (near chance accuracy); give a larger features.sigma, or "
                      f"features.bandwidth = \"median\"", stacklevel=3)


def fit_reads_mean_only(params: dict, width: int) -> bool:
    """Whether fitting the map on rows of ``width`` columns reads nothing of them but their mean, in the bits
    :func:`streamcov.stream.featurize.rows_of` sums it: a centred RGW map of an absolute bandwidth. An
    out-of-core caller then sums the fit sample's rows as they are computed and fits the map on their mean row
    (the same mean, the same map), holding none of them: 2048 of MSR-Action3D's pyramid descriptors were
    1.2 GB held for one mean (:func:`streamcov.stream.featurize.featurize`)."""
    blocks = params.get("blocks") or [[width, 1.0]]
    # not: several views (the mirror: a block's map is centred on the mean over every view's rows, which one mean
    # row gives in other bits); a block one column wide (numpy sums a single column pairwise, not row by row); a
    # Maclaurin map (its drawn weights take the dtype of the rows it is fitted on, float32 descriptors' float32)
    return (str(params.get("map", "rgw")).lower() == "rgw" and bool(params.get("center", False))
            and params.get("bandwidth", "absolute") != "median" and int(params.get("views", 1)) == 1
            and all(int(w) >= 2 for w, _ in blocks))


def rows_read_by_fit(params: dict, seed: int, n_rows: int) -> np.ndarray | None:
    """Which of ``n_rows`` fit-sample rows :func:`fit_feature_map` reads (sorted indices), or None for all.

    A Nystroem map of an absolute bandwidth reads only its landmarks
    (:meth:`~streamcov.features.GaussianNystroem.landmark_indices`, drawn from the seed); a centred map's mean
    row and a median bandwidth read every row. Fitted on those rows alone, the map is the same (the same
    landmarks in the same order), so an out-of-core caller computes only them: 256 landmarks among a sample of
    2048 were 2048 descriptors computed and held (1.2 GB for MSR-Action3D's) for 256 kept. (A descriptor is the
    same bits whatever rows are computed with it: the eigensolver's lanes are independent.)"""
    if str(params.get("map", "rgw")).lower() != "nystroem" or params.get("bandwidth", "absolute") == "median":
        return None
    return make_feature_map(params, seed).landmark_indices(n_rows)


def for_fit_rows(params: dict, n_rows: int) -> dict:
    """``params`` for a map fitted on ``n_rows`` rows: Nystroem takes at most one landmark per row, so its
    ``n_components`` is at most ``n_rows`` (every row a landmark: the exact kernel on them). The width of the
    features is then known before the fit, as a feature store needs it, and a pipeline file runs unchanged on
    a dataset with fewer training rows than its ``n_components``."""
    if str(params.get("map", "rgw")).lower() == "nystroem" and int(params.get("n_components", 100)) > n_rows:
        return {**params, "n_components": max(int(n_rows), 1)}
    return params


def projection_columns(params: dict) -> float:
    """Expected columns of the random matrix per output feature of the map of ``params``: one for the
    Fourier maps; the mean degree for the product maps (RGW eq. (3), Maclaurin), whose feature of degree
    n multiplies n projections. RGW: a geometric law ``theta (1 - theta)^n``, mean ``(1 - theta) / theta``,
    or ``1 / theta`` over the degrees >= 1 when stratified; Maclaurin: ``p = 2``, mean 1, or 2 stratified
    (at most ``max_degree``, by which the law is cut: theta = 1e-320 had an infinite mean, and a map of 20
    features was refused as needing infinite memory, blaming n_components)."""
    name = str(params.get("map", "rgw")).lower()
    stratified = str(params.get("sampling", "iid")) == "stratified"
    if name == "rgw":
        theta = float(params.get("theta", 0.5))
        return min(1.0 / theta if stratified else (1.0 - theta) / theta, float(params.get("max_degree", 50)))
    if name == "maclaurin":
        return 2.0 if stratified else 1.0
    return 1.0


def map_nbytes(params: dict, n_features: int) -> float:
    """Bytes of the map of ``params`` fitted on ``n_features`` columns: ``n_components`` x the columns of its
    random matrix per feature (:func:`projection_columns`), but Fastfood's blocks, which hold four vectors of
    the padded width per block of outputs, whatever the input width."""
    n = int(params.get("n_components", 0))
    if str(params.get("map", "rgw")).lower() == "fastfood":
        from ._fastfood import FastfoodSampler

        return n * FastfoodSampler(n_components=max(n, 1))._nbytes_per_component(n_features)
    return 8.0 * n * n_features * max(projection_columns(params), 1e-3)


def output_dim(fmap, n_features: int) -> int:
    """Width of what ``fmap`` gives (fitted or not): ``n_components``, or the map's own ``n_output`` where it
    differs (the sum form of :class:`~streamcov.features.HeadProductSketch`)."""
    if fmap is None:
        return n_features
    return int(getattr(fmap, "n_output", fmap.n_components))


# ------------------------------------------------------ sums of kernels over column blocks
# One explicit map per column block, concatenated: a weighted sum of Gaussian kernels.
#
# A descriptor made of blocks ``x = (x_1, ..., x_B)`` (the windows of a
# temporal pyramid of covariances, each ``vec(log S_w)`` of unit norm) has the
# kernel ``k(x, y) = sum_b w_b exp(-||x_b - y_b||^2 / (2 sigma^2))`` (a sum of
# Log-E kernels, paper 000 eq. (1), one per window). With ``Phi_b`` a random
# map of the Gaussian kernel on block ``b`` (e.g. eq. (3)),
# ``Phi(x) = (sqrt(w_1) Phi_1(x_1), ..., sqrt(w_B) Phi_B(x_B))`` gives
# ``E <Phi(x), Phi(y)> = k(x, y)``. Block ``b`` gets ``n_b`` of the
# ``n_components`` features, proportional to its weight (at least one).
# With ``V`` views per row (a sequence and its mirror image), block ``b``'s
# features are the mean of its map over the views, ``(1/V) sum_s Phi_b(x^s_b)``:
# ``E <Phi(x), Phi(y)>`` is then the mean over the pairs of views
# (:mod:`streamcov.kernels`).


def allocate(n_components: int, weights) -> np.ndarray:
    """Features per block: proportional to ``weights`` (largest remainders), at least one each, summing
    to ``n_components``."""
    w = np.asarray(weights, dtype=np.float64)
    if n_components < len(w):
        raise ValueError(f"n_components = {n_components} is fewer than the {len(w)} kernel blocks "
                         f"(one feature per block at least)")
    extra = n_components - len(w)
    share = extra * w / w.sum()
    n = np.floor(share).astype(np.int64)
    rest = extra - int(n.sum())
    n[np.argsort(-(share - n), kind="stable")[:rest]] += 1
    return n + 1


class BlockSumFeatures(FitParams, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Concatenated maps of column blocks, block ``b`` scaled by ``sqrt(w_b)`` (module docstring).

    Parameters
    ----------
    map_params : dict, default=None
        The map of every block as :func:`streamcov.features.registry.make_feature_map`
        takes it (``map``, ``sigma``, the map's own options), without ``n_components``;
        None: ``{}``, that function's defaults.
    blocks : list of [width, weight], default=None
        Consecutive column blocks of the input and their kernel weights; None: one block of
        every column of a view, weight 1.
    views : int, default=1
        Views per row, each laid out in ``blocks``: a block's features are its map's mean over the views.
    n_components : int, default=100
        Features in all (shared by the blocks in proportion to their weights).
    random_state : int, RandomState instance or None, default=0
        Block ``b`` draws from the seed ``(random_state, b)`` (an integer; a saved model draws its
        maps again from it); a RandomState or None first draws that integer.

    Attributes
    ----------
    block{b}_ : transformer
        The fitted map of block ``b``.
    blocks_ : list of [width, weight]
        The blocks mapped (``blocks``, or the one block of the default).
    n_blocks_ : int
    n_features_in_ : int
    """

    _parameter_constraints: dict = {
        "map_params": [dict, None],
        "blocks": [list, None],
        "views": [Interval(Integral, 1, None, closed="left")],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(self, *, map_params=None, blocks=None, views=1, n_components=100, random_state=0):
        self.map_params = map_params
        self.blocks = blocks
        self.views = views
        self.n_components = n_components
        self.random_state = random_state

    def _blocks(self) -> list:
        """The blocks mapped: those of the fit, else ``blocks`` as given (a saved model keeps no list: with
        ``blocks`` None, the one block of its fitted width)."""
        blocks = getattr(self, "blocks_", None) or self.blocks
        if blocks is None and hasattr(self, "n_features_in_"):
            return [[int(self.n_features_in_) // int(self.views), 1.0]]
        return blocks

    def _slices(self):
        """The columns of every block in every view (``out[b][s]``) and the row width."""
        width = sum(int(w) for w, _ in self._blocks())
        out, c = [], 0
        for w, _ in self._blocks():
            out.append([slice(s * width + c, s * width + c + int(w)) for s in range(int(self.views))])
            c += int(w)
        return out, width * int(self.views)

    @property
    def width(self) -> int:
        """Columns of the rows it maps: every view laid out in ``blocks``."""
        return self._slices()[1]

    def _check_width(self, X):
        # [width, weight] pairs, widths >= 1 and weights > 0 (a negative weight reached a block's map as a
        # negative n_components, a width of 0 as an empty array, a NaN weight as NaN features)
        check_blocks(self._blocks(), None, self.views)
        width = self.width
        if X.shape[1] != width:
            raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} is expecting {width} features "
                             f"as input (the columns its kernel blocks cover"
                             f"{f', {self.views} views' if self.views > 1 else ''})")

    def _check_map_params(self) -> None:
        """The block maps' options: a map with features, and none of the keys this class sets or that only
        :func:`fit_feature_map` reads (they were replaced, or dropped, without a word)."""
        name = str(self._map_params().get("map", "rgw")).lower()
        if map_class(name) is None:   # "none" was an AttributeError at the first block
            raise ValueError(f"map_params: map = {name!r} has no features to sum over the blocks; name a feature "
                             f"map ({', '.join(m for m in MAPS if m != 'none')})")
        for key in self._map_params():
            if key in ("n_components", "random_state", "blocks", "views"):
                raise ValueError(f"map_params: {key!r} is set by BlockSumFeatures (its own {key} parameter); "
                                 f"remove it from map_params")
            if key == "bandwidth":
                raise ValueError("map_params: 'bandwidth' is read by fit_feature_map, which measures the data, not "
                                 "by BlockSumFeatures; give an absolute sigma (a median bandwidth: the median "
                                 "distance times sigma)")
            if key in FIT_OPTIONS:
                raise ValueError(f"map_params: {key!r} is read by fit_feature_map, not by BlockSumFeatures, which "
                                 f"fits on the rows given to fit; remove it, and pass the rows to fit on")

    def _map_params(self) -> dict:
        return {} if self.map_params is None else self.map_params

    def fit(self, X, y=None):
        self._validate_params()
        self._check_map_params()
        # a NaN is named as this map's input, not as the input of one block's map
        given, X = X, check_array(X, dtype=(np.float64, np.float32), estimator=self, input_name="X")
        self.__dict__.pop("blocks_", None)   # an earlier fit's blocks are not this one's
        if self.blocks is None:
            check_blocks(None, X.shape[1], self.views)
            self.blocks_ = [[X.shape[1] // int(self.views), 1.0]]
        else:
            self._check_width(X)
            self.blocks_ = [[int(w), float(c)] for w, c in self.blocks]
        # n_features_in_ and a DataFrame's column names, which transform checks (reordered columns were mapped
        # block by block as they came, without a word)
        validate_data(self, given, reset=True, skip_check_array=True)
        rs = self.random_state
        base = (int(rs) if isinstance(rs, Integral) and not isinstance(rs, bool) else
                int(check_random_state(rs).randint(np.iinfo(np.int32).max)))
        counts = allocate(int(self.n_components), [float(w) for _, w in self.blocks_])
        for b, (sl, n) in enumerate(zip(self._slices()[0], counts)):
            seed = int(np.random.SeedSequence([base, b]).generate_state(1)[0])
            fmap = make_feature_map({**self._map_params(), "n_components": int(n)}, seed)
            rows = X[:, sl[0]] if len(sl) == 1 else np.concatenate([X[:, v] for v in sl])
            setattr(self, f"block{b}_", fmap.fit(rows))
        self.n_blocks_ = len(self.blocks_)
        self._n_features_out = int(sum(counts))   # get_feature_names_out: blocksumfeatures0, ...
        self._remember_params()
        return self

    def transform(self, X):
        check_is_fitted(self, "n_blocks_")
        self._check_params_unchanged()
        given, X = X, check_array(X, dtype=(np.float64, np.float32), estimator=self, input_name="X")
        self._check_width(X)
        validate_data(self, given, reset=False, skip_check_array=True)   # the column names of fit, if any
        parts = []
        for b, (sl, (_, w)) in enumerate(zip(self._slices()[0], self._blocks())):
            fmap = getattr(self, f"block{b}_")
            Z = fmap.transform(X[:, sl[0]])
            for v in sl[1:]:
                Z = Z + fmap.transform(X[:, v])
            parts.append(Z * np.asarray(np.sqrt(float(w)) / len(sl), dtype=Z.dtype))
        return np.concatenate(parts, axis=1)


def data_arrays(est, prefix: str) -> set | None:
    """The keys (as :func:`~streamcov.stream.model.dump_estimator` names them under ``prefix``) of the fitted
    arrays of ``est`` that depend on the rows it was fitted on, or None when its class does not say.

    A map class says so in ``_data_arrays`` (names of fitted attributes; the rest is drawn from its
    seed); a :class:`~streamcov.features.registry.BlockSumFeatures` is the union of its blocks'.
    """
    if isinstance(est, BlockSumFeatures):
        out: set = set()
        for b in range(int(est.n_blocks_)):
            part = data_arrays(getattr(est, f"block{b}_"), f"{prefix}block{b}_.")
            if part is None:
                return None
            out |= part
        return out
    names = type(est).__dict__.get("_data_arrays")
    if names is None:
        return None
    return {f"{prefix}{n}" for n in names if isinstance(vars(est).get(n), np.ndarray)}


def fitted_without_data(fmap, width: int):
    """``fmap`` (unfitted, its seed set) fitted on one row of zeros: every array it draws from its seed is
    the one a fit on data draws; only its :func:`data_arrays` differ. What a feature store and a saved model
    put back in place of the drawn arrays they do not keep."""
    import warnings

    with warnings.catch_warnings():   # a map fitted on one row may warn that one row is few: by design
        warnings.simplefilter("ignore", UserWarning)
        return fmap.fit(np.zeros((1, int(width))))
