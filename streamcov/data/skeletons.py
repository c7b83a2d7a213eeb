"""Zarr (v3) stores of ragged skeleton sequences.

Layout of a store (a zarr group, written by :class:`~streamcov.data.ragged.RaggedStoreWriter`)::

    frames      (total_frames, 3J) float32, chunked along frames
    offsets     (n + 1,) int64     sequence i is frames[offsets[i]:offsets[i+1]]
    labels      (n,) int32         codes into attrs["label_names"]
    subjects    (n,) int32
    split       (n,) int8          codes into attrs["split_names"]; -1 = none
    id_bytes    (total_id_bytes,) uint8, id_offsets (n + 1,) int64: UTF-8 ids

plus the attributes of the reader (joint names, units, centre joints,
roles). Writes are committed chunk by chunk and the completion marker comes
last (:mod:`streamcov.data.ragged`): an interrupted ingestion leaves an
incomplete store that readers refuse and that the same call resumes.
"""
from __future__ import annotations

import itertools
import os
from dataclasses import asdict
from pathlib import Path
from typing import Iterable

import numpy as np

from ..errors import FormatError, StoreError, path_arg, read_or_skip
from . import integrity
from .ragged import RaggedStore, RaggedStoreWriter, ingest_args, outside_source

FORMAT_NAME = "streamcov.skeleton-sequences"
DEFAULT_CHUNK_FRAMES = 65536


def _index_list(v) -> bool:
    """Whether the attribute value ``v`` is a list of integers (JSON's true and false are not joints)."""
    return isinstance(v, list) and all(isinstance(j, int) and not isinstance(j, bool) for j in v)


class SequenceStore(RaggedStore):
    """Read access to a complete skeleton sequence store."""

    FORMAT = FORMAT_NAME
    KIND = "skeleton"
    UNIT = "sequences"
    DATA = "frames"

    def __init__(self, path):
        super().__init__(path)
        self.labels = self.read("labels").astype(np.int32)
        self.subjects = self.read("subjects").astype(np.int32)
        self.split = self.read("split").astype(np.int8)
        self.check_rows(("labels", "subjects", "split"), {"labels": "label_names", "split": "split_names"})
        damaged = "the store is damaged: " + integrity.WRITE_AGAIN
        # attributes and array metadata edited by hand: refused here, never a crash or a wrong reading later
        n_joints, center = self.attrs.get("n_joints"), self.attrs.get("center")
        if not isinstance(n_joints, int) or isinstance(n_joints, bool):
            raise StoreError(f"{self.path}: attribute n_joints = {n_joints!r} is not an integer; {damaged}")
        if not _index_list(center) or not center:   # ingestion writes one joint at least (check_center)
            raise StoreError(f"{self.path}: attribute center = {center!r} is not a non-empty list of joint indices; "
                             f"{damaged}")
        frames = self.group["frames"]
        if frames.dtype != np.float32:
            raise StoreError(f"{self.path}: array 'frames' is of type {frames.dtype}, not float32 "
                             f"(its zarr.json was edited); {damaged}")
        width = frames.shape[1:]
        if width != (3 * self.n_joints,):
            raise StoreError(f"{self.path}: attribute n_joints = {self.n_joints} but array 'frames' has rows of "
                             f"{width}; {damaged}")
        names = self.attrs.get("joint_names")
        # the mirror, the layout check of predict and the roles found by name read one name per joint
        if not (isinstance(names, list) and len(names) == self.n_joints and all(isinstance(x, str) for x in names)):
            got = (f"{len(names)} names" if isinstance(names, list) else repr(names)[:60])
            raise StoreError(f"{self.path}: attribute joint_names ({got}) is not a list of {self.n_joints} names, "
                             f"one per joint; {damaged}")
        bad = [c for c in self.center if not 0 <= c < self.n_joints]
        if bad:
            raise StoreError(f"{self.path}: attribute center = {list(self.center)} names joints outside 0.."
                             f"{self.n_joints - 1}; {damaged}")
        # the body frame and scale index frames by these joints: one out of range would crash the chunk tasks
        roles = self.attrs.get("roles", {})   # absent in stores written before roles were recorded
        if not isinstance(roles, dict) or not all(_index_list(v) for v in roles.values()):
            raise StoreError(f"{self.path}: attribute roles = {roles!r} is not a table of joint index lists; {damaged}")
        bad = {r: v for r, v in roles.items() if any(not 0 <= j < self.n_joints for j in v)}
        if bad:
            raise StoreError(f"{self.path}: attribute roles holds joint indices outside 0..{self.n_joints - 1} "
                             f"({', '.join(f'{r} = {v}' for r, v in bad.items())}); {damaged}")
        self.check_sealed()

    @property
    def frames(self):
        return self.group["frames"]

    @property
    def groups(self) -> np.ndarray:
        """The subjects: the groups of leave-one-group-out protocols."""
        return self.subjects

    @property
    def subject_names(self) -> list[str] | None:
        """The names of the subject codes where the archive named its subjects (HDM05's ``bd, bk, dg, mm, tr``
        are 0..4, in sorted order), else None."""
        extra = self.attrs.get("extra")
        names = extra.get("subject_names") if isinstance(extra, dict) else None
        return list(names) if isinstance(names, list) and all(isinstance(n, str) for n in names) else None

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
    def roles(self) -> dict:
        return dict(self.attrs.get("roles", {}))

    @property
    def chunk_frames(self) -> int:
        return int(self.frames.chunks[0])

    def sequence(self, i: int) -> np.ndarray:
        if not 0 <= i < self.n_sequences:
            raise IndexError(f"sequence {i} out of range 0..{self.n_sequences - 1}")
        return self.read("frames", self.offsets[i], self.offsets[i + 1])

    def sequences(self) -> list[np.ndarray]:
        """Every sequence as an array (frames, 3J), in memory: small stores only."""
        frames = self.read("frames")
        return [frames[a:b] for a, b in zip(self.offsets[:-1], self.offsets[1:])]

    def __repr__(self):
        return (f"SequenceStore({str(self.path)!r}, sequences={self.n_sequences}, "
                f"frames={self.n_frames}, joints={self.n_joints})")


def open_store(path) -> SequenceStore:
    """Open a complete skeleton store; raises :class:`~streamcov.errors.StoreError` otherwise
    (:class:`~streamcov.errors.IncompleteStoreError` for one whose writing was cut)."""
    return SequenceStore(path_arg("path", path, "STORE", "the folder of a store (written by `streamcov ingest`)"))


class SequenceStoreWriter(RaggedStoreWriter):
    """Append :class:`~streamcov.data.readers.SkeletonSequence` items chunk by chunk; resumable.

    Parameters
    ----------
    path : str or Path
    info : SkeletonInfo
        Joint count, names, units, source, centre joints, roles; stored as attributes.
    chunk_frames : int, optional
        Rows per chunk of ``frames`` (default 65536); the writer holds about one chunk. A store being
        resumed keeps its own: another value given here is refused.
    mode : {"create", "resume", "restart"}
        As :class:`~streamcov.data.ragged.RaggedStoreWriter`.
    record : dict, optional
        Where the sequences come from (format, folder, reader options, or
        generator parameters): an interrupted ingestion resumes only with
        the same record.
    """

    def __init__(self, path, info, chunk_frames: int | None = None, mode: str = "resume",
                 record: dict | None = None):
        self.info = info
        given = chunk_frames is not None
        chunk_frames = DEFAULT_CHUNK_FRAMES if chunk_frames is None else chunk_frames
        self.n_features = 3 * info.n_joints
        attrs = {"n_joints": info.n_joints, "joint_names": list(info.joint_names),
                 "layout": "frames x (x1, y1, z1, ..., xJ, yJ, zJ)", "units": info.units,
                 "source": info.source, "center": list(info.center), "roles": dict(info.roles),
                 "chunk_frames": int(chunk_frames), "extra": info.extra,
                 "source_record": record or {"source": info.source}}
        super().__init__(path, format_name=FORMAT_NAME, kind="skeleton", unit="sequences",
                         data_unit="frames", data="frames", row_shape=(self.n_features,),
                         dtype="float32", chunk_rows=chunk_frames,
                         columns={"labels": ("int32", ()), "subjects": ("int32", ()),
                                  "split": ("int8", ())},
                         coded={"labels": "label_names", "split": "split_names"},
                         attrs=attrs, same=("source_record", "source", "n_joints"),
                         initial_names={"labels": list(info.label_names or [])}, mode=mode, chunk_given=given)
        # [id, rounding, motion] of the sequences whose float32 storage rounds away part of their motion
        # (float32_rounding), committed with the commit point that covers them: an interrupted ingestion's are
        # counted by the run that resumes it
        self.rounded = [r for r in self.group.attrs.get("float32_rounded", []) if self.has(r[0])]
        self._rounded_new: dict = {}

    def commit_attrs(self, ids: list[str]) -> dict:
        new = [self._rounded_new.pop(i) for i in ids if i in self._rounded_new]
        if not new:
            return {}
        self.rounded += new
        return {"float32_rounded": list(self.rounded)}

    def check(self, seq) -> np.ndarray:
        """The frames of ``seq`` if they fit the store (joint count, finite values); a ValueError otherwise."""
        frames = np.asarray(seq.frames)
        if frames.ndim != 2 or frames.shape[1] != self.n_features:
            raise ValueError(f"sequence {seq.id}: frames shape {frames.shape}, expected "
                             f"(T, {self.n_features}) for {self.info.n_joints} joints")
        if not np.isfinite(frames).all():
            # readers refuse non-finite numbers in their files; this is one that overflowed as the reader
            # computed it (forward kinematics of huge offsets or angles) or as float32
            r, c = np.argwhere(~np.isfinite(frames))[0]
            raise FormatError(f"sequence {seq.id}", f"non-finite value at frame {r + 1}, joint {c // 3 + 1} "
                              f"(coordinate {'xyz'[c % 3]}): a coordinate "
                              f"beyond float32's range (about 3.4e38) as read or computed from the file; fix "
                              f"the file or leave the sequence out")
        return frames

    def append(self, seq) -> bool:
        """Append one sequence; returns False if it was already stored."""
        if self.has(seq.id):
            return False
        frames = self.check(seq)
        if len(frames) == 0:
            raise ValueError(f"sequence {seq.id}: no frames")
        err, motion = float32_rounding(frames)
        if err > FLOAT32_ROUNDING * motion:
            self._rounded_new[str(seq.id)] = [str(seq.id), err, motion]
        return super().append(seq.id, frames.astype(np.float32, copy=False), labels=str(seq.label),
                              subjects=int(seq.subject), split=seq.split)

    def close(self, skipped: Iterable = (), repairs: dict | None = None) -> SequenceStore:
        """Flush, write the summary (with what an interrupted earlier run skipped), then the marker."""
        prev = dict(self.group.attrs)
        skipped = [asdict(s) if hasattr(s, "__dataclass_fields__") else dict(s) for s in skipped]
        known = {s["id"] for s in prev.get("skipped", [])}
        all_skipped = list(prev.get("skipped", [])) + [s for s in skipped if s["id"] not in known]
        super().close({"skipped": all_skipped, "repairs": dict(repairs or {})})
        return SequenceStore(self.path)


def ingest(source, out, chunk_frames: int | None = None, mode: str = "resume",
           progress: bool = False, limit: int | None = None, on_error: str = "stop") -> SequenceStore:
    """Write every sequence of a :class:`~streamcov.data.readers.SkeletonReader` to a store.

    Memory stays bounded by one chunk of frames: sequences stream from the
    reader to the writer. On ``mode="resume"`` sequences already committed by an
    interrupted run are skipped by id, so every sequence ends up exactly once.
    ``limit`` stops after that many new sequences *without* completing the
    store (used to test interruption).

    ``on_error="stop"`` stops at a file that is damaged or not of the format
    (its :class:`~streamcov.errors.FormatError`: file, line, what was
    expected), keeping the sequences committed before it. The same call with
    ``on_error="skip"`` resumes after them without mending the file; once
    the file is mended the archive has changed, and the store is written
    again with ``mode="restart"``. ``"skip"`` records such a file's
    sequences in the store's ``skipped`` list with the error and goes on;
    what is not one file's fault (:func:`~streamcov.errors.file_fault`: a
    missing file, a read error of the system, a file that differs only from
    the first file's layout) still stops. The choice is not part of the
    store's source record: the store holds every readable sequence either
    way.

    Parameters
    ----------
    source : SkeletonReader
        A reader of :func:`~streamcov.data.readers.open_reader`, or an object with ``info`` and
        ``sequences()`` (:class:`~streamcov.data.synth.SyntheticSkeletons`; ``on_error="skip"`` needs a reader).
    out : path
        Store location.
    chunk_frames : int, optional
        Frames per chunk of the store's ``frames`` (default 65536); memory held is about one chunk. A store
        being resumed keeps its own: another value given here is refused.
    mode : {"create", "resume", "restart"}
        As :class:`~streamcov.data.ragged.RaggedStoreWriter`.
    progress : bool
        Show a progress bar of the sequences written.
    limit : int, optional
        Stop after that many new sequences without completing the store (tests).
    on_error : {"stop", "skip"}
        What a damaged file does (above).

    Returns
    -------
    SequenceStore, or None when stopped by ``limit``.
    """
    from ..lock import store_lock

    if not (hasattr(source, "info") and callable(getattr(source, "sequences", None))):   # a reader, or one like it
        hint = (f"; open the archive first: ingest(open_reader(FORMAT, {str(source)!r}), out)"
                if isinstance(source, (str, Path)) else "")
        raise TypeError(f"source must be a skeleton reader (streamcov.open_reader), got {type(source).__name__}"
                        f"{hint}")
    out = ingest_args(out, limit, on_error)
    if hasattr(source, "on_error"):
        source.on_error = on_error
    elif on_error == "skip":
        raise TypeError(f"on_error='skip' needs a reader of streamcov.open_reader, which reads one file at a time; "
                        f"{type(source).__name__} cannot skip a file")
    record = getattr(source, "record", None)
    outside_source(out, record.get("path") if isinstance(record, dict) else None)
    # the first sequence and the archive's contents are read before the lock, as the reader read the archive's
    # index when it was opened: an archive whose first file (or any file) cannot be read is refused before
    # anything is written (the lock creates the store's parent folders, the writer an empty store)
    if callable(getattr(source, "check_room", None)) and not os.path.exists(out):   # a generator: its size is known
        source.check_room(out, limit)
    sequences = iter(source.sequences())
    first = next(sequences, None)
    content = getattr(source, "content", None)
    if isinstance(record, dict) and isinstance(record.get("files"), dict) and callable(content):
        # recorded with the store (one plain read of the archive's files): a copy of the archive with new
        # modification times is then known for the same files
        record = {**record, "files": {**record["files"], "content": content()}}
    with store_lock(out):
        return _ingest(source, record, sequences if first is None else itertools.chain([first], sequences), out,
                       chunk_frames, mode, progress, limit)


def degenerate(frames) -> str | None:
    """Why a sequence cannot give a covariance, or None: the rule every reader's sequences go through.

    A sequence needs at least 2 distinct frames (one frame, or a body that
    never moves, has a zero covariance: its descriptor would be log(gamma I)
    whatever the action). Such sequences are skipped at ingestion and
    recorded in the store's ``skipped`` list with this reason. A joint that
    is constant within a sequence is fine: the regularization gamma I keeps
    the covariance positive definite.
    """
    frames = np.asarray(frames)
    if len(frames) == 0:
        return "no frames"
    if len(frames) == 1:
        return "1 frame; a covariance needs at least 2 distinct frames"
    if not (frames != frames[0]).any():
        return f"all {len(frames)} frames are identical; a covariance needs at least 2 distinct frames"
    return None


#: the float32 rounding of a sequence's coordinates, as a fraction of its largest range of motion, above which
#: ingestion says so: coordinates near 1e6 (a world frame in millimetres far from its origin) move by centimetres
#: in steps of 0.06, which the descriptors then see
FLOAT32_ROUNDING = 1e-3


def float32_rounding(frames) -> tuple[float, float]:
    """``(rounding, motion)`` of ``frames`` (T, 3J) stored as float32: half the float32 spacing at its largest
    coordinate (the most a value moves when rounded to float32: readers round as they parse, so it is bounded
    from the magnitudes, not measured), and the largest range of one coordinate over the sequence."""
    frames = np.asarray(frames)
    if not frames.size:
        return 0.0, 0.0
    top = np.float32(min(float(np.abs(frames).max()), float(np.finfo(np.float32).max)))
    return 0.5 * float(np.spacing(top)), float(np.ptp(frames.astype(np.float64, copy=False), axis=0).max())


def _coarse_note(coarse: list) -> str:
    """The warning of the sequences whose float32 storage rounds away part of their motion."""
    err = max(e for _, e, _ in coarse)
    sid, e, m = coarse[0]
    return (f"{len(coarse)} sequence(s) lie so far from the origin that storing them as float32 rounds their "
            f"coordinates by up to {err:.3g}, over {FLOAT32_ROUNDING:.1%} of their motion (first: {sid}, rounding "
            f"{e:.3g} against a range of {m:.3g}); the descriptors see that rounding: translate the coordinates "
            f"nearer the origin before ingesting (e.g. subtract a fixed point of the scene)")


def _ingest(source, record, sequences, out, chunk_frames, mode, progress, limit):
    from .readers.base import SkippedSequence

    writer = SequenceStoreWriter(out, source.info, chunk_frames=chunk_frames, mode=mode, record=record)
    rejected = []
    bar = None
    if progress:
        from .._config import new_bar

        try:   # the count where the source knows it: the bar then shows how far, and how long is left
            total = len(source) if limit is None else None   # (a limit stops early: no total to reach)
        except TypeError:
            total = None
        bar = new_bar(desc=f"ingest {Path(out).name}", unit="seq", initial=writer.resumed_from, total=total)
    written = 0
    read_all = False   # every sequence of the source came (the bar's total then trimmed to those there were)
    # a sequence that cannot be read keeps those read before it, or leaves no empty store
    with writer.committed_on_error():
        try:
            for seq in sequences:
                if writer.has(seq.id):
                    continue
                # a value beyond float32 as read or computed is the file's own fault, skipped as a damaged file is
                frames, why = read_or_skip(getattr(source, "on_error", "stop"), writer.check, seq,
                                           failed="cannot be stored")
                if why is None:
                    why = degenerate(frames)
                if why is not None:
                    rejected.append(SkippedSequence(seq.id, why))
                    if bar is not None:
                        bar.update(1)
                    continue
                writer.append(seq)
                written += 1
                if bar is not None:
                    bar.update(1)
                if limit is not None and written >= limit:
                    writer.flush()
                    return None
            read_all = True
        finally:
            if bar is not None:
                if read_all and bar.total is not None and bar.n < bar.total:
                    bar.total = bar.n   # files the reader skipped never came: the bar ends at what there was
                    bar.refresh()
                bar.close()
        skipped = list(getattr(source, "skipped", [])) + rejected
        repairs = getattr(source, "repairs", {})
        if skipped and not writer.resumed_from and not written:
            from .ragged import skipped_text

            # close() would say only that nothing was written: say why
            listed = [asdict(s) if hasattr(s, "__dataclass_fields__") else dict(s) for s in skipped]
            raise StoreError(f"{out}: every sequence was skipped, none written ({len(skipped)} skipped "
                             f"{skipped_text(listed)}); no store was written")
        store = writer.close(skipped=skipped, repairs=repairs)
        if writer.rounded:   # this run's and an interrupted one's before it
            import warnings

            warnings.warn(_coarse_note(writer.rounded), stacklevel=3)
        return store
