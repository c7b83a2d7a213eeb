"""Reader for MSR-Action3D skeletons (``MSRAction3DSkeletonReal3D`` release).

One text file per sequence, ``aAA_sSS_eEE_skeleton3D.txt`` (action, subject,
repetition), four numbers per line ``x y z c`` in metres, 20 lines (joints)
per frame. The confidence column ``c`` is dropped.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

import numpy as np

from ...errors import MissingInputError
from .base import (FormatError, SkeletonSequence, SkeletonReader, SkeletonInfo,
                   SkippedSequence, digits_hint, too_few_frames, _nonblank, _parse_numeric_rows, _read_lines)

N_JOINTS = 20

JOINT_NAMES = [
    "left_shoulder", "right_shoulder", "shoulder_center", "spine", "left_hip", "right_hip",
    "hip_center", "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hand",
    "right_hand", "left_knee", "right_knee", "left_ankle", "right_ankle", "left_foot",
    "right_foot", "head",
]

#: body-frame roles (:class:`~.base.SkeletonInfo`); the neck is the shoulder centre
ROLES = {"hip_center": [6], "left_hip": [4], "right_hip": [5], "spine": [3], "neck": [2],
         "left_shoulder": [0], "right_shoulder": [1], "head": [19]}

ACTION_NAMES = [
    "high arm wave", "horizontal arm wave", "hammer", "hand catch", "forward punch", "high throw",
    "draw X", "draw tick", "draw circle", "hand clap", "two hand wave", "side boxing", "bend",
    "forward kick", "side kick", "jogging", "tennis swing", "tennis serve", "golf swing",
    "pickup and throw",
]

LABEL_NAMES = [f"a{i:02d}" for i in range(1, len(ACTION_NAMES) + 1)]

SUBSETS = ("all", "cvpr12")
CVPR12_LIST = Path("extras") / "files_used_in_cvpr12_paper.txt"

# Unicode \d and case folding on purpose: a name that only looks like a skeleton file's (full-width digits '０１',
# the long s 'ſ') is found, then refused, rather than read as its ASCII twin or left out without a word
_FILE_RE = re.compile(r"^a(\d{2})_s(\d{2})_e(\d{2})_skeleton3D\.txt$", re.IGNORECASE)
_ID_RE = re.compile(r"^a[0-9]{2}_s[0-9]{2}_e[0-9]{2}$")


class MSRAction3DReader(SkeletonReader):
    """MSR-Action3D skeleton sequences.

    Parameters
    ----------
    path : str or Path
        Directory holding the ``aAA_sSS_eEE_skeleton3D.txt`` files, or a
        dataset folder whose ``raw/`` subfolder holds them.
    subset : {"all", "cvpr12"}, default "all"
        ``"cvpr12"`` keeps only the sequence ids listed in
        ``extras/files_used_in_cvpr12_paper.txt`` next to the files (the
        557-sequence list of Wang et al., CVPR 2012).

    Notes
    -----
    Sequence id ``"aAA_sSS_eEE"``, label ``"aAA"`` (``info.label_names`` is
    ``a01``..``a20``; the action names are in ``info.extra["action_names"]``),
    subject ``SS``. Frames are ``(T, 60)`` float32, joint-major ``x, y, z`` in
    metres (``y`` up, ``z`` distance to the sensor); the hip centre is joint 7
    (0-based 6).

    Frames in which every joint is exactly zero carry no data (the tracker
    failed) and are dropped; ``repairs["all_zero_frames_dropped"]`` counts them
    over the sequences that are yielded. A sequence left with fewer than two
    frames (``a13_s09_e02`` is all zeros) is not yielded but recorded in
    ``skipped``. Both are reset at the start of every :meth:`sequences` pass.
    """

    def __init__(self, path, *, subset: str = "all"):
        super().__init__()
        if subset not in SUBSETS:
            raise ValueError(f"subset must be one of {SUBSETS}, got {subset!r}")
        self.path = _resolve_dir(path)
        self.subset = subset
        files = {}
        for p in sorted(self.path.iterdir()):
            m = _FILE_RE.match(p.name)
            if m is None:
                continue
            if not p.is_file():   # its sequence would be missing without a word
                raise FormatError(p, "named like a skeleton file but not a file (a folder?); rename or remove it")
            if not p.name.isascii():
                raise FormatError(p, "named like a skeleton file aAA_sSS_eEE_skeleton3D.txt, but with characters "
                                     "other than ASCII (full-width digits, another script's); rename it with ASCII "
                                     "letters and digits 0-9")
            action = int(m.group(1))
            if not 1 <= action <= len(ACTION_NAMES):
                raise FormatError(p, f"action id {action} in the file name is outside "
                                          f"1..{len(ACTION_NAMES)}")
            key = p.name[:11].lower()   # the pattern ignores case: A01_S01_E01 and a01_s01_e01 are one sequence
            if key in files:
                raise FormatError(p, f"the same sequence {key} as {files[key][0].name} (the names differ only in "
                                     f"case); one of them would replace the other: remove one")
            files[key] = (p, action, int(m.group(2)))
        if not files:
            raise FormatError(self.path, "no aAA_sSS_eEE_skeleton3D.txt files found; pass "
                                      "the folder that holds the MSR-Action3D skeleton files")
        self._missing: list[str] = []
        if subset == "cvpr12":
            wanted = _read_id_list(self.path / CVPR12_LIST)
            self._missing = sorted(wanted - files.keys())
            files = {k: v for k, v in files.items() if k in wanted}
        self._files = dict(sorted(files.items()))
        self.info = SkeletonInfo(
            n_joints=N_JOINTS, joint_names=list(JOINT_NAMES), units="m", source="msr-action3d",
            center=(JOINT_NAMES.index("hip_center"),), label_names=list(LABEL_NAMES), roles=dict(ROLES),
            extra={"action_names": dict(zip(LABEL_NAMES, ACTION_NAMES)), "subset": subset,
                   "axes": "x horizontal, y up, z distance to the sensor"})

    def __len__(self) -> int:
        """Number of files to read (an upper bound on the sequences yielded)."""
        return len(self._files)

    def sequences(self) -> Iterator[SkeletonSequence]:
        """Yield the sequences sorted by id, reading one file at a time."""
        self.skipped = [SkippedSequence(i, f"listed in {CVPR12_LIST} but no file "
                                        f"{i}_skeleton3D.txt exists") for i in self._missing]
        self.repairs = {}
        for seq_id, (path, action, subject) in self._files.items():
            xyz = self._read([seq_id], read_msr_file, path)
            if xyz is None:
                continue
            zero = ~xyz.any(axis=1)
            n_zero = int(zero.sum())
            if len(xyz) - n_zero < 2:
                self.skipped.append(SkippedSequence(seq_id, too_few_frames(len(xyz), n_zero)))
                continue
            if n_zero:
                xyz = xyz[~zero]
                self._repair("all_zero_frames_dropped", n_zero)
            yield SkeletonSequence(id=seq_id, frames=xyz, label=LABEL_NAMES[action - 1],
                                   subject=subject)


def read_msr_file(path) -> np.ndarray:
    """Read one ``*_skeleton3D.txt`` file into a (T, 60) float32 array (x, y, z per joint).

    Raises :class:`FormatError` (with file and 1-based line) when a
    line does not hold four numbers, a value is not finite, or the number of
    lines is not a multiple of 20.
    """
    rows, linenos = _nonblank(_read_lines(path))
    arr = _parse_numeric_rows(path, rows, linenos, ncols=4, expect="x y z confidence")
    extra = len(arr) % N_JOINTS
    if extra:
        start = len(arr) - extra
        raise FormatError(
            path, f"{len(arr)} joint lines is not a multiple of {N_JOINTS} (one line per joint, "
            f"{N_JOINTS} per frame): the last frame, starting here, has only {extra} lines",
            line=linenos[start])
    return np.ascontiguousarray(arr[:, :3], dtype=np.float32).reshape(-1, 3 * N_JOINTS)


def _resolve_dir(path) -> Path:
    path = Path(path)
    if not path.is_dir():
        raise MissingInputError(path, "not a directory; pass the folder that holds the "
                                      "MSR-Action3D *_skeleton3D.txt files")
    if not any(_FILE_RE.match(p.name) for p in path.iterdir()) and (path / "raw").is_dir():
        return path / "raw"
    return path


def _read_id_list(path: Path) -> set[str]:
    if not path.is_file():
        raise MissingInputError(path, f"subset list not found; subset='cvpr12' needs "
                                      f"{CVPR12_LIST} next to the skeleton files")
    ids = set()
    for lineno, line in enumerate(_read_lines(path), 1):
        s = line.strip()
        if not s:
            continue
        s = s.removesuffix("_skeleton3D.txt")
        if not _ID_RE.match(s):
            raise FormatError(path, f"expected a sequence id like 'a01_s01_e01', found "
                                      f"{line.strip()!r}{digits_hint(s)}", line=lineno)
        ids.add(s)
    return ids
