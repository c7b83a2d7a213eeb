import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, settings, strategies as st

import reference as ref
from streamcov import linalg as L
from streamcov.descriptors import skeleton as C
from streamcov.errors import NotSPDError


def random_frames(rng, t, joints=20, dtype=np.float64):
    return rng.normal(scale=0.3, size=(t, 3 * joints)).astype(dtype)


@pytest.mark.parametrize("center", [(6,), (9, 12)])
def test_covariance_matches_numpy_cov(rng, center):
    frames = random_frames(rng, 120)
    offsets = np.array([0, 7, 50, 120])
    sel = C.JointSelection.hip_relative(20, center)
    got = C.sequence_covariances(frames, offsets, sel)
    want = ref.covariances(frames, offsets, 20, center)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-13)
    assert got.shape[1] == (57 if len(center) == 1 else 60)


def test_float32_frames_are_accumulated_in_float64(rng):
    frames = random_frames(rng, 80, dtype=np.float32)
    sel = C.JointSelection.hip_relative(20, (6,))
    got = C.sequence_covariances(frames, [0, 80], sel)
    want = ref.covariances(frames.astype(np.float64), [0, 80], 20, (6,))
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(t=st.integers(2, 60), cuts=st.lists(st.integers(1, 59), max_size=4), seed=st.integers(0, 10**6))
def test_split_sequence_merges_exactly(t, cuts, seed):
    """A sequence cut anywhere into pieces merges to the covariance of the whole."""
    rng = np.random.default_rng(seed)
    frames = random_frames(rng, t)
    sel = C.JointSelection.hip_relative(20, (6,))
    edges = sorted({0, t, *[c for c in cuts if c < t]})
    n, mean, m2 = C.segment_moments(frames, np.array(edges[:-1]), np.array(edges[1:]), sel)
    acc = (n[0], mean[0], m2[0])
    for k in range(1, len(n)):
        acc = L.merge_moments(acc, (n[k], mean[k], m2[k]))
    whole = C.segment_moments(frames, np.array([0]), np.array([t]), sel)
    assert acc[0] == t
    np.testing.assert_allclose(acc[1], whole[1][0], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(acc[2], whole[2][0], rtol=1e-10, atol=1e-12)


def test_merge_with_empty_piece_is_identity(rng):
    frames = random_frames(rng, 10)
    sel = C.JointSelection.hip_relative(20, (6,))
    n, mean, m2 = C.segment_moments(frames, np.array([0, 10]), np.array([10, 10]), sel)
    merged = L.merge_moments((n[0], mean[0], m2[0]), (n[1], mean[1], m2[1]))
    assert merged[0] == 10
    np.testing.assert_array_equal(merged[2], m2[0])


def spd(rng, d, cond=1e3):
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    w = np.geomspace(1.0, 1.0 / cond, d)
    return (Q * w) @ Q.T


@pytest.mark.parametrize("d", [2, 19, 57])
def test_logm_matches_scipy(rng, d):
    A = spd(rng, d)
    np.testing.assert_allclose(L.spd_logm(A), ref.logm(A), rtol=1e-8, atol=1e-10)


def test_logm_of_expm_is_identity(rng):
    S = rng.normal(size=(6, 15, 15))
    S = (S + S.transpose(0, 2, 1)) / 2
    np.testing.assert_allclose(L.spd_logm(L.sym_expm(S)), S, rtol=1e-9, atol=1e-10)
    # and expm matches scipy
    np.testing.assert_allclose(L.sym_expm(S[0]), scipy.linalg.expm(S[0]), rtol=1e-10)


@pytest.mark.parametrize("d", [2, 12, 57, L.LANE_MAX_DIM + 2])
def test_sqrtm_is_the_principal_root(rng, d):
    """scipy's principal square root, symmetric and positive definite (a root R with R @ R == A alone would pass
    -sqrt); on the lanes and on LAPACK (d > LANE_MAX_DIM)."""
    A = spd(rng, d)
    R = L.spd_sqrtm(A)
    np.testing.assert_allclose(R, np.real(scipy.linalg.sqrtm(A)), rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(R, R.T)
    assert np.linalg.eigvalsh(R).min() > 0
    np.testing.assert_allclose(R @ R, A, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("d", [12, L.LANE_MAX_DIM + 2])
def test_sqrtm_of_a_singular_covariance_and_a_matrix_that_is_not_psd(rng, d):
    """The covariance of fewer samples than dimensions is singular: its eigenvalues come out as -1e-16 to
    -1e-13 times the largest, and the root was refused ("a negative eigenvalue -3.06e-15"). Rounding is taken
    as 0 (the root is PSD and squares back); an eigenvalue below 0 beyond rounding is refused, naming it."""
    B = rng.normal(size=(d, d // 2))
    P = B @ B.T
    R = L.spd_sqrtm(np.stack([P, np.eye(d)]))[0]
    w = np.linalg.eigvalsh(P)
    assert w[0] < 0   # the rounding this is about (seeded)
    np.testing.assert_allclose(R @ R, P, rtol=0, atol=1e-10 * w[-1])
    vals = np.linalg.eigvalsh(R)
    assert vals.min() > -1e-6 * vals.max() and np.sum(vals > 1e-6 * vals.max()) == d // 2
    Q = P - 1e-6 * w[-1] * np.eye(d)   # an eigenvalue of -1e-6 times the largest: no rounding
    with pytest.raises(NotSPDError, match=r"^matrix 1 has a negative eigenvalue -[\d.e-]+; the square root needs "
                                          r"positive semidefinite input$"):
        L.spd_sqrtm(np.stack([P, Q]))


@pytest.mark.parametrize("d", [15, L.LANE_MAX_DIM + 2])
def test_expm_and_logm_on_lanes_and_lapack_match_scipy(rng, d):
    S = rng.normal(size=(d, d)) / np.sqrt(d)
    S = (S + S.T) / 2
    np.testing.assert_allclose(L.sym_expm(S), scipy.linalg.expm(S), rtol=1e-9, atol=1e-12)
    A = spd(rng, d)
    np.testing.assert_allclose(L.spd_logm(A), ref.logm(A), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("relative", [False, True])
@pytest.mark.parametrize("normalize", [False, True])
def test_log_vectors_above_the_lanes_match_scipy(rng, relative, normalize):
    """d > LANE_MAX_DIM takes LAPACK and the dsyrk product (``linalg._large_log_vectors``; the HDM05 pyramid's
    181-dimensional windows go there), one eigendecomposition for several gammas, with per-matrix scales. The
    first matrix's log(w + gamma) has negative values (the general product), the second's none (dsyrk of
    U sqrt(f)); relative logs are never negative."""
    d = 181
    assert d > L.LANE_MAX_DIM
    C = np.stack([spd(rng, d, 1e4), spd(rng, d, 10.0) + np.eye(d)])
    scale = np.array([1.0, 0.5])
    gammas = [1e-3, 3e-2]
    outs = L.log_vectors(C, gammas, relative=relative, scale=scale, normalize=normalize)
    for g, out in zip(gammas, outs):
        assert out.shape == (2, d * (d + 1) // 2)
        for i in range(2):
            S = scale[i] * C[i]
            want = ref.vec(ref.logm(np.eye(d) + S / g if relative else S + g * np.eye(d)))
            if normalize:
                want /= np.linalg.norm(want)
            np.testing.assert_allclose(out[i], want, rtol=1e-8, atol=1e-10 * np.abs(want).max())


def test_vectorization_preserves_frobenius_products(rng):
    A = rng.normal(size=(3, 9, 9))
    A = A + A.transpose(0, 2, 1)
    v = L.sym_vec(A)
    assert v.shape == (3, 45)
    for i in range(3):
        for j in range(3):
            assert np.isclose(v[i] @ v[j], np.sum(A[i] * A[j]), rtol=1e-12)
    np.testing.assert_allclose(L.sym_unvec(v), A, rtol=1e-12)
    np.testing.assert_allclose(v[0], ref.vec(A[0]), rtol=1e-12)


@pytest.mark.parametrize("normalize", [True, False])
def test_log_covariance_vectors_match_reference(rng, normalize):
    frames = random_frames(rng, 90)
    offsets = np.array([0, 30, 90])
    sel = C.JointSelection.hip_relative(20, (6,))
    got = C.log_covariance_vectors(frames, offsets, sel, gamma=1e-3, normalize=normalize)
    want = ref.log_vectors(frames, offsets, 20, (6,), 1e-3, normalize)
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-9)
    if normalize:
        np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, rtol=1e-12)


def test_float32_descriptor_close_to_float64(rng):
    frames = random_frames(rng, 60)
    sel = C.JointSelection.hip_relative(20, (6,))
    a = C.log_covariance_vectors(frames, [0, 60], sel, dtype=np.float32)
    b = C.log_covariance_vectors(frames, [0, 60], sel)
    assert a.dtype == np.float32
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


# ---- errors -----------------------------------------------------------------

def test_not_spd_names_the_sequence(rng):
    frames = random_frames(rng, 105)  # 5 frames < 57 dims: singular without regularization
    sel = C.JointSelection.hip_relative(20, (6,))
    with pytest.raises(NotSPDError, match=r"sequence 1 \(5 frames, 57 dims\).*increase the regularization"):
        C.log_covariance_vectors(frames, [0, 100, 105], sel, gamma=0.0)


@pytest.mark.parametrize("d", [2, L.LANE_MAX_DIM + 2], ids=["lanes", "lapack"])
def test_not_spd_advice_follows_the_size_of_the_negative_eigenvalue(d):
    """A covariance is PSD: a negative eigenvalue is rounding. Slightly below -gamma, raising gamma is the fix;
    1e24 times gamma below 0 (coordinates of 1e30 gave -6e50), it is the data's scale, and raising gamma is not
    advised (it was before). Both routes of log_vectors (the lane kernel, LAPACK above LANE_MAX_DIM)."""
    big = np.diag([1e30] + [1.0] * (d - 2) + [-1e20])[None]
    with pytest.raises(NotSPDError, match=r"matrix 0 is not positive definite \(smallest eigenvalue -1e\+20\); an "
                                          r"eigenvalue this far below 0 is the rounding of a covariance of very large "
                                          r"values: rescale the data \(e\.g\. coordinates to metres\) rather than "
                                          r"raising the regularization gamma \(now 0\.0001\)"):
        L.log_vectors(big, 1e-4)
    small = np.diag([1e30] + [1.0] * (d - 2) + [-1e-3])[None]
    with pytest.raises(NotSPDError, match=r"\(smallest eigenvalue -0\.0009\); increase the regularization gamma "
                                          r"\(now 0\.0001\)$"):
        L.log_vectors(small, 1e-4)
    # a gamma that regularizes nothing (1e-300, accepted as > 0) left the rounding of a covariance of values near
    # 1, -1e-16: that is no sign of large values, and raising gamma is the fix (rescaling was advised instead)
    tiny = np.diag([1.0] * (d - 1) + [-1e-16])[None]
    with pytest.raises(NotSPDError, match=r"\(smallest eigenvalue -1e-16\); increase the regularization gamma "
                                          r"\(now 1e-300\)$"):
        L.log_vectors(tiny, 1e-300)
    with pytest.raises(NotSPDError, match=r"rescale the data .* \(now 1e-300\)$"):
        L.log_vectors(big, 1e-300)


@pytest.mark.parametrize("d, n_jobs", [(2, 1), (L.LANE_MAX_DIM + 2, 1), (L.LANE_MAX_DIM + 2, 2)],
                         ids=["lanes", "lapack", "lapack-threads"])
def test_gamma_named_renames_the_regularization_in_every_route(d, n_jobs):
    """A caller names gamma by its own key (the skeleton source: descriptor.gamma) for the messages raised within
    the block, on every route, the LAPACK one running its matrices in a thread pool (the name travels to those
    threads); outside the block the plain name comes back."""
    small = np.diag([1.0] * (d - 1) + [-1e-3])[None]
    with L.gamma_named("descriptor.gamma"):
        with pytest.raises(NotSPDError, match=r"increase the regularization descriptor\.gamma \(now 0\.0001\)$"):
            L.log_vectors(np.concatenate([np.eye(d)[None]] * 3 + [small]), 1e-4, n_jobs=n_jobs)
    with pytest.raises(NotSPDError, match=r"increase the regularization gamma \(now 0\.0001\)$"):
        L.log_vectors(small, 1e-4, n_jobs=n_jobs)


def test_logm_rejects_non_spd():
    with pytest.raises(NotSPDError, match="matrix 0 is not positive definite"):
        L.spd_logm(np.diag([1.0, -1.0]))


def test_rejects_nonsymmetric_and_nonfinite():
    with pytest.raises(ValueError, match="not symmetric"):
        L.spd_logm(np.array([[1.0, 2.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="NaN or inf"):
        L.spd_logm(np.array([[np.nan, 0.0], [0.0, 1.0]]))


def test_frames_shape_and_values_checked(rng):
    sel = C.JointSelection.hip_relative(20, (6,))
    with pytest.raises(ValueError, match=r"not a multiple of 3"):
        C.segment_moments(np.zeros((5, 58)), np.array([0]), np.array([5]), sel)
    bad = random_frames(rng, 5)
    bad[3, 7] = np.nan
    with pytest.raises(ValueError, match=r"non-finite value at row 3, column 7"):
        C.segment_moments(bad, np.array([0]), np.array([5]), sel)
    with pytest.raises(ValueError, match=r"segments must lie within 0..5"):
        C.segment_moments(random_frames(rng, 5), np.array([0]), np.array([6]), sel)
    with pytest.raises(ValueError, match="centre joint 25 outside"):
        C.JointSelection.hip_relative(20, (25,))
    with pytest.raises(ValueError, match="needs more than the 4 joints"):
        C.segment_moments(np.zeros((5, 12)), np.array([0]), np.array([5]), sel)
    with pytest.raises(ValueError, match="not d\\(d\\+1\\)/2"):
        L.sym_unvec(np.zeros(4))
    with pytest.raises(ValueError, match="regularization gamma must be a finite number >= 0"):
        C.log_covariance_vectors(random_frames(rng, 5), [0, 5], sel, gamma=-1)


def test_log_vectors_refuses_a_scale_that_is_not_a_finite_factor_per_matrix():
    """A NaN scale failed inside the numba kernel (a SystemError); a wrong shape was broadcast."""
    from streamcov import linalg

    mats = np.stack([2.0 * np.eye(3), np.diag([1.0, 2.0, 3.0])])
    for bad in (np.nan, [1.0, np.inf], [1.0, -1.0], [1.0, 2.0, 3.0]):
        with pytest.raises(ValueError, match=r"scale: expected one finite factor >= 0 per matrix, shape \(2,\)"):
            linalg.log_vectors(mats, 0.1, scale=bad)
    np.testing.assert_allclose(linalg.log_vectors(mats, 0.1, scale=[0.5, 1.0])[0],
                               linalg.log_vectors(mats[:1] * 0.5, 0.1)[0], rtol=1e-12)


def test_bandwidth_conversions_and_the_median_refuse_what_is_not_a_bandwidth():
    """One Gaussian kernel, one bandwidth convention: the conversions are exact inverses on bandwidths and
    refuse 0, negatives and values whose square is 0 or infinite (1/0 and a negative sigma were returned)."""
    import math

    from streamcov.kernels import gamma_from_sigma, median_distance, sigma_from_gamma, sigma_from_paper004

    for sigma in (1e-20, 0.3, 1.0, 7.5, 1e20):
        assert sigma_from_gamma(gamma_from_sigma(sigma)) == pytest.approx(sigma, rel=1e-15)
    assert sigma_from_paper004(2.0) == pytest.approx(math.sqrt(2.0), rel=1e-15)
    for f, bad in ((gamma_from_sigma, 0), (gamma_from_sigma, -1.0), (gamma_from_sigma, 1e-200),
                   (gamma_from_sigma, float("nan")), (sigma_from_gamma, 0), (sigma_from_paper004, -1.0)):
        with pytest.raises(ValueError, match=r"must be a finite number > 0 whose square is a normal float"):
            f(bad)
    # a string or a bool was read by float() as a bandwidth ("2" as 2, True as 1); numpy scalars are numbers
    for bad in ("2", True, None, [1.0]):
        with pytest.raises(ValueError, match=r"^sigma must be a finite number > 0, got "):
            gamma_from_sigma(bad)
    assert gamma_from_sigma(np.float32(2.0)) == gamma_from_sigma(np.array(2.0)) == gamma_from_sigma(2) == 0.125
    D = np.array([[0.0, 1.0, 3.0], [1.0, 0.0, 2.0], [3.0, 2.0, 0.0]])
    assert median_distance(D) == 2.0 and median_distance(np.zeros((3, 3))) == 1.0
    with pytest.raises(ValueError, match="median_distance: the distances hold NaN or infinity"):
        median_distance(np.full((3, 3), np.nan))


def test_sequence_functions_refuse_offsets_that_do_not_tile_the_frames(rng):
    """Each of these gave finite descriptors without a word: a sequence of 0 or 1 frame the constant
    log(gamma I), fractional offsets truncated, frames outside the offsets dropped."""
    F, sel = random_frames(rng, 50), C.JointSelection.hip_relative(20, (6,))
    for fn in (C.log_covariance_vectors, C.sequence_covariances):
        for offsets, msg in (([0, 20, 20, 50], r"^sequence 1 has 0 frame\(s\); its covariance needs at least 2: "
                                               r"leave it out$"),
                             ([0, 20, 21, 50], r"^sequence 1 has 1 frame\(s\); its covariance needs at least 2"),
                             ([0.0, 20.5, 50.0], r"^offsets must be a 1-D array of whole frame indices, got "
                                                 r"\[ 0\.  20\.5 50\. \]$"),
                             ([5, 20, 50], r"^offsets must rise from 0 to the 50 frames \(every frame in one "
                                           r"sequence\), got \[ 5 20 50\]$"),
                             ([0, 20, 40], r"^offsets must rise from 0 to the 50 frames"),
                             ([0, 30, 20, 50], r"^offsets must rise from 0"),
                             ([], r"^offsets must be a 1-D array"),
                             ([[0, 50]], r"^offsets must be a 1-D array")):
            with pytest.raises(ValueError, match=msg):
                fn(F, offsets, sel)
        # whole floats are frame indices; one frame has a covariance of 0 with ddof = 0 too
        np.testing.assert_array_equal(fn(F, np.array([0.0, 20.0, 50.0]), sel), fn(F, [0, 20, 50], sel))
        assert len(fn(F, [0, 20, 22, 50], sel, ddof=0)) == 3
        with pytest.raises(ValueError, match=r"^sequence 1 has 1 frame\(s\); its covariance needs at least 2"):
            fn(F, [0, 20, 21, 50], sel, ddof=0)


def test_matrix_sizes_are_whole_and_stacks_not_empty():
    from streamcov import linalg

    assert [linalg.vec_dim(d) for d in (0, 1, 3, np.int64(4))] == [0, 1, 6, 10]
    for bad in (2.5, -1, True):
        with pytest.raises(ValueError, match=r"vec_dim: expected a matrix size \(an integer >= 0\)"):
            linalg.vec_dim(bad)
    with pytest.raises(ValueError, match=r"matrix: expected a square matrix or a stack \(N, d, d\) with d >= 1, "
                                         r"got shape \(0, 0\)"):
        linalg.spd_logm(np.ones((0, 0)))
    # a stack of no matrices is an empty result (numpy's "cannot reshape array of size 0" before)
    for fn in (linalg.spd_logm, linalg.sym_expm, linalg.spd_sqrtm):
        assert fn(np.empty((0, 3, 3))).shape == (0, 3, 3)
    assert linalg.log_vectors(np.empty((0, 3, 3)), 1e-3).shape == (0, 6)
    assert C.log_covariance_vectors(np.zeros((0, 9)), [0], C.JointSelection.raw(3)).shape == (0, 45)


def test_matrix_functions_refuse_what_float64_cannot_hold_and_complex_input():
    """Complex matrices lost their imaginary parts with a mere warning; an exponential that overflows, and
    matrices (or a gamma) too large for the eigensolver, were returned as inf and NaN; a gamma whose C / gamma
    overflows was a SystemError out of the numba kernel."""
    from streamcov import linalg

    with pytest.raises(ValueError, match="matrix: complex matrices are not supported"):
        linalg.spd_logm(np.eye(3) * (1 + 1j))
    with pytest.raises(ValueError, match=r"matrix 0: its exponential overflows float64 \(an eigenvalue above 709"):
        linalg.sym_expm(1000.0 * np.eye(3))
    huge = np.full((2, 2), 1e308)
    for f in (linalg.spd_logm, linalg.spd_sqrtm):
        with pytest.raises(NotSPDError, match=r"matrix 0 could not be computed in floating point .*largest "
                                              r"1e\+308\) are too large for float64; rescale the data"):
            f(huge)
    with pytest.raises(NotSPDError, match=r"\(NaN or infinity\): the regularization gamma = 1e\+308 is too large for "
                                          r"float64; lower gamma$"):   # once "the the regularization ..."
        linalg.log_vectors(np.eye(3)[None], 1e308)
    for big, gamma in ((np.eye(3), 1e-320), (1e300 * np.eye(3), 1e-10)):
        with pytest.raises(NotSPDError, match=r"matrix 0 could not be computed in floating point: C / gamma "
                                              r"overflows float64 .*\); raise gamma$"):
            linalg.log_vectors(big[None], gamma, relative=True)


def test_log_vectors_checks_gamma_dtype_and_rank():
    """An integer dtype truncated every logarithm; a gamma of None or a string, and ranks that are not whole
    numbers, were TypeErrors or numpy's words, or (1.5, -1) silently taken."""
    from streamcov import linalg

    mats = np.stack([np.eye(9)] * 3)
    for bad in (None, "a", np.array([[0.1]])):
        with pytest.raises(ValueError, match=r"gamma: expected a number or a sequence of numbers"):
            linalg.log_vectors(mats, bad)
    for bad in (int, np.int32, "foo", bool):
        with pytest.raises(ValueError, match=r"dtype: expected a floating type \(np.float64 or np.float32\)"):
            linalg.log_vectors(mats, 0.1, dtype=bad)
    assert linalg.log_vectors(mats, np.float64(0.1), dtype=np.float32).dtype == np.float32
    for bad in ([1, 1, 1.5], [-1, 0, 0], ["a", "b", "c"]):
        with pytest.raises(ValueError, match=r"rank: expected integer bounds >= 0, one per matrix"):
            linalg.log_vectors(mats, 0.1, rank=bad)


def test_log_covariance_vectors_checks_gamma_ddof_and_dtype(rng):
    """A NaN or infinite gamma was a SystemError out of the numba kernel, a string a TypeError of '<'; an
    integer dtype truncated every descriptor; a negative ddof was taken."""
    frames = random_frames(rng, 30, joints=4)
    sel = C.JointSelection.raw(4)
    for bad in (np.nan, np.inf, -1.0):
        with pytest.raises(ValueError, match="regularization gamma must be a finite number >= 0"):
            C.log_covariance_vectors(frames, [0, 30], sel, gamma=bad)
    for bad in ("a", [0.1, 0.2]):
        with pytest.raises(ValueError, match="gamma: expected"):
            C.log_covariance_vectors(frames, [0, 30], sel, gamma=bad)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match=r"ddof: expected an integer >= 0 \(delta degrees of freedom\)"):
            C.log_covariance_vectors(frames, [0, 30], sel, ddof=bad)
    with pytest.raises(ValueError, match=r"dtype: expected a floating type"):
        C.log_covariance_vectors(frames, [0, 30], sel, dtype=int)
    n, _, m2 = C.segment_moments(frames, np.array([0]), np.array([30]), sel)
    with pytest.raises(ValueError, match="regularization gamma must be a finite number >= 0"):
        C.log_vectors_from_moments(n, m2, np.nan, True)


def test_sym_unvec_checks_its_vectors():
    from streamcov import linalg

    for bad in (3.0, np.ones((2, 2, 3))):
        with pytest.raises(ValueError, match=r"vecs: expected a vector \(p,\) or a stack of them \(N, p\)"):
            linalg.sym_unvec(bad)
    with pytest.raises(ValueError, match="vecs 1 contains NaN or inf"):
        linalg.sym_unvec(np.array([[1.0, 0.0, 1.0], [np.nan, 0.0, 1.0]]))
    with pytest.raises(ValueError, match="vecs: complex vectors are not supported"):
        linalg.sym_unvec(np.ones(3) * 1j)


def test_merge_moments_refuses_moments_that_do_not_merge():
    """Moments of other widths were numpy's broadcasting error, a negative count a negative sum of squares."""
    from streamcov import linalg

    with pytest.raises(ValueError, match=r"merge_moments: the two moments have different shapes: mean \(3,\) and "
                                         r"\(4,\), M2 \(3,\) and \(4,\)"):
        linalg.merge_moments((2, np.zeros(3), np.zeros(3)), (2, np.zeros(4), np.zeros(4)))
    with pytest.raises(ValueError, match="merge_moments: counts must be >= 0, got -2 and 3"):
        linalg.merge_moments((-2, np.zeros(3), np.zeros(3)), (3, np.ones(3), np.zeros(3)))


def test_joint_selections_want_whole_joints():
    """int() read centre joint 0.9 as joint 0; a joint count of 0 or -1 made an empty selection."""
    assert C.JointSelection.hip_relative(4, (np.int64(1), 2)).center == (1, 2)
    for bad in ((0.9,), (2.0,), (np.inf,), ("1",), (True,)):
        with pytest.raises(ValueError, match=r"center: expected 0-based joint indices \(integers\)"):
            C.JointSelection.hip_relative(4, bad)
    for bad in (0, -1, 2.5, None):
        with pytest.raises(ValueError, match=r"n_joints: expected an integer >= 1"):
            C.JointSelection.raw(bad)


def test_n_jobs_is_read_as_scikit_learn_reads_it():
    """n_jobs=-1 ran the LAPACK route on one thread, not all of them; "2" and 0 were taken."""
    from streamcov import linalg
    from streamcov._config import _thread_count

    assert _thread_count(-1, 8) == 8 and _thread_count(-2, 8) == 7 and _thread_count(-20, 8) == 1
    assert _thread_count(3, 8) == 3
    mats = np.stack([np.eye(linalg.LANE_MAX_DIM + 1)] * 2)
    np.testing.assert_array_equal(linalg.log_vectors(mats, 0.1, n_jobs=-1), linalg.log_vectors(mats, 0.1, n_jobs=1))
    for bad in (0, "2", 1.5, True):
        for m in (mats, np.stack([np.eye(3)] * 2)):   # the large matrices' route and the small ones'
            with pytest.raises(ValueError, match=r"n_jobs: expected an integer >= 1, or -1 for all threads"):
                linalg.log_vectors(m, 0.1, n_jobs=bad)
    nan = np.stack([np.eye(3)] * 2)
    nan[1, 0, 0] = np.nan
    with pytest.raises(linalg.NotSPDError, match=r"^matrix 1 contains NaN$"):   # unchecked input: not an overflow
        linalg.log_vectors(nan, 0.1, check=False)


def test_degenerate_kernel_names_the_identity_and_the_constant():
    """One test of a kernel matrix an SVM learns nothing from, shared by the exact SVM's bandwidth warning and the
    in-memory image task's grid: every value between two rows below tol (the identity), or within tol of 1 (a
    constant, as is one that is not finite); the diagonal is not looked at."""
    from streamcov.kernels import degenerate_kernel

    n = 5
    assert degenerate_kernel(np.eye(n), 1e-6) == "identity"
    assert degenerate_kernel(np.eye(n) + 1e-7 * (1 - np.eye(n)), 1e-6) == "identity"
    assert degenerate_kernel(np.full((n, n), 1.0 - 1e-7), 1e-6) == "constant"
    assert degenerate_kernel(np.where(np.eye(n) > 0, 1.0, np.nan), 1e-6) == "constant"
    K = np.full((n, n), 0.5)
    assert degenerate_kernel(K, 1e-6) is None and degenerate_kernel(np.ones((1, 1)), 1e-6) is None
    K[0, 1] = K[1, 0] = 1e-7   # one pair apart is not the identity
    assert degenerate_kernel(K, 1e-6) is None
