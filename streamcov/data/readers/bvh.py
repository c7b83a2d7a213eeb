"""Reader for Biovision Hierarchy (``.bvh``) motion capture.

Format
------
::

    HIERARCHY
    ROOT Hips
    {
        OFFSET 0 0 0
        CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
        JOINT Chest
        {
            OFFSET 0 5.2 0
            CHANNELS 3 Zrotation Xrotation Yrotation
            End Site
            {
                OFFSET 0 3.1 0
            }
        }
    }
    MOTION
    Frames: 2
    Frame Time: 0.0333333
    <one row per frame: every joint's channels, joints in the order of the hierarchy>

Joints and positions
--------------------
Joints are the ROOT/JOINT entries in file order, followed (``end_sites=True``, default) by each
End Site right after its parent, named ``<parent>_end``. Positions come from
:mod:`.kinematics` (column vectors, ``offset_frame="parent"``)::

    E_j = R_c1(a1) @ R_c2(a2) @ R_c3(a3)      (rotation channels c1 c2 c3 in file order,
                                              i.e. intrinsic: "Zrotation Xrotation Yrotation"
                                              gives Rz @ Rx @ Ry)
    G_j = G_parent @ E_j
    x_j = x_parent + G_parent @ t_j           x_root = t_root

with ``t_j`` the joint's OFFSET, whose components are replaced by the joint's position
channels when it has them (``position_channels="replace"``, default: what Blender and most
exporters do; root OFFSETs are then usually 0 or equal to the first frame) or added to it
(``"add"``: the reading of Meredith & Maddock's description). A joint without position
channels keeps ``|x_j - x_parent| = |OFFSET_j|`` in every frame (tested).

Units: BVH has none. ``units`` names the file's unit: ``"unknown"`` (default) keeps the values
and records ``info.units = "unknown"``; ``"m"``, ``"cm"``, ``"mm"``, ``"in"`` scale to metres.

Why not ``bvhio``
-----------------
``bvhio`` 1.5.4 (PyPI, the maintained BVH package) was tried and not used: (1) at the end of a
truncated file its line reader loops forever (``readline`` returns "" and the
``except StopIteration`` never fires), so a cut-short file hangs instead of raising (checked:
killed after 20 s on a file missing its last row); (2) it parses every frame in Python and
builds a ``glm`` pose object per joint per frame: 1.0 s to read and pose 500 frames of a
60-joint file, against 0.04 s here; (3) it computes in float32 (``glm.vec3``); (4) it pins
exact versions of ``pyglm`` (2.8.2) and ``spatial-transform`` (1.3.3), which would constrain
streamcov's environment; (5) it raises ``SyntaxError`` with a tuple of debug info, and ignores
extra values in a row. Its channel-order handling is right (intrinsic Euler angles in channel
order): on that 60-joint file its positions agree with this reader's to float32 precision
(8.6e-5 on coordinates up to 196).

Errors: bad input raises :class:`FormatError` with file and line: a missing section or brace,
an unknown channel, a CHANNELS count that does not match its names, OFFSET without three
numbers, a row with the wrong number of values, a non-numeric value, fewer rows than
``Frames:`` (truncated file) or more, files of one archive with different joints. Nothing is
repaired; a file with ``Frames: 0`` is recorded in ``skipped``.
"""
from __future__ import annotations

import codecs
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from ...errors import not_the_file
from . import _fastparse as fp
from ._layout import GENERIC_PATTERN, ArchiveReader, check_joint_layout, find_roles, one_of, without_subject
from .base import FormatError, _read_scratch, ascii_split, decode_text
from .kinematics import Skeleton

#: file unit -> metres per unit ("unknown": values kept as they are)
UNITS = {"unknown": 1.0, "m": 1.0, "cm": 0.01, "mm": 0.001, "in": 0.0254}

_CHANNELS = {"xposition": ("P", 0), "yposition": ("P", 1), "zposition": ("P", 2),
             "xrotation": ("R", "X"), "yrotation": ("R", "Y"), "zrotation": ("R", "Z")}

#: role -> candidate joint-name groups (first group whose names all exist wins)
ROLE_NAMES = {
    "hip_center": [["Hips"], ["Hip"], ["Pelvis"], ["Root"]],
    "left_hip": [["LeftUpLeg"], ["LeftHip"], ["LHip"], ["LeftThigh"], ["LThigh"],
                 ["lfemur"], ["LeftUpperLeg"]],
    "right_hip": [["RightUpLeg"], ["RightHip"], ["RHip"], ["RightThigh"], ["RThigh"],
                  ["rfemur"], ["RightUpperLeg"]],
    "spine": [["Spine1"], ["Spine"], ["Chest"], ["LowerBack"], ["Abdomen"], ["Spine2"]],
    "neck": [["Neck"], ["Neck1"], ["LowerNeck"]],
    "left_shoulder": [["LeftArm"], ["LeftUpperArm"], ["LeftShoulder"], ["LShoulder"],
                      ["lhumerus"]],
    "right_shoulder": [["RightArm"], ["RightUpperArm"], ["RightShoulder"], ["RShoulder"],
                       ["rhumerus"]],
    "head": [["Head"], ["head"]],
}


@dataclass
class BvhHeader:
    """The hierarchy of a ``.bvh`` and where its frames start."""
    path: Path
    names: list[str]
    parents: np.ndarray
    offsets: np.ndarray                 # (J, 3)
    orders: list[str]                   # rotation channel order per joint ("" for none)
    channels: list[list[str]]           # per joint, normalised channel names
    col0: np.ndarray                    # first column of each joint's channels
    ncols: int
    is_end: np.ndarray                  # (J,) bool, End Site joints
    n_frames: int
    frame_time: float
    data_pos: int                       # byte offset of the first row
    data_line: int                      # 1-based line of the first row
    frames_line: int

    @cached_property
    def channel_cols(self) -> tuple[np.ndarray, np.ndarray]:
        """Columns of the motion rows: every joint's rotation angles in channel order, and its
        position channels per axis (-1: none), both (J, 3)."""
        J = len(self.names)
        angle_cols = np.full((J, 3), -1, dtype=np.int64)
        position_cols = np.full((J, 3), -1, dtype=np.int64)
        for j, chans in enumerate(self.channels):
            r = 0
            for k, ch in enumerate(chans):
                kind, ax = _CHANNELS[ch]
                if kind == "R":
                    angle_cols[j, r] = self.col0[j] + k
                    r += 1
                else:
                    position_cols[j, ax] = self.col0[j] + k
        return angle_cols, position_cols

    @cached_property
    def skeleton(self) -> Skeleton:
        """The kinematic tree (built once per file: every read of the motion reuses it)."""
        return Skeleton(self.names, self.parents, self.offsets, self.orders, extrinsic=False,
                        offset_frame="parent")


def _header_lines(path: Path):
    """Yield (line number, byte offset of the next line, tokens) up to and including the
    'Frame Time' line, reading only the header."""
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise not_the_file(FormatError(path, f"cannot read the file: {exc.strerror}")) from None
    with fh:
        pos = 0
        for n, raw in enumerate(fh, 1):
            pos += len(raw)
            if n == 1:
                raw = raw.removeprefix(codecs.BOM_UTF8)   # as some editors save
            yield n, pos, ascii_split(decode_text(raw).replace("{", " { ").replace("}", " } "))


def read_bvh_header(path, *, end_sites: bool = True) -> BvhHeader:
    """Parse the HIERARCHY and the MOTION header of a ``.bvh`` (reading only the header)."""
    path = Path(path)
    it = _header_lines(path)
    try:
        return _parse_header(path, it, end_sites)
    finally:
        it.close()                                # closes the file


def _parse_header(path: Path, it, end_sites: bool) -> BvhHeader:
    last_line = 0

    def nxt(expect):
        nonlocal last_line
        for n, pos, toks in it:
            last_line = n
            if toks:
                return n, pos, toks
        raise FormatError(path, f"file ends early: expected {expect}", line=last_line or None)

    n, _, toks = nxt("HIERARCHY")
    if toks[0].upper() != "HIERARCHY":
        raise FormatError(path, f"expected 'HIERARCHY' on the first line, found {toks[0]!r}; "
                          "not a BVH file?", line=n)
    if len(toks) > 1:
        raise FormatError(path, f"unexpected {toks[1]!r} after HIERARCHY", line=n)
    names, parents, offsets, channels, is_end = [], [], [], [], []
    name_line: dict[str, int] = {}
    stack: list[int] = []            # open blocks: joint index, or -(index + 1) for End Sites
    expect = {"root": "ROOT or MOTION", "open": "'{'", "offset": "OFFSET",
              "channels": "CHANNELS (a ROOT or JOINT needs them after its OFFSET)",
              "body": "JOINT, End Site or '}'",
              "close": "'}' (an End Site holds only an OFFSET)"}
    state = "root"
    n_roots = 0
    decl_line = 0

    def declare(nm, parent, end, line):
        if not end:
            if nm in name_line:
                raise FormatError(path, f"joint name {nm!r} is used twice (first on line "
                                  f"{name_line[nm]})", line=line)
            name_line[nm] = line
        names.append(nm)
        parents.append(parent)
        is_end.append(end)
        offsets.append(None)
        channels.append([])

    while True:
        n, pos, toks = nxt(expect[state])
        key = toks[0].upper()
        if state == "root":
            if key == "MOTION" and n_roots:
                if len(toks) > 1:
                    raise FormatError(path, f"unexpected {toks[1]!r} after MOTION", line=n)
                break
            if key != "ROOT":
                raise FormatError(path, f"expected {'ROOT or MOTION' if n_roots else 'ROOT'}, "
                                  f"found {toks[0]!r}", line=n)
            if len(toks) < 2:
                raise FormatError(path, "ROOT needs a name", line=n)
            declare(" ".join(toks[1:]), -1, False, n)
            n_roots += 1
            decl_line = n
            state = "open"
        elif state == "open":
            if key != "{" or len(toks) > 1:
                raise FormatError(path, f"expected '{{' after {names[-1]!r} (line {decl_line}), "
                                  f"found {' '.join(toks)!r}", line=n)
            j = len(names) - 1
            stack.append(-(j + 1) if is_end[j] else j)
            state = "offset"
        elif state == "offset":
            if key != "OFFSET":
                raise FormatError(path, f"expected OFFSET, found {toks[0]!r}", line=n)
            if len(toks) != 4:
                raise FormatError(path, f"OFFSET needs 3 numbers, found {len(toks) - 1}",
                                  line=n)
            try:
                off = [float(t) for t in toks[1:]]
            except ValueError:
                raise FormatError(path, f"OFFSET values must be numbers, found "
                                  f"{' '.join(toks[1:])!r}", line=n) from None
            if not np.isfinite(off).all():
                raise FormatError(path, "OFFSET values must be finite", line=n)
            top = stack[-1]
            offsets[top if top >= 0 else -top - 1] = off
            state = "channels" if top >= 0 else "close"
        elif state == "channels":
            if key != "CHANNELS":
                raise FormatError(path, f"expected CHANNELS after the OFFSET of "
                                  f"{names[stack[-1]]!r}, found {toks[0]!r}", line=n)
            try:
                cnt = int(toks[1])
            except (IndexError, ValueError):
                raise FormatError(path, "CHANNELS needs a count, e.g. 'CHANNELS 3 Zrotation "
                                  "Xrotation Yrotation'", line=n) from None
            chans = [c.lower() for c in toks[2:]]
            if cnt != len(chans):
                raise FormatError(path, f"CHANNELS says {cnt} but names {len(chans)}: "
                                  f"{' '.join(toks[2:])!r}", line=n)
            for c, raw in zip(chans, toks[2:]):
                if c not in _CHANNELS:
                    raise FormatError(path, f"unknown channel {raw!r}; expected Xposition, "
                                      "Yposition, Zposition, Xrotation, Yrotation, Zrotation",
                                      line=n)
            if len(set(chans)) != len(chans):
                raise FormatError(path, f"a channel is listed twice: {' '.join(toks[2:])!r}",
                                  line=n)
            channels[stack[-1]] = chans
            state = "body"
        elif state == "close":
            if key != "}" or len(toks) > 1:
                raise FormatError(path, f"expected '}}' closing the End Site, found "
                                  f"{' '.join(toks)!r}", line=n)
            stack.pop()
            state = "body"
        else:                                            # body of a joint
            if key == "JOINT":
                if len(toks) < 2:
                    raise FormatError(path, "JOINT needs a name", line=n)
                declare(" ".join(toks[1:]), stack[-1], False, n)
                decl_line = n
                state = "open"
            elif key == "END":
                if len(toks) != 2 or toks[1].upper() != "SITE":
                    raise FormatError(path, f"expected 'End Site', found {' '.join(toks)!r}",
                                      line=n)
                base = nm = f"{names[stack[-1]]}_end"
                k = 2
                while nm in names:
                    nm = f"{base}{k}"
                    k += 1
                declare(nm, stack[-1], True, n)
                decl_line = n
                state = "open"
            elif key == "}":
                if len(toks) > 1:
                    raise FormatError(path, f"unexpected {toks[1]!r} after '}}'", line=n)
                stack.pop()
                state = "body" if stack else "root"
            elif key == "MOTION":
                raise FormatError(path, f"MOTION before the hierarchy is closed: {len(stack)} "
                                  "'}' missing", line=n)
            else:
                raise FormatError(path, f"expected {expect['body']}, found {toks[0]!r}", line=n)
    ends = [names[j] for j in range(len(names)) if is_end[j]]
    clash = sorted(set(ends) & set(name_line))
    if clash and end_sites:
        raise FormatError(path, f"End Site name {clash[0]!r} (its parent's name + '_end') clashes "
                          "with a joint of that name; pass end_sites=False",
                          line=name_line[clash[0]])
    # MOTION header
    n, _, toks = nxt("'Frames: <count>'")
    if len(toks) != 2 or toks[0].lower() != "frames:":
        raise FormatError(path, f"expected 'Frames: <count>' after MOTION, found "
                          f"{' '.join(toks)!r}", line=n)
    try:
        n_frames = int(toks[1])
        if n_frames < 0:
            raise ValueError
    except ValueError:
        raise FormatError(path, f"frame count must be a non-negative integer, found {toks[1]!r}",
                          line=n) from None
    frames_line = n
    n, pos, toks = nxt("'Frame Time: <seconds>'")
    if len(toks) != 3 or toks[0].lower() != "frame" or toks[1].lower() != "time:":
        raise FormatError(path, f"expected 'Frame Time: <seconds>', found {' '.join(toks)!r}",
                          line=n)
    try:
        frame_time = float(toks[2])
    except ValueError:
        raise FormatError(path, f"frame time must be a number, found {toks[2]!r}", line=n) \
            from None
    if not 0 < frame_time < float("inf"):   # 'inf' read as a frame rate of 0
        raise FormatError(path, f"frame time must be positive and finite (seconds per frame), found {toks[2]!r}", line=n)
    data_pos, data_line = pos, n + 1
    # layout
    keep = [j for j in range(len(names)) if end_sites or not is_end[j]]
    remap = {j: i for i, j in enumerate(keep)}
    orders, col0, c = [], [], 0
    for j in range(len(names)):
        col0.append(c)
        c += len(channels[j])
        orders.append("".join(_CHANNELS[ch][1] for ch in channels[j] if _CHANNELS[ch][0] == "R"))
    hdr = BvhHeader(
        path=path, names=[names[j] for j in keep],
        parents=np.array([remap[parents[j]] if parents[j] >= 0 else -1 for j in keep]),
        offsets=np.array([offsets[j] for j in keep], dtype=np.float64).reshape(-1, 3),
        orders=[orders[j] for j in keep], channels=[channels[j] for j in keep],
        col0=np.array([col0[j] for j in keep], dtype=np.int64), ncols=c,
        is_end=np.array([is_end[j] for j in keep], dtype=bool), n_frames=n_frames,
        frame_time=frame_time, data_pos=data_pos, data_line=data_line, frames_line=frames_line)
    return hdr


#: scanner error code -> message (fields: tok, a0, a1 as in _fastparse; frames_line)
_MOTION_ERRORS = {
    fp.E_BAD_NUMBER: fp.BAD_NUMBER,
    fp.E_ROW_COUNT: "frame row has {a0} values, expected {a1} (the sum of the hierarchy's "
                    "CHANNELS counts)",
    fp.E_TOO_MANY_ROWS: "more frame rows than 'Frames: {a0}' (line {frames_line}) declares",
}


def read_bvh_motion(hdr: BvhHeader) -> np.ndarray:
    """The (T, ncols) channel values of a ``.bvh`` whose header is ``hdr``."""
    path = hdr.path
    data = _read_scratch(path)       # a uint8 array, overwritten by the thread's next read
    if hdr.ncols == 0:
        rest = bytes(data[hdr.data_pos:]).split()
        if rest:
            raise FormatError(path, "the hierarchy has no channels, yet values follow the header",
                              line=hdr.data_line)
        return np.zeros((hdr.n_frames, 0))
    vals, rlines, err = fp.scan(path, data, fp.scan_rows, hdr.data_pos, hdr.data_line,
                                hdr.ncols, hdr.n_frames)
    if err[0] != fp.OK:
        code, line, s, e, a0, a1 = (int(x) for x in err[:6])
        raise FormatError(path, _MOTION_ERRORS[code].format(
            tok=bytes(data[s:e]).decode("latin-1"), a0=a0, a1=a1, frames_line=hdr.frames_line),
            line=line)
    if len(vals) < hdr.n_frames:
        raise FormatError(path, f"'Frames: {hdr.n_frames}' (line {hdr.frames_line}) but the file "
                          f"holds {len(vals)} frame rows: the file is truncated",
                          line=int(rlines[-1]) if len(rlines) else hdr.data_line)
    return vals


def bvh_positions(hdr: BvhHeader, values: np.ndarray, *, position_channels: str = "replace",
                  skeleton: Skeleton | None = None) -> np.ndarray:
    """Joint positions (T, J, 3), in the file's unit, from the channel values."""
    one_of("position_channels", position_channels, ("replace", "add"))
    sk = skeleton or hdr.skeleton
    return sk.positions_from_channels(values, *hdr.channel_cols,
                                      add=position_channels == "add")


class BvhReader(ArchiveReader):
    """BVH sequences from a folder tree or an ``index.csv``.

    Parameters
    ----------
    path, layout, label, label_map, name_pattern
        As for :class:`~.asf_amc.AsfAmcReader` (see :mod:`._layout`); the default
        ``name_pattern`` takes the subject before the first underscore (``01_05.bvh``).
    units : {"unknown", "m", "cm", "mm", "in"}
        The unit of the files; known units are converted to metres.
    end_sites : bool
        Keep End Sites as joints (named ``<parent>_end``).
    position_channels : {"replace", "add"}
        How position channels combine with the OFFSET (see the module docstring).
    center, roles : optional
        Hip centre joints (default: the role ``hip_center``, else joint 0) and roles (default:
        from joint names, see ``ROLE_NAMES``).

    Notes
    -----
    Every file's header is read when the reader is created; all files must have the same
    joints (names and hierarchy; offsets may differ per subject). Joint names are kept without
    a ``Subject:`` prefix (``Bob:Hips`` is ``Hips``; :func:`._layout.without_subject`), so that
    the files of several performers share one layout. ``info.extra`` holds
    ``subject_names``, ``frame_rate`` (when all files agree), ``parents`` and ``offsets`` of
    the first file, and ``units_in_file``.
    """

    source = "bvh"
    ext = ".bvh"

    def __init__(self, path, *, layout: str = "folders", units: str = "unknown",
                 label: str = "folder", label_map: dict | None = None,
                 name_pattern: str = GENERIC_PATTERN, end_sites: bool = True,
                 position_channels: str = "replace", center=None, roles: dict | None = None):
        super().__init__()
        one_of("units", units, tuple(UNITS))
        self.position_channels = one_of("position_channels", position_channels,
                                        ("replace", "add"))
        if not isinstance(end_sites, bool):
            raise ValueError(f"end_sites must be true or false, got {end_sites!r}")
        self.scale = UNITS[units]
        self._open(path, layout=layout, label=label, label_map=label_map,
                   name_pattern=name_pattern)
        self._headers: dict[str, BvhHeader] = {}
        rates = set()
        first = None
        for e in self._entries:
            h = self._headers[e.id] = read_bvh_header(e.path, end_sites=end_sites)
            names = without_subject(h.names)   # Bob:Hips and Alice:Hips are one joint
            first = first or (h.path, names, h.parents)
            check_joint_layout(e.path, names, h.parents, first)
            rates.add(round(1.0 / h.frame_time, 6))
        h = self._headers[self._entries[0].id]
        self._describe(first[1], units="unknown" if units == "unknown" else "m",
                       center=center, roles=roles, found_roles=find_roles(first[1], ROLE_NAMES),
                       extra={"frame_rate": rates.pop() if len(rates) == 1 else None,
                              "parents": h.parents.tolist(),
                              "offsets": (h.offsets * self.scale).round(6).tolist(),
                              "units_in_file": units, "position_channels": position_channels})

    def read(self, entry) -> np.ndarray | None:
        """(T, 3J) float32 positions of one entry, or None for ``Frames: 0``."""
        h = self._headers[entry.id]
        vals = read_bvh_motion(h)
        if len(vals) == 0:
            return None
        X = bvh_positions(h, vals, position_channels=self.position_channels)
        if self.scale != 1.0:
            X *= self.scale
        with np.errstate(over="ignore"):   # a position beyond float32 is refused, naming the sequence, by the store
            return X.reshape(len(X), -1).astype(np.float32)

    def _frames(self, entry) -> np.ndarray | str:
        frames = self.read(entry)
        return f"{entry.path} declares 'Frames: 0'" if frames is None else frames
