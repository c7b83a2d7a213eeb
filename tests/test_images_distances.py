"""Distances between covariance operators (paper 004): references and Theorems 1 and 2."""

import numpy as np
import pytest
import scipy.linalg as sl

from streamcov.descriptors import operators as dist
from streamcov.errors import NotSPDError
from streamcov.kernels import distances
from streamcov.linalg import log_vectors
from streamcov.descriptors.pixels import pixel_features
from conftest import DATA

pytestmark = pytest.mark.usefixtures("one_blas_thread")
VIRUS = DATA / "virus_kylberg" / "raw"


def _images():
    """Two real images: Virus particles when available, else scikit-image textures."""
    from streamcov.data.imageio import read_image
    a, b = VIRUS / "1" / "1" / "1.png", VIRUS / "2" / "1" / "1.png"
    if a.exists() and b.exists():
        return read_image(a), read_image(b)
    import skimage.data
    return skimage.data.brick()[:41, :41], skimage.data.grass()[:41, :41]


@pytest.fixture(scope="module")
def xy():
    """Standardized 'virus' features (25 per pixel) of 80 random pixels of each image."""
    ia, ib = _images()
    fx, fy = pixel_features(ia, "virus"), pixel_features(ib, "virus")
    both = np.vstack([fx, fy])
    mu, sd = both.mean(0), both.std(0)
    sd[sd == 0] = 1
    rng = np.random.default_rng(0)
    x = ((fx - mu) / sd)[rng.choice(len(fx), 80, replace=False)]
    y = ((fy - mu) / sd)[rng.choice(len(fy), 80, replace=False)]
    return x, y


# streamcov's convention exp(-d^2 / (2 sigma^2)): paper 004's bandwidth sqrt(25) = 5, the
# typical pixel distance after standardization, is sqrt(2) sigma
SIGMA = 5.0 / np.sqrt(2.0)
GAMMA = 1e-2


def ref_exact_log_hs(x, y, sigma, gamma, mu):
    """Slow reference: write both operators in an orthonormal basis of span{Phi(x_i), Phi(y_j)}
    (eigendecomposition of the joint Gram matrix), take scipy.linalg.logm there, and add the
    extended-HS term (log gamma - log mu)^2 of the orthogonal complement."""
    z = np.vstack([x, y])
    d2 = ((z[:, None, :] - z[None, :, :]) ** 2).sum(-1)
    K = np.exp(-d2 / (2 * sigma ** 2))
    w, V = np.linalg.eigh(K)
    keep = w > 1e-12 * w[-1]
    Q = np.sqrt(w[keep])[:, None] * V[:, keep].T      # coordinates of Phi(z_i)
    m, n = len(x), len(y)
    Jm, Jn = np.eye(m) - 1.0 / m, np.eye(n) - 1.0 / n
    Cx = Q[:, :m] @ Jm @ Q[:, :m].T / m
    Cy = Q[:, m:] @ Jn @ Q[:, m:].T / n
    eye = np.eye(len(Q))
    H = sl.logm(eye + Cx / gamma) - sl.logm(eye + Cy / mu)
    return np.sqrt(np.linalg.norm(H.real) ** 2 + (np.log(gamma) - np.log(mu)) ** 2)


def ref_approx(x, y, W, gamma, mu):
    """Eq. (20)-(21) written out: explicit J_m and scipy.linalg.logm."""
    def cov(f):
        z = f @ W
        phi = np.hstack([np.cos(z), np.sin(z)]).T / np.sqrt(W.shape[1])   # 2D x m
        m = f.shape[0]
        J = np.eye(m) - np.ones((m, m)) / m
        return phi @ J @ phi.T / m
    eye = np.eye(2 * W.shape[1])
    return np.linalg.norm(sl.logm(cov(x) + gamma * eye) - sl.logm(cov(y) + mu * eye)).real


def ref_hs_eq59(x, y, sigma):
    """Eq. (59) literally: <J K, K J>_F terms with explicit J."""
    k = lambda a, b: np.exp(-((a[:, None] - b[None]) ** 2).sum(-1) / (2 * sigma ** 2))
    m = len(x)
    J = np.eye(m) - np.ones((m, m)) / m
    Kx, Ky, Kxy = k(x, x), k(y, y), k(x, y)
    f = lambda A, B: np.sum(A * B)
    d2 = (f(J @ Kx, Kx @ J) - 2 * f(J @ Kxy, Kxy @ J) + f(J @ Ky, Ky @ J)) / m ** 2
    return np.sqrt(d2)


@pytest.mark.parametrize("mu", [GAMMA, 10 * GAMMA])
def test_exact_log_hs_matches_logm_reference(xy, mu):
    x, y = xy
    got = dist.log_hs_distance(x, y, SIGMA, GAMMA, mu)
    np.testing.assert_allclose(got, ref_exact_log_hs(x, y, SIGMA, GAMMA, mu), rtol=1e-8)


def test_exact_log_hs_different_pixel_counts(xy):
    x, y = xy
    np.testing.assert_allclose(dist.log_hs_distance(x, y[:50], SIGMA, GAMMA),
                               ref_exact_log_hs(x, y[:50], SIGMA, GAMMA, GAMMA), rtol=1e-8)


def test_pairwise_log_hs_matches_single_pairs(xy):
    x, y = xy
    sets = [x, y, x[:60], y[10:]]
    D = dist.pairwise_log_hs(sets, sigma=SIGMA, gamma=GAMMA)
    assert np.allclose(D, D.T) and np.all(np.diag(D) == 0)
    np.testing.assert_allclose(D[1, 2], dist.log_hs_distance(y, x[:60], SIGMA, GAMMA), rtol=1e-10)
    D2 = dist.pairwise_log_hs(sets[:2], sets[2:], sigma=SIGMA, gamma=GAMMA)
    np.testing.assert_allclose(D2, D[:2, 2:], rtol=1e-10)


@pytest.mark.parametrize("kind", ["random", "halton"])
def test_approx_log_hs_matches_logm_reference(xy, kind):
    x, y = xy
    W = dist.fourier_frequencies(25, 30, SIGMA, kind=kind, random_state=1)
    cx, cy = dist.approx_covariance_operator(x, W), dist.approx_covariance_operator(y, W)
    for mu in (GAMMA, 3 * GAMMA):
        np.testing.assert_allclose(dist.approx_log_hs_distance(cx, cy, GAMMA, mu),
                                   ref_approx(x, y, W, GAMMA, mu), rtol=1e-9)


def test_approx_covariance_operator_blocks_and_feature_map(xy):
    x, _ = xy
    W = dist.fourier_frequencies(25, 20, SIGMA, random_state=0)
    phi = dist.fourier_features(x, W)
    np.testing.assert_allclose(dist.approx_covariance_operator(x, W), np.cov(phi.T, bias=True), atol=1e-14)
    np.testing.assert_allclose(dist.approx_covariance_operator(x, W, block=7),
                               dist.approx_covariance_operator(x, W), atol=1e-14)
    stack = dist.approx_covariance_operators([x, x[:30]], W)
    np.testing.assert_allclose(stack[1], dist.approx_covariance_operator(x[:30], W), atol=1e-15)


def test_fourier_features_approximate_the_gaussian_kernel(xy):
    x, _ = xy
    K = dist.gaussian_gram(x[:20], sigma=SIGMA)
    for kind in ("random", "halton"):
        phi = dist.fourier_features(x[:20], dist.fourier_frequencies(25, 4000, SIGMA, kind, random_state=0))
        # Monte Carlo error of a mean of 4000 terms bounded by 1: std <= 1/sqrt(4000) = 0.016;
        # 0.08 is 5 std for the random features; Halton points do at least as well.
        assert np.abs(phi @ phi.T - K).max() < 0.08


def _approx_distance(x, y, D, kind, seed, gamma, mu):
    W = dist.fourier_frequencies(x.shape[1], D, SIGMA, kind=kind, random_state=seed)
    return dist.approx_log_hs_distance(dist.approx_covariance_operator(x, W),
                                       dist.approx_covariance_operator(y, W), gamma, mu)


def test_theorem2_approx_converges_to_exact_when_gamma_equals_mu(xy):
    """Theorem 2: with gamma = mu the approximate Log-HS distance tends to the exact one.

    Measured on real image features: the error, averaged over 4 random draws of W,
    falls roughly like 1/D. Tolerance: it must decrease at every step of
    D = 25, 100, 400 and at D = 400 be under a quarter of its D = 25 value and
    under 5% of the distance (measured: about 1/10 and 2%).
    """
    x, y = xy
    exact = dist.log_hs_distance(x, y, SIGMA, GAMMA)
    errs = {D: np.mean([abs(_approx_distance(x, y, D, "random", s, GAMMA, GAMMA) - exact)
                        for s in range(4)]) for D in (25, 100, 400)}
    assert errs[25] > errs[100] > errs[400]
    assert errs[400] < 0.25 * errs[25]
    assert errs[400] < 0.05 * exact
    # quasi-random (Halton) frequencies converge too (deterministic sequence)
    qerr = [abs(_approx_distance(x, y, D, "halton", None, GAMMA, GAMMA) - exact) for D in (25, 100, 400)]
    assert qerr[0] > qerr[1] > qerr[2] and qerr[2] < 0.05 * exact


def test_theorem1_approx_diverges_when_gamma_differs_from_mu(xy):
    """Theorem 1: with gamma != mu the distance grows without bound, like
    |log(gamma / mu)| sqrt(2D) (eq. (49): the (log gamma/mu)^2 * dim term dominates).
    Tolerance: strictly increasing over D = 25 ... 400, and d^2 / (2D) within 15% of
    (log gamma/mu)^2 at D = 400 (measured: within 5%)."""
    x, y = xy
    mu = 10 * GAMMA
    ds = [_approx_distance(x, y, D, "random", 0, GAMMA, mu) for D in (25, 50, 100, 200, 400)]
    assert all(b > a for a, b in zip(ds, ds[1:]))
    assert ds[-1] > 5 * dist.log_hs_distance(x, y, SIGMA, GAMMA, mu)
    np.testing.assert_allclose(ds[-1] ** 2 / 800, np.log(10.0) ** 2, rtol=0.15)


def test_hs_distance_matches_eq59_and_lemma6(xy):
    x, y = xy
    ref = ref_hs_eq59(x, y, SIGMA)
    np.testing.assert_allclose(dist.hs_distance(x, y, SIGMA), ref, rtol=1e-10)
    D = dist.pairwise_hs([x, y, x[:40]], sigma=SIGMA)
    np.testing.assert_allclose(D[0, 1], ref, rtol=1e-10)
    np.testing.assert_allclose(D, D.T)
    # Lemma 6: ||C_D(x) - C_D(y)||_F -> ||C(x) - C(y)||_HS; Monte Carlo, 2000 frequencies:
    # the measured relative error is about 2%, 10% allowed.
    W = dist.fourier_frequencies(25, 2000, SIGMA, random_state=0)
    approx = np.linalg.norm(dist.approx_covariance_operator(x, W) - dist.approx_covariance_operator(y, W))
    np.testing.assert_allclose(approx, ref, rtol=0.1)


def _spd_stack(n=4, d=5, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, d, 2 * d))
    return a @ a.transpose(0, 2, 1) / (2 * d)


def test_region_covariance_distances_match_references():
    C = _spd_stack()
    B = _spd_stack(3, seed=1)
    g = 1e-2
    eye = np.eye(5)
    E = dist.euclidean_distances(C, B)
    LE = dist.log_euclidean_distances(C, B, gamma=g)
    S = dist.stein_divergences(C, B, gamma=g)
    for i in range(4):
        for j in range(3):
            np.testing.assert_allclose(E[i, j], np.linalg.norm(C[i] - B[j]), rtol=1e-10)
            np.testing.assert_allclose(LE[i, j], np.linalg.norm(sl.logm(C[i] + g * eye) - sl.logm(B[j] + g * eye)),
                                       rtol=1e-8)
            a, b = C[i] + g * eye, B[j] + g * eye
            ref = np.linalg.slogdet((a + b) / 2)[1] - 0.5 * (np.linalg.slogdet(a)[1] + np.linalg.slogdet(b)[1])
            np.testing.assert_allclose(S[i, j], ref, rtol=1e-8, atol=1e-12)
    for f in (dist.euclidean_distances, dist.log_euclidean_distances, dist.stein_divergences):
        M = f(C)
        np.testing.assert_allclose(M, M.T, atol=1e-12)
        np.testing.assert_allclose(np.diag(M), 0, atol=1e-10)


def test_log_vectors_give_the_approx_log_hs_distance(xy):
    x, y = xy
    W = dist.fourier_frequencies(25, 20, SIGMA, random_state=0)
    C = np.stack([dist.approx_covariance_operator(f, W) for f in (x, y)])
    v = log_vectors(C, GAMMA, relative=True)
    np.testing.assert_allclose(distances(v)[0, 1],
                               dist.approx_log_hs_distance(C[0], C[1], GAMMA), rtol=1e-9)
    np.testing.assert_allclose(dist.regularized_log(C[0], GAMMA), sl.logm(C[0] + GAMMA * np.eye(40)).real,
                               atol=1e-9)


def test_halton_frequencies_are_deterministic_and_finite():
    a = dist.fourier_frequencies(3, 50, 2.0, kind="halton", random_state=1)
    b = dist.fourier_frequencies(3, 50, 2.0, kind="halton", random_state=2)
    assert np.array_equal(a, b) and np.isfinite(a).all() and a.shape == (3, 50)
    # first point (origin of the unit cube) is skipped; the next Halton point is (1/2, 1/3, 1/5)
    from scipy.special import ndtri
    np.testing.assert_allclose(a[:, 0], ndtri([0.5, 1 / 3, 0.2]) / 2.0)


def test_distance_errors(xy):
    x, y = xy
    with pytest.raises(ValueError, match="sigma must be a finite number > 0, got -1"):
        dist.fourier_frequencies(3, 10, sigma=-1)
    with pytest.raises(TypeError, match="sigma must be a number"):
        dist.gaussian_gram(x, sigma="wide")
    with pytest.raises(ValueError, match="kind must be 'random' or 'halton'"):
        dist.fourier_frequencies(3, 10, kind="sobol")
    # a bandwidth whose square is 0 drew frequencies of 1e300; NaN frequencies made the operator NaN; mu was
    # named gamma; no images was numpy's "need at least one array to stack"; overflowing covariances were NaN
    with pytest.raises(ValueError, match="sigma must be a finite number > 0 whose square is a normal float"):
        dist.fourier_frequencies(3, 10, sigma=1e-300)
    with pytest.raises(ValueError, match="W: the frequencies hold NaN or infinity"):
        dist.approx_covariance_operator(x, np.full((x.shape[1], 4), np.nan))
    C = dist.approx_covariance_operator(x, dist.fourier_frequencies(x.shape[1], 4, random_state=0))
    with pytest.raises(ValueError, match="mu must be a finite number > 0, got 0"):
        dist.approx_log_hs_distance(C, C, 1e-3, mu=0)
    with pytest.raises(ValueError, match="feats_a: no images"):
        dist.pairwise_log_hs([])
    from streamcov.descriptors.pixels import image_covariances

    with pytest.raises(ValueError, match=r"^image 0: the covariance of its pixel features overflows float64 \(pixels "
                                         r"up to [\d.]+e\+299\); scale the image down"):
        image_covariances([np.random.default_rng(0).random((8, 8)) * 1e300], "texture")
    with pytest.raises(ValueError, match="D must be a positive integer"):
        dist.fourier_frequencies(3, 0)
    with pytest.raises(ValueError, match="n_features must be a positive integer"):
        dist.fourier_frequencies(2.5, 10)
    W = dist.fourier_frequencies(25, 10, random_state=0)
    with pytest.raises(ValueError, match="features has 3 features per pixel, expected 25"):
        dist.approx_covariance_operator(np.zeros((5, 3)), W)
    with pytest.raises(ValueError, match="needs at least 2 pixels"):
        dist.approx_covariance_operator(np.zeros((1, 25)), W)
    with pytest.raises(ValueError, match=r"W must be 2-D \(n_features, D\)"):
        dist.fourier_features(x, np.zeros(3))
    bad = x.copy()
    bad[3, 4] = np.nan
    with pytest.raises(ValueError, match="non-finite value at row 3, column 4"):
        dist.log_hs_distance(bad, y)
    with pytest.raises(ValueError, match="features of image 1 contains a non-finite value"):
        dist.pairwise_log_hs([x, bad], sigma=SIGMA)
    with pytest.raises(ValueError, match="gamma must be a finite number > 0, got 0"):
        dist.log_hs_distance(x, y, gamma=0)
    with pytest.raises(ValueError, match="x has 25 features per pixel but y has 3"):
        dist.log_hs_distance(x, y[:, :3])
    with pytest.raises(ValueError, match=r"different numbers of features per pixel: \[3, 25\]"):
        dist.pairwise_hs([x, y[:, :3]])
    C = _spd_stack()
    with pytest.raises(ValueError, match="covs_a 1 is not symmetric"):
        nonsym = C.copy()
        nonsym[1, 0, 1] += 1.0
        dist.euclidean_distances(nonsym)
    with pytest.raises(ValueError, match=r"covs_a matrices are 5x5 but covs_b are 3x3"):
        dist.log_euclidean_distances(C, C[:, :3, :3])
    with pytest.raises(ValueError, match="square matrix or a stack"):
        dist.stein_divergences(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="covs 0 contains NaN"):
        dist.regularized_log(np.full((2, 2), np.nan), 1.0)
    with pytest.raises(NotSPDError, match="covs_a: matrix 0 \\+ gamma I is not positive definite"):
        dist.stein_divergences(-np.stack([np.eye(3)] * 2), gamma=1e-3)
    with pytest.raises(ValueError, match="two matrices of one shape"):
        dist.approx_log_hs_distance(C[0], C[0, :3, :3], 1e-3)
    with pytest.raises(ValueError, match=r"vector sets have shapes \(2, 3\) and \(2, 4\)"):
        distances(np.zeros((2, 3)), np.zeros((2, 4)))


@pytest.mark.parametrize("same", [True, False])
def test_float32_squared_distances_of_rows_far_from_the_origin(same):
    """Rows 1e4 from the origin and about 1 apart (operator vectors lie about 55 spreads out): through
    ||a||^2 + ||b||^2 - 2 a.b in float32 the distances were lost to cancellation (a row's distance to
    itself 47, to others 0). Against the float64 two-loop reference: relative error at most 1e-6 of the
    largest distance (float32 rounding of the centred rows, eps 6e-8, times the few sums of 20 terms)."""
    from streamcov.kernels import squared_distances

    rng = np.random.default_rng(0)
    X = (rng.normal(size=(40, 20)) + 1e4).astype(np.float32)
    A, B = (X, X) if same else (X[:15], X[15:])
    X64, Y64 = A.astype(np.float64), B.astype(np.float64)
    ref = ((X64[:, None, :] - Y64[None, :, :]) ** 2).sum(-1)
    got = squared_distances(A) if same else squared_distances(A, B)
    assert np.abs(got - ref).max() <= 1e-6 * ref.max()


@pytest.mark.parametrize("same", [True, False])
def test_float64_squared_distances_and_kernels_of_rows_far_from_the_origin(same):
    """Rows 1e7 from the origin and about 1 apart: in float64 ||a||^2 + ||b||^2 - 2 a.b kept about 2 of the
    distances' digits (relative error 0.5 at 1e5, Nystroem's Z Z^T 3.5 away from a kernel bounded by 1, a twin
    GP's predictions off by 0.3 to 1.2 with no warning). Now centred first: against the float64 two-loop
    reference at most 1e-8 of the largest distance (float64 eps, 2e-16, times the 1e7 offset squared over
    the spread's square of about 40: some 1e-9); kernels and estimators then do not see the shift."""
    from streamcov.features import GaussianNystroem
    from streamcov.kernels import squared_distances
    from streamcov.structured import TwinGaussianProcess
    from streamcov.structured.hsic import median_heuristic_gamma

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3)) + 1e7
    A, B = (X, X) if same else (X[:15], X[15:])
    ref = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
    got = squared_distances(A) if same else squared_distances(A, B)
    assert np.abs(got - ref).max() <= 1e-8 * ref.max()
    Z0 = rng.normal(size=(30, 3))
    g0, g1 = median_heuristic_gamma(Z0), median_heuristic_gamma(Z0 + 1e7)
    assert abs(g1 - g0) <= 1e-6 * g0
    nys = [GaussianNystroem(n_components=30, sigma=0.5, random_state=0).fit(Z).transform(Z) for Z in (Z0, Z0 + 1e7)]
    assert np.abs(nys[0] @ nys[0].T - nys[1] @ nys[1].T).max() < 1e-6
    Y = np.c_[np.sin(Z0[:, 0]), np.cos(Z0[:, 1])]
    Xt = rng.normal(size=(5, 3))
    for crit in ("kl", "hsic"):
        base = TwinGaussianProcess(criterion=crit, random_state=0).fit(Z0, Y).predict(Xt)
        shifted = TwinGaussianProcess(criterion=crit, random_state=0).fit(Z0 + 1e7, Y + 1e7).predict(Xt + 1e7) - 1e7
        assert np.abs(shifted - base).max() < 1e-5, crit   # the outputs' own float64 step at 1e7 is 2e-9


def test_squared_distances_and_the_gaussian_kernel_refuse_what_would_be_nan():
    """A NaN row had distance 0 to itself and NaN to the others, rows near 1e200 overflowed to NaN distances
    (the exact SVM then failed inside scikit-learn's SVC on NaN), complex rows lost their imaginary parts;
    a bandwidth whose square is 0 made the kernel's diagonal 0 / 0, and negative distances overflowed exp."""
    from streamcov.kernels import gaussian_kernel, median_distance, squared_distances

    X = np.random.default_rng(0).normal(size=(4, 3))
    bad = X.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match=r"B: row 2 holds NaN or infinity \(column 1\)"):
        squared_distances(X, bad)
    with pytest.raises(ValueError, match=r"the squared distances overflow float64 \(values up to 1.3e\+200\); "
                                         r"scale the rows down"):
        squared_distances(X * 1e200)
    with pytest.raises(ValueError, match="the squared distances overflow float32"):
        squared_distances((X * 1e20).astype(np.float32))
    with pytest.raises(ValueError, match="A: complex vectors are not supported"):
        squared_distances(X * 1j)
    with pytest.raises(ValueError, match="A: expected numbers, got an array of dtype <U1"):
        squared_distances(np.array([["a", "b"]]))
    d2 = squared_distances(X)
    for sigma in (1e-300, None, "a"):
        with pytest.raises(ValueError, match=r"sigma must be a finite number > 0"):
            gaussian_kernel(d2, sigma)
    for wrong in (-d2 - 1.0, np.full((2, 2), np.nan), d2 - 1e-9 * d2.max()):
        with pytest.raises(ValueError, match=r"d2: expected squared distances \(numbers >= 0\)"):
            gaussian_kernel(wrong, 1.0)
    # the rounding of |a|^2 + |b|^2 - 2 <a, b> below 0 (within 1e-12 of the largest distance) is a distance of 0
    rounded = d2.copy()
    rounded[0, 1] = rounded[1, 0] = -1e-13 * d2.max()
    np.testing.assert_array_equal(gaussian_kernel(rounded, 1.0)[0, 1], 1.0)
    # numbers held as objects (pandas' nullable Float64 columns) are numbers
    np.testing.assert_array_equal(squared_distances(X.astype(object)), d2)
    with pytest.raises(ValueError, match=r"A: expected numbers, got an array of objects that are not"):
        squared_distances(np.array([[1.0, "a"]], dtype=object))
    from streamcov.kernels import label_kernel

    with pytest.raises(ValueError, match=r"y: label 1 is NaN; give every row a class"):
        label_kernel(np.array([0.0, np.nan, 1.0]))   # NaN != NaN: the row was of no class, not even its own
    with pytest.raises(ValueError, match=r"median_distance: expected a square distance matrix \(n, n\), got "
                                         r"shape \(3,\)"):
        median_distance(np.ones(3))
