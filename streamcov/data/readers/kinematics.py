"""Forward kinematics shared by the ASF/AMC and BVH readers.

Conventions
-----------
* **Column vectors.** A rotation matrix ``R`` maps a vector expressed in a child frame to its
  parent frame: ``v_parent = R @ v_child``. Stacks are ``(..., 3, 3)``; a point array is
  ``(..., 3)``.
* **Elementary rotations** are right-handed (a positive angle turns counter-clockwise when
  looking from the positive axis towards the origin)::

      Rx(a) = [[1, 0, 0], [0, c, -s], [0, s, c]]
      Ry(a) = [[c, 0, s], [0, 1, 0], [-s, 0, c]]
      Rz(a) = [[c, -s, 0], [s, c, 0], [0, 0, 1]]      (c = cos a, s = sin a)

* **Euler angles** ``(a1, a2, a3)`` with an axis order ``"o1 o2 o3"`` (e.g. ``"ZXY"``), built by
  :func:`euler_matrix`:

  - intrinsic (rotations about the moving axes, BVH's convention: the channel order is the
    order in which the rotations are applied to the moving frame)::

        R = R_o1(a1) @ R_o2(a2) @ R_o3(a3)

  - extrinsic (rotations about the fixed axes, first token applied first: Acclaim's ``axis XYZ``,
    root ``order ... RX RY RZ`` and ``dof rx ry rz``)::

        R = R_o3(a3) @ R_o2(a2) @ R_o1(a1)

  So intrinsic ``"ZXY"`` is the same matrix as extrinsic ``"YXZ"`` with the angles reversed.
  Fewer than three axes are allowed (``"X"``, ``"YZ"``); a missing axis is the identity.

* **Forward kinematics** (:func:`forward_kinematics`) over joints ``j`` with parent ``p(j)``
  (``-1`` for a root), local rotations ``L_j`` (``(T, J, 3, 3)``: every frame at once) and
  offsets ``o_j`` (``(J, 3)`` or per frame ``(T, J, 3)``)::

      G_j = G_p(j) @ L_j                         (global rotation; G_root = L_root)
      x_j = x_p(j) + F_j @ o_j                   (position; x_root = o_root, in world axes)

  with ``F_j = G_p(j)`` for ``offset_frame="parent"`` (BVH: the OFFSET of a joint is fixed in
  its parent's frame and moves with the parent's rotation) and ``F_j = G_j`` for
  ``offset_frame="self"`` (Acclaim: bone ``j`` is the vector ``length * direction`` from its
  parent's end, turned by its own rotation). Hence ``|x_j - x_p(j)| = |o_j|`` in every frame:
  rotations never change bone lengths.

* **Acclaim bone rotation** (:func:`acclaim_local_rotations`): the ASF ``axis`` angles define
  ``C`` (extrinsic, in the axis's order); the AMC angles define ``M`` (extrinsic, in the ``dof``
  order); the bone's local rotation, in world-aligned rest axes, is::

      L = C @ M @ C^-1

  which is the Acclaim spec's row-vector ``L = C^-1 M C`` transposed. In the rest pose
  (``M = I``) every ``L`` is the identity and ``x_j`` is the sum of ``length * direction`` along
  the chain, as the ASF's rest pose requires.

:func:`forward_kinematics` is vectorized over frames with NumPy (one loop over tree depth
levels); it is the reference. :class:`Skeleton` (what the readers use) runs the same equations
in one compiled pass over frames and joints (:func:`_skeleton_positions`), which builds no
``(T, J, 3, 3)`` stacks at all.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..._config import CACHE, stamp_kernels_by_their_sources

stamp_kernels_by_their_sources()   # before this module's first njit

_AXIS = {"X": 0, "Y": 1, "Z": 2}


def axis_rotations(axis: str, angles) -> np.ndarray:
    """Elementary rotations about ``axis`` ("X", "Y" or "Z") by ``angles`` (radians), shape
    ``angles.shape + (3, 3)``."""
    a = np.asarray(angles, dtype=np.float64)
    c, s = np.cos(a), np.sin(a)
    out = np.zeros(a.shape + (3, 3))
    i = _AXIS[axis.upper()]
    j, k = (i + 1) % 3, (i + 2) % 3
    out[..., i, i] = 1.0
    out[..., j, j] = c
    out[..., k, k] = c
    out[..., j, k] = -s
    out[..., k, j] = s
    return out


def check_order(order: str) -> str:
    """Upper-case ``order`` and check it is 0-3 distinct letters among X, Y, Z."""
    o = order.upper()
    if len(o) > 3 or len(set(o)) != len(o) or any(ch not in _AXIS for ch in o):
        raise ValueError(f"rotation order must be up to three distinct letters among X, Y, Z, "
                         f"got {order!r}")
    return o


def euler_matrix(angles, order: str, *, extrinsic: bool = False,
                 degrees: bool = True) -> np.ndarray:
    """Rotation matrices from Euler angles.

    Parameters
    ----------
    angles : array (..., k)
        One angle per letter of ``order``, last axis.
    order : str
        ``k`` distinct letters among X, Y, Z (``k`` = 0..3), e.g. ``"ZXY"``.
    extrinsic : bool
        False: ``R = R_o1(a1) @ R_o2(a2) @ R_o3(a3)`` (moving axes, BVH);
        True: ``R = R_o3(a3) @ R_o2(a2) @ R_o1(a1)`` (fixed axes, Acclaim).
    degrees : bool
        Angles in degrees (else radians).

    Returns
    -------
    array (..., 3, 3)

    Built without matrix products: starting from the identity, each elementary rotation only
    mixes two columns (right product, intrinsic) or two rows (left product, extrinsic).
    """
    order = check_order(order)
    a = np.asarray(angles, dtype=np.float64)
    if a.shape[-1:] != (len(order),):
        raise ValueError(f"angles must end with an axis of length {len(order)} for order "
                         f"{order!r}, got shape {a.shape}")
    if degrees:
        a = np.deg2rad(a)
    out = np.zeros(a.shape[:-1] + (3, 3))
    if not order:
        out[...] = np.eye(3)
        return out
    out[:] = axis_rotations(order[0], a[..., 0])
    c, s = np.cos(a[..., 1:]), np.sin(a[..., 1:])
    for n, axis in enumerate(order[1:]):
        if extrinsic:
            rotate_rows(out, axis, c[..., n], s[..., n])
        else:
            rotate_columns(out, axis, c[..., n], s[..., n])
    return out


def rotate_columns(W: np.ndarray, axis: str, c, s) -> None:
    """In place ``W <- W @ R_axis(a)`` with ``c = cos a``, ``s = sin a`` (shapes ``W.shape[:-2]``).

    For axis ``i`` and ``(j, k) = (i + 1, i + 2) mod 3``: ``W[:, j] <- c W[:, j] + s W[:, k]``,
    ``W[:, k] <- -s W[:, j] + c W[:, k]``."""
    i = _AXIS[axis]
    j, k = (i + 1) % 3, (i + 2) % 3
    c = np.asarray(c)[..., None]
    s = np.asarray(s)[..., None]
    wj = W[..., :, j].copy()
    wk = W[..., :, k]
    W[..., :, j] = c * wj + s * wk
    W[..., :, k] = c * wk - s * wj


def rotate_rows(W: np.ndarray, axis: str, c, s) -> None:
    """In place ``W <- R_axis(a) @ W``: ``W[j] <- c W[j] - s W[k]``, ``W[k] <- s W[j] + c W[k]``."""
    i = _AXIS[axis]
    j, k = (i + 1) % 3, (i + 2) % 3
    c = np.asarray(c)[..., None]
    s = np.asarray(s)[..., None]
    wj = W[..., j, :].copy()
    wk = W[..., k, :]
    W[..., j, :] = c * wj - s * wk
    W[..., k, :] = s * wj + c * wk


def acclaim_local_rotations(C: np.ndarray, M: np.ndarray) -> np.ndarray:
    """``L = C @ M @ C^-1`` for every frame and bone: ``C`` (J, 3, 3), ``M`` (T, J, 3, 3)."""
    Cinv = np.swapaxes(C, -1, -2)          # C is orthonormal
    return C @ M @ Cinv


def depth_levels(parents) -> list[np.ndarray]:
    """Joints grouped by depth (roots first); raises ValueError on a bad index or a cycle."""
    parents = np.asarray(parents, dtype=np.int64)
    J = len(parents)
    if np.any((parents < -1) | (parents >= J)):
        bad = int(np.flatnonzero((parents < -1) | (parents >= J))[0])
        raise ValueError(f"joint {bad} has parent index {int(parents[bad])} outside -1..{J - 1}")
    depth = np.full(J, -1, dtype=np.int64)
    depth[parents == -1] = 0
    for d in range(J):
        if (depth >= 0).all():
            break
        ready = (depth < 0) & (parents >= 0)
        ready[ready] = depth[parents[ready]] == d
        if not ready.any():
            break
        depth[ready] = d + 1
    if (depth < 0).any():
        bad = int(np.flatnonzero(depth < 0)[0])
        raise ValueError(f"joint {bad} does not lead to a root (the parent indices form a cycle)")
    return [np.flatnonzero(depth == d) for d in range(int(depth.max()) + 1)]


def forward_kinematics(parents, offsets, local_rot, *, offset_frame: str = "parent",
                       levels: list[np.ndarray] | None = None,
                       return_rotations: bool = False):
    """Joint positions for all frames at once.

    Parameters
    ----------
    parents : (J,) int
        Parent index of every joint, -1 for a root.
    offsets : (J, 3) or (T, J, 3)
        ``o_j``: a root's world position, else the joint's offset from its parent (see the
        module docstring for the frame it is expressed in).
    local_rot : (T, J, 3, 3)
        ``L_j`` for every frame.
    offset_frame : {"parent", "self"}
        Frame that turns ``o_j``: the parent's global rotation (BVH) or the joint's own
        (Acclaim bones).
    levels : list of arrays, optional
        :func:`depth_levels` of ``parents``, if already computed.

    Returns
    -------
    positions (T, J, 3) float64, and the global rotations (T, J, 3, 3) if asked.
    """
    if offset_frame not in ("parent", "self"):
        raise ValueError(f"offset_frame must be 'parent' or 'self', got {offset_frame!r}")
    parents = np.asarray(parents, dtype=np.int64)
    L = np.asarray(local_rot, dtype=np.float64)
    T, J = L.shape[:2]
    if L.shape != (T, len(parents), 3, 3):
        raise ValueError(f"local_rot must be (T, {len(parents)}, 3, 3), got {L.shape}")
    off = np.broadcast_to(np.asarray(offsets, dtype=np.float64), (T, J, 3))
    if levels is None:
        levels = depth_levels(parents)
    G = np.empty((T, J, 3, 3))
    X = np.empty((T, J, 3))
    for d, idx in enumerate(levels):
        if d == 0:
            G[:, idx] = L[:, idx]
            X[:, idx] = off[:, idx]
            continue
        p = parents[idx]
        G[:, idx] = G[:, p] @ L[:, idx]
        F = G[:, p] if offset_frame == "parent" else G[:, idx]
        X[:, idx] = X[:, p] + (F @ off[:, idx, :, None])[..., 0]
    return (X, G) if return_rotations else X


class Skeleton:
    """A kinematic tree driven by Euler angles: the fast path used by the readers.

    Parameters
    ----------
    names : list of str
    parents : (J,) int, -1 for a root
    offsets : (J, 3)
        Rest offsets ``o_j`` (a root's: its world position; may be replaced per frame in
        :meth:`positions`).
    orders : list of str
        Euler order of every joint's angles ("" for a joint that does not rotate).
    extrinsic : bool
        Angle convention of :func:`euler_matrix` (False: BVH, True: Acclaim).
    offset_frame : {"parent", "self"}
        See :func:`forward_kinematics`.
    axes : (J, 3, 3), optional
        Acclaim axis rotations ``C_j``: ``L_j = C_j @ E_j @ C_j^T``. None: ``L_j = E_j``.

    :meth:`positions` gives the same result as ``forward_kinematics(parents, offsets,
    local_rotations(angles))`` but multiplies less: writing ``H_j = G_j @ C_j`` (the bone's own
    frame), ``H_j = H_p @ K_j @ E_j`` with the constant ``K_j = C_p^T @ C_j``, and
    ``x_j = x_p + H_j @ (C_j^T o_j)`` (``"self"``) or ``x_p + H_p @ (C_p^T o_j)`` (``"parent"``).
    """

    def __init__(self, names, parents, offsets, orders, *, extrinsic: bool = False,
                 offset_frame: str = "parent", axes=None):
        if offset_frame not in ("parent", "self"):
            raise ValueError(f"offset_frame must be 'parent' or 'self', got {offset_frame!r}")
        self.names = list(names)
        self.parents = np.asarray(parents, dtype=np.int64)
        J = len(self.parents)
        self.offsets = np.asarray(offsets, dtype=np.float64).reshape(J, 3)
        self.orders = [check_order(o) for o in orders]
        if len(self.names) != J or len(self.orders) != J:
            raise ValueError("names, parents, offsets and orders must have one entry per joint")
        self.extrinsic = bool(extrinsic)
        self.offset_frame = offset_frame
        self.levels = depth_levels(self.parents)
        self.axes = None if axes is None else np.asarray(axes, dtype=np.float64).reshape(J, 3, 3)
        self.roots = self.parents < 0
        safe_p = np.where(self.roots, 0, self.parents)
        if self.axes is None:
            self.K = None
            self.B_off = None           # offsets are used as they are
        else:
            CT = np.swapaxes(self.axes, -1, -2)
            self.K = np.where(self.roots[:, None, None], self.axes, CT[safe_p] @ self.axes)
            # matrix that takes o_j into the frame H turns it with
            self.B_off = CT if offset_frame == "self" else np.where(
                self.roots[:, None, None], np.eye(3), CT[safe_p])
        # compiled-kernel tables: the column rotations of K_j E_j in the order they are applied
        # (extrinsic E = R_o3 R_o2 R_o1: K R_o3 R_o2 R_o1; intrinsic: K R_o1 R_o2 R_o3): step q
        # of joint j turns about axis _step_axis[j, q] by the joint's angle number _step_n[j, q]
        self._n_steps = np.array([len(o) for o in self.orders], dtype=np.int64)
        self._step_n = np.zeros((J, 3), dtype=np.int64)
        self._step_axis = np.zeros((J, 3), dtype=np.int64)
        for j, o in enumerate(self.orders):
            steps = range(len(o) - 1, -1, -1) if self.extrinsic else range(len(o))
            for q, n in enumerate(steps):
                self._step_n[j, q] = n
                self._step_axis[j, q] = _AXIS[o[n]]
        eye = np.broadcast_to(np.eye(3), (J, 3, 3))
        self._K = np.ascontiguousarray(eye if self.K is None else self.K)
        self._B = np.ascontiguousarray(eye if self.B_off is None else self.B_off)
        self._order = np.concatenate(self.levels).astype(np.int64)

    @property
    def n_joints(self) -> int:
        return len(self.parents)

    def euler(self, angles, *, degrees: bool = True) -> np.ndarray:
        """``E_j`` for every frame and joint, (T, J, 3, 3), from angles (T, J, 3) whose first
        ``len(orders[j])`` entries are joint ``j``'s angles in its order."""
        a = np.asarray(angles, dtype=np.float64)
        T = a.shape[0]
        E = np.zeros((T, self.n_joints, 3, 3))
        E[..., 0, 0] = E[..., 1, 1] = E[..., 2, 2] = 1.0
        for j, o in enumerate(self.orders):
            if o:
                E[:, j] = euler_matrix(a[:, j, :len(o)], o, extrinsic=self.extrinsic,
                                       degrees=degrees)
        return E

    def local_rotations(self, angles, *, degrees: bool = True) -> np.ndarray:
        """``L_j`` (T, J, 3, 3): ``E_j``, or ``C_j E_j C_j^T`` with axes."""
        E = self.euler(angles, degrees=degrees)
        return E if self.axes is None else acclaim_local_rotations(self.axes, E)

    def positions(self, angles, offsets=None, *, root_positions=None, degrees: bool = True,
                  return_rotations: bool = False):
        """Joint positions (T, J, 3) for every frame at once.

        Parameters
        ----------
        angles : (T, J, 3)
            As in :meth:`euler`: the first ``len(orders[j])`` entries are joint ``j``'s angles.
        offsets : (J, 3) or (T, J, 3), optional
            Replace the rest offsets (per frame with three dimensions).
        root_positions : (T, R, 3) or (T, 3), optional
            Replace the roots' positions only (roots in joint order).
        degrees : bool
            Angles in degrees (else radians).
        return_rotations : bool
            Also return the global rotations ``G_j`` (T, J, 3, 3).

        Returns
        -------
        positions (T, J, 3) float64 [, rotations]
        """
        a = np.asarray(angles, dtype=np.float64)
        T, J = a.shape[0], self.n_joints
        if a.shape != (T, J, 3):
            raise ValueError(f"angles must be (T, {J}, 3), got {a.shape}")
        # one table of channels: the angles, then per-frame offsets or root positions, which
        # replace the offsets' components through position columns
        channels = [a.reshape(T, 3 * J)]
        pos_cols = np.full((J, 3), -1, dtype=np.int64)
        off = self.offsets
        if offsets is not None:
            o = np.asarray(offsets, dtype=np.float64)
            if o.ndim == 2:
                off = o.reshape(J, 3)
            else:
                channels.append(o.reshape(T, 3 * J))
                pos_cols[:] = 3 * J + np.arange(3 * J).reshape(J, 3)
        if root_positions is not None:
            roots = self.levels[0]
            start = sum(c.shape[1] for c in channels)
            channels.append(np.asarray(root_positions, dtype=np.float64).reshape(T, 3 * len(roots)))
            pos_cols[roots] = start + np.arange(3 * len(roots)).reshape(-1, 3)
        values = channels[0] if len(channels) == 1 else np.concatenate(channels, axis=1)
        angle_cols = 3 * np.arange(J)[:, None] + np.arange(3)
        return self._positions(values, angle_cols, pos_cols, off, False, degrees,
                               return_rotations)

    def positions_from_channels(self, values, angle_cols, position_cols=None, *,
                                add: bool = False, degrees: bool = True,
                                return_rotations: bool = False):
        """Joint positions (T, J, 3) straight from a file's channel values (no copy of them).

        Parameters
        ----------
        values : (T, C)
            One row of channel values per frame (an AMC or BVH frame).
        angle_cols : (J, 3) int
            ``angle_cols[j, n]``: the column of joint ``j``'s ``n``-th angle in its order (the
            entries past ``len(orders[j])`` are not read).
        position_cols : (J, 3) int, optional
            ``position_cols[j, a]``: a column that replaces (``add=False``) or is added to
            (``add=True``) component ``a`` of joint ``j``'s offset (a root's: its position);
            -1 for none.
        add, degrees, return_rotations : bool
            See above and :meth:`positions`.
        """
        J = self.n_joints
        pos = np.full((J, 3), -1, dtype=np.int64) if position_cols is None else position_cols
        return self._positions(np.asarray(values, dtype=np.float64), np.asarray(angle_cols),
                               np.asarray(pos, dtype=np.int64), self.offsets, add, degrees,
                               return_rotations)

    def _positions(self, values, angle_cols, pos_cols, off, add, degrees, return_rotations):
        T, J = len(values), self.n_joints
        # the bone vectors in the frame H turns them with (H = G C, see the class docstring)
        ob = off if self.B_off is None else (self.B_off @ off.reshape(1, J, 3)[..., None])[
            ..., 0].reshape(J, 3)
        step_col = np.take_along_axis(np.asarray(angle_cols, dtype=np.int64), self._step_n, 1)
        H = np.empty((T if return_rotations else 0, J, 3, 3))
        X = _skeleton_positions(np.ascontiguousarray(values), bool(degrees), step_col,
                                self._step_axis, self._n_steps, self._K, self._order,
                                self.parents, self.offset_frame == "self",
                                np.ascontiguousarray(off), np.ascontiguousarray(ob), self._B,
                                self.B_off is not None, np.ascontiguousarray(pos_cols),
                                bool(add), H)
        if not return_rotations:
            return X
        G = H if self.axes is None else H @ np.swapaxes(self.axes, -1, -2)
        return X, G


@njit(cache=CACHE, nogil=True)
def _skeleton_positions(values, degrees, step_col, step_axis, n_steps, K, order, parents,
                        self_frame, off, ob, B, has_b, pos_cols, add, H_out):
    """:meth:`Skeleton.positions` for every frame, one frame at a time.

    ``values`` (T, C); joint ``j`` turns ``n_steps[j]`` times, step ``q`` about axis
    ``step_axis[j, q]`` (0, 1, 2) by ``values[:, step_col[j, q]]``; ``K`` (J, 3, 3) starts each
    product; ``order`` lists parents before children; ``off`` the offsets and ``ob = B off``
    the bone vectors in the frame that turns them; a joint with ``pos_cols`` (column or -1 per
    component) takes those components from the frame (replaced, or added with ``add``);
    ``H_out`` (T, J, 3, 3) receives the frames ``H`` when it has T rows.
    Each step is the column rotation of :func:`rotate_columns`, with the same arithmetic; the
    3 x 3 products sum their three terms left to right (no FMA: fastmath is off).
    """
    T = values.shape[0]
    J = parents.size
    X = np.empty((T, J, 3))
    H = np.empty((J, 3, 3))
    W = np.empty((3, 3))
    o = np.empty(3)
    v = np.empty(3)
    to_rad = np.pi / 180.0
    keep_h = H_out.shape[0] > 0
    moves = np.zeros(J, np.bool_)
    for j in range(J):
        for a in range(3):
            if pos_cols[j, a] >= 0:
                moves[j] = True
    for t in range(T):
        for q in range(J):
            j = order[q]
            for r in range(3):
                for c in range(3):
                    W[r, c] = K[j, r, c]
            for n in range(n_steps[j]):
                ang = values[t, step_col[j, n]]
                if degrees:
                    ang = ang * to_rad
                cs = math.cos(ang)
                sn = math.sin(ang)
                i = step_axis[j, n]
                cj = (i + 1) % 3
                ck = (i + 2) % 3
                for r in range(3):
                    wj = W[r, cj]
                    wk = W[r, ck]
                    W[r, cj] = cs * wj + sn * wk
                    W[r, ck] = cs * wk - sn * wj
            # this frame's offset, and the bone vector it gives
            for a in range(3):
                o[a] = off[j, a]
                v[a] = ob[j, a]
            if moves[j]:
                for a in range(3):
                    c = pos_cols[j, a]
                    if c >= 0:
                        o[a] = off[j, a] + values[t, c] if add else values[t, c]
                for a in range(3):
                    v[a] = (B[j, a, 0] * o[0] + B[j, a, 1] * o[1] + B[j, a, 2] * o[2]) if has_b \
                        else o[a]
            p = parents[j]
            if p < 0:
                for r in range(3):
                    X[t, j, r] = o[r]
                    for c in range(3):
                        H[j, r, c] = W[r, c]
                continue
            for r in range(3):
                for c in range(3):
                    H[j, r, c] = H[p, r, 0] * W[0, c] + H[p, r, 1] * W[1, c] + H[p, r, 2] * W[2, c]
            f = j if self_frame else p
            for r in range(3):
                X[t, j, r] = X[t, p, r] + (H[f, r, 0] * v[0] + H[f, r, 1] * v[1]
                                           + H[f, r, 2] * v[2])
        if keep_h:
            H_out[t] = H
    return X


def bone_lengths(positions: np.ndarray, parents) -> np.ndarray:
    """``|x_j - x_p(j)|`` for every frame, (T, J); 0 for roots."""
    parents = np.asarray(parents)
    P = np.asarray(positions)
    d = P - P[:, np.where(parents < 0, np.arange(len(parents)), parents)]
    return np.linalg.norm(d, axis=-1)
