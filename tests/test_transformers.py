"""The descriptors as scikit-learn transformers, and the exact SVM as a scikit-learn classifier.

The descriptors take ragged input (a list of sequences or images), which
scikit-learn's full ``check_estimator`` cannot generate: the checks that do
not feed 2-D arrays run as they are; what the others verify (fit returns
self, transform before fit raises, cloning keeps parameters, fit is
idempotent, dtypes) is tested here on ragged input.
"""
import re

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils import estimator_checks as ec
from sklearn.utils.estimator_checks import parametrize_with_checks

from streamcov import CovarianceOperator, LogCovariance, RegionCovariance
from streamcov.descriptors import operators as ops
from streamcov.descriptors.image import feature_moments, feature_scale, operator_vectors
from streamcov.descriptors.pixels import get_spec, image_covariances, pixel_features
from streamcov.descriptors.skeleton import JointSelection, log_covariance_vectors
from streamcov.kernels import gamma_from_sigma
from streamcov.stream.exact import GaussianKernelSVC
from streamcov.errors import NotSPDError

API_CHECKS = [ec.check_estimator_cloneable, ec.check_estimator_repr, ec.check_no_attributes_set_in_init,
              ec.check_parameters_default_constructible, ec.check_get_params_invariance, ec.check_set_params,
              ec.check_do_not_raise_errors_in_init_or_set_params, ec.check_mixin_order,
              ec.check_estimator_tags_renamed, ec.check_valid_tag_types, ec.check_param_validation]
TRANSFORMERS = [LogCovariance(center=(0,)), CovarianceOperator(n_frequencies=8), RegionCovariance()]


@pytest.mark.parametrize("check", API_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("est", TRANSFORMERS, ids=lambda e: type(e).__name__)
def test_scikit_learn_api_checks(est, check):
    check(type(est).__name__, clone(est))


def sequences(rng, n=12, joints=5):
    return [rng.normal(scale=0.3, size=(int(t), 3 * joints)) for t in rng.integers(8, 40, size=n)]


def test_log_covariance_is_the_descriptor(rng):
    seqs = sequences(rng)
    est = LogCovariance(center=(0,), gamma=1e-3)
    assert est.fit(seqs) is est
    V = est.transform(seqs)
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in seqs])])
    want = log_covariance_vectors(np.vstack(seqs), offsets, JointSelection.hip_relative(5, (0,)), 1e-3, True)
    np.testing.assert_array_equal(V, want)
    assert V.shape == (12, est.n_features_out_) == (12, 78)   # 4 kept joints: d = 12
    assert est.n_joints_ == 5 and est.n_features_in_ == 15
    assert len(est.get_feature_names_out()) == 78
    # a 3-D array of equal-length sequences is the same input
    eq = np.stack([s[:8] for s in seqs])
    np.testing.assert_array_equal(est.transform(eq), est.transform(list(eq)))
    # fit is idempotent, and a clone refitted gives the same transform
    np.testing.assert_array_equal(clone(est).fit(seqs[:3]).transform(seqs), V)


def test_log_covariance_errors(rng):
    seqs = sequences(rng)
    with pytest.raises(NotFittedError, match=r"^This LogCovariance instance is not fitted yet"):
        LogCovariance().transform(seqs)
    est = LogCovariance().fit(seqs)
    with pytest.raises(ValueError, match="fitted on 5 joints"):
        est.transform([np.zeros((10, 12))])
    with pytest.raises(ValueError, match=r"sequences have different widths \[12, 15\]"):
        LogCovariance().fit([np.zeros((10, 15)), np.zeros((10, 12))])
    with pytest.raises(ValueError, match="X: no sequences"):
        LogCovariance().fit([])
    # a dict was read as its keys: "X[0]: expected a 2-D array ..., got shape ()"
    with pytest.raises(ValueError, match=r"^X: expected a list of \(frames, 3 x joints\) arrays or a 3-D array "
                                         r"\(sequences, frames, 3 x joints\), got a dict \(its keys would be read as "
                                         r"the items\); give a list, e\.g\. list\(X\.values\(\)\)$"):
        LogCovariance().fit({"walk": seqs[0], "run": seqs[1]})
    with pytest.raises(ValueError, match=r"^X: expected a list of .*, got a str \('walk\.npy'\); read the data"):
        LogCovariance().fit("walk.npy")
    with pytest.raises(ValueError, match=r"X\[0\]: expected a 2-D array"):
        LogCovariance().fit([np.zeros(9)])
    # a sequence too short for a covariance would be described by the regularization alone
    for est in (LogCovariance(), LogCovariance().fit(seqs)):
        with pytest.raises(ValueError, match=r"X\[1\] has 1 frame\(s\); its covariance needs at least 2"):
            est.fit_transform([seqs[0], seqs[0][:1]])
    with pytest.raises(ValueError, match=r"X\[0\] has 0 frame\(s\)"):
        LogCovariance(ddof=0).fit([seqs[0][:0], seqs[0]])
    with pytest.raises(ValueError, match=r"center: expected 0-based joint indices \(integers\), got \(0\.9,\)"):
        LogCovariance(center=(0.9,)).fit(seqs)      # would have been joint 0
    with pytest.raises(ValueError, match=r"X\[0\]: complex coordinates; complex data is not supported"):
        LogCovariance().fit([seqs[0] + 1j])
    # finite coordinates whose covariances overflow float64: refused, not a failure inside the kernels
    with pytest.raises(ValueError, match=r"frames holds coordinates up to [\d.]+e\+1(59|60): their covariances would "
                                         r"overflow float64 .*rescale the data"):
        LogCovariance().fit_transform([seqs[0] * 1e160])
    assert np.isfinite(LogCovariance().fit_transform([rng.standard_normal((40, 15)) * 1e99])).all()   # full rank
    # a gamma that overflows the eigensolver gave NaN descriptors without a word
    with pytest.raises(NotSPDError, match=r"covariance of sequence 0 \(\d+ frames, \d+ dims\) could not be computed "
                                          r"in floating point \(NaN or infinity\): the regularization gamma = "
                                          r"1e\+308 is too large for float64; lower gamma$"):
        LogCovariance(gamma=1e308).fit_transform(seqs)
    with pytest.raises(ValueError, match=r"X: frames have 0 values, not 3 per joint of at least one joint"):
        LogCovariance().fit([np.zeros((10, 0))])
    with pytest.raises(ValueError, match=r"^X\[1\]: frames of different lengths; expected a 2-D array"):
        LogCovariance().fit([seqs[0], [[1.0, 2.0, 3.0], [4.0, 5.0]]])
    with pytest.raises(ValueError, match=r"^X\[0\]: expected numbers \(coordinates\), got an array of dtype <U1"):
        LogCovariance().fit([np.full((5, 3), "a")])
    np.testing.assert_array_equal(LogCovariance().fit_transform([s.astype(object) for s in seqs]),
                                  LogCovariance().fit_transform(seqs))
    # a motionless sequence: covariance 0, descriptor log(gamma I) whatever the action (the stores skip it)
    still = np.tile(seqs[0][0], (30, 1))
    for est in (LogCovariance(), LogCovariance().fit(seqs)):
        with pytest.raises(ValueError, match=r"^X\[1\]: every one of its 30 frames is the same \(a motionless "
                                             r"sequence\): its covariance is 0 and its descriptor log\(gamma I\), "
                                             r"the same whatever the action; leave it out$"):
            est.fit_transform([seqs[0], still, seqs[1]])
    # a skeleton moved rigidly: its raw frames differ, its coordinates relative to the centre (what the
    # covariance is of) only by the rounding of the subtraction; two such sequences of different poses and
    # directions got the same descriptor, log(gamma I)
    pose = seqs[0][0].reshape(-1, 3)
    moved = np.stack([pose + [0.1 * t, 0.0, 0.0] for t in range(30)]).reshape(30, -1)
    with pytest.raises(ValueError, match=r"^X\[1\]: every one of its 30 frames is the same relative to the centre "
                                         r"joint\(s\) \(a motionless or rigidly moved sequence\)"):
        LogCovariance(center=(0,)).fit_transform([seqs[0], moved])
    assert LogCovariance(center=None).fit_transform([seqs[0], moved]).shape[0] == 2   # raw coordinates move
    # too short: named by its place in X, as the other sequence checks (one frame has a covariance of 0 whatever ddof)
    for est, short in ((LogCovariance(), 1), (LogCovariance(ddof=0), 1), (LogCovariance(ddof=3), 3)):
        need = max(2, est.ddof + 1)
        with pytest.raises(ValueError, match=rf"^X\[1\] has {short} frame\(s\); its covariance needs at least {need}: "
                                             r"leave it out$"):
            est.fit([seqs[0], seqs[1][:short]])
    # a NaN: named by its sequence and frame, not by its row among all the sequences' frames
    bad = seqs[1].copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match=r"^X\[1\]: a non-finite value \(NaN or infinity\) at frame 3, column 2; "
                                         r"remove or fill that frame$"):
        LogCovariance().fit([seqs[0], bad])
    # a centre joint named twice kept it as a constant zero joint (45 numbers instead of 21 on 3 joints)
    with pytest.raises(ValueError, match=r"^center: \(0, 0\) names a joint twice; name each joint once$"):
        LogCovariance(center=(0, 0)).fit(seqs)
    old = LogCovariance(center=(0, 1)).fit(seqs)   # one pickled with a repeated centre still transforms
    old.__dict__["center"] = (0, 0)
    del old.__dict__["_fit_params"]                # pickled before the fit's parameters were recorded
    assert old.transform(seqs).shape == (len(seqs), old.n_features_out_)
    # ddof = 0 refuses a one-frame sequence for its length, as the descriptor functions do
    with pytest.raises(ValueError, match=r"^X\[0\] has 1 frame\(s\); its covariance needs at least 2"):
        LogCovariance(ddof=0).fit([seqs[1][:1]])


def test_log_covariance_in_a_scikit_learn_pipeline(rng):
    """The three-line model of the README on generated sequences: two classes that differ in
    the spread of one joint, cross-validated with a grid search over the map's bandwidth."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline

    from streamcov import RGWSampler

    seqs, y = [], []
    for i in range(60):
        s = rng.normal(scale=0.3, size=(30, 15))
        s[:, 6:9] *= 3.0 if i % 2 else 1.0
        seqs.append(s)
        y.append(i % 2)
    model = make_pipeline(LogCovariance(center=(0,)),
                          RGWSampler(n_components=300, sigma=1.0, center=True, random_state=0),
                          LogisticRegression(C=10.0, max_iter=1000))
    search = GridSearchCV(model, {"rgwsampler__sigma": [0.5, 1.0]}, cv=3).fit(seqs[:40], y[:40])
    # the classes are separated by a factor of 3 in a joint's spread: far above chance (0.5)
    assert search.score(seqs[40:], y[40:]) > 0.9


def textures():
    import skimage.data
    imgs = [skimage.data.brick(), skimage.data.grass(), skimage.data.gravel()]
    return [im[y:y + 32, x:x + 32] for im in imgs for y in (0, 64) for x in (0, 64)], np.repeat([0, 1, 2], 4)


def test_covariance_operator_is_the_approximate_log_hs_descriptor():
    images, _ = textures()
    est = CovarianceOperator(pixels="texture", n_frequencies=12, sigma=0.8, gamma=1e-3,
                             scaling="per-feature", random_state=5).fit(images)
    V = est.transform(images)
    assert V.dtype == np.float32 and V.shape == (12, 24 * 25 // 2)
    feats = [pixel_features(im, "texture") for im in images]
    scale = feature_scale(feature_moments(feats), "per-feature")
    np.testing.assert_allclose(est.scale_, scale, rtol=1e-12)
    W = ops.fourier_frequencies(5, 12, 0.8 * np.sqrt(5), random_state=5) / scale[:, None]
    np.testing.assert_allclose(est.frequencies_, W, rtol=1e-12)
    np.testing.assert_array_equal(V, operator_vectors(feats, W, 1e-3))
    # the distance between two vectors is the approximate Log-HS distance of eq. (21)
    C = [ops.approx_covariance_operator(f, W) for f in feats[:2]]
    np.testing.assert_allclose(np.linalg.norm(V[0].astype(np.float64) - V[1]),
                               ops.approx_log_hs_distance(C[0], C[1], 1e-3), rtol=1e-5)
    with pytest.raises(NotFittedError, match=r"^This CovarianceOperator instance is not fitted yet"):
        CovarianceOperator().transform(images)


def test_region_covariance_is_the_log_euclidean_descriptor():
    images, _ = textures()
    est = RegionCovariance(pixels="texture", gamma=1e-3, scaling="per-feature").fit(images)
    V = est.transform(images)
    covs = image_covariances(images, get_spec("texture")) / np.outer(est.scale_, est.scale_)
    D = np.sqrt(((V[:, None] - V[None]) ** 2).sum(-1))
    np.testing.assert_allclose(D, ops.log_euclidean_distances(covs, gamma=1e-3), atol=1e-9)
    E = RegionCovariance(pixels="texture", log=False, scaling="per-feature").fit(images).transform(images)
    np.testing.assert_allclose(np.sqrt(((E[:, None] - E[None]) ** 2).sum(-1)), ops.euclidean_distances(covs),
                               atol=1e-9)


@parametrize_with_checks([GaussianKernelSVC(sigma=2.0, C=10.0),
                          # the head's kernels on the last column (the product, and the sum)
                          GaussianKernelSVC(sigma=2.0, C=10.0, n_head=1),
                          GaussianKernelSVC(sigma=2.0, C=10.0, n_head=1, head_combine="sum", head_weight=0.5)])
def test_gaussian_kernel_svc_is_a_scikit_learn_classifier(estimator, check):
    check(estimator)


def test_gaussian_kernel_svc_equals_an_rbf_svc(rng):
    from sklearn.svm import SVC

    X = rng.normal(size=(120, 6))
    y = (X[:, 0] + 0.5 * X[:, 1] ** 2 > 0.3).astype(int) + (X[:, 2] > 1)
    ours = GaussianKernelSVC(sigma=1.5, C=3.0).fit(X[:80], y[:80])
    ref = SVC(kernel="rbf", gamma=gamma_from_sigma(1.5), C=3.0).fit(X[:80], y[:80])
    np.testing.assert_array_equal(ours.predict(X[80:]), ref.predict(X[80:]))
    np.testing.assert_allclose(ours.decision_function(X[80:]), ref.decision_function(X[80:]), atol=1e-9)
    assert len(ours.support_vectors_) == len(ref.support_)   # only the support vectors are kept


def test_pipeline_names_its_features():
    """The README's pipeline gives feature names (and so set_output), as scikit-learn's transformers do
    (RGWSampler and GlobalCenterScaler had none)."""
    from sklearn.pipeline import make_pipeline

    from streamcov import GlobalCenterScaler, LogCovariance, RGWSampler

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(30, 15)) for _ in range(8)]
    logcov = LogCovariance(center=(0,)).fit(X)
    assert list(logcov.get_feature_names_out()) == [f"logcov{i}" for i in range(logcov.n_features_out_)]
    pipe = make_pipeline(LogCovariance(center=(0,)), RGWSampler(n_components=6), GlobalCenterScaler()).fit(X)
    assert list(pipe.get_feature_names_out()) == [f"rgwsampler{i}" for i in range(6)]


def test_fit_transform_reads_a_generator_once(rng):
    """fit_transform (and a Pipeline's fit) read X in fit and again in transform: a generator was used up by fit
    and transform said "X: no sequences". It is read into a list once; fit and transform alone take it."""
    from sklearn.pipeline import make_pipeline

    from streamcov import GlobalCenterScaler

    X = [rng.normal(size=(30, 15)) for _ in range(8)]
    want = LogCovariance(center=(0,)).fit_transform(X)
    np.testing.assert_array_equal(LogCovariance(center=(0,)).fit_transform(x for x in X), want)
    np.testing.assert_array_equal(LogCovariance(center=(0,)).fit(x for x in X).transform(iter(X)), want)
    pipe = make_pipeline(LogCovariance(center=(0,)), GlobalCenterScaler())
    np.testing.assert_array_equal(pipe.fit_transform(x for x in X), make_pipeline(
        LogCovariance(center=(0,)), GlobalCenterScaler()).fit_transform(X))
    imgs = [rng.integers(0, 256, (8, 8), dtype=np.uint8) for _ in range(4)]
    np.testing.assert_array_equal(RegionCovariance().fit_transform(iter(imgs)), RegionCovariance().fit_transform(imgs))


def test_image_descriptors_refuse_images_without_a_covariance():
    """A 1 x 1 or 1 x N image has no derivative and no spread: its descriptor was the regularization alone
    (a black pixel equal to a white one). Refused, as the stores skip them; a generator is taken by
    transform as by fit; a single 2-D image is told to be wrapped in a list."""
    from streamcov import RegionCovariance

    rng = np.random.default_rng(0)
    imgs = [rng.integers(0, 256, (8, 8), dtype=np.uint8) for _ in range(4)]
    rc = RegionCovariance().fit(imgs)
    with pytest.raises(ValueError, match=r"X\[1\]: an image of 1 x 5 pixels; a covariance needs at least 2 x 2"):
        rc.transform([imgs[0], np.zeros((1, 5), np.uint8)])
    with pytest.raises(ValueError, match=r"X\[0\]: an image of 1 x 1 pixels"):
        RegionCovariance().fit([np.zeros((1, 1), np.uint8)] + imgs)
    np.testing.assert_array_equal(rc.transform(im for im in imgs), rc.transform(imgs))
    with pytest.raises(ValueError, match=r"X: one image of shape \(8, 8\); give a list of images, e\.g\. \[image\]"):
        rc.transform(imgs[0])
    # one colour image alone was read as h grey images of w x 3 pixels (h rows out); a stack of grey
    # images stays a stack, and a list of 3-pixel-wide grey images is still taken
    colour = rng.integers(0, 256, (8, 9, 3), dtype=np.uint8)
    rcc = RegionCovariance().fit([colour, colour[::-1]])
    for est in (rc, rcc, CovarianceOperator(n_frequencies=8).fit(imgs)):
        with pytest.raises(ValueError, match=r"^X: an array of shape \(8, 9, 3\) reads as one colour image \(h, w, "
                                             r"3\); give a list of images, e\.g\. \[image\] \(a stack of grey images 3 "
                                             r"pixels wide: list\(stack\)\)$"):
            est.transform(colour)
    with pytest.raises(ValueError, match=r"reads as one colour image \(h, w, 4\)"):
        rc.fit_transform(np.zeros((8, 9, 4), np.uint8))
    assert rc.transform(np.stack(imgs)).shape == (4, rc.n_features_out_)
    assert RegionCovariance().fit_transform(list(np.zeros((2, 6, 3), np.uint8) + np.arange(3, dtype=np.uint8))).shape[0] == 2
    with pytest.raises(ValueError, match=r"^X: expected a list of images \(h, w\) or \(h, w, 3\), got a dict \(its "
                                         r"keys would be read as the items\)"):
        RegionCovariance().fit(dict(enumerate(imgs)))


def test_image_descriptors_refuse_pixels_whose_features_overflow_and_a_bandwidth_out_of_range():
    """float64 pixels near 1e160: every operator came out 0 (CovarianceOperator) or the covariances NaN
    (RegionCovariance, named by linalg as "region covariance 0 contains NaN or inf"); a K1 bandwidth whose
    square is 0 or infinite made the frequencies meaningless."""
    rng = np.random.default_rng(0)
    huge = [rng.random((16, 16)) * 1e160 for _ in range(3)]
    for est in (RegionCovariance(), CovarianceOperator(n_frequencies=8)):
        with pytest.raises(ValueError, match=r"^X: the pixel features' squared deviations overflow float64 \(pixels "
                                             r"up to [\d.]+e\+160\); scale the images down, e\.g\. to 0\.\.1$"):
            est.fit(huge)
    for sigma in (1e-300, 1e300):
        with pytest.raises(ValueError, match="sigma must be a finite number > 0 whose square is a normal float"):
            CovarianceOperator(n_frequencies=8, sigma=sigma).fit([h / 1e160 for h in huge])


def test_image_descriptors_refuse_pixels_on_another_scale():
    """Integer images are read as fractions of their range (0 to 1), floats as they are: float images of 0 to
    255 beside 8-bit ones, or given to a descriptor fitted on 0 to 1 images, gave features 255 times off
    without a word (ingestion and predict refuse both). A grey image under an RGB spec is named with its
    shape."""
    rng = np.random.default_rng(0)
    grey = [rng.random((20, 24)) for _ in range(4)]
    as255 = [g * 255 for g in grey]
    as_uint8 = [(g * 255).astype(np.uint8) for g in grey]
    for est in (RegionCovariance(), CovarianceOperator(n_frequencies=20)):
        fitted = clone(est).fit(grey)
        with pytest.raises(ValueError, match=rf"^X: float pixels up to 254\.\d, but {type(est).__name__} was fitted "
                                             rf"on pixels on the 0 to 1 scale: the features would be on another "
                                             rf"scale; scale the images to 0 to 1"):
            fitted.transform(as255)
        assert fitted.transform(as_uint8).shape == (4, fitted.n_features_out_)   # uint8 is 0 to 1 once read
        on255 = clone(est).fit(as255)
        with pytest.raises(ValueError, match=rf"^X\[0\]: an integer image, read as fractions of its range \(0 to "
                                             rf"1\), but {type(est).__name__} was fitted on float pixels up to "
                                             rf"254\.\d"):
            on255.transform(as_uint8)
        with pytest.raises(ValueError, match=r"^X\[1\]: float pixels up to 254\.\d, but X\[0\] is an integer "
                                             r"image, read as fractions of its range \(0 to 1\)"):
            clone(est).fit([as_uint8[0], as255[1]])
        with pytest.raises(ValueError, match=rf"^X: float pixels within 1 \(the 0 to 1 scale\), but "
                                             rf"{type(est).__name__} was fitted on float pixels up to 254\.\d"):
            on255.transform(grey)
        # float images are judged together: a dark 0 to 255 image among others is not another scale, and a
        # black image belongs to any
        dark = [np.full((20, 24), 0.5) + 0.1 * grey[0], np.zeros((20, 24))]
        assert clone(est).fit(as255 + dark).transform(as255[:1] + dark).shape[0] == 3
        assert on255.transform([np.zeros((20, 24))]).shape[0] == 1
        # a fit that fails leaves the earlier fit whole (it had set the new scale before failing)
        nan_image = as255[0].copy()
        nan_image[3, 4] = np.nan
        with pytest.raises(ValueError, match="non-finite"):
            fitted.fit(as255 + [nan_image])
        assert fitted.pixel_scale_ <= 1
        with pytest.raises(ValueError, match="fitted on pixels on the 0 to 1 scale"):
            fitted.transform(as255)
    rgb = [rng.random((20, 24, 3)) for _ in range(3)]
    with pytest.raises(ValueError, match=r"X\[0\]: feature spec 'fish' uses R, G, B but the image is grey "
                                         r"\(shape \(20, 24\)\)"):
        RegionCovariance(pixels="fish").fit(rgb).transform([grey[0]])


def test_covariance_operator_takes_every_random_state_scikit_learn_takes():
    """An int, a RandomState or None (scikit-learn's convention; only non-negative ints were taken), resolved
    once in fit: the same int gives the same frequencies, None draws anew at each fit, and a fitted
    operator transforms (and pickles) with the frequencies of its fit."""
    import pickle

    rng = np.random.default_rng(0)
    imgs = [rng.random((20, 24)) for _ in range(4)]
    fit = lambda rs: CovarianceOperator(n_frequencies=10, random_state=rs).fit(imgs)   # noqa: E731
    same = fit(0).transform(imgs)
    np.testing.assert_array_equal(fit(0).transform(imgs), same)
    np.testing.assert_array_equal(CovarianceOperator(n_frequencies=10).fit(imgs).transform(imgs), same)
    a, b = fit(None), fit(None)
    assert not np.allclose(a.transform(imgs), b.transform(imgs))
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(a)).transform(imgs), a.transform(imgs))
    np.testing.assert_array_equal(fit(np.random.RandomState(3)).transform(imgs),
                                  fit(np.random.RandomState(3)).transform(imgs))
    big = fit(2 ** 40)   # beyond numpy's 32-bit seeds: hashed down to one, the same at every fit
    assert big.seed_ < 2 ** 32 and np.array_equal(fit(2 ** 40).transform(imgs), big.transform(imgs))
    refit = CovarianceOperator(n_frequencies=10, random_state=None)
    first = refit.fit(imgs).seed_
    assert refit.fit(imgs).seed_ != first   # None: a new draw at every fit, never the first fit's kept


def test_parameters_changed_since_fit_are_refused_at_transform():
    """set_params after fit without a refit: a changed pixels spec met the fitted frequencies inside numpy
    ("matmul: Input operand 1 has a mismatch"), a changed center gave rows wider than n_features_out_, and
    sigma or n_frequencies were silently not applied. Setting the value back, or fitting again, works."""
    import pickle

    rng = np.random.default_rng(0)
    imgs = [rng.integers(0, 256, (16, 16), dtype=np.uint8) for _ in range(4)]
    seqs = [rng.normal(size=(10, 9)) for _ in range(3)]
    cases = [(CovarianceOperator(n_frequencies=8), imgs, {"pixels": "virus"}, "pixels", "pixels='texture'"),
             (CovarianceOperator(n_frequencies=8), imgs, {"sigma": 2.0}, "sigma", "sigma=1.0"),
             (RegionCovariance(), imgs, {"gamma": 1e-2, "log": False}, "gamma, log", "gamma=0.001, log=True"),
             (LogCovariance(), seqs, {"center": (0,)}, "center", "center=None")]
    for est, X, change, names, back in cases:
        want = est.fit(X).transform(X)
        before = {k: est.get_params()[k] for k in change}
        est.set_params(**change)
        with pytest.raises(ValueError, match=rf"^{type(est).__name__}: {names} changed since fit \(set_params\); "
                                             rf"call fit again, or set (it|them) back to {re.escape(back)}$"):
            est.transform(X)
        np.testing.assert_array_equal(est.set_params(**before).transform(X), want)
        est.set_params(**change).fit(X)
        assert est.transform(X).shape[1] == est.n_features_out_
        # a pickled fitted transformer keeps what it was fitted with
        np.testing.assert_array_equal(pickle.loads(pickle.dumps(est)).transform(X), est.transform(X))
    # parameters that == cannot compare (a dict holding an array) are not taken for changed ones
    spec = {"features": np.array(["I", "Ix", "Iy"])}
    assert RegionCovariance(pixels=spec).fit(imgs).transform(imgs).shape == (4, 6)
    assert RegionCovariance(pixels=spec).fit_transform(imgs).shape == (4, 6)


def test_an_infinite_pixel_is_named_by_row_and_column_once():
    """An infinite float pixel was said to be a pixel scale other than the fit's ("float pixels up to inf"),
    and at fit the image was named twice ("X[0]: image: ...")."""
    rng = np.random.default_rng(0)
    ints = [rng.integers(0, 256, (16, 16), dtype=np.uint8) for _ in range(3)]
    bad = rng.random((16, 16))
    bad[2, 5] = np.inf
    for est in (RegionCovariance(), CovarianceOperator(n_frequencies=8)):
        with pytest.raises(ValueError, match=r"^X\[0\]: non-finite pixel value at row 2, column 5$"):
            est.fit(ints).transform([bad])
        with pytest.raises(ValueError, match=r"^X\[0\]: non-finite pixel value at row 2, column 5$"):
            clone(est).fit([bad, rng.random((16, 16))])
    with pytest.raises(ValueError, match=r"^X\[0\]: feature spec 'fish' uses R, G, B but the image is grey"):
        RegionCovariance(pixels="fish").fit([rng.random((16, 16))])


def test_containers_a_notebook_passes_are_read_or_refused_by_name(rng):
    """A 1-D object array of ragged sequences (what train_test_split returns for one) was refused; sparse
    matrices, a DataFrame (iterated as its column labels), paths and stray numbers among images were numpy's
    words ("zero-size array to reduction operation minimum ...") or a message contradicting itself."""
    import scipy.sparse as sparse

    seqs = [rng.standard_normal((10 + i, 6)) for i in range(4)]
    held = np.empty(len(seqs), dtype=object)
    held[:] = seqs
    np.testing.assert_array_equal(LogCovariance().fit_transform(held), LogCovariance().fit_transform(seqs))
    with pytest.raises(ValueError, match=r"^X: a sparse matrix \(csr_matrix\); expected a list of \(frames, "
                                         r"3 x joints\) arrays or a 3-D array \(sequences, frames, 3 x joints\), "
                                         r"dense$"):
        LogCovariance().fit(sparse.csr_matrix(seqs[0]))
    with pytest.raises(ValueError, match=r"^X\[0\]: a sparse matrix \(csr_matrix\); give a dense array"):
        LogCovariance().fit([sparse.csr_matrix(s) for s in seqs])
    # grey images of shape (h, w, 1) are images (they were refused when given as a list)
    grey = [rng.random((16, 16, 1)) for _ in range(3)]
    np.testing.assert_array_equal(RegionCovariance().fit_transform(grey),
                                  RegionCovariance().fit_transform([g[:, :, 0] for g in grey]))
    images = [rng.random((16, 16)) for _ in range(3)]
    for given, msg in (
            (["a.png", "b.png"], r"^X\[0\]: a path \('a\.png'\), not an image; give the images as arrays"),
            ([images[0], 3.0], r"^X\[1\]: expected a grey \(h, w\) or colour \(h, w, 3\) image, got 3\.0 \(float\), "
                               r"not an array$"),
            ([sparse.csr_matrix(images[0])], r"^X\[0\]: a sparse matrix \(csr_matrix\); give a dense array"),
            ([rng.random((16, 16, 2))], r"^X\[0\]: expected a grey \(h, w\) or colour \(h, w, 3\) image, got shape "
                                        r"\(16, 16, 2\)$")):
        for cls in (CovarianceOperator, RegionCovariance):
            with pytest.raises(ValueError, match=msg):
                cls().fit(given)
    pd = pytest.importorskip("pandas")
    with pytest.raises(ValueError, match=r"^X: a DataFrame, which reads as its column labels; expected a list of "
                                         r"images"):
        CovarianceOperator().fit(pd.DataFrame(images[0]))
    with pytest.raises(ValueError, match=r"^X: a DataFrame, which reads as its column labels"):
        LogCovariance().fit(pd.DataFrame(seqs[0]))
