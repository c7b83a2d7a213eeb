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
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .._config import kernel_threads
from ..descriptors import skeleton as sk
from ..errors import ConfigError
from ..linalg import merge_moments, vec_dim


@dataclass(frozen=True)
class SkeletonDescriptor:
    """Settings of the log-covariance descriptor: ``center`` joints (None: raw coordinates)."""

    center: tuple | None
    gamma: float = 1e-4
    normalize: bool = True
    ddof: int = 1
    dtype: str = "float64"

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

    def selection(self, n_joints: int) -> sk.JointSelection:
        if not self.center:
            return sk.JointSelection.raw(n_joints)
        try:
            return sk.JointSelection.hip_relative(n_joints, self.center)
        except ValueError as exc:
            raise ConfigError(f"descriptor.center = {list(self.center)}: {exc} (the store has "
                              f"{n_joints} joints)") from None

    def as_dict(self) -> dict:
        d = asdict(self)
        d["center"] = None if self.center is None else [int(c) for c in self.center]
        return d


def chunk_moments(store_path: str, c0: int, c1: int, offsets: np.ndarray,
                  selection: sk.JointSelection, numba_threads: int = 1, checked=True):
    """Partial moments of all sequence pieces within frames [c0, c1) of a store.

    ``checked``: what :func:`streamcov.data.integrity.read` checks (the store's ``check_of``).
    """
    import zarr

    from ..data import integrity

    frames = integrity.read(zarr.open_group(store_path, mode="r"), store_path, "frames", c0, c1, checked)
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


def block_descriptors(b0: int, b1: int, pieces, descriptor: SkeletonDescriptor, rows,
                      numba_threads: int = 1) -> np.ndarray:
    """Descriptors of sequences ``b0 + rows`` (rows within the block [b0, b1))."""
    n, m2 = merge_pieces(b0, b1, pieces)
    empty = np.flatnonzero(n == 0)
    if len(empty):
        raise ValueError(f"sequence {b0 + empty[0]} has no frames in the store")
    with kernel_threads(numba_threads):
        V = sk.log_vectors_from_moments(n, m2, descriptor.gamma, descriptor.normalize, descriptor.ddof,
                                        dtype=np.dtype(descriptor.dtype), first_index=b0)
    return V if rows is None else V[rows]


class SkeletonSource:
    """Log-covariance descriptors of the sequences of a :class:`~streamcov.data.SequenceStore`.

    See :mod:`streamcov.stream.source` for the protocol.
    """

    kind = "skeleton"
    default_block = 512
    needs_fit = False

    def __init__(self, store, descriptor: SkeletonDescriptor):
        self.store = store
        self.descriptor = descriptor
        self.selection = descriptor.selection(store.n_joints)
        self.state: dict = {}

    @property
    def n(self) -> int:
        return self.store.n_sequences

    @property
    def dim(self) -> int:
        return vec_dim(self.selection.dim)

    @property
    def dtype(self) -> str:
        return self.descriptor.dtype

    def fit(self, train, runtime, bounds):
        return self

    def with_state(self, state: dict):
        return self

    def spec(self) -> dict:
        return {"kind": self.kind, "descriptor": self.descriptor.as_dict(),
                "n_joints": self.store.n_joints, "joint_names": list(self.store.attrs.get("joint_names", []))}

    @classmethod
    def check_spec(cls, spec: dict) -> None:
        """Raise ValueError (or TypeError, KeyError) when ``spec`` cannot be a skeleton source's."""
        n = spec["n_joints"]
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"n_joints must be a positive integer, got {n!r}")
        d = dict(spec["descriptor"])
        center = d.pop("center")
        desc = SkeletonDescriptor(center=None if center is None else tuple(center), **d)
        if desc.center and max(desc.center) >= n:
            raise ValueError(f"descriptor center {list(desc.center)} names joints outside 0..{n - 1}")

    @classmethod
    def from_spec(cls, spec: dict, store):
        if store.n_joints != spec["n_joints"]:
            raise ConfigError(f"{store.path}: {store.n_joints} joints, but the model was trained on "
                              f"{spec['n_joints']}; use a store of the same skeleton layout")
        d = dict(spec["descriptor"])
        center = d.pop("center")
        return cls(store, SkeletonDescriptor(center=None if center is None else tuple(center), **d))

    def identity(self) -> dict:
        return {"kind": self.kind, "store": self.store.identity, "path": str(self.store.path),
                "n": self.n, "descriptor": self.descriptor.as_dict()}

    def block_tasks(self, bounds, numba_threads: int = 1, rows=None):
        import dask

        store = self.store
        offsets = store.offsets
        path = str(store.path)
        cf = store.chunk_frames
        n_frames = store.n_frames
        sel = self.selection
        chunk_tasks = {}

        def chunk_task(c):
            if c not in chunk_tasks:
                c0, c1 = c * cf, min((c + 1) * cf, n_frames)
                chunk_tasks[c] = dask.delayed(chunk_moments, pure=True)(
                    path, c0, c1, offsets, sel, numba_threads, store.check_of("frames", c0, c1),
                    dask_key_name=f"moments-{c}-{dask.base.tokenize(path, c0, c1, sel)}")
            return chunk_tasks[c]

        out = []
        for b0, b1 in zip(bounds[:-1], bounds[1:]):
            local = None if rows is None else np.flatnonzero(rows[b0:b1])
            if local is not None and not len(local):
                continue
            f0, f1 = offsets[b0], offsets[b1]
            pieces = [chunk_task(c) for c in range(int(f0 // cf), int((f1 - 1) // cf) + 1)]
            task = dask.delayed(block_descriptors, pure=True)(
                int(b0), int(b1), pieces, self.descriptor, local, numba_threads)
            out.append((int(b0), int(b1), np.arange(b1 - b0) if local is None else local, task))
        return out

    def window_keys(self, bounds, width: int):
        # Blocks are grouped by the frame chunk their first frame lies in, ``width``
        # chunks per window: a chunk's partial moments stay alive only until the
        # blocks that need them are done (chunk results are not shared between
        # compute calls, so a chunk cut by a window boundary is read twice).
        cf = self.store.chunk_frames
        return [int(self.store.offsets[b0] // cf) // max(1, width) for b0 in bounds[:-1]]


def skeleton_source(store, center="store", gamma=1e-4, normalize=True, ddof=1, dtype="float64"):
    """A :class:`SkeletonSource` with ``center`` as pipeline files write it: "store", "none" or joints."""
    if center == "store":
        joints = tuple(store.center)
    elif center in ("none", None):
        joints = None
    else:
        joints = tuple(int(c) for c in center)
    return SkeletonSource(store, SkeletonDescriptor(joints, float(gamma), bool(normalize), int(ddof), dtype))


def descriptor_array(source: SkeletonSource, block: int = 512, numba_threads: int = 1):
    """The descriptors of every row as one dask array, chunked by blocks."""
    import dask.array as da

    from .source import block_bounds

    bounds = block_bounds(source.n, block)
    parts = [da.from_delayed(t, shape=(b1 - b0, source.dim), dtype=np.dtype(source.dtype))
             for b0, b1, _, t in source.block_tasks(bounds, numba_threads)]
    return da.concatenate(parts, axis=0)
