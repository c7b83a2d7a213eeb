"""What the archive readers share: their files, labels, subjects and splits, option checks.

:class:`ArchiveReader` is the base of the ASF/AMC, BVH and C3D readers; :func:`read_index` also
serves the generic CSV format, and :func:`check_center` every reader with a ``center`` option.
The full description, for users: ``data/mocap_formats.md``.

Two layouts, shared by the ASF/AMC, BVH and C3D readers:

``layout="folders"``
    ``<root>/[<split>/]<class>/<file>``: the class is the folder holding the file, the split
    the first folder level when there are two (``train/3/x.amc``), none when there is one
    (``3/x.amc``). The subject (and, for ``label="name"``, the label) comes from the file name
    through ``name_pattern``, a regular expression matched against the file name without its
    extension, with named groups ``subject`` (required) and ``motion`` (for ``label="name"``).
``layout="index"``
    ``<root>/index.csv`` with columns ``file,label,subject[,split][,id][,skeleton]`` (header
    required, names matched ignoring case and spaces, other columns ignored), like streamcov's
    generic CSV format: ``file`` and ``skeleton`` are relative to the folder of ``index.csv``.

Subjects: when every subject name is an integer in ASCII digits (``"3"``, ``"07"``) the subject is that
number; otherwise subjects are numbered by their position in the sorted list of names, which the
readers keep in ``info.extra["subject_names"]`` (HDM05: ``bd, bk, dg, mm, tr`` -> 0..4).
Ids: the file name without its extension (or the ``id`` column); they must be distinct and
sequences are yielded in sorted id order.
"""
from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from ...errors import MissingInputError, case_twins, did_you_mean, unlistable_folder
from .base import FormatError, SkeletonInfo, SkeletonReader, SkeletonSequence, SkippedSequence, digits_hint

INDEX_NAME = "index.csv"
INDEX_REQUIRED = ("file", "label", "subject")
INDEX_OPTIONAL = ("split", "id", "skeleton")

#: ``HDM_bd_depositFloorR_001_120``: prefix, subject, motion, take, optional frame rate.
HDM_PATTERN = (r"^(?P<prefix>[A-Za-z]+)_(?P<subject>[A-Za-z0-9]+)_(?P<motion>.+?)_(?P<take>\d+)"
               r"(?:_(?P<rate>\d+))?$")
#: ``<subject>_<motion>`` (e.g. CMU's ``01_01``): the subject before the first underscore
GENERIC_PATTERN = r"^(?P<subject>[A-Za-z0-9]+)_(?P<motion>.+)$"

# ASCII digits only: int() and \d also read full-width and other scripts' digits ('１２' as 12)
_INT_RE = re.compile(r"^[+-]?[0-9]+$")


@dataclass
class Entry:
    id: str
    path: Path
    label: str
    subject_name: str
    split: str | None
    folder: str | None = None           # class folder (folders layout)
    match: dict | None = None           # groups of name_pattern (folders layout)
    skeleton: Path | None = None        # index.csv "skeleton" column
    index_line: int | None = None       # row of index.csv


def find_entries(root, *, ext: str, layout: str = "folders", label: str = "folder",
                 label_map: dict | None = None,
                 name_pattern: str = HDM_PATTERN) -> tuple[Path, list[Entry]]:
    """Entries of an archive, sorted by id. ``ext`` like ``".amc"`` (case-insensitive)."""
    root = Path(root)
    one_of("layout", layout, ("folders", "index"))
    one_of("label", label, ("folder", "name"), "the class folder, or the 'motion' group of "
           "name_pattern")
    check_label_map(label_map)
    if layout == "index":
        index = find_index(root, f"layout='index' needs an {INDEX_NAME} with columns "
                           f"{','.join(INDEX_REQUIRED)} (optional: {','.join(INDEX_OPTIONAL)})")
        return index.parent, read_index(index, ext=ext, label_map=label_map)
    if not root.is_dir():
        raise MissingInputError(root, "not a directory; pass the folder that holds "
                                f"[<split>/]<class>/*{ext} (or an {INDEX_NAME} with "
                                "layout='index')")
    try:
        rx = re.compile(name_pattern)
    except (re.error, TypeError) as exc:
        raise ValueError(f"name_pattern is not a valid regular expression: {exc}") from None
    if "subject" not in rx.groupindex or (label == "name" and "motion" not in rx.groupindex):
        raise ValueError("name_pattern needs a named group 'subject' (and 'motion' for "
                         f"label='name'), got {name_pattern!r}")
    named = sorted(p for p in walk_paths(root) if p.suffix.lower() == ext)
    files = [p for p in named if p.is_file()]
    if len(files) < len(named):   # its sequence would be missing without a word
        odd = next(p for p in named if not p.is_file())
        what = "a link to nothing" if odd.is_symlink() and not odd.exists() else "not a file (a folder?)"
        raise FormatError(odd, f"named like a {ext} file but {what}; rename or remove it")
    if not files:
        raise FormatError(root, f"no *{ext} files found below this folder; expected "
                          f"[<split>/]<class>/<file>{ext}, or an {INDEX_NAME} with layout='index'")
    entries: dict[str, Entry] = {}
    seen: set[str] = set()
    depth = None                  # the first file's: <class>/<file> or <split>/<class>/<file>, for every file
    for p in files:
        parts = p.relative_to(root).parts
        if len(parts) not in (2, 3):
            raise FormatError(p, f"file is {len(parts) - 1} folder levels below {root}; the "
                              f"folders layout is [<split>/]<class>/<file>{ext} (use an "
                              f"{INDEX_NAME} and layout='index' for other trees)")
        if depth is None:
            depth = (p, len(parts))
        elif len(parts) != depth[1]:   # a file without a split would be in no fold's rows
            with_split, without = (p, depth[0]) if len(parts) == 3 else (depth[0], p)
            raise FormatError(without, f"file is in a class folder directly below {root}, but "
                              f"{with_split.relative_to(root)} is in a split folder; put every file in "
                              f"<split>/<class>/ or every file in <class>/")
        split = parts[0] if len(parts) == 3 else None
        folder = parts[-2]
        m = rx.match(p.stem)
        if m is None:
            raise FormatError(p, f"file name {p.stem!r} does not match name_pattern "
                              f"{name_pattern!r}, which must give the subject (for HDM05: "
                              "HDM_<subject>_<motion>_<take>_<rate>); pass another name_pattern "
                              f"or list the files in an {INDEX_NAME} (layout='index')")
        groups = m.groupdict()
        for g in ("subject", "motion") if label == "name" else ("subject",):
            if not groups[g]:
                raise FormatError(p, f"the {g!r} group of name_pattern {name_pattern!r} matches nothing in "
                                  f"the file name {p.stem!r}; a {'class' if g == 'motion' else g} name "
                                  "cannot be empty: rename the file or pass another name_pattern")
        if label == "name":
            lab = groups["motion"]
        else:
            lab = folder
        seen.add(lab)
        if label_map is not None:
            lab = str(label_map.get(lab, lab))
        if p.stem in entries:
            raise FormatError(p, f"sequence id {p.stem!r} (the file name) is also used by "
                              f"{entries[p.stem].path}; ids must be distinct: rename one file or "
                              f"use an {INDEX_NAME} with an 'id' column")
        entries[p.stem] = Entry(p.stem, p, lab, groups["subject"], split, folder, groups)
    unused_label_map_keys(label_map, seen)
    return root, [entries[k] for k in sorted(entries)]


def walk_paths(root: Path) -> list[Path]:
    """Every path below ``root`` (folders included), entering linked folders: an archive arranged
    with links (a class folder linked from elsewhere) is read whole, where ``Path.rglob`` leaves linked
    folders out without a word (Python 3.13's ``recurse_symlinks`` is off by default). A folder reached twice (a link loop, or
    two links to one folder) is refused: its files would be read twice."""
    out: list[Path] = []
    met: dict[str, Path] = {}

    for dirpath, dirnames, filenames in os.walk(root, followlinks=True, onerror=unlistable_folder(root)):
        real = os.path.realpath(dirpath)
        if real in met:
            raise FormatError(Path(dirpath), f"this folder is {met[real]} again, reached through a "
                              "linked folder (a link loop, or two links to one folder): its files would "
                              "be read twice; remove one link")
        met[real] = Path(dirpath)
        top = Path(dirpath)
        out += [top / n for n in dirnames + filenames]
    return out


def without_subject(names) -> list[str]:
    """Joint or marker names without the ``Subject:`` prefix that motion-capture software writes for
    each performer (Vicon ``Bob:LASI``, Mixamo ``mixamorig:Hips``): the part after the last colon, so
    that the files of several performers share one layout. Names that would then no longer be
    distinct (two performers in one file) or empty are kept as they are."""
    bare = [str(n).rsplit(":", 1)[-1] for n in names]
    return bare if all(bare) and len(set(bare)) == len(bare) else [str(n) for n in names]


def check_label_map(label_map) -> None:
    """A ``label_map`` option: a table of label -> new label, every new label a non-empty name (an empty one
    made a class named "" that the generic index refuses)."""
    if label_map is None:
        return
    if not isinstance(label_map, dict):
        raise ValueError(f"label_map must be a table of label -> new label, e.g. "
                         f'{{"1" = "walk"}}, got {label_map!r}')
    for k, v in label_map.items():
        if not isinstance(v, (str, int)) or isinstance(v, bool) or not str(v).strip():
            raise ValueError(f"label_map: {k!r} = {v!r}: expected a non-empty class name, e.g. "
                             f'{{"{k}" = "walk"}}')


def unused_label_map_keys(label_map, seen: set) -> None:
    """Refuse ``label_map`` keys that match no label of the archive (``seen``): a typo would leave its
    class unrenamed without a word."""
    unused = sorted(set(label_map or ()) - seen, key=str)   # (keys of a Python dict may mix int and str)
    if unused:
        shown = ", ".join(repr(x) for x in sorted(seen)[:12]) + (", ..." if len(seen) > 12 else "")
        raise ValueError(f"label_map: {', '.join(map(repr, unused))} "
                         f"{'matches' if len(unused) == 1 else 'match'} no label of the archive (its labels: "
                         f"{shown}); check the key{'s' if len(unused) > 1 else ''}")


def find_index(path, advice: str) -> Path:
    """``path`` itself if it is an ``index.csv``, else ``path/index.csv``; a FormatError saying
    ``advice`` when there is none."""
    path = Path(path)
    index = path if path.name == INDEX_NAME and path.is_file() else path / INDEX_NAME
    if path.is_file() and index != path:
        raise FormatError(path, f"a file, not the archive's folder; {advice}")
    if not index.is_file():
        what = "not a regular file (a folder, a device or a pipe)" if index.exists() else "index file not found"
        raise FormatError(index, f"{what}; {advice}")
    return index


def read_index(index: Path, *, ext: str | None = None, optional=INDEX_OPTIONAL,
               integer_subjects: bool = False, label_map: dict | None = None) -> list[Entry]:
    """Parse and check an ``index.csv``.

    Parameters
    ----------
    index : Path
        The file. Columns ``file,label,subject`` and those of ``optional``; a header row is
        required, names are matched ignoring case and spaces, other columns are ignored.
    ext : str, optional
        The extension every listed file must have (``".bvh"``, case-insensitive).
    optional : tuple of str
        The optional columns read, among ``split``, ``id``, ``skeleton``.
    integer_subjects : bool
        The subject must be an integer (the generic CSV format); else any non-empty text.
    label_map : dict, optional
        Old label -> new label.

    Returns
    -------
    list of Entry
        Sorted by id; paths are relative to the folder of ``index.csv`` and exist.

    Raises
    ------
    FormatError
        For the first problem, with the file and line.
    """
    rows = [(n, row) for n, row in _rows_with_lines(index) if any(f.strip() for f in row)]
    need = f"{','.join(INDEX_REQUIRED)} (optional: {','.join(optional)})"
    if not rows:
        raise FormatError(index, f"empty; expected a header row with columns {need}")
    header_line, header = rows[0]
    names = [h.strip().lower() for h in header]
    seen = set()
    for n in names:
        if n and n in seen:
            raise FormatError(index, f"column {n!r} appears twice in the header", line=header_line)
        seen.add(n)
    missing = [c for c in INDEX_REQUIRED if c not in names]
    if missing:
        raise FormatError(index, f"header lacks required column(s) {', '.join(missing)}; found "
                          f"{','.join(header)}, need {need}", line=header_line)
    col = {n: names.index(n) for n in INDEX_REQUIRED + tuple(optional) if n in names}
    root = index.parent
    entries: dict[str, Entry] = {}
    seen: set[str] = set()
    listed: dict[Path, int] = {}   # file -> first line: one recording under two ids would be two samples
    for lineno, row in rows[1:]:
        if len(row) != len(names):
            raise FormatError(index, f"row has {len(row)} fields but the header has {len(names)}",
                              line=lineno)
        val = {k: row[i].strip() for k, i in col.items()}
        for k in INDEX_REQUIRED + (("split",) if "split" in col else ()):
            if not val[k]:
                hint = " (leave the column out if there is no split)" if k == "split" else ""
                raise FormatError(index, f"column {k!r} is empty{hint}", line=lineno)
        ctrl = next((k for k, v in val.items() if any(ord(c) < 32 for c in v)), None)
        if ctrl is not None:
            raise FormatError(index, f"column {ctrl!r} holds a control character "
                              f"({val[ctrl]!r}); save the file as plain UTF-8 text", line=lineno)
        fpath = root / val["file"]
        if fpath.is_dir():
            raise FormatError(index, f"column 'file' names the folder {val['file']!r}; give the "
                              "path of one sequence file", line=lineno)
        if not fpath.is_file():
            # a device, a FIFO or a socket (a link to /dev/zero, /dev/stdin) exists: "not found" sent the user
            # looking for a missing file
            what = ("is not a regular file (a device, a pipe or a socket); give a file of the sequence's frames"
                    if fpath.exists() else f"not found in {root}")
            raise FormatError(index, f"sequence file {val['file']!r} {what}", line=lineno)
        if ext is not None and fpath.suffix.lower() != ext:
            raise FormatError(index, f"sequence file {val['file']!r} does not end in {ext}",
                              line=lineno)
        first = listed.setdefault(fpath.resolve(), lineno)
        if first != lineno:   # under another subject or split it would also put training rows among the test ones
            raise FormatError(index, f"sequence file {val['file']!r} is listed twice (first on line {first}); "
                              f"list each recording once", line=lineno)
        if integer_subjects and not (_INT_RE.match(val["subject"])
                                     and abs(int(val["subject"])) < 2 ** 31):
            raise FormatError(index, f"column 'subject' must be an integer below 2**31 (stored as "
                              f"int32), got {val['subject']!r}{digits_hint(val['subject'])}", line=lineno)
        skel = None
        if val.get("skeleton"):
            skel = root / val["skeleton"]
            if not skel.is_file():
                raise FormatError(index, f"skeleton file {val['skeleton']!r} not found in {root}",
                                  line=lineno)
        lab = val["label"]
        seen.add(lab)
        if label_map is not None:
            lab = str(label_map.get(lab, lab))
        seq_id = val.get("id") or fpath.stem
        if seq_id in entries:
            raise FormatError(index, f"sequence id {seq_id!r} is used twice (first on line "
                              f"{entries[seq_id].index_line}); give each row a distinct id or "
                              "file name", line=lineno)
        entries[seq_id] = Entry(seq_id, fpath, lab, val["subject"], val.get("split"),
                                skeleton=skel, index_line=lineno)
    if not entries:
        raise FormatError(index, "lists no sequences (only a header row)", line=header_line)
    unused_label_map_keys(label_map, seen)
    first_line = {}
    for e in entries.values():
        first_line.setdefault(e.label, e.index_line)
    shown = case_twins(first_line, {lab: f" (line {n})" for lab, n in first_line.items()})
    if shown:
        import warnings

        warnings.warn(f"{index}: labels that differ only in case are different classes here: {shown}; write them "
                      f"alike if they mean one class", stacklevel=2)
    return [entries[k] for k in sorted(entries)]


def _rows_with_lines(index: Path) -> list[tuple[int, list[str]]]:
    """CSV rows of ``index`` with the 1-based line on which each row starts."""
    out = []
    try:
        with open(index, encoding="utf-8-sig", newline="") as fh:
            reader = csv.reader(fh)
            start = 1
            for row in reader:
                out.append((start, row))
                start = reader.line_num + 1
    except UnicodeDecodeError as exc:
        data = index.read_bytes()
        bad = data.decode("utf-8", errors="replace").split("\n")
        line = next((i + 1 for i, t in enumerate(bad) if "\ufffd" in t), None)
        raise FormatError(index, f"not a UTF-8/ASCII text file ({exc.reason}); save it as UTF-8",
                          line=line) from None
    except csv.Error as exc:
        raise FormatError(index, f"not a valid CSV file: {exc}", line=reader.line_num) from None
    return out


def subject_numbers(entries: list[Entry]) -> tuple[dict[str, int], list[str] | None]:
    """Subject name -> int, and the sorted names when they are not all integers."""
    names = sorted({e.subject_name for e in entries})
    if all(_INT_RE.match(n) and abs(int(n)) < 2 ** 31 for n in names):   # stored as int32
        ints = {n: int(n) for n in names}
        if len(set(ints.values())) == len(ints):
            return ints, None
    return {n: i for i, n in enumerate(names)}, names


def name_key(name: str) -> str:
    """A joint name as :func:`find_roles` compares it: without a ``Subject:`` prefix, lower
    case, without spaces, underscores, hyphens and dots (``Left_Hip`` = ``left hip`` = ``LeftHip``)."""
    return re.sub(r"[\s_.\-]+", "", name.split(":")[-1]).lower()


def find_roles(names: list[str], candidates: dict[str, list[list[str]]]) -> dict[str, list[int]]:
    """Roles from joint names: for every role, the first candidate group whose names all exist
    (compared by :func:`name_key`: ignoring case, separators and a ``Subject:`` prefix) gives
    the joints."""
    key = {}
    for i, n in enumerate(names):
        key.setdefault(name_key(n), i)
    roles = {}
    for role, groups in candidates.items():
        for group in groups:
            idx = [key.get(name_key(g)) for g in group]
            if idx and all(i is not None for i in idx):
                roles[role] = idx
                break
    return roles


#: the body parts a reader may name (see :class:`~.base.SkeletonInfo`)
ROLES = ("hip_center", "left_hip", "right_hip", "spine", "neck", "left_shoulder",
         "right_shoulder", "head")


def one_of(name: str, value, choices, meaning: str = ""):
    """``value`` if it is one of ``choices``; else a ValueError that starts with ``name`` (the
    option, as :func:`~streamcov.data.readers.open_reader` expects)."""
    if not isinstance(value, str) or value not in choices:
        what = f" ({meaning})" if meaning else ""
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}{what}, got "
                         f"{value!r}")
    return value


def _joint_list(value, n_joints: int, scalar: bool = False):
    """``value`` (a list, or with ``scalar`` one index) as a tuple of distinct 0-based joints in
    range (integral floats such as 1.0 allowed), or None."""
    if scalar and not isinstance(value, (list, tuple)):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value or not all(
            isinstance(i, (int, float, np.integer, np.floating)) and not isinstance(i, bool)
            and float(i).is_integer() and 0 <= i < n_joints for i in value):
        return None
    idx = tuple(int(i) for i in value)
    return idx if len(set(idx)) == len(idx) else None


def check_center(center, n_joints: int) -> tuple[int, ...]:
    """The hip-centre joints (their mean is the centre) as given in an option.

    Parameters
    ----------
    center : list of int
        Distinct 0-based joints (integral floats such as ``1.0`` allowed).
    n_joints : int
        Joints of the skeleton.

    Returns
    -------
    tuple of int

    Raises
    ------
    ValueError
        Starting with ``center`` (the option, for :func:`~streamcov.data.readers.open_reader`).
    """
    idx = _joint_list(center, n_joints)
    if idx is None:
        raise ValueError(f"center must be a non-empty list of distinct 0-based joint indices in "
                         f"[0, {n_joints - 1}] (the files hold {n_joints} joints), got {center!r}")
    return idx


#: roles that must not share a joint: the body frame's axis across the hips, the shoulders' axis, and the spine
#: (upper body minus hip centre), which a shared joint would make zero or meaningless
DISTINCT_ROLES = (("left_hip", "right_hip"), ("left_shoulder", "right_shoulder"), ("hip_center", "neck"))


def check_roles(roles, n_joints: int, found: dict | None = None) -> dict[str, list[int]]:
    """Roles given as an option.

    Parameters
    ----------
    roles : dict
        Role (one of :data:`ROLES`) -> a 0-based joint or a list of distinct ones.
    n_joints : int
        Joints of the skeleton.
    found : dict, optional
        Roles found from the joint names: the given ones win key by key, the
        others stay.

    Returns
    -------
    dict of str to list of int
        The roles (with ``found``'s others).

    Raises
    ------
    ValueError
        Starting with ``roles``: not a table, an unknown role (with the closest name),
        joints out of range, or two roles of :data:`DISTINCT_ROLES` sharing a joint.
    """
    if not isinstance(roles, dict):
        raise ValueError(f"roles must be a table of role -> 0-based joints such as "
                         f"{{hip_center = [0], head = [15]}}, got {roles!r}")
    out = {}
    for k, v in roles.items():
        if k not in ROLES:
            raise ValueError(f"roles: unknown role {k!r}{did_you_mean(k, ROLES)}; the roles are {', '.join(ROLES)}")
        idx = _joint_list(v, n_joints, scalar=True)
        if idx is None:
            raise ValueError(f"roles: {k!r} must list distinct 0-based joint indices in "
                             f"[0, {n_joints - 1}], got {v!r}")
        out[k] = list(idx)
    out = {**(found or {}), **out}
    for a, b in DISTINCT_ROLES:
        shared = sorted(set(out.get(a, ())) & set(out.get(b, ())))
        if shared and (a in roles or b in roles):
            given = " and ".join(f"{r} = {out[r]}" + ("" if r in roles else " (found from the joint names)")
                                 for r in (a, b))
            raise ValueError(f"roles: {given} share joint {shared[0]}; the body frame needs them apart (the axis "
                             f"from one to the other would be zero); give each its own joints")
    return out


def check_joint_layout(path, names, parents, first: tuple, kind: str = "joints") -> None:
    """Every file of an archive must have the joints of the first: ``first`` is that file's
    ``(path, names, parents)``; ``names`` are shown as the ``kind`` of the file."""
    first_path, first_names, first_parents = first
    if list(names) != list(first_names):
        why = (f"its {kind} ({', '.join(names)}) differ from those of {first_path} "
               f"({', '.join(first_names)})")
    elif not np.array_equal(parents, first_parents):
        why = f"its hierarchy differs from that of {first_path}"
    else:
        return
    raise FormatError(path, f"cannot share one joint layout with the other files: {why}")


class ArchiveReader(SkeletonReader):
    """What the ASF/AMC, BVH and C3D readers share.

    Their files come from a folder tree or an ``index.csv`` (:func:`find_entries`), subjects
    are numbered (:func:`subject_numbers`), the hip centre defaults to the ``hip_center`` role
    and sequences are yielded whole, in sorted id order, or recorded in ``skipped``. A
    subclass sets ``source`` and ``ext``, calls :meth:`_open` first and :meth:`_describe` last
    in its ``__init__``, and implements :meth:`_frames`.
    """

    source: str
    ext: str

    def _open(self, path, *, layout: str, label: str, label_map, name_pattern: str):
        self.layout = layout
        self.root, self._entries = find_entries(path, ext=self.ext, layout=layout, label=label,
                                                label_map=label_map, name_pattern=name_pattern)
        self._subject_of, self._subject_names = subject_numbers(self._entries)

    def _describe(self, names, *, units: str, center, roles, found_roles: dict,
                  extra: dict) -> None:
        """``info``: ``roles`` and ``center`` as given (checked), else ``found_roles`` and the
        ``hip_center`` role (joint 0 without one)."""
        J = len(names)
        roles = found_roles if roles is None else check_roles(roles, J)   # given roles replace those found
        center = check_center(roles.get("hip_center", [0]) if center is None else center, J)
        splits = sorted({e.split for e in self._entries if e.split is not None}) or None
        self.info = SkeletonInfo(
            n_joints=J, joint_names=list(names), units=units, source=self.source, center=center,
            label_names=sorted({e.label for e in self._entries}), roles=roles,
            extra={"subject_names": self._subject_names, **extra, "splits": splits})

    def __len__(self) -> int:
        return len(self._entries)

    def _frames(self, entry: Entry) -> np.ndarray | str:  # pragma: no cover - interface
        """(T, 3J) float32 frames of one file, or why the sequence is skipped."""
        raise NotImplementedError

    def _finite_frames(self, entry: Entry) -> np.ndarray | str:
        """:meth:`_frames`, refused with the file's name where a coordinate computed from it is not finite (the
        files' numbers are finite; forward kinematics of huge offsets or a unit conversion can overflow
        float32, whose largest number is about 3.4e38)."""
        frames = self._frames(entry)
        if isinstance(frames, np.ndarray) and not np.isfinite(frames).all():
            t, c = np.argwhere(~np.isfinite(frames))[0]
            names = self.info.joint_names
            raise FormatError(entry.path, f"frame {t + 1}, joint {names[c // 3]!r}: a coordinate computed from "
                              f"the file is {float(frames[t, c])!r}, beyond float32's range (about 3.4e38); fix "
                              "the file's offsets or values, or leave the sequence out")
        return frames

    def sequences(self) -> Iterator[SkeletonSequence]:
        """Yield the sequences sorted by id, reading one file at a time."""
        self.skipped = []
        self.repairs = {}
        for e in self._entries:
            frames = self._read([e.id], self._finite_frames, e)
            if frames is None:
                continue
            if isinstance(frames, str):
                self.skipped.append(SkippedSequence(e.id, frames))
                continue
            yield SkeletonSequence(id=e.id, frames=frames, label=e.label,
                                   subject=self._subject_of[e.subject_name], split=e.split)
