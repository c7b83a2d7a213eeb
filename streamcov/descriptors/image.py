"""Image descriptors of paper 004: one vector per image, for any learner.

An image is first a data matrix, one row per pixel: hand-crafted per-pixel
features (eq. (38), :mod:`.pixels`, a :class:`~.pixels.FeatureSpec`) or
ConvNet hypercolumns, one row per grid cell (section 5, :mod:`.cnn`, a
:class:`~.cnn.CNNSpec`), standardized by a feature scale measured on
training images (one number, or one per feature). Then either

* ``"operator"``: the approximate covariance operator of random (eq. (29))
  or quasi-random (appendix C) Fourier features of the Gaussian kernel K1
  (eq. (20)), then ``vec(log(I + C / gamma))`` (eq. (21); the constant
  ``log(gamma) I`` cancels in distances) or, with ``log=False``, ``vec(C)``
  (approximate HS); Euclidean distances between the vectors are the
  approximate Log-HS (HS) distances; or
* ``"region"``: the region covariance (eq. (8)), then
  ``vec(log(I + C / gamma))`` (LogE, eq. (9)) or ``vec(C)`` (E); or
* ``"head"`` (ConvNet only): the pooled head vector (the fc7 analogue) at
  unit norm, for the linear kernel of paper 004's x^fc.

With ``head=True`` an operator vector is followed by the unit head vector:
the input of the conv + head kernels (:class:`~streamcov.stream.exact.GaussianKernelSVC`
with ``n_head``, :class:`~streamcov.features.HeadProductSketch`).

The functions below are the one implementation: the scikit-learn
transformers (:mod:`streamcov.descriptors.transformers`), the image source
of the Dask engine (:mod:`streamcov.stream.image`) and the model selection
of the ``image-classification`` task all call them.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .. import linalg
from ..linalg import merge_moments, vec_dim
from .operators import _approx_cov, fourier_frequencies
from .cnn import HEAD_DIM, is_cnn
from .pixels import FeatureSpec, get_spec, named, pixel_features

SOURCES = ("handcrafted", "cnn")


# ----------------------------------------------------------- data matrices

def image_spec(spec):
    """A :class:`~.pixels.FeatureSpec` or a :class:`~.cnn.CNNSpec` from a spec, a preset name, a list or a dict.

    A dict with ``source = "cnn"`` gives a CNNSpec (keys ``blocks``,
    ``input_size``, ``grid``, ``head``, ``backend``, ``batch_size``); any other
    is read by :func:`~.pixels.get_spec` (``source = "handcrafted"`` allowed).
    """
    if is_cnn(spec) or isinstance(spec, FeatureSpec):
        return spec
    if isinstance(spec, dict):
        d = dict(spec)
        source = d.pop("source", "handcrafted")
        if source == "cnn":
            from .cnn import CNNSpec

            return CNNSpec.from_dict(d)
        if source != "handcrafted":
            raise ValueError(f"pixel source must be one of {', '.join(SOURCES)}, got {source!r}")
        return get_spec(d)
    return get_spec(spec)


def spec_as_dict(spec) -> dict:
    if is_cnn(spec):
        return spec.as_dict()
    d = asdict(spec)
    d["features"] = list(spec.features)
    return d


def spec_from_dict(d: dict):
    d = dict(d)
    if d.get("source") == "cnn":
        from .cnn import CNNSpec

        return CNNSpec.from_dict(d)
    d.pop("source", None)
    name = d.pop("name", "custom")
    return FeatureSpec(**{**d, "features": tuple(d["features"])}, name=name)


def feature_matrices(images, spec, names=None, threads: int = 1, maps: bool = True):
    """The data matrix of every image and, for a ConvNet spec with ``head``, the raw head vectors.

    Returns ``(mats, heads)``: a list of (rows, n_features) arrays (float64
    pixel features, or float32 hypercolumns) and an (n, 1280) float32 array
    or None. ``threads``: onnxruntime threads of the network calls.
    ``maps = False`` (a ConvNet spec, for the heads alone): mats is None.
    """
    images = list(images)
    if is_cnn(spec):
        from .cnn import extract

        return extract(images, spec, names=names, threads=threads, maps=maps)
    return [features_of(img, spec, _name(names, i)) for i, img in enumerate(images)], None


HEAD_NORMS = ("l2", "power")


def normalize_heads(heads, norm: str = "l2") -> np.ndarray:
    """Head vectors normalised for the linear kernel of x^fc (paper 004, section 5), float32.

    Parameters
    ----------
    heads : array (n, n_head)
        Pooled heads, one row per image.
    norm : {"l2", "power"}, default="l2"
        ``"l2"``: ``h / ||h||``. ``"power"``: the signed square root
        ``sign(h) sqrt(|h|)`` of every entry, then ``/ ||.||`` (the power
        normalisation of pooled features; for the non-negative heads, the
        linear kernel of the result is the Hellinger (Bhattacharyya)
        affinity of the heads as distributions over the channels).

    Returns
    -------
    ndarray (n, n_head), float32
        Unit rows; an all-zero head stays zero. The heads are averages of
        ReLU6 outputs, non-negative: the linear kernel of the rows (their
        cosine) lies in [0, 1] with either norm.
    """
    if norm not in HEAD_NORMS:
        raise ValueError(f"head norm must be one of {', '.join(HEAD_NORMS)}, got {norm!r}")
    h = np.asarray(heads, dtype=np.float64)
    if h.ndim != 2:
        raise ValueError(f"heads must be a 2-d array (one row per image), got shape {h.shape}")
    if not np.isfinite(h).all():   # passed through as NaN rows before
        raise ValueError(f"head {int(np.argwhere(~np.isfinite(h))[0][0])} holds NaN or infinite values")
    if norm == "power":
        h = np.sign(h) * np.sqrt(np.abs(h))
    n = np.linalg.norm(h, axis=1, keepdims=True)
    return (h / np.where(n > 0, n, 1.0)).astype(np.float32)


def unit_heads(heads) -> np.ndarray:
    """Head vectors at unit norm, float32: :func:`normalize_heads` with ``norm="l2"``."""
    return normalize_heads(heads, "l2")


# ----------------------------------------------------------- feature scale
def image_moments(features) -> tuple:
    """``(n, mean, M2)`` of the pixel features of one image: count, mean and sums of squared deviations."""
    f = np.asarray(features, dtype=np.float64)
    mean = f.mean(axis=0)
    return len(f), mean, ((f - mean) ** 2).sum(axis=0)


def feature_moments(feature_mats) -> tuple:
    """Moments of all pixels of several images, merged exactly (Chan)."""
    acc = None
    for f in feature_mats:
        m = image_moments(f)
        acc = m if acc is None else merge_moments(acc, m)
    if acc is None:
        raise ValueError("no images to measure the feature scale on")
    return acc


def feature_scale(moments, scaling: str = "global") -> np.ndarray:
    """Feature scale from pixel moments ``(n, mean, M2)``.

    ``per-feature``: each feature's standard deviation (1 where constant);
    ``global``: one number for all features, the root mean square of those
    standard deviations, so the features keep their relative weights (as raw
    features with a tuned kernel bandwidth) while the bandwidth stays in
    units of the data.
    """
    if scaling not in ("global", "per-feature"):
        raise ValueError(f"feature scaling must be 'global' or 'per-feature', got {scaling!r}")
    n, _, m2 = moments
    var = np.maximum(np.asarray(m2, dtype=np.float64) / n, 0.0)
    if scaling == "global":
        rms = float(np.sqrt(np.mean(var)))
        return np.full(len(var), rms if rms > 0 else 1.0)
    sd = np.sqrt(var)
    sd[sd <= 1e-12 * max(sd.max(), 1.0)] = 1.0
    return sd


# ------------------------------------------------------------- descriptors
def operator_frequencies(n_features: int, n_frequencies: int, sigma: float, kind: str, seed: int,
                         scale: np.ndarray) -> np.ndarray:
    """Frequencies ``W`` of K1 for standardized features, folded with the scale: ``x @ W``.

    ``sigma`` is in units of ``sqrt(n_features)`` feature scales, so the same
    value suits any feature set (paper 004 chooses sigma1 so).
    """
    s = float(sigma) * np.sqrt(n_features)
    return fourier_frequencies(n_features, n_frequencies, s, kind=kind, random_state=seed) / scale[:, None]


def operator_vectors(feature_mats, W, gamma, log: bool = True, dtype=np.float32, batch: int = 16,
                     n_jobs: int | None = None):
    """Per image, the approximate covariance operator (eq. (20)) of ``features @ W``, as a vector.

    Returns ``vec(log(I + C / gamma))`` for each gamma (a list when
    ``gamma`` is a sequence: one eigendecomposition per operator serves
    them all), or ``vec(C)`` when ``log`` is False. Operators are formed
    ``batch`` at a time, so memory stays bounded; ``n_jobs`` threads take
    their logarithms (see :func:`streamcov.linalg.log_vectors`).
    """
    feature_mats = list(feature_mats)
    gammas = list(gamma) if np.ndim(gamma) else [gamma]
    d2 = 2 * W.shape[1]
    p = vec_dim(d2)
    outs = [np.empty((len(feature_mats), p), dtype=dtype) for _ in (gammas if log else [None])]
    for a in range(0, len(feature_mats), batch):
        covs = np.stack([_approx_cov(np.asarray(f, dtype=np.float64), W) for f in feature_mats[a:a + batch]])
        if log:
            vecs = linalg.log_vectors(covs, gammas, relative=True, check=False, what="operator",
                                      first_index=a, n_jobs=n_jobs)
        else:
            vecs = [linalg.sym_vec(covs)]
        for out, v in zip(outs, vecs):
            out[a:a + len(v)] = v
    return outs if (log and np.ndim(gamma)) else outs[0]


def region_vectors(covariances, scale, gamma, log: bool = True, dtype=np.float64):
    """Region covariances of the standardized features as vectors: LogE (eq. (9)) or E (eq. (1)).

    ``covariances`` are of the raw features; dividing by ``outer(scale,
    scale)`` standardizes them. A sequence of gammas gives a list.
    """
    covs = np.asarray(covariances, dtype=np.float64) / np.outer(scale, scale)[None]
    if not log:
        return linalg.sym_vec(covs).astype(dtype, copy=False)
    out = linalg.log_vectors(covs, list(gamma) if np.ndim(gamma) else float(gamma), relative=True,
                             what="region covariance")
    return [o.astype(dtype, copy=False) for o in out] if np.ndim(gamma) else out.astype(dtype, copy=False)


@dataclass(frozen=True)
class ImageDescriptor:
    """What turns one image into one vector; see the module docstring.

    Parameters
    ----------
    pixels : FeatureSpec or CNNSpec
        A :class:`~.pixels.FeatureSpec` (eq. (38)) or a :class:`~.cnn.CNNSpec` (hypercolumns).
    representation : {"operator", "region", "head"}
        The vector of the module docstring (default ``"operator"``; ``"head"`` needs a ConvNet spec with
        ``head``).
    n_frequencies : int
        D, the Fourier frequencies of K1 (default 200): the operator is 2D x 2D (``"operator"`` only).
    sigma : float
        Bandwidth of K1 in streamcov's convention (:mod:`streamcov.kernels`) and in units of
        ``sqrt(n_features)`` feature scales (default 1).
    frequencies : {"random", "halton"}
        Random (Approx, the default) or quasi-random (QApprox) frequencies.
    gamma : float
        Regularization of ``log(I + C / gamma)`` (default 1e-3; > 0).
    log : bool
        ``vec(log(I + C / gamma))`` (default), else ``vec(C)``.
    scaling : {"global", "per-feature"}
        How the feature scale is measured on training pixels (:func:`feature_scale`): one number for all
        features (default), or each feature's standard deviation.
    random_state : int
        Seeds the random frequencies (default 0; the Halton ones are deterministic).
    head : bool
        Append the unit head vector to an operator vector (ConvNet specs with ``head`` only).
    head_norm : {"l2", "power"}
        The normalisation of the head vector (:func:`normalize_heads`; default ``"l2"``).
    """

    pixels: FeatureSpec
    representation: str = "operator"
    n_frequencies: int = 200
    sigma: float = 1.0
    frequencies: str = "random"
    gamma: float = 1e-3
    log: bool = True
    scaling: str = "global"
    random_state: int = 0
    head: bool = False
    head_norm: str = "l2"

    @property
    def needs_scale(self) -> bool:
        return self.representation != "head"

    @property
    def n_head(self) -> int:
        """Trailing columns of the vector that hold the unit head (0 when none)."""
        return HEAD_DIM if (self.head or self.representation == "head") else 0

    def __post_init__(self):
        # also guards descriptors read back from a model file
        def number(v):
            return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) \
                and np.isfinite(v)

        if self.representation not in ("operator", "region", "head"):
            raise ValueError(f"representation must be 'operator', 'region' or 'head', got {self.representation!r}")
        wants_head = self.head or self.representation == "head"
        if wants_head and not (is_cnn(self.pixels) and self.pixels.head):
            raise ValueError("the head vector comes from the ConvNet: it needs pixels source 'cnn' with head = true")
        if self.head and self.representation != "operator":
            raise ValueError("head = True appends the head to an operator vector; representation 'head' is the "
                             "head alone")
        if not (isinstance(self.n_frequencies, (int, np.integer)) and self.n_frequencies >= 1):
            raise ValueError(f"n_frequencies (D) must be a positive integer, got {self.n_frequencies!r}")
        if not (number(self.sigma) and self.sigma > 0):
            raise ValueError(f"sigma must be a finite number > 0, got {self.sigma!r}")
        if not (number(self.gamma) and self.gamma > 0):
            raise ValueError(f"gamma must be a finite number > 0, got {self.gamma!r}")
        if self.frequencies not in ("random", "halton"):
            raise ValueError(f"frequencies must be random or halton, got {self.frequencies!r}")
        if self.scaling not in ("global", "per-feature"):
            raise ValueError(f"scaling must be global or per-feature, got {self.scaling!r}")
        if not isinstance(self.log, bool):
            raise ValueError(f"log must be true or false, got {self.log!r}")
        if self.head_norm not in HEAD_NORMS:
            raise ValueError(f"head_norm must be one of {', '.join(HEAD_NORMS)}, got {self.head_norm!r}")

    @property
    def dim(self) -> int:
        if self.representation == "head":
            return HEAD_DIM
        d = 2 * self.n_frequencies if self.representation == "operator" else self.pixels.n_features
        return vec_dim(d) + (HEAD_DIM if self.head else 0)

    @property
    def dtype(self) -> str:
        return "float64" if self.representation == "region" else "float32"

    def as_dict(self) -> dict:
        d = asdict(self)
        d["pixels"] = spec_as_dict(self.pixels)
        if d["head_norm"] == "l2":   # the default is left out: earlier fingerprints and model files stay as they were
            del d["head_norm"]
        return d

    def identity(self) -> dict:
        """:meth:`as_dict` for the fingerprints of stores: ConvNet features by what they depend on
        (:meth:`~streamcov.descriptors.cnn.CNNSpec.identity`)."""
        d = self.as_dict()
        if is_cnn(self.pixels):
            d["pixels"] = self.pixels.identity()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "ImageDescriptor":
        d = dict(d)
        return cls(pixels=spec_from_dict(d.pop("pixels")), **d)

    def frequencies_for(self, scale) -> np.ndarray:
        return operator_frequencies(self.pixels.n_features, self.n_frequencies, self.sigma, self.frequencies,
                                    self.random_state, np.asarray(scale, dtype=np.float64))

    def vectors(self, images, scale, W=None, names=None, threads: int = 1) -> np.ndarray:
        """Descriptors of ``images`` (arrays) given the fitted feature scale (and ``W`` if known).

        ``threads``: onnxruntime threads of a ConvNet spec's network calls.
        """
        images = list(images)
        if self.representation == "region" and not is_cnn(self.pixels):
            from .pixels import image_covariances

            covs = image_covariances(images, self.pixels, ids=names)
            return region_vectors(covs, np.asarray(scale, dtype=np.float64), self.gamma, self.log)
        mats, heads = feature_matrices(images, self.pixels, names, threads, maps=self.representation != "head")
        return self.vectors_of(mats, heads, scale, W)

    def vectors_of(self, mats, heads, scale, W=None) -> np.ndarray:
        """Descriptors from the data matrices (and heads) of the images, as :func:`feature_matrices` gives them."""
        if self.representation == "head":
            return normalize_heads(heads, self.head_norm)
        scale = np.asarray(scale, dtype=np.float64)
        if self.representation == "region":
            from .pixels import region_covariance

            covs = np.stack([region_covariance(m) for m in mats])
            return region_vectors(covs, scale, self.gamma, self.log)
        W = self.frequencies_for(scale) if W is None else W
        V = operator_vectors(mats, W, self.gamma, self.log, dtype=np.float32)
        return np.hstack([V, normalize_heads(heads, self.head_norm)]) if self.head else V


def _name(names, i):
    return f"image {i}" if names is None else names[i]


def features_of(image, spec, where: str) -> np.ndarray:
    """Pixel features of one image; errors name the image."""
    try:
        return pixel_features(image, spec, where)
    except ValueError as exc:
        raise ValueError(named(where, exc)) from None


__all__ = ["ImageDescriptor", "feature_matrices", "feature_moments", "feature_scale", "image_moments", "image_spec",
           "is_cnn", "normalize_heads", "operator_frequencies", "operator_vectors", "region_vectors",
           "unit_heads"]
