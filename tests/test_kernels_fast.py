"""The fused frames -> log-covariance-vector kernel against slow references.

``log_covariance_vectors`` runs one fused kernel (scatter GEMM, eigen-
decomposition, log, vec per chunk of sequences); ``segment_moments`` +
``log_vectors_from_moments`` is the two-step path used by the Dask graph.
Both must agree with each other and with scipy's ``logm``.
"""
import numpy as np
import pytest
import scipy.linalg

import reference as ref
from streamcov import covariance as C


def ill_conditioned_frames(rng, t, d=60, top=1e1, bottom=1e-4):
    """Frames whose covariance has eigenvalues spread geometrically over [bottom, top]."""
    q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    z = rng.normal(size=(t, d))
    z = (z - z.mean(0)) / z.std(0, ddof=1)
    return (z * np.sqrt(np.geomspace(top, bottom, d))) @ q.T


def scipy_log_vectors(frames, offsets, gamma, ddof=1):
    out = []
    for a, b in zip(offsets[:-1], offsets[1:]):
        x = frames[a:b] - frames[a:b].mean(0)
        c = x.T @ x / max(b - a - ddof, 1) + gamma * np.eye(frames.shape[1])
        out.append(ref.vec(np.real(scipy.linalg.logm(c))))
    return np.array(out)


def test_fused_matches_scipy_on_ill_conditioned_and_short_sequences(rng):
    # 200 frames: eigenvalues 1e-4..1e1; 30 and 5 frames: T < d, so most
    # eigenvalues equal gamma (a repeated eigenvalue) after regularization.
    frames = np.vstack([ill_conditioned_frames(rng, 200), rng.normal(size=(35, 60))])
    offsets = np.array([0, 200, 230, 235])
    sel = C.JointSelection.raw(20)
    got = C.log_covariance_vectors(frames, offsets, sel, gamma=1e-4, normalize=False)
    want = scipy_log_vectors(frames, offsets, 1e-4)
    # rtol 1e-8 relative to each vector's largest entry: log C has entries
    # near zero where an elementwise relative bound is meaningless.
    scale = np.abs(want).max(axis=1, keepdims=True)
    np.testing.assert_allclose(got / scale, want / scale, rtol=0, atol=1e-8)


@pytest.mark.parametrize("center", [(), (6,), (9, 12)])
@pytest.mark.parametrize("ddof", [0, 1])
def test_fused_equals_two_step_path(rng, center, ddof):
    frames = rng.normal(scale=0.3, size=(150, 60))
    offsets = np.array([0, 3, 70, 70, 150])  # includes an empty and a 3-frame sequence
    sel = C.JointSelection.hip_relative(20, center) if center else C.JointSelection.raw(20)
    fused = C.log_covariance_vectors(frames, offsets, sel, gamma=1e-3, normalize=True, ddof=ddof)
    n, _, m2 = C.segment_moments(frames, offsets[:-1], offsets[1:], sel)
    two_step = C.log_vectors_from_moments(n, m2, 1e-3, True, ddof)
    np.testing.assert_allclose(fused, two_step, rtol=1e-10, atol=1e-12)


def test_fused_many_sequences_spans_several_chunks(rng):
    # More sequences than one chunk per thread, so chunk boundaries are exercised.
    t, n_seq = 12, 101
    frames = rng.normal(size=(t * n_seq, 30))
    offsets = np.arange(n_seq + 1) * t
    sel = C.JointSelection.raw(10)
    got = C.log_covariance_vectors(frames, offsets, sel, gamma=1e-2, normalize=False)
    want = scipy_log_vectors(frames, offsets, 1e-2)
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10)


def test_fused_float32_frames_accumulate_in_float64(rng):
    frames = rng.normal(scale=0.3, size=(80, 60)).astype(np.float32)
    sel = C.JointSelection.raw(20)
    got = C.log_covariance_vectors(frames, [0, 80], sel, gamma=1e-3, normalize=False)
    want = scipy_log_vectors(frames.astype(np.float64), [0, 80], 1e-3)
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10)


def test_fused_not_spd_names_the_sequence(rng):
    frames = rng.normal(size=(70, 60))
    sel = C.JointSelection.raw(20)
    with pytest.raises(C.NotSPDError, match=r"sequence 1 \(4 frames, 60 dims\).*increase the regularization"):
        C.log_covariance_vectors(frames, [0, 66, 70], sel, gamma=0.0)


def test_fused_rejects_negative_gamma_and_bad_segments(rng):
    frames = rng.normal(size=(10, 60))
    sel = C.JointSelection.raw(20)
    with pytest.raises(ValueError, match="gamma must be >= 0"):
        C.log_covariance_vectors(frames, [0, 10], sel, gamma=-1.0)
    with pytest.raises(ValueError, match=r"segments must lie within 0..10"):
        C.log_covariance_vectors(frames, [0, 11], sel)
    with pytest.raises(ValueError, match="joint selection needs more than the 20 joints"):
        C.log_covariance_vectors(frames, [0, 10], C.JointSelection.raw(21))
