"""Finding the sequence files of an archive, with their labels, subjects and splits.

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

Subjects: when every subject name is an integer (``"3"``, ``"07"``) the subject is that number;
otherwise subjects are numbered by their position in the sorted list of names, which the readers
keep in ``info.extra["subject_names"]`` (HDM05: ``bd, bk, dg, mm, tr`` -> 0..4).
Ids: the file name without its extension (or the ``id`` column); they must be distinct and
sequences are yielded in sorted id order.
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from ...errors import MissingInputError
from .base import FormatError

INDEX_NAME = "index.csv"
INDEX_REQUIRED = ("file", "label", "subject")
INDEX_OPTIONAL = ("split", "id", "skeleton")

#: ``HDM_bd_depositFloorR_001_120``: prefix, subject, motion, take, optional frame rate.
HDM_PATTERN = (r"^(?P<prefix>[A-Za-z]+)_(?P<subject>[A-Za-z0-9]+)_(?P<motion>.+?)_(?P<take>\d+)"
               r"(?:_(?P<rate>\d+))?$")

_INT_RE = re.compile(r"^[+-]?\d+$")


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
                 label_map: dict | None = None, name_pattern: str = HDM_PATTERN,
                 what: str = "sequence") -> tuple[Path, list[Entry]]:
    """Entries of an archive, sorted by id. ``ext`` like ``".amc"`` (case-insensitive)."""
    root = Path(root)
    if layout not in ("folders", "index"):
        raise ValueError(f"layout must be 'folders' or 'index', got {layout!r}")
    if label not in ("folder", "name"):
        raise ValueError(f"label must be 'folder' (class folder) or 'name' (the 'motion' group "
                         f"of name_pattern), got {label!r}")
    if layout == "index":
        index = root if root.name == INDEX_NAME and root.is_file() else root / INDEX_NAME
        if not index.is_file():
            raise FormatError(index, f"index file not found; layout='index' needs an {INDEX_NAME} "
                              f"with columns {','.join(INDEX_REQUIRED)} (optional: "
                              f"{','.join(INDEX_OPTIONAL)})")
        return index.parent, read_index(index, ext=ext, label_map=label_map)
    if not root.is_dir():
        raise MissingInputError(root, "not a directory; pass the folder that holds "
                                f"[<split>/]<class>/*{ext} (or an {INDEX_NAME} with "
                                "layout='index')")
    try:
        rx = re.compile(name_pattern)
    except re.error as exc:
        raise ValueError(f"name_pattern is not a valid regular expression: {exc}") from None
    if "subject" not in rx.groupindex or (label == "name" and "motion" not in rx.groupindex):
        raise ValueError("name_pattern needs a named group 'subject' (and 'motion' for "
                         f"label='name'), got {name_pattern!r}")
    files = sorted(p for p in root.rglob("*") if p.suffix.lower() == ext and p.is_file())
    if not files:
        raise FormatError(root, f"no *{ext} files found below this folder; expected "
                          f"[<split>/]<class>/<file>{ext}, or an {INDEX_NAME} with layout='index'")
    entries: dict[str, Entry] = {}
    for p in files:
        parts = p.relative_to(root).parts
        if len(parts) not in (2, 3):
            raise FormatError(p, f"file is {len(parts) - 1} folder levels below {root}; the "
                              f"folders layout is [<split>/]<class>/<file>{ext} (use an "
                              f"{INDEX_NAME} and layout='index' for other trees)")
        split = parts[0] if len(parts) == 3 else None
        folder = parts[-2]
        m = rx.match(p.stem)
        if m is None:
            raise FormatError(p, f"file name {p.stem!r} does not match name_pattern "
                              f"{name_pattern!r}, which must give the subject (for HDM05: "
                              "HDM_<subject>_<motion>_<take>_<rate>); pass another name_pattern "
                              f"or list the files in an {INDEX_NAME} (layout='index')")
        groups = m.groupdict()
        if label == "name":
            lab = groups["motion"]
        else:
            lab = folder
        if label_map is not None:
            lab = str(label_map.get(lab, lab))
        if p.stem in entries:
            raise FormatError(p, f"{what} id {p.stem!r} (the file name) is also used by "
                              f"{entries[p.stem].path}; ids must be distinct: rename one file or "
                              f"use an {INDEX_NAME} with an 'id' column")
        entries[p.stem] = Entry(p.stem, p, lab, groups["subject"], split, folder, groups)
    return root, [entries[k] for k in sorted(entries)]


def read_index(index: Path, *, ext: str, label_map: dict | None = None) -> list[Entry]:
    rows = _rows_with_lines(index)
    rows = [(n, row) for n, row in rows if any(f.strip() for f in row)]
    if not rows:
        raise FormatError(index, f"empty; expected a header row with columns "
                          f"{','.join(INDEX_REQUIRED)}")
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
                          f"{','.join(header)}, need {','.join(INDEX_REQUIRED)} (optional: "
                          f"{','.join(INDEX_OPTIONAL)})", line=header_line)
    col = {n: names.index(n) for n in INDEX_REQUIRED + INDEX_OPTIONAL if n in names}
    root = index.parent
    entries: dict[str, Entry] = {}
    for lineno, row in rows[1:]:
        if len(row) != len(names):
            raise FormatError(index, f"row has {len(row)} fields but the header has {len(names)}",
                              line=lineno)
        val = {k: row[i].strip() for k, i in col.items()}
        for k in ("file", "label", "subject"):
            if not val[k]:
                raise FormatError(index, f"column {k!r} is empty", line=lineno)
        fpath = root / val["file"]
        if not fpath.is_file():
            raise FormatError(index, f"file {val['file']!r} not found in {root}", line=lineno)
        if fpath.suffix.lower() != ext:
            raise FormatError(index, f"file {val['file']!r} does not end in {ext}", line=lineno)
        split = None
        if "split" in col:
            split = val["split"]
            if not split:
                raise FormatError(index, "column 'split' is empty (leave the column out if there "
                                  "is no split)", line=lineno)
        skel = None
        if val.get("skeleton"):
            skel = root / val["skeleton"]
            if not skel.is_file():
                raise FormatError(index, f"skeleton file {val['skeleton']!r} not found in {root}",
                                  line=lineno)
        lab = val["label"]
        if label_map is not None:
            lab = str(label_map.get(lab, lab))
        seq_id = val.get("id") or fpath.stem
        if seq_id in entries:
            raise FormatError(index, f"sequence id {seq_id!r} is used twice (first on line "
                              f"{entries[seq_id].index_line}); give each row a distinct id or "
                              "file name", line=lineno)
        entries[seq_id] = Entry(seq_id, fpath, lab, val["subject"], split, skeleton=skel,
                                index_line=lineno)
    if not entries:
        raise FormatError(index, "lists no sequences (only a header row)", line=header_line)
    return [entries[k] for k in sorted(entries)]


def subject_numbers(entries: list[Entry]) -> tuple[dict[str, int], list[str] | None]:
    """Subject name -> int, and the sorted names when they are not all integers."""
    names = sorted({e.subject_name for e in entries})
    if all(_INT_RE.match(n) for n in names):
        ints = {n: int(n) for n in names}
        if len(set(ints.values())) == len(ints):
            return ints, None
    return {n: i for i, n in enumerate(names)}, names


def _rows_with_lines(index: Path) -> list[tuple[int, list[str]]]:
    out = []
    try:
        with open(index, encoding="utf-8-sig", newline="") as fh:
            reader = csv.reader(fh)
            start = 1
            for row in reader:
                out.append((start, row))
                start = reader.line_num + 1
    except UnicodeDecodeError as exc:
        raise FormatError(index, f"not a UTF-8/ASCII text file ({exc.reason})") from None
    except csv.Error as exc:
        raise FormatError(index, f"not a valid CSV file: {exc}", line=reader.line_num) from None
    return out


def find_roles(names: list[str], candidates: dict[str, list[list[str]]]) -> dict[str, list[int]]:
    """Roles from joint names: for every role, the first candidate group whose names all exist
    (compared ignoring case, and ignoring a ``Subject:`` prefix) gives the joints."""
    key = {}
    for i, n in enumerate(names):
        k = n.split(":")[-1].strip().lower()
        key.setdefault(k, i)
    roles = {}
    for role, groups in candidates.items():
        for group in groups:
            idx = [key.get(g.lower()) for g in group]
            if idx and all(i is not None for i in idx):
                roles[role] = idx
                break
    return roles


def check_roles(roles, n_joints: int) -> dict[str, list[int]]:
    out = {}
    for k, v in dict(roles).items():
        idx = [int(i) for i in ([v] if isinstance(v, int) else v)]
        if not idx or not all(0 <= i < n_joints for i in idx):
            raise ValueError(f"role {k!r} must list 0-based joint indices in [0, {n_joints - 1}], "
                             f"got {v!r}")
        out[str(k)] = idx
    return out
