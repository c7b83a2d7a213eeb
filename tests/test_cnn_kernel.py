"""Paper 004's conv + head kernel (section 5): the Gram matrix of the SVM path and its tensor sketch.

Pure numpy: runs without the extra ``cnn``. Rows are ``[v, h]``: a log-operator
vector and a unit head vector; the kernel is
``exp(-|v - v'|^2 / (2 sigma^2)) ((1 - w) + w <h, h'>)`` (tests/reference.py).
"""
import numpy as np
import pytest

from sklearn.utils.estimator_checks import parametrize_with_checks

import reference as ref
from streamcov.features import GaussianRandomFeatures, HeadProductSketch
from streamcov.stream.exact import GaussianKernelSVC


@parametrize_with_checks(
    [HeadProductSketch(n_head=1, n_components=16, random_state=0),
     HeadProductSketch(n_head=1, n_components=16, head_combine="sum", random_state=0)])
def test_head_product_sketch_is_a_scikit_learn_transformer(estimator, check):
    check(estimator)


def rows(n, p=6, q=5, seed=0):
    rng = np.random.default_rng(seed)
    V = rng.normal(size=(n, p)) * 0.4
    H = np.abs(rng.normal(size=(n, q)))      # ReLU6 averages are non-negative
    H /= np.linalg.norm(H, axis=1, keepdims=True)
    return V, H, np.hstack([V, H])


@pytest.mark.parametrize("w", [0.0, 0.3, 1.0])
def test_svc_gram_is_the_product_kernel(w):
    V, H, X = rows(12)
    V2, H2, X2 = rows(5, seed=1)
    clf = GaussianKernelSVC(sigma=0.8, C=10.0, n_head=5, head_weight=w)
    np.testing.assert_allclose(clf._gram(X), ref.product_kernel(V, H, 0.8, w), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(clf._gram(X2, X), ref.product_kernel(V2, H2, 0.8, w, V, H), rtol=1e-10, atol=1e-12)
    # w = 0 is the Gaussian kernel of the operators alone, the head ignored
    if w == 0.0:
        np.testing.assert_allclose(clf._gram(X), GaussianKernelSVC(sigma=0.8)._gram(V), rtol=1e-12)


def test_svc_with_head_equals_svc_on_the_reference_gram():
    from sklearn.svm import SVC

    V, H, X = rows(40, seed=2)
    y = (V[:, 0] + H[:, 0] > np.median(V[:, 0] + H[:, 0])).astype(int)
    clf = GaussianKernelSVC(sigma=1.0, C=10.0, n_head=5, head_weight=0.5).fit(X[:30], y[:30])
    want = SVC(kernel="precomputed", C=10.0).fit(ref.product_kernel(V[:30], H[:30], 1.0, 0.5), y[:30])
    np.testing.assert_array_equal(clf.predict(X[30:]),
                                  want.predict(ref.product_kernel(V[30:], H[30:], 1.0, 0.5, V[:30], H[:30])))
    with pytest.raises(ValueError, match="leaves none for the Gaussian kernel"):
        GaussianKernelSVC(n_head=11).fit(X, y)
    # a bandwidth whose square is 0, or rows whose distances overflow, gave a Gram matrix of NaN, refused by
    # scikit-learn's SVC inside: "SVC does not accept missing values"
    with pytest.raises(ValueError, match="sigma must be a finite number > 0 whose square is a normal float"):
        GaussianKernelSVC(sigma=1e-300).fit(X, y)
    with pytest.raises(ValueError, match="the squared distances overflow float64"):
        GaussianKernelSVC().fit(X * 1e300, y)


def test_sketch_is_the_count_sketch_of_the_tensor_product():
    """TS(x) = IFFT(FFT(CS1(z)) FFT(CS2(a))) equals the count sketch of z a^T under (h1 + h2) mod n (exact)."""
    V, H, X = rows(3, p=4, q=3)
    fm = HeadProductSketch(n_components=16, n_rff=7, sigma=1.0, n_head=3, head_weight=0.4, random_state=0).fit(X)
    T = fm.transform(X)
    Z = fm.rff_.transform(V)
    A = fm.head_factor(H)
    np.testing.assert_allclose(A, np.hstack([np.full((3, 1), np.sqrt(0.6)), np.sqrt(0.4) * H]))
    for i in range(3):
        want = ref.count_sketch_of_outer(Z[i], A[i], fm.hash_z_, fm.sign_z_, fm.hash_a_, fm.sign_a_, 16)
        np.testing.assert_allclose(T[i], want, atol=1e-12)
    # <a(h), a(h')> = (1 - w) + w <h, h'>: the tensor product's inner product is the product kernel
    np.testing.assert_allclose(A @ A.T, 0.6 + 0.4 * H @ H.T, atol=1e-12)


def test_sketch_is_unbiased_for_the_product_kernel():
    """Mean of TS(x) . TS(y) over 400 seeds within 4 standard errors of the exact kernel."""
    V, H, X = rows(4, seed=3)
    K = ref.product_kernel(V, H, 1.0, 0.7)
    est = np.stack([(lambda T: T @ T.T)(HeadProductSketch(n_components=128, sigma=1.0, n_head=5, head_weight=0.7,
                                                          random_state=s).fit_transform(X)) for s in range(400)])
    se = est.std(0) / np.sqrt(len(est))
    assert (np.abs(est.mean(0) - K) < 4 * se + 1e-9).all(), (est.mean(0) - K) / se


def test_sketch_variance_bound():
    """Given z, the variance of TS(x) . TS(y) over the hashes is the module docstring's (about), at most 4 |z|^2 |z'|^2 / n."""
    V, H, X = rows(2, seed=4)
    n = 64
    fm = HeadProductSketch(n_components=n, sigma=1.0, n_head=5, head_weight=1.0, random_state=0).fit(X)
    Z, A = fm.rff_.transform(V), fm.head_factor(H)
    exact = (Z[0] @ Z[1]) * (A[0] @ A[1])
    rng = np.random.default_rng(0)
    est = []
    for _ in range(3000):
        fm.hash_z_ = rng.integers(n, size=len(fm.hash_z_))
        fm.sign_z_ = rng.choice([-1.0, 1.0], size=len(fm.sign_z_))
        fm.hash_a_ = rng.integers(n, size=len(fm.hash_a_))
        fm.sign_a_ = rng.choice([-1.0, 1.0], size=len(fm.sign_a_))
        T = fm.transform(X)
        est.append(T[0] @ T[1])
    est = np.asarray(est)
    zz, aa, z2, a2 = Z[0] @ Z[1], A[0] @ A[1], (Z[0] @ Z[0]) * (Z[1] @ Z[1]), (A[0] @ A[0]) * (A[1] @ A[1])
    var = (z2 * a2 + zz ** 2 * a2 + z2 * aa ** 2 + zz ** 2 * aa ** 2) / n   # first order in 1/n (module docstring)
    assert abs(est.mean() - exact) < 4 * est.std() / np.sqrt(len(est))
    assert 0.8 * var <= est.var() <= 1.1 * var <= 1.1 * 4 * z2 * a2 / n, (est.var(), var)


def test_sketch_w0_is_the_gaussian_features_kernel_and_concatenation_is_a_sum():
    """w = 0: the sketch estimates K2 alone; [z, c h] would give K2 + c^2 <h, h'> (a sum, not the product)."""
    V, H, X = rows(4, seed=5)
    K2 = ref.product_kernel(V, H, 1.0, 0.0)
    est = np.mean([(lambda T: T @ T.T)(HeadProductSketch(n_components=2048, sigma=1.0, n_head=5, head_weight=0.0,
                                                         random_state=s).fit_transform(X)) for s in range(20)], 0)
    assert np.abs(est - K2).max() < 0.05
    z = GaussianRandomFeatures(n_components=4096, sigma=1.0, random_state=0).fit(V).transform(V)
    cat = np.hstack([z, H])
    np.testing.assert_allclose(cat @ cat.T, z @ z.T + H @ H.T, atol=1e-10)


def test_sketch_is_deterministic_keeps_float32_and_is_saved_without_pickle(tmp_path):
    from streamcov.stream.model import dump_estimator, load_estimator

    V, H, X = rows(6, seed=6)
    fm = HeadProductSketch(n_components=32, sigma=0.5, n_head=5, random_state=7).fit(X)
    T = fm.transform(X)
    np.testing.assert_array_equal(T, HeadProductSketch(n_components=32, sigma=0.5, n_head=5,
                                                       random_state=7).fit(X).transform(X))
    assert fm.transform(X.astype(np.float32)).dtype == np.float32
    arrays = {}
    desc = dump_estimator(fm, "m.", arrays)
    np.savez(tmp_path / "a.npz", **arrays)
    with np.load(tmp_path / "a.npz", allow_pickle=False) as z:
        back = load_estimator(desc, z)
    np.testing.assert_array_equal(back.transform(X), T)
    with pytest.raises(ValueError, match="at least one before the 5 of the head"):
        HeadProductSketch(n_head=5).fit(H)


def test_median_bandwidth_of_the_sketch_measured_on_the_operators_only():
    from streamcov.features.registry import fit_feature_map
    from streamcov.kernels import distances, median_distance

    V, H, X = rows(30, seed=8)
    fmap, record = fit_feature_map({"map": "rff-head", "n_components": 64, "n_head": 5, "bandwidth": "median"},
                                   0, X.shape[1], X)
    assert record["median_distance"] == pytest.approx(median_distance(distances(V)))
    assert isinstance(fmap, HeadProductSketch) and fmap.n_head == 5


# ------------------------------------------------- head normalisation and the sum alternative
@pytest.mark.parametrize("norm", ["l2", "power"])
def test_normalize_heads_matches_the_entrywise_reference(norm):
    from streamcov.descriptors.image import normalize_heads, unit_heads

    rng = np.random.default_rng(11)
    H = np.abs(rng.normal(size=(7, 9))) ** 3          # skewed, as averages of ReLU6 outputs
    H[2] = 0.0                                         # an all-zero head stays zero
    H[4, :3] = -H[4, :3]                               # signed entries keep their sign under the power norm
    got = normalize_heads(H, norm)
    assert got.dtype == np.float32 and got.shape == H.shape
    np.testing.assert_allclose(got, ref.normalize_heads(H, norm), rtol=1e-6, atol=1e-7)
    assert np.all(got[2] == 0) and np.allclose(np.linalg.norm(np.delete(got, 2, 0), axis=1), 1, atol=1e-6)
    if norm == "l2":
        np.testing.assert_array_equal(got, unit_heads(H))
    else:   # for non-negative heads: the linear kernel is the Hellinger affinity of the heads as distributions
        P = np.abs(H[[0, 1]]) / np.abs(H[[0, 1]]).sum(1, keepdims=True)
        assert got[0] @ got[1] == pytest.approx(np.sqrt(P[0] * P[1]).sum(), rel=1e-5)
    with pytest.raises(ValueError, match="head norm must be one of l2, power, got 'l1'"):
        normalize_heads(H, "l1")
    H[5, 1] = np.nan                                   # a NaN head was passed through as a NaN row
    with pytest.raises(ValueError, match="^head 5 holds NaN or infinite values$"):
        normalize_heads(H, norm)


def test_descriptor_head_norm_round_trips_and_l2_keeps_the_old_dictionary():
    from streamcov.descriptors.cnn import CNNSpec
    from streamcov.descriptors.image import ImageDescriptor, normalize_heads

    spec = CNNSpec(blocks=("block3",), head=True)
    old = ImageDescriptor(spec, "head")
    assert "head_norm" not in old.as_dict() and ImageDescriptor.from_dict(old.as_dict()) == old
    power = ImageDescriptor(spec, "head", head_norm="power")
    assert power.as_dict()["head_norm"] == "power" and ImageDescriptor.from_dict(power.as_dict()) == power
    H = np.abs(np.random.default_rng(0).normal(size=(3, 1280)))
    np.testing.assert_array_equal(power.vectors_of(None, H, None), normalize_heads(H, "power"))
    with pytest.raises(ValueError, match="head_norm must be one of l2, power, got 'max'"):
        ImageDescriptor(spec, "head", head_norm="max")


@pytest.mark.parametrize("w", [0.0, 0.3, 1.0])
def test_svc_gram_is_the_sum_kernel(w):
    from streamcov.stream.exact import combine_head_kernel

    V, H, X = rows(12)
    V2, H2, X2 = rows(5, seed=1)
    clf = GaussianKernelSVC(sigma=0.8, C=10.0, n_head=5, head_weight=w, head_combine="sum")
    np.testing.assert_allclose(clf._gram(X), ref.sum_kernel(V, H, 0.8, w), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(clf._gram(X2, X), ref.sum_kernel(V2, H2, 0.8, w, V, H), rtol=1e-10, atol=1e-12)
    # both combinations are the operators alone at w = 0; the sum is the head alone at w = 1
    prod = GaussianKernelSVC(sigma=0.8, n_head=5, head_weight=w)._gram(X)
    if w == 0.0:
        np.testing.assert_allclose(clf._gram(X), prod, rtol=1e-12)
    if w == 1.0:
        np.testing.assert_allclose(clf._gram(X), H @ H.T, rtol=1e-12)
    with pytest.raises(ValueError, match="head_combine must be one of product, sum, got 'max'"):
        combine_head_kernel(prod, H @ H.T, w, "max")
    with pytest.raises(ValueError, match=r"head_weight must lie in \[0, 1\], got 1.5"):
        combine_head_kernel(prod, H @ H.T, 1.5, "sum")


def test_head_combine_is_validated_by_the_estimators():
    from sklearn.utils._param_validation import InvalidParameterError

    V, H, X = rows(10)
    y = np.arange(10) % 2
    with pytest.raises(InvalidParameterError, match="'head_combine' parameter of GaussianKernelSVC must be"):
        GaussianKernelSVC(n_head=5, head_combine="max").fit(X, y)
    with pytest.raises(InvalidParameterError, match="'head_combine' parameter of HeadProductSketch must be"):
        HeadProductSketch(n_head=5, head_combine="concat").fit(X)


def test_sum_features_are_exact_given_z_and_unbiased_for_the_sum_kernel():
    """[sqrt(1 - w) z, sqrt(w) h]: inner products (1 - w) z.z' + w <h, h'> exactly; over 400 seeds the mean is
    within 4 standard errors of (1 - w) K2 + w <h, h'>, the Gram matrix of GaussianKernelSVC(head_combine="sum")."""
    V, H, X = rows(4, seed=3)
    w = 0.4
    fm = HeadProductSketch(n_components=64, sigma=1.0, n_head=5, head_weight=w, head_combine="sum",
                           random_state=0).fit(X)
    T = fm.transform(X)
    assert T.shape == (4, 64 + 5) == (4, fm.n_output) and fm.get_feature_names_out().shape == (69,)
    Z = fm.rff_.transform(V)
    np.testing.assert_allclose(T @ T.T, (1 - w) * Z @ Z.T + w * H @ H.T, atol=1e-12)
    # the same Fourier features as the product's sketch with the same seed
    same = HeadProductSketch(n_components=64, sigma=1.0, n_head=5, head_weight=w, random_state=0).fit(X)
    np.testing.assert_array_equal(same.rff_.transform(V), Z)
    K = GaussianKernelSVC(sigma=1.0, n_head=5, head_weight=w, head_combine="sum")._gram(X)
    est = np.stack([(lambda T: T @ T.T)(HeadProductSketch(n_components=128, sigma=1.0, n_head=5, head_weight=w,
                                                          head_combine="sum", random_state=s).fit_transform(X))
                    for s in range(400)])
    se = est.std(0) / np.sqrt(len(est))
    assert (np.abs(est.mean(0) - K) < 4 * se + 1e-9).all(), (est.mean(0) - K) / se
    # its spread is that of the Fourier features alone, scaled by (1 - w)^2: at most 2 (1 - w)^2 / n per entry
    assert (est.var(0) <= 1.2 * 2 * (1 - w) ** 2 / 128).all()


def test_product_sketch_of_power_normalised_heads_estimates_the_gram():
    """The sketch's bound needs unit heads only: with power-normalised heads its kernel estimate is unbiased for
    GaussianKernelSVC's Gram matrix (400 seeds, 4 standard errors) with the stated variance bound."""
    from streamcov.descriptors.image import normalize_heads

    rng = np.random.default_rng(12)
    V = rng.normal(size=(4, 6)) * 0.4
    H = normalize_heads(np.abs(rng.normal(size=(4, 5))) ** 3, "power").astype(np.float64)
    X = np.hstack([V, H])
    K = GaussianKernelSVC(sigma=1.0, n_head=5, head_weight=0.9)._gram(X)
    n = 128
    est = np.stack([(lambda T: T @ T.T)(HeadProductSketch(n_components=n, sigma=1.0, n_head=5, head_weight=0.9,
                                                          random_state=s).fit_transform(X)) for s in range(400)])
    se = est.std(0) / np.sqrt(len(est))
    assert (np.abs(est.mean(0) - K) < 4 * se + 1e-9).all(), (est.mean(0) - K) / se
    # Fourier features and hashes both vary here; |z|^2 ~ 1 and |a| = 1, so the variance stays near 4 / n at most
    assert (est.var(0) <= 1.5 * 4 / n).all(), est.var(0) * n


def test_head_options_put_the_operators_alone_once():
    from streamcov.tasks.image_eval import head_options

    assert head_options({}) == [None]
    g = {"head_weight": [0.0, 0.5, 1.0], "head_combine": ["product", "sum"]}
    assert head_options(g) == [("product", 0.0), ("product", 0.5), ("product", 1.0), ("sum", 0.5), ("sum", 1.0)]
    assert head_options({"head_weight": [0.5]}) == [("product", 0.5)]
