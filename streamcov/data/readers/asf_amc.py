"""Reader for Acclaim motion capture: skeletons (``.asf``) and motions (``.amc``), e.g. HDM05, CMU.

Format
------
``.asf`` (one per subject; ``#`` comments; commas and parentheses count as spaces)::

    :units   mass <f>  length <f>  angle deg|rad
    :root    order TX TY TZ RX RY RZ   axis XYZ   position x y z   orientation a b c
    :bonedata  begin id <n> name <s> direction x y z length <f> axis a b c XYZ
                     [dof rx ry rz  limits (lo hi) ...] end ...
    :hierarchy begin <parent> <child> <child> ... end

``.amc``: header lines (``#`` comments, ``:FULLY-SPECIFIED``, ``:DEGREES``/``:RADIANS``), then
per frame a line with the frame number and one line ``<bone> <values>`` per bone with a dof
(values in the order of the bone's ``dof``; the root's in the order of its ``order``).

Joints and positions
--------------------
Joint 0 is the root; joint ``1 + i`` is the end of the ``i``-th bone of ``:bonedata`` (HDM05:
31 joints). Positions come from :mod:`.kinematics` (column vectors)::

    C_b = Ext(axis_b, axis order)          M_b = Ext(AMC angles, dof order)
    G_b = G_parent @ C_b @ M_b @ C_b^-1    x_b = x_parent + G_b @ (length_b * direction_b)
    G_root = C_r @ M_r @ C_r^-1            x_root = position + (TX, TY, TZ)

where ``Ext(angles, "XYZ") = Rz @ Ry @ Rx`` (rotations about fixed axes, first letter first)
and ``C_r`` comes from the root ``orientation`` in the root ``axis`` order (treating the root's
preset orientation like a bone axis; HDM05 and CMU set it to zero). The root rotation order is
the order of the RX/RY/RZ tokens in ``order``; a bone's is the order of its ``dof`` tokens (the
usual ``rx ry rz`` gives ``Rz Ry Rx``). Directions are normalised, so ``|x_b - x_parent|`` is the
bone's ``length`` in every frame (a test checks it for every HDM05 sequence).

Lengths: an ASF length ``v`` is ``v / length`` inches (``:units length``, 0.45 for HDM05 and
CMU), so metres are ``v / length * 0.0254``; root translations in the AMC use the same unit.
Axes are those of the capture (y up for HDM05 and CMU).

Errors and repairs
------------------
Bad input raises :class:`FormatError` naming the file and line: unknown bone in the AMC, a bone
line with too few or too many values, a bone listed twice in one frame, a frame missing bones
(including a truncated last frame), a frame number out of sequence, a non-numeric or
non-finite value, a missing or inconsistent ``.asf``, a hierarchy naming an unknown bone, a bone
with two parents or a cycle. A sequence is yielded whole or not at all. An ``.amc`` with a
header but no frames is not yielded and is recorded in ``skipped``. Nothing is repaired; a UTF-8
byte-order mark at the start of a file is skipped (line numbers are unchanged).

Speed: the frame section is parsed by a compiled one-pass scanner (:mod:`._fastparse`) and the
kinematics run in one compiled pass over frames and joints; see ``benchmarks/mocap_ingest.py``.
"""
from __future__ import annotations

import codecs
import re
import string
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import _fastparse as fp
from ._layout import HDM_PATTERN, ArchiveReader, Entry, check_joint_layout, one_of
from .base import FormatError, _read_bytes, ascii_split, text_encoding
from .kinematics import Skeleton, euler_matrix

INCH = 0.0254
#: output unit -> metres per unit
UNITS = {"m": 1.0, "cm": 0.01, "mm": 0.001, "in": INCH}

#: HDM05 11-class folders (see shared/data/hdm05/SOURCE.md)
HDM05_CLASSES = {
    "1": "depositFloorR", "2": "elbowToKnee1RepsLelbowStart", "3": "grabHighR",
    "4": "hopBothLegs1hops", "5": "jogLeftCircle4StepsRstart", "6": "kickLFront1Reps",
    "7": "lieDownFloor", "8": "rotateArmsBothBackward1Reps", "9": "sneak2StepsLStart",
    "10": "squat1Reps", "11": "throwBasketball",
}

_ROOT_TOKENS = ("TX", "TY", "TZ", "RX", "RY", "RZ")
_BONE_DOFS = ("rx", "ry", "rz")
_UNSUPPORTED_DOFS = ("tx", "ty", "tz", "l")


# ---------------------------------------------------------------------------------------------
# ASF
# ---------------------------------------------------------------------------------------------

@dataclass
class AsfBone:
    name: str
    direction: np.ndarray
    length: float
    axis: np.ndarray
    axis_order: str
    dof: list[str]
    line: int
    id: int | None = None
    limits: list[tuple[float, float]] = field(default_factory=list)


def _same_skeleton(a: "AsfSkeleton", b: "AsfSkeleton") -> bool:
    """Whether two parsed skeletons are the same but for the file they were read from (a copy of one
    subject's .asf in two folders, comments or line breaks aside: paths and line numbers are not compared)."""
    import dataclasses

    where = ("path", "line")

    def same(x, y) -> bool:
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            return np.array_equal(x, y)
        if dataclasses.is_dataclass(x) and type(x) is type(y):
            return all(same(getattr(x, f.name), getattr(y, f.name)) for f in dataclasses.fields(x)
                       if f.name not in where)
        if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
            return len(x) == len(y) and all(map(same, x, y))
        if isinstance(x, dict) and isinstance(y, dict):
            return x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
        return x == y

    return same(a, b)


@dataclass
class AsfSkeleton:
    """A parsed ``.asf``. Joint 0 is the root, joint ``1 + i`` the end of ``bones[i]``."""
    path: Path
    name: str
    length_unit: float
    angle_unit: str
    root_order: list[str]
    root_axis: str
    root_position: np.ndarray
    root_orientation: np.ndarray
    bones: list[AsfBone]
    parent: dict[str, str]              # bone -> parent bone ("root")
    encoding: str = "utf-8"             # of the .asf: the .amc's bone names are compared in it

    def __post_init__(self):
        self.joint_names = ["root"] + [b.name for b in self.bones]
        index = {n: i for i, n in enumerate(self.joint_names)}
        self.parents = np.array([-1] + [index[self.parent[b.name]] for b in self.bones])
        # AMC columns: root (its order tokens), then every bone's dof, in bonedata order
        self.ncols_root = len(self.root_order)
        ndof = [len(b.dof) for b in self.bones]
        self.col0 = np.concatenate([[0], self.ncols_root + np.cumsum([0] + ndof[:-1])]).astype(
            np.int64)
        self.ndof = np.array([self.ncols_root] + ndof, dtype=np.int64)
        self.ncols = int(self.ndof.sum())
        k = 1.0 if self.angle_unit == "deg" else 180.0 / np.pi
        C = [euler_matrix(self.root_orientation * k, self.root_axis, extrinsic=True)]
        C += [euler_matrix(b.axis * k, b.axis_order, extrinsic=True) for b in self.bones]
        d = np.stack([b.direction for b in self.bones]) if self.bones else np.zeros((0, 3))
        self.lengths = np.array([0.0] + [b.length for b in self.bones])
        offsets = np.concatenate([self.root_position[None], d * self.lengths[1:, None]])
        # AMC columns of every joint's angles, in its order (-1: none), and of the root's
        # translations, added to its :root position
        rot = [i for i, t in enumerate(self.root_order) if t.startswith("R")]
        orders = ["".join(self.root_order[i][1] for i in rot)]
        cols = np.full((len(self.joint_names), 3), -1, dtype=np.int64)
        cols[0, :len(rot)] = rot
        for j, b in enumerate(self.bones, start=1):
            orders.append("".join(x[1].upper() for x in b.dof))
            cols[j, :len(b.dof)] = self.col0[j] + np.arange(len(b.dof))
        self.angle_cols = cols
        self.position_cols = np.full_like(cols, -1)
        for i, t in enumerate(self.root_order):
            if t.startswith("T"):
                self.position_cols[0, "XYZ".index(t[1])] = i
        self.kin = Skeleton(self.joint_names, self.parents, offsets, orders, extrinsic=True,
                            offset_frame="self", axes=np.stack(C))
        self.C = self.kin.axes
        self.levels = self.kin.levels
        self.tables = self.scan_tables()

    # names / layout for the scanner
    def scan_tables(self):
        names = [n.encode(self.encoding) for n in self.joint_names]
        width = max(len(n) for n in names)
        table = np.zeros((len(names), width), dtype=np.uint8)
        for i, n in enumerate(names):
            table[i, :len(n)] = np.frombuffer(n, dtype=np.uint8)
        lens = np.array([len(n) for n in names], dtype=np.int64)
        required = self.ndof > 0
        return table, lens, required

    def positions(self, values: np.ndarray, *, degrees: bool = True) -> np.ndarray:
        """Joint positions (T, J, 3) in ASF length units from AMC values (T, ncols)."""
        return self.kin.positions_from_channels(values, self.angle_cols, self.position_cols,
                                                add=True, degrees=degrees)


def _asf_lines(path: Path):
    """(line number, tokens) of every non-blank line; ``#`` comments, commas and parentheses
    removed; a UTF-8 byte-order mark (as some editors save) skipped. And the file's encoding
    (:func:`~.base.decode_text`)."""
    raw = _read_bytes(path, "skeleton file").removeprefix(codecs.BOM_UTF8)
    encoding = text_encoding(raw)
    text = raw.decode(encoding)
    out = []
    for n, line in enumerate(re.split(r"\r\n|\r|\n", text), 1):   # not splitlines(): it breaks at \f, \x85, ...
        line = line.split("#", 1)[0].replace(",", " ").replace("(", " ").replace(")", " ")
        toks = ascii_split(line)
        if toks:
            out.append((n, toks))
    return out, encoding


def _floats(path, toks, n, line, what):
    if len(toks) != n:
        raise FormatError(path, f"{what} needs {n} number(s), found {len(toks)}: "
                          f"{' '.join(toks)!r}", line=line)
    try:
        v = np.array([float(t) for t in toks])
    except ValueError:
        raise FormatError(path, f"{what} must be numbers, found {' '.join(toks)!r}",
                          line=line) from None
    if not np.isfinite(v).all():
        raise FormatError(path, f"{what} must be finite numbers, found {' '.join(toks)!r}",
                          line=line)
    return v


def _order(path, tok, line, what):
    o = tok.upper()
    if len(o) != 3 or set(o) != set("XYZ"):
        raise FormatError(path, f"{what} order must be a permutation of XYZ (e.g. 'XYZ'), found "
                          f"{tok!r}", line=line)
    return o


def _units_length(path, t, ln):
    v = float(_floats(path, t, 1, ln, "units length")[0])
    if v <= 0:
        raise FormatError(path, f"units length must be positive, found {t[0]!r}", line=ln)
    return v


def _units_angle(path, t, ln):
    if len(t) != 1 or t[0].lower() not in ("deg", "rad"):
        raise FormatError(path, f"units angle must be 'deg' or 'rad', found {' '.join(t)!r}",
                          line=ln)
    return t[0].lower()


def _root_order(path, t, ln):
    order = [x.upper() for x in t]
    if not order or any(x not in _ROOT_TOKENS for x in order) or len(set(order)) != len(order):
        raise FormatError(path, f"root order must list distinct tokens among "
                          f"{' '.join(_ROOT_TOKENS)}, found {' '.join(t)!r}", line=ln)
    return order


def _root_axis(path, t, ln):
    if len(t) != 1:
        raise FormatError(path, "root axis needs one order token such as XYZ", line=ln)
    return _order(path, t[0], ln, "root axis")


#: section -> field -> parser(path, tokens after the field name, line) of the value
_SECTION_FIELDS = {
    ":units": {"mass": lambda path, t, ln: _floats(path, t, 1, ln, "units mass")[0],
               "length": _units_length, "angle": _units_angle},
    ":root": {"order": _root_order, "axis": _root_axis,
              "position": lambda path, t, ln: _floats(path, t, 3, ln, "root position"),
              "orientation": lambda path, t, ln: _floats(path, t, 3, ln, "root orientation")},
}


def _section_fields(path, section: str, lines) -> dict:
    """The ``field value...`` lines of ``:units`` or ``:root``, each parsed by its parser."""
    parsers = _SECTION_FIELDS[section]
    out = {}
    for ln, t in lines:
        parse = parsers.get(t[0].lower())
        if parse is None:
            raise FormatError(path, f"unknown {section[1:]} field {t[0]!r}; {section} takes "
                              f"{', '.join(parsers)}", line=ln)
        out[t[0].lower()] = parse(path, t[1:], ln)
    return out


def _fields_on_line(path, section: str, line: int, toks: list[str]) -> list:
    """The fields written on a section keyword's own line, as the lines of one field each: a new field starts
    at every field name of the section (no value of ``:units`` or ``:root`` is one)."""
    names = _SECTION_FIELDS[section]
    if toks[0].lower() not in names:
        raise FormatError(path, f"unknown {section[1:]} field {toks[0]!r} after {section}; {section} takes "
                          f"{', '.join(names)}", line=line)
    out = []
    for t in toks:
        if t.lower() in names:
            out.append((line, [t]))
        else:
            out[-1][1].append(t)
    return out


def read_asf(path) -> AsfSkeleton:
    """Parse an ``.asf`` file; raises :class:`FormatError` with file and line on bad input."""
    path = Path(path)
    lines, encoding = _asf_lines(path)
    name = path.stem
    units = {"length": 1.0, "angle": "deg"}
    root = {"order": ["TX", "TY", "TZ", "RX", "RY", "RZ"], "axis": "XYZ",
            "position": np.zeros(3), "orientation": np.zeros(3)}
    bones: list[AsfBone] = []
    hierarchy: list[tuple[int, list[str]]] = []
    seen_sections = set()
    i = 0
    n = len(lines)
    while i < n:
        line, toks = lines[i]
        key = toks[0].lower()
        if not key.startswith(":"):
            raise FormatError(path, f"expected a section keyword such as :units, :root, "
                              f":bonedata or :hierarchy, found {toks[0]!r}", line=line)
        seen_sections.add(key)
        if key == ":name" and len(toks) > 1:
            name = " ".join(toks[1:])
            i += 1
            continue
        j = i + 1                  # the section's lines: up to the next keyword
        while j < n and not lines[j][1][0].startswith(":"):
            j += 1
        body = lines[i + 1:j]
        if len(toks) > 1 and key in _SECTION_FIELDS:   # ":units mass 1.0 length 0.45 angle deg" on one line
            body = _fields_on_line(path, key, line, toks[1:]) + body
        elif len(toks) > 1 and key in (":bonedata", ":hierarchy"):   # would be lost: its lines start below
            raise FormatError(path, f"{' '.join(toks[1:])!r} after {toks[0]}; the section's entries start on "
                              "the next line", line=line)
        if key in _SECTION_FIELDS:
            (units if key == ":units" else root).update(_section_fields(path, key, body))
        elif key == ":bonedata":
            bones = _parse_bones(path, body)
        elif key == ":hierarchy":
            hierarchy = body
        # else :version, :documentation, :skin, ...: skipped
        i = j
    end = lines[-1][0] if lines else None         # a missing section: where the file ends
    if ":bonedata" not in seen_sections:
        raise FormatError(path, "no :bonedata section before the end of the file; an Acclaim "
                          "skeleton needs :bonedata and :hierarchy", line=end)
    if ":hierarchy" not in seen_sections:
        raise FormatError(path, "no :hierarchy section before the end of the file; an Acclaim "
                          "skeleton needs one to connect the bones to the root", line=end)
    parent = _parse_hierarchy(path, hierarchy, bones)
    return AsfSkeleton(path=path, name=name, length_unit=units["length"],
                       angle_unit=units["angle"], root_order=root["order"],
                       root_axis=root["axis"], root_position=root["position"],
                       root_orientation=root["orientation"], bones=bones, parent=parent, encoding=encoding)


_BONE_KEYS = ("id", "name", "direction", "length", "axis", "dof", "limits", "bodymass",
              "cofmass")


def _parse_bones(path, lines) -> list[AsfBone]:
    bones: list[AsfBone] = []
    cur: dict | None = None
    names: dict[str, int] = {}
    k = 0
    while k < len(lines):
        ln, t = lines[k]
        key = t[0].lower()
        if key == "begin":
            if cur is not None:
                raise FormatError(path, f"'begin' inside the bone that starts on line "
                                  f"{cur['line']}: a bone block must close with 'end'", line=ln)
            cur = {"line": ln}
        elif key == "end":
            if cur is None:
                raise FormatError(path, "'end' without a matching 'begin' in :bonedata", line=ln)
            for req in ("name", "direction", "length", "axis"):
                if req not in cur:
                    raise FormatError(path, f"bone block lacks '{req}' (every bone needs name, "
                                      "direction, length and axis)", line=cur["line"])
            dof = cur.get("dof", [])
            lim = cur.get("limits")
            if lim is not None and len(lim) != len(dof):
                raise FormatError(path, f"bone {cur['name']!r} has {len(lim)} limits for "
                                  f"{len(dof)} dof; give one (min max) pair per dof",
                                  line=cur["limits_line"])
            d = cur["direction"]
            norm = float(np.linalg.norm(d))
            if norm == 0:
                raise FormatError(path, f"bone {cur['name']!r} has a zero direction vector",
                                  line=cur["direction_line"])
            bones.append(AsfBone(name=cur["name"], direction=d / norm, length=cur["length"],
                                 axis=cur["axis"][0], axis_order=cur["axis"][1], dof=dof,
                                 line=cur["line"], id=cur.get("id"), limits=lim or []))
            cur = None
        else:
            if cur is None:
                raise FormatError(path, f"{t[0]!r} outside a begin ... end bone block",
                                  line=ln)
            if key == "name":
                if len(t) != 2:
                    raise FormatError(path, "bone name must be one word", line=ln)
                nm = t[1]
                if nm == "root":
                    raise FormatError(path, "bone name 'root' is reserved for the root segment",
                                      line=ln)
                if nm in names:
                    raise FormatError(path, f"bone name {nm!r} is used twice (first on line "
                                      f"{names[nm]})", line=ln)
                names[nm] = ln
                cur["name"] = nm
            elif key == "id":
                cur["id"] = int(_floats(path, t[1:], 1, ln, "bone id")[0])
            elif key == "direction":
                cur["direction"] = _floats(path, t[1:], 3, ln, "bone direction")
                cur["direction_line"] = ln
            elif key == "length":
                v = float(_floats(path, t[1:], 1, ln, "bone length")[0])
                if v < 0:
                    raise FormatError(path, f"bone length must not be negative, found {t[1]!r}",
                                      line=ln)
                cur["length"] = v
            elif key == "axis":
                if len(t) != 5:
                    raise FormatError(path, "bone axis needs three angles and an order token, "
                                      f"e.g. 'axis 0 0 20 XYZ'; found {' '.join(t[1:])!r}",
                                      line=ln)
                cur["axis"] = (_floats(path, t[1:4], 3, ln, "bone axis"),
                               _order(path, t[4], ln, "bone axis"))
            elif key == "dof":
                dof = [x.lower() for x in t[1:]]
                for x in dof:
                    if x in _UNSUPPORTED_DOFS:
                        raise FormatError(path, f"dof {x!r} (bone translation or stretch) is not "
                                          "supported by this reader; only rx, ry, rz on bones",
                                          line=ln)
                    if x not in _BONE_DOFS:
                        raise FormatError(path, f"unknown dof {x!r}; expected rx, ry, rz",
                                          line=ln)
                if len(set(dof)) != len(dof):
                    raise FormatError(path, f"dof lists an axis twice: {' '.join(t[1:])!r}",
                                      line=ln)
                cur["dof"] = dof
            elif key == "limits":
                vals = t[1:]
                kk = k + 1
                while kk < len(lines) and lines[kk][1][0].lower() not in _BONE_KEYS + (
                        "begin", "end"):
                    vals += lines[kk][1]
                    kk += 1
                if len(vals) % 2:
                    raise FormatError(path, "limits must be (min max) pairs, found an odd count "
                                      "of values", line=ln)
                try:
                    fl = [float(v) for v in vals]
                except ValueError:
                    raise FormatError(path, f"limits must be numbers or inf/-inf, found "
                                      f"{' '.join(vals)!r}", line=ln) from None
                cur["limits"] = list(zip(fl[0::2], fl[1::2]))
                cur["limits_line"] = ln
                k = kk
                continue
            elif key in ("bodymass", "cofmass"):
                pass
            else:
                raise FormatError(path, f"unknown bone field {t[0]!r}; expected one of "
                                  f"{', '.join(_BONE_KEYS)}", line=ln)
        k += 1
    if cur is not None:
        raise FormatError(path, "bone block not closed with 'end' before the next section",
                          line=cur["line"])
    return bones


def _parse_hierarchy(path, lines, bones: list[AsfBone]) -> dict[str, str]:
    known = {b.name for b in bones}
    parent: dict[str, str] = {}
    parent_line: dict[str, int] = {}
    inside = False
    for ln, t in lines:
        key = t[0].lower()
        if key == "begin" and len(t) == 1:
            inside = True
            continue
        if key == "end" and len(t) == 1:
            inside = False
            continue
        if not inside:
            raise FormatError(path, f"hierarchy line outside begin ... end: {' '.join(t)!r}",
                              line=ln)
        if len(t) < 2:
            raise FormatError(path, f"hierarchy line names a parent but no child: {t[0]!r}",
                              line=ln)
        for nm in t:
            if nm != "root" and nm not in known:
                raise FormatError(path, f"hierarchy names bone {nm!r}, which is not defined in "
                                  ":bonedata", line=ln)
        for child in t[1:]:
            if child == "root":
                raise FormatError(path, "the root cannot be the child of a bone", line=ln)
            if child in parent:
                raise FormatError(path, f"bone {child!r} is given a second parent {t[0]!r} (its "
                                  f"parent is {parent[child]!r}, line {parent_line[child]})",
                                  line=ln)
            parent[child] = t[0]
            parent_line[child] = ln
    for b in bones:
        if b.name not in parent:
            raise FormatError(path, f"bone {b.name!r} is not attached in :hierarchy; every bone "
                              "needs a parent", line=b.line)
    # cycles: follow the parents from every bone
    for b in bones:
        chain = [b.name]
        cur = b.name
        while cur != "root":
            cur = parent[cur]
            if cur in chain:
                cyc = chain[chain.index(cur):] + [cur]
                raise FormatError(path, "hierarchy has a cycle: " + " <- ".join(cyc) + "; each "
                                  "bone must lead to the root", line=parent_line[cyc[-2]])
            chain.append(cur)
    return parent


# ---------------------------------------------------------------------------------------------
# AMC
# ---------------------------------------------------------------------------------------------

@dataclass
class AmcMotion:
    values: np.ndarray          # (T, ncols) float64, columns as AsfSkeleton.col0/ndof
    frame_numbers: np.ndarray   # (T,)
    degrees: bool


def read_amc(path, skeleton: AsfSkeleton) -> AmcMotion:
    """Parse an ``.amc`` against ``skeleton``; raises :class:`FormatError` on bad input."""
    path = Path(path)
    data = _read_bytes(path, "motion file")
    # a UTF-8 byte-order mark (as some editors save) is skipped; it would be read as the header's first token
    pos, line = (len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0), 1
    degrees = skeleton.angle_unit == "deg"
    n = len(data)
    while pos < n:                                  # header
        e = data.find(b"\n", pos)
        e = n if e < 0 else e
        s = data[pos:e].strip()
        if s and not s.startswith(b"#"):
            if not s.startswith(b":"):
                if not s[:1].isdigit():
                    raise FormatError(path, f"expected the first frame number after the "
                                      f"header, found {s.split()[0].decode('latin-1')!r}",
                                      line=line)
                break
            kw = s.split()[0].upper()
            if kw == b":DEGREES":
                degrees = True
            elif kw == b":RADIANS":
                degrees = False
        pos, line = e + 1, line + 1
    table, lens, required = skeleton.tables
    vals, fnum, flines, err = fp.scan(path, data, fp.scan_amc, pos, line, table, lens,
                                      skeleton.ndof, skeleton.col0, skeleton.ncols, required)
    if err[0] != fp.OK:
        raise _amc_error(path, data, skeleton, err, fnum)
    return AmcMotion(vals, fnum, degrees)


#: scanner error code -> message (fields: tok, the token at fault; a0, a1 the codes' values;
#: bone, the bone a0 as the .asf declares it; asf, bones)
_AMC_ERRORS = {
    fp.E_UNKNOWN_BONE: "bone {tok!r} is not in the skeleton {asf} (its bones: {bones}); the .amc "
                       "does not belong to this .asf, or the name is misspelt",
    fp.E_TOO_FEW: "too few values for {bone}: found {a1}; the file may be cut short or a value "
                  "is missing",
    fp.E_TOO_MANY: "{a1} values for {bone}: more than the declared dof; the .amc does not match "
                   "this .asf",
    fp.E_BAD_NUMBER: fp.BAD_NUMBER,
    fp.E_FRAME_SEQ: "frame number {a0} out of sequence: expected {a1} (frame numbers must rise "
                    "by 1)",
    fp.E_DUPLICATE_BONE: "bone {tok!r} appears twice in one frame (first on line {a1})",
    fp.E_FRAME_LINE_EXTRA: "frame number line has extra text {tok!r}; expected the frame number "
                           "alone",
    fp.E_BAD_FRAME_NUMBER: "{tok!r} is not a frame number (a line starting with a digit must "
                           "hold the frame number alone)",
    fp.E_KEYWORD: "header keyword {tok!r} inside the frame data; keywords belong before the "
                  "first frame",
    fp.E_BONE_BEFORE_FRAME: "bone line {tok!r} before the first frame number",
}


def _amc_error(path, data: bytes, sk: AsfSkeleton, err, fnum) -> FormatError:
    code, line, s, e, a0, a1 = (int(x) for x in err[:6])
    tok = data[s:e].decode(sk.encoding, errors="replace")
    if code == fp.E_MISSING_BONES:
        missing = ", ".join(_missing_bones(data, sk, line))
        nframe = int(fnum[a0]) if a0 < len(fnum) else a0 + 1
        if a1:
            return FormatError(path, f"file ends inside frame {nframe}, which lacks bone lines "
                               f"for {missing}: the file is truncated (last frame incomplete)",
                               line=line)
        return FormatError(path, f"frame {nframe} lacks bone lines for {missing} (every bone "
                           "with a dof needs one line per frame)", line=line)
    bone = ""
    if code in (fp.E_TOO_FEW, fp.E_TOO_MANY):
        if a0 == 0:
            bone = f"the root ({len(sk.root_order)} values: {' '.join(sk.root_order)})"
        else:
            bn = sk.bones[a0 - 1]
            if not bn.dof:
                return FormatError(path, f"{a1} value(s) for bone {tok!r}, whose dof is not "
                                   f"declared in {sk.path.name} (line {bn.line}): a bone "
                                   "without dof takes no values", line=line)
            bone = (f"bone {bn.name!r} ({len(bn.dof)} value{'s' if len(bn.dof) != 1 else ''}: "
                    f"dof {' '.join(bn.dof)} in {sk.path.name}, line {bn.line})")
    return FormatError(path, _AMC_ERRORS[code].format(
        tok=tok, a0=a0, a1=a1, bone=bone, asf=sk.path, bones=", ".join(sk.joint_names)),
        line=line)


def _missing_bones(data: bytes, sk: AsfSkeleton, frame_line: int) -> list[str]:
    lines = data.split(b"\n")
    have = set()
    for raw in lines[frame_line:]:
        t = raw.split(b"#", 1)[0].split()
        if not t:
            continue
        if t[0][:1].isdigit():
            break
        have.add(t[0].decode(sk.encoding, errors="replace"))
    return [n for n, d in zip(sk.joint_names, sk.ndof) if d > 0 and n not in have]


# ---------------------------------------------------------------------------------------------
# Reader
# ---------------------------------------------------------------------------------------------

def _candidates_roles(sk: AsfSkeleton) -> dict[str, list[int]]:
    idx = {n: i for i, n in enumerate(sk.joint_names)}

    def start(bone):          # the joint where a bone starts = its parent's end
        return int(sk.parents[idx[bone]]) if bone in idx else None

    def end(bone):
        return idx.get(bone)

    roles: dict[str, list[int]] = {"hip_center": [0]}
    for side, key in (("l", "left"), ("r", "right")):
        j = start(f"{side}femur")
        if j is None or j == 0:
            j = end(f"{side}hipjoint")
        if j is not None:
            roles[f"{key}_hip"] = [j]
        j = start(f"{side}humerus")
        if j is None:
            j = end(f"{side}clavicle")
        if j is not None:
            roles[f"{key}_shoulder"] = [j]
    for role, names in (("spine", ("lowerback", "upperback", "thorax")),
                        ("neck", ("lowerneck", "upperneck", "neck")),
                        ("head", ("head",))):
        for nm in names:
            if end(nm) is not None:
                roles[role] = [end(nm)]
                break
    return roles


class AsfAmcReader(ArchiveReader):
    """Acclaim ASF/AMC sequences from a folder tree or an ``index.csv``.

    Parameters
    ----------
    path : str or Path
        ``layout="folders"``: the folder holding ``[<split>/]<class>/<file>.amc`` with the
        subjects' ``.asf`` next to the motions or in a parent folder. ``layout="index"``: the
        folder holding ``index.csv`` (or the file itself).
    layout : {"folders", "index"}
        See :mod:`._layout`.
    units : {"m", "cm", "mm", "in"}
        Output unit; ASF lengths are converted (``v / length * 0.0254`` metres).
    label : {"folder", "name"}
        Folders layout: the class folder name, or the ``motion`` group of ``name_pattern``
        (HDM05: ``depositFloorR``). ``label_map`` (dict) then renames labels
        (e.g. ``HDM05_CLASSES``: folder ``"1"`` -> ``"depositFloorR"``).
    name_pattern : str
        Regular expression on the file name (without extension) giving ``subject`` (and
        ``motion``); default HDM05's ``HDM_<subject>_<motion>_<take>_<rate>``.
    skeleton_name : str
        Folders layout (and index rows without a ``skeleton`` column): the ``.asf`` file name for
        a motion, formatted with the groups of ``name_pattern`` (index layout: ``subject`` only,
        after trying ``<subject>.asf`` and the only ``.asf`` of the folder); default
        ``"{prefix}_{subject}.asf"`` (HDM05: ``HDM_bd.asf``).
    center, roles : optional
        Override the hip centre (default: the root) and the body-part roles (default: from
        the bone names).
    frame_rate : float, optional
        Frames per second, recorded in ``info.extra``; by default taken from the ``rate`` group
        of ``name_pattern`` when every file has the same one (HDM05: 120).

    Notes
    -----
    ``info.extra`` holds ``subject_names`` (sorted, when subjects are not numbers; the subject
    of a sequence is its index), the skeleton file of every subject, every subject's bone
    lengths in the output unit, and ``frame_rate``. All ``.asf`` files are read and checked when
    the reader is created (they must share the bones and hierarchy of the first one); motions
    are read one at a time by :meth:`sequences`, in sorted id order.
    """

    source = "asf-amc"
    ext = ".amc"

    def __init__(self, path, *, layout: str = "folders", units: str = "m",
                 label: str = "folder", label_map: dict | None = None,
                 name_pattern: str = HDM_PATTERN, skeleton_name: str = "{prefix}_{subject}.asf",
                 center=None, roles: dict | None = None, frame_rate: float | None = None):
        super().__init__()
        self.units = one_of("units", units, tuple(UNITS))
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(skeleton_name) if f is not None]
            if not all(f.isidentifier() for f in fields):
                raise ValueError("a field in braces must be a group name")
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"skeleton_name is not a valid name template ({exc}); write a file "
                             "name with groups of name_pattern in braces, such as "
                             "'{prefix}_{subject}.asf'") from None
        self._skeleton_fields = fields
        if frame_rate is not None and not (isinstance(frame_rate, (int, float))
                                           and not isinstance(frame_rate, bool)
                                           and 0 < frame_rate < float("inf")):
            raise ValueError(f"frame_rate must be a positive number of frames per second, got "
                             f"{frame_rate!r}")
        self._open(path, layout=layout, label=label, label_map=label_map,
                   name_pattern=name_pattern)
        self._skel_cache: dict[Path, AsfSkeleton] = {}
        self._skel_of: dict[str, Path] = {}
        by_subject: dict[str, Path] = {}
        for e in self._entries:
            p = self._find_skeleton(e, skeleton_name)
            self._skel_of[e.id] = p
            first_of = by_subject.setdefault(e.subject_name, p)
            if p != first_of and not _same_skeleton(self._skeleton(p), self._skeleton(first_of)):
                # the store records one skeleton (and bone lengths) per subject: motions measured on two
                # different ones would be mixed under it
                raise FormatError(p, f"a second skeleton of subject {e.subject_name!r} (for {e.path.name}) that "
                                     f"differs from {first_of}; one subject has one skeleton: remove the copy or "
                                     f"make it equal to the other")
        first = self._skeleton(self._skel_of[self._entries[0].id])
        for p in sorted(set(self._skel_of.values())):
            sk = self._skeleton(p)
            check_joint_layout(p, sk.joint_names[1:], sk.parents,
                               (first.path, first.joint_names[1:], first.parents), "bones")
        if frame_rate is None:
            rates = {e.match.get("rate") for e in self._entries if e.match}
            if len(rates) == 1 and None not in rates:
                frame_rate = float(rates.pop())
        to_out = INCH / UNITS[units]
        lengths = {s: (self._skeleton(p).lengths / self._skeleton(p).length_unit * to_out)
                   .round(6).tolist() for s, p in sorted(by_subject.items())}
        # the hip centre is the root unless given (even when roles name another hip_center)
        self._describe(first.joint_names, units=units, center=(0,) if center is None else center,
                       roles=roles, found_roles=_candidates_roles(first),
                       extra={"frame_rate": frame_rate,
                              "skeletons": {s: str(p) for s, p in sorted(by_subject.items())},
                              "bone_lengths": lengths, "parents": first.parents.tolist(),
                              "layout": layout})

    def _skeleton(self, p: Path) -> AsfSkeleton:
        sk = self._skel_cache.get(p)
        if sk is None:
            sk = self._skel_cache[p] = read_asf(p)
        return sk

    def _find_skeleton(self, e: Entry, skeleton_name: str) -> Path:
        if e.skeleton is not None:
            return e.skeleton
        names = []
        groups = dict(e.match or {})
        groups.setdefault("subject", e.subject_name)
        unknown = [f for f in self._skeleton_fields if f not in groups]
        if not unknown:
            names.append(skeleton_name.format(**groups))
        elif e.match is not None:          # folders layout: every group must be there
            raise ValueError(f"skeleton_name names {{{unknown[0]}}}, which is not a group of "
                             f"name_pattern (groups: {', '.join(groups)})")
        if e.match is None:
            names.append(f"{e.subject_name}.asf")
        folder = e.path.parent
        while True:
            for nm in names:
                if (folder / nm).is_file():
                    return folder / nm
            if folder == self.root or self.root not in folder.parents:
                break
            folder = folder.parent
        if e.match is None:
            asfs = sorted(e.path.parent.glob("*.asf"))
            if len(asfs) == 1:
                return asfs[0]
        where = f"next to it or in a parent folder up to {self.root}"
        if e.index_line is not None:
            raise FormatError(self.root / "index.csv", f"no skeleton for {e.path.name} (subject "
                              f"{e.subject_name!r}): none of {', '.join(names)} {where}; add a "
                              "'skeleton' column", line=e.index_line)
        raise FormatError(e.path, f"no skeleton file {' or '.join(names)} for subject "
                          f"{e.subject_name!r} {where}; put the subject's .asf there or pass "
                          "skeleton_name")

    def read(self, e: Entry) -> np.ndarray | None:
        """(T, 3J) float32 positions of one entry, or None when the file has no frames."""
        sk = self._skeleton(self._skel_of[e.id])
        mo = read_amc(e.path, sk)
        if len(mo.values) == 0:
            return None
        X = sk.positions(mo.values, degrees=mo.degrees)
        X *= INCH / sk.length_unit / UNITS[self.units]
        with np.errstate(over="ignore"):   # a position beyond float32 is refused, naming the sequence, by the store
            return X.reshape(len(X), -1).astype(np.float32)

    def _frames(self, e: Entry) -> np.ndarray | str:
        frames = self.read(e)
        return f"{e.path} holds a header but no frames" if frames is None else frames


def open_hdm05(path, **kw) -> AsfAmcReader:
    """HDM05 (11-class folders): labels are the motion names of the file names."""
    kw.setdefault("label", "name")
    return AsfAmcReader(path, **kw)
