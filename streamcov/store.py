"""Zarr (v3) store for ragged skeleton sequences.

Layout of a store (a zarr group)::

    frames      (total_frames, 3J) float32, chunked along frames
    offsets     (n + 1,) int64     sequence i is frames[offsets[i]:offsets[i+1]]
    labels      (n,) int32         codes into attrs["label_names"]
    subjects    (n,) int32
    split       (n,) int8          codes into attrs["split_names"]; -1 = none
    id_bytes    (total_id_bytes,) uint8, id_offsets (n + 1,) int64: UTF-8 ids

Zarr v3 has no stable string data type, hence the integer codes and the
ragged byte array for ids.

Writes go chunk by chunk. After every flush the number of *committed*
sequences and frames is recorded in the attributes; the completion marker
(``attrs["complete"] = True``) is written last, after every array and the
summary. A store without it is incomplete: :func:`open_store` refuses it,
``streamcov info`` says so, and a re-run of the ingestion resumes after the
last committed sequence (or restarts, on request).
"""
from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Iterable

import numpy as np

FORMAT_NAME = "streamcov.skeleton-sequences"
FORMAT_VERSION = 1
DEFAULT_CHUNK_FRAMES = 65536
_META_CHUNK = 65536


class StoreError(RuntimeError):
    """A store cannot be used as asked (missing, wrong kind, incomplete)."""


class IncompleteStoreError(StoreError):
    """The store has no completion marker: an ingestion did not finish."""


def _zarr():
    import zarr
    return zarr


def _open_group(path, mode):
    zarr = _zarr()
    try:
        return zarr.open_group(str(path), mode=mode)
    except (FileNotFoundError, zarr.errors.GroupNotFoundError) as exc:  # type: ignore[attr-defined]
        raise StoreError(f"{path}: no zarr store here ({exc.__class__.__name__}); "
                         f"create one with `streamcov ingest` or `streamcov synth`") from None


def store_status(path) -> dict:
    """Summary of a store without requiring it to be complete (for ``streamcov info``)."""
    path = Path(path)
    if not path.exists():
        raise StoreError(f"{path}: does not exist")
    g = _open_group(path, "r")
    attrs = dict(g.attrs)
    status = {
        "path": str(path),
        "format": attrs.get("format"),
        "complete": bool(attrs.get("complete", False)),
    }
    # every writer records its commit point as counts per unit (sequences/frames, images/pixels)
    status.update({f"committed_{unit}": n for unit, n in attrs.get("committed", {}).items()})
    for key in ("n_sequences", "n_frames", "n_joints", "n_images", "units", "source", "center",
                "label_names", "group_names", "split_names", "skipped", "repairs", "chunk_frames"):
        if key in attrs:
            status[key] = attrs[key]
    if "skipped" in status:
        status["n_skipped"] = len(status["skipped"])
        status["skipped"] = status["skipped"][:20]
    return status


def _ready(pending: list, committed: int, written: int):
    """The leading ``pending`` items (id, size, ...) whose data are all on disk, and their end."""
    end, n = committed, 0
    for item in pending:
        if end + item[1] > written:
            break
        end += item[1]
        n += 1
    return pending[:n], end


def _append_ids(g, k: int, id_pos: int, ids: list[str]) -> int:
    """Append UTF-8 ``ids`` after the first ``k`` (ragged bytes + offsets); returns the new byte end."""
    encoded = [i.encode("utf-8") for i in ids]
    blob = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    g["id_bytes"].resize((id_pos + len(blob),))
    if len(blob):
        g["id_bytes"][id_pos:] = blob
    g["id_offsets"].resize((k + 1 + len(ids),))
    g["id_offsets"][k + 1:] = id_pos + np.cumsum([len(e) for e in encoded])
    return id_pos + len(blob)


def open_complete(path: Path, format_name: str, kind: str, unit: str):
    """The zarr group and attributes of a complete store of ``format_name``.

    Raises :class:`StoreError` for another kind of store and
    :class:`IncompleteStoreError` when the completion marker is missing.
    """
    if not path.exists():
        raise StoreError(f"{path}: does not exist")
    g = _open_group(path, "r")
    attrs = dict(g.attrs)
    if attrs.get("format") != format_name:
        raise StoreError(f"{path}: not a streamcov {kind} store "
                         f"(format attribute {attrs.get('format')!r})")
    if not attrs.get("complete", False):
        c = attrs.get("committed", {})
        raise IncompleteStoreError(
            f"{path}: incomplete {kind} store ({c.get(unit, 0)} {unit} committed, no "
            f"completion marker): the ingestion was interrupted. Re-run the same ingest command "
            f"to resume it, or add --restart (mode='restart') to start over.")
    return g, attrs


class SequenceStore:
    """Read access to a complete skeleton sequence store."""

    def __init__(self, path):
        self.path = Path(path)
        g, attrs = open_complete(self.path, FORMAT_NAME, "skeleton", "sequences")
        self.group = g
        self.attrs = attrs
        self.offsets = np.asarray(g["offsets"][:], dtype=np.int64)
        self.labels = np.asarray(g["labels"][:], dtype=np.int32)
        self.subjects = np.asarray(g["subjects"][:], dtype=np.int32)
        self.split = np.asarray(g["split"][:], dtype=np.int8)

    # -- metadata ---------------------------------------------------------
    @property
    def frames(self):
        return self.group["frames"]

    @property
    def n_sequences(self) -> int:
        return len(self.offsets) - 1

    @property
    def n_frames(self) -> int:
        return int(self.offsets[-1])

    @property
    def n_joints(self) -> int:
        return int(self.attrs["n_joints"])

    @property
    def center(self) -> tuple[int, ...]:
        return tuple(self.attrs["center"])

    @property
    def label_names(self) -> list[str]:
        return list(self.attrs["label_names"])

    @property
    def split_names(self) -> list[str]:
        return list(self.attrs.get("split_names", []))

    @property
    def chunk_frames(self) -> int:
        return int(self.frames.chunks[0])

    def ids(self) -> list[str]:
        raw = np.asarray(self.group["id_bytes"][:], dtype=np.uint8).tobytes()
        off = np.asarray(self.group["id_offsets"][:], dtype=np.int64)
        return [raw[off[i]:off[i + 1]].decode("utf-8") for i in range(len(off) - 1)]

    def label_strings(self) -> np.ndarray:
        names = np.asarray(self.label_names, dtype=object)
        return names[self.labels]

    def split_strings(self) -> np.ndarray:
        names = np.asarray(self.split_names + [None], dtype=object)
        return names[np.where(self.split < 0, len(self.split_names), self.split)]

    def sequence(self, i: int) -> np.ndarray:
        if not 0 <= i < self.n_sequences:
            raise IndexError(f"sequence {i} out of range 0..{self.n_sequences - 1}")
        return np.asarray(self.frames[self.offsets[i]:self.offsets[i + 1]])

    def __len__(self):
        return self.n_sequences

    def __repr__(self):
        return (f"SequenceStore({str(self.path)!r}, sequences={self.n_sequences}, "
                f"frames={self.n_frames}, joints={self.n_joints})")


def open_store(path) -> SequenceStore:
    """Open a complete skeleton store; raises :class:`IncompleteStoreError` otherwise."""
    return SequenceStore(path)


class SequenceStoreWriter:
    """Append sequences chunk by chunk; resumable after an interruption.

    Parameters
    ----------
    path : str or Path
        Store location (a directory).
    info : SkeletonSourceInfo
        Joint count, names, units, source, centre joints; stored as attributes.
    chunk_frames : int
        Rows per chunk of ``frames``. Memory held by the writer is about one
        chunk of frames plus the per-sequence metadata.
    mode : {"create", "resume", "restart"}
        ``create`` fails if anything is at ``path``; ``resume`` continues an
        incomplete store after its last committed sequence (or creates a new
        one); ``restart`` deletes an incomplete store first. A complete store
        is never modified: delete it or choose another path.
    """

    def __init__(self, path, info, chunk_frames: int = DEFAULT_CHUNK_FRAMES, mode: str = "resume"):
        if mode not in ("create", "resume", "restart"):
            raise ValueError(f"mode must be create, resume or restart, got {mode!r}")
        if chunk_frames < 1:
            raise ValueError(f"chunk_frames must be >= 1, got {chunk_frames}")
        self.path = Path(path)
        self.info = info
        self.n_features = 3 * info.n_joints
        self._buf = np.empty((0, self.n_features), dtype=np.float32)
        self._pending = []   # sequences whose frames are (partly) in the buffer
        self._label_index: dict[str, int] = {}
        self._split_index: dict[str, int] = {}
        self.resumed_from = 0
        existing = self.path.exists() and any(self.path.iterdir()) if self.path.is_dir() else self.path.exists()
        if existing:
            status = store_status(self.path)
            if status["complete"]:
                raise StoreError(f"{self.path}: a complete store is already here; delete it or "
                                 f"choose another output path")
            if mode == "create":
                raise StoreError(f"{self.path}: an incomplete store is here; resume it or restart")
            if mode == "restart" or status["format"] != FORMAT_NAME:
                if status["format"] not in (FORMAT_NAME, None):
                    raise StoreError(f"{self.path}: holds something else ({status['format']}); "
                                     f"will not delete it")
                shutil.rmtree(self.path)
                self._create(chunk_frames)
            else:
                self._reopen()
        else:
            self._create(chunk_frames)

    # -- setup ------------------------------------------------------------
    def _create(self, chunk_frames):
        zarr = _zarr()
        g = zarr.open_group(str(self.path), mode="w")
        g.create_array("frames", shape=(0, self.n_features), chunks=(chunk_frames, self.n_features),
                       dtype="float32", fill_value=0.0)
        g.create_array("offsets", shape=(1,), chunks=(_META_CHUNK,), dtype="int64", fill_value=0)
        for name, dt in (("labels", "int32"), ("subjects", "int32"), ("split", "int8")):
            g.create_array(name, shape=(0,), chunks=(_META_CHUNK,), dtype=dt, fill_value=0)
        g.create_array("id_bytes", shape=(0,), chunks=(1 << 20,), dtype="uint8", fill_value=0)
        g.create_array("id_offsets", shape=(1,), chunks=(_META_CHUNK,), dtype="int64", fill_value=0)
        info = self.info
        g.attrs.update({
            "format": FORMAT_NAME, "format_version": FORMAT_VERSION, "complete": False,
            "n_joints": info.n_joints, "joint_names": list(info.joint_names),
            "layout": "frames x (x1, y1, z1, ..., xJ, yJ, zJ)", "units": info.units,
            "source": info.source, "center": list(info.center), "chunk_frames": int(chunk_frames),
            "label_names": list(info.label_names or []), "split_names": [],
            "extra": _jsonable(info.extra), "committed": {"sequences": 0, "frames": 0},
        })
        self.group = g
        for i, name in enumerate(info.label_names or []):
            self._label_index[name] = i
        self._ids: set[str] = set()
        self._committed_seq = 0
        self._committed_frames = 0
        self._frames_written = 0
        self._id_bytes = 0

    def _reopen(self):
        zarr = _zarr()
        g = zarr.open_group(str(self.path), mode="r+")
        a = dict(g.attrs)
        if a.get("n_joints") != self.info.n_joints or a.get("source") != self.info.source:
            raise StoreError(
                f"{self.path}: the incomplete store was started from another source "
                f"({a.get('source')!r}, {a.get('n_joints')} joints) than this one "
                f"({self.info.source!r}, {self.info.n_joints} joints); use --restart")
        c = a.get("committed", {"sequences": 0, "frames": 0})
        k, f = int(c["sequences"]), int(c["frames"])
        # Anything past the commit point may be half written: cut it off.
        g["frames"].resize((f, self.n_features))
        g["offsets"].resize((k + 1,))
        for name in ("labels", "subjects", "split"):
            g[name].resize((k,))
        g["id_offsets"].resize((k + 1,))
        nbytes = int(g["id_offsets"][k]) if k else 0
        g["id_bytes"].resize((nbytes,))
        self.group = g
        self._label_index = {n: i for i, n in enumerate(a.get("label_names", []))}
        self._split_index = {n: i for i, n in enumerate(a.get("split_names", []))}
        raw = np.asarray(g["id_bytes"][:], dtype=np.uint8).tobytes()
        off = np.asarray(g["id_offsets"][:], dtype=np.int64)
        self._ids = {raw[off[i]:off[i + 1]].decode("utf-8") for i in range(k)}
        self._committed_seq = k
        self._committed_frames = f
        self._frames_written = f
        self._id_bytes = nbytes
        self.resumed_from = k

    # -- writing ----------------------------------------------------------
    def has(self, seq_id: str) -> bool:
        """True when ``seq_id`` is already committed (skip it on resume)."""
        return seq_id in self._ids

    def append(self, seq) -> bool:
        """Append one :class:`SkeletonSequence`; returns False if it was already stored."""
        if seq.id in self._ids:
            return False
        frames = np.asarray(seq.frames)
        if frames.ndim != 2 or frames.shape[1] != self.n_features:
            raise ValueError(f"sequence {seq.id}: frames shape {frames.shape}, expected "
                             f"(T, {self.n_features}) for {self.info.n_joints} joints")
        if len(frames) == 0:
            raise ValueError(f"sequence {seq.id}: no frames")
        if not np.isfinite(frames).all():
            r, c = np.argwhere(~np.isfinite(frames))[0]
            raise ValueError(f"sequence {seq.id}: non-finite value at frame {r}, column {c}; "
                             f"readers must drop or repair such frames explicitly")
        self._ids.add(seq.id)
        label = self._code(self._label_index, str(seq.label))
        split = -1 if seq.split is None else self._code(self._split_index, str(seq.split))
        self._pending.append((seq.id, len(frames), label, int(seq.subject), split))
        self._buf = np.concatenate([self._buf, frames.astype(np.float32, copy=False)])
        cf = self.group["frames"].chunks[0]
        if len(self._buf) >= cf:
            self._flush(whole_chunks_only=True)
        return True

    @staticmethod
    def _code(index: dict, name: str) -> int:
        if name not in index:
            index[name] = len(index)
        return index[name]

    def _flush(self, whole_chunks_only: bool):
        g = self.group
        cf = g["frames"].chunks[0]
        n = (len(self._buf) // cf) * cf if whole_chunks_only else len(self._buf)
        if n:
            start = self._frames_written
            g["frames"].resize((start + n, self.n_features))
            g["frames"][start:start + n] = self._buf[:n]
            self._buf = self._buf[n:].copy()
            self._frames_written += n
        # Commit the sequences whose frames are now all on disk.
        done, end = _ready(self._pending, self._committed_frames, self._frames_written)
        if not done:
            return
        self._pending = self._pending[len(done):]
        k = self._committed_seq
        m = len(done)
        lengths = np.array([d[1] for d in done], dtype=np.int64)
        g["offsets"].resize((k + 1 + m,))
        g["offsets"][k + 1:] = self._committed_frames + np.cumsum(lengths)
        for name, col, dt in (("labels", 2, np.int32), ("subjects", 3, np.int32), ("split", 4, np.int8)):
            g[name].resize((k + m,))
            g[name][k:] = np.array([d[col] for d in done], dtype=dt)
        self._id_bytes = _append_ids(g, k, self._id_bytes, [d[0] for d in done])
        self._committed_seq += m
        self._committed_frames = end
        # The commit point moves only after the arrays above are written.
        g.attrs.update({
            "label_names": _names(self._label_index),
            "split_names": _names(self._split_index),
            "committed": {"sequences": self._committed_seq, "frames": self._committed_frames},
        })

    def close(self, skipped: Iterable = (), repairs: dict | None = None) -> SequenceStore:
        """Flush, write the summary, then the completion marker (last)."""
        self._flush(whole_chunks_only=False)
        if self._pending:  # pragma: no cover - guarded by _flush
            raise StoreError("internal error: sequences left uncommitted at close")
        if self._committed_seq == 0:
            raise StoreError(f"{self.path}: no sequence was written; the store stays incomplete")
        g = self.group
        prev = dict(g.attrs)
        skipped = [asdict(s) if hasattr(s, "__dataclass_fields__") else dict(s) for s in skipped]
        # Merge with what an interrupted earlier run recorded.
        known = {s["id"] for s in prev.get("skipped", [])}
        all_skipped = list(prev.get("skipped", [])) + [s for s in skipped if s["id"] not in known]
        g.attrs.update({
            "n_sequences": self._committed_seq,
            "n_frames": self._committed_frames,
            "skipped": all_skipped,
            "repairs": dict(repairs or {}),
        })
        g.attrs["complete"] = True
        return SequenceStore(self.path)


def _names(index: dict) -> list[str]:
    out = [None] * len(index)
    for name, i in index.items():
        out[i] = name
    return out


def _jsonable(obj):
    return json.loads(json.dumps(obj, default=str))


def ingest(source, out, chunk_frames: int = DEFAULT_CHUNK_FRAMES, mode: str = "resume",
           progress: bool = False, limit: int | None = None) -> SequenceStore:
    """Write every sequence of a :class:`~streamcov.readers.SkeletonSource` to a store.

    Memory stays bounded by one chunk of frames: sequences stream from the
    reader to the writer. On ``mode="resume"`` sequences already committed by an
    interrupted run are skipped by id, so every sequence ends up exactly once.
    ``limit`` stops after that many new sequences *without* completing the
    store (used to test interruption).
    """
    writer = SequenceStoreWriter(out, source.info, chunk_frames=chunk_frames, mode=mode)
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(desc=f"ingest {Path(out).name}", unit="seq", initial=writer.resumed_from)
    written = 0
    try:
        for seq in source.sequences():
            if writer.has(seq.id):
                continue
            writer.append(seq)
            written += 1
            if bar is not None:
                bar.update(1)
            if limit is not None and written >= limit:
                writer._flush(whole_chunks_only=False)
                return None
    finally:
        if bar is not None:
            bar.close()
    skipped = getattr(source, "skipped", [])
    repairs = getattr(source, "repairs", {})
    return writer.close(skipped=skipped, repairs=repairs)
