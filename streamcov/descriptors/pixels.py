"""Per-pixel image features of paper 004, eq. (38), and region covariances.

At pixel (x, y) the full feature vector is

    F(x, y) = [x, y, I, |I_x|, |I_y|, |I_xx|, |I_yy|, R, G, B, |G^{(o,s)}_{x,y}|]

and each dataset of section 6.1 uses a subset (:data:`PRESETS`). ``I`` is
the intensity (BT.601 luma of R, G, B for colour images), derivatives use
the filters [-1, 0, 1] and [1, -2, 1], and ``G^{(o,s)}`` is the response of
a Gabor filter at orientation ``o`` and scale ``s``. The paper does not write
the filters out; we use the bank common in the covariance-descriptor
literature (the "gaborFilterBank" of the MATLAB code accompanying those
works): frequency ``f_s = fmax / sqrt(2)^s``, orientation
``theta_o = o * pi / n_orientations`` and

    G(x, y) = f^2 / (pi gamma eta) exp(-(f^2/gamma^2) x'^2 - (f^2/eta^2) y'^2) exp(i 2 pi f x'),

``x' = x cos(theta) + y sin(theta)``, ``y' = -x sin(theta) + y cos(theta)``,
``gamma = eta = sqrt(2)``, ``fmax = 0.25``, on a (2r+1) x (2r+1) window with
``r = 19``. With ``gamma = eta`` the envelope is isotropic, so each filter is
the outer product of two complex 1-D filters and the kernels convolve
separably (2(2r+1) instead of (2r+1)^2 operations per pixel).

Images are float in [0, 1] (uint8 / 255, uint16 / 65535); boundaries are
reflected (scipy.ndimage ``mode="reflect"``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from .._config import run_parallel
from .._kernels import pixels as _kp
from ..errors import ConfigError, toml_value

_CHANNEL = {"I": 0, "R": 1, "G": 2, "B": 3}
_DERIV = {"x": 0, "y": 1, "xx": 2, "yy": 3}

#: Feature subsets of paper 004, section 6.1 (and grey substitutes).
PRESETS: dict[str, dict] = {
    # intensity, 4 gradients, 20 Gabor magnitudes (4 orientations x 5 scales), following [20]
    "virus": dict(features=("I", "Ix", "Iy", "Ixx", "Iyy", "gabor"), gabor_orientations=4,
                  gabor_scales=5),
    # R, G, B and 20 Gabor magnitudes
    "kth-tips2b": dict(features=("R", "G", "B", "gabor"), gabor_orientations=4, gabor_scales=5),
    # grey KTH-TIPS: the intensity replaces R, G, B
    "kth-tips-grey": dict(features=("I", "gabor"), gabor_orientations=4, gabor_scales=5),
    # [x, y, I, |Ix|, |Iy|], following [11]
    "texture": dict(features=("x", "y", "I", "Ix", "Iy")),
    # [x, y, I, |Ix|, |Iy|], following [22]
    "eth80": dict(features=("x", "y", "I", "Ix", "Iy")),
    # x, y, R, G, B and first/second derivatives of each colour (17)
    "ethz": dict(features=("x", "y", "R", "G", "B", "Rx", "Ry", "Rxx", "Ryy", "Gx", "Gy", "Gxx",
                           "Gyy", "Bx", "By", "Bxx", "Byy")),
    # 3 colours, 4 gradients, 12 Gabor magnitudes (4 orientations x 3 scales), following [17]
    "uiuc": dict(features=("R", "G", "B", "Ix", "Iy", "Ixx", "Iyy", "gabor"), gabor_orientations=4,
                 gabor_scales=3),
    # [|Ix|, |Iy|, |Ixx|, |Iyy|, R, G, B], following [17]
    "tinygraz03": dict(features=("Ix", "Iy", "Ixx", "Iyy", "R", "G", "B")),
    # R, G, B, as in [36]
    "fish": dict(features=("R", "G", "B")),
}


@dataclass(frozen=True)
class FeatureSpec:
    """Which per-pixel features to extract.

    Parameters
    ----------
    features : tuple of str
        Names in output order: ``x``, ``y``, ``I``, ``R``, ``G``, ``B``,
        derivative magnitudes ``<C><d>`` with ``C`` in I, R, G, B and ``d`` in
        x, y, xx, yy (``Ix`` is ``|I_x|``; bars are accepted and ignored), and
        ``gabor`` for all ``gabor_orientations * gabor_scales`` Gabor
        magnitudes (scale-major).
    gabor_orientations, gabor_scales : int
        Size of the Gabor bank.
    gabor_fmax : float
        Highest frequency (cycles per pixel) of the bank.
    gabor_radius : int
        Filter window half-width r (window 2r+1).
    stride : int
        Sample pixels on a grid with this step (features are still computed
        at full resolution). 1 = every pixel.
    """

    features: tuple[str, ...]
    gabor_orientations: int = 4
    gabor_scales: int = 5
    gabor_fmax: float = 0.25
    gabor_radius: int = 19
    stride: int = 1
    name: str = field(default="custom", compare=False)

    def __post_init__(self):
        object.__setattr__(self, "features", tuple(str(f).strip("|") for f in self.features))
        if not self.features:
            raise ValueError("feature spec has no features; list at least one of x, y, I, R, G, B, "
                             "Ix, Iy, Ixx, Iyy, gabor")
        for f in self.features:
            parse_feature_name(f)
        twice = next((f for f in self.features if self.features.count(f) > 1), None)
        if twice is not None:   # a column twice: every image's covariance would be singular
            raise ValueError(f"feature spec lists {twice!r} twice; list each feature once")
        for key in ("gabor_orientations", "gabor_scales", "stride"):
            v = getattr(self, key)
            if int(v) != v or v < 1:
                raise ValueError(f"feature spec {key} must be a positive integer, got {v!r}")
        if int(self.gabor_radius) != self.gabor_radius or self.gabor_radius < 0:
            raise ValueError(f"feature spec gabor_radius must be an integer >= 0, got {self.gabor_radius!r}")
        if not 0 < self.gabor_fmax <= 0.5:
            raise ValueError(f"feature spec gabor_fmax must be in (0, 0.5] cycles/pixel, got {self.gabor_fmax}")

    @property
    def n_gabor(self) -> int:
        return self.gabor_orientations * self.gabor_scales if "gabor" in self.features else 0

    @property
    def n_features(self) -> int:
        return len(self.features) - ("gabor" in self.features) + self.n_gabor

    @property
    def needs_color(self) -> bool:
        return any(parse_feature_name(f)[1] in (1, 2, 3) for f in self.features if f != "gabor")

    @property
    def column_names(self) -> list[str]:
        out = []
        for f in self.features:
            if f == "gabor":
                out += [f"|G(o={o},s={s})|" for s in range(self.gabor_scales)
                        for o in range(self.gabor_orientations)]
            elif f in ("x", "y") or f in _CHANNEL:
                out.append(f)
            else:
                out.append(f"|{f}|")
        return out

    def table(self) -> np.ndarray:
        """Feature table for the numba kernels (see :mod:`streamcov._kernels.pixels`)."""
        rows = []
        for f in self.features:
            if f == "gabor":
                rows += [(4, 0, k) for k in range(self.n_gabor)]
            else:
                rows.append(parse_feature_name(f))
        return np.asarray(rows, dtype=np.int64).reshape(-1, 3)

    def gabor_factors(self):
        """Separable Gabor bank: (gx_re, gx_im, gy_re, gy_im), each (n_filters, 2r+1)."""
        return gabor_bank(self.gabor_orientations, self.gabor_scales, self.gabor_fmax,
                          self.gabor_radius, n=max(self.n_gabor, 1))


def parse_feature_name(name: str):
    """``(kind, channel, derivative)`` of a per-pixel feature name (``x``, ``I``, ``Ix``, ``Ryy``, ``gabor``), as
    :meth:`FeatureSpec.table` lays it out; ValueError naming the known names for another."""
    if name == "x":
        return (0, 0, 0)
    if name == "y":
        return (1, 0, 0)
    if name in _CHANNEL:
        return (2, _CHANNEL[name], 0)
    if name == "gabor":
        return (4, 0, 0)
    if len(name) >= 2 and name[0] in _CHANNEL and name[1:] in _DERIV:
        return (3, _CHANNEL[name[0]], _DERIV[name[1:]])
    raise ValueError(f"unknown pixel feature {name!r}; known: x, y, I, R, G, B, <C><d> with C in "
                     f"I/R/G/B and d in x/y/xx/yy (e.g. Ix, Ryy), gabor")


def gabor_bank(n_orientations: int = 4, n_scales: int = 5, fmax: float = 0.25, radius: int = 19,
               n: int | None = None):
    """Separable factors of the Gabor bank described in the module docstring.

    Filter ``k = s * n_orientations + o`` equals
    ``outer(gy[k], gx[k])`` (rows y, columns x), amplitude folded into ``gx``.
    """
    u = np.arange(-radius, radius + 1, dtype=np.float64)
    k_total = n_orientations * n_scales
    n = k_total if n is None else n
    gx = np.zeros((n, u.size), dtype=np.complex128)
    gy = np.zeros((n, u.size), dtype=np.complex128)
    gamma = eta = math.sqrt(2.0)
    for s in range(n_scales):
        f = fmax / math.sqrt(2.0) ** s
        amp = f * f / (math.pi * gamma * eta)
        env = np.exp(-(f * f / (gamma * gamma)) * u * u)
        for o in range(n_orientations):
            k = s * n_orientations + o
            if k >= n:
                break
            th = o * math.pi / n_orientations
            gx[k] = amp * env * np.exp(1j * 2 * math.pi * f * math.cos(th) * u)
            gy[k] = env * np.exp(1j * 2 * math.pi * f * math.sin(th) * u)
    return (np.ascontiguousarray(gx.real), np.ascontiguousarray(gx.imag),
            np.ascontiguousarray(gy.real), np.ascontiguousarray(gy.imag))


def gabor_kernel_2d(n_orientations: int = 4, n_scales: int = 5, fmax: float = 0.25, radius: int = 19):
    """Full 2-D complex Gabor kernels (n_filters, 2r+1, 2r+1), rows = y, columns = x."""
    gxr, gxi, gyr, gyi = gabor_bank(n_orientations, n_scales, fmax, radius)
    gx = gxr + 1j * gxi
    gy = gyr + 1j * gyi
    return gy[:, :, None] * gx[:, None, :]


def get_spec(spec) -> FeatureSpec:
    """A :class:`FeatureSpec` from a preset name, a dict (TOML table) or a spec.

    A dict may name a ``preset`` and override any field, e.g.
    ``{"preset": "eth80", "stride": 4}``, or list ``features`` directly.
    """
    if isinstance(spec, FeatureSpec):
        return spec
    if isinstance(spec, str):
        key = spec.lower().replace("_", "-")
        if key not in PRESETS:
            raise ValueError(f"unknown feature preset {spec!r}; known: {sorted(PRESETS)}")
        return FeatureSpec(**PRESETS[key], name=key)
    if isinstance(spec, (list, tuple)):
        return FeatureSpec(features=tuple(spec))
    if isinstance(spec, dict):
        d = dict(spec)
        preset = d.pop("preset", None)
        known = {"features", "gabor_orientations", "gabor_scales", "gabor_fmax", "gabor_radius",
                 "stride"}
        extra = set(d) - known
        if extra:
            raise ValueError(f"unknown feature spec key(s) {sorted(extra)}; known: preset, "
                             f"{', '.join(sorted(known))}")
        if "features" in d:
            d["features"] = tuple(d["features"])
        if preset is not None:
            # features listed beside a preset replace its list: the spec is then no longer the preset's
            # (results named the preset beside another feature count)
            return replace(get_spec(preset), **d, **({"name": "custom"} if "features" in d else {}))
        if "features" not in d:
            raise ValueError("feature spec table needs `preset` or `features`")
        return FeatureSpec(**d)
    raise TypeError(f"feature spec must be a preset name, list, dict or FeatureSpec, got {type(spec).__name__}")


# what to do when a pipeline's colour features meet a grey image
GREY_FIX = "give colour images, or features of grey images (I and its derivatives in place of R, G, B)"


def pipeline_key(spec: FeatureSpec) -> str:
    """The ``[pixels]`` key that chose ``spec``'s features, as a pipeline writes it, for messages:
    ``pixels.preset = "fish"``, or ``pixels.features = ["R", "G", "B"]`` (a list, or a preset's features
    replaced by one)."""
    preset = PRESETS.get(spec.name)
    if preset is not None and tuple(preset["features"]) == spec.features:
        return f"pixels.preset = {toml_value(spec.name)}"
    return f"pixels.features = {toml_value(list(spec.features))}"


def integer_pixels_problem(dtype, where: str) -> str:
    """Why an integer image other than uint8 or uint16 is refused (hand-crafted and ConvNet features alike):
    an image's range is taken from its dtype's, and int64 (np.array of Python ints) would put 0..255 at 1e-17
    of it (a flat image)."""
    return (f"{where}: {np.dtype(dtype)} pixels; give uint8 (0..255) or uint16 (0..65535) images, e.g. "
            f"np.asarray(image, dtype=np.uint8), or floats in 0..1")


def as_float_image(image, where: str = "image") -> np.ndarray:
    """(h, w) or (h, w, 3|4) array -> contiguous float64 (h, w, 1|3) in [0, 1] scale.

    uint8 and uint16 images are divided by their dtype's maximum (other integer
    types, whose range says nothing of the image's, are refused); floats are
    taken as they are; an alpha channel is dropped. ``where`` names the image in error messages.
    """
    a = np.asarray(image)
    if a.ndim == 3 and a.shape[2] == 4:
        a = a[:, :, :3]
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3 or a.shape[2] not in (1, 3):
        raise ValueError(f"{where}: expected a grey (h, w) or colour (h, w, 3) image, got shape {np.shape(image)}")
    if a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"{where}: empty image of shape {np.shape(image)}")
    if a.dtype == np.bool_:
        a = a.astype(np.float64)
    elif a.dtype in (np.uint8, np.uint16):
        a = a.astype(np.float64) / float(np.iinfo(a.dtype).max)
    elif np.issubdtype(a.dtype, np.integer):
        raise ValueError(integer_pixels_problem(a.dtype, where))
    elif np.issubdtype(a.dtype, np.floating):
        a = a.astype(np.float64)
        if not np.isfinite(a).all():
            y, x, _ = np.argwhere(~np.isfinite(a))[0]
            raise ValueError(f"{where}: non-finite pixel value at row {y}, column {x}")
    else:
        raise ValueError(f"{where}: unsupported pixel dtype {a.dtype}")
    return np.ascontiguousarray(a)


def _check_color(spec: FeatureSpec, img: np.ndarray, where: str):
    if spec.needs_color and img.shape[2] != 3:
        raise ValueError(f"{where}: feature spec {spec.name!r} uses R, G, B but the image is grey "
                         f"(shape {img.shape[:2]}); use a grey spec (e.g. replace R, G, B by I)")


MIN_SAMPLED_PIXELS = 2   # a covariance needs 2 samples


def n_sampled_pixels(h, w, stride: int):
    """Pixels an image of ``h x w`` keeps at ``stride`` (integers, or integer arrays of heights and widths)."""
    # a stride beyond any image's side keeps 1 x 1 pixels, as any larger one does: taken at 2^31, so that a
    # stride of 2^63 or more does not overflow the arrays' int64 (a traceback)
    stride = min(int(stride), 2 ** 31)
    return ((h + stride - 1) // stride) * ((w + stride - 1) // stride)


def check_sampled_pixels(shapes, stride: int, ids, fix: str = "lower the stride") -> None:
    """Every image keeps at least 2 sampled pixels at ``stride`` (a covariance needs 2 samples).

    ``shapes``: (n, >= 2) heights and widths; ``ids`` names the images in the message; ``fix`` ends it. At
    stride 1 every image is to have 2 x 2 pixels, as a store's do (the derivative filters need them too).
    """
    from ..data.imageio import MIN_SIDE

    shapes = np.asarray(shapes)
    if len(shapes) == 0:
        return
    if int(stride) <= 1:
        small = np.flatnonzero(shapes[:, :2].min(axis=1) < MIN_SIDE)
        if len(small):
            i = int(small[0])
            raise ConfigError(f"image {ids[i]} of {shapes[i, 0]} x {shapes[i, 1]} pixels ({len(small)} image(s) like "
                              f"it): its pixel covariance needs at least {MIN_SIDE} x {MIN_SIDE} pixels; leave it out")
        return
    n = n_sampled_pixels(shapes[:, 0], shapes[:, 1], int(stride))
    bad = np.flatnonzero(n < MIN_SAMPLED_PIXELS)
    if len(bad):
        i = int(bad[0])
        raise ConfigError(f"pixels.stride = {stride}: image {ids[i]} of {shapes[i, 0]} x {shapes[i, 1]} pixels keeps "
                          f"{int(n[i])} sampled pixel ({len(bad)} image(s) like it); a covariance needs at least 2: "
                          f"{fix}")


def named(where: str, exc: Exception) -> str:
    """``exc``'s message led by the image's name ``where``, once: the pixel checks name it already."""
    msg = str(exc)
    return msg if msg.startswith(f"{where}: ") else f"{where}: {msg}"


def pixel_features(image, spec, where: str = "image") -> np.ndarray:
    """Per-pixel feature matrix of one image (paper 004, eq. (38)).

    Parameters
    ----------
    image : array (h, w) or (h, w, 3)
        Grey or RGB image; integer types are scaled to [0, 1].
    spec : str, dict or FeatureSpec
        Preset name from :data:`PRESETS` (e.g. ``"virus"``) or a spec.
    where : str
        The image's name in error messages.

    Returns
    -------
    ndarray (n_pixels, n_features), float64
        One row per sampled pixel (row-major), columns as ``spec.column_names``.
    """
    spec = get_spec(spec)
    img = as_float_image(image, where)
    _check_color(spec, img, where)
    h, w = img.shape[:2]
    out = np.empty((n_sampled_pixels(h, w, spec.stride), spec.n_features))
    gxr, gxi, gyr, gyi = spec.gabor_factors()
    _kp.image_features(img, spec.table(), gxr, gxi, gyr, gyi, int(spec.stride), out)
    return out


def region_covariance(features) -> np.ndarray:
    """Covariance ``(1/m) x J_m x^T`` of a feature matrix (paper 004, eq. (8)).

    Parameters
    ----------
    features : array (m, n)
        One row per pixel, ``m >= 2``.

    Returns
    -------
    ndarray (n, n)
        Biased (1/m) covariance, as in eq. (8); add ``gamma * I`` before
        taking logarithms.
    """
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"features must be 2-D (pixels x features), got shape {x.shape}")
    if x.shape[1] < 1:
        raise ValueError(f"features must have at least one column (a feature), got shape {x.shape}")
    if x.shape[0] < MIN_SAMPLED_PIXELS:   # one pixel gave the zero matrix, whatever its features
        raise ValueError(f"features has {x.shape[0]} row{'' if x.shape[0] == 1 else 's'}, a region of "
                         f"{x.shape[0]} pixel{'' if x.shape[0] == 1 else 's'}; a covariance needs at least "
                         f"{MIN_SAMPLED_PIXELS}: give a region of {MIN_SAMPLED_PIXELS} pixels or more")
    if not np.isfinite(x).all():
        r, c = np.argwhere(~np.isfinite(x))[0]
        raise ValueError(f"features contain a non-finite value at row {r}, column {c}")
    out = np.empty((x.shape[1], x.shape[1]))
    _kp.covariance(np.ascontiguousarray(x), out)
    return out


def pack_images(images, where=None):
    """Flatten a list of images into the ragged (pixels, offsets, shapes) layout."""
    arrs = []
    for i, im in enumerate(images):
        arrs.append(as_float_image(im, where=where[i] if where is not None else f"image {i}"))
    shapes = np.array([a.shape for a in arrs], dtype=np.int64).reshape(-1, 3)
    sizes = shapes.prod(axis=1)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    pixels = np.concatenate([a.ravel() for a in arrs]) if arrs else np.empty(0)
    return pixels, offsets, shapes


def image_covariances(images, spec, ids=None) -> np.ndarray:
    """Region covariances of many images at once (numba, one image per thread).

    Parameters
    ----------
    images : sequence of arrays
        Grey or RGB images, sizes may differ.
    spec : str, dict or FeatureSpec
    ids : sequence of str, optional
        Names used in error messages (file names).

    Returns
    -------
    ndarray (N, n_features, n_features)
    """
    spec = get_spec(spec)
    images = list(images)
    if not images:
        raise ValueError("no images given")
    pixels, offsets, shapes = pack_images(images, where=ids)
    # an image of one sampled pixel had the zero matrix, the same descriptor for every such image
    names = ids if ids is not None else [str(i) for i in range(len(images))]
    check_sampled_pixels(shapes, spec.stride, names)
    if spec.needs_color:
        grey = np.flatnonzero(shapes[:, 2] != 3)
        if len(grey):
            i = int(grey[0])
            name = ids[i] if ids is not None else f"image {i}"
            _check_color(spec, np.empty((int(shapes[i, 0]), int(shapes[i, 1]), 1)), name)
    covs = covariances_from_packed(pixels, offsets, shapes, spec)
    bad = np.flatnonzero(~np.isfinite(covs).all(axis=(1, 2)))
    if len(bad):   # float pixels near 1e160 and above: their features' products overflow, without a word
        i = int(bad[0])
        name = ids[i] if ids is not None else f"image {i}"
        top = float(np.abs(pixels[offsets[i]:offsets[i + 1]]).max())
        raise ValueError(f"{name}: the covariance of its pixel features overflows float64 (pixels up to {top:.3g}); "
                         f"scale the image down, e.g. to 0..1")
    return covs


def covariances_from_packed(pixels, offsets, shapes, spec) -> np.ndarray:
    """:func:`image_covariances` on the ragged layout of :func:`pack_images` (no checks)."""
    spec = get_spec(spec)
    gxr, gxi, gyr, gyi = spec.gabor_factors()
    n = spec.n_features
    out = np.empty((len(offsets) - 1, n, n))
    out_n = np.empty(len(offsets) - 1, dtype=np.int64)
    run_parallel(_kp.ragged_covariances, np.ascontiguousarray(pixels, dtype=np.float64),
                 np.ascontiguousarray(offsets, dtype=np.int64), np.ascontiguousarray(shapes, dtype=np.int64),
                 spec.table(), gxr, gxi, gyr, gyi, int(spec.stride), out, out_n)
    return out
