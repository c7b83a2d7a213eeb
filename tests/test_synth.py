"""Tests of the synthetic skeleton generator (streamcov.synth)."""
from __future__ import annotations

import math
import re
import sys
from collections import Counter

import numpy as np
import pytest

from streamcov.data.readers.base import SkeletonReader
from streamcov.data import synth
from streamcov.data.synth import ACTIONS, JOINT_NAMES, SyntheticSkeletons
from streamcov.errors import ConfigError

MSR_JOINTS = ["left shoulder", "right shoulder", "neck", "spine", "left hip", "right hip",
              "hip centre", "left elbow", "right elbow", "left wrist", "right wrist",
              "left hand", "right hand", "left knee", "right knee", "left ankle",
              "right ankle", "left foot", "right foot", "head"]
BONES = synth._BONES


def _joints(seq):
    return seq.frames.reshape(len(seq.frames), 20, 3).astype(np.float64)


def _bone_lengths(seq):
    X = _joints(seq)
    return np.stack([np.linalg.norm(X[:, c] - X[:, p], axis=1) for c, p in BONES], axis=1)


def _log_cov_vector(frames):
    """Reference descriptor: covariance of hip-relative joints (hip dropped),
    + 1e-4 I, matrix logarithm (eigh; the matrix is SPD), scaled upper triangle."""
    X = frames.reshape(len(frames), 20, 3).astype(np.float64)
    X = np.delete(X - X[:, 6:7], 6, axis=1).reshape(len(frames), -1)
    C = np.cov(X, rowvar=False, bias=True) + 1e-4 * np.eye(X.shape[1])
    w, V = np.linalg.eigh(C)
    L = (V * np.log(w)) @ V.T
    iu = np.triu_indices(L.shape[0])
    return L[iu] * np.where(iu[0] == iu[1], 1.0, math.sqrt(2.0))


@pytest.fixture(scope="module")
def default400():
    src = SyntheticSkeletons()
    return src, list(src.sequences())


# -- metadata ---------------------------------------------------------------

def test_info_matches_msr_layout():
    src = SyntheticSkeletons(n_classes=12)
    assert isinstance(src, SkeletonReader)
    info = src.info
    assert info.n_joints == 20
    assert info.joint_names == MSR_JOINTS == list(JOINT_NAMES)
    assert info.center == (6,) and info.joint_names[6] == "hip centre"
    assert info.units == "m"
    assert info.source == f"streamcov synthetic generator v{synth.GENERATOR_VERSION}"
    assert info.label_names == src.label_names == list(ACTIONS)
    assert info.extra["seed"] == 0 and info.extra["frames"] == [30, 60]
    assert len(src) == 400
    assert src.skipped == [] and src.repairs == {}


def test_params_stored_unchanged():
    frames = (12, 20)
    src = SyntheticSkeletons(n_sequences=7, n_subjects=3, n_classes=8, seed=5,
                                  frames=frames, noise=0.02)
    assert (src.n_sequences, src.n_subjects, src.n_classes, src.seed, src.noise) == \
        (7, 3, 8, 5, 0.02)
    assert src.frames is frames
    assert src.label_names == list(ACTIONS[:8])


# -- shapes, ids, subjects, classes -----------------------------------------

def test_shapes_dtypes_ids(default400):
    src, seqs = default400
    assert len(seqs) == 400
    for i, seq in enumerate(seqs):
        assert seq.id == f"syn_{i:08d}"
        assert seq.split is None
        assert seq.frames.dtype == np.float32 and seq.frames.ndim == 2
        assert seq.frames.shape[1] == 60 and 30 <= seq.frames.shape[0] <= 60
        assert np.isfinite(seq.frames).all()
        assert seq.label in src.label_names


def test_lengths_cover_inclusive_range():
    seqs = list(SyntheticSkeletons(n_sequences=60, frames=(3, 5)).sequences())
    assert {len(s.frames) for s in seqs} == {3, 4, 5}
    seqs = list(SyntheticSkeletons(n_sequences=5, frames=(7, 7)).sequences())
    assert {len(s.frames) for s in seqs} == {7}


def test_subject_numbering_and_class_balance(default400):
    src, seqs = default400
    subjects = Counter(s.subject for s in seqs)
    assert sorted(subjects) == list(range(1, 11))
    assert set(subjects.values()) == {40}
    # every subject performs every class equally often, so an odd/even split
    # has all classes on both sides
    pairs = Counter((s.subject, s.label) for s in seqs)
    assert len(pairs) == 100 and set(pairs.values()) == {4}
    assert [src.subject_of(i) for i in range(25)] == [1] * 10 + [2] * 10 + [3] * 5
    assert [src.label_names[src.class_of(i)] for i in range(12)] == \
        [seqs[i].label for i in range(12)]


def test_class_balance_uneven_count():
    seqs = list(SyntheticSkeletons(n_sequences=23, n_classes=8, n_subjects=3).sequences())
    counts = Counter(s.label for s in seqs)
    assert len(counts) == 8 and max(counts.values()) - min(counts.values()) <= 1
    assert {s.subject for s in seqs} <= {1, 2, 3}


# -- determinism and independence ------------------------------------------

def test_same_seed_identical_different_seed_different():
    a = list(SyntheticSkeletons(n_sequences=30, seed=11).sequences())
    b = list(SyntheticSkeletons(n_sequences=30, seed=11).sequences())
    c = list(SyntheticSkeletons(n_sequences=30, seed=12).sequences())
    for x, y, z in zip(a, b, c):
        assert np.array_equal(x.frames, y.frames)
        assert (x.id, x.label, x.subject) == (y.id, y.label, y.subject) == (z.id, z.label, z.subject)
        assert x.frames.shape != z.frames.shape or not np.allclose(x.frames, z.frames)


def test_generate_sequence_equals_iterated(default400):
    src, seqs = default400
    fresh = SyntheticSkeletons()          # no cached subjects
    for i in (0, 1, 57, 199, 200, 399):
        one = fresh.generate_sequence(i)
        assert np.array_equal(one.frames, seqs[i].frames)
        assert (one.id, one.label, one.subject) == (seqs[i].id, seqs[i].label, seqs[i].subject)


def test_batches_and_ranges_are_bit_identical(default400):
    src, seqs = default400
    # any batch composition, order or size gives the same arrays
    order = [311, 5, 77, 5, 240, 0]
    for i, seq in zip(order, src.generate_batch(order)):
        assert np.array_equal(seq.frames, seqs[i].frames)
    for batch_size in (1, 7, 1000):
        part = list(src.sequences(start=93, stop=120, batch_size=batch_size))
        assert [s.id for s in part] == [s.id for s in seqs[93:120]]
        assert all(np.array_equal(x.frames, y.frames) for x, y in zip(part, seqs[93:120]))
    assert src.generate_batch([]) == []


def test_batches_are_cut_by_frames_too(default400, monkeypatch):
    """A batch holds at most BATCH_FRAMES frames (one sequence at least, however long): 256 sequences of 2000
    frames had taken 2.5 GiB at once. The sequences are the same bits."""
    from streamcov.data import synth

    src, seqs = default400
    monkeypatch.setattr(synth, "BATCH_FRAMES", 150)
    made = []
    generate = src._generate
    monkeypatch.setattr(src, "_generate", lambda idx: made.append(list(idx)) or generate(idx))
    part = list(src.sequences(start=10, stop=60))
    assert [s.id for s in part] == [s.id for s in seqs[10:60]]
    assert all(np.array_equal(x.frames, y.frames) for x, y in zip(part, seqs[10:60]))
    assert [i for batch in made for i in batch] == list(range(10, 60))
    for batch in made:
        frames = sum(len(seqs[i].frames) for i in batch)
        assert frames <= 150 or len(batch) == 1, batch
        assert batch[-1] == 59 or frames + len(seqs[batch[-1] + 1].frames) > 150 or len(batch) == 256, batch
    assert all(src._length(i) == len(seqs[i].frames) for i in range(10, 60))
    made.clear()
    monkeypatch.setattr(synth, "BATCH_FRAMES", 1)   # every sequence longer than the budget: one at a time
    assert [s.id for s in src.sequences(start=0, stop=5)] == [s.id for s in seqs[:5]]
    assert made == [[0], [1], [2], [3], [4]]


def test_sequence_does_not_depend_on_n_sequences(default400):
    src, seqs = default400
    small = list(SyntheticSkeletons(n_sequences=25).sequences())
    assert all(np.array_equal(x.frames, y.frames) for x, y in zip(small, seqs[:25]))


# -- kinematics ---------------------------------------------------------------

def test_euler_and_matmul_match_reference():
    rng = np.random.default_rng(0)
    ax, az, ay = rng.uniform(-math.pi, math.pi, (3, 5))

    def rx(a):
        return np.array([[1, 0, 0], [0, math.cos(a), -math.sin(a)], [0, math.sin(a), math.cos(a)]])

    def ry(a):
        return np.array([[math.cos(a), 0, math.sin(a)], [0, 1, 0], [-math.sin(a), 0, math.cos(a)]])

    def rz(a):
        return np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]])

    R = synth._euler(ax, az, ay)                       # (3, 3, 5)
    ref = np.stack([ry(b) @ rz(g) @ rx(a) for a, g, b in zip(ax, az, ay)])
    np.testing.assert_allclose(R.transpose(2, 0, 1), ref, atol=1e-14)
    A, B, v = rng.normal(size=(5, 3, 3)), rng.normal(size=(5, 3, 3)), rng.normal(size=(5, 3))
    np.testing.assert_allclose(
        synth._matmul3(A.transpose(1, 2, 0), B.transpose(1, 2, 0)).transpose(2, 0, 1), A @ B,
        atol=1e-14)
    np.testing.assert_allclose(
        synth._matvec3(A.transpose(1, 2, 0), v.T).T, np.einsum("nij,nj->ni", A, v), atol=1e-14)


def test_static_joints_never_turn():
    # the kinematics skip the rotation of these bones; no pose may turn them
    static = list(synth._STATIC)
    assert not set(static) & set(synth._MOBILE)
    assert not synth._REST_ANGLES[static].any()
    s = np.linspace(0, 4 * math.pi, 50)
    for name, func in synth._ACTION_FUNCS.items():
        D = np.zeros((20, 3, s.size))
        func(s, np.full(s.size, 1.3), D)
        assert not D[static].any(), name
        assert D.any(), name


def test_rigid_skeleton_without_noise():
    src = SyntheticSkeletons(n_sequences=60, n_subjects=4, n_classes=12, noise=0.0)
    seqs = list(src.sequences())
    means = np.array([np.linalg.norm(synth._REST_OFFSETS[c]) for c, _ in BONES])
    by_subject = {}
    for seq in seqs:
        lengths = _bone_lengths(seq)
        # float32 coordinates of ~3 m carry ~2e-7 m rounding; 1e-5 m is far
        # above rounding and far below any non-rigid motion
        assert lengths.std(axis=0).max() < 1e-5, seq.id
        by_subject.setdefault(seq.subject, []).append(lengths.mean(axis=0))
    for subject, rows in by_subject.items():
        rows = np.array(rows)
        assert np.ptp(rows, axis=0).max() < 1e-5         # same skeleton in every sequence
        # +-8 % bone jitter times a stature factor within +-12 %
        assert (np.abs(rows[0] / means - 1.0) < 0.22).all()
    per_subject = np.array([rows[0] for rows in by_subject.values()])
    assert np.ptp(per_subject, axis=0).min() > 1e-3      # subjects differ


def test_bone_length_variation_is_noise_level():
    noise = 0.01
    seqs = list(SyntheticSkeletons(n_sequences=40, noise=noise).sequences())
    sd = np.median([_bone_lengths(s).std(axis=0) for s in seqs], axis=0)
    # the distance of two points with iid N(0, noise^2) coordinates fluctuates
    # with sd ~ noise * sqrt(2) (the difference projected on the bone); bounds
    # of 0.5x and 1.5x leave room for sampling error over 30-60 frames
    assert (sd > 0.5 * noise * math.sqrt(2)).all() and (sd < 1.5 * noise * math.sqrt(2)).all()


def test_y_up_and_body_sides(default400):
    _, seqs = default400
    X = np.concatenate([_joints(s) for s in seqs[:100]])
    y = X[..., 1]
    assert (y[:, 19] > y[:, 6]).mean() > 0.95          # head above hip centre
    assert (y[:, 6] > y[:, [15, 16]].max(axis=1)).all()  # hip centre above the ankles
    # the subject faces the sensor (-z) with its right side at larger x, as in MSR-Action3D
    assert (X[:, 1, 0] > X[:, 0, 0]).mean() > 0.95
    assert (X[:, 5, 0] > X[:, 4, 0]).mean() > 0.95
    assert (X[..., 2] > 1.0).all()                     # in front of the sensor


# -- learnability -------------------------------------------------------------

def test_classes_learnable_but_not_trivial(default400):
    from sklearn.neighbors import NearestCentroid
    from sklearn.svm import LinearSVC

    _, seqs = default400
    F = np.array([_log_cov_vector(s.frames) for s in seqs])
    y = np.array([s.label for s in seqs])
    train = np.array([s.subject % 2 == 1 for s in seqs])
    test = ~train
    nc = (NearestCentroid().fit(F[train], y[train]).predict(F[test]) == y[test]).mean()
    svc = LinearSVC(C=1.0, dual=False).fit(F[train], y[train])   # primal: 200 x 1653, fast
    acc = (svc.predict(F[test]) == y[test]).mean()
    # Chance is 10 %. The generator is calibrated so that this cross-subject
    # protocol lands at about 85-95 % (seed 0: 0.92 linear SVM, 0.87
    # nearest centroid). 0.6 for the nearest centroid leaves ample room for
    # sampling error on 200 test sequences (binomial sd ~2.5 %) while still
    # failing if classes collapse. The upper bound 0.99 guards against the
    # task becoming trivial (a perfect score on the 200 test sequences).
    assert nc > 0.6
    assert 0.75 < acc < 0.99


# -- bad parameters -----------------------------------------------------------

@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(n_classes=13), ValueError, r"n_classes must be between 1 and 12, got 13; the generator defines 12 actions"),
    (dict(n_classes=0), ValueError, r"n_classes must be between 1 and 12, got 0"),
    (dict(n_sequences=0), ValueError, r"n_sequences must be >= 1, got 0"),
    (dict(n_sequences=2.5), TypeError, r"n_sequences must be an integer, got 2.5"),
    (dict(n_sequences=True), TypeError, r"n_sequences must be an integer"),
    (dict(n_subjects=0), ValueError, r"n_subjects must be >= 1, got 0"),
    (dict(seed=-1), ValueError, r"seed must be >= 0, got -1; use a non-negative integer seed"),
    (dict(frames=(60, 30)), ValueError, r"frames must be a pair \(min, max\) of integers with 2 <= min <= max, got \(60, 30\)"),
    (dict(frames=(1, 30)), ValueError, r"2 <= min <= max, got \(1, 30\)"),
    (dict(frames=(30.0, 60)), ValueError, r"frames must be a pair \(min, max\) of integers"),
    (dict(frames=30), ValueError, r"frames must be a pair \(min, max\) of integers, got 30"),
    (dict(frames=(1, 2, 3)), ValueError, r"frames must be a pair \(min, max\) of integers, got \(1, 2, 3\)"),
    (dict(noise=-0.1), ValueError, r"noise must be a finite number >= 0 \(metres\), at most 1000, got -0.1"),
    # beyond, the sequences' covariances are rounding or overflow float32 (a run stopped with advice to rescale)
    (dict(noise=1e30), ValueError, r"noise must be a finite number >= 0 \(metres\), at most 1000, got 1e\+30"),
    (dict(noise=float("nan")), ValueError, r"noise must be a finite number >= 0"),
    (dict(noise="0.01"), ValueError, r"noise must be a finite number >= 0"),
])
def test_bad_parameters(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        SyntheticSkeletons(**kwargs)


def test_bad_indices_and_ranges():
    src = SyntheticSkeletons(n_sequences=10)
    with pytest.raises(IndexError, match=r"sequence index 10 out of range 0..9 \(n_sequences=10\)"):
        src.generate_sequence(10)
    with pytest.raises(IndexError, match=r"sequence index -1 out of range"):
        src.generate_batch([3, -1])
    with pytest.raises(TypeError, match=r"sequence index must be an integer, got 1.0"):
        src.generate_sequence(1.0)
    with pytest.raises(ValueError, match=r"stop must be between 4 and 10, got 11; stop must lie in start..n_sequences"):
        list(src.sequences(start=4, stop=11))
    with pytest.raises(ValueError, match=r"start must be between 0 and 10, got 12"):
        list(src.sequences(start=12))
    with pytest.raises(ValueError, match=r"batch_size must be >= 1, got 0"):
        list(src.sequences(batch_size=0))


def test_subject_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(synth, "_SUBJECT_CACHE", 3)
    src = SyntheticSkeletons(n_sequences=40, n_classes=2, n_subjects=20)
    seqs = list(src.sequences(batch_size=4))
    assert len(src._subjects) <= 3
    ref = SyntheticSkeletons(n_sequences=40, n_classes=2, n_subjects=20)
    # redrawn subjects are identical to the first draw
    assert all(np.array_equal(ref.generate_sequence(i).frames, seqs[i].frames)
               for i in (0, 13, 39))


def _cameras(src):
    """A reader class of ``src``'s sequences seen by another camera: ``Camera(axes)``, coordinate ``k`` of the
    new camera = ``sign`` x old coordinate ``a`` for ``(a, sign) = axes[k]``."""
    from dataclasses import replace

    seqs = list(src.sequences())

    class Camera(SkeletonReader):
        def __init__(self, axes):
            super().__init__()
            self.info, self.axes = src.info, axes

        def sequences(self):
            for s in seqs:
                X = s.frames.reshape(len(s.frames), 20, 3)
                Y = np.stack([sign * X[..., a] for a, sign in self.axes], axis=-1)
                yield replace(s, frames=Y.reshape(len(s.frames), 60).astype(np.float32))

    return Camera


def test_predict_finds_the_up_axis_of_the_store_it_is_given(tmp_path, capsys):
    """A model trained with up_axis = "auto" applied its training store's axis to every store it predicted: a
    z-up archive given to a model of y-up data had its bodies turned about a horizontal axis (MSR-Action3D seen
    by a z-up camera: 23% where the y-up copy gets 95%, without a word). Predict now finds the axis of the store
    it is given, as training did, and says so when it differs: the z-up copy gets the y-up copy's predictions."""
    import csv

    from streamcov.data.skeletons import ingest
    from streamcov.stream.model import FittedPipeline
    from streamcov.stream.predict import predict
    from streamcov.stream.skeleton import SkeletonSource
    from streamcov.tasks import run
    from streamcov.tasks.config import load_config
    from conftest import REPO

    Camera = _cameras(SyntheticSkeletons(n_sequences=48, n_subjects=4, n_classes=4, seed=5))
    y_up = ingest(Camera([(0, 1), (1, 1), (2, 1)]), tmp_path / "y.zarr")
    z_up = ingest(Camera([(0, 1), (2, -1), (1, 1)]), tmp_path / "z.zarr")   # (x, y, z) -> (x, -z, y)
    cfg = load_config(REPO / "pipelines" / "msr_action3d.toml", [f'output="{tmp_path / "out"}"'], store=y_up.path)
    run(cfg, scheduler="synchronous")
    model = FittedPipeline.load(tmp_path / "out" / "model")
    assert model.source["up_axis_found"] is True and model.source["descriptor"]["up_axis"] == "y"
    assert SkeletonSource.from_spec(model.source, z_up).descriptor.up_axis == "z"
    assert SkeletonSource.from_spec(model.source, y_up).descriptor.up_axis == "y"
    capsys.readouterr()

    def predicted(store):
        predict(tmp_path / "out" / "model", store.path, tmp_path / f"{store.path.stem}.csv", scheduler="synchronous")
        with open(tmp_path / f"{store.path.stem}.csv") as f:
            return [row["predicted"] for row in csv.DictReader(f)]

    assert predicted(z_up) == predicted(y_up)
    assert re.search(r"note: \S+z\.zarr: its up axis is z \(along the spine\), the model's training store's was "
                     r"y; the descriptor turns the bodies about z", capsys.readouterr().err)
    # two sequences cannot tell a camera standing another way up from bodies lying down: the model's axis stays
    few = ingest(_cameras(SyntheticSkeletons(n_sequences=2, n_subjects=1, n_classes=2, seed=5))(
        [(0, 1), (2, -1), (1, 1)]), tmp_path / "few.zarr")
    capsys.readouterr()
    assert SkeletonSource.from_spec(model.source, few).descriptor.up_axis == "y"
    assert re.search(r"note: \S+few\.zarr: the spines of its 2 sequence\(s\) looked at lean along z more than along "
                     r"the model's up axis y, but too few or too little .*: y is kept", capsys.readouterr().err)
    # a model whose axis was set, not found, keeps it on every store
    fixed = dict(model.source, descriptor={**model.source["descriptor"], "up_axis": "y"})
    del fixed["up_axis_found"]
    assert SkeletonSource.from_spec(fixed, z_up).descriptor.up_axis == "y"


def test_up_axis_auto_finds_the_axis_of_the_spine(tmp_path):
    """descriptor.up_axis = "auto" (the pipelines' default) reads the up axis off the spines of the store: y for
    the generator's bodies, z for the same bodies recorded by a z-up camera, x for an x-up one. The yaw (and the
    mirror) then act about the found axis, so the kernel of the z-up store is the kernel of the y-up one (the
    Log-E distances do not change under the fixed rotation between the two cameras), where a yaw about y tilts
    the z-up bodies instead. The axis found is what the descriptor (its fingerprint, a model's spec) records."""
    from streamcov.data.skeletons import ingest
    from streamcov.kernels import block_distances
    from streamcov.stream.skeleton import descriptor_array, skeleton_source

    Camera = _cameras(SyntheticSkeletons(n_sequences=24, n_subjects=4, n_classes=6, seed=3))
    opts = dict(features=["positions", "velocities"], levels=2, overlap=True, body_frame="yaw", scale="body",
                mean_weight=1.0, gamma=1e-2, mirror=True)
    y_up = ingest(Camera([(0, 1), (1, 1), (2, 1)]), tmp_path / "y.zarr")
    z_up = ingest(Camera([(0, 1), (2, -1), (1, 1)]), tmp_path / "z.zarr")   # (x, y, z) -> (x, -z, y)
    x_up = ingest(Camera([(1, 1), (0, -1), (2, 1)]), tmp_path / "x.zarr")   # (x, y, z) -> (y, -x, z)
    found = {k: skeleton_source(st, "store", up_axis="auto", **opts) for k, st in
             (("y", y_up), ("z", z_up), ("x", x_up))}
    assert {k: s.descriptor.up_axis for k, s in found.items()} == {"y": "y", "z": "z", "x": "x"}
    assert found["z"].descriptor == skeleton_source(z_up, "store", up_axis="z", **opts).descriptor

    def distances(source):
        V = descriptor_array(source, block=8).compute()
        return np.stack(block_distances(V, None, source.kernel_blocks, source.kernel_views))

    D = distances(found["y"])
    # the same numbers up to rounding of the rotated coordinates (float32 frames)
    np.testing.assert_allclose(distances(found["z"]), D, rtol=1e-6, atol=1e-8 * np.abs(D).max())
    tilted = distances(skeleton_source(z_up, "store", up_axis="y", **opts))
    assert np.abs(tilted - D).max() > 1e-2 * np.abs(D).max()


def test_up_axis_auto_takes_the_upper_body_roles_the_store_has(tmp_path):
    """Without the neck the spine ends at the head, the shoulders or the spine joint; a store with no upper-body
    role runs as before (y up) with a one-line warning that says how to set the axis; a store whose hips are
    missing too stops with the roles message, not the warning."""
    import warnings

    from streamcov.data.skeletons import ingest
    from streamcov.stream.skeleton import find_up_axis, skeleton_source, store_roles

    def store_with(keep, name):
        src = SyntheticSkeletons(n_sequences=6, n_subjects=2, n_classes=3)
        src.info = replace_roles(src.info, {k: v for k, v in src.info.roles.items() if k in keep})
        return ingest(src, tmp_path / name)

    for upper in ("head", "spine"):
        st = store_with({"hip_center", "left_hip", "right_hip", upper}, f"{upper}.zarr")
        assert find_up_axis(st, store_roles(st)) == "y"
    st = store_with({"hip_center", "left_hip", "right_hip"}, "hips.zarr")
    assert find_up_axis(st, store_roles(st)) is None
    with pytest.warns(UserWarning, match=r'descriptor.up_axis = "auto" finds the up axis along the spine, but the '
                                         r'store records no upper-body role .*: y is taken as up'):
        src = skeleton_source(st, "store", up_axis="auto", body_frame="yaw")
    assert src.descriptor.up_axis == "y"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # unread without the yaw and the mirror: resolved to the canonical "y", nothing read, nothing said
        assert skeleton_source(st, "store", up_axis="auto").descriptor.up_axis == "y"
        with pytest.raises(ConfigError, match=r"descriptor.body_frame and scale needs the joint roles neck"):
            skeleton_source(st, "store", up_axis="auto", body_frame="yaw", scale="body")


def replace_roles(info, roles):
    from dataclasses import replace

    return replace(info, roles=roles)


@pytest.mark.skipif(sys.platform != "linux", reason="a pipe whose reader has gone polls as an error on Linux")
def test_a_reader_that_leaves_stdout_early_is_no_error(tmp_path, monkeypatch, capsys):
    """`streamcov info STORE | head`: the reader closes the pipe before the end; the command ends quietly with
    the status of a writer stopped by SIGPIPE (141), not a traceback and "internal error"."""
    import io
    import os
    import sys

    from streamcov.cli import main
    from streamcov.data.skeletons import ingest

    st = ingest(SyntheticSkeletons(n_sequences=6, n_subjects=2, n_classes=3), tmp_path / "s.zarr")
    r, w = os.pipe()
    os.close(r)                                   # the reader has gone
    out = io.TextIOWrapper(os.fdopen(w, "wb", buffering=0), write_through=True)
    monkeypatch.setattr(sys, "stdout", out)
    try:
        assert main(["info", str(st.path)]) == 141
    finally:
        monkeypatch.undo()
        try:
            out.close()
        except OSError:
            pass
    assert capsys.readouterr().err == ""


def test_info_on_an_interrupted_generated_store_says_how_to_resume_it(tmp_path):
    """info told to resume an interrupted generated store "with --on-error skip", which synth refuses (it reads
    no files)."""
    from cli_cases import cli

    from streamcov.data.skeletons import ingest
    from streamcov.data.synth import SyntheticSkeletons

    assert ingest(SyntheticSkeletons(n_sequences=30, seed=1), tmp_path / "s.zarr", limit=5) is None
    rc, err, _ = cli("info", tmp_path / "s.zarr")
    assert rc == 3
    assert err.strip().endswith("s.zarr: INCOMPLETE store (5 sequences committed): the generation was interrupted; "
                                "run the same streamcov synth command again to resume"), err


def test_subject_parity_on_named_subjects_is_said(tmp_path):
    """A pipeline file of a numbered dataset (subject-parity: MSR-Action3D) run on a store whose subjects are
    named (HDM05's bd, bk, dg, mm, tr, numbered 0..4 in sorted order) split them by the parity of their place in
    the alphabet without a word; the run now names who trains and who tests, and how to choose."""
    from dataclasses import replace

    from streamcov.data.skeletons import ingest
    from streamcov.tasks import run
    from streamcov.tasks.config import load_config
    from conftest import REPO

    src = SyntheticSkeletons(n_sequences=40, n_subjects=5, n_classes=4, seed=2)
    names = ["bd", "bk", "dg", "mm", "tr"]

    class Named(SkeletonReader):
        def __init__(self):
            super().__init__()
            self.info = replace(src.info, extra={**src.info.extra, "subject_names": names})

        def sequences(self):
            for s in src.sequences():
                yield replace(s, subject=s.subject - 1)

    store = ingest(Named(), tmp_path / "named.zarr")
    cfg = load_config(REPO / "pipelines" / "msr_action3d.toml", [f'output="{tmp_path / "out"}"',
                                                                  "descriptor.levels=1"], store=store.path)
    res = run(cfg, scheduler="synchronous")
    said = [w for w in res["warnings"] if "subject-parity" in w]
    assert said == ['split.kind = "subject-parity" on a store whose subjects are named: they are numbered 0, 1, ... '
                    'in sorted order, so subjects bk, mm train and bd, dg, tr test; give split.kind = "subjects" with '
                    'split.train_subjects (their names or numbers) to choose']
    # the same fold chosen by the subjects' names: the same rows train and test, the same predictions
    cfg = load_config(REPO / "pipelines" / "msr_action3d.toml", [f'output="{tmp_path / "by-name"}"',
                                                                  "descriptor.levels=1", 'split.kind="subjects"',
                                                                  'split.train_subjects=["bk", "mm"]'],
                      store=store.path)
    named = run(cfg, scheduler="synchronous")
    assert (named["n_train"], named["n_test"], named["accuracy"]) == (res["n_train"], res["n_test"], res["accuracy"])
    assert not [w for w in named.get("warnings", []) if "subject-parity" in w]
    # numbered subjects (the generator's, MSR-Action3D's) are split by their numbers, as the file means
    plain = ingest(src, tmp_path / "plain.zarr")
    cfg = load_config(REPO / "pipelines" / "msr_action3d.toml", [f'output="{tmp_path / "out2"}"',
                                                                  "descriptor.levels=1"], store=plain.path)
    assert not [w for w in run(cfg, scheduler="synchronous").get("warnings", []) if "subject-parity" in w]
