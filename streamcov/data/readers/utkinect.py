"""Reader for UTKinect-Action3D skeletons.

Each ``joints_sSS_eEE.txt`` is one continuous recording: per line a frame id
followed by 20 joints x (x, y, z) in metres (Kinect SDK v1 joint order). The
label file ``actionLabel.txt`` cuts every recording into labelled intervals::

    s01_e01
    walk: 252 390
    sitDown: 572 686
    ...

whose bounds are inclusive frame ids (column 1 of the joints file). Every
interval becomes one sequence.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from ...errors import MissingInputError, did_you_mean
from .base import (FormatError, SkeletonSequence, SkeletonReader, SkeletonInfo,
                   SkippedSequence, digits_hint, _nonblank, _parse_numeric_rows, _read_lines)

N_JOINTS = 20

JOINT_NAMES = [
    "hip_center", "spine", "shoulder_center", "head", "left_shoulder", "left_elbow",
    "left_wrist", "left_hand", "right_shoulder", "right_elbow", "right_wrist", "right_hand",
    "left_hip", "left_knee", "left_ankle", "left_foot", "right_hip", "right_knee",
    "right_ankle", "right_foot",
]

#: body-frame roles (:class:`~.base.SkeletonInfo`); the neck is the shoulder centre
ROLES = {"hip_center": [0], "left_hip": [12], "right_hip": [16], "spine": [1], "neck": [2],
         "left_shoulder": [4], "right_shoulder": [8], "head": [3]}

LABEL_FILES = {"original": Path("actionLabel.txt"),
               "modified": Path("extras") / "actionLabel_modified.txt"}

#: the dataset's ten actions, as its label files spell them
ACTIONS = ("walk", "sitDown", "standUp", "pickUp", "carry", "throw", "push", "pull", "waveHands", "clapHands")

# ASCII digits only: \d and int() also read full-width and other scripts' digits ('１２' as 12)
_HEADER_RE = re.compile(r"^s([0-9]+)_e([0-9]+)$")
_ACTION_RE = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)\s*:\s*(\S+)\s+(\S+)$")
_INT_RE = re.compile(r"^[0-9]+$")


@dataclass
class _Interval:
    action: str
    first: int | None      # None: bounds missing (NaN) in the label file
    last: int | None
    line: int


@dataclass
class _Recording:
    subject: int
    line: int
    intervals: list[_Interval]


class UTKinectReader(SkeletonReader):
    """UTKinect-Action3D labelled action intervals.

    Parameters
    ----------
    path : str or Path
        Folder holding ``joints_sSS_eEE.txt`` and ``actionLabel.txt``, or a
        dataset folder whose ``raw/`` subfolder holds them.
    labels : {"original", "modified"}, default "original"
        Which interval bounds to use: ``actionLabel.txt`` of the release, or
        ``extras/actionLabel_modified.txt`` (corrected bounds of Vemulapalli
        et al., 2014).

    Notes
    -----
    Sequence id ``"sSS_eEE_<action>"``, label ``<action>`` (``info.label_names``
    in label-file order), subject ``SS``. Frames are ``(T, 60)`` float32,
    joint-major ``x, y, z`` in metres (Kinect camera space, ``y`` up); the
    hip centre is joint 0.

    Repeated frame ids in a joints file keep their first row; the others are
    counted in ``repairs["duplicate_frame_rows_dropped"]`` (over every joints
    file read). Frames with every joint at zero are dropped and counted in
    ``repairs["all_zero_frames_dropped"]``; intervals whose bounds reach past
    the recording's frame ids, cut to it, in
    ``repairs["intervals_cut_to_the_recording"]``. Intervals with missing
    (``NaN``) bounds or fewer than two frames are recorded in ``skipped``.
    Both are reset at the start of every :meth:`sequences` pass. An action
    other than the dataset's ten (:data:`ACTIONS`) is refused.
    """

    def __init__(self, path, *, labels: str = "original"):
        super().__init__()
        if labels not in LABEL_FILES:
            raise ValueError(f"labels must be one of {tuple(LABEL_FILES)}, got {labels!r}")
        self.path = _resolve_dir(Path(path))
        self.labels = labels
        self.label_file = self.path / LABEL_FILES[labels]
        if not self.label_file.is_file():
            raise MissingInputError(self.label_file, f"label file not found (labels={labels!r}); pass the "
                                    f"folder that holds actionLabel.txt and the joints_sSS_eEE.txt files")
        self._recordings, label_names = parse_label_file(self.label_file)
        for rec_id, rec in self._recordings.items():
            if not self._joints_file(rec_id).is_file():
                raise FormatError(self.label_file, f"recording {rec_id} is labelled but "
                                          f"{self._joints_file(rec_id).name} is missing in "
                                          f"{self.path}", line=rec.line)
        unlabelled = sorted(p.name for p in self.path.glob("joints_s*_e*.txt")
                            if p.name[7:-4] not in self._recordings)
        self.info = SkeletonInfo(
            n_joints=N_JOINTS, joint_names=list(JOINT_NAMES), units="m", source="utkinect",
            center=(JOINT_NAMES.index("hip_center"),), label_names=label_names, roles=dict(ROLES),
            extra={"labels": labels, "label_file": str(LABEL_FILES[labels]),
                   "unlabelled_recordings": unlabelled,
                   "axes": "x horizontal, y up, z distance to the sensor"})

    def _joints_file(self, rec_id: str) -> Path:
        return self.path / f"joints_{rec_id}.txt"

    def sequences(self) -> Iterator[SkeletonSequence]:
        """Yield the labelled intervals sorted by id, reading one joints file at a time."""
        self.skipped = []
        self.repairs = {}
        for rec_id, rec in sorted(self._recordings.items()):
            intervals = sorted(rec.intervals, key=lambda iv: iv.action)
            read = None
            if any(iv.first is not None for iv in intervals):
                # a joints file that cannot be read skips the intervals it holds (those with bounds; on_error)
                read = self._read([f"{rec_id}_{iv.action}" for iv in intervals if iv.first is not None],
                                  self._read_joints, self._joints_file(rec_id))
            for iv in intervals:
                seq_id = f"{rec_id}_{iv.action}"
                if iv.first is None:
                    self.skipped.append(SkippedSequence(
                        seq_id, f"no interval bounds in {self.label_file.name} line {iv.line} "
                        "(NaN)"))
                    continue
                if read is None:   # recorded by _read
                    continue
                ids, xyz = read
                sel = (ids >= iv.first) & (ids <= iv.last)
                if sel.any() and (iv.first < ids.min() or iv.last > ids.max()):
                    # bounds past the recording's frames: the frames there are taken, and it is recorded
                    self._repair("intervals_cut_to_the_recording", 1)
                frames = xyz[sel]
                zero = ~frames.any(axis=1)
                n_zero = int(zero.sum())
                if len(frames) - n_zero < 2:
                    self.skipped.append(SkippedSequence(
                        seq_id, f"interval [{iv.first}, {iv.last}] ({self.label_file.name} line "
                        f"{iv.line}) holds {len(frames) - n_zero} valid frame(s) of "
                        f"joints_{rec_id}.txt; at least 2 are needed"))
                    continue
                if n_zero:
                    frames = frames[~zero]
                    self._repair("all_zero_frames_dropped", n_zero)
                yield SkeletonSequence(id=seq_id, frames=np.ascontiguousarray(frames),
                                       label=iv.action, subject=rec.subject)

    def _read_joints(self, path: Path) -> tuple[np.ndarray, np.ndarray]:
        ids, xyz = read_joints_file(path)
        _, first = np.unique(ids, return_index=True)
        n_dup = len(ids) - len(first)
        if n_dup:
            keep = np.zeros(len(ids), dtype=bool)
            keep[first] = True
            ids, xyz = ids[keep], xyz[keep]
            self._repair("duplicate_frame_rows_dropped", n_dup)
        return ids, xyz


def read_joints_file(path) -> tuple[np.ndarray, np.ndarray]:
    """Read a ``joints_sSS_eEE.txt`` file.

    Returns
    -------
    frame_ids : (N,) int64
        Column 1, as in the file (may repeat).
    xyz : (N, 60) float32
        The joints, joint-major x, y, z.

    Raises :class:`FormatError` (file and 1-based line) when a line
    does not hold 61 numbers, a value is not finite, a frame id is not a
    non-negative integer, or one is smaller than the frame id before it.
    """
    rows, linenos = _nonblank(_read_lines(path))
    # the frame id column is checked here, as a frame number, not as a coordinate that must fit in float32
    arr = _parse_numeric_rows(path, rows, linenos, ncols=1 + 3 * N_JOINTS,
                              expect="frame id, then x y z of 20 joints", id_cols=1)
    ids = arr[:, 0]
    bad = ~((ids == np.round(ids)) & (ids >= 0) & (ids <= 2.0 ** 53))   # exactly representable ids; NaN too
    if bad.any():
        r = int(np.argmax(bad))
        raise FormatError(path, f"column 1 (the frame id) holds {rows[r].split()[0]!r}, which is not a frame "
                                f"number: a frame id is a non-negative integer such as 252; correct the row",
                          line=linenos[r])
    back = np.flatnonzero(np.diff(ids) < 0)
    if len(back):   # a reversed or shuffled file would be stored as another motion, time running backwards
        r = int(back[0]) + 1
        raise FormatError(path, f"frame id {int(ids[r])} comes after frame id {int(ids[r - 1])} (line "
                                f"{linenos[r - 1]}): the rows are not in frame order (the recording's rows were "
                                f"sorted or moved?); restore the file's order", line=linenos[r])
    return ids.astype(np.int64), np.ascontiguousarray(arr[:, 1:], dtype=np.float32)


def parse_label_file(path) -> tuple[dict[str, _Recording], list[str]]:
    """Parse an ``actionLabel.txt``-style file.

    Returns the recordings by id (``"sSS_eEE"``) and the action names in order
    of first appearance. Bounds written ``NaN`` mean the interval is missing.
    Raises :class:`FormatError` with file and line on bad syntax,
    ``first > last``, an action line before any recording line, or a
    recording or action given twice.
    """
    recordings: dict[str, _Recording] = {}
    names: list[str] = []
    current = None
    for lineno, line in enumerate(_read_lines(path), 1):
        s = line.strip()
        if not s:
            continue
        m = _HEADER_RE.match(s)
        if m:
            if s in recordings:
                raise FormatError(path, f"recording {s} appears twice (first on line "
                                          f"{recordings[s].line})", line=lineno)
            current = recordings[s] = _Recording(int(m.group(1)), lineno, [])
            continue
        m = _ACTION_RE.match(s)
        if m is None:
            raise FormatError(path, f"expected a recording line 'sSS_eEE' or an interval "
                                      f"line '<action>: <first frame id> <last frame id>', found "
                                      f"{s!r}{digits_hint(s)}", line=lineno)
        if current is None:
            raise FormatError(path, "interval line before any recording line 'sSS_eEE'",
                                      line=lineno)
        action, a, b = m.groups()
        if action not in ACTIONS:   # a typo would be an eleventh class
            raise FormatError(path, f"unknown action {action!r}{did_you_mean(action, ACTIONS)}; UTKinect-Action3D's "
                                    f"actions are {', '.join(ACTIONS)}", line=lineno)
        if any(iv.action == action for iv in current.intervals):
            raise FormatError(path, f"action {action!r} appears twice for the same "
                                      "recording", line=lineno)
        if not all(_INT_RE.match(t) or t.lower() == "nan" for t in (a, b)):
            raise FormatError(path, f"interval bounds must be two non-negative integer "
                                      f"frame ids (or NaN), found {a!r} {b!r}{digits_hint(a + b)}", line=lineno)
        if a.lower() == "nan" or b.lower() == "nan":
            first = last = None
        else:
            first, last = int(a), int(b)
            if first > last:
                raise FormatError(path, f"interval {first} {last}: the first frame id is "
                                          "after the last", line=lineno)
        current.intervals.append(_Interval(action, first, last, lineno))
        if action not in names:
            names.append(action)
    if not recordings:
        raise FormatError(path, "no recording line 'sSS_eEE' found")
    return recordings, names


def _resolve_dir(path: Path) -> Path:
    if not path.is_dir():
        raise MissingInputError(path, "not a directory; pass the folder that holds the "
                                      "UTKinect joints_sSS_eEE.txt files and actionLabel.txt")
    if not (path / "actionLabel.txt").is_file() and (path / "raw" / "actionLabel.txt").is_file():
        return path / "raw"
    return path
