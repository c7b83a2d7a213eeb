"""Per-pixel features (paper 004, eq. (38)) against straightforward scipy.ndimage references."""

import numpy as np
import pytest
from scipy import ndimage as ndi

from streamcov.descriptors import pixels as F
from conftest import DATA

pytestmark = pytest.mark.usefixtures("one_blas_thread")
VIRUS = DATA / "virus_kylberg" / "raw"


def _grey_patch(size=(37, 45), y=100, x=200):
    import skimage.data
    return skimage.data.brick()[y:y + size[0], x:x + size[1]]


def _rgb_patch(size=(30, 34)):
    import skimage.data
    return skimage.data.astronaut()[60:60 + size[0], 200:200 + size[1]]


def reference_features(image, spec):
    """Slow, obvious version: full 2-D scipy.ndimage filters, one plane per feature."""
    spec = F.get_spec(spec)
    a = np.asarray(image, dtype=np.float64) / 255.0
    if a.ndim == 2:
        chans = {"I": a}
    else:
        r, g, b = a[..., 0], a[..., 1], a[..., 2]
        chans = {"I": 0.298936021293775 * r + 0.587043074451121 * g + 0.114020904255103 * b,
                 "R": r, "G": g, "B": b}
    h, w = a.shape[:2]
    yy, xx = np.mgrid[0:h, 0:w].astype(float)
    d1 = np.array([-1.0, 0.0, 1.0])
    d2 = np.array([1.0, -2.0, 1.0])
    planes = []
    for name in spec.features:
        if name == "x":
            planes.append(xx)
        elif name == "y":
            planes.append(yy)
        elif name in chans:
            planes.append(chans[name])
        elif name == "gabor":
            for k in F.gabor_kernel_2d(spec.gabor_orientations, spec.gabor_scales, spec.gabor_fmax,
                                       spec.gabor_radius):
                re = ndi.convolve(chans["I"], k.real, mode="reflect")
                im = ndi.convolve(chans["I"], k.imag, mode="reflect")
                planes.append(np.hypot(re, im))
        else:
            c, d = name[0], name[1:]
            wts = d1 if len(d) == 1 else d2
            axis = 1 if d[0] == "x" else 0
            planes.append(np.abs(ndi.correlate1d(chans[c], wts, axis=axis, mode="reflect")))
    s = spec.stride
    return np.stack([p[::s, ::s].ravel() for p in planes], axis=1)


@pytest.mark.parametrize("preset", ["virus", "texture", "eth80", "kth-tips-grey"])
def test_grey_presets_match_ndimage(preset):
    img = _grey_patch()
    got = F.pixel_features(img, preset)
    ref = reference_features(img, preset)
    assert got.shape == ref.shape == (img.size, F.get_spec(preset).n_features)
    np.testing.assert_allclose(got, ref, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("preset", ["fish", "kth-tips2b", "ethz", "uiuc", "tinygraz03"])
def test_colour_presets_match_ndimage(preset):
    img = _rgb_patch()
    np.testing.assert_allclose(F.pixel_features(img, preset), reference_features(img, preset),
                               atol=1e-12, rtol=1e-10)


def test_virus_image_matches_ndimage():
    path = VIRUS / "1" / "1" / "1.png"
    if not path.exists():
        pytest.skip("Virus dataset not available")
    from streamcov.data.imageio import read_image
    img = read_image(path)
    got = F.pixel_features(img, "virus")
    assert got.shape == (41 * 41, 25)  # intensity, 4 gradients, 4 x 5 Gabor (section 6.1)
    np.testing.assert_allclose(got, reference_features(img, "virus"), atol=1e-12)


def test_filters_wider_than_image_reflect_like_ndimage():
    # radius 19 on a 6 x 9 patch: offsets reach several periods of the reflection
    img = _grey_patch((6, 9))
    np.testing.assert_allclose(F.pixel_features(img, "virus"), reference_features(img, "virus"),
                               atol=1e-12)


def test_stride_samples_the_full_resolution_features():
    img = _grey_patch((40, 43))
    spec = F.get_spec({"preset": "virus", "stride": 3})
    full = F.pixel_features(img, "virus").reshape(40, 43, -1)
    np.testing.assert_allclose(F.pixel_features(img, spec), full[::3, ::3].reshape(-1, 25), atol=1e-14)


def test_gabor_factors_equal_the_rotated_2d_formula():
    # separable factors vs the textbook formula with x', y' rotated coordinates
    r, fmax, n_o, n_s = 7, 0.25, 4, 3
    k2 = F.gabor_kernel_2d(n_o, n_s, fmax, r)
    y, x = np.mgrid[-r:r + 1, -r:r + 1].astype(float)
    g = e = np.sqrt(2.0)
    for s in range(n_s):
        f = fmax / np.sqrt(2.0) ** s
        for o in range(n_o):
            th = o * np.pi / n_o
            xp = x * np.cos(th) + y * np.sin(th)
            yp = -x * np.sin(th) + y * np.cos(th)
            ref = f ** 2 / (np.pi * g * e) * np.exp(-(f ** 2 / g ** 2) * xp ** 2 - (f ** 2 / e ** 2) * yp ** 2) \
                * np.exp(1j * 2 * np.pi * f * xp)
            np.testing.assert_allclose(k2[s * n_o + o], ref, atol=1e-15)


def test_region_covariance_is_biased_sample_covariance():
    x = F.pixel_features(_grey_patch(), "virus")
    np.testing.assert_allclose(F.region_covariance(x), np.cov(x.T, bias=True), atol=1e-14)


def test_region_covariance_kernel_is_bitwise_the_scalar_loop(rng):
    """The kernel's column loop is vectorized (an unsigned index); each entry is still the same
    multiply-add chain over pixels, so the bits equal the scalar loop compiled with the same flags."""
    from numba import njit

    from streamcov._config import ORDERED_JIT_OPTS
    from streamcov._kernels.pixels import covariance

    @njit(**{**ORDERED_JIT_OPTS, "cache": False})
    def scalar(feat, out):
        m, n = feat.shape
        mean = np.zeros(n)
        for i in range(m):
            for a in range(n):
                mean[a] += feat[i, a]
        for a in range(n):
            mean[a] /= m
        acc = np.zeros((n, n))
        row = np.empty(n)
        for i in range(m):
            for a in range(n):
                row[a] = feat[i, a] - mean[a]
            for a in range(n):
                ra = row[a]
                for b in range(a, n):     # signed: scalar code
                    acc[a, b] += ra * row[b]
        for a in range(n):
            for b in range(a, n):
                out[a, b] = out[b, a] = acc[a, b] / m

    for n in (1, 5, 19, 33):
        feat = rng.standard_normal((301, n)) * 10.0 ** rng.integers(-3, 3, (1, n))
        want, got = np.empty((n, n)), np.empty((n, n))
        scalar(feat, want)
        covariance(feat, got)
        assert got.tobytes() == want.tobytes(), n


def test_batched_covariances_of_ragged_images():
    imgs = [_rgb_patch((30, 34)), _rgb_patch((12, 50)), _rgb_patch((5, 5))]
    for spec in ("fish", {"preset": "uiuc", "stride": 2}):
        got = F.image_covariances(imgs, spec)
        for i, im in enumerate(imgs):
            np.testing.assert_allclose(got[i], np.cov(reference_features(im, spec).T, bias=True),
                                       atol=1e-13)


def test_image_types():
    grey = _grey_patch((8, 8))
    a = F.pixel_features(grey, "texture")
    np.testing.assert_allclose(F.pixel_features(grey.astype(np.uint16) * 257, "texture"), a, atol=1e-12)
    np.testing.assert_allclose(F.pixel_features(grey / 255.0, "texture"), a, atol=1e-12)
    rgb = _rgb_patch((8, 8))
    rgba = np.concatenate([rgb, np.full((8, 8, 1), 255, np.uint8)], axis=2)
    np.testing.assert_allclose(F.pixel_features(rgba, "fish"), F.pixel_features(rgb, "fish"))


def test_spec_helpers():
    spec = F.get_spec("virus")
    assert spec.n_features == 25 and len(spec.column_names) == 25
    assert spec.column_names[:2] == ["I", "|Ix|"]
    assert F.get_spec(["x", "|Iy|"]).features == ("x", "Iy")
    assert F.get_spec({"features": ["R", "G"]}).needs_color
    assert F.get_spec({"preset": "eth80", "stride": 4}).stride == 4
    # a preset keeps its name with other settings, not with its feature list replaced (a result named the
    # preset "texture" beside one feature)
    assert F.get_spec({"preset": "eth80", "stride": 4}).name == "eth80"
    spec = F.get_spec({"preset": "texture", "features": ["I"]})
    assert spec.name == "custom" and spec.features == ("I",) and spec.n_features == 1


def test_feature_errors():
    with pytest.raises(ValueError, match="unknown feature preset 'nope'"):
        F.get_spec("nope")
    with pytest.raises(ValueError, match="unknown pixel feature 'Iz'"):
        F.get_spec(["I", "Iz"])
    with pytest.raises(ValueError, match="unknown feature spec key"):
        F.get_spec({"preset": "virus", "strde": 2})
    with pytest.raises(ValueError, match="needs `preset` or `features`"):
        F.get_spec({"stride": 2})
    with pytest.raises(ValueError, match="has no features"):
        F.FeatureSpec(features=())
    with pytest.raises(ValueError, match="stride must be a positive integer"):
        F.FeatureSpec(features=("I",), stride=0)
    with pytest.raises(ValueError, match="gabor_radius"):
        F.FeatureSpec(features=("I",), gabor_radius=-1)
    with pytest.raises(ValueError, match="gabor_fmax"):
        F.FeatureSpec(features=("I",), gabor_fmax=0.9)
    with pytest.raises(TypeError, match="feature spec must be"):
        F.get_spec(3)
    with pytest.raises(ValueError, match="uses R, G, B but the image is grey"):
        F.pixel_features(_grey_patch((5, 5)), "fish")
    with pytest.raises(ValueError, match="b.png: feature spec 'fish' uses R, G, B"):
        F.image_covariances([_rgb_patch((5, 5)), _grey_patch((5, 5))], "fish", ids=["a.png", "b.png"])
    with pytest.raises(ValueError, match=r"expected a grey \(h, w\) or colour \(h, w, 3\) image, got shape \(4, 4, 2\)"):
        F.pixel_features(np.zeros((4, 4, 2)), "texture")
    with pytest.raises(ValueError, match="empty image"):
        F.pixel_features(np.zeros((0, 4)), "texture")
    bad = np.zeros((4, 4))
    bad[2, 3] = np.nan
    with pytest.raises(ValueError, match="non-finite pixel value at row 2, column 3"):
        F.pixel_features(bad, "texture")
    with pytest.raises(ValueError, match="unsupported pixel dtype"):
        F.pixel_features(np.zeros((4, 4), dtype=complex), "texture")
    with pytest.raises(ValueError, match="no images given"):
        F.image_covariances([], "texture")
    # an image of one pixel was the zero matrix, silently; at stride 1 an image needs 2 x 2 pixels, as in a store
    with pytest.raises(ValueError, match=r"^image b\.png of 1 x 2 pixels \(1 image\(s\) like it\): its pixel "
                                         r"covariance needs at least 2 x 2 pixels; leave it out$"):
        F.image_covariances([np.ones((3, 3)), np.ones((1, 2))], "texture", ids=["a.png", "b.png"])
    with pytest.raises(ValueError, match=r"^image 0 of 1 x 1 pixels \(1 image\(s\) like it\)"):
        F.image_covariances([np.ones((1, 1))], "texture")
    with pytest.raises(ValueError, match=r"features must be 2-D \(pixels x features\), got shape \(3,\)"):
        F.region_covariance(np.zeros(3))
    with pytest.raises(ValueError, match=r"^features has 0 rows, a region of 0 pixels; a covariance needs at least 2"):
        F.region_covariance(np.zeros((0, 3)))
    # one pixel was the zero matrix, silently: the same descriptor for every region of one pixel
    with pytest.raises(ValueError, match=r"^features has 1 row, a region of 1 pixel; a covariance needs at least 2: "
                                         r"give a region of 2 pixels or more$"):
        F.region_covariance(np.ones((1, 3)))
    with pytest.raises(ValueError, match=r"at least one column \(a feature\), got shape \(4, 0\)"):
        F.region_covariance(np.zeros((4, 0)))
    x = np.zeros((3, 2))
    x[1, 1] = np.inf
    with pytest.raises(ValueError, match="non-finite value at row 1, column 1"):
        F.region_covariance(x)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int16, np.int8, np.uint32, np.uint64])
def test_integer_images_other_than_uint8_and_uint16_are_refused(dtype):
    """An image's range is taken from its dtype: int64 (np.array of Python ints) put 0..255 at 1e-17 and
    every image looked flat; such dtypes are refused, naming the fix."""
    from streamcov.descriptors.pixels import as_float_image

    img = np.arange(16).reshape(4, 4).astype(dtype)
    with pytest.raises(ValueError, match=rf"image 3: {np.dtype(dtype).name} pixels; give uint8 \(0\.\.255\) or "
                                         rf"uint16 \(0\.\.65535\) images"):
        as_float_image(img, where="image 3")
    np.testing.assert_allclose(as_float_image(img.astype(np.uint8))[..., 0], img / 255.0)
    np.testing.assert_allclose(as_float_image(img.astype(np.uint16) * 257)[..., 0], img / 255.0)


def test_image_vectors_are_the_same_bits_from_a_fresh_compile_and_from_numba_s_cache(tmp_path):
    """The pixel kernels were compiled with reassociation: a callee inlined into a kernel compiled in this
    process summed in another grouping than the one loaded from numba's cache, so a first run's features
    (4e-17 apart) and log-operator vectors (2e-12) differed from every later run's, and a first run that was
    interrupted and resumed ended with another model than one left alone. Two processes on one empty cache
    (the first compiles, the second loads) give the same bits."""
    import os
    import subprocess
    import sys

    code = ("import sys, numpy as np\n"
            "from streamcov.data.imageio import skimage_textures\n"
            "from streamcov.descriptors import image as di\n"
            "imgs = skimage_textures(patch=48, max_per_class=2).images\n"
            "mats, _ = di.feature_matrices(imgs, di.image_spec('virus'))\n"
            "W = di.operator_frequencies(mats[0].shape[1], 20, 1.0, 'random', 0, np.ones(mats[0].shape[1]))\n"
            "np.savez(sys.argv[1], feats=np.concatenate(mats), vecs=di.operator_vectors(mats, W, 1e-3))\n")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "NUMBA_NUM_THREADS": "1"}
    for name in ("compiled", "cached"):
        subprocess.run([sys.executable, "-c", code, str(tmp_path / f"{name}.npz")], env=env, check=True,
                       timeout=300)
    with np.load(tmp_path / "compiled.npz") as a, np.load(tmp_path / "cached.npz") as b:
        for key in ("feats", "vecs"):
            assert a[key].tobytes() == b[key].tobytes(), (key, np.abs(a[key] - b[key]).max())
