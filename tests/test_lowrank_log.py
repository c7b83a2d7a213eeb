"""The low-rank log route (``streamcov._kernels.lowrank``) against a dense eigendecomposition.

``log(shift I + scale M) = log(shift) I + L h(L^T L) L^T`` for ``M = L L^T``
holds exactly; the kernel finds L by pivoted Cholesky. Tolerances: 1e-9 on
vectors of unit norm (or entries of size log(1/gamma) ~ 10), about 1e4 eps
times the condition of the regularized matrix (scale * ||M|| / shift <= 1e4
here) -- the accuracy of the dense eigensolver itself.
"""
import functools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import reference as ref
from streamcov import linalg
from streamcov._kernels import lowrank as klr
from streamcov.errors import NotSPDError


def low_rank_psd(rng, n, d, r):
    X = rng.standard_normal((n, d, r)) * rng.uniform(0.1, 3.0, size=(n, 1, r))
    return np.einsum("nik,njk->nij", X, X)


def dense(mats, scale, shift, normalize):
    out = []
    for m, s in zip(mats, scale):
        w, u = np.linalg.eigh(s * m + shift * np.eye(len(m)))
        v = ref.vec((u * np.log(w)) @ u.T)
        out.append(v / np.linalg.norm(v) if normalize else v)
    return np.array(out)


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("r", [0, 1, 3, 9])
def test_kernel_matches_dense_eigendecomposition(rng, r, normalize):
    n, d = 20, 30
    M = low_rank_psd(rng, n, d, r)
    scale = rng.uniform(0.5, 2.0, n)
    out = np.full((n, d * (d + 1) // 2), np.nan)
    done = np.zeros(n, dtype=bool)
    klr.stack_log_vec(M, np.arange(n), scale, 1e-2, normalize, d // 3, out, done)
    assert done.all()
    np.testing.assert_allclose(out, dense(M, scale, 1e-2, normalize), atol=1e-9)


def test_kernel_leaves_higher_ranks_and_unlisted_matrices_alone(rng):
    n, d = 6, 24
    M = np.concatenate([low_rank_psd(rng, 3, d, 4), low_rank_psd(rng, 3, d, 12)])
    out = np.full((n, d * (d + 1) // 2), np.nan)
    done = np.zeros(4, dtype=bool)
    klr.stack_log_vec(M, np.array([0, 2, 3, 5]), np.ones(n), 1e-3, False, 8, out, done)
    assert done.tolist() == [True, True, False, False]        # rank 12 > 8
    assert np.isnan(out[[1, 3, 4, 5]]).all()
    np.testing.assert_allclose(out[[0, 2]], dense(M[[0, 2]], np.ones(2), 1e-3, False), atol=1e-9)


def test_kernel_refuses_indefinite_matrices_with_a_small_diagonal(rng):
    d = 12
    A = np.zeros((2, d, d))
    A[0, 0, 1] = A[0, 1, 0] = 1.0                  # zero diagonal, eigenvalues +-1
    A[1] = low_rank_psd(rng, 1, d, 2)[0]
    A[1, 5, 5] -= 1.0                              # a negative diagonal after the factors
    done = np.ones(2, dtype=bool)
    klr.stack_log_vec(A, np.arange(2), np.ones(2), 1e-3, False, 4, np.empty((2, d * (d + 1) // 2)), done)
    assert not done.any()


@pytest.mark.parametrize("relative", [False, True])
def test_log_vectors_with_rank_equals_the_dense_route(rng, relative):
    d = 40
    M = np.concatenate([low_rank_psd(rng, 7, d, 5), low_rank_psd(rng, 5, d, 30), low_rank_psd(rng, 4, d, d)])
    rank = np.array([5] * 7 + [30] * 5 + [d] * 4)
    gammas = [1e-3, 1e-1]
    got = linalg.log_vectors(M, gammas, relative=relative, rank=rank, normalize=True)
    want = linalg.log_vectors(M, gammas, relative=relative, normalize=True)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=1e-9)


def test_log_vectors_rank_bound_that_is_wrong_falls_back(rng):
    d = 30
    M = low_rank_psd(rng, 5, d, 20)                  # the caller claims rank 2: the factorization sees more
    got = linalg.log_vectors(M, 1e-2, rank=np.full(5, 2))
    np.testing.assert_allclose(got, linalg.log_vectors(M, 1e-2), atol=1e-9)


def test_log_vectors_rank_on_indefinite_input_still_raises(rng):
    d = 12
    M = np.zeros((3, d, d))
    M[1, 0, 1] = M[1, 1, 0] = 1.0
    with pytest.raises(NotSPDError, match=r"matrix 1 is not positive definite .*increase the regularization"):
        linalg.log_vectors(M, 1e-3, rank=np.zeros(3, dtype=int))


def test_log_vectors_rank_shape_is_checked(rng):
    with pytest.raises(ValueError, match=r"rank: expected one bound per matrix, shape \(4,\)"):
        linalg.log_vectors(low_rank_psd(rng, 4, 9, 2), 1e-3, rank=np.ones(3, dtype=int))


@settings(max_examples=40, deadline=None)
@given(r=st.integers(0, 10), d=st.integers(31, 48), logshift=st.floats(-4, 0), seed=st.integers(0, 2**31))
def test_push_through_identity_holds_for_any_rank_and_shift(r, d, logshift, seed):
    # log(shift I + M) = log(shift) I + L h(L^T L) L^T, h(x) = log(1 + x / shift) / x, whatever L
    rng = np.random.default_rng(seed)
    M = low_rank_psd(rng, 1, d, r)
    shift = 10.0 ** logshift
    got = linalg.log_vectors(M, shift, rank=np.array([r]))
    np.testing.assert_allclose(got, dense(M, [1.0], shift, False), atol=1e-9 * max(1.0, np.abs(got).max()))


@functools.lru_cache(maxsize=None)
def _gram_rows_reference():
    """gram_upper as it was first written: one output row at a time, a signed column index (scalar
    code), the same sum per entry; compiled with the same flags, so the two must agree bit for bit."""
    from numba import njit

    from streamcov._config import ORDERED_JIT_OPTS

    @njit(**{**ORDERED_JIT_OPTS, "cache": False})
    def ref(a, m, out, w):
        d = out.shape[0]
        out[:, :] = 0.0
        t = 0
        while t + 4 <= m:
            r0, r1, r2, r3 = a[t], a[t + 1], a[t + 2], a[t + 3]
            for i in range(d):
                x0, x1, x2, x3 = w[t] * r0[i], w[t + 1] * r1[i], w[t + 2] * r2[i], w[t + 3] * r3[i]
                o = out[i]
                for j in range(i, d):
                    o[j] += x0 * r0[j] + x1 * r1[j] + x2 * r2[j] + x3 * r3[j]
            t += 4
        while t < m:
            row = a[t]
            for i in range(d):
                x = w[t] * row[i]
                o = out[i]
                for j in range(i, d):
                    o[j] += x * row[j]
            t += 1
        for i in range(d):
            for j in range(i + 1, d):
                out[j, i] = out[i, j]

    return ref


@settings(max_examples=60, deadline=None)
@given(d=st.integers(1, 70), m=st.integers(0, 23), seed=st.integers(0, 2**31))
def test_gram_upper_blocked_and_vectorized_is_bitwise_the_row_by_row_sum(d, m, seed):
    """Four output rows per sweep and a vectorized column loop change no bit of any entry (the stores
    written before the change stay valid)."""
    from streamcov._kernels.covariance import gram_upper

    rng = np.random.default_rng(seed)
    a = rng.standard_normal((max(m, 1), d)) * 10.0 ** rng.integers(-3, 4, (max(m, 1), 1))
    w = rng.standard_normal(max(m, 1))
    want, got = np.empty((d, d)), np.empty((d, d))
    _gram_rows_reference()(a, m, want, w)
    gram_upper(a, m, got, w)
    assert got.tobytes() == want.tobytes()
    _gram_rows_reference()(a, m, want, np.ones(max(m, 1)))
    gram_upper(a, m, got)
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("m", [0, 1, 3, 4, 9])
def test_gram_upper_matches_numpy_and_is_bitwise_the_same_at_any_alignment(rng, m):
    from streamcov._kernels.covariance import gram_upper

    d = 23
    a = rng.standard_normal((max(m, 1), d))
    w = rng.standard_normal(max(m, 1))
    out = np.empty((d, d))
    gram_upper(a, m, out, w)
    np.testing.assert_allclose(out, (a[:m].T * w[:m]) @ a[:m], atol=1e-12)
    gram_upper(a, m, out)
    np.testing.assert_allclose(out, a[:m].T @ a[:m], atol=1e-12)
    # the same numbers at every offset from a 64-byte boundary give the same bits
    for shift in range(1, 8):
        buf = np.empty(a.size + 8)
        b = buf[shift:shift + a.size].reshape(a.shape)
        b[...] = a
        again = np.empty((d, d))
        gram_upper(b, m, again)
        assert np.array_equal(again, out)
