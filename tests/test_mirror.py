"""The mirror view of the skeleton descriptor: left and right joints paired by name, the sequence and its
mirror image as two views of one kernel averaged over the pairs of views (streamcov.kernels). Against slow
references; the group identity (a mirrored sequence has the same kernel row); the maps and the exact SVM
with views; the engine end to end; the errors."""
import numpy as np
import pytest

import reference as ref
from conftest import predictions
from streamcov.data.readers import SkeletonInfo, SkeletonReader, SkeletonSequence
from streamcov.data.skeletons import ingest
from streamcov.descriptors import skeleton as sk
from streamcov.errors import ConfigError
from streamcov.kernels import block_distances, block_gaussian_kernel, block_kernel, check_blocks
from streamcov.stream.skeleton import descriptor_array, skeleton_source

NAMES = ["hip_center", "left_hip", "right_hip", "neck", "left_hand", "right_hand"]
PAIRS = [(1, 2), (4, 5)]
ROLES = {"hip_center": [0], "left_hip": [1], "right_hip": [2], "neck": [3]}
J = len(NAMES)
OPTIONS = dict(features=["positions", "velocities"], levels=2, overlap=True, body_frame="yaw", scale="body",
               mean_weight=1.0)


class ListSource(SkeletonReader):
    def __init__(self, seqs, names=NAMES, roles=ROLES):
        super().__init__()
        self.seqs = seqs
        self.info = SkeletonInfo(n_joints=J, joint_names=list(names), units="m", source="test", center=(0,),
                                 roles=dict(roles))

    def sequences(self):
        yield from self.seqs


def walk(rng, T):
    X = rng.standard_normal((T, 3 * J)).cumsum(0) * 0.1 + rng.standard_normal(3 * J)
    return X.astype(np.float32)


def sequences(rng, lengths, mirrored=False):
    out = []
    for i, T in enumerate(lengths):
        X = walk(rng, T)
        out.append(SkeletonSequence(id=f"s{i:03d}", frames=X, label=f"c{i % 3}", subject=i % 4 + 1))
        if mirrored:
            out.append(SkeletonSequence(id=f"m{i:03d}", frames=ref.mirror_sequence(X, PAIRS).astype(np.float32),
                                        label=f"c{i % 3}", subject=i % 4 + 1))
    return out


@pytest.mark.parametrize("names,pairs", [
    (NAMES, {1: 2, 4: 5}),
    (["root", "lhipjoint", "rhipjoint", "lfemur", "rfemur", "lowerback", "head"], {1: 2, 3: 4}),   # ASF
    (["LASI", "RASI", "C7", "LSHO", "RSHO"], {0: 1, 3: 4}),                                         # C3D markers
    (["Hips", "LeftUpLeg", "RightUpLeg", "Spine", "LeftArm", "RightArm"], {1: 2, 4: 5}),            # BVH
    (["hand.L", "hand.R", "spine", "foot_l", "foot_r"], {0: 1, 3: 4}),
    (["Bip01_Pelvis", "Bip01_L_Thigh", "Bip01_R_Thigh", "Bip01 L Foot", "Bip01 R Foot", "hip_l_joint", "hip_r_joint"],
     {1: 2, 3: 4, 5: 6}),                                                                           # Biped, spaces
    (["root", "lowerback", "upperback", "lclavicle", "rclavicle", "RBAK"], {3: 4}),   # no side: 'lowerback', RBAK
    # camel case closed by a side letter, beside names that spell it: HipL/HipR stayed unswapped (a mirror view
    # with the hips on the wrong side, accepted since the hands paired)
    (["Pelvis", "HipL", "HipR", "KneeL", "KneeR", "Neck", "HandLeft", "HandRight", "Joint2L", "Joint2R", "SHELL"],
     {1: 2, 3: 4, 6: 7, 8: 9}),
])
def test_mirror_permutation_pairs_by_name(names, pairs):
    perm = sk.mirror_permutation(names)
    want = list(range(len(names)))
    for a, b in pairs.items():
        want[a], want[b] = b, a
    assert list(perm) == want
    assert all(perm[perm[j]] == j for j in range(len(names)))   # an involution


def test_mirror_permutation_errors():
    with pytest.raises(ValueError, match="no joint names pair left with right"):
        sk.mirror_permutation(["j0", "j1", "j2"])
    with pytest.raises(ValueError, match="pair ambiguously"):
        sk.mirror_permutation(["lhand_r", "rhand_r", "lhand_l"])   # lhand_r would be the counterpart of two
    # a name that says its side but has no counterpart would stay on its side in the mirror image
    with pytest.raises(ValueError, match=r"joints \['Bip01_L_Thigh'\] name a side but no joint is named as their "
                                         r"other side"):
        sk.mirror_permutation(["LeftHand", "RightHand", "Bip01_L_Thigh"])


def test_mirror_frames_against_reference(rng):
    X = walk(rng, 7)
    perm = sk.mirror_permutation(NAMES)
    np.testing.assert_array_equal(sk.mirror_frames(X.astype(np.float64), perm, 0), ref.mirror_sequence(X, PAIRS))
    np.testing.assert_array_equal(sk.mirror_frames(sk.mirror_frames(X, perm, 2), perm, 2), X)   # an involution


def test_streamed_mirror_view_equals_in_memory_reference(tmp_path, rng):
    """Tiny chunks cut most sequences; the second view is the reference descriptor of the mirror image."""
    seqs = sequences(rng, [2, 3, 4, 7, 12, 30, 9, 5, 17, 2, 6])
    store = ingest(ListSource(seqs), tmp_path / "s.zarr", chunk_frames=4)
    source = skeleton_source(store, "store", 1e-3, True, mirror=True, **OPTIONS)
    plan = source.plan
    assert plan.views == 2 and plan.mirror_axis == 0 and source.kernel_views == 2
    V = descriptor_array(source, block=3).compute()
    assert V.shape == (len(seqs), source.dim) and source.dim == 2 * plan.view_dim

    def reference(X):
        return ref.pyramid_descriptor(X, J, (0,), [1, 2, 3, 4, 5], features=("positions", "velocities"),
                                      levels=2, overlap=True, yaw=([1], [2]), neck=[3], mean_weight=1.0,
                                      gamma=1e-3)

    for i, s in enumerate(seqs):
        X = np.asarray(s.frames, dtype=np.float64)
        np.testing.assert_allclose(V[i, :plan.view_dim], reference(X), atol=1e-8)
        np.testing.assert_allclose(V[i, plan.view_dim:], reference(ref.mirror_sequence(X, PAIRS)), atol=1e-8)
    frames, offsets = sk.pack_sequences([s.frames for s in seqs])
    np.testing.assert_allclose(sk.pyramid_vectors(frames, offsets, plan), V, atol=1e-8)
    # without the mirror, the first view is the descriptor as it was
    V1 = descriptor_array(skeleton_source(store, "store", 1e-3, True, **OPTIONS), block=3).compute()
    np.testing.assert_array_equal(V[:, :plan.view_dim], V1)


def test_a_mirrored_sequence_swaps_the_views_and_keeps_its_kernel_row(tmp_path, rng):
    """The group identity: descriptor(m x) = [v(m x), v(x)], so k(m x, .) = k(x, .) for the view-mean kernel."""
    seqs = sequences(rng, [9, 14, 21, 30], mirrored=True)      # x0, m x0, x1, m x1, ...
    store = ingest(ListSource(seqs), tmp_path / "s.zarr", chunk_frames=8)
    source = skeleton_source(store, "store", 1e-3, True, mirror=True, **OPTIONS)
    V = descriptor_array(source, block=4).compute()
    h = source.plan.view_dim
    np.testing.assert_allclose(V[1::2], np.hstack([V[0::2, h:], V[0::2, :h]]), atol=1e-9)
    blocks = [list(b) for b in source.kernel_blocks]
    K = block_gaussian_kernel(V, None, blocks, 1.0, views=2)
    np.testing.assert_allclose(K[0::2], K[1::2], atol=1e-9)
    # without the mirror view the kernel tells them apart
    K1 = block_gaussian_kernel(V[:, :h], None, blocks, 1.0)
    assert np.abs(K1[0::2] - K1[1::2]).max() > 1e-3


def test_view_kernel_against_reference(rng):
    blocks = [[3, 0.5], [4, 0.5]]
    X, Y = rng.standard_normal((9, 14)), rng.standard_normal((5, 14))
    want = ref.view_mean_gram(X, Y, blocks, 0.8, 2)
    np.testing.assert_allclose(block_gaussian_kernel(X, Y, blocks, 0.8, views=2), want, atol=1e-12)
    np.testing.assert_allclose(block_kernel(block_distances(X, Y, blocks, 2), blocks, 0.8, 2), want, atol=1e-12)
    K = block_gaussian_kernel(X, None, blocks, 0.8, views=2)
    np.testing.assert_allclose(K, ref.view_mean_gram(X, X, blocks, 0.8, 2), atol=1e-12)
    np.testing.assert_array_equal(K, K.T)
    assert np.linalg.eigvalsh(K).min() > -1e-12                  # positive semidefinite
    # one set of rows (the exact SVM's Gram matrix): the cross-view terms are computed once, transposed
    d2 = block_distances(X, None, blocks, 2)
    assert len(d2) == 8 and np.shares_memory(d2[2], d2[4])
    np.testing.assert_allclose(block_kernel(d2, blocks, 0.8, 2), ref.view_mean_gram(X, X, blocks, 0.8, 2), atol=1e-12)
    # one block per view, no blocks given: the plain Gaussian kernel of each view
    np.testing.assert_allclose(block_gaussian_kernel(X, Y, None, 0.8, views=2),
                               ref.view_mean_gram(X, Y, [[7, 1.0]], 0.8, 2), atol=1e-12)
    with pytest.raises(ValueError, match=r"blocks cover 16 columns \(2 views\), the input has 14"):
        check_blocks([[4, 0.5], [4, 0.5]], 14, 2)
    with pytest.raises(ValueError, match="15 columns do not split into 2 views"):
        check_blocks(None, 15, 2)
    # the public kernel functions check them too: blocks that missed columns, or views that did not divide
    # them, were a kernel of other columns without a word, and a list of the wrong length lost terms
    for f in (lambda: block_gaussian_kernel(X, None, [[4, 0.5]], 0.8, views=2),
              lambda: block_distances(X, Y, [[4, 0.5]], 2)):
        with pytest.raises(ValueError, match=r"blocks cover 8 columns \(2 views\), the input has 14"):
            f()
    with pytest.raises(ValueError, match="14 columns do not split into 3 views"):
        block_gaussian_kernel(X, None, None, 0.8, views=3)
    with pytest.raises(ValueError, match=r"d2: expected the 8 arrays of block_distances\(X, Y, blocks, views\) "
                                         r"for 2 block\(s\) and 2 view\(s\), got 7"):
        block_kernel(d2[:7], blocks, 0.8, 2)
    with pytest.raises(ValueError, match="views must be an integer >= 1, got 0"):
        block_kernel(d2, blocks, 0.8, 0)


def test_nystroem_with_views_is_exact_on_its_landmarks(rng):
    from streamcov.features import GaussianNystroem

    blocks = [[3, 0.25], [4, 0.75]]
    X = rng.standard_normal((30, 14))
    nys = GaussianNystroem(n_components=30, sigma=1.5, blocks=blocks, views=2, random_state=0).fit(X)
    Z = nys.transform(X)
    np.testing.assert_allclose(Z @ Z.T, ref.view_mean_gram(X, X, blocks, 1.5, 2), atol=1e-8)
    Xs = rng.standard_normal((4, 14))
    want = ref.view_mean_gram(Xs, X, blocks, 1.5, 2) @ np.linalg.pinv(ref.view_mean_gram(X, X, blocks, 1.5, 2)) \
        @ ref.view_mean_gram(X, Xs, blocks, 1.5, 2)
    np.testing.assert_allclose(nys.transform(Xs) @ nys.transform(Xs).T, want, atol=1e-6)
    swapped = np.hstack([Xs[:, 7:], Xs[:, :7]])
    np.testing.assert_allclose(nys.transform(swapped), nys.transform(Xs), atol=1e-10)   # invariant


def test_block_maps_with_views_average_the_views(rng):
    """Each block's random features are its map's mean over the views: exactly, and E <z, z'> is the view-mean
    kernel (20000 features: the error of a mean of bounded features is about 1/sqrt(20000) = 0.007 per
    entry; 0.05 leaves room for the largest of 900 entries)."""
    from streamcov.features.registry import fit_feature_map

    blocks = [[6, 0.5], [10, 0.5]]
    X = rng.standard_normal((30, 32))
    for a in (0, 6, 16, 22):
        X[:, a:a + (6 if a in (0, 16) else 10)] /= np.linalg.norm(X[:, a:a + (6 if a in (0, 16) else 10)], axis=1,
                                                                  keepdims=True)
    fmap, _ = fit_feature_map({"map": "rff", "n_components": 20000, "sigma": 1.0, "blocks": blocks, "views": 2},
                              3, 32)
    Z = fmap.transform(X)
    z0 = fmap.block0_.transform(X[:, 0:6]) + fmap.block0_.transform(X[:, 16:22])
    np.testing.assert_allclose(Z[:, :z0.shape[1]], z0 * np.sqrt(0.5) / 2, atol=1e-12)
    assert np.abs(Z @ Z.T - ref.view_mean_gram(X, X, blocks, 1.0, 2)).max() < 0.05
    with pytest.raises(ValueError, match=r"^X has 16 features, but BlockSumFeatures is expecting 32 features as "
                                         r"input \(the columns its kernel blocks cover, 2 views\)$"):
        fmap.transform(X[:, :16])


def test_exact_svm_with_views_is_invariant_and_saves(rng):
    from streamcov.stream.exact import GaussianKernelSVC
    from streamcov.stream.model import dump_estimator, load_estimator

    X = rng.standard_normal((30, 8))
    y = np.arange(30) % 3
    clf = GaussianKernelSVC(sigma=0.7, C=10.0, blocks=[[2, 0.5], [2, 0.5]], views=2).fit(X, y)
    swapped = np.hstack([X[:, 4:], X[:, :4]])
    np.testing.assert_allclose(clf.decision_function(swapped), clf.decision_function(X), atol=1e-10)
    arrays = {}
    again = load_estimator(dump_estimator(clf, "c.", arrays), arrays)
    np.testing.assert_array_equal(again.decision_function(X), clf.decision_function(X))


def test_mirror_needs_left_and_right_joint_names(tmp_path, rng):
    store = ingest(ListSource(sequences(rng, [5, 6]), names=[f"j{i}" for i in range(J)]), tmp_path / "s.zarr",
                   chunk_frames=4)
    with pytest.raises(ConfigError, match=r"descriptor.mirror = true swaps left and right joints, found by their "
                                          r"names, but the store's joint names \(j0, j1, .*no joint names pair"):
        skeleton_source(store, "store", mirror=True)


def test_mirror_settings_and_fingerprint(tmp_path, rng):
    from pydantic import ValidationError

    from streamcov.stream.skeleton import SkeletonDescriptor, SkeletonSource
    from streamcov.tasks.schema import SkeletonDescriptor as Table

    store = ingest(ListSource(sequences(rng, [5, 9])), tmp_path / "s.zarr", chunk_frames=4)
    off = skeleton_source(store, "store", 1e-3, True, **OPTIONS)
    on = skeleton_source(store, "store", 1e-3, True, mirror=True, **OPTIONS)
    # settings made before the option keep their fingerprint; the option enters it only when used
    assert "mirror" not in off.descriptor.as_dict() and on.descriptor.as_dict()["mirror"] is True
    again = SkeletonSource.from_spec(on.spec(), store)
    assert again.descriptor == on.descriptor and again.dim == on.dim and again.kernel_views == 2
    # the mirror alone is an option: not paper 000's plain descriptor
    assert skeleton_source(store, "store", 1e-3, True, mirror=True).plan.views == 2
    with pytest.raises(ValueError, match="mirror must be true or false"):
        SkeletonDescriptor(center=(0,), mirror="yes")
    assert Table(mirror=True, up_axis="z").options()["mirror"] is True     # the mirror reads the up axis
    with pytest.raises(ValidationError, match='descriptor.up_axis = "z" is not read'):
        Table(up_axis="z")


@pytest.mark.parametrize("learner", ["lbfgs", "rgw", "exact-svm"])
def test_pipeline_with_mirror_predicts_what_it_tested(tmp_path, rng, learner):
    """The mirror view through the engine (Nystroem map of the view-mean kernel, the eq. (3) map of each window
    averaged over the views, or the exact SVM's): the saved model predicts the test rows as the run did, also on
    a store of the same layout that records no joint names (the generic format's joint0, joint1, ...: the model's
    names pair the joints)."""
    from pathlib import Path

    from streamcov.stream.predict import predict
    from streamcov.tasks import run as run_pipeline
    from streamcov.tasks.config import load_config

    seqs = sequences(rng, rng.integers(6, 25, size=48))
    store = ingest(ListSource(seqs), tmp_path / "s.zarr", chunk_frames=16)
    repo = Path(__file__).resolve().parents[1]
    sets = [f'output="{tmp_path}/out"', "dask.block_size=8", "descriptor.mirror=true", "descriptor.levels=2"]
    if learner == "rgw":
        sets += ['features.map="rgw"', "features.n_components=400", "features.center=true"]
    name = "msr_action3d_exact.toml" if learner == "exact-svm" else "msr_action3d.toml"
    res = run_pipeline(load_config(repo / "pipelines" / name, sets, store=store.path), scheduler="synchronous")
    d = (2 * 3 * 5 + 1) * (2 * 3 * 5 + 2) // 2
    assert res["descriptor_dim"] == 2 * 4 * d           # two views of 4 windows
    ran = predictions(res["predictions_path"])
    unnamed = ingest(ListSource(seqs, names=[f"joint{i}" for i in range(J)]), tmp_path / "unnamed.zarr", chunk_frames=16)
    for name, st in (("p.csv", store), ("q.csv", unnamed)):
        out = predict(Path(res["model_path"]), st.path, tmp_path / name, scheduler="synchronous")
        again = predictions(tmp_path / name)
        assert out is not None and ran and all(again[i] == p for i, p in ran.items()), name


def test_mirror_with_a_linear_learner_on_raw_descriptors_is_refused(tmp_path, rng):
    from pathlib import Path

    from streamcov.tasks import run as run_pipeline
    from streamcov.tasks.config import load_config

    store = ingest(ListSource(sequences(rng, rng.integers(6, 15, size=12))), tmp_path / "s.zarr", chunk_frames=16)
    repo = Path(__file__).resolve().parents[1]
    cfg = load_config(repo / "pipelines" / "msr_action3d.toml",
                      [f'output="{tmp_path}/out"', "descriptor.mirror=true", 'features.map="none"'], store=store.path)
    with pytest.raises(ConfigError, match=r'descriptor.mirror = true averages the kernel over the sequence and its '
                                          r'mirror image, but features.map = "none" gives the linear learner'):
        run_pipeline(cfg, scheduler="synchronous")


def test_features_views_is_refused():
    from pydantic import ValidationError

    from streamcov.tasks.schema import FeaturesTable

    with pytest.raises(ValidationError, match="features.views: the views of a row .* set by streamcov from "
                                              "descriptor.mirror; remove it"):
        FeaturesTable(map="nystroem", views=2)


def test_median_bandwidth_is_measured_on_one_view(rng):
    """``bandwidth = "median"`` scales sigma by the median distance between rows of one view (the kernel compares
    views one to one), not of the two-view row (about sqrt(2) times larger)."""
    from streamcov.features.registry import fit_feature_map
    from streamcov.kernels import distances, median_distance

    X = rng.standard_normal((40, 14))
    _, record = fit_feature_map({"map": "nystroem", "n_components": 40, "sigma": 1.0, "bandwidth": "median",
                                 "blocks": [[7, 1.0]], "views": 2}, 0, 14, sample=X)
    assert np.isclose(record["median_distance"], median_distance(distances(X[:, :7])))


def test_exact_svm_memory_is_checked_before_it_runs(tmp_path, rng, monkeypatch):
    """The exact SVM holds a training x training distance matrix per kernel term (windows x pairs of views): a fit
    that cannot fit is refused with one line before anything is computed, not left to the operating system."""
    from pathlib import Path

    from streamcov import _config
    from streamcov.tasks import run as run_pipeline
    from streamcov.tasks.config import load_config

    store = ingest(ListSource(sequences(rng, rng.integers(6, 15, size=16))), tmp_path / "s.zarr", chunk_frames=16)
    repo = Path(__file__).resolve().parents[1]
    cfg = load_config(repo / "pipelines" / "msr_action3d_exact.toml",
                      [f'output="{tmp_path}/out"', "descriptor.mirror=true", "descriptor.levels=2",
                       "dask.block_size=1"], store=store.path)
    # one sequence's block: 3 x 8 bytes x 4 windows x 2 views x 30^2 = 173 kB, within the machine; the descriptors
    # (16 x 3968 x 8 bytes = 508 kB) and distance matrices are not
    monkeypatch.setattr(_config, "total_memory", lambda: 300e3)
    with pytest.raises(ConfigError, match=r'model.learner = "exact-svm" on 8 training rows with 16 kernel term\(s\) '
                                          r'\(4 window\(s\) x 4 pairs of views\): needs .* this process may use 293\.0 '
                                          r'KiB; use a streamed learner'):
        run_pipeline(cfg, scheduler="synchronous")
    monkeypatch.undo()
    res = run_pipeline(cfg, scheduler="synchronous")             # the same run with this machine's memory
    assert (res["feature_map"], res["n_train"], res["descriptor_dim"]) == ("exact", 8, 2 * 4 * 31 * 32 // 2)


def test_a_model_refuses_a_store_of_another_layout(tmp_path, rng):
    """The same joint count is not the same layout (Kinect v2 and OpenPose BODY_25 both have 25 joints): a saved
    model's source refuses a store whose joint names, or whose roles, differ from the model's; a store that
    records placeholder names (joint0, joint1, ...) and no roles takes the model's, and gets its descriptors."""
    from streamcov.stream.skeleton import SkeletonSource

    seqs = sequences(rng, [6, 7, 9])
    store = ingest(ListSource(seqs), tmp_path / "a.zarr", chunk_frames=8)
    src = skeleton_source(store, "store", mirror=True, **OPTIONS)
    spec = src.spec()
    assert spec["roles"] == ROLES and spec["joint_names"] == NAMES
    other = ingest(ListSource(seqs, names=NAMES[::-1]), tmp_path / "b.zarr", chunk_frames=8)
    with pytest.raises(ConfigError, match=r"b.zarr: joint 0 is 'right_hand', but the model was trained on a skeleton "
                                          r"whose joint 0 is 'hip_center'; use a store of the same skeleton layout"):
        SkeletonSource.from_spec(spec, other)
    swapped = ingest(ListSource(seqs, roles={**ROLES, "left_hip": [2], "right_hip": [1]}), tmp_path / "c.zarr",
                     chunk_frames=8)
    with pytest.raises(ConfigError, match=r"c.zarr: the store's left_hip is joint\(s\) \[2\], the model's \[1\] "
                                          r"\(roles differing: left_hip, right_hip\)"):
        SkeletonSource.from_spec(spec, swapped)
    bare = ingest(ListSource(seqs, names=[f"joint{j}" for j in range(J)], roles={}), tmp_path / "d.zarr",
                  chunk_frames=8)
    with pytest.raises(ConfigError, match="needs the joint roles"):
        skeleton_source(bare, "store", mirror=False, **OPTIONS)    # without a model: no roles, no body frame
    again = SkeletonSource.from_spec(spec, bare)
    assert again.roles == ROLES and again.joint_names == NAMES
    np.testing.assert_array_equal(descriptor_array(again, block=2).compute(), descriptor_array(src, block=2).compute())
    # a model saved before roles were recorded: the store's own roles, as before
    old = {k: v for k, v in spec.items() if k != "roles"}
    assert SkeletonSource.from_spec(old, swapped).roles == {**ROLES, "left_hip": [2], "right_hip": [1]}
    SkeletonSource.check_spec(spec)
    with pytest.raises(ValueError, match=r"roles must name lists of joints in 0..5, got \{'neck': \[9\]\}"):
        SkeletonSource.check_spec({**spec, "roles": {"neck": [9]}})     # a damaged model file


def test_descriptor_blocks_that_cannot_fit_are_refused_with_a_block_size_that_fits(tmp_path, rng, monkeypatch):
    """A block task holds the d x d moments of every window (and view) of its sequences, three times (as the chunk
    tasks give them, merged, and the matrices): with wide skeletons (135 joints: 805 x 805) a block of 64 needs
    gigabytes. A block size that cannot fit is refused before anything runs, naming one that fits."""
    from pathlib import Path

    from streamcov import _config
    from streamcov.tasks import run as run_pipeline
    from streamcov.tasks.classify import _check_block_memory
    from streamcov.tasks.config import load_config

    store = ingest(ListSource(sequences(rng, rng.integers(6, 15, size=16))), tmp_path / "s.zarr", chunk_frames=16)
    src = skeleton_source(store, "store", **OPTIONS)
    assert src.block_bytes(10) == 3 * 8.0 * 10 * src.plan.n_windows * 30 ** 2   # 6 joints, hip-relative: 2 x 15
    repo = Path(__file__).resolve().parents[1]
    cfg = load_config(repo / "pipelines" / "msr_action3d.toml", [f'output="{tmp_path}/out"'], store=store.path)
    per = 3 * 8.0 * 11 * 30 ** 2     # the file's 11 windows
    monkeypatch.setattr(_config, "total_memory", lambda: 10 * per)
    # the file's block size is 64, but the store holds 16 sequences: one block of 16 is what runs
    with pytest.raises(ConfigError, match=r"dask.block_size = 64 \(1 block\(s\) of up to 16 sequences at a time, "
                                          r"their descriptor moments\): needs 3\.6 MiB of memory, this process may use "
                                          r"2\.3 MiB; lower dask.block_size \(to 5 or less; or use fewer "
                                          r"descriptor.levels or joints\)"):
        run_pipeline(cfg, scheduler="synchronous")
    big = skeleton_source(store, "store", **{**OPTIONS, "levels": 3, "overlap": True})
    bounds = np.arange(0, 17, 5).tolist() + [16]             # blocks of 5, 5, 5 and 1
    _check_block_memory(big, 5, bounds, 1)                    # the size named fits
    with pytest.raises(ConfigError, match=r"dask.block_size = 5 \(3 block\(s\) of up to 5 sequences"):
        _check_block_memory(big, 5, bounds, 3)                # three at a time do not
    _check_block_memory(big, 5, [0, 2], 8)                    # 8 threads, but one block of 2 sequences


def test_the_joints_the_mirror_swaps_are_part_of_the_features_identity_and_of_a_model(tmp_path, rng):
    """The mirror's pairs come from a naming rule, which changed (HipL/HipR pair since 2026-12-01): the swap is
    part of the feature store's identity (a store of the old pairs is not reused) and of a saved model's spec,
    whose swap predict keeps whatever the rule finds today; a model saved without it, whose names the old rule
    paired otherwise, is refused rather than given other descriptors than it was trained on."""
    from streamcov.errors import ModelError
    from streamcov.stream.skeleton import SkeletonSource

    names = ["Pelvis", "HipL", "HipR", "Neck", "HandLeft", "HandRight"]
    store = ingest(ListSource(sequences(rng, [20, 25, 30]), names=names), tmp_path / "s.zarr")
    src = skeleton_source(store, "store", mirror=True, **OPTIONS)
    assert src.identity()["mirror_swap"] == [0, 2, 1, 3, 5, 4] == src.spec()["mirror_swap"]
    assert "mirror_swap" not in skeleton_source(store, "store", **OPTIONS).identity()
    kept = dict(src.spec(), mirror_swap=[0, 1, 2, 3, 5, 4])   # a model whose rule paired the hands only
    assert SkeletonSource.from_spec(kept, store).plan.mirror == (0, 1, 2, 3, 5, 4)
    legacy = {k: v for k, v in src.spec().items() if k != "mirror_swap"}
    with pytest.raises(ModelError, match=r"^the model's mirror view swaps the joints by the naming rule of its "
                                         r"version, which did not pair names closed by a side letter \(HipL/HipR\)"):
        SkeletonSource.from_spec(legacy, store)
    plain = ingest(ListSource(sequences(rng, [20, 25])), tmp_path / "p.zarr")   # left_/right_ names: one rule
    spec = {k: v for k, v in skeleton_source(plain, "store", mirror=True, **OPTIONS).spec().items()
            if k != "mirror_swap"}
    assert SkeletonSource.from_spec(spec, plain).plan.mirror == (0, 2, 1, 3, 5, 4)
    with pytest.raises(ValueError, match=r"mirror_swap must be a permutation of 0\.\.5 that is its own inverse"):
        SkeletonSource.check_spec(dict(src.spec(), mirror_swap=[1, 2, 0, 3, 4, 5]))
