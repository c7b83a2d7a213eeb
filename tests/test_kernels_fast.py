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
from streamcov.descriptors import skeleton as C
from streamcov.errors import NotSPDError


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
    offsets = np.array([0, 3, 70, 150])  # includes a 3-frame sequence (an empty one is refused: test_covariance)
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
    with pytest.raises(NotSPDError, match=r"sequence 1 \(4 frames, 60 dims\).*increase the regularization"):
        C.log_covariance_vectors(frames, [0, 66, 70], sel, gamma=0.0)


def test_fused_rejects_negative_gamma_and_bad_segments(rng):
    frames = rng.normal(size=(10, 60))
    sel = C.JointSelection.raw(20)
    with pytest.raises(ValueError, match="regularization gamma must be a finite number >= 0"):
        C.log_covariance_vectors(frames, [0, 10], sel, gamma=-1.0)
    with pytest.raises(ValueError, match=r"offsets must rise from 0 to the 10 frames"):
        C.log_covariance_vectors(frames, [0, 11], sel)
    with pytest.raises(ValueError, match="joint selection needs more than the 20 joints"):
        C.log_covariance_vectors(frames, [0, 10], C.JointSelection.raw(21))


# --- the lane eigensolver behind the matrix-function kernels (streamcov._kernels.symeig)

from streamcov._kernels import spd as _ks  # noqa: E402
from streamcov._kernels import symeig as _se  # noqa: E402


def kernel_log_vectors(mats):
    """vec(log C) and smallest eigenvalues through the production kernel
    ``stack_vec`` (scale 1, shift 0: C is used as given)."""
    mats = np.ascontiguousarray(mats, dtype=np.float64)
    d = mats.shape[1]
    out = np.empty((len(mats), d * (d + 1) // 2))
    min_eig = np.empty(len(mats))
    _ks.stack_vec(mats, np.ones(len(mats)), 0.0, 0, False, out, min_eig)
    return out, min_eig


def random_spd(rng, d, cond):
    q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    w = np.geomspace(1.0, 1.0 / cond, d) * rng.uniform(0.5, 2.0)
    c = (q * w) @ q.T
    return (c + c.T) / 2


def rank_deficient(rng, d, rank, gamma=1e-4):
    """Covariance of rank < d plus gamma I: eigenvalue gamma repeated d - rank times."""
    x = rng.normal(size=(rank + 1, d))
    x -= x.mean(0)
    return x.T @ x / rank + gamma * np.eye(d)


def assert_log_vectors_close(got, mats, rtol=1e-8):
    want = np.array([ref.vec(ref.logm(m)) for m in mats])
    scale = np.abs(want).max(axis=1, keepdims=True)
    scale[scale == 0] = 1.0                     # log I = 0
    np.testing.assert_allclose(got / scale, want / scale, rtol=0, atol=rtol)


@pytest.mark.parametrize("d", [1, 2, 3, 6, 57, 60, 75])
def test_lanes_log_matches_scipy_up_to_condition_1e8(rng, d):
    # 11 matrices: one full group of LANES and a partial one
    mats = [random_spd(rng, d, cond) for cond in (1.0, 10.0, 1e3, 1e5, 1e6, 1e7, 1e8, 1e8)]
    mats += [rank_deficient(rng, d, max(1, d // r)) for r in (2, 3, 10)]
    mats = np.array(mats)
    got, min_eig = kernel_log_vectors(mats)
    assert_log_vectors_close(got, mats)
    np.testing.assert_allclose(min_eig, np.linalg.eigvalsh(mats)[:, 0], rtol=1e-6)


@pytest.mark.parametrize("d", [3, 15, 60])
def test_lanes_log_of_expm_is_identity(rng, d):
    s = rng.normal(size=(9, d, d))
    s = (s + s.transpose(0, 2, 1)) / 2
    s *= 4.0 / np.abs(np.linalg.eigvalsh(s)).max(axis=1)[:, None, None]
    got, _ = kernel_log_vectors(np.array([scipy.linalg.expm(x) for x in s]))
    want = np.array([ref.vec(x) for x in s])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * np.abs(want).max())


def test_lanes_repeated_and_exactly_split_eigenvalues(rng):
    d = 60
    q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    blocks = np.repeat([5.0, 1.0, 1e-4], [3, 7, 50])
    mats = [
        (q * blocks) @ q.T,                             # three repeated eigenvalues
        np.eye(d),                                      # already diagonal
        np.diag(rng.uniform(0.1, 2.0, d)),              # diagonal, distinct
        1e-4 * np.eye(d) + np.outer(q[0], q[0]),        # gamma I + rank one
        rank_deficient(rng, d, 4),                      # T < d frames
        rank_deficient(rng, d, 1, gamma=1e-2),
        np.full((d, d), 0.5) + 0.5 * np.eye(d),         # exact structure: J/2 + I/2
        np.diag(np.r_[np.ones(30), 2.0 * np.ones(30)]),
    ]
    mats = np.array([(m + m.T) / 2 for m in mats])
    got, min_eig = kernel_log_vectors(mats)
    assert_log_vectors_close(got, mats)
    np.testing.assert_allclose(min_eig, np.linalg.eigvalsh(mats)[:, 0], rtol=1e-8)


def test_lanes_not_spd_gives_nan_and_smallest_eigenvalue(rng):
    d = 20
    good = [random_spd(rng, d, 1e3) for _ in range(9)]
    indefinite = random_spd(rng, d, 1e3) - 0.01 * np.eye(d)   # smallest eigenvalue < 0
    singular = rank_deficient(rng, d, 5, gamma=0.0)            # smallest eigenvalue ~ 0
    zero = np.zeros((d, d))                                    # handed back to LAPACK
    mats = np.array(good[:3] + [indefinite] + good[3:7] + [zero, singular] + good[7:])
    got, min_eig = kernel_log_vectors(mats)
    bad = np.array([3, 8, 9])
    ok = np.setdiff1d(np.arange(len(mats)), bad)
    assert np.isnan(got[[3, 8]]).all()
    assert min_eig[3] < 0 and min_eig[8] == 0.0
    np.testing.assert_allclose(min_eig[3], np.linalg.eigvalsh(mats[3])[0], rtol=1e-10)
    # singular up to rounding: NaN exactly when the reported eigenvalue is <= 0
    assert abs(min_eig[9]) < 1e-12
    assert np.isnan(got[9]).all() == (min_eig[9] <= 0)
    assert np.isfinite(got[ok]).all()
    assert_log_vectors_close(got[ok], mats[ok])


def test_lanes_agree_with_lapack_path_on_covariances(rng):
    d, t = 60, 64
    x = np.cumsum(rng.normal(scale=0.05, size=(21, t, d)), axis=1)
    x -= x.mean(axis=1, keepdims=True)
    mats = np.matmul(x.transpose(0, 2, 1), x) / (t - 1) + 1e-4 * np.eye(d)
    got, min_eig = kernel_log_vectors(mats)
    want = np.empty_like(got)
    ul, lg = np.empty((d, d)), np.empty((d, d))
    want_min = []
    for m, o in zip(mats, want):
        want_min.append(_ks._recon_one(m.copy(), 0, ul, lg))
        _ks._vec_into(lg, False, o)
    want_min = np.array(want_min)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-11 * np.abs(want).max())
    np.testing.assert_allclose(min_eig, want_min, rtol=1e-9)


@pytest.mark.parametrize("d", [1, 2, 3, 9, 60])
@pytest.mark.parametrize("count", [1, 5, 8])
def test_eig_lanes_is_an_orthogonal_eigendecomposition(rng, d, count):
    mats = np.array([random_spd(rng, d, 1e4) - 0.3 * np.eye(d) for _ in range(count)])
    before = mats.copy()
    ws = _se.lanes_workspace(d)
    _se.eig_lanes(mats, count, ws)
    z, w, status = ws[1], ws[2], ws[8]
    np.testing.assert_array_equal(mats, before)          # input untouched
    for q in range(count):
        assert status[q] == 1
        u = z[q, :, :d]
        np.testing.assert_allclose(u @ u.T, np.eye(d), atol=1e-13 * d)
        np.testing.assert_allclose(u.T @ (w[:d, q, None] * u), mats[q], atol=1e-14 * d)
        np.testing.assert_allclose(np.sort(w[:d, q]), np.linalg.eigvalsh(mats[q]), atol=1e-14 * d)
        np.testing.assert_array_equal(z[q, :, d:], 0.0)   # padding columns stay zero


@pytest.mark.parametrize("d", [9, 57, 120])
def test_a_matrix_log_is_the_same_bits_whatever_matrices_share_its_lanes(rng, d):
    """The lane eigensolver folded every lane's fast-Givens row scales into its vectors whenever any lane needed
    it (or the sweep log was full): a matrix's log depended in its last bits (up to 9e-16 at d = 57) on the 7
    others of its group, so a descriptor changed with dask.block_size or with the other rows of a store. A lane
    is now folded on its own scales only: the same bits alone, in any group, in any order. Lanes of unlike
    matrices (a diagonal one, needing no sweep; an ill-conditioned one) beside the others."""
    from streamcov import linalg

    n = 16
    a = rng.normal(size=(n, d, 3 * d))
    mats = a @ a.transpose(0, 2, 1) / (3 * d) + 1e-3 * np.eye(d)
    mats[5] = np.diag(rng.uniform(0.5, 2.0, size=d))
    mats[6] = random_spd(rng, d, 1e8)
    full = linalg.spd_logm(mats)
    for i in range(n):
        np.testing.assert_array_equal(linalg.spd_logm(mats[[i]])[0], full[i])
    np.testing.assert_array_equal(linalg.spd_logm(mats[3:11]), full[3:11])
    np.testing.assert_array_equal(linalg.spd_logm(mats[::-1]), full[::-1])
    np.testing.assert_allclose(full[0], scipy.linalg.logm(mats[0]).real, atol=1e-12)


def test_tql_lanes_gives_up_per_lane(rng):
    """A lane that needs more sweeps than allowed is reported; the others
    (here diagonal ones, which need none) are unaffected."""
    n = 12
    ws = _se.lanes_workspace(n)
    _a, z, d, e, dl, st, mq, it, status, _v, _sc, _us, slog, flog = ws
    diag = rng.uniform(1.0, 2.0, size=(n, _se.LANES))
    d[:] = diag
    e[:] = 0.0
    e[: n - 1, 1::2] = rng.uniform(0.1, 1.0, size=(n - 1, _se.LANES // 2))
    z[:] = 0.0
    for q in range(_se.LANES):
        z[q, :, :n] = np.eye(n)
    _se.tql_lanes(d, e, dl, z, n, 0, st, mq, it, status, slog, flog)
    np.testing.assert_array_equal(status[0::2], 1)
    np.testing.assert_array_equal(status[1::2], -1)
    np.testing.assert_array_equal(d[:, 0::2], diag[:, 0::2])


# a fresh process: the log vectors of three SPD matrices (the digest of their bytes), and how many of streamcov's
# kernels it loaded from numba's cache and compiled
CACHE_CHILD = """
import hashlib, importlib, json, pkgutil
import numba, numpy as np
import streamcov._kernels
from streamcov import linalg
v = linalg.log_vectors(np.stack([np.diag([1.0, 2.0, 3.0, 4.0])] * 3), 0.1)
hits = misses = 0
for mod in pkgutil.iter_modules(streamcov._kernels.__path__):
    for obj in vars(importlib.import_module("streamcov._kernels." + mod.name)).values():
        if isinstance(obj, numba.core.dispatcher.Dispatcher):
            hits += sum(obj.stats.cache_hits.values())
            misses += sum(obj.stats.cache_misses.values())
print(json.dumps({"digest": hashlib.sha256(v.tobytes()).hexdigest(), "hits": hits, "misses": misses}))
"""


def test_kernels_load_from_numba_cache_in_another_process():
    """A cached kernel calling a parallel one crashed (a segmentation fault) when another process loaded it from
    numba's cache, with numba 0.61-0.62 (the declared floor is 0.61). This process compiles the kernels (or
    loads them, as another test process wrote them), which puts them in numba's cache; a fresh process then
    loads them from it, compiling none, and gives the same bits. (Not a cache of its own, which cost a cold
    compile of the eigensolver chain in one more process.)"""
    import hashlib
    import json
    import subprocess
    import sys

    from streamcov import linalg

    v = linalg.log_vectors(np.stack([np.diag([1.0, 2.0, 3.0, 4.0])] * 3), 0.1)
    run = subprocess.run([sys.executable, "-X", "faulthandler", "-c", CACHE_CHILD], capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    child = json.loads(run.stdout.splitlines()[-1])
    assert child["digest"] == hashlib.sha256(v.tobytes()).hexdigest()
    assert child["hits"] > 0 and child["misses"] == 0, child   # loaded from the cache, nothing compiled again


STAMP_CHILD = """
import json, numpy as np
from streamcov._kernels import spd
c, ul, lg = np.diag([1.0, 2.0, 3.0]), np.empty((3, 3)), np.empty((3, 3))
spd._recon_one(c, 0, ul, lg)
print(json.dumps({"hits": sum(spd._recon_one.stats.cache_hits.values()),
                  "misses": sum(spd._recon_one.stats.cache_misses.values()), "log": lg.tolist()}))
"""


def test_a_kernel_is_compiled_again_when_a_file_it_calls_changes(tmp_path):
    """numba stamps a kernel's cache with the kernel's own file only: spd._recon_one, which calls
    covariance.gram_upper, kept its old machine code after covariance.py changed (a `git pull` of an editable
    install, the README's), and ran the old code without a word. Its cache is now stamped with every kernel
    module: loaded while nothing changed, compiled again once another kernel file has (its time touched here,
    in a copy of the package with a cache of its own)."""
    import json
    import os
    import shutil
    import subprocess
    import sys

    from conftest import REPO

    shutil.copytree(REPO / "streamcov", tmp_path / "pkg" / "streamcov",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "pkg"), "NUMBA_CACHE_DIR": str(tmp_path / "cache")}

    def child():
        run = subprocess.run([sys.executable, "-c", STAMP_CHILD], capture_output=True, text=True, timeout=600,
                             env=env, cwd=tmp_path)
        assert run.returncode == 0, run.stderr[-3000:]
        return json.loads(run.stdout.splitlines()[-1])

    first = child()
    assert first["misses"] == 1 and first["hits"] == 0, first
    np.testing.assert_allclose(np.diag(first["log"]), np.log([1.0, 2.0, 3.0]), rtol=1e-14)
    assert child()["hits"] == 1   # nothing changed: loaded from the cache
    callee = tmp_path / "pkg" / "streamcov" / "_kernels" / "covariance.py"
    st = callee.stat()
    os.utime(callee, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    again = child()
    assert again["misses"] == 1 and again["hits"] == 0, again   # compiled again: a file it calls changed
    assert child()["hits"] == 1
