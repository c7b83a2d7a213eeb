"""Kernelized covariance (Cavazza et al., ICPR 2016), of standardized and of raw series, and relative
positions of joint pairs: the kernels against the raw-series references, their identities, streamed ==
in-memory reference across chunk boundaries (constant coordinates included), validation, settings and
fingerprints."""
import numpy as np
import pytest

import reference as ref
from conftest import predictions
from streamcov.data.readers import SkeletonSequence
from streamcov.data.skeletons import ingest
from streamcov.descriptors import skeleton as sk
from streamcov.errors import ConfigError
from streamcov.stream.skeleton import SkeletonDescriptor, descriptor_array, skeleton_source
from test_descriptor_options import J, ROLES, ListSource, sequences, walk


def windows_with_constants(rng, n, d, constant=(2, 5)):
    W = rng.standard_normal((n, d)) @ rng.standard_normal((d, d))      # correlated series
    for c in constant:
        W[:, c] = 1.7 + c
    return W


@pytest.mark.parametrize("ddof", [0, 1])
@pytest.mark.parametrize("sigma", [0.3, 1.0, 4.0])
def test_rbf_gram_matches_raw_series_reference(rng, ddof, sigma):
    for n in (2, 3, 7, 40):
        W = windows_with_constants(rng, n, 8)
        C = np.cov(W.T, ddof=ddof)
        want = ref.kernelized_covariance(W, sigma, ddof=ddof)
        np.testing.assert_allclose(sk.rbf_gram_from_covariances(C, sigma), want, atol=1e-12)


def test_rbf_gram_identities(rng):
    W = windows_with_constants(rng, 30, 9)
    C = np.cov(W.T)
    sd = np.sqrt(np.diag(C))
    live = sd ** 2 > sk.CONSTANT_RTOL * sd.max() ** 2          # np.cov leaves round-off on the constant columns
    assert live.sum() == 7
    rho = np.zeros_like(C)
    rho[np.ix_(live, live)] = C[np.ix_(live, live)] / np.outer(sd[live], sd[live])
    v = live.astype(float)
    delta = v[:, None] + v[None, :] - 2 * rho
    for sigma in (0.5, 1.0, 2.0):
        K = sk.rbf_gram_from_covariances(C, sigma)
        assert np.array_equal(np.diag(K), np.ones(9))                   # K_ii = 1
        assert np.array_equal(K, K.T)
        assert (K > 0).all() and (K <= 1).all()
        assert np.linalg.eigvalsh(K).min() > -1e-12                      # a Gaussian Gram matrix is PSD
        np.testing.assert_allclose(K, np.exp(-delta / (2 * sigma ** 2)), atol=1e-14)
        # a constant coordinate (standardized series 0) is at distance 1 from every live one ...
        np.testing.assert_allclose(K[2, live], np.exp(-1 / (2 * sigma ** 2)), rtol=1e-14)
        assert K[2, 5] == 1.0                                            # ... and 0 from another constant
    # sigma -> infinity: K = 1 - x + O(x^2), x = delta / (2 sigma^2); |remainder| <= x^2 / 2 (alternating
    # series of exp(-x), x >= 0), and delta <= 4 bounds it by 8 / sigma^4
    for sigma in (10.0, 100.0):
        K = sk.rbf_gram_from_covariances(C, sigma)
        x = delta / (2 * sigma ** 2)
        assert np.abs(K - (1 - x)).max() <= (x ** 2 / 2).max() + 1e-15
    # invariant to each coordinate's scale and offset (it sees correlations only)
    D = np.diag(rng.uniform(0.1, 10, 9))
    np.testing.assert_allclose(sk.rbf_gram_from_covariances(D @ C @ D, 1.0), sk.rbf_gram_from_covariances(C, 1.0),
                               atol=1e-13)
    # a stack, and a window of one frame (no variance at all: every series is 0, K = 1)
    stack = sk.rbf_gram_from_covariances(np.stack([C, np.zeros_like(C)]), 1.0)
    np.testing.assert_array_equal(stack[1], np.ones((9, 9)))


@pytest.mark.parametrize("ddof", [0, 1])
@pytest.mark.parametrize("sigma", [0.3, 1.0, 4.0])
def test_raw_rbf_gram_matches_raw_series_reference(rng, ddof, sigma):
    for n in (1, 2, 3, 7, 40):
        W = windows_with_constants(rng, n, 8) * rng.uniform(0.1, 2.0, 8) + rng.standard_normal(8)
        C = np.cov(W.T, ddof=ddof).reshape(8, 8) if n > ddof else np.zeros((8, 8))
        want = ref.raw_kernelized_covariance(W, sigma, ddof=ddof)
        np.testing.assert_allclose(sk.rbf_gram_from_moments(C, W.mean(axis=0), sigma), want, atol=1e-12)


def test_raw_rbf_gram_identities(rng):
    W = windows_with_constants(rng, 30, 9) * rng.uniform(0.1, 3.0, 9) + rng.standard_normal(9)
    C, mu = np.cov(W.T, ddof=0), W.mean(axis=0)
    for sigma in (0.5, 1.0, 2.0):
        K = sk.rbf_gram_from_moments(C, mu, sigma)
        assert np.array_equal(np.diag(K), np.ones(9)) and np.array_equal(K, K.T)
        assert (K > 0).all() and (K <= 1).all()
        assert np.linalg.eigvalsh(K).min() > -1e-12                      # a Gaussian Gram matrix is PSD
        # with ddof = 0 the distance is the mean over the frames of (x_i - x_j)^2
        delta = ((W[:, :, None] - W[:, None, :]) ** 2).mean(axis=0)
        np.testing.assert_allclose(K, np.exp(-delta / (2 * sigma ** 2)), rtol=1e-12)
    # one offset added to every series moves no distance; a scale of one coordinate does (unlike "rbf")
    np.testing.assert_allclose(sk.rbf_gram_from_moments(C, mu + 3.7, 1.0), sk.rbf_gram_from_moments(C, mu, 1.0),
                               atol=1e-12)
    D = np.diag(np.r_[2.0, np.ones(8)])
    scaled, K = sk.rbf_gram_from_moments(D @ C @ D, D @ mu, 1.0), sk.rbf_gram_from_moments(C, mu, 1.0)
    assert not np.allclose(scaled[0, 1:], K[0, 1:], rtol=1e-3, atol=0)
    np.testing.assert_array_equal(scaled[1:, 1:], K[1:, 1:])
    # a stack; series that are one constant (no variance, equal means) are at distance 0: K = 1
    stack = sk.rbf_gram_from_moments(np.stack([C, np.zeros_like(C)]), np.stack([mu, np.full(9, 0.4)]), 1.0)
    np.testing.assert_allclose(stack[0], sk.rbf_gram_from_moments(C, mu, 1.0), atol=0)
    np.testing.assert_array_equal(stack[1], np.ones((9, 9)))


def test_raw_rbf_gram_errors():
    with pytest.raises(ValueError, match="kernel_sigma must be a finite number > 0 whose square is a normal "
                                         "float, got -2"):
        sk.rbf_gram_from_moments(np.eye(3), np.zeros(3), -2)
    with pytest.raises(ValueError, match=r"mean must have shape \(3,\) to match the covariances, got \(4,\)"):
        sk.rbf_gram_from_moments(np.eye(3), np.zeros(4), 1.0)
    with pytest.raises(ValueError, match=r"mean must have shape \(2, 3\) to match the covariances, got \(3,\)"):
        sk.rbf_gram_from_moments(np.stack([np.eye(3)] * 2), np.zeros(3), 1.0)
    with pytest.raises(ValueError, match="mean holds NaN or infinite values"):
        sk.rbf_gram_from_moments(np.eye(3), np.array([0.0, np.inf, 1.0]), 1.0)
    with pytest.raises(ValueError, match="mean: complex values are not supported"):
        sk.rbf_gram_from_moments(np.eye(3), np.zeros(3) + 1j, 1.0)
    with pytest.raises(ValueError, match="covariance 0 contains NaN or inf"):
        sk.rbf_gram_from_moments(np.full((3, 3), np.nan), np.zeros(3), 1.0)


def test_rbf_gram_errors():
    with pytest.raises(ValueError, match="kernel_sigma must be a finite number > 0 whose square is a normal "
                                         "float, got 0"):
        sk.rbf_gram_from_covariances(np.eye(3), 0)
    with pytest.raises(ValueError, match="kernel_sigma must be a finite number > 0, got '1'"):
        sk.rbf_gram_from_covariances(np.eye(3), "1")
    with pytest.raises(ValueError, match=r"covariance: expected a square matrix or a stack \(N, d, d\) with d >= 1, "
                                         r"got shape \(2, 3\)"):
        sk.rbf_gram_from_covariances(np.ones((2, 3)), 1.0)
    with pytest.raises(ValueError, match="covariance 0 contains NaN or inf"):
        sk.rbf_gram_from_covariances(np.full((3, 3), np.nan), 1.0)


def with_fixed_joint(rng, T, joint=4):
    """A walk whose ``joint`` keeps a fixed offset from the hip centre (joint 0): its hip-relative
    coordinates and their velocities are constant. Multiples of 1/1024: the store's float32 holds them
    exactly, so the joint is as constant there as in the reference (standardization would blow float32
    round-off of a near-constant coordinate up to unit variance)."""
    X = np.round(walk(rng, T).astype(np.float64) * 1024) / 1024
    X[:, 3 * joint:3 * joint + 3] = X[:, 0:3] + np.array([0.125, -0.25, 0.5])
    return X.astype(np.float32)


OPTION_SETS = [
    dict(features=("positions", "velocities"), matrix="rbf", kernel_sigma=1.0),
    dict(features=("positions", "velocities"), levels=3, overlap=True, body_frame="yaw", scale="body",
         matrix="rbf", kernel_sigma=0.5, gamma=1e-3),
    dict(features=("positions", "velocities"), levels=2, overlap=True, body_frame="yaw", scale="body",
         mean_weight=0.3, gamma=1e-3, pairs=((1, 2), ("j5", 3), ("neck", "right_hip"))),
    dict(features=("velocities",), levels=2, pairs=((5, 4),), matrix="rbf", kernel_sigma=2.0),
    dict(features=("positions", "velocities"), levels=3, overlap=True, body_frame="yaw", scale="body",
         matrix="rbf-raw", kernel_sigma=0.7, gamma=1e-2),
    dict(features=("positions", "velocities"), levels=2, overlap=True, matrix="rbf-raw", kernel_sigma=0.7,
         gamma=1e-2, ddof=0),   # the raw series' variances divided by n
]


@pytest.mark.parametrize("options", OPTION_SETS)
def test_streamed_kcov_and_pairs_equal_in_memory_reference(tmp_path, rng, options):
    """Chunks of 4 frames: most sequences (and windows) are cut by chunk boundaries; joint 4 of
    every other sequence is fixed to the hip (constant coordinates)."""
    lengths = [2, 3, 4, 7, 12, 30, 9, 5, 17, 2, 6]
    seqs = [SkeletonSequence(id=f"s{i:03d}", frames=with_fixed_joint(rng, T) if i % 2 else walk(rng, T),
                             label=f"c{i % 3}", subject=i % 4 + 1) for i, T in enumerate(lengths)]
    store = ingest(ListSource(seqs, ROLES), tmp_path / "s.zarr", chunk_frames=4)
    ddof = options.get("ddof", 1)
    source = skeleton_source(store, "store", options.pop("gamma", 1e-4), True, **options)
    desc, plan = source.descriptor, source.plan
    assert plan.ddof == ddof
    names = {f"j{i}": i for i in range(J)}
    pairs = [tuple(names.get(j, ROLES.get(j, [j])[0]) if isinstance(j, str) else j for j in p) for p in desc.pairs]
    assert plan.pairs == tuple(pairs)
    V = descriptor_array(source, block=3).compute()
    want = np.stack([ref.pyramid_descriptor(
        np.asarray(s.frames, dtype=np.float64), J, (0,), list(range(1, J)), features=desc.features,
        window=desc.window, time=desc.time, levels=desc.levels, overlap=desc.overlap,
        yaw=(ROLES["left_hip"], ROLES["right_hip"]) if desc.body_frame == "yaw" else None,
        neck=ROLES["neck"] if desc.scale == "body" else None, mean_weight=desc.mean_weight, gamma=desc.gamma,
        pairs=pairs, matrix=desc.matrix, kernel_sigma=desc.kernel_sigma, ddof=ddof) for s in seqs])
    assert V.shape == (len(seqs), source.dim) == want.shape
    np.testing.assert_allclose(V, want, atol=1e-8)
    frames, offsets = sk.pack_sequences([s.frames for s in seqs])
    np.testing.assert_allclose(sk.pyramid_vectors(frames, offsets, plan), V, atol=1e-8)


def test_kcov_ignores_ddof_and_body_scale(rng):
    """The kernelized covariance is a function of each window's correlation matrix, which neither the
    denominator of the covariance nor one scale factor per sequence changes: the identity behind the
    config's refusal of descriptor.ddof = 0 and scale = "body" with matrix = "rbf" (tests/test_bad_input.py).
    Round-off only (atol 1e-10: the body size rescales the moments before the correlation is formed)."""
    seqs = [walk(rng, T) for T in (9, 14, 30)]
    frames, offsets = sk.pack_sequences(seqs)

    def vectors(matrix="rbf", **kw):
        plan = sk.PyramidPlan(selection=sk.JointSelection.hip_relative(J, (0,)), features=("positions",),
                              levels=2, overlap=True, matrix=matrix, **kw)
        return sk.pyramid_vectors(frames, offsets, plan)

    # the covariance itself does depend on both (the identity below is not a test that cannot fail)
    assert not np.allclose(vectors("covariance", ddof=0), vectors("covariance"), atol=1e-6)
    assert not np.allclose(vectors("covariance", scale="body", neck=tuple(ROLES["neck"])), vectors("covariance"),
                           atol=1e-6)

    base = vectors(kernel_sigma=0.5)
    assert np.isfinite(base).all() and base.shape == (3, 4 * sk.vec_dim(3 * (J - 1)))   # 1 + 3 windows
    np.testing.assert_allclose(vectors(kernel_sigma=0.5, ddof=0), base, atol=1e-10)
    body = vectors(kernel_sigma=0.5, scale="body", neck=tuple(ROLES["neck"]))
    np.testing.assert_allclose(body, base, atol=1e-10)
    # the raw series ("rbf-raw") keep both, which the config therefore reads with it
    raw = vectors("rbf-raw", kernel_sigma=0.5)
    assert np.isfinite(raw).all() and raw.shape == base.shape and not np.allclose(raw, base, atol=1e-6)
    assert not np.allclose(vectors("rbf-raw", kernel_sigma=0.5, ddof=0), raw, atol=1e-6)
    assert not np.allclose(vectors("rbf-raw", kernel_sigma=0.5, scale="body", neck=tuple(ROLES["neck"])), raw,
                           atol=1e-6)


def test_pair_features_kernel_matches_numpy(rng):
    X = rng.standard_normal((11, 3 * J))
    plan = sk.PyramidPlan(selection=sk.JointSelection.hip_relative(J, (0,)), features=("positions", "velocities"),
                          pairs=((1, 2), (5, 0)))
    F = sk.piece_features(X, 0, 0, 11, 11, plan)
    assert F.shape == (11, plan.frame_dim) == (11, 2 * 15 + 6)
    P = X.reshape(11, J, 3)
    np.testing.assert_allclose(F[:, 30:], np.concatenate([P[:, 1] - P[:, 2], P[:, 5] - P[:, 0]], axis=1),
                               atol=1e-14)
    np.testing.assert_allclose(F[:, :15], ref.hip_relative(X, J, (0,)), atol=1e-14)


def test_descriptor_errors():
    with pytest.raises(ValueError, match="matrix must be one of covariance, rbf, rbf-raw, got 'kernel'"):
        SkeletonDescriptor((0,), matrix="kernel")
    with pytest.raises(ValueError, match="kernel_sigma must be a finite number > 0 whose square is a normal float, "
                                         "got -1"):
        SkeletonDescriptor((0,), matrix="rbf", kernel_sigma=-1.0)
    # numpy scalars are numbers (they were refused); a bandwidth whose square is 0 is not (1e-160 passed here and
    # failed later naming "sigma"), in the descriptor and in the plan
    assert SkeletonDescriptor((0,), matrix="rbf", kernel_sigma=np.float32(2.0)).kernel_sigma == 2.0
    with pytest.raises(ValueError, match=r"^kernel_sigma must be a finite number > 0 whose square is a normal float, "
                                         r"got 1e-160$"):
        SkeletonDescriptor((0,), matrix="rbf", kernel_sigma=1e-160)
    with pytest.raises(ValueError, match=r"^kernel_sigma must be a finite number > 0 whose square is a normal float, "
                                         r"got 1e-160$"):
        sk.PyramidPlan(selection=sk.JointSelection.raw(3), matrix="rbf-raw", kernel_sigma=1e-160)
    for matrix in ("rbf", "rbf-raw"):
        with pytest.raises(ValueError, match=f"matrix = '{matrix}' is a Gram matrix between coordinate series, "
                                             r"which has no mean embedding .* set mean_weight = 0"):
            SkeletonDescriptor((0,), matrix=matrix, mean_weight=0.3)
    with pytest.raises(ValueError, match=r"pairs: \[3, 3\] pairs a joint with itself"):
        SkeletonDescriptor((0,), pairs=((3, 3),))
    with pytest.raises(ValueError, match="pairs must be \\[a, b\\] pairs"):
        SkeletonDescriptor((0,), pairs=((1, 2, 3),))
    with pytest.raises(ValueError, match="pairs names a pair twice"):
        SkeletonDescriptor((0,), pairs=((1, 2), (1, 2)))
    for matrix in ("rbf", "rbf-raw"):
        with pytest.raises(ValueError, match=f"matrix = '{matrix}' .* no mean embedding"):
            sk.PyramidPlan(selection=sk.JointSelection.raw(3), matrix=matrix, mean_weight=0.5)


def test_pairs_resolved_against_the_store(tmp_path, rng):
    store = ingest(ListSource(sequences(rng, [5, 6]), ROLES), tmp_path / "s.zarr", chunk_frames=4)
    with pytest.raises(ConfigError, match=r"descriptor.pairs = \[\[1, 9\]\]: joint 9 outside 0..5 \(the store has 6"):
        skeleton_source(store, "store", pairs=[[1, 9]])
    with pytest.raises(ConfigError, match=r'descriptor.pairs = \[\["left_hand", 2\]\]: "left_hand" is neither a '
                                          r"joint name of the store \(j0, j1, .*\) nor a role of one joint"):
        skeleton_source(store, "store", pairs=[["left_hand", 2]])
    with pytest.raises(ConfigError, match=r'descriptor.pairs: \["j1", 1\] names joint 1 twice'):
        skeleton_source(store, "store", pairs=[["j1", 1]])
    src = skeleton_source(store, "store", pairs=[["j1", "neck"]])
    assert src.plan.pairs == ((1, 3),) and src.plan.frame_dim == 15 + 3


def test_settings_and_fingerprints(tmp_path, rng):
    """Every setting of the new options is in the descriptor's settings (and so in the fingerprints of
    feature stores and models); a descriptor that does not use them keeps the settings it had."""
    from streamcov.stream.skeleton import SkeletonSource

    store = ingest(ListSource(sequences(rng, [5, 9]), ROLES), tmp_path / "s.zarr", chunk_frames=4)
    base = dict(features=["positions", "velocities"], levels=2, overlap=True)
    old = skeleton_source(store, "store", 1e-3, True, **base)
    assert not {"pairs", "matrix", "kernel_sigma"} & set(old.descriptor.as_dict())
    ids = [skeleton_source(store, "store", 1e-3, True, **base, **o).identity() for o in
           ({}, {"matrix": "rbf"}, {"matrix": "rbf", "kernel_sigma": 2.0}, {"pairs": [[1, 2]]},
            {"pairs": [[2, 1]]}, {"matrix": "rbf-raw", "kernel_sigma": 2.0})]
    assert all(ids[i] != ids[j] for i in range(len(ids)) for j in range(i))
    assert skeleton_source(store, "store", 1e-3, True, **base, matrix="rbf", kernel_sigma=2).identity() == ids[2]
    assert skeleton_source(store, "store", 1e-4, True, pairs=[[1, 2]]).plan is not None   # not paper 000's
    src = skeleton_source(store, "store", 1e-3, True, **base, matrix="rbf", kernel_sigma=0.5, pairs=[["j1", 2]])
    spec = src.spec()
    SkeletonSource.check_spec(spec)
    again = SkeletonSource.from_spec(spec, store)
    assert again.descriptor == src.descriptor and again.plan == src.plan
    with pytest.raises(ValueError, match=r"descriptor pairs name joints \[7\] outside 0..5"):
        SkeletonSource.check_spec(dict(spec, descriptor=dict(spec["descriptor"], pairs=[[1, 7]])))


def test_schema_kcov_options():
    from pydantic import ValidationError

    from streamcov.tasks.schema import SkeletonDescriptor as Table

    t = Table(matrix="rbf", kernel_sigma=2.0, pairs=[[1, "head"]])
    assert t.options()["matrix"] == "rbf" and t.options()["pairs"] == [[1, "head"]]
    for matrix in ("rbf", "rbf-raw"):
        with pytest.raises(ValidationError, match=f'descriptor.matrix = "{matrix}" is a Gram matrix .* set '
                                                  'descriptor.mean_weight = 0'):
            Table(matrix=matrix, mean_weight=0.3)
    with pytest.raises(ValidationError, match=r"descriptor.pairs: \[2, 2\] pairs a joint with itself"):
        Table(pairs=[[2, 2]])
    with pytest.raises(ValidationError, match="names a pair twice"):
        Table(pairs=[[1, 2], [1, 2]])
    with pytest.raises(ValidationError):
        Table(pairs=[[1, 2, 3]])
    with pytest.raises(ValidationError):
        Table(kernel_sigma=0.0)
    # the defaults of the keys "rbf" cancels are accepted, so that --set can switch a file that sets them
    assert Table(matrix="rbf", scale="none", ddof=1).options()["scale"] == "none"
    with pytest.raises(ValidationError, match=r'descriptor.scale = "body" is not read: .* set descriptor.scale = "none"'):
        Table(matrix="rbf", scale="body")
    with pytest.raises(ValidationError, match=r'descriptor.ddof = 0 is not read: .* set descriptor.ddof = 1'):
        Table(matrix="rbf", ddof=0)
    assert Table(matrix="covariance", scale="body", ddof=0).ddof == 0
    # the raw series keep their scale and the covariance's denominator: both are read
    raw = Table(matrix="rbf-raw", kernel_sigma=0.5, scale="body", ddof=0).options()
    assert (raw["matrix"], raw["kernel_sigma"], raw["scale"]) == ("rbf-raw", 0.5, "body")
    with pytest.raises(ValidationError, match=r'descriptor.kernel_sigma = 2.0 is not read: only descriptor.matrix = '
                                              r'"rbf" or "rbf-raw" reads it'):
        Table(kernel_sigma=2.0)


def test_pipeline_with_kcov_and_pairs_predicts_what_it_tested(tmp_path, rng):
    """The exact SVM on kernelized covariances with joint pairs through the engine: the saved model
    predicts the test rows as the run did."""
    from pathlib import Path

    from streamcov.stream.predict import predict
    from streamcov.tasks import run as run_pipeline
    from streamcov.tasks.config import load_config

    seqs = sequences(rng, rng.integers(6, 25, size=40))
    store = ingest(ListSource(seqs, ROLES), tmp_path / "s.zarr", chunk_frames=16)
    repo = Path(__file__).resolve().parents[1]
    sets = [f'output="{tmp_path}/out"', "dask.block_size=8", 'descriptor.features=["positions", "velocities"]',
            "descriptor.levels=2", "descriptor.overlap=true", "descriptor.mean_weight=0.0",
            'descriptor.matrix="rbf"', "descriptor.kernel_sigma=1.0", 'descriptor.pairs=[["j1", "j2"], [3, 5]]',
            'descriptor.scale="none"']   # the file's body scale, which "rbf" cancels, said as what it does
    res = run_pipeline(load_config(repo / "pipelines" / "msr_action3d_exact.toml", sets, store=store.path),
                       scheduler="synchronous")
    assert res["descriptor_dim"] == 4 * (2 * 15 + 6) * (2 * 15 + 7) // 2
    predict(Path(res["model_path"]), store.path, tmp_path / "p.csv", scheduler="synchronous")
    ran, again = predictions(res["predictions_path"]), predictions(tmp_path / "p.csv")
    assert ran and all(again[i] == p for i, p in ran.items())


@pytest.mark.parametrize("matrix", ["rbf", "rbf-raw"])
def test_a_kernel_sigma_that_saturates_every_window_is_refused(rng, matrix):
    """With a bandwidth far below (above) the distances between the series, every window's Gram matrix is the
    identity or blocks of ones (all ones): the descriptors carry nothing, and a run gave chance accuracy
    with exit 0. Refused naming descriptor.kernel_sigma and the median distance (the kernel at sigma 1
    recovers it: -2 log K); bandwidths near the distances pass."""
    seqs = [walk(rng, T) for T in (9, 14, 30)]
    frames, offsets = sk.pack_sequences(seqs)

    def vectors(sigma, subset=None):
        plan = sk.PyramidPlan(selection=sk.JointSelection.hip_relative(J, (0,)), features=("positions",),
                              levels=2, overlap=True, matrix=matrix, kernel_sigma=sigma)
        return sk.pyramid_vectors(frames, offsets, plan)

    with pytest.raises(ConfigError, match=rf'^descriptor\.kernel_sigma = 1e-20: the kernelized covariance \(matrix = '
                                          rf'"{matrix}"\) of every window of 3 sequences \(from 0\) is the identity '
                                          r"\(or blocks of ones\), to within 1e-06, .* sigma is far below the distances "
                                          r"between the coordinate series \(their median in the first window: "
                                          r"[\d.]+\); give a kernel_sigma near them$"):
        vectors(1e-20)
    with pytest.raises(ConfigError, match=r"is a matrix of ones, to within 1e-06, .* sigma is far above"):
        vectors(1e20)
    assert all(np.isfinite(vectors(s)).all() for s in (0.3, 1.0, 3.0))
    # the median distance of the message: the first window's, from the series themselves
    plan = sk.PyramidPlan(selection=sk.JointSelection.hip_relative(J, (0,)), features=("positions",), levels=2,
                          overlap=True, matrix=matrix, kernel_sigma=1e-20)
    F = sk.piece_features(seqs[0].astype(np.float64), 0, 0, len(seqs[0]), len(seqs[0]), plan)
    K1 = (ref.kernelized_covariance if matrix == "rbf" else ref.raw_kernelized_covariance)(F, 1.0)
    want = np.median(np.sqrt(-2 * np.log(K1[np.triu_indices(len(K1), 1)])))
    with pytest.raises(ConfigError, match=rf"their median in the first window: {want:.3g}\)"):
        vectors(1e-20)
    if matrix == "rbf-raw":
        # coordinates in millimetres at sigma 1: the distances are measured, not read back from a kernel that
        # underflowed (which capped them at 37.2)
        frames = frames * 1000.0
        diff = F[:, :, None] * 1000.0 - F[:, None, :] * 1000.0
        delta = diff.var(axis=0, ddof=1) + diff.mean(axis=0) ** 2
        want = np.median(np.sqrt(delta[np.triu_indices(len(delta), 1)]))
        assert want > 100
        with pytest.raises(ConfigError, match=rf"far below .*\(their median in the first window: {want:.3g}\)"):
            vectors(1.0)
