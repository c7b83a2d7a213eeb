"""Forward kinematics on hand-built skeletons whose positions are known in closed form."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcov.data.readers.kinematics import (Skeleton, acclaim_local_rotations, axis_rotations, bone_lengths,
                                depth_levels, euler_matrix, forward_kinematics)

X, Y, Z = np.eye(3)


def test_elementary_rotations_are_right_handed():
    a = np.pi / 2
    np.testing.assert_allclose(axis_rotations("Z", a) @ X, Y, atol=1e-15)
    np.testing.assert_allclose(axis_rotations("X", a) @ Y, Z, atol=1e-15)
    np.testing.assert_allclose(axis_rotations("Y", a) @ Z, X, atol=1e-15)


def test_euler_intrinsic_is_product_in_order_and_extrinsic_reversed():
    a = np.array([30.0, -50.0, 120.0])
    Rx, Ry, Rz = (axis_rotations(ax, np.deg2rad(v)) for ax, v in zip("XYZ", a))
    np.testing.assert_allclose(euler_matrix(a, "XYZ"), Rx @ Ry @ Rz, atol=1e-15)
    np.testing.assert_allclose(euler_matrix(a, "XYZ", extrinsic=True), Rz @ Ry @ Rx, atol=1e-15)
    # extrinsic XYZ (a, b, c) == intrinsic ZYX (c, b, a)
    np.testing.assert_allclose(euler_matrix(a, "XYZ", extrinsic=True),
                               euler_matrix(a[::-1], "ZYX"), atol=1e-15)
    # fewer axes; none
    np.testing.assert_allclose(euler_matrix([90.0], "Z") @ X, Y, atol=1e-15)
    np.testing.assert_allclose(euler_matrix(np.zeros((4, 0)), ""), np.broadcast_to(np.eye(3),
                                                                                    (4, 3, 3)))
    with pytest.raises(ValueError, match="distinct letters"):
        euler_matrix([1.0, 2.0], "XX")


def arm(orders=("Z", "Z", ""), offset_frame="parent"):
    """Shoulder at the origin, elbow 1 along x, wrist 1 further along x."""
    return Skeleton(["shoulder", "elbow", "wrist"], [-1, 0, 1],
                    [[0, 0, 0], [1, 0, 0], [1, 0, 0]], orders, offset_frame=offset_frame)


def angles(*per_joint):
    out = np.zeros((1, len(per_joint), 3))
    for j, a in enumerate(per_joint):
        out[0, j, :len(a)] = a
    return out


def test_two_bone_arm_rotated_90_about_z():
    sk = arm()
    P = sk.positions(angles([90], [0], []))[0]
    np.testing.assert_allclose(P, [[0, 0, 0], [0, 1, 0], [0, 2, 0]], atol=1e-12)
    P = sk.positions(angles([90], [90], []))[0]          # elbow bent 90 more: wrist at (-1, 1)
    np.testing.assert_allclose(P, [[0, 0, 0], [0, 1, 0], [-1, 1, 0]], atol=1e-12)
    P = sk.positions(angles([0], [-90], []))[0]
    np.testing.assert_allclose(P, [[0, 0, 0], [1, 0, 0], [1, -1, 0]], atol=1e-12)


def test_rotation_orders_xyz_and_zyx_give_different_known_results():
    # the same angles per axis (x = 90, y = 90, z = 0), composed in two orders
    xyz = Skeleton(["a", "b"], [-1, 0], [[0, 0, 0], [1, 0, 0]], ["XYZ", ""])
    zyx = Skeleton(["a", "b"], [-1, 0], [[0, 0, 0], [1, 0, 0]], ["ZYX", ""])
    # intrinsic XYZ: Rx(90) Ry(90) x = Rx(90) (0, 0, -1) = (0, 1, 0)
    np.testing.assert_allclose(xyz.positions(angles([90, 90, 0], []))[0, 1], Y, atol=1e-12)
    # intrinsic ZYX: Rz(0) Ry(90) Rx(90) x = Ry(90) x = (0, 0, -1)
    np.testing.assert_allclose(zyx.positions(angles([0, 90, 90], []))[0, 1], -Z, atol=1e-12)


def test_offset_frame_self_turns_the_bone_by_its_own_rotation():
    # Acclaim-style: a joint's rotation moves its own bone
    sk = arm(orders=("", "Z", "Z"), offset_frame="self")
    P = sk.positions(angles([], [90], [0]))[0]          # the upper arm turns, the forearm follows
    np.testing.assert_allclose(P, [[0, 0, 0], [0, 1, 0], [0, 2, 0]], atol=1e-12)
    P = sk.positions(angles([], [0], [90]))[0]          # only the forearm turns
    np.testing.assert_allclose(P, [[0, 0, 0], [1, 0, 0], [1, 1, 0]], atol=1e-12)
    P = sk.positions(angles([], [90], [90]))[0]
    np.testing.assert_allclose(P, [[0, 0, 0], [0, 1, 0], [-1, 1, 0]], atol=1e-12)


def test_acclaim_axis_rotation_changes_the_rotation_axis():
    # bone along x with dof rx; axis C = Rz(90) makes the local x axis the world y axis:
    # L = C Rx(90) C^T = Ry(90), so the bone (1, 0, 0) ends at (0, 0, -1)
    C = np.stack([np.eye(3), euler_matrix([0, 0, 90], "XYZ", extrinsic=True)])
    sk = Skeleton(["root", "bone"], [-1, 0], [[0, 0, 0], [1, 0, 0]], ["", "X"], extrinsic=True,
                  offset_frame="self", axes=C)
    np.testing.assert_allclose(sk.positions(angles([], [90]))[0, 1], -Z, atol=1e-12)
    # without the axis rotation, rx turns the bone about itself: it stays on x
    sk0 = Skeleton(["root", "bone"], [-1, 0], [[0, 0, 0], [1, 0, 0]], ["", "X"],
                   extrinsic=True, offset_frame="self", axes=np.stack([np.eye(3)] * 2))
    np.testing.assert_allclose(sk0.positions(angles([], [90]))[0, 1], X, atol=1e-12)
    # L = C M C^-1 stacks
    M = euler_matrix(np.array([[[0.0], [90.0]]]), "X")
    np.testing.assert_allclose(acclaim_local_rotations(C, M)[0, 1],
                               axis_rotations("Y", np.pi / 2), atol=1e-12)


def test_root_position_and_multiple_roots():
    sk = Skeleton(["r1", "c1", "r2"], [-1, 0, -1], [[0, 0, 0], [0, 1, 0], [5, 0, 0]],
                  ["Z", "", ""])
    P = sk.positions(np.zeros((2, 3, 3)), root_positions=[[[1, 1, 1], [2, 2, 2]],
                                                          [[0, 0, 0], [3, 3, 3]]])
    np.testing.assert_allclose(P[0], [[1, 1, 1], [1, 2, 1], [2, 2, 2]])
    np.testing.assert_allclose(P[1], [[0, 0, 0], [0, 1, 0], [3, 3, 3]])


def test_depth_levels_rejects_cycles_and_bad_indices():
    assert [lv.tolist() for lv in depth_levels([-1, 0, 0, 1])] == [[0], [1, 2], [3]]
    with pytest.raises(ValueError, match="cycle"):
        depth_levels([-1, 2, 1])
    with pytest.raises(ValueError, match="outside"):
        depth_levels([-1, 5])


def random_tree(rng, J):
    parents = np.array([-1] + [int(rng.integers(0, j)) for j in range(1, J)])
    orders = ["".join(rng.permutation(list("XYZ"))[:int(rng.integers(0, 4))]) for _ in range(J)]
    return parents, rng.normal(size=(J, 3)), orders


def per_frame_reference(parents, offsets, L, offset_frame):
    """Plain loops over frames and joints: the definition, written independently."""
    T, J = L.shape[:2]
    X = np.zeros((T, J, 3))
    for t in range(T):
        G = [None] * J
        for j in range(J):                           # parents come first in random_tree
            p = parents[j]
            if p < 0:
                G[j] = L[t, j]
                X[t, j] = offsets[j]
            else:
                G[j] = G[p] @ L[t, j]
                F = G[p] if offset_frame == "parent" else G[j]
                X[t, j] = X[t, p] + F @ offsets[j]
    return X


@pytest.mark.parametrize("offset_frame", ["parent", "self"])
@pytest.mark.parametrize("with_axes", [False, True])
@pytest.mark.parametrize("extrinsic", [False, True])
def test_fast_path_matches_matrix_path_and_per_frame_loops(offset_frame, with_axes, extrinsic):
    rng = np.random.default_rng(7)
    J, T = 12, 5
    parents, offsets, orders = random_tree(rng, J)
    axes = euler_matrix(rng.uniform(-180, 180, (J, 3)), "XYZ", extrinsic=True) if with_axes \
        else None
    sk = Skeleton([f"j{i}" for i in range(J)], parents, offsets, orders, extrinsic=extrinsic,
                  offset_frame=offset_frame, axes=axes)
    A = rng.uniform(-180, 180, (T, J, 3))
    P, G = sk.positions(A, return_rotations=True)
    L = sk.local_rotations(A)
    np.testing.assert_allclose(P, forward_kinematics(parents, offsets, L,
                                                     offset_frame=offset_frame), atol=1e-12)
    np.testing.assert_allclose(P, per_frame_reference(parents, offsets, L, offset_frame),
                               atol=1e-12)
    _, G2 = forward_kinematics(parents, offsets, L, offset_frame=offset_frame,
                               return_rotations=True)
    np.testing.assert_allclose(G, G2, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from(["parent", "self"]))
def test_rotations_never_change_bone_lengths(seed, offset_frame):
    rng = np.random.default_rng(seed)
    J = int(rng.integers(2, 15))
    parents, offsets, orders = random_tree(rng, J)
    sk = Skeleton([f"j{i}" for i in range(J)], parents, offsets, orders,
                  offset_frame=offset_frame, extrinsic=bool(seed % 2))
    P = sk.positions(rng.uniform(-360, 360, (4, J, 3)))
    want = np.where(parents < 0, 0.0, np.linalg.norm(offsets, axis=1))
    np.testing.assert_allclose(bone_lengths(P, parents), np.broadcast_to(want, (4, J)),
                               atol=1e-9)


def test_frames_are_independent_and_per_frame_offsets_or_root_positions_agree():
    rng = np.random.default_rng(2)
    parents, offsets, orders = random_tree(rng, 6)
    sk = Skeleton([f"j{i}" for i in range(6)], parents, offsets, orders)
    A = rng.uniform(-180, 180, (50, 6, 3))
    R = rng.normal(size=(50, 3))
    full, G = sk.positions(A, root_positions=R, return_rotations=True)
    per_frame_off = np.broadcast_to(offsets, (50, 6, 3)).copy()
    per_frame_off[:, 0] = R
    np.testing.assert_array_equal(sk.positions(A[7:19], root_positions=R[7:19]), full[7:19])
    P2, G2 = sk.positions(A, per_frame_off, return_rotations=True)
    np.testing.assert_allclose(P2, full, atol=1e-12)
    np.testing.assert_array_equal(G2, G)


def test_children_listed_before_their_parents():
    # joint 0's parent is 2, whose parent is 1 (the root): the compiled pass must follow depth
    parents = np.array([2, -1, 1])
    offsets = np.array([[0.0, 1, 0], [1, 2, 3], [1, 0, 0]])
    sk = Skeleton(["c", "r", "m"], parents, offsets, ["Z", "X", "Y"])
    A = np.random.default_rng(3).uniform(-180, 180, (4, 3, 3))
    want = forward_kinematics(parents, offsets, sk.local_rotations(A))
    np.testing.assert_allclose(sk.positions(A), want, atol=1e-12)
