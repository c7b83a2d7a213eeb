"""Reader for skeleton sequences stored as plain CSV files.

A folder holds ``index.csv`` (one row per sequence: ``file,label,subject`` and
optionally ``split`` and ``id``) and one CSV per sequence with one frame per
row, ``x1,y1,z1,...,xJ,yJ,zJ``. The full specification, with an example, is in
``data/generic_format.md``.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from ...errors import not_the_file
from ._layout import (INDEX_NAME, INDEX_REQUIRED, Entry, check_center, check_roles, find_index, find_roles,
                      read_index)
from .base import (FormatError, SkeletonSequence, SkeletonReader, SkeletonInfo,
                   _is_plain_number, _nonblank, _parse_numeric_rows, _read_lines)


#: joint names that give a role (first matching group wins; names compared by ``_layout.name_key``):
#: Kinect v1 (MSR-Action3D, UTKinect), Kinect v2 (NTU RGB+D), OpenPose BODY_25 / COCO, and the
#: motion-capture names of the BVH reader
ROLE_NAMES = {
    "hip_center": [["hip_center"], ["HipCenter"], ["SpineBase"], ["MidHip"], ["pelvis"], ["Hips"], ["root"],
                   ["left_hip", "right_hip"], ["LHip", "RHip"]],
    "left_hip": [["left_hip"], ["HipLeft"], ["LHip"], ["LeftUpLeg"], ["LeftThigh"], ["lfemur"]],
    "right_hip": [["right_hip"], ["HipRight"], ["RHip"], ["RightUpLeg"], ["RightThigh"], ["rfemur"]],
    "spine": [["spine"], ["SpineMid"], ["Spine1"], ["Chest"], ["torso"]],
    "neck": [["neck"], ["ShoulderCenter"], ["SpineShoulder"], ["shoulder_center"], ["LowerNeck"],
             ["left_shoulder", "right_shoulder"], ["LShoulder", "RShoulder"]],
    "left_shoulder": [["left_shoulder"], ["ShoulderLeft"], ["LShoulder"], ["LeftArm"], ["lhumerus"]],
    "right_shoulder": [["right_shoulder"], ["ShoulderRight"], ["RShoulder"], ["RightArm"], ["rhumerus"]],
    "head": [["head"], ["Nose"]],
}


class GenericCSVReader(SkeletonReader):
    """Skeleton sequences from an ``index.csv`` and one CSV file per sequence.

    Parameters
    ----------
    path : str or Path
        The folder holding ``index.csv`` (or ``index.csv`` itself). Sequence
        files are found relative to it.
    center : sequence of int, optional
        0-based joints whose mean is the body centre (e.g. the hip centre, or
        both hips). Default: the ``hip_center`` role when the joint names
        give one (see ``roles``), else joint 0.
    units : str, default "unknown"
        Unit of the coordinates, recorded in ``info.units`` (e.g. ``"m"``).
    joint_names : sequence of str, optional
        One name per joint; defaults to ``joint0``, ``joint1``, ...
    roles : dict, optional
        Body parts by 0-based joints (``left_hip``, ``right_hip``, ``neck``, ... as in
        :class:`~.base.SkeletonInfo`), recorded in the store for descriptors that need a
        body frame (``[descriptor] body_frame``, ``scale``). Default: found from
        ``joint_names`` when they use a common naming (Kinect v1/v2, OpenPose/COCO,
        motion-capture skeletons: :data:`ROLE_NAMES`, compared ignoring case and
        separators), else none. Roles given here replace those found, role by
        role; the other found roles are kept.

    Notes
    -----
    The index is read and checked when the source is opened (every listed
    file must exist); the number of joints ``J`` is taken from the first
    sequence file in id order that holds a data row. Sequence files are read
    one at a time by :meth:`sequences`, in id order. ``info.label_names`` are
    the distinct labels of the index, sorted. No frame is dropped or altered
    here (``skipped`` and ``repairs`` stay empty); the ingestion skips and
    records files with fewer than 2 distinct frames.
    """

    def __init__(self, path, *, center: Sequence[int] | None = None, units: str = "unknown",
                 joint_names: Sequence[str] | None = None, roles: dict | None = None):
        super().__init__()
        self.index_path = find_index(path, f"a generic skeleton folder needs an {INDEX_NAME} "
                                     f"with columns {','.join(INDEX_REQUIRED)} (see "
                                     "data/generic_format.md)")
        self.root = self.index_path.parent
        self._entries = read_index(self.index_path, optional=("split", "id"),
                                   integer_subjects=True)
        has_split = self._entries[0].split is not None
        # the width (columns per row) is voted by the first data rows of the first PEEK_FILES files that hold
        # one; an empty file is skipped and recorded by the ingestion, as a one-frame file is (docs/bad_input.md,
        # degenerate data). A width most of them share is the archive's: a file of another width is then that
        # file's damage, which on_error = "skip" may skip; without a majority the first file sets it and a
        # file of another width stops the reader (the odd one may be the first file).
        peeks, errors = [], []
        for e in self._entries:
            try:
                peek = _peek_ncols(e.path)
            except FormatError as exc:   # read again (and refused, or skipped) with the other files
                errors.append(exc)
                continue
            if peek is not None:
                peeks.append((e, *peek))
                if len(peeks) == PEEK_FILES:
                    break
        if not peeks:
            if errors:
                raise errors[0]
            raise _empty_error(self.index_path, self._entries[0])
        # only widths of whole joints vote: a majority of files 7 wide cannot outvote a first file 6 wide
        votes = Counter(p[1] for p in peeks if p[1] % 3 == 0)
        (top, n_top), *rest = votes.most_common() or [(None, 0)]
        self._agreed = n_top >= 2 and (not rest or rest[0][1] < n_top)
        first, ncols, line = next(p for p in peeks if p[1] == top) if self._agreed else peeks[0]
        if ncols % 3:
            sep = _separator_hint(_first_data_line(first.path, line))
            raise FormatError(first.path, f"{ncols} values per row is not a multiple of 3 "
                                      f"(x, y, z per joint){sep}", line=line)
        n_joints = ncols // 3
        self._ncols = ncols
        if self._agreed:
            self._expect = (f"{n_joints} joints x (x, y, z), comma separated, as in the first {n_top} files read"
                            if n_top == len(peeks) else
                            f"{n_joints} joints x (x, y, z), comma separated, as in {n_top} of the first "
                            f"{len(peeks)} files read (e.g. {first.path.name})")
        else:   # the first file read sets the width: when it is the odd one, the others are named; say so
            self._expect = (f"{n_joints} joints x (x, y, z), comma separated, as in {first.path.name}, the first "
                            f"file read; if that file is the odd one, fix it instead")
        if joint_names is None:
            joint_names = [f"joint{j}" for j in range(n_joints)]
        else:
            if not isinstance(joint_names, (list, tuple)) or not all(
                    isinstance(n, str) and n for n in joint_names):
                raise ValueError(f"joint_names must be a list of non-empty strings, one per joint "
                                 f"(e.g. [\"hip\", \"spine\", ...]), got {joint_names!r}")
            joint_names = [str(n) for n in joint_names]
            if len(joint_names) != n_joints:
                raise ValueError(f"joint_names has {len(joint_names)} names but the sequence files "
                                 f"hold {n_joints} joints ({ncols} values per row in "
                                 f"{first.path.name})")
            # a name given twice would make descriptor.pairs and the roles found by name ambiguous
            seen: dict[str, int] = {}
            for j, n in enumerate(joint_names):
                if n in seen:
                    raise ValueError(f"joint_names names {n!r} twice (joints {seen[n]} and {j}); give every "
                                     f"joint its own name")
                seen[n] = j
        found = find_roles(joint_names, ROLE_NAMES)
        # given roles win key by key; the others found from the names stay (the hip centre of OpenPose names
        # when only the hips and neck are given: dropping it would move the centre to joint 0)
        roles = found if roles is None else check_roles(roles, n_joints, found)
        center = check_center(roles.get("hip_center", [0]) if center is None else center, n_joints)
        if not isinstance(units, str) or not units:
            raise ValueError(f"units must be a non-empty string such as 'm', got {units!r}")
        self.info = SkeletonInfo(
            n_joints=n_joints, joint_names=joint_names, units=units, source="generic",
            center=center, label_names=sorted({e.label for e in self._entries}), roles=roles,
            extra={"index": INDEX_NAME,
                   "splits": sorted({e.split for e in self._entries}) if has_split else None})

    def __len__(self) -> int:
        """Number of sequences listed in the index."""
        return len(self._entries)

    def sequences(self) -> Iterator[SkeletonSequence]:
        """Yield the sequences sorted by id, reading one file at a time."""
        self.skipped = []
        self.repairs = {}
        for e in self._entries:
            frames = self._read([e.id], read_sequence_csv, e.path, self._ncols, self._expect, self._agreed)
            if frames is None:
                continue
            # a file with fewer than 2 distinct frames is skipped and recorded by the ingestion
            yield SkeletonSequence(id=e.id, frames=frames, label=e.label,
                                   subject=int(e.subject_name), split=e.split)


#: files whose first data rows vote for the archive's width (columns per row)
PEEK_FILES = 5


def _empty_error(index: Path, e: Entry) -> FormatError:
    return FormatError(index, f"sequence file {e.path.name} (id {e.id!r}) holds no "
                               "frames, nor does any other listed file: there is nothing to ingest",
                               line=e.index_line)


def read_sequence_csv(path, ncols: int | None = None,
                      expect: str = "x, y, z per joint, comma separated", agreed: bool = False) -> np.ndarray:
    """Read one sequence CSV into a (T, ncols) float32 array.

    Blank lines are ignored; a first row made only of non-numbers is a header
    and is skipped. Raises :class:`FormatError` (file and 1-based line)
    for a row whose column count differs from ``ncols`` (or from the first row),
    a row ending with a comma, a non-numeric or non-finite value, or a first row
    mixing numbers and text. ``agreed``: ``ncols`` is the width most of the archive's files share, so
    that a file whose rows are all of another width is this file's damage (else it differs only from the
    first file read, which may be the odd one: :func:`~streamcov.errors.not_the_file`).
    """
    rows, linenos = _nonblank(_read_lines(path))
    if rows and _is_header(path, rows[0], linenos[0], ncols):
        if ncols is not None and len(rows[0].split(",")) != ncols:   # the archive's layout: see below
            exc = FormatError(path, f"header has {len(rows[0].split(','))} columns, expected {ncols} (x, y, z "
                                    f"per joint){_separator_hint(rows[0])}", line=linenos[0])
            raise exc if agreed else not_the_file(exc)
        rows, linenos = rows[1:], linenos[1:]
    if rows:
        _no_trailing_comma(path, rows[0], linenos[0], ncols)
    try:
        arr = _parse_numeric_rows(path, rows, linenos, delimiter=",", ncols=ncols, expect=expect)
    except FormatError as exc:
        # a later row with a trailing comma reads as one value too many, or an empty one: say what it is
        if exc.line in linenos:
            _no_trailing_comma(path, rows[linenos.index(exc.line)], exc.line, ncols)
        if ncols is not None and not agreed and exc.line == linenos[0] and len(rows[0].split(",")) != ncols:
            # a first row of another width than the archive's first file: which of the two is odd,
            # on_error="skip" cannot tell (a later row of another width is this file's damage)
            not_the_file(exc)
        raise
    return arr.astype(np.float32)


def _no_trailing_comma(path, row: str, lineno: int, ncols: int | None = None):
    """Refuse a row that ends with a comma (as some exporters write every row) when the values before it are a
    whole row (``ncols``; unknown: a multiple of 3): its empty last field is not a value, and dropping it would be
    a silent repair. A row one value short that ends with a comma is a missing value, left to the other checks."""
    n = len(row.split(","))
    if row.rstrip().endswith(",") and (n - 1 == ncols if ncols is not None else (n - 1) % 3 == 0):
        raise FormatError(path, "row ends with a comma, which leaves an empty last field; remove the trailing "
                                "comma from every row that has one (a row is x1,y1,z1,...,xJ,yJ,zJ with nothing "
                                "after zJ)", line=lineno)


# what spreadsheets and R write for a missing value: a row of them is a frame with no data, not a header
_MISSING = frozenset({"", "na", "n/a", "nan", "null", "none", "-", "?"})


def _is_header(path, row: str, lineno: int, ncols: int | None = None) -> bool:
    numeric = [_is_plain_number(f) for f in row.split(",")]
    if all(numeric):
        return False
    if all(f.strip().lower() in _MISSING for f in row.split(",")):   # it was skipped as a header, silently
        raise FormatError(path, f"first row holds only empty or missing values ({row.strip()[:40]!r}): neither a "
                                f"header (column names) nor a frame (numbers); remove the row or give the "
                                f"frame's coordinates", line=lineno)
    _no_trailing_comma(path, row, lineno, ncols)   # numbers then an empty field: not "mixes numbers and text"
    if not any(numeric):
        return True
    j = numeric.index(False)
    raise FormatError(path, f"first row mixes numbers and text (column {j + 1}: "
                              f"{row.split(',')[j].strip()!r}): it is neither a header (names "
                              "only) nor a data row (numbers only)", line=lineno)


def _peek_ncols(path: Path) -> tuple[int, int] | None:
    """Column count of the first data row of ``path`` and its line, or None if it has none."""
    rows, linenos = _nonblank(_read_lines(path))
    if rows and _is_header(path, rows[0], linenos[0]):
        rows, linenos = rows[1:], linenos[1:]
    if not rows:
        return None
    _no_trailing_comma(path, rows[0], linenos[0])   # else counted as one more column
    return len(rows[0].split(",")), linenos[0]


def _separator_hint(row: str) -> str:
    """`` (the rows look tab-separated: use commas)`` for a row without commas written with another
    separator, else ''."""
    return "" if "," in row else next((f" (the rows look {n}-separated: use commas)" for c, n in
                                       (("\t", "tab"), (";", "semicolon"), (" ", "space")) if c in row.strip()), "")


def _first_data_line(path, line: int) -> str:
    """The text of 1-based ``line`` of ``path`` (for a separator hint), or ''."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as fh:
            for i, text in enumerate(fh, 1):
                if i == line:
                    return text.strip()
    except OSError:
        pass
    return ""
