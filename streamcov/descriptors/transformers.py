"""The descriptors as scikit-learn transformers: ragged sequences or images in, one vector per row out.

* :class:`LogCovariance`: skeleton sequences, paper 000's log-covariance descriptor;
* :class:`CovarianceOperator`: images, approximate covariance operators (Approx / QApprox LogHS, paper 004);
* :class:`RegionCovariance`: images, region covariances (LogE, E).

They call the functions of :mod:`.skeleton` and :mod:`.image`, the same that
the Dask engine runs block by block, so a model fitted in memory and one
trained out of core compute the same descriptors.
"""
from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .._fitparams import FitParams
from ..linalg import vec_dim
from .cnn import CNNSpec
from .image import ImageDescriptor, feature_matrices, feature_moments, feature_scale, image_spec
from .pixels import FeatureSpec
from .skeleton import (JointSelection, _check_offsets, check_dense_item, check_item_list, log_covariance_vectors,
                       pack_sequences)


class _ReadOnce:
    """``fit_transform`` reads ``X`` in ``fit`` and again in ``transform``: a generator (or any iterator) is read
    into a list first, or ``fit`` used it up and ``transform`` found "no sequences". ``fit`` and ``transform``
    alone read it once and take it as it is."""

    def fit_transform(self, X, y=None, **fit_params):
        try:
            once = iter(X) is X
        except TypeError:
            once = False
        return super().fit_transform(list(X) if once else X, y, **fit_params)


class LogCovariance(FitParams, _ReadOnce, TransformerMixin, BaseEstimator):
    """Log-covariance descriptor of skeleton sequences (paper 000, eq. (2)), as a transformer.

    ``X`` is a list of sequences, each an array (frames, 3 x joints) with the
    joints' x, y, z side by side (the layout of the skeleton stores), or a
    3-D array (sequences, frames, 3 x joints). Each sequence becomes
    ``vec(log(Cov + gamma I))`` of its (centred) frame vectors: the input of
    the explicit feature maps (:mod:`streamcov.features`) or of any linear
    model. Stateless apart from the joint count: ``fit`` only checks the input.

    Parameters
    ----------
    center : tuple of int or None, default=None
        0-based joints whose mean is subtracted from every joint in each
        frame (the hip centre, or both hips); a single centre joint is then
        dropped (its coordinates are zero). None: raw coordinates.
    gamma : float, default=1e-4
        Regularization ``C + gamma I``.
    normalize : bool, default=True
        Scale each vector to unit norm (eq. (3) of paper 000 needs
        ``||log X||_F = 1``).
    ddof : int, default=1
        Delta degrees of freedom of the covariance.

    Attributes
    ----------
    n_joints_ : int
    n_features_in_ : int
        Values per frame, ``3 * n_joints_``.
    n_features_out_ : int
        ``d (d + 1) / 2`` with ``d = 3 x (kept joints)``.

    Examples
    --------
    >>> import numpy as np
    >>> from streamcov import LogCovariance
    >>> rng = np.random.default_rng(0)
    >>> seqs = [rng.normal(size=(t, 9)) for t in (30, 45)]   # 3 joints, 2 sequences
    >>> LogCovariance(center=(0,)).fit_transform(seqs).shape  # 2 kept joints: d = 6
    (2, 21)
    """

    _parameter_constraints: dict = {
        "center": [tuple, list, None],
        "gamma": [Interval(Real, 0, None, closed="left")],
        "normalize": ["boolean"],
        "ddof": [Interval(Integral, 0, None, closed="left")],
    }

    def __init__(self, *, center=None, gamma=1e-4, normalize=True, ddof=1):
        self.center = center
        self.gamma = gamma
        self.normalize = normalize
        self.ddof = ddof

    def _selection(self, n_joints: int) -> JointSelection:
        if self.center is None or len(self.center) == 0:
            return JointSelection.raw(n_joints)
        return JointSelection.hip_relative(n_joints, self.center)   # which checks the joints are integers

    def _check_lengths(self, frames, offsets, sel=None) -> None:
        """A covariance of fewer than max(2, ddof + 1) frames is undefined or 0, and one of a motionless
        sequence (every frame the same) is 0: such a sequence is refused, not described by the regularization
        alone (log(gamma I), the same whatever the action; the stores skip both at ingestion). Motionless is
        judged on the coordinates the covariance is of (``sel``: relative to the centre), so that a skeleton
        moved rigidly, whose raw frames differ, is one too."""
        _check_offsets(offsets, len(frames), max(2, int(self.ddof) + 1), name="X[{}]")
        coords = frames
        if sel is not None and len(sel.center):
            f = frames.reshape(len(frames), -1, 3)
            keep, center = np.asarray(sel.keep), np.asarray(sel.center)
            coords = (f[:, keep] - f[:, center].mean(axis=1, keepdims=True)).reshape(len(frames), -1)
        # per sequence, every coordinate's largest value equals its smallest, to within the rounding of the
        # centring (a rigid move's relative coordinates differ by a few ulps of the raw ones): motionless
        starts = offsets[:-1]
        spread = np.maximum.reduceat(coords, starts) - np.minimum.reduceat(coords, starts)
        scale = np.maximum.reduceat(np.abs(frames).max(axis=1), starts)
        still = (spread <= 16 * np.finfo(frames.dtype).eps * scale[:, None]).all(axis=1)
        if still.any():
            i = int(np.flatnonzero(still)[0])
            rel = " relative to the centre joint(s)" if coords is not frames else ""
            raise ValueError(f"X[{i}]: every one of its {int(offsets[i + 1] - offsets[i])} frames is the same{rel} "
                             f"(a motionless{' or rigidly moved' if rel else ''} sequence): its covariance is 0 and "
                             f"its descriptor log(gamma I), the same whatever the action; leave it out")

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Check the sequences and record the joint count."""
        frames, offsets = pack_sequences(X)
        if frames.shape[1] % 3 or not frames.shape[1]:   # no values at all was called a motionless sequence
            raise ValueError(f"X: frames have {frames.shape[1]} values, not 3 per joint of at least one joint")
        if self.center is not None and len(set(self.center)) != len(self.center):
            # (0, 0) kept joint 0 as a constant zero joint; checked in fit only: a transformer pickled with one
            # still transforms as it was fitted
            raise ValueError(f"center: {tuple(self.center)} names a joint twice; name each joint once")
        n_joints = frames.shape[1] // 3
        sel = self._selection(n_joints)
        self._check_lengths(frames, offsets, sel)
        self.n_joints_ = n_joints
        self.n_features_in_ = frames.shape[1]
        self.n_features_out_ = vec_dim(sel.dim)
        self._remember_params()
        return self

    def transform(self, X):
        """Log-covariance vectors, one row per sequence (float64)."""
        check_is_fitted(self)
        self._check_params_unchanged()
        frames, offsets = pack_sequences(X, self.n_joints_)
        sel = self._selection(self.n_joints_)
        self._check_lengths(frames, offsets, sel)
        return log_covariance_vectors(frames, offsets, sel,
                                      float(self.gamma), bool(self.normalize), int(self.ddof))

    def get_feature_names_out(self, input_features=None):
        check_is_fitted(self)
        return np.asarray([f"logcov{i}" for i in range(self.n_features_out_)], dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.three_d_array = True
        tags.requires_fit = True
        return tags


class _ImageTransformer(FitParams, _ReadOnce, TransformerMixin, BaseEstimator):
    """Shared fit/transform of the image descriptors: a list of images in, one row per image out."""

    def _descriptor(self, seed=None) -> ImageDescriptor:  # pragma: no cover - interface
        raise NotImplementedError

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Measure the feature scale on the pixels of the images ``X``."""
        images = _as_images(X)
        seed = self._resolve_seed()
        desc = self._descriptor(seed)
        _check_stride(images, desc)
        if desc.representation == "operator":   # one 2D x 2D operator per thread and a vector per image
            from .._config import check_memory

            d2 = 2 * desc.n_frequencies
            check_memory(8.0 * (desc.dim * (len(images) + 2) + 2 * d2 * d2),
                         f"n_frequencies = {self.n_frequencies} (operators of {d2} x {d2}, vectors of {desc.dim} "
                         f"numbers)", "lower n_frequencies")
        pixel_scale, _ = _pixel_scale(images)
        mats, _ = feature_matrices(images, desc.pixels, [f"X[{i}]" for i in range(len(images))])
        with np.errstate(over="ignore", invalid="ignore"):   # an overflow is refused just below
            moments = feature_moments(mats)
        if not np.isfinite(moments[2]).all():
            # float64 pixels near 1e160: every operator came out 0 (CovarianceOperator), or a NaN covariance
            raise ValueError(f"X: the pixel features' squared deviations overflow float64 (pixels up to "
                             f"{pixel_scale:.3g}); scale the images down, e.g. to 0..1")
        scale = feature_scale(moments, desc.scaling)
        frequencies = desc.frequencies_for(scale) if desc.representation == "operator" else None
        # set together, once nothing can fail: a failed (re)fit leaves the earlier fit whole, not half replaced
        self.scale_, self.pixel_scale_ = scale, pixel_scale
        self.n_features_in_, self.n_features_out_ = desc.pixels.n_features, desc.dim
        if seed is not None:
            self.seed_ = seed
        if frequencies is not None:
            self.frequencies_ = frequencies
        self._remember_params()
        return self

    def _resolve_seed(self):
        """The seed of the fit's random draws (None: the descriptor draws nothing)."""
        return None

    def transform(self, X):
        check_is_fitted(self)
        self._check_params_unchanged()
        desc = self._descriptor(getattr(self, "seed_", None))
        images = _as_images(X)   # a list first: a generator has no len
        _check_stride(images, desc)
        _check_fitted_scale(self, images)
        return desc.vectors(images, self.scale_, getattr(self, "frequencies_", None),
                            names=[f"X[{i}]" for i in range(len(images))])

    def get_feature_names_out(self, input_features=None):
        check_is_fitted(self)
        prefix = type(self).__name__.lower()
        return np.asarray([f"{prefix}{i}" for i in range(self.n_features_out_)], dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.three_d_array = True
        return tags


def _check_image_item(img, i: int) -> None:
    """Refuse, naming item ``i``, what is not an image array: a path (the images are not read from files
    here), a sparse matrix, a scalar (a DataFrame given as X is iterated as its column labels), an array of
    another shape. Each was numpy's words ("zero-size array to reduction operation minimum ...") or a message
    contradicting itself."""
    import os

    if isinstance(img, (str, bytes, os.PathLike)):
        raise ValueError(f"X[{i}]: a path ({img!r}), not an image; give the images as arrays, e.g. "
                         f"np.asarray(PIL.Image.open(path)), or ingest the folder (streamcov.ingest_images)")
    check_dense_item(img, f"X[{i}]")
    shape = np.shape(img)
    if len(shape) not in (2, 3) or (len(shape) == 3 and shape[2] not in (1, 3, 4)):
        what = f"{img!r} ({type(img).__name__}), not an array" if not shape else f"shape {shape}"
        raise ValueError(f"X[{i}]: expected a grey (h, w) or colour (h, w, 3) image, got {what}")


def _as_images(X) -> list:
    check_item_list(X, "X", "a list of images (h, w) or (h, w, 3)")
    if isinstance(X, np.ndarray) and X.ndim == 2:
        raise ValueError(f"X: one image of shape {X.shape}; give a list of images, e.g. [image]")
    if isinstance(X, np.ndarray) and X.ndim == 3 and X.shape[2] in (3, 4):
        # a colour image passed alone would be read as h grey images of w x 3 pixels; a stack of grey images
        # 3 or 4 pixels wide, the other reading, is far rarer, and a list says it
        raise ValueError(f"X: an array of shape {X.shape} reads as one colour image (h, w, {X.shape[2]}); give a "
                         f"list of images, e.g. [image] (a stack of grey images {X.shape[2]} pixels wide: "
                         f"list(stack))")
    if isinstance(X, np.ndarray) and X.ndim in (3, 4):
        return list(X)
    try:
        images = list(X)
    except TypeError:
        raise ValueError(f"X: expected a list of images (h, w) or (h, w, 3), got {type(X).__name__}") from None
    if not images:
        raise ValueError("X: no images")
    from ..data.imageio import MIN_SIDE

    for i, img in enumerate(images):
        _check_image_item(img, i)
        shape = np.shape(img)
        if len(shape) in (2, 3) and min(shape[:2]) < MIN_SIDE:
            # one pixel, or one row: no derivative and no spread, a descriptor of the regularization alone
            raise ValueError(f"X[{i}]: an image of {shape[0]} x {shape[1]} pixels; a covariance needs at least "
                             f"{MIN_SIDE} x {MIN_SIDE}: leave it out")
    return images


def _pixel_scale(images: list) -> tuple[float, int | None]:
    """The pixel scale of ``images`` once read (:func:`.pixels.as_float_image`): 1 for integer and bool
    images (fractions of their range), the largest ``|pixel|`` of the float images; and the index of an
    integer image, or None. A list mixing integer images with float images beyond 2 (0 to 255 floats, say)
    is refused: their features would lie on different scales without a word (ingestion refuses float
    images outside 0 to 1 among integer ones). Float images are judged together, so a dark image among
    0 to 255 ones is not taken for another scale."""
    first_int, top, top_at = None, 0.0, None
    for i, im in enumerate(images):
        a = np.asarray(im)
        if a.dtype.kind in "biu":
            first_int = i if first_int is None else first_int
        elif a.dtype.kind == "f" and a.size:
            # NaN and infinities: refused by the feature pass, named there by row and column (an infinity here
            # was said to be a pixel scale other than the fit's)
            v = float(np.max(np.abs(a), where=np.isfinite(a), initial=0.0))
            if v > top:
                top, top_at = v, i
    if first_int is not None and top > 2:
        raise ValueError(f"X[{top_at}]: float pixels up to {top:.4g}, but X[{first_int}] is an integer image, read "
                         f"as fractions of its range (0 to 1): the two would lie on different scales; scale the "
                         f"float images to 0 to 1 (divide 8-bit values by 255), or give integers")
    return max(top, 1.0 if first_int is not None else 0.0), first_int


def _check_fitted_scale(est, images: list) -> None:
    """Images on another scale than the fit's: float images beyond 2 given to a descriptor fitted on the 0
    to 1 scale, or integer images (read as 0 to 1) given to one fitted on float images beyond 2: their
    features would be 255 times off without a word, as ``predict`` refuses for stores. Descriptors
    pickled before the scale was recorded are not checked."""
    trained = getattr(est, "pixel_scale_", None)
    if trained is None:
        return
    given, first_int = _pixel_scale(images)
    if trained <= 1 and given > 2:
        raise ValueError(f"X: float pixels up to {given:.4g}, but {type(est).__name__} was fitted on pixels on the "
                         f"0 to 1 scale: the features would be on another scale; scale the images to 0 to 1 "
                         f"(8-bit values / 255), or fit on images like these")
    if trained > 2 and first_int is None and 0 < given <= 1:   # black images (0) fit any scale
        raise ValueError(f"X: float pixels within 1 (the 0 to 1 scale), but {type(est).__name__} was fitted on "
                         f"float pixels up to {trained:.4g}: the features would be on another scale; give images on "
                         f"the fitted scale (0 to 1 floats times 255 for 8-bit ones), or fit on images like these")
    if trained > 2 and first_int is not None:
        raise ValueError(f"X[{first_int}]: an integer image, read as fractions of its range (0 to 1), but "
                         f"{type(est).__name__} was fitted on float pixels up to {trained:.4g}: the features would "
                         f"be on another scale; give float images on the fitted scale, or fit on images like these")


def _check_stride(images: list, desc: ImageDescriptor) -> None:
    """Every image keeps 2 sampled pixels at the features' stride: with one, its covariance is 0 and every
    such image gets the same descriptor (the pipelines refuse it too)."""
    from .pixels import check_sampled_pixels

    stride = getattr(desc.pixels, "stride", 1)
    check_sampled_pixels(np.array([np.shape(im)[:2] for im in images]), stride,
                         [f"X[{i}]" for i in range(len(images))], fix="lower the stride, or leave the image out")


class CovarianceOperator(_ImageTransformer):
    """Approximate covariance operators of images as vectors (paper 004, eqs. (20)-(21)).

    ``X`` is a list of images (grey (h, w) or colour (h, w, 3), any size).
    ``fit`` measures the feature scale on their pixels and draws the
    frequencies; ``transform`` gives ``vec(log(I + C_D / gamma))`` per image
    (float32), whose Euclidean distances are approximate Log-HS distances
    (Approx LogHS with random frequencies, QApprox LogHS with ``"halton"``),
    or ``vec(C_D)`` with ``log=False`` (approximate HS).

    Parameters
    ----------
    pixels : str, dict, FeatureSpec or CNNSpec, default="texture"
        Per-pixel features: a preset of :data:`streamcov.descriptors.pixels.PRESETS`, a spec, or
        ConvNet hypercolumns (:class:`~streamcov.descriptors.cnn.CNNSpec`, or a dict with
        ``source="cnn"``; needs ``pip install 'streamcov[cnn]'``).
    n_frequencies : int, default=200
        D; the operator is 2D x 2D.
    sigma : float, default=1.0
        K1 bandwidth in units of ``sqrt(n_features)`` feature scales,
        ``exp(-||x - y||^2 / (2 sigma^2))`` (paper 004's sigma1 is ``sqrt(2)`` times it).
    frequencies : {"random", "halton"}, default="random"
    gamma : float, default=1e-3
        Regularization (paper 004's gamma = mu).
    log : bool, default=True
    scaling : {"global", "per-feature"}, default="global"
    random_state : int, RandomState instance or None, default=0
        Seeds the random frequencies; resolved once in ``fit`` (``seed_``).

    Attributes
    ----------
    seed_ : int
        The seed of the frequencies, resolved from ``random_state``.
    frequencies_ : ndarray of shape (n_features_in_, n_frequencies)
        K1's frequencies with the feature scale folded in: the raw pixel features ``x`` enter as ``x @ W``.
    scale_ : ndarray of shape (n_features_in_,)
        The pixel features' scale measured by ``fit`` (one value repeated with
        ``scaling="global"``, each feature's standard deviation with ``"per-feature"``).
    pixel_scale_ : float
        The images' pixel scale at ``fit``: 1 for integer images (read as 0 to 1), the
        largest ``|pixel|`` of float images; ``transform`` refuses images on another scale.
    n_features_in_ : int
        Per-pixel features (not pixels: the images may have any size).
    n_features_out_ : int
        ``D (2 D + 1)``: the upper triangle of the 2D x 2D operator.
    """

    _parameter_constraints: dict = {
        "pixels": [str, dict, FeatureSpec, CNNSpec],
        "n_frequencies": [Interval(Integral, 1, None, closed="left")],
        "sigma": [Interval(Real, 0, None, closed="neither")],
        "frequencies": [StrOptions({"random", "halton"})],
        "gamma": [Interval(Real, 0, None, closed="neither")],
        "log": ["boolean"],
        "scaling": [StrOptions({"global", "per-feature"})],
        "random_state": ["random_state", Interval(Integral, 0, None, closed="left")],
    }

    def __init__(self, *, pixels="texture", n_frequencies=200, sigma=1.0, frequencies="random",
                 gamma=1e-3, log=True, scaling="global", random_state=0):
        self.pixels = pixels
        self.n_frequencies = n_frequencies
        self.sigma = sigma
        self.frequencies = frequencies
        self.gamma = gamma
        self.log = log
        self.scaling = scaling
        self.random_state = random_state

    def _resolve_seed(self) -> int:
        # as scikit-learn resolves random_state: in fit, once (an int as it is; None or a RandomState drawn from)
        rs = self.random_state
        if isinstance(rs, Integral) and not isinstance(rs, bool) and rs >= 0:
            # numpy seeds are 32-bit: a larger int is hashed down to one (SeedSequence), a smaller one kept
            return int(rs) if rs < 2 ** 32 else int(np.random.SeedSequence(int(rs)).generate_state(1)[0])
        return int(check_random_state(rs).randint(np.iinfo(np.int32).max))

    def _descriptor(self, seed=None):
        # transform of a descriptor pickled before seed_ was recorded: its int random_state was its seed
        seed = int(self.random_state) if seed is None else seed
        from ..kernels import _bandwidth   # K1's frequencies are 1 / sigma: 1e-300 made them meaningless

        return ImageDescriptor(image_spec(self.pixels), "operator", int(self.n_frequencies),
                               _bandwidth(self.sigma, "sigma"),
                               self.frequencies, float(self.gamma), bool(self.log), self.scaling, seed)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float32"]   # float32 vectors whatever the images' dtype
        return tags


class RegionCovariance(_ImageTransformer):
    """Region covariances of images as vectors: LogE (paper 004, eq. (9)) or E (eq. (1)).

    ``transform`` gives ``vec(log(I + C / gamma))`` of the covariance of the
    standardized pixel features (or ``vec(C)`` with ``log=False``), float64.

    Parameters
    ----------
    pixels : str, dict, FeatureSpec or CNNSpec, default="texture"
    gamma : float, default=1e-3
    log : bool, default=True
    scaling : {"global", "per-feature"}, default="global"

    Attributes
    ----------
    scale_ : ndarray of shape (n_features_in_,)
        The pixel features' scale measured by ``fit`` (one value repeated with
        ``scaling="global"``, each feature's standard deviation with ``"per-feature"``).
    pixel_scale_ : float
        The images' pixel scale at ``fit``: 1 for integer images (read as 0 to 1), the
        largest ``|pixel|`` of float images; ``transform`` refuses images on another scale.
    n_features_in_ : int
        Per-pixel features (not pixels: the images may have any size).
    n_features_out_ : int
        ``d (d + 1) / 2`` for ``d = n_features_in_``: the upper triangle of the covariance.
    """

    _parameter_constraints: dict = {
        "pixels": [str, dict, FeatureSpec, CNNSpec],
        "gamma": [Interval(Real, 0, None, closed="neither")],
        "log": ["boolean"],
        "scaling": [StrOptions({"global", "per-feature"})],
    }

    def __init__(self, *, pixels="texture", gamma=1e-3, log=True, scaling="global"):
        self.pixels = pixels
        self.gamma = gamma
        self.log = log
        self.scaling = scaling

    def _descriptor(self, seed=None):
        return ImageDescriptor(image_spec(self.pixels), "region", gamma=float(self.gamma), log=bool(self.log),
                               scaling=self.scaling)


__all__ = ["CovarianceOperator", "LogCovariance", "RegionCovariance"]
