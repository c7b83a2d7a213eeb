"""Reader for Florence 3D Actions skeletons (``skeletal_data.mat``).

The MATLAB file holds one cell per video with the raw joint coordinates in
``original_skeletal_data`` (3 x 15 x T, metres; rows x, depth, vertical). The
rows are reordered to x, y (vertical), z (depth) so that ``y`` is up as in the
other Kinect datasets.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

from ...errors import MissingInputError
from .base import (FormatError, SkeletonSequence, SkeletonReader, SkeletonInfo,
                   SkippedSequence, too_few_frames)

MAT_NAME = "skeletal_data.mat"
VARIABLE = "skeletal_data"
FIELD = "original_skeletal_data"
N_JOINTS = 15

JOINT_NAMES = [
    "head", "neck", "spine", "left_shoulder", "left_elbow", "left_wrist", "right_shoulder",
    "right_elbow", "right_wrist", "left_hip", "left_knee", "left_ankle", "right_hip",
    "right_knee", "right_ankle",
]

#: body-frame roles (:class:`~.base.SkeletonInfo`); no hip-centre joint: both hips
ROLES = {"hip_center": [9, 12], "left_hip": [9], "right_hip": [12], "spine": [2], "neck": [1],
         "left_shoulder": [3], "right_shoulder": [6], "head": [0]}

# used when extras/action_names.mat is not next to the data
ACTION_NAMES = ["wave", "drink from a bottle", "answer phone", "clap", "tight lace", "sit down",
                "stand up", "read watch", "bow"]

LABEL_NAMES = [f"c{i}" for i in range(1, len(ACTION_NAMES) + 1)]

# rows of original_skeletal_data are (x, depth, vertical): reorder to (x, y up, z depth)
_ROW_ORDER = [0, 2, 1]


class Florence3DReader(SkeletonReader):
    """Florence 3D Actions skeleton sequences.

    Parameters
    ----------
    path : str or Path
        ``skeletal_data.mat`` itself, the folder holding it, or a dataset
        folder whose ``raw/`` subfolder holds it.

    Notes
    -----
    Sequence id ``"vNNN"`` (video id = 1-based cell index), label ``"c1"`` ..
    ``"c9"`` (action names in ``info.extra["action_names"]``, taken from
    ``extras/action_names.mat`` when present), subject from the cell's
    ``subject`` field. Frames are ``(T, 45)`` float32, joint-major ``x, y, z``
    in metres with ``y`` up and ``z`` the distance to the sensor. There is no
    hip-centre joint: ``info.center`` is the pair (left hip, right hip).

    The processed ``joint_locations`` field (normalised, with failed frames
    removed) is ignored. Frames with every joint at zero are dropped and
    counted in ``repairs["all_zero_frames_dropped"]``; a sequence left with
    fewer than two frames is recorded in ``skipped`` (neither occurs in the
    published file). The .mat file is small and is loaded once per
    :meth:`sequences` pass; cells are converted one at a time.
    """

    def __init__(self, path):
        super().__init__()
        self.path = _resolve_file(path)
        names_file = self.path.parent / "extras" / "action_names.mat"
        names = _read_action_names(names_file) if names_file.is_file() else None
        self.info = SkeletonInfo(
            n_joints=N_JOINTS, joint_names=list(JOINT_NAMES), units="m", source="florence3d",
            center=(JOINT_NAMES.index("left_hip"), JOINT_NAMES.index("right_hip")),
            label_names=list(LABEL_NAMES), roles=dict(ROLES),
            extra={"action_names": dict(zip(LABEL_NAMES, names or ACTION_NAMES)),
                   "axes": "x horizontal, y up, z distance to the sensor"})

    def sequences(self) -> Iterator[SkeletonSequence]:
        """Yield the sequences sorted by id (= video id order)."""
        self.skipped = []
        self.repairs = {}
        cells = _load_cells(self.path)
        for i in range(cells.size):
            seq_id = f"v{i + 1:03d}"
            # a cell that is not a video of the format is skipped with on_error = "skip"; the file as a whole
            # (_load_cells) is the archive, and stops
            cell = self._read([seq_id], self._cell, cells.flat[i],
                              f"cell {i + 1} of {VARIABLE!r} (video {seq_id})")
            if cell is None:
                continue
            xyz, subject, action = cell
            zero = ~xyz.any(axis=1)
            n_zero = int(zero.sum())
            if len(xyz) - n_zero < 2:
                self.skipped.append(_skip(seq_id, len(xyz), n_zero))
                continue
            if n_zero:
                xyz = xyz[~zero]
                self._repair("all_zero_frames_dropped", n_zero)
            yield SkeletonSequence(id=seq_id, frames=xyz, label=LABEL_NAMES[action - 1],
                                   subject=subject)

    def _cell(self, cell, where: str):
        """(frames (T, 3J) float32, subject, action) of one cell of the file; FormatError naming the cell."""
        raw = _field(self.path, cell, FIELD, where)
        raw = np.asarray(raw)
        if raw.ndim == 2 and raw.shape == (3, N_JOINTS):
            raw = raw[:, :, None]          # MATLAB drops a trailing singleton frame axis
        if raw.ndim != 3 or raw.shape[:2] != (3, N_JOINTS) or raw.dtype.kind not in "fiu":
            raise FormatError(self.path, f"{where}: {FIELD!r} must be a numeric "
                                      f"3 x {N_JOINTS} x T array, got shape {raw.shape} "
                                      f"dtype {raw.dtype}")
        subject = _scalar_int(self.path, cell, "subject", where)
        action = _scalar_int(self.path, cell, "action", where)
        if not 1 <= action <= len(LABEL_NAMES):
            raise FormatError(self.path, f"{where}: action {action} is outside "
                                      f"1..{len(LABEL_NAMES)}")
        # (3, J, T) -> (T, J, 3) with rows reordered to x, y (up), z (depth)
        xyz = np.ascontiguousarray(raw[_ROW_ORDER].transpose(2, 1, 0), dtype=np.float32)
        xyz = xyz.reshape(len(xyz), 3 * N_JOINTS)
        bad = ~np.isfinite(xyz)
        if bad.any():
            t, c = np.argwhere(bad)[0]
            raise FormatError(self.path, f"{where}: non-finite value in frame "
                                      f"{t + 1}, joint {c // 3 + 1}; all coordinates must be "
                                      "finite numbers")
        return xyz, subject, action


def _skip(seq_id, n, n_zero):
    return SkippedSequence(seq_id, too_few_frames(n, n_zero, "the video"))


def _resolve_file(path) -> Path:
    path = Path(path)
    if path.is_dir():
        for cand in (path / MAT_NAME, path / "raw" / MAT_NAME):
            if cand.is_file():
                return cand
        raise MissingInputError(path, f"no {MAT_NAME} here or in {path / 'raw'}; pass the "
                                      f"Florence 3D {MAT_NAME} or its folder")
    if not path.is_file():
        raise MissingInputError(path, f"no such file; pass the Florence 3D {MAT_NAME} or its folder")
    return path


def _loadmat(path: Path) -> dict:
    from scipy.io import loadmat
    try:
        return loadmat(path, squeeze_me=False, struct_as_record=True)
    except Exception as exc:  # scipy raises several types for corrupt or non-MAT input
        raise FormatError(path, f"cannot read as a MATLAB v5 file: {exc}") from None


def _load_cells(path: Path) -> np.ndarray:
    mat = _loadmat(path)
    if VARIABLE not in mat:
        found = sorted(k for k in mat if not k.startswith("__"))
        raise FormatError(path, f"variable {VARIABLE!r} not found (variables: {found})")
    cells = mat[VARIABLE]
    if not isinstance(cells, np.ndarray) or cells.dtype != object:
        raise FormatError(path, f"{VARIABLE!r} must be a cell array of structs, got "
                                  f"{type(cells).__name__} dtype {getattr(cells, 'dtype', None)}")
    return cells


def _field(path, cell, name, where):
    if not isinstance(cell, np.ndarray) or cell.dtype.names is None or cell.size != 1:
        raise FormatError(path, f"{where}: expected a 1x1 struct, got "
                                  f"{type(cell).__name__} of shape {getattr(cell, 'shape', None)}")
    if name not in cell.dtype.names:
        raise FormatError(path, f"{where}: missing field {name!r} (fields: "
                                  f"{list(cell.dtype.names)})")
    return cell[name].flat[0]


def _scalar_int(path, cell, name, where) -> int:
    val = np.asarray(_field(path, cell, name, where))
    if (val.size != 1 or val.dtype.kind not in "fiu" or not np.isfinite(val.flat[0])
            or val.flat[0] != np.round(val.flat[0]) or abs(val.flat[0]) >= 2 ** 31):
        raise FormatError(path, f"{where}: field {name!r} must be one integer below 2**31, got "
                                  f"{val!r}")
    return int(val.flat[0])


def _read_action_names(path: Path) -> list[str] | None:
    """Names from ``action_names.mat`` (a 1 x 9 cell of strings), or None if unusable."""
    mat = _loadmat(path)
    cells = mat.get("action_names")
    if not isinstance(cells, np.ndarray) or cells.size != len(LABEL_NAMES):
        return None
    names = []
    for c in cells.flat:
        c = np.asarray(c)
        if c.dtype.kind != "U" or c.size != 1:
            return None
        names.append(str(c.flat[0]))
    return names
