"""The skeleton descriptor with options (frame features, temporal pyramid, body frame, Gaussian
embedding): kernels against slow obvious references, streamed == in memory across chunk
boundaries, the schema, the roles error, the block-sum kernel of the exact SVM and of the maps."""
import numpy as np
import pytest

import reference as ref
from conftest import predictions
from streamcov.data.readers import SkeletonInfo, SkeletonReader, SkeletonSequence
from streamcov.data.skeletons import ingest
from streamcov.descriptors import skeleton as sk
from streamcov.errors import ConfigError
from streamcov.stream.skeleton import SkeletonDescriptor, descriptor_array, skeleton_source

J = 6
ROLES = {"hip_center": [0], "left_hip": [1], "right_hip": [2], "neck": [3]}


class ListSource(SkeletonReader):
    def __init__(self, seqs, roles=None):
        super().__init__()
        self.seqs = seqs
        self.info = SkeletonInfo(n_joints=J, joint_names=[f"j{i}" for i in range(J)], units="m",
                                 source="test", center=(0,), roles=dict(roles or {}))

    def sequences(self):
        yield from self.seqs


def walk(rng, T):
    X = rng.standard_normal((T, 3 * J)).cumsum(0) * 0.1 + rng.standard_normal(3 * J)
    return X.astype(np.float32)


def sequences(rng, lengths):
    return [SkeletonSequence(id=f"s{i:03d}", frames=walk(rng, T), label=f"c{i % 3}", subject=i % 4 + 1)
            for i, T in enumerate(lengths)]


OPTION_SETS = [
    dict(features=("positions", "velocities")),
    dict(features=("positions", "velocities", "accelerations"), levels=3, overlap=True),
    dict(features=("positions", "velocities"), levels=2, overlap=True, body_frame="yaw", scale="body",
         mean_weight=0.3, gamma=1e-3),
    dict(features=("velocities",), time="normalized", levels=2, level_weights=(2.0, 1.0)),
    dict(features=("positions", "velocities"), levels=2, overlap=True, body_frame="torso", scale="body",
         mean_weight=0.3, gamma=1e-3, pairs=((4, 5),)),
    dict(features=("positions", "velocities", "accelerations"), levels=2, body_frame="torso-frames",
         mean_weight=0.3, gamma=1e-3, pairs=((4, 1),)),
    dict(joints=(1, 2, 4), mean_weight=1.0),
    # the covariance divided by n (ddof = 0) in every window, with the body scale and the mean embedding
    dict(features=("positions", "velocities"), levels=3, overlap=True, body_frame="yaw", scale="body",
         mean_weight=1.0, gamma=1e-2, ddof=0),
]


def reference_vectors(seqs, desc: SkeletonDescriptor, ddof: int = 1):
    keep = [j for j in range(1, J) if desc.joints is None or j in desc.joints]
    return np.stack([ref.pyramid_descriptor(
        np.asarray(s.frames, dtype=np.float64), J, (0,), keep, features=desc.features, window=desc.window,
        time=desc.time, levels=desc.levels, overlap=desc.overlap,
        yaw=(ROLES["left_hip"], ROLES["right_hip"]) if desc.body_frame == "yaw" else None,
        neck=ROLES["neck"] if desc.scale == "body" else None, mean_weight=desc.mean_weight,
        gamma=desc.gamma, pairs=desc.pairs,
        torso=(ROLES["left_hip"], ROLES["right_hip"], ROLES["neck"]) if desc.body_frame.startswith("torso") else None,
        torso_frames=desc.body_frame == "torso-frames", ddof=ddof) for s in seqs])


@pytest.mark.parametrize("window", [3, 5, 7])
@pytest.mark.parametrize("order", [1, 2])
def test_savgol_table_matches_scipy(rng, window, order):
    from streamcov.descriptors.skeleton import PyramidPlan, piece_features

    for T in (2, 3, 4, 5, 6, 11, 20):
        X = rng.standard_normal((T, 3 * J))
        plan = PyramidPlan(selection=sk.JointSelection.raw(J), window=window,
                           features=("velocities",) if order == 1 else ("accelerations",))
        got = piece_features(X, 0, 0, T, T, plan)
        np.testing.assert_allclose(got, ref.savgol_derivative(X, window, order), atol=1e-10)


@pytest.mark.parametrize("T,levels,overlap,want", [
    (8, 2, False, [(0, 8), (0, 4), (4, 8)]),
    # level 1: starts every T/4 = 2, width 4; level 2: width 2 < 3 frames, widened about the centre
    # (start round(k - 0.5), Python's half-to-even rounding, kept within 0..T - 3)
    (8, 3, True, [(0, 8), (0, 4), (2, 6), (4, 8), (0, 3), (0, 3), (2, 5), (2, 5), (4, 7), (4, 7), (5, 8)]),
    (5, 2, False, [(0, 5), (0, 3), (2, 5)]),                 # starts rounded down, stops up
    (13, 2, True, [(0, 13), (0, 7), (3, 10), (6, 13)]),
    (1, 3, False, [(0, 1)] * 7),                             # shorter than a window: the whole sequence
])
def test_window_bounds_hand_worked(T, levels, overlap, want):
    assert sk.window_bounds(T, levels, overlap).tolist() == [list(w) for w in want]


@pytest.mark.parametrize("T", [1, 2, 3, 5, 8, 13, 40])
@pytest.mark.parametrize("levels,overlap", [(1, False), (3, False), (3, True), (4, True)])
def test_window_bounds_properties(T, levels, overlap):
    got = sk.window_bounds(T, levels, overlap)
    assert len(got) == sk.n_windows(levels, overlap)
    # every level covers the whole sequence
    start = 0
    for l in range(levels):
        k = (2 ** (l + 1) - 1) if overlap and l > 0 else 2 ** l
        lev, start = got[start:start + k], start + k
        assert lev[0, 0] == 0 and lev[-1, 1] == T and (lev[1:, 0] <= lev[:-1, 1]).all()
    assert (got[:, 0] >= 0).all() and (got[:, 1] <= T).all() and (got[:, 1] > got[:, 0]).all()


def test_window_weights_sum_to_one():
    w = sk.window_weights(3, True, (1.0, 2.0, 1.0))
    assert len(w) == 11 and np.isclose(w.sum(), 1.0)
    np.testing.assert_allclose(w[1:4], 0.5 / 3)
    with pytest.raises(ValueError, match="level_weights must be 3 positive numbers"):
        sk.window_weights(3, True, (1.0, 2.0))


@pytest.mark.parametrize("options", OPTION_SETS)
def test_streamed_descriptor_equals_in_memory_reference(tmp_path, rng, options):
    """Tiny chunks: most sequences are cut by chunk boundaries, derivatives need the neighbours' frames."""
    seqs = sequences(rng, [2, 3, 4, 7, 12, 30, 9, 5, 17, 2, 6])
    store = ingest(ListSource(seqs, ROLES), tmp_path / "s.zarr", chunk_frames=4)
    ddof = options.get("ddof", 1)
    source = skeleton_source(store, "store", options.pop("gamma", 1e-4), True, **options)
    assert source.plan is not None and source.plan.ddof == ddof
    V = descriptor_array(source, block=3).compute()
    want = reference_vectors(seqs, source.descriptor, ddof)
    assert V.shape == (len(seqs), source.dim)
    np.testing.assert_allclose(V, want, atol=1e-8)
    frames, offsets = sk.pack_sequences([s.frames for s in seqs])
    np.testing.assert_allclose(sk.pyramid_vectors(frames, offsets, source.plan), V, atol=1e-8)
    widths = [w for w, _ in source.kernel_blocks]
    assert sum(widths) == source.dim and np.isclose(sum(w for _, w in source.kernel_blocks), 1.0)


@pytest.mark.parametrize("levels", [1, 2])
def test_not_spd_names_the_row_and_id_when_a_block_is_restricted(tmp_path, rng, levels):
    """With gamma = 0 the 4-frame sequence (15 hip-relative coordinates) is singular. The featurizer asks for
    some rows of a block only (``rows``): the error names that sequence's row in the store and its id, not its
    place among the rows asked for (the pyramid route counted within the subset)."""
    import dask

    from streamcov.errors import NotSPDError

    seqs = sequences(rng, [40, 40, 40, 4, 40, 40])
    store = ingest(ListSource(seqs, ROLES), tmp_path / "s.zarr", chunk_frames=16)
    source = skeleton_source(store, "store", 0.0, True, levels=levels)
    rows = np.zeros(len(seqs), dtype=bool)
    rows[[1, 3]] = True
    (_, _, local, task), = source.block_tasks(np.array([0, len(seqs)]), rows=rows)
    assert local.tolist() == [1, 3]
    where = "window 0 of sequence" if levels > 1 else "covariance of sequence"
    with pytest.raises(NotSPDError, match=rf"^{where} 3 \(id 's003'\) \(4 frames, 15 dims\) is not positive definite"):
        dask.compute(task, scheduler="synchronous")
    rows[3] = False
    (_, _, local, task), = source.block_tasks(np.array([0, len(seqs)]), rows=rows)
    if levels > 1:   # the pyramid route computes the rows asked for only
        assert dask.compute(task, scheduler="synchronous")[0].shape == (1, source.dim)
    else:   # the plain route takes the logs of the whole block (a row's bits do not depend on which are asked)
        with pytest.raises(NotSPDError, match=r"^covariance of sequence 3 \(id 's003'\)"):
            dask.compute(task, scheduler="synchronous")


def test_plain_options_keep_paper_descriptor(tmp_path, rng):
    seqs = sequences(rng, [5, 9, 12])
    store = ingest(ListSource(seqs), tmp_path / "s.zarr", chunk_frames=4)
    plain = skeleton_source(store, "store", 1e-4, True)
    assert plain.plan is None and "levels" not in plain.descriptor.as_dict()
    plan = sk.PyramidPlan(selection=plain.selection)
    frames, offsets = sk.pack_sequences([s.frames for s in seqs])
    np.testing.assert_allclose(sk.pyramid_vectors(frames, offsets, plan),
                               descriptor_array(plain).compute(), atol=1e-12)


def test_body_frame_without_roles_is_one_clear_error(tmp_path, rng):
    store = ingest(ListSource(sequences(rng, [5, 6])), tmp_path / "s.zarr", chunk_frames=4)
    with pytest.raises(ConfigError, match=r"descriptor.body_frame needs the joint roles left_hip, right_hip"):
        skeleton_source(store, "store", body_frame="yaw")
    with pytest.raises(ConfigError, match=r"descriptor.scale needs the joint roles neck"):
        skeleton_source(store, "store", scale="body")


def test_yaw_makes_descriptor_invariant_to_camera_yaw(tmp_path, rng):
    seqs = sequences(rng, [8, 13, 20])
    t = np.radians(50.0)
    Ry = np.array([[np.cos(t), 0, np.sin(t)], [0, 1, 0], [-np.sin(t), 0, np.cos(t)]])
    turned = [SkeletonSequence(id=s.id, frames=(s.frames.reshape(-1, J, 3) @ Ry.T).reshape(len(s.frames), -1)
                               .astype(np.float64) * 1.7, label=s.label, subject=s.subject) for s in seqs]
    a = ingest(ListSource(seqs, ROLES), tmp_path / "a.zarr", chunk_frames=5)
    b = ingest(ListSource(turned, ROLES), tmp_path / "b.zarr", chunk_frames=5)
    opts = dict(features=["positions", "velocities"], body_frame="yaw", scale="body")
    Va = descriptor_array(skeleton_source(a, "store", 1e-4, True, **opts)).compute()
    Vb = descriptor_array(skeleton_source(b, "store", 1e-4, True, **opts)).compute()
    np.testing.assert_allclose(Va, Vb, atol=1e-5)


def _rotation(rng):
    Q, R = np.linalg.qr(rng.standard_normal((3, 3)))
    Q = Q * np.sign(np.diag(R))
    return Q if np.linalg.det(Q) > 0 else -Q


@pytest.mark.parametrize("per_frame", [False, True])
def test_torso_frame_makes_descriptor_invariant_to_camera_pose(tmp_path, rng, per_frame):
    """torso: one rotation of the whole sequence (any axis: tilt as well as yaw) and a translation change
    nothing; torso-frames: nor does a different rotation and translation of every frame."""
    seqs = sequences(rng, [8, 13, 20])
    moved = []
    for s in seqs:
        X = s.frames.reshape(-1, J, 3).astype(np.float64)
        Rs = [_rotation(rng) for _ in X] if per_frame else [_rotation(rng)] * len(X)
        shift = rng.standard_normal((len(X), 1, 3)) if per_frame else rng.standard_normal(3)
        Y = np.stack([x @ R.T for x, R in zip(X, Rs)]) + shift
        moved.append(SkeletonSequence(id=s.id, frames=Y.reshape(len(X), -1), label=s.label, subject=s.subject))
    a = ingest(ListSource(seqs, ROLES), tmp_path / "a.zarr", chunk_frames=5)
    b = ingest(ListSource(moved, ROLES), tmp_path / "b.zarr", chunk_frames=5)
    opts = dict(features=["positions", "velocities"], body_frame="torso-frames" if per_frame else "torso",
                scale="body", mean_weight=0.3, pairs=[[4, 5]])
    Va = descriptor_array(skeleton_source(a, "store", 1e-4, True, **opts)).compute()
    Vb = descriptor_array(skeleton_source(b, "store", 1e-4, True, **opts)).compute()
    # float32 stores: the moved frames are rounded to float32 after the rotation
    np.testing.assert_allclose(Va, Vb, atol=2e-4)
    if not per_frame:     # yaw alone does not undo a tilt
        opts["body_frame"] = "yaw"
        Ya = descriptor_array(skeleton_source(a, "store", 1e-4, True, **opts)).compute()
        Yb = descriptor_array(skeleton_source(b, "store", 1e-4, True, **opts)).compute()
        assert np.abs(Ya - Yb).max() > 1e-2


def test_torso_rotation_kernel(rng):
    from streamcov._kernels import dynamics as kd

    for _ in range(50):
        hips, spine = rng.standard_normal(3), rng.standard_normal(3)
        R = sk.torso_rotation(hips, spine)
        np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-12)
        assert np.isclose(np.linalg.det(R), 1.0)
        h, s = R @ hips, R @ spine             # the hip line along +x, the spine in the xy-plane, y > 0
        np.testing.assert_allclose(h[1:], 0.0, atol=1e-12)
        assert h[0] > 0 and s[1] > 0 and abs(s[2]) < 1e-12
    # degenerate: hips on each other, or the spine along the hip line
    assert sk.torso_rotation(np.zeros(3), np.ones(3)) is None
    assert sk.torso_rotation(np.array([1.0, 0, 0]), np.array([2.0, 0, 0])) is None
    # a hip line of 1e-8 m under a 0.5 m spine: below float32 precision, no direction
    assert sk.torso_rotation(np.array([1e-8, 0, 0]), np.array([0.0, 0.5, 0])) is None
    assert sk.torso_rotation(np.array([0.2, 0, 0]), np.array([0.5, 1e-8, 0])) is None
    assert sk.torso_rotation(np.array([1e-5, 0, 0]), np.array([0.0, 0.5, 0])) is not None
    # a degenerate frame is copied unchanged, the others rotated about the hip centre
    X = rng.standard_normal((3, 3 * J))
    X[1, 3:6] = X[1, 6:9]          # frame 1: left hip == right hip
    out = np.empty_like(X)
    c, l, r, n = (np.array(ROLES[k]) for k in ("hip_center", "left_hip", "right_hip", "neck"))
    kd.torso_frames(X, c, l, r, n, out)
    np.testing.assert_array_equal(out[1], X[1])
    for t in (0, 2):
        F = X[t].reshape(J, 3)
        R = sk.torso_rotation(F[2] - F[1], F[3] - F[0])
        np.testing.assert_allclose(out[t].reshape(J, 3), F[0] + (F - F[0]) @ R.T, atol=1e-12)


@pytest.mark.parametrize("body_frame", ["torso", "torso-frames"])
def test_torso_frame_degenerate_frames_streamed(tmp_path, rng, body_frame):
    """Frames whose hips coincide (every frame of one sequence, two frames of another, one of them at a
    chunk boundary) keep their camera coordinates, in the streamed path as in the reference."""
    seqs = sequences(rng, [9, 13, 6])
    for s, frames in ((seqs[0], range(9)), (seqs[1], (3, 4))):
        X = np.array(s.frames)
        for t in frames:
            X[t, 3:6] = X[t, 6:9]          # left hip on the right hip
        s.frames = X
    store = ingest(ListSource(seqs, ROLES), tmp_path / "s.zarr", chunk_frames=4)
    source = skeleton_source(store, "store", 1e-3, True, features=["positions", "velocities"], levels=2,
                             overlap=True, body_frame=body_frame, scale="body", mean_weight=0.3)
    V = descriptor_array(source, block=2).compute()
    np.testing.assert_allclose(V, reference_vectors(seqs, source.descriptor), atol=1e-8)
    # the sequence with no hip line at all: the same descriptor as without a body frame
    plain = skeleton_source(store, "store", 1e-3, True, features=["positions", "velocities"], levels=2,
                            overlap=True, scale="body", mean_weight=0.3)
    np.testing.assert_allclose(V[0], descriptor_array(plain).compute()[0], atol=1e-12)


def _degenerate_bodies(rng):
    """Sequences 1 and 3 of 5: the neck on the hip centre in every frame (no body size, no spine), and both
    hips at one point (no hip line)."""
    seqs = sequences(rng, [9, 13, 6, 8, 7])
    X = np.array(seqs[1].frames)
    X[:, 9:12] = X[:, 0:3]
    seqs[1].frames = X
    X = np.array(seqs[3].frames)
    X[:, 3:6] = X[:, 6:9]
    seqs[3].frames = X
    return seqs


@pytest.mark.parametrize("body_frame, mirror, reasons", [
    ("yaw", False, ["its neck is at the hip centre in every frame: body size 0",
                    "its mean hip line (right hip minus left hip) has no length across the up axis y: no yaw"]),
    ("torso", False, ["its mean hip line is of no length, or its mean spine (neck minus hip centre) lies along it: no "
                      "torso frame; its neck is at the hip centre in every frame: body size 0",
                      "its mean hip line is of no length, or its mean spine (neck minus hip centre) lies along it: no "
                      "torso frame"]),
])
def test_degenerate_body_frame_is_said_once_and_changes_no_descriptor(tmp_path, rng, body_frame, mirror, reasons):
    """A body frame that falls back (identity rotation, size 1) is named, sequence by sequence in one line;
    the descriptors are those computed without the check, and the others' those of a store without them."""
    store, line, V, W = _said_once(tmp_path, _degenerate_bodies(rng), (0, 2, 4), body_frame=body_frame,
                                   scale="body", mirror=mirror)
    items = "; ".join(f"sequence {i}, id 's{i:03d}': {r}" for i, r in zip((1, 3), reasons) if r)
    n = sum(r is not None for r in reasons)
    assert line == (f"descriptor.body_frame = {body_frame!r}, descriptor.scale = 'body': the body frame of {n} of the "
                    f"5 sequences of {store.path} fell back ({items}): where a rotation cannot be found their "
                    f"descriptors keep the camera's frame (the identity rotation), where a size cannot, its units (a "
                    f"size of 1); check the roles the store records (`streamcov "
                    f"info {store.path}`) or leave those sequences out")
    np.testing.assert_allclose(V[[0, 2, 4]], W, rtol=0, atol=1e-12)   # other chunk boundaries: last bits


def _said_once(tmp_path, seqs, kept, **options):
    """``(store, line, V, W)``: the store of ``seqs`` (joint names the mirror view can pair, chunks of 4 frames),
    the one line its data_warnings give (a store of the sequences ``kept`` alone gives none), and the
    descriptors of both stores under ``options``."""
    from streamcov.stream.runtime import dask_runtime

    named = [ListSource(seqs, ROLES), ListSource([seqs[i] for i in kept], ROLES)]
    for src in named:
        src.info.joint_names = ["hip_center", "left_hip", "right_hip", "neck", "left_hand", "right_hand"]
    store = ingest(named[0], tmp_path / "s.zarr", chunk_frames=4)
    clean = ingest(named[1], tmp_path / "c.zarr", chunk_frames=4)
    source, kept_source = (skeleton_source(st, "store", 1e-3, True, features=["positions", "velocities"], levels=2,
                                           **options) for st in (store, clean))
    with dask_runtime("synchronous") as runtime:
        (line,) = source.data_warnings(runtime)
        assert kept_source.data_warnings(runtime) == []
    return (store, line, descriptor_array(source, block=2).compute(),
            descriptor_array(kept_source, block=2).compute())


@pytest.mark.parametrize("body_frame, start, item", [
    ("yaw", "descriptor.body_frame = 'yaw', descriptor.scale = 'body': the body frame of 2 of the 16 sequences of ",
     "(sequence 1, id 's001': its neck is at the hip centre in every frame: body size 0; sequence 3, id "),
    ("torso-frames", "descriptor.body_frame = 'torso-frames', descriptor.scale = 'body': 21 frames of 2 of the 16 "
                     "sequences of ",
     "(sequence 1, id 's001': 13 of its 13 frames; its neck is at the hip centre in every frame: body size 0; "
     "sequence 3, id 's003': 8 of its 8 frames)"),
])
def test_degenerate_body_frame_is_a_warning_of_the_run_and_a_note_of_predict(tmp_path, rng, body_frame, start, item):
    from pathlib import Path

    from streamcov.stream.predict import predict
    from streamcov.tasks import run as run_pipeline
    from streamcov.tasks.config import load_config

    seqs = _degenerate_bodies(rng) + sequences(rng, [8] * 11)
    for i, s in enumerate(seqs):
        s.id, s.subject, s.label = f"s{i:03d}", i % 4 + 1, f"c{i // 2 % 2}"   # both classes in both halves
    store = ingest(ListSource(seqs, ROLES), tmp_path / "s.zarr", chunk_frames=16)
    repo = Path(__file__).resolve().parents[1]
    sets = [f'output="{tmp_path}/out"', 'descriptor.features=["positions"]', f'descriptor.body_frame="{body_frame}"',
            'descriptor.scale="body"']
    res = run_pipeline(load_config(repo / "pipelines" / "msr_action3d_exact.toml", sets, store=store.path),
                       scheduler="synchronous")
    said = [w for w in res["warnings"] if w.startswith("descriptor.body_frame")]
    assert len(said) == 1 and said[0].startswith(start + str(store.path)) and item in said[0]
    out = predict(Path(res["model_path"]), store.path, tmp_path / "p.csv", scheduler="synchronous")
    assert [n for n in out["notes"] if n.startswith("descriptor.body_frame")] == said


def _degenerate_frames(rng):
    """Sequences 1, 3 and 4 of 5 with frames that have no torso frame: both hips at one point in 3 frames
    of sequence 1 (cut by chunks of 4 frames), the neck at the hip centre in 2 of sequence 3 and in every
    frame of sequence 4 (no body size either)."""
    seqs = sequences(rng, [9, 13, 6, 8, 7])
    for i, frames, to, at in ((1, [0, 4, 8], 3, 6), (3, [2, 3], 9, 0), (4, slice(None), 9, 0)):
        X = np.array(seqs[i].frames)
        X[frames, to:to + 3] = X[frames, at:at + 3]
        seqs[i].frames = X
    return seqs


@pytest.mark.parametrize("scale, mirror", [("none", False), ("none", True), ("body", True)])
def test_torso_frames_left_unrotated_are_said_once_and_change_no_descriptor(tmp_path, rng, scale, mirror):
    """body_frame = "torso-frames": the frames left in the camera's frame are counted, sequence by sequence
    in one line (with scale = "body", with the sequences whose size fell back); a clean store gives none,
    and the descriptors are those of a store without those sequences."""
    store, line, V, W = _said_once(tmp_path, _degenerate_frames(rng), (0, 2), body_frame="torso-frames",
                                   scale=scale, mirror=mirror)
    sized = scale == "body"
    keys = "descriptor.body_frame = 'torso-frames'" + (", descriptor.scale = 'body'" if sized else "")
    size = "; its neck is at the hip centre in every frame: body size 0" if sized else ""
    fell = ", and the body size of 1 of them fell back" if sized else ""
    units = ", and where a size cannot be found their descriptors keep the camera's units (a size of 1)" * sized
    assert line == (
        f"{keys}: 12 frames of 3 of the 5 sequences of {store.path} were left in the camera's frame{fell} "
        f"(sequence 1, id 's001': 3 of its 13 frames; sequence 3, id 's003': 2 of its 8 frames; sequence 4, id "
        f"'s004': 7 of its 7 frames{size}): a frame whose hips are at one point, or whose spine (neck minus hip "
        f"centre) is of no length or lies along its hip line, has no torso frame and is not rotated{units}; check "
        f"the roles the store records (`streamcov info {store.path}`) or leave those sequences out")
    np.testing.assert_allclose(V[[0, 2]], W, rtol=0, atol=1e-12)


def _torso_left_reference(X, roles):
    """Frames of X (T x 3J) with no torso frame, the obvious way: per frame, the role means by numpy, the
    hip line, the spine, and the test of ``torso_rotation`` (1e-6 of the longer of the two)."""
    F = np.asarray(X, dtype=np.float64).reshape(len(X), -1 if len(X) else 0, 3)
    left = 0
    for f in F:
        hc, lh, rh, nk = (f[list(roles[k])].mean(0) for k in ("hip_center", "left_hip", "right_hip", "neck"))
        h, s = rh - lh, nk - hc
        tol = 1e-6 * max(np.linalg.norm(h), np.linalg.norm(s))
        u = s - (s @ h) * h / (h @ h) if h @ h > 0 else s
        left += not (tol > 0 and np.linalg.norm(h) > tol and np.linalg.norm(u) > tol)
    return left


def test_torso_unrotated_counts_against_reference(tmp_path, rng):
    """The count of frames left by torso-frames, by the kernel (any ranges) and by the chunk tasks summed
    over a store's chunks, against the obvious count, on random frames with degenerate ones of each kind
    (roles of several joints too)."""
    from streamcov.stream.skeleton import _chunk_pieces, chunk_torso_unrotated

    roles = {"hip_center": [0, 4], "left_hip": [1, 5], "right_hip": [2], "neck": [3]}
    seqs = sequences(rng, [6, 5, 12, 3, 9, 17, 4, 2, 11])
    for s in seqs:
        X = np.array(s.frames)
        T = len(X)
        hips = rng.random(T) < 0.2       # both hips at one point (left hip joints 1 and 5 on joint 2)
        X[hips, 3:6] = X[hips, 6:9]
        X[hips, 15:18] = X[hips, 6:9]
        neck = rng.random(T) < 0.15      # the neck at the hip centre (joint 4 on joint 0)
        X[neck, 12:15] = X[neck, 0:3]
        X[neck, 9:12] = X[neck, 0:3]
        along = rng.random(T) < 0.15     # the spine along the hip line (to float32's rounding)
        X[along, 15:18] = X[along, 3:6]
        X[along, 12:15] = X[along, 0:3]
        X[along, 9:12] = X[along, 0:3] + 0.5 * (X[along, 6:9] - X[along, 3:6])
        s.frames = X
    src = ListSource(seqs, roles)
    src.info.center = (0, 4)
    store = ingest(src, tmp_path / "s.zarr", chunk_frames=4)
    assert store.n_sequences == len(seqs)
    source = skeleton_source(store, "store", 1e-3, True, features=["positions"], body_frame="torso-frames")
    plan = source.plan
    want = np.array([_torso_left_reference(s.frames, roles) for s in seqs])
    assert 0 < want.sum() < sum(len(s.frames) for s in seqs)
    all_frames = np.concatenate([np.asarray(s.frames) for s in seqs])
    offsets = store.offsets
    np.testing.assert_array_equal(sk.torso_unrotated(all_frames, np.stack([offsets[:-1], offsets[1:]], 1), plan),
                                  want)
    got = np.zeros(len(seqs), dtype=np.int64)
    for c0 in range(0, store.n_frames, 4):
        c1 = min(c0 + 4, store.n_frames)
        s_lo, left = chunk_torso_unrotated(str(store.path), c0, c1, offsets, plan)
        assert len(left) == _chunk_pieces(offsets, c0, c1)[1]
        got[s_lo:s_lo + len(left)] += left
    np.testing.assert_array_equal(got, want)
    # the frames the kernel counts are those torso_frames copies unchanged
    rotated = sk.torso_frames(all_frames, plan)
    same = np.all(rotated == all_frames.astype(np.float64), axis=1)
    np.testing.assert_array_equal(np.add.reduceat(same, offsets[:-1]), want)


def test_torso_frame_needs_neck_and_centre(tmp_path, rng):
    roles = {k: v for k, v in ROLES.items() if k != "neck"}
    store = ingest(ListSource(sequences(rng, [5, 6]), roles), tmp_path / "s.zarr", chunk_frames=4)
    with pytest.raises(ConfigError, match=r"^descriptor.body_frame needs the joint roles neck, which the store"):
        skeleton_source(store, "store", body_frame="torso")
    with pytest.raises(ConfigError, match=r"descriptor.body_frame = 'torso-frames' measures the body from the hip "
                                          r"centre; set descriptor.center"):
        skeleton_source(store, "none", body_frame="torso-frames")


def test_descriptor_errors():
    with pytest.raises(ValueError, match="features must be distinct names"):
        SkeletonDescriptor((0,), features=("positions", "jerks"))
    with pytest.raises(ValueError, match="window must be an odd number"):
        SkeletonDescriptor((0,), window=4)
    with pytest.raises(ValueError, match="levels must be an integer in 1..6"):
        SkeletonDescriptor((0,), levels=0)
    with pytest.raises(ValueError, match="body_frame must be one of none, yaw, torso, torso-frames, got 'spine'"):
        SkeletonDescriptor((0,), body_frame="spine")
    with pytest.raises(ValueError, match="mean_weight must be a finite number >= 0"):
        SkeletonDescriptor((0,), mean_weight=-1.0)
    with pytest.raises(ValueError, match="joints must be distinct 0-based joint indices"):
        SkeletonDescriptor((0,), joints=(1, 1))


def test_joint_subset_out_of_range(tmp_path, rng):
    store = ingest(ListSource(sequences(rng, [5, 6])), tmp_path / "s.zarr", chunk_frames=4)
    with pytest.raises(ConfigError, match=r"descriptor.joints = \[1, 9\]: joints \[9\] outside 0..5"):
        skeleton_source(store, "store", joints=[1, 9])


def test_spec_round_trip(tmp_path, rng):
    from streamcov.stream.skeleton import SkeletonSource

    store = ingest(ListSource(sequences(rng, [5, 9]), ROLES), tmp_path / "s.zarr", chunk_frames=4)
    src = skeleton_source(store, "store", 1e-3, True, features=["positions", "velocities"], levels=2,
                          overlap=True, body_frame="yaw", mean_weight=0.3)
    spec = src.spec()
    SkeletonSource.check_spec(spec)
    again = SkeletonSource.from_spec(spec, store)
    assert again.descriptor == src.descriptor and again.dim == src.dim


def test_block_sum_map_approximates_weighted_sum_of_kernels(rng):
    from streamcov.features.registry import fit_feature_map
    from streamcov.kernels import block_distances, block_kernel

    blocks = [[6, 0.5], [10, 0.25], [10, 0.25]]
    X = rng.standard_normal((40, 26))
    for sl in (slice(0, 6), slice(6, 16), slice(16, 26)):
        X[:, sl] /= np.linalg.norm(X[:, sl], axis=1, keepdims=True)
    fmap, _ = fit_feature_map({"map": "rff", "n_components": 20000, "sigma": 1.0, "blocks": blocks}, 3, 26)
    Z = fmap.transform(X)
    assert Z.shape == (40, 20000)
    K = block_kernel(block_distances(X, None, blocks), blocks, 1.0)
    want = sum(w * ref.gaussian_gram(X[:, a:a + n], 1.0) for (n, w), a in zip(blocks, (0, 6, 16)))
    np.testing.assert_allclose(K, want, atol=1e-12)
    assert np.abs(Z @ Z.T - K).max() < 0.05
    with pytest.raises(ValueError, match=r"^X has 25 features, but BlockSumFeatures is expecting 26 features as "
                                         r"input \(the columns its kernel blocks cover\)$"):
        fmap.transform(X[:, :25])
    # BlockSumFeatures checks its blocks as the kernel functions do: a negative weight reached a block's map as
    # a negative n_components, a width of 0 as an empty array, an infinite weight gave infinite features
    from streamcov.features import BlockSumFeatures

    for bad in ([[6, -1.0], [20, 1.0]], [[0, 1.0], [26, 1.0]], [[6, np.inf], [20, 1.0]], [["6", 1.0], [20, 1.0]],
                [[2.5, 1.0], [23.5, 1.0]], [6, 20]):
        with pytest.raises(ValueError, match=r"blocks must be \[width, weight\] pairs with width >= 1 and weight > 0"):
            BlockSumFeatures(map_params={"map": "rff", "sigma": 1.0}, blocks=bad, n_components=40).fit(X)
    # the width and a DataFrame's column names of fit are checked at transform, as the other maps check them:
    # reordered columns were mapped block by block as they came, without a word
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(X, columns=[f"c{j}" for j in range(26)])
    bsf = BlockSumFeatures(map_params={"map": "rff", "sigma": 1.0}, blocks=blocks, n_components=40).fit(frame)
    assert bsf.n_features_in_ == 26 and list(bsf.feature_names_in_) == list(frame.columns)
    np.testing.assert_array_equal(bsf.transform(frame), bsf.transform(X))
    with pytest.raises(ValueError, match="The feature names should match those that were passed during fit"):
        bsf.transform(frame[frame.columns[::-1]])


def test_block_allocation():
    from streamcov.features.registry import allocate

    n = allocate(100, [0.5, 0.25, 0.125, 0.125])
    assert n.sum() == 100 and (n >= 1).all() and n[0] > n[1] > n[2]
    with pytest.raises(ValueError, match="fewer than the 4 kernel blocks"):
        allocate(3, [1, 1, 1, 1])


def test_exact_svm_with_blocks_saves_and_loads(tmp_path, rng):
    from streamcov.stream.exact import GaussianKernelSVC
    from streamcov.stream.model import dump_estimator, load_estimator

    X = rng.standard_normal((30, 8))
    y = np.arange(30) % 3
    clf = GaussianKernelSVC(sigma=0.5, C=10.0, blocks=[[3, 0.5], [5, 0.5]]).fit(X, y)
    arrays = {}
    again = load_estimator(dump_estimator(clf, "c.", arrays), arrays)
    np.testing.assert_array_equal(again.decision_function(X), clf.decision_function(X))
    with pytest.raises(ValueError, match="blocks cover 9 columns, the input has 8"):
        GaussianKernelSVC(blocks=[[4, 0.5], [5, 0.5]]).fit(X, y)


def test_schema_descriptor_options():
    from pydantic import ValidationError

    from streamcov.tasks.schema import SkeletonDescriptor as Table

    t = Table(features=["positions", "velocities"], levels=3, overlap=True, level_weights=[1.0, 1.0, 2.0])
    assert t.options()["levels"] == 3
    with pytest.raises(ValidationError, match="level_weights has 2 weights for descriptor.levels = 3"):
        Table(levels=3, level_weights=[1.0, 2.0])
    with pytest.raises(ValidationError, match="descriptor.window must be odd"):
        Table(window=4)
    with pytest.raises(ValidationError, match="names a feature twice"):
        Table(features=["positions", "positions"])
    # [6, 6] kept the centre joint as a constant zero joint; refused in the file, not when a model saved with
    # it is loaded (the joint selection itself takes it, so such a model still predicts)
    with pytest.raises(ValidationError, match=r"descriptor\.center = \[6, 6\] names a joint twice; name each joint "
                                              r"once"):
        Table(center=[6, 6])
    from streamcov.descriptors.skeleton import JointSelection

    assert JointSelection.hip_relative(8, (6, 6)).keep == tuple(range(8))


@pytest.mark.parametrize("learner", ["lbfgs", "exact-svm"])
def test_pipeline_with_pyramid_predicts_what_it_tested(tmp_path, rng, learner):
    """A pyramid with body frame through the engine: the saved model (block map or block kernel)
    predicts the test rows as the run did."""
    from pathlib import Path

    from streamcov.stream.predict import predict
    from streamcov.tasks import run as run_pipeline
    from streamcov.tasks.config import load_config

    seqs = sequences(rng, rng.integers(6, 25, size=48))
    store = ingest(ListSource(seqs, ROLES), tmp_path / "s.zarr", chunk_frames=16)
    repo = Path(__file__).resolve().parents[1]
    sets = [f'output="{tmp_path}/out"', "dask.block_size=8",
            'descriptor.features=["positions", "velocities"]', "descriptor.levels=2", "descriptor.overlap=true",
            'descriptor.body_frame="yaw"', 'descriptor.scale="body"', "descriptor.mean_weight=0.3"]
    if learner == "lbfgs":    # the exact file's map is "none", which reads no n_components
        sets.append("features.n_components=400")
    name = "msr_action3d.toml" if learner == "lbfgs" else "msr_action3d_exact.toml"
    res = run_pipeline(load_config(repo / "pipelines" / name, sets, store=store.path), scheduler="synchronous")
    assert res["descriptor_dim"] == 4 * (2 * 15 + 1) * (2 * 15 + 2) // 2
    out = predict(Path(res["model_path"]), store.path, tmp_path / "p.csv", scheduler="synchronous")
    ran, again = predictions(res["predictions_path"]), predictions(tmp_path / "p.csv")
    assert ran and all(again[i] == p for i, p in ran.items())
    assert out is not None


@pytest.mark.parametrize("module", ["msr_action3d", "florence3d", "utkinect"])
def test_reader_roles_name_the_right_joints(module):
    import importlib

    from streamcov.data.readers import known_roles

    mod = importlib.import_module(f"streamcov.data.readers.{module}")
    names = mod.JOINT_NAMES
    for role in ("left_hip", "right_hip", "left_shoulder", "right_shoulder", "spine", "head"):
        assert [names[j] for j in mod.ROLES[role]] == [role], role
    assert names[mod.ROLES["neck"][0]] in ("neck", "shoulder_center")
    source = {"msr_action3d": "msr-action3d"}.get(module, module)
    assert known_roles(source, mod.N_JOINTS) == mod.ROLES
    assert known_roles(source, mod.N_JOINTS + 1) == {} and known_roles("generic", 20) == {}


def test_generic_reader_records_roles(tmp_path):
    from streamcov.data.readers import open_reader

    (tmp_path / "a.csv").write_text("\n".join(",".join(str(v) for v in np.arange(12) + t) for t in range(4)))
    (tmp_path / "index.csv").write_text("file,label,subject\na.csv,x,1\n")
    r = open_reader("generic", tmp_path, roles={"left_hip": [1], "right_hip": 2})
    assert r.info.roles == {"left_hip": [1], "right_hip": [2]}
    with pytest.raises(ConfigError, match="roles: unknown role 'left_hips'"):
        open_reader("generic", tmp_path, roles={"left_hips": [1]})


def test_a_chunk_task_holds_the_moments_of_its_blocks_sequences_only(tmp_path, monkeypatch):
    """A chunk task computed the window moments of every sequence of its chunk of the store (65,536 frames:
    about 1,450 short sequences, 1.5 GiB at 11 windows of 114 x 114), whatever the block size; each block now
    has its own task per chunk it touches, over the frames its sequences hold (the chunk read once for all of
    them), and its sequences' moments are the bits the task over the whole chunk gives them."""
    from streamcov.data.synth import SyntheticSkeletons
    from streamcov.stream import skeleton as stream_sk

    store = ingest(SyntheticSkeletons(n_sequences=60, n_subjects=3, n_classes=3, seed=4), tmp_path / "s.zarr",
                   chunk_frames=1 << 16)
    assert store.n_frames < store.chunk_frames   # one chunk holds every sequence
    opts = dict(features=["positions", "velocities"], levels=2, overlap=True, body_frame="yaw", scale="body")
    src = skeleton_source(store, "store", **opts)
    calls, reads = [], []
    real, real_read = stream_sk.windows_of_frames, stream_sk.read_frames

    def recording(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append((args, out))
        return out

    def reading(*args, **kwargs):
        reads.append(args[1:3])
        return real_read(*args, **kwargs)

    monkeypatch.setattr(stream_sk, "windows_of_frames", recording)
    monkeypatch.setattr(stream_sk, "read_frames", reading)
    descriptor_array(src, block=8).compute(scheduler="synchronous")
    assert len(calls) == -(-60 // 8) and max(len(out[1]) for _, out in calls) <= 8
    assert reads == [(0, store.n_frames)]   # the chunk is read once, for every block it holds
    path, offsets, plan = str(store.path), store.offsets, src.plan
    s_all, *whole = real(real_read(path, 0, store.n_frames), 0, 0, store.n_frames, offsets, plan)
    for args, (s_lo, *part) in calls:
        k = len(part[0])
        for a, b in zip(part, whole):
            np.testing.assert_array_equal(a, b[s_lo - s_all:s_lo - s_all + k])


PYRAMIDS = [dict(features=["positions", "velocities"], levels=3, overlap=True, body_frame="yaw", scale="body",
                 mean_weight=1.0, mirror=True),   # the shipped pyramid, with the mirror view
            dict(features=["positions", "accelerations"], window=7, body_frame="torso-frames")]   # a halo of 6


def _recording_rows(monkeypatch, src, rows, bounds):
    """``rows_of(src, rows)`` and the frames its chunk tasks computed moments over, and every row's descriptor."""
    from streamcov.stream import skeleton as stream_sk
    from streamcov.stream.featurize import rows_of
    from streamcov.stream.runtime import dask_runtime

    name = "moments_of_frames" if src.plan is None else "windows_of_frames"
    frames_in = []
    real = getattr(stream_sk, name)

    def recording(frames, r0, c0, c1, *args, **kwargs):
        frames_in.append(c1 - c0)
        return real(frames, r0, c0, c1, *args, **kwargs)

    with dask_runtime("synchronous") as rt:
        whole = rows_of(src, np.arange(src.n), bounds, rt)
        monkeypatch.setattr(stream_sk, name, recording)
        some = rows_of(src, rows, bounds, rt)
    return some, frames_in, whole


ROWS = np.array([0, 1, 2, 9, 15, 16, 17, 30, 41, 42, 49])


@pytest.mark.parametrize("opts", PYRAMIDS)
def test_a_few_rows_of_a_pyramid_are_computed_from_their_own_frames(tmp_path, monkeypatch, opts):
    """A fit sample (a few rows of a block) computed the window moments of every sequence of the blocks it
    touched: a sample of 256 rows computed nearly the whole store. The moments of the runs of rows asked for
    now come from their own frames (across chunk boundaries, with the halo of the derivatives), the logs of
    the rows asked for as before."""
    from streamcov.data.synth import SyntheticSkeletons
    from streamcov.stream.source import block_bounds

    store = ingest(SyntheticSkeletons(n_sequences=50, n_subjects=3, n_classes=3, seed=6), tmp_path / "s.zarr",
                   chunk_frames=300)   # about 7 sequences per chunk: runs cross chunk boundaries
    src = skeleton_source(store, "store", 1e-2, True, **opts)
    some, frames_in, whole = _recording_rows(monkeypatch, src, ROWS, block_bounds(src.n, 16))
    lengths = np.diff(store.offsets)
    assert sum(frames_in) == lengths[ROWS].sum() < store.n_frames / 3   # the frames of the rows asked for only
    # the eigensolver runs 8 matrices in lockstep (_kernels/symeig: LANES), so a row's last bits depend on the
    # rows computed with it: those asked for in its block, not the whole block (so before too): equal to 1e-13
    # (unit-norm rows, entries up to 1; float64's eps is 2.2e-16)
    np.testing.assert_allclose(some, whole[ROWS], rtol=0, atol=1e-13)


def test_the_moments_of_a_few_rows_are_the_bits_of_their_block(tmp_path, monkeypatch):
    """The rows asked for get the descriptors computed from the whole block's moments, bit for bit: what the
    fit sample computed before its moments were cut to its rows."""
    from streamcov.data.synth import SyntheticSkeletons
    from streamcov.stream import skeleton as stream_sk
    from streamcov.stream.source import block_bounds

    store = ingest(SyntheticSkeletons(n_sequences=50, n_subjects=3, n_classes=3, seed=6), tmp_path / "s.zarr",
                   chunk_frames=1 << 16)   # one chunk: each sequence one piece, in either computation
    src = skeleton_source(store, "store", 1e-2, True, **PYRAMIDS[0])
    bounds = block_bounds(src.n, 16)
    some, _, _ = _recording_rows(monkeypatch, src, ROWS, bounds)
    offsets, frames = store.offsets, stream_sk.read_frames(str(store.path), 0, store.n_frames)
    want = []
    for b0, b1 in zip(bounds[:-1], bounds[1:]):
        local = ROWS[(ROWS >= b0) & (ROWS < b1)] - b0
        block = stream_sk.windows_of_frames(frames, 0, offsets[b0], offsets[b1], offsets, src.plan)
        want.append(stream_sk.block_pyramid(b0, b1, [block], src.plan, np.diff(offsets[b0:b1 + 1]),
                                            src.descriptor.dtype, local))
    assert some.tobytes() == np.concatenate(want).tobytes()


def test_a_few_rows_of_the_plain_descriptor_are_their_blocks_rows(tmp_path, monkeypatch):
    """Paper 000's descriptor takes the logs of the whole block whatever rows are asked (its moments are
    cheap), so a row's bits do not depend on the rows asked with it."""
    from streamcov.data.synth import SyntheticSkeletons
    from streamcov.stream.source import block_bounds

    store = ingest(SyntheticSkeletons(n_sequences=50, n_subjects=3, n_classes=3, seed=6), tmp_path / "s.zarr",
                   chunk_frames=300)
    src = skeleton_source(store, "store", 1e-2, True)
    some, frames_in, whole = _recording_rows(monkeypatch, src, ROWS, block_bounds(src.n, 16))
    assert some.tobytes() == whole[ROWS].tobytes()
    assert sum(frames_in) == store.n_frames   # every block holds a row asked for: all of them computed
