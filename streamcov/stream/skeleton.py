"""The skeleton source: a sequence store to log-covariance descriptors, block by block.

Frame chunks of the store are read once each; a chunk task returns the
mergeable partial moments (n, mean, M2) of every sequence piece inside it.
A block task (a run of whole sequences) merges the pieces of its sequences
(Chan, :func:`streamcov.linalg.merge_moments`), so a sequence cut by a chunk
boundary gets exactly its own covariance, and then applies regularization,
the SPD logarithm and vectorization (:mod:`streamcov.descriptors.skeleton`).
The same numba kernels run under the threaded scheduler and on
dask.distributed workers: tasks receive the store *path* and open it
themselves.

With options (frame features beyond positions, a temporal pyramid, a body
frame, the Gaussian embedding of the mean; :class:`SkeletonDescriptor`) a
chunk task reads up to ``window - 1`` frames of the neighbouring chunks (the
Savitzky-Golay derivatives of the frames next to a chunk boundary need them),
computes the frame features of every sequence piece and returns one partial
(n, mean, M2) per pyramid window plus the summed body measurements; the block
task merges them per window and sequence, so every window is that of the
whole sequence, and builds the descriptor of
:class:`streamcov.descriptors.skeleton.PyramidPlan`: one unit-norm
``vec(log(S_w + gamma I))`` per window, concatenated. The windows are the
blocks of a sum of Log-E kernels, weighted by :attr:`SkeletonSource.kernel_blocks`.
"""
from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass, replace

import numpy as np

from .. import kernels
from .._config import kernel_threads
from ..descriptors import skeleton as sk
from ..errors import ConfigError, ModelError, toml_value
from ..linalg import gamma_named, merge_moments, vec_dim
from .runtime import task_path


AXES = ("x", "y", "z")


@dataclass(frozen=True)
class SkeletonDescriptor:
    """Settings of the log-covariance descriptor: ``center`` joints (None: raw coordinates).

    Options beyond paper 000 (:class:`streamcov.descriptors.skeleton.PyramidPlan`):
    ``features`` (positions, velocities, accelerations), ``joints`` (a subset,
    None: all), ``window`` and ``time`` of the derivatives, ``levels``,
    ``overlap`` and ``level_weights`` of the temporal pyramid,
    ``body_frame`` ("none", "yaw" about the ``up_axis``, "torso": hips and spine per
    sequence, "torso-frames": per frame), ``scale``
    ("none" or "body") and ``mean_weight`` (the Gaussian embedding of the mean),
    ``pairs`` (joint pairs ``(a, b)``, indices or joint or role names: relative
    positions ``p_a - p_b`` as extra frame features), ``matrix``
    ("covariance", "rbf": the kernelized covariance of Cavazza et al., ICPR
    2016, of the standardized coordinate series, or "rbf-raw": of the series as
    they are) and its bandwidth ``kernel_sigma``, ``mirror`` (the sequence and its
    mirror image as two views of one kernel, :class:`~streamcov.descriptors.skeleton.PyramidPlan`).
    """

    center: tuple | None
    gamma: float = 1e-4
    normalize: bool = True
    ddof: int = 1
    dtype: str = "float64"
    features: tuple = ("positions",)
    joints: tuple | None = None
    window: int = 5
    time: str = "frame"
    levels: int = 1
    overlap: bool = False
    level_weights: tuple | None = None
    body_frame: str = "none"
    up_axis: str = "y"
    scale: str = "none"
    mean_weight: float = 0.0
    pairs: tuple = ()
    matrix: str = "covariance"
    kernel_sigma: float = 1.0
    mirror: bool = False

    def __post_init__(self):
        # also guards descriptors read back from a model file
        if self.center is not None and not all(isinstance(c, (int, np.integer)) and not isinstance(c, bool)
                                               and c >= 0 for c in self.center):
            raise ValueError(f"center must be 0-based joint indices, got {self.center!r}")
        if isinstance(self.gamma, bool) or not isinstance(self.gamma, (int, float)) or not np.isfinite(self.gamma) \
                or self.gamma < 0:
            raise ValueError(f"gamma must be a finite number >= 0, got {self.gamma!r}")
        if not isinstance(self.normalize, bool):
            raise ValueError(f"normalize must be true or false, got {self.normalize!r}")
        if self.ddof not in (0, 1) or isinstance(self.ddof, bool):
            raise ValueError(f"ddof must be 0 or 1, got {self.ddof!r}")
        if self.dtype not in ("float64", "float32"):
            raise ValueError(f"dtype must be float64 or float32, got {self.dtype!r}")
        f = tuple(self.features)
        if not f or len(set(f)) != len(f) or not set(f) <= set(sk.FEATURES):
            raise ValueError(f"features must be distinct names among {', '.join(sk.FEATURES)}, got {list(f)!r}")
        object.__setattr__(self, "features", tuple(x for x in sk.FEATURES if x in f))
        if self.joints is not None and (not self.joints or len(set(self.joints)) != len(self.joints) or not all(
                isinstance(j, (int, np.integer)) and not isinstance(j, bool) and j >= 0 for j in self.joints)):
            raise ValueError(f"joints must be distinct 0-based joint indices, got {self.joints!r}")
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 3 or self.window % 2 == 0:
            raise ValueError(f"window must be an odd number of frames >= 3, got {self.window!r}")
        if self.time not in ("frame", "normalized"):
            raise ValueError(f"time must be 'frame' or 'normalized', got {self.time!r}")
        if isinstance(self.levels, bool) or not isinstance(self.levels, int) or not 1 <= self.levels <= 6:
            raise ValueError(f"levels must be an integer in 1..6, got {self.levels!r}")
        if not isinstance(self.overlap, bool):
            raise ValueError(f"overlap must be true or false, got {self.overlap!r}")
        if self.level_weights is not None:
            sk.window_weights(self.levels, self.overlap, self.level_weights)
        if self.body_frame not in sk.BODY_FRAMES:
            raise ValueError(f"body_frame must be one of {', '.join(sk.BODY_FRAMES)}, got {self.body_frame!r}")
        if self.up_axis not in AXES + ("auto",):
            raise ValueError(f"up_axis must be one of x, y, z, auto, got {self.up_axis!r}")
        if self.scale not in ("none", "body"):
            raise ValueError(f"scale must be 'none' or 'body', got {self.scale!r}")
        if isinstance(self.mean_weight, bool) or not isinstance(self.mean_weight, (int, float)) \
                or not np.isfinite(self.mean_weight) or self.mean_weight < 0:
            raise ValueError(f"mean_weight must be a finite number >= 0, got {self.mean_weight!r}")
        try:
            pairs = tuple(tuple(p) for p in self.pairs)
        except TypeError:
            raise ValueError(f"pairs must be a list of [a, b] joint pairs, got {self.pairs!r}") from None
        for p in pairs:
            if len(p) != 2 or not all((isinstance(j, (int, np.integer)) and not isinstance(j, bool) and j >= 0)
                                      or (isinstance(j, str) and j) for j in p):
                raise ValueError(f"pairs must be [a, b] pairs of 0-based joint indices or joint names, got {list(p)!r}")
            if p[0] == p[1]:
                raise ValueError(f"pairs: [{p[0]!r}, {p[1]!r}] pairs a joint with itself")
        if len(set(pairs)) != len(pairs):
            raise ValueError("pairs names a pair twice")
        object.__setattr__(self, "pairs", pairs)
        if self.matrix not in sk.MATRICES:
            raise ValueError(f"matrix must be one of {', '.join(sk.MATRICES)}, got {self.matrix!r}")
        # the one bandwidth check of streamcov.kernels (numpy scalars taken; a square that is not a normal float
        # refused), and a float: 2 and 2.0 make one fingerprint
        object.__setattr__(self, "kernel_sigma", kernels._bandwidth(self.kernel_sigma, "kernel_sigma"))
        if self.matrix in sk.RBF_MATRICES and self.mean_weight > 0:
            raise ValueError(sk.RBF_NO_MEAN.format(matrix=repr(self.matrix), key="mean_weight"))
        if not isinstance(self.mirror, bool):
            raise ValueError(f"mirror must be true or false, got {self.mirror!r}")

    @property
    def plain(self) -> bool:
        """Paper 000's descriptor: positions of all joints, one window, camera frame, no mean."""
        return (self.features == ("positions",) and self.joints is None and self.levels == 1
                and self.body_frame == "none" and self.scale == "none" and self.mean_weight == 0
                and not self.pairs and self.matrix == "covariance" and not self.mirror)

    def resolve_pairs(self, n_joints: int, roles: dict, joint_names=()) -> tuple:
        """The joint index pairs of ``pairs``: names are the store's joint names, or roles of one joint."""
        names = {str(nm): j for j, nm in enumerate(joint_names or ())}
        out = []
        for p in self.pairs:
            q = []
            for j in p:
                if isinstance(j, str):
                    if j in names:
                        j = names[j]
                    elif len(roles.get(j, ())) == 1:
                        j = int(roles[j][0])
                    else:
                        raise ConfigError(
                            f"descriptor.pairs = {toml_value(self.pairs)}: {toml_value(j)} is neither a joint name of "
                            f"the store ({', '.join(names) or 'none recorded'}) nor a role of one joint "
                            f"({', '.join(r for r, v in roles.items() if len(v) == 1) or 'none recorded'})")
                if not 0 <= int(j) < n_joints:
                    raise ConfigError(f"descriptor.pairs = {toml_value(self.pairs)}: joint {int(j)} outside "
                                      f"0..{n_joints - 1} (the store has {n_joints} joints)")
                q.append(int(j))
            if q[0] == q[1]:
                raise ConfigError(f"descriptor.pairs: {toml_value(p)} names joint {q[0]} twice")
            out.append(tuple(q))
        return tuple(out)

    def plan(self, n_joints: int, roles: dict, joint_names=()) -> "sk.PyramidPlan | None":
        """The :class:`~streamcov.descriptors.skeleton.PyramidPlan` on a store of ``n_joints``
        joints with body-part ``roles`` and ``joint_names`` (None for the plain descriptor)."""
        if self.plain:
            return None
        pairs = self.resolve_pairs(n_joints, roles, joint_names)
        sel = self.selection(n_joints)
        if self.joints is not None:
            bad = [j for j in self.joints if j >= n_joints]
            if bad:
                raise ConfigError(f"descriptor.joints = {list(self.joints)}: joints {bad} outside 0..{n_joints - 1} "
                                  f"(the store has {n_joints} joints)")
            sel = sk.JointSelection(center=sel.center, keep=tuple(j for j in sel.keep if j in set(self.joints)))
            if not sel.keep:
                raise ConfigError(f"descriptor.joints = {list(self.joints)} keeps no joint besides the centre")
        need = []
        torso = self.body_frame in ("torso", "torso-frames")
        if self.body_frame != "none":
            need += ["left_hip", "right_hip"]
        if self.scale != "none" or torso:
            need += ["neck"]
            if not sel.center:
                key = f"body_frame = '{self.body_frame}'" if torso else "scale = 'body'"
                raise ConfigError(f"descriptor.{key} measures the body from the hip centre; "
                                  "set descriptor.center to \"store\" or to joints")
        missing = [r for r in need if not roles.get(r)]
        if missing:
            what = " and ".join(x for x, on in (("body_frame", self.body_frame != "none"),
                                                ("scale", self.scale != "none" and not torso)) if on)
            raise ConfigError(f"descriptor.{what} needs the joint roles {', '.join(missing)}, which the store "
                              f"does not record; ingest the data with a reader that records them (the generic "
                              f"format: streamcov ingest skeleton --format generic --option "
                              f"'roles={{left_hip=[..], right_hip=[..], neck=[..]}}' ..., or options.roles in "
                              f"Python)")
        mirror, axis = (), 0
        if self.mirror:
            try:
                mirror = sk.mirror_permutation(joint_names)
            except ValueError as exc:
                raise ConfigError(f"descriptor.mirror = true swaps left and right joints, found by their names, "
                                  f"but the store's joint names ({', '.join(map(str, joint_names)) or 'none recorded'}) "
                                  f"do not allow it: {exc}; name the joints left_*/right_* when ingesting "
                                  f"(the generic format: options.joint_names), or set mirror = false") from None
            # across the body: the first axis that is not the up axis (x for y-up and z-up cameras)
            axis = next(a for a in range(3) if a != AXES.index(self.up_axis))
        return sk.PyramidPlan(
            selection=sel, features=self.features, window=self.window, time=self.time, levels=self.levels,
            overlap=self.overlap, level_weights=self.level_weights, body_frame=self.body_frame,
            up_axis=AXES.index(self.up_axis), scale=self.scale, left_hip=tuple(roles.get("left_hip", ())),
            right_hip=tuple(roles.get("right_hip", ())), neck=tuple(roles.get("neck", ())),
            mean_weight=float(self.mean_weight), gamma=float(self.gamma), ddof=self.ddof, normalize=self.normalize,
            pairs=pairs, matrix=self.matrix, kernel_sigma=float(self.kernel_sigma), mirror=mirror, mirror_axis=axis)

    def selection(self, n_joints: int) -> sk.JointSelection:
        if not self.center:
            return sk.JointSelection.raw(n_joints)
        if len(self.center) == 1 and n_joints == 1 and int(self.center[0]) == 0:
            raise ConfigError(f"descriptor.center: its joint {int(self.center[0])} is the store's only joint, and no "
                              f"joint is left once it is removed; set descriptor.center = \"none\" (raw "
                              f"coordinates), or ingest the skeletons with their other joints")
        try:
            return sk.JointSelection.hip_relative(n_joints, self.center)
        except ValueError as exc:
            raise ConfigError(f"descriptor.center = {list(self.center)}: {exc} (the store has "
                              f"{n_joints} joints)") from None

    def as_dict(self) -> dict:
        d = asdict(self)
        d["center"] = None if self.center is None else [int(c) for c in self.center]
        for key in ("joints", "level_weights"):
            d[key] = None if d[key] is None else list(d[key])
        d["features"] = list(self.features)
        d["pairs"] = [list(p) for p in self.pairs]
        if self.plain:   # paper 000's descriptor keeps the settings (and fingerprints) it always had
            for key in _OPTIONS:
                d.pop(key)
            return d
        # options added later enter the settings (and fingerprints) only when used, so that
        # models and feature stores made before them keep theirs
        if not self.pairs:
            d.pop("pairs")
        if self.matrix == "covariance":
            d.pop("matrix")
            d.pop("kernel_sigma")
        if not self.mirror:
            d.pop("mirror")
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "SkeletonDescriptor":
        d = dict(d)
        for key in ("center", "joints", "level_weights", "features"):
            if d.get(key) is not None:
                d[key] = tuple(d[key])
        if d.get("pairs") is not None:
            d["pairs"] = tuple(tuple(p) for p in d["pairs"])
        return cls(**d)


def read_frames(store_path: str, r0: int, r1: int, checked=True) -> np.ndarray:
    """Frames [r0, r1) of the store, checked (``checked``: the store's ``check_of``): one task per chunk of the
    store, which the tasks of every block it holds share (a read per block decoded a 65,536-frame chunk 175
    times for blocks of 8)."""
    import zarr

    from ..data import integrity

    g = zarr.open_group(store_path, mode="r")
    frames = integrity.read(g, store_path, "frames", r0, r1, checked)
    # min and max are NaN or infinite exactly when a value is (two passes without a temporary array)
    if len(frames) and not (np.isfinite(frames.min()) and np.isfinite(frames.max())):
        raise _nonfinite(g, store_path, frames, r0)
    return frames


def _nonfinite(g, store_path, frames: np.ndarray, r0: int):
    """The :class:`StoreError` for a non-finite value in ``frames`` (the store's frames from ``r0`` on), naming
    the sequence: ingestion refuses NaN and infinities, so only a store edited after it was written holds one
    (it was a ValueError traceback of the descriptor)."""
    from ..data import integrity
    from ..errors import StoreError

    row, col = (int(v) for v in np.argwhere(~np.isfinite(frames))[0])
    row += int(r0)
    offsets = np.asarray(g["offsets"][:], dtype=np.int64)
    i = int(np.searchsorted(offsets, row, side="right")) - 1
    try:
        a, b = (int(v) for v in g["id_offsets"][i:i + 2])
        name = f" ({bytes(np.asarray(g['id_bytes'][a:b], dtype=np.uint8)).decode('utf-8')!r})"
    except Exception:   # the ids are checked when the store is opened: the sequence by its row alone
        name = ""
    return StoreError(f"{store_path}: sequence {i}{name} holds a non-finite value (NaN or infinity) at frame "
                      f"{row - offsets[i]}, column {col}, which ingestion refuses: the store was edited; the store "
                      f"is damaged: {integrity.WRITE_AGAIN}")


def moments_of_frames(frames: np.ndarray, r0: int, c0: int, c1: int, offsets: np.ndarray,
                      selection: sk.JointSelection, numba_threads: int = 1):
    """Partial moments of all sequence pieces within frames [c0, c1) of a store, from ``frames``, the store's
    frames from ``r0`` on (:func:`read_frames`)."""
    frames = frames[c0 - r0:c1 - r0]
    s_lo = int(np.searchsorted(offsets, c0, side="right")) - 1
    s_hi = int(np.searchsorted(offsets, c1, side="left"))
    starts = np.clip(offsets[s_lo:s_hi], c0, c1) - c0
    stops = np.clip(offsets[s_lo + 1:s_hi + 1], c0, c1) - c0
    with kernel_threads(numba_threads):
        n, mean, m2 = sk.segment_moments(frames, starts, stops, selection)
    return s_lo, n, mean, m2


def merge_pieces(b0: int, b1: int, pieces) -> tuple[np.ndarray, np.ndarray]:
    """Moments (n, M2) of sequences [b0, b1) from chunk partials covering them."""
    d = pieces[0][2].shape[1]
    n_out = np.zeros(b1 - b0, dtype=np.int64)
    mean_out = np.zeros((b1 - b0, d))
    m2_out = np.zeros((b1 - b0, d, d))
    for s_lo, n, mean, m2 in pieces:
        for k in range(len(n)):
            s = s_lo + k
            if not b0 <= s < b1 or n[k] == 0:
                continue
            i = s - b0
            n_out[i], mean_out[i], m2_out[i] = merge_moments((n_out[i], mean_out[i], m2_out[i]),
                                                             (n[k], mean[k], m2[k]))
    return n_out, m2_out


def _chunk_pieces(offsets: np.ndarray, c0: int, c1: int):
    """``(s_lo, k, pieces)``: the sequences ``s_lo .. s_lo + k - 1`` that frames [c0, c1) touch, and
    ``(i, S0, S1, p0, p1)`` for each one's piece there (its frames [S0, S1), of which [p0, p1) lie in the
    chunk). One cut for the descriptors' chunk tasks and for the body sums said apart."""
    s_lo = int(np.searchsorted(offsets, c0, side="right")) - 1
    s_hi = int(np.searchsorted(offsets, c1, side="left"))
    pieces = []
    for i in range(s_hi - s_lo):
        S0, S1 = int(offsets[s_lo + i]), int(offsets[s_lo + i + 1])
        p0, p1 = max(S0, c0), min(S1, c1)
        if p1 > p0:
            pieces.append((i, S0, S1, p0, p1))
    return s_lo, s_hi - s_lo, pieces


def windows_of_frames(frames: np.ndarray, r0: int, c0: int, c1: int, offsets: np.ndarray, plan: sk.PyramidPlan,
                      numba_threads: int = 1):
    """Per-window partial moments and body sums of all sequence pieces within frames [c0, c1), from ``frames``,
    the store's frames from ``r0`` on (:func:`read_frames`).

    ``frames`` hold ``plan.halo`` frames beyond [c0, c1) on either side (within the store), so that the
    derivatives of the piece are those of the whole sequence. Returns ``(s_lo, n (k, W), mean (k, W, d),
    M2 (k, W, d, d), sums (k, sk.BODY_SUMS))``; with the mirror view, the W windows and the body sums of each
    view follow each other (2 W, 2 BODY_SUMS).
    """
    n_frames = int(offsets[-1])
    frames = frames[max(0, c0 - plan.halo) - r0:min(n_frames, c1 + plan.halo) - r0]
    r0 = max(0, c0 - plan.halo)
    frames = sk._check_frames(frames)
    s_lo, k, pieces = _chunk_pieces(offsets, c0, c1)
    single = plan.single_view()
    W, d, B = plan.n_windows, plan.frame_dim, sk.BODY_SUMS
    n = np.zeros((k, plan.views * W), dtype=np.int64)
    mean = np.zeros((k, plan.views * W, d))
    m2 = np.zeros((k, plan.views * W, d, d))
    sums = np.zeros((k, plan.views * B))
    with kernel_threads(numba_threads):
        for v, view in enumerate(plan.view_frames(frames)):   # the mirror view: the same windows of the mirror image
            w = slice(v * W, (v + 1) * W)
            for i, S0, S1, p0, p1 in pieces:
                e0, e1 = max(S0, p0 - plan.halo), min(S1, p1 + plan.halo)
                n[i, w], mean[i, w], m2[i, w] = sk.window_partials(view[e0 - r0:e1 - r0], e0 - S0, p0 - S0, p1 - S0,
                                                                   S1 - S0, single)
                if plan.needs_body:
                    sums[i, v * B:(v + 1) * B] = sk.body_sums(view[p0 - r0:p1 - r0], single)
    return s_lo, n, mean, m2, sums


def merge_windows(b0: int, b1: int, pieces):
    """Window moments (n, mean, M2) and body sums of sequences [b0, b1) from chunk partials."""
    _, n0, mean0, m20, _ = pieces[0]
    W, d = mean0.shape[1:]
    n_out = np.zeros((b1 - b0, W), dtype=np.int64)
    mean_out = np.zeros((b1 - b0, W, d))
    m2_out = np.zeros((b1 - b0, W, d, d))
    sums = np.zeros((b1 - b0, pieces[0][4].shape[1]))
    for s_lo, n, mean, m2, sm in pieces:
        for k in range(len(n)):
            i = s_lo + k - b0
            if not 0 <= i < b1 - b0:
                continue
            sums[i] += sm[k]
            for w in range(W):
                if n[k, w] == 0:
                    continue
                if n_out[i, w] == 0:
                    n_out[i, w], mean_out[i, w], m2_out[i, w] = n[k, w], mean[k, w], m2[k, w]
                else:
                    n_out[i, w], mean_out[i, w], m2_out[i, w] = merge_moments(
                        (n_out[i, w], mean_out[i, w], m2_out[i, w]), (n[k, w], mean[k, w], m2[k, w]))
    return n_out, mean_out, m2_out, sums


def chunk_body_sums(store_path: str, c0: int, c1: int, offsets: np.ndarray, plan: sk.PyramidPlan, checked=True):
    """The body sums of :func:`windows_of_frames` alone: ``(s_lo, sums (k, views * sk.BODY_SUMS))`` of the sequence
    pieces within frames [c0, c1), the same pieces summed in the same order, so that merged as
    :func:`merge_windows` merges them they are the sums the descriptors were made with, bit for bit."""
    return _body_sums(_chunk_frames(store_path, c0, c1, checked), c0, c1, offsets, plan)


def _body_sums(frames, c0: int, c1: int, offsets: np.ndarray, plan: sk.PyramidPlan):
    """:func:`chunk_body_sums` of the chunk's frames ``frames`` (frames [c0, c1) of the store)."""
    s_lo, k, pieces = _chunk_pieces(offsets, c0, c1)
    single, B = plan.single_view(), sk.BODY_SUMS
    sums = np.zeros((k, plan.views * B))
    for v, view in enumerate(plan.view_frames(frames)):
        for i, _, _, p0, p1 in pieces:
            sums[i, v * B:(v + 1) * B] = sk.body_sums(view[p0 - c0:p1 - c0], single)
    return s_lo, sums


def chunk_torso_unrotated(store_path: str, c0: int, c1: int, offsets: np.ndarray, plan: sk.PyramidPlan,
                          checked=True, sums=False):
    """``(s_lo, left (k,))``: how many frames of each sequence piece within frames [c0, c1) (the cut of
    :func:`chunk_body_sums`) ``body_frame = "torso-frames"`` leaves in the camera's frame
    (:func:`~streamcov.descriptors.skeleton.torso_unrotated`: the test the chunk tasks rotate the frames
    with). The sequence's own frames: its mirror image has the same degenerate frames. With ``sums``,
    ``(s_lo, left, body sums)``: those of :func:`chunk_body_sums` too, from the same read."""
    frames = _chunk_frames(store_path, c0, c1, checked)
    s_lo, k, pieces = _chunk_pieces(offsets, c0, c1)
    left = np.zeros(k, dtype=np.int64)
    if pieces:
        left[[i for i, *_ in pieces]] = sk.torso_unrotated(frames, [(p0 - c0, p1 - c0) for *_, p0, p1 in pieces],
                                                           plan)
    return (s_lo, left, _body_sums(frames, c0, c1, offsets, plan)[1]) if sums else (s_lo, left)


def _chunk_frames(store_path: str, c0: int, c1: int, checked=True) -> np.ndarray:
    """Frames [c0, c1) of the store (:func:`read_frames`), checked as :func:`windows_of_frames` checks them."""
    return sk._check_frames(read_frames(store_path, c0, c1, checked))


class SequenceNames:
    """How errors name the sequences ``b0, b0 + 1, ...`` of the store at ``path`` (or, with ``rows``, the
    sequences ``b0 + rows``): the store's row and the id it was ingested under. The id is read only when a
    message needs it, so that blocks carry a path and not their ids."""

    def __init__(self, path: str, b0: int, rows=None):
        self.path, self.b0, self.rows = path, int(b0), rows

    def __getitem__(self, i) -> str:
        row = self.b0 + int(i if self.rows is None else self.rows[i])
        try:
            from ..data.skeletons import SequenceStore

            return f"{row} (id {SequenceStore(self.path).id_of(row)!r})"
        except Exception:   # naming is a courtesy: an unreadable id must not hide the error being raised
            return str(row)


def block_pyramid(b0: int, b1: int, pieces, plan: sk.PyramidPlan, lengths: np.ndarray, dtype: str, rows,
                  numba_threads: int = 1, path: str | None = None) -> np.ndarray:
    """Descriptors with options of sequences ``b0 + rows`` (rows within the block [b0, b1)); ``path``, the
    store's, lets errors name a sequence by its id too."""
    n, mean, m2, sums = merge_windows(b0, b1, pieces)   # with ``rows``, pieces of those sequences only
    names = SequenceNames(path, b0) if path else None
    if rows is not None:
        n, mean, m2, sums, lengths = n[rows], mean[rows], m2[rows], sums[rows], lengths[rows]
        names = SequenceNames(path, b0, rows) if path else [str(b0 + k) for k in rows]
    empty = np.flatnonzero(n.min(axis=1) == 0)
    if len(empty):
        raise ValueError(f"sequence {sk._name(empty[0], b0, names)} has no frames in the store")
    with kernel_threads(numba_threads), gamma_named("descriptor.gamma"):
        return sk.pyramid_from_moments(n, mean, m2, sums, lengths, plan, dtype=np.dtype(dtype), first_index=b0,
                                       names=names)


def block_descriptors(b0: int, b1: int, pieces, descriptor: SkeletonDescriptor, rows,
                      numba_threads: int = 1, path: str | None = None) -> np.ndarray:
    """Descriptors of sequences ``b0 + rows`` (rows within the block [b0, b1)); ``path``, the store's, lets
    errors name a sequence by its id too."""
    n, m2 = merge_pieces(b0, b1, pieces)
    names = SequenceNames(path, b0) if path else None
    empty = np.flatnonzero(n == 0)
    if len(empty):
        raise ValueError(f"sequence {sk._name(empty[0], b0, names)} has no frames in the store")
    with kernel_threads(numba_threads), gamma_named("descriptor.gamma"):
        V = sk.log_vectors_from_moments(n, m2, descriptor.gamma, descriptor.normalize, descriptor.ddof,
                                        dtype=np.dtype(descriptor.dtype), first_index=b0, names=names)
    return V if rows is None else V[rows]


class SkeletonSource:
    """Log-covariance descriptors of the sequences of a :class:`~streamcov.data.SequenceStore`.

    See :mod:`streamcov.stream.source` for the protocol.
    """

    kind = "skeleton"
    default_block = 512
    needs_fit = False

    def __init__(self, store, descriptor: SkeletonDescriptor, joint_names=None, roles=None):
        self.store = store
        # a saved model's joint names and roles (the layout it was trained on; a store to predict may record
        # none: from_spec has checked that what it records agrees)
        self.joint_names = list(joint_names or store.attrs.get("joint_names", ()))
        self.roles = {str(k): [int(j) for j in v] for k, v in (roles or store_roles(store)).items()}
        guessed = False
        #: whether the up axis was found on the store (``up_axis = "auto"``, read by the yaw or the mirror): a
        #: saved model's spec says so, and predict finds it again on the store it is given (:meth:`from_spec`)
        self.up_axis_found = False
        if descriptor.up_axis == "auto":
            # resolved here, once, from the store: the descriptor (its fingerprint) records the axis found
            axis = "y"
            if descriptor.body_frame == "yaw" or descriptor.mirror:
                axis = find_up_axis(store, self.roles)
                guessed = axis is None
                self.up_axis_found = not guessed
            descriptor = replace(descriptor, up_axis=axis or "y")
        self.descriptor = descriptor
        self.selection = descriptor.selection(store.n_joints)
        self.plan = descriptor.plan(store.n_joints, self.roles, self.joint_names)   # a missing role: said first
        if guessed:
            import warnings

            warnings.warn("descriptor.up_axis = \"auto\" finds the up axis along the spine, but the store records no "
                          "upper-body role (neck, head, shoulders or spine): y is taken as up; set "
                          "descriptor.up_axis if the data is not y-up, or ingest it with its roles", stacklevel=2)
        self.state: dict = {}

    @property
    def kernel_blocks(self) -> list[tuple[int, float]]:
        """``(width, weight)`` of the descriptor's blocks: the kernel is the weighted sum of the
        Gaussian kernels of the blocks (one per pyramid window; one block of weight 1 without a pyramid)."""
        if self.plan is None:
            return [(self.dim, 1.0)]
        width = self.plan.view_dim // self.plan.n_windows
        return [(width, float(w)) for w in self.plan.window_weights()]

    @property
    def kernel_views(self) -> int:
        """Views in a row (2 with the mirror: ``[v(x), v(m x)]``, each laid out as :attr:`kernel_blocks`);
        the kernel averages over the pairs of views (:func:`streamcov.kernels.block_gaussian_kernel`)."""
        return 1 if self.plan is None else self.plan.views

    @property
    def n(self) -> int:
        return self.store.n_sequences

    def block_bytes(self, rows: int) -> float:
        """Memory of one block task of ``rows`` sequences: the d x d moments of every window (and view) as the
        chunk tasks give them, merged, and the matrices made from them, float64. It grows with the square of
        the frame width: 135 joints of positions and velocities make 805 x 805 matrices, 57 MB per sequence
        with the 11 windows of a 3-level pyramid."""
        if self.plan is None:
            per = self.selection.dim ** 2
        else:
            per = self.plan.n_windows * self.plan.views * self.plan.frame_dim ** 2
        return 3 * 8.0 * rows * per

    @property
    def dim(self) -> int:
        return vec_dim(self.selection.dim) if self.plan is None else self.plan.dim

    @property
    def dtype(self) -> str:
        return self.descriptor.dtype

    def fit(self, train, runtime, bounds):
        return self

    def with_state(self, state: dict):
        return self

    def spec(self) -> dict:
        spec = {"kind": self.kind, "descriptor": self.descriptor.as_dict(),
                "n_joints": self.store.n_joints, "joint_names": list(self.joint_names), "roles": dict(self.roles)}
        if self.up_axis_found:
            spec["up_axis_found"] = True
        return {**spec, **self._mirror_swap()}

    def _mirror_swap(self) -> dict:
        """``{"mirror_swap": [...]}``, the joints the mirror view swaps, found by a naming rule that may change
        (HipL/HipR, 2026-12-01): part of a saved model's spec and of the features' identity; ``{}`` without it."""
        if self.plan is None or not self.plan.mirror:
            return {}
        return {"mirror_swap": [int(j) for j in self.plan.mirror]}

    @classmethod
    def check_spec(cls, spec: dict) -> None:
        """Raise ValueError (or TypeError, KeyError) when ``spec`` cannot be a skeleton source's."""
        n = spec["n_joints"]
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"n_joints must be a positive integer, got {n!r}")
        desc = SkeletonDescriptor.from_dict(spec["descriptor"])
        if desc.center and max(desc.center) >= n:
            raise ValueError(f"descriptor center {list(desc.center)} names joints outside 0..{n - 1}")
        bad = [j for p in desc.pairs for j in p if not isinstance(j, str) and j >= n]
        if bad:
            raise ValueError(f"descriptor pairs name joints {bad} outside 0..{n - 1}")
        roles = spec.get("roles", {})
        if not isinstance(roles, dict) or not all(
                isinstance(v, list) and v and all(isinstance(j, int) and not isinstance(j, bool) and 0 <= j < n
                                                  for j in v) for v in roles.values()):
            raise ValueError(f"roles must name lists of joints in 0..{n - 1}, got {roles!r}")
        names = spec.get("joint_names")
        if names is not None and not (isinstance(names, list) and all(isinstance(j, str) for j in names)):
            raise ValueError(f"joint_names must be a list of joint names, got {names!r}")
        swap = spec.get("mirror_swap")
        if swap is not None and (not isinstance(swap, list) or sorted(swap) != list(range(n))
                                 or any(swap[swap[j]] != j for j in range(n))):
            raise ValueError(f"mirror_swap must be a permutation of 0..{n - 1} that is its own inverse, got {swap!r}")

    @classmethod
    def from_spec(cls, spec: dict, store):
        if store.n_joints != spec["n_joints"]:
            raise ConfigError(f"{store.path}: {store.n_joints} joints, but the model was trained on "
                              f"{spec['n_joints']}; use a store of the same skeleton layout")
        # the same count of joints is not the same layout (Kinect v2 and OpenPose BODY_25 both have 25): where
        # both record names, or both record a role, they must agree, else the descriptor would read the
        # store's joints as the model's (a silent loss of accuracy)
        names, theirs = list(spec.get("joint_names") or ()), list(store.attrs.get("joint_names", ()))
        if names and theirs and not (_placeholder(names) or _placeholder(theirs)) and names != theirs:
            j = next(i for i, (a, b) in enumerate(zip(names, theirs)) if a != b)
            raise ConfigError(f"{store.path}: joint {j} is {theirs[j]!r}, but the model was trained on a skeleton "
                              f"whose joint {j} is {names[j]!r}; use a store of the same skeleton layout (the "
                              f"same joints in the same order)")
        roles, recorded = spec.get("roles") or {}, store_roles(store)
        differ = sorted(r for r in set(roles) & set(recorded) if list(roles[r]) != list(recorded[r]))
        if differ:
            r = differ[0]
            raise ConfigError(f"{store.path}: the store's {r} is joint(s) {list(recorded[r])}, the model's "
                              f"{list(roles[r])} (roles differing: {', '.join(differ)}); use a store of the same "
                              f"skeleton layout, or ingest it with the model's roles")
        descriptor = SkeletonDescriptor.from_dict(spec["descriptor"])
        if spec.get("up_axis_found") is True:
            # the model found its training store's up axis along the spine: found again on this store, which may
            # stand another way up (a z-up archive given to a model of y-up Kinect data: with the training
            # store's axis the yaw turned the bodies about a horizontal axis, 23% where 95% was due, without a
            # word); a store that records no upper body keeps the model's axis
            try:
                found = spine_axes(store, {**recorded, **roles})
            except ConfigError:   # no spine in any sequence looked at: the model's axis
                found = None
            axis = None if found is None else AXES[int(np.argmax(found[0]))]
            if axis is not None and axis != descriptor.up_axis:
                from ..errors import say_note

                totals, looked = found
                model_axis = descriptor.up_axis
                if looked >= AXIS_EVIDENCE[0] and totals[AXES.index(axis)] >= AXIS_EVIDENCE[1] * totals[
                        AXES.index(model_axis)]:
                    say_note(f"{store.path}: its up axis is {axis} (along the spine), the model's training "
                             f"store's was {model_axis}; the descriptor turns the bodies about {axis}, as the "
                             f"model's descriptor.up_axis = \"auto\" does")
                    descriptor = replace(descriptor, up_axis=axis)
                else:
                    say_note(f"{store.path}: the spines of its {looked} sequence(s) looked at lean along {axis} "
                             f"more than along the model's up axis {model_axis}, but too few or too little to tell "
                             f"a camera standing another way up from bodies lying down: {model_axis} is kept")
        source = cls(store, descriptor, names or None, roles or None)
        if source.plan is not None and source.plan.mirror:
            saved = spec.get("mirror_swap")
            if saved is not None:   # the model's swap, whatever the naming rule finds today
                source.plan = replace(source.plan, mirror=tuple(int(j) for j in saved))
            elif tuple(source.plan.mirror) != sk.mirror_permutation(names or source.joint_names, camel_suffix=False):
                raise ModelError("the model's mirror view swaps the joints by the naming rule of its version, which "
                                 "did not pair names closed by a side letter (HipL/HipR) as this one does: its "
                                 "descriptors would not be those it was trained on; train the model again")
        return source

    def identity(self) -> dict:
        # the store by its identity, not by the path it was given as: the same store named otherwise (a relative
        # path, after a change of folder or a move) is the same features
        return {"kind": self.kind, "store": self.store.key, "n": self.n, "descriptor": self.descriptor.as_dict(),
                **self._mirror_swap()}

    def block_tasks(self, bounds, numba_threads: int = 1, rows=None):
        import dask

        store = self.store
        offsets = store.offsets
        path = task_path(store.path)
        cf = store.chunk_frames
        n_frames = store.n_frames
        sel = self.selection
        plan = self.plan
        chunk_tasks, read_tasks = {}, {}
        halo = 0 if plan is None else plan.halo

        def read_task(c):
            # the chunk's frames (and the halo frames beyond it), read once for every block that it holds
            if c not in read_tasks:
                r0, r1 = max(0, c * cf - halo), min(n_frames, (c + 1) * cf + halo)
                read_tasks[c] = (r0, dask.delayed(read_frames, pure=True)(
                    path, r0, r1, store.check_of("frames", r0, r1),
                    dask_key_name=f"frames-{c}-{dask.base.tokenize(path, r0, r1)}"))
            return read_tasks[c]

        def chunk_task(c, f0, f1):
            # the frames of chunk c that the block's sequences [f0, f1) hold: a task per chunk and block, so that
            # a task holds the moments of its block's sequences only (a 65,536-frame chunk of short sequences
            # held 1,450 sequences' 11 windows of 114 x 114 moments, 1.5 GiB, whatever dask.block_size said);
            # the pieces of a sequence, and so its bits, are those of the whole chunk
            c0, c1 = max(c * cf, int(f0)), min((c + 1) * cf, n_frames, int(f1))
            if (c0, c1) not in chunk_tasks:
                r0, frames = read_task(c)
                if plan is None:
                    chunk_tasks[c0, c1] = dask.delayed(moments_of_frames, pure=True)(
                        frames, r0, c0, c1, offsets, sel, numba_threads,
                        dask_key_name=f"moments-{c}-{dask.base.tokenize(path, c0, c1, sel)}")
                else:
                    chunk_tasks[c0, c1] = dask.delayed(windows_of_frames, pure=True)(
                        frames, r0, c0, c1, offsets, plan, numba_threads,
                        dask_key_name=f"windows-{c}-{dask.base.tokenize(path, c0, c1, plan)}")
            return chunk_tasks[c0, c1]

        def pieces_of(f0, f1):
            return [chunk_task(c, f0, f1) for c in range(int(f0 // cf), int((f1 - 1) // cf) + 1)]

        out = []
        for b0, b1 in zip(bounds[:-1], bounds[1:]):
            local = None if rows is None else np.flatnonzero(rows[b0:b1])
            if local is not None and not len(local):
                continue
            if plan is None:
                # the logs of the whole block (its moments come whole from the chunk tasks), the rows asked
                # taken from them
                task = dask.delayed(block_descriptors, pure=True)(
                    int(b0), int(b1), pieces_of(offsets[b0], offsets[b1]), self.descriptor, local, numba_threads,
                    path)
            else:
                if local is None:
                    pieces = pieces_of(offsets[b0], offsets[b1])
                else:
                    # a few rows of the block (a fit sample): the moments of the runs of consecutive rows asked
                    # for, from their own frames, where the whole block's were computed for them (a fit sample of
                    # 256 rows computed every block of a large store); a sequence's pieces are cut at the same
                    # chunk boundaries, so its moments are the whole block's bits (tested)
                    cut = np.flatnonzero(np.diff(local) > 1) + 1
                    pieces = [p for r in np.split(local, cut) for p in pieces_of(offsets[b0 + r[0]],
                                                                                   offsets[b0 + r[-1] + 1])]
                task = dask.delayed(block_pyramid, pure=True)(
                    int(b0), int(b1), pieces, plan, np.diff(offsets[b0:b1 + 1]), self.descriptor.dtype, local,
                    numba_threads, path)
            out.append((int(b0), int(b1), np.arange(b1 - b0) if local is None else local, task))
        return out

    def data_warnings(self, runtime) -> list[str]:
        """One line naming the sequences whose body frame fell back (:func:`~streamcov.descriptors.skeleton.
        body_fallback`: hips, neck and hip centre that give no direction or no size leave the identity rotation
        and the size 1), or, with ``body_frame = "torso-frames"``, whose frames were left in the camera's frame
        (:func:`chunk_torso_unrotated`: a frame whose hips or spine give no torso frame is not rotated), or
        none. Their descriptors are in the camera's frame, unlike the others', without a word otherwise: said
        once per run or prediction, as ingestion says the sequences it skipped. One pass over the store's frames
        computes the body sums, or counts the frames left, alone, as the descriptors' chunk tasks do."""
        plan = self.plan
        if plan is None or not plan.needs_body:
            return []
        per_frame = plan.body_frame == "torso-frames"
        by_sums = plan.scale != "none" or plan.body_frame in ("yaw", "torso")
        import dask

        from ..data.ragged import skipped_text

        store, offsets, cf = self.store, self.store.offsets, self.store.chunk_frames
        path, n_frames, N = task_path(store.path), store.n_frames, store.n_sequences
        chunks = [(c0, min(c0 + cf, n_frames)) for c0 in range(0, n_frames, cf)]
        # one read of each chunk: the frames left with torso-frames (and the body sums with it when a scale is
        # set), else the body sums
        tasks = []
        for c0, c1 in chunks:
            check = store.check_of("frames", c0, c1)
            tasks.append(dask.delayed(chunk_torso_unrotated, pure=True)(path, c0, c1, offsets, plan, check,
                                                                        sums=by_sums)
                         if per_frame else dask.delayed(chunk_body_sums, pure=True)(path, c0, c1, offsets, plan, check))
        done = runtime.compute(*tasks)
        lengths, single, B = np.diff(offsets), plan.single_view(), sk.BODY_SUMS
        reasons = {}
        if per_frame:
            left = np.zeros(N, dtype=np.int64)
            for s_lo, lf, *_ in done:
                left[s_lo:s_lo + len(lf)] += lf
            for i in np.flatnonzero(left):
                reasons[int(i)] = [f"{left[i]} of its {lengths[i]} frames"]
        sized = 0
        if by_sums:
            sums = np.zeros((N, plan.views * B))
            for s_lo, *_, sm in done:   # chunk order: the order merge_windows adds the pieces in
                sums[s_lo:s_lo + len(sm)] += sm
            for i in range(N):
                why = [w for v in range(plan.views) for w in sk.body_fallback(sums[i, v * B:(v + 1) * B],
                                                                             int(lengths[i]), single)]
                if why:
                    sized += 1
                    reasons.setdefault(i, []).extend(dict.fromkeys(why))   # the mirror view's are the sequence's
        if not reasons:
            return []
        ids = store.ids()
        fell = [{"id": f"sequence {i}, id {ids[i]!r}", "reason": "; ".join(reasons[i])} for i in sorted(reasons)]
        keys = [f"descriptor.{k} = {getattr(self.descriptor, k)!r}" for k in ("body_frame", "scale")
                if getattr(self.descriptor, k) != "none"]
        if per_frame:
            # a size of 0 is a spine of no length in every frame: those sequences are among the frames' ones
            head = (f"{int(left.sum())} frames of {np.count_nonzero(left)} of the {N} sequences of {path} were left "
                    f"in the camera's frame" + (f", and the body size of {sized} of them fell back" if sized else ""))
            tail = ("a frame whose hips are at one point, or whose spine (neck minus hip centre) is of no length or "
                    "lies along its hip line, has no torso frame and is not rotated" +
                    (", and where a size cannot be found their descriptors keep the camera's units (a size of 1)"
                     if sized else ""))
        else:
            head = f"the body frame of {len(fell)} of the {N} sequences of {path} fell back"
            tail = ("where a rotation cannot be found their descriptors keep the camera's frame (the identity "
                    "rotation), where a size cannot, its units (a size of 1)")
        return [f"{', '.join(keys)}: {head} {skipped_text(fell)}: {tail}; check the roles the store records "
                f"(`streamcov info {shlex.quote(str(path))}`) or leave those sequences out"]

    def window_keys(self, bounds, width: int):
        # Blocks are grouped by the frame chunk their first frame lies in, ``width``
        # chunks per window: a chunk's partial moments stay alive only until the
        # blocks that need them are done (chunk results are not shared between
        # compute calls, so a chunk cut by a window boundary is read twice).
        cf = self.store.chunk_frames
        return [int(self.store.offsets[b0] // cf) // max(1, width) for b0 in bounds[:-1]]


_OPTIONS = ("features", "joints", "window", "time", "levels", "overlap", "level_weights", "body_frame", "up_axis",
            "scale", "mean_weight", "pairs", "matrix", "kernel_sigma", "mirror")


UPPER_BODY = (("neck",), ("head",), ("left_shoulder", "right_shoulder"), ("spine",))


def find_up_axis(store, roles: dict, n: int = 16) -> str | None:
    """The camera's up axis ("x", "y" or "z"): the axis the spine (upper body minus hip centre) lies along.

    The mean spine of each of ``n`` sequences spread over the store, as a unit vector; the axis of the
    largest mean absolute component (:func:`spine_axes`). Datasets differ (Kinect and most mocap: y up; C3D
    and many motion-capture labs: z up), and a yaw about a horizontal axis tilts and flips the bodies: a
    silent loss of accuracy. The upper body is the first role the store records among the neck, the head,
    the two shoulders and the spine; the hip centre, the ``hip_center`` role, else the store's centre joints.
    None when the store records no upper-body role.
    """
    found = spine_axes(store, roles, n)
    return None if found is None else AXES[int(np.argmax(found[0]))]


def spine_axes(store, roles: dict, n: int = 16) -> tuple[np.ndarray, int] | None:
    """``(totals (3,), sequences)``: over ``n`` sequences spread over the store, the sums of the absolute
    components of each one's mean spine direction (a unit vector), and how many sequences gave one; None
    when the store records no upper-body role (:func:`find_up_axis`)."""
    hip = roles.get("hip_center") or list(store.center)
    found = next((names for names in UPPER_BODY if all(roles.get(r) for r in names)), None)
    if found is None or not hip:
        return None
    neck = [j for r in found for j in roles[r]]
    J = store.n_joints
    total, looked = np.zeros(3), 0
    for i in np.unique(np.linspace(0, store.n_sequences - 1, min(n, store.n_sequences)).round().astype(int)):
        X = np.asarray(store.sequence(int(i)), dtype=np.float64).reshape(-1, J, 3)
        v = (X[:, list(neck)].mean(1) - X[:, list(hip)].mean(1)).mean(0)
        length = float(np.linalg.norm(v))
        if length > 0:
            total += np.abs(v) / length
            looked += 1
    if not total.any():
        raise ConfigError(f"descriptor.up_axis = \"auto\": the {' and '.join(found)} and the hip centre coincide in "
                          f"every sequence looked at, so the spine gives no axis; set descriptor.up_axis to \"x\", "
                          f"\"y\" or \"z\"")
    return total, looked


#: what predict needs to turn a model's bodies about another axis than its training store's: spines of this
#: many sequences, leaning on the new axis at least this many times as much as on the model's (a few clips of
#: lying down or falling lean on a horizontal axis, and are not a camera that stands another way up)
AXIS_EVIDENCE = (3, 2.0)


def _placeholder(names) -> bool:
    """Names that say nothing of the joints: the generic format's defaults ``joint0, joint1, ...``."""
    return list(names) == [f"joint{j}" for j in range(len(names))]


def store_roles(store) -> dict:
    """The store's joint roles; stores of the MSR-Action3D, Florence3D and UTKinect readers
    written before roles were recorded get the roles those readers record now."""
    roles = store.roles
    if not roles:
        from ..data.readers import known_roles

        roles = known_roles(store.attrs.get("source"), store.n_joints)
    return roles


def skeleton_source(store, center="store", gamma=1e-4, normalize=True, ddof=1, dtype="float64", **options):
    """A :class:`SkeletonSource` with ``center`` as pipeline files write it: "store", "none" or joints.

    ``options``: the descriptor options of :class:`SkeletonDescriptor` (``features``,
    ``levels``, ``body_frame``, ...), lists as pipeline files write them.
    """
    if center == "store":
        joints = tuple(store.center)
    elif center in ("none", None):
        joints = None
    else:
        joints = tuple(int(c) for c in center)
    unknown = set(options) - set(_OPTIONS)
    if unknown:
        raise TypeError(f"unknown descriptor options {sorted(unknown)}")
    for key in ("features", "joints", "level_weights"):
        if options.get(key) is not None and not isinstance(options[key], str):
            options[key] = tuple(options[key])
    if options.get("joints") == "all":
        options["joints"] = None
    if options.get("pairs") is not None and not isinstance(options["pairs"], str):
        options["pairs"] = tuple(tuple(p) if isinstance(p, (list, tuple)) else p for p in options["pairs"])
    try:
        desc = SkeletonDescriptor(joints, float(gamma), bool(normalize), int(ddof), dtype, **options)
    except ValueError as exc:
        raise ConfigError(f"descriptor: {exc}") from None
    return SkeletonSource(store, desc)


def descriptor_array(source: SkeletonSource, block: int = 512, numba_threads: int = 1):
    """The descriptors of every row as one dask array, chunked by blocks."""
    import dask.array as da

    from .source import block_bounds

    bounds = block_bounds(source.n, block)
    parts = [da.from_delayed(t, shape=(b1 - b0, source.dim), dtype=np.dtype(source.dtype))
             for b0, b1, _, t in source.block_tasks(bounds, numba_threads)]
    return da.concatenate(parts, axis=0)
