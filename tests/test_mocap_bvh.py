"""BVH: closed forms, channel orders, round trips through text, bad input."""
import re

import numpy as np
import pytest

from streamcov.data.readers.base import FormatError
from streamcov.data.readers.bvh import BvhReader, bvh_positions, read_bvh_header, read_bvh_motion
from streamcov.data.readers.kinematics import bone_lengths, euler_matrix, forward_kinematics

ARM = """\
HIERARCHY
ROOT shoulder
{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
  JOINT elbow
  {
    OFFSET 1 0 0
    CHANNELS 3 Zrotation Xrotation Yrotation
    End Site
    {
      OFFSET 1 0 0
    }
  }
}
MOTION
Frames: 3
Frame Time: 0.01
0 0 0 0 0 0 0 0 0
0 0 0 90 0 0 0 0 0
1 2 3 0 0 0 90 0 0
"""
# lines 19, 20, 21 hold the frames

ARM_WANT = np.array([
    [[0, 0, 0], [1, 0, 0], [2, 0, 0]],
    [[0, 0, 0], [0, 1, 0], [0, 2, 0]],
    [[1, 2, 3], [2, 2, 3], [2, 3, 3]],
])


def write(tmp_path, text, name="01_reach.bvh", folder="train/reach"):
    d = tmp_path / folder
    d.mkdir(parents=True, exist_ok=True)
    p = d / name
    p.write_text(text)
    return p


def positions(path, **kw):
    h = read_bvh_header(path, end_sites=kw.pop("end_sites", True))
    return bvh_positions(h, read_bvh_motion(h), **kw)


def loc(path, line):
    return re.escape(f"{path}, line {line}: ")


def test_arm_closed_form(tmp_path):
    p = write(tmp_path, ARM)
    np.testing.assert_allclose(positions(p), ARM_WANT, atol=1e-12)
    r = BvhReader(tmp_path)
    (seq,) = list(r.sequences())
    assert r.info.joint_names == ["shoulder", "elbow", "elbow_end"]
    assert r.info.units == "unknown" and r.info.extra["frame_rate"] == 100.0
    assert (seq.id, seq.label, seq.split, seq.subject) == ("01_reach", "reach", "train", 1)
    np.testing.assert_allclose(seq.frames.reshape(3, 3, 3), ARM_WANT, atol=1e-6)
    h = read_bvh_header(p, end_sites=False)
    assert h.names == ["shoulder", "elbow"]


def rotation_file(channels, values):
    return f"""HIERARCHY
ROOT a
{{
  OFFSET 0 0 0
  CHANNELS 3 {' '.join(channels)}
  End Site
  {{
    OFFSET 1 0 0
  }}
}}
MOTION
Frames: 1
Frame Time: 0.5
{' '.join(str(v) for v in values)}
"""


def test_channel_order_zxy_vs_xyz(tmp_path):
    # the same angles (x = 90, y = 0, z = 90) in two channel orders
    zxy = write(tmp_path, rotation_file(["Zrotation", "Xrotation", "Yrotation"], [90, 90, 0]),
                "a.bvh")
    xyz = write(tmp_path, rotation_file(["Xrotation", "Yrotation", "Zrotation"], [90, 0, 90]),
                "b.bvh")
    # ZXY: Rz(90) Rx(90) Ry(0) x = Rz(90) x = y
    np.testing.assert_allclose(positions(zxy)[0, 1], [0, 1, 0], atol=1e-12)
    # XYZ: Rx(90) Ry(0) Rz(90) x = Rx(90) y = z
    np.testing.assert_allclose(positions(xyz)[0, 1], [0, 0, 1], atol=1e-12)


def random_bvh(rng, n_joints=8, n_frames=6, root_offset=(0, 0, 0)):
    """A random hierarchy (BVH text), its parents/offsets/channel orders and its rows."""
    parents = [-1] + [int(rng.integers(0, j)) for j in range(1, n_joints)]
    offsets = rng.normal(size=(n_joints, 3)) * 10
    offsets[0] = root_offset
    orders = ["".join(rng.permutation(list("XYZ"))) for _ in range(n_joints)]
    children = {j: [c for c in range(n_joints) if parents[c] == j] for j in range(n_joints)}
    ends = {j: rng.normal(size=3) * 5 for j in range(n_joints) if not children[j]}
    lines = ["HIERARCHY"]

    def emit(j, depth):
        pad = "  " * depth
        lines.append(f"{pad}{'ROOT' if j == 0 else 'JOINT'} j{j}")
        lines.append(pad + "{")
        lines.append(f"{pad}  OFFSET {' '.join(repr(float(v)) for v in offsets[j])}")
        ch = [f"{a}rotation" for a in orders[j]]
        if j == 0:
            ch = ["Xposition", "Yposition", "Zposition"] + ch
        lines.append(f"{pad}  CHANNELS {len(ch)} {' '.join(ch)}")
        for c in children[j]:
            emit(c, depth + 1)
        if j in ends:
            lines.extend([f"{pad}  End Site", pad + "  {",
                          f"{pad}    OFFSET {' '.join(repr(float(v)) for v in ends[j])}",
                          pad + "  }"])
        lines.append(pad + "}")

    emit(0, 0)
    order_visit = []

    def visit(j):
        order_visit.append(j)
        for c in children[j]:
            visit(c)

    visit(0)
    ang = rng.uniform(-180, 180, (n_frames, n_joints, 3))
    root = rng.normal(size=(n_frames, 3)) * 50
    rows = []
    for t in range(n_frames):
        row = list(root[t])
        for j in order_visit:
            row += list(ang[t, j])
        rows.append(" ".join(repr(float(v)) for v in row))
    lines += ["MOTION", f"Frames: {n_frames}", "Frame Time: 0.008333", *rows]
    return "\n".join(lines) + "\n", dict(parents=parents, offsets=offsets, orders=orders,
                                          ends=ends, ang=ang, root=root, visit=order_visit)


def test_round_trip_random_skeleton_matches_independent_kinematics(tmp_path):
    rng = np.random.default_rng(3)
    text, g = random_bvh(rng, n_joints=9, n_frames=5)
    p = write(tmp_path, text)
    P = positions(p, end_sites=False)
    h = read_bvh_header(p, end_sites=False)
    # file order = depth-first visit order; map back to our random joint numbering
    idx = [h.names.index(f"j{j}") for j in range(9)]
    P = P[:, idx]
    L = np.stack([euler_matrix(g["ang"][:, j], g["orders"][j]) for j in range(9)], axis=1)
    off = np.broadcast_to(g["offsets"], (5, 9, 3)).copy()
    off[:, 0] = g["root"]
    want = forward_kinematics(g["parents"], off, L, offset_frame="parent")
    np.testing.assert_allclose(P, want, atol=1e-9)


def plain_motion(path) -> np.ndarray:
    """The obvious reference: the lines after MOTION's two header lines, ``float()`` on every
    token."""
    with open(path) as fh:
        lines = fh.read().split("\n")
    start = lines.index("MOTION") + 3 if "MOTION" in lines else lines.index("MOTION\r") + 3
    return np.array([[float(t) for t in ln.split()] for ln in lines[start:] if ln.strip()])


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("style", ["repr", "fixed", "fixed-crlf-tabs"])
def test_motion_values_equal_plain_parser_on_real_looking_files(tmp_path, seed, style):
    # 'fixed': what exporters write (%.4f / %.6f, as in the benchmark's archives), with
    # the CR LF line ends and tabs of some tools; 'repr': every digit of the doubles
    rng = np.random.default_rng(seed)
    text, _ = random_bvh(rng, n_joints=int(rng.integers(2, 32)), n_frames=int(rng.integers(1, 200)))
    head, body = text.split("Frame Time: 0.008333\n")
    if style != "repr":
        fmt = "{:.4f}" if seed % 2 else "{:.6f}"
        sep = "\t" if style == "fixed-crlf-tabs" else " "
        body = "\n".join(sep.join(fmt.format(float(v)) for v in row.split())
                         for row in body.split("\n") if row) + "\n"
    text = head + "Frame Time: 0.008333\n" + body
    if style == "fixed-crlf-tabs":
        text = text.replace("\n", "\r\n")
    p = tmp_path / "x.bvh"
    p.write_bytes(text.encode())
    got = read_bvh_motion(read_bvh_header(p))
    want = plain_motion(p)
    assert got.shape == want.shape and got.tobytes() == want.tobytes()   # bit for bit, sign of 0


def test_read_scratch_gives_each_file_whatever_was_read_before(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from streamcov.data.readers.base import _read_scratch

    rng = np.random.default_rng(0)
    files = []
    for size in (3_000_001, 0, 17, 1_000_000, 1):       # big first: later reads reuse its buffer
        p = tmp_path / f"f{size}"
        p.write_bytes(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
        files.append(p)
    for p in files * 2:
        assert _read_scratch(p).tobytes() == p.read_bytes()
    with ThreadPoolExecutor(4) as pool:                 # one buffer per thread
        got = list(pool.map(lambda p: _read_scratch(p).tobytes(), files * 8))
    assert got == [p.read_bytes() for p in files * 8]
    with pytest.raises(FormatError, match=re.escape(f"{tmp_path / 'missing.bvh'}: cannot read "
                                                    "the file: No such file or directory")):
        _read_scratch(tmp_path / "missing.bvh")


def test_motion_values_parsed_twice_and_out_of_range(tmp_path):
    # tokens the scanner re-parses with float() (exponents, long mantissas), read from the
    # reused buffer, after a longer file has left other bytes in it
    write(tmp_path, ARM.replace("Frames: 3", "Frames: 40") + "0 0 0 90 0 0 0 0 0\n" * 37,
          name="00_long.bvh")
    tokens = ["1.5e-40", "-2.5E+3", "123456789012345678901", "0.1", "-0", "7", "3.0e1", "1e22",
              "+4.25"]
    p = write(tmp_path, ARM.replace("0 0 0 90 0 0 0 0 0", " ".join(tokens)))
    read_bvh_motion(read_bvh_header(tmp_path / "train/reach/00_long.bvh"))
    got = read_bvh_motion(read_bvh_header(p))
    want = plain_motion(p)
    assert got.tobytes() == want.tobytes() and got[1].tolist() == [float(t) for t in tokens]
    p = write(tmp_path, ARM.replace("0 0 0 90 0 0 0 0 0", "0 0 0 90 0 0 0 0 1e999"))
    with pytest.raises(FormatError, match=loc(p, 20) + r"value '1e999' is out of range"):
        read_bvh_motion(read_bvh_header(p))


def test_bone_lengths_preserved_in_every_frame_and_units(tmp_path):
    rng = np.random.default_rng(11)
    text, g = random_bvh(rng, n_joints=12, n_frames=40)
    p = write(tmp_path, text)
    h = read_bvh_header(p)
    P = bvh_positions(h, read_bvh_motion(h))
    want = np.linalg.norm(h.offsets, axis=1)
    want[h.parents < 0] = 0
    np.testing.assert_allclose(bone_lengths(P, h.parents), np.broadcast_to(want, (40, len(want))),
                               atol=1e-9)
    # cm -> metres
    (seq,) = list(BvhReader(tmp_path, units="cm").sequences())
    np.testing.assert_allclose(seq.frames.reshape(40, -1, 3), P / 100, rtol=1e-5, atol=1e-5)


def test_position_channels_replace_or_add(tmp_path):
    p = write(tmp_path, ARM.replace("  OFFSET 0 0 0\n", "  OFFSET 10 0 0\n", 1))
    np.testing.assert_allclose(positions(p), ARM_WANT, atol=1e-12)
    shifted = ARM_WANT + np.array([10, 0, 0])
    np.testing.assert_allclose(positions(p, position_channels="add"), shifted, atol=1e-12)


def test_bvhio_like_file_with_crlf_and_tabs(tmp_path):
    p = tmp_path / "x.bvh"
    p.write_bytes(ARM.replace("  ", "\t").replace("\n", "\r\n").encode())
    np.testing.assert_allclose(positions(p), ARM_WANT, atol=1e-12)


# --- bad input ------------------------------------------------------------------------------

def test_truncated_file(tmp_path):
    p = write(tmp_path, ARM[:ARM.rindex("1 2 3")])
    with pytest.raises(FormatError, match=loc(p, 20) + r"'Frames: 3' \(line 17\) but the file "
                       r"holds 2 frame rows: the file is truncated"):
        list(BvhReader(tmp_path).sequences())
    p = write(tmp_path, ARM[:ARM.rindex("1 2 3") + len("1 2 3")])
    with pytest.raises(FormatError, match=loc(p, 21) + r"frame row has 3 values, expected 9"):
        list(BvhReader(tmp_path).sequences())


def test_row_with_wrong_count_non_numeric_and_extra_rows(tmp_path):
    p = write(tmp_path, ARM.replace("0 0 0 90 0 0 0 0 0", "0 0 0 90 0 0 0 0 0 7"))
    with pytest.raises(FormatError, match=loc(p, 20) + r"frame row has 10 values, expected 9"):
        list(BvhReader(tmp_path).sequences())
    p = write(tmp_path, ARM.replace("0 0 0 90 0 0 0 0 0", "0 0 0 9O 0 0 0 0 0"))
    with pytest.raises(FormatError, match=loc(p, 20) + r"value '9O' is not a number"):
        list(BvhReader(tmp_path).sequences())
    p = write(tmp_path, ARM + "0 0 0 0 0 0 0 0 0\n")
    with pytest.raises(FormatError, match=loc(p, 22) + r"more frame rows than 'Frames: 3' "
                       r"\(line 17\) declares"):
        list(BvhReader(tmp_path).sequences())


@pytest.mark.parametrize("old,new,line,msg", [
    ("Zrotation Xrotation Yrotation\n    End", "Zrotation Xrotation Wrotation\n    End", 9,
     "unknown channel 'Wrotation'"),
    ("CHANNELS 3 Zrotation", "CHANNELS 2 Zrotation", 9, "CHANNELS says 2 but names 3"),
    ("  JOINT elbow\n  {", "  JOINT elbow\n", 8, "expected '{' after 'elbow' (line 6), found "
     "'OFFSET 1 0 0'"),
    ("OFFSET 1 0 0\n    CHANNELS", "OFFSET 1 0\n    CHANNELS", 8, "OFFSET needs 3 numbers, "
     "found 2"),
    ("    }\n  }\n}\nMOTION", "    }\n  }\nMOTION", 15, "MOTION before the hierarchy is "
     "closed: 1 '}' missing"),
    ("Frames: 3", "Frames: three", 17, "frame count must be a non-negative integer"),
    ("HIERARCHY", "HIERARCHIE", 1, "expected 'HIERARCHY' on the first line"),
    ("      OFFSET 1 0 0\n    }", "      OFFSET 1 0 0\n      CHANNELS 1 Xrotation\n    }", 13,
     "expected '}' closing the End Site"),
])
def test_hierarchy_errors(tmp_path, old, new, line, msg):
    assert old in ARM
    p = write(tmp_path, ARM.replace(old, new, 1))
    with pytest.raises(FormatError, match=loc(p, line) + re.escape(msg)):
        BvhReader(tmp_path)


def test_files_with_different_joints_and_zero_frames(tmp_path):
    write(tmp_path, ARM, "01_a.bvh")
    p = write(tmp_path, ARM.replace("elbow", "knee"), "02_b.bvh")
    with pytest.raises(FormatError, match=re.escape(f"{p}: cannot share one joint layout")):
        BvhReader(tmp_path)
    write(tmp_path, ARM[:ARM.index("Frames")] + "Frames: 0\nFrame Time: 0.01\n", "02_b.bvh")
    r = BvhReader(tmp_path)
    assert [s.id for s in r.sequences()] == ["01_a"]
    assert [s.id for s in r.skipped] == ["02_b"]


def test_roles_from_common_names(tmp_path):
    names = ["Hips", "LeftUpLeg", "RightUpLeg", "Spine", "Spine1", "Neck", "Head",
             "LeftShoulder", "LeftArm", "RightShoulder", "RightArm"]
    parent = {"LeftUpLeg": "Hips", "RightUpLeg": "Hips", "Spine": "Hips", "Spine1": "Spine",
              "Neck": "Spine1", "Head": "Neck", "LeftShoulder": "Spine1",
              "LeftArm": "LeftShoulder", "RightShoulder": "Spine1", "RightArm": "RightShoulder"}
    lines = ["HIERARCHY"]

    def emit(n):
        lines.extend([f"{'ROOT' if n == 'Hips' else 'JOINT'} {n}", "{", "OFFSET 0 1 0",
                      "CHANNELS 3 Zrotation Xrotation Yrotation"])
        for c in [c for c in names if parent.get(c) == n]:
            emit(c)
        lines.append("}")

    emit("Hips")
    lines += ["MOTION", "Frames: 1", "Frame Time: 0.1", " ".join(["0"] * 33)]
    write(tmp_path, "\n".join(lines) + "\n")
    r = BvhReader(tmp_path, end_sites=False)
    n = r.info.joint_names
    got = {k: [n[i] for i in v] for k, v in r.info.roles.items()}
    assert got == {"hip_center": ["Hips"], "left_hip": ["LeftUpLeg"], "right_hip": ["RightUpLeg"],
                   "spine": ["Spine1"], "neck": ["Neck"], "left_shoulder": ["LeftArm"],
                   "right_shoulder": ["RightArm"], "head": ["Head"]}
    assert r.info.center == (0,)


def test_on_error_skip_leaves_out_damaged_motion_but_not_a_read_error_of_the_system(tmp_path):
    """`on_error = "skip"` (streamcov.data.skeletons.ingest) records a file whose motion rows are damaged and
    reads the others; a file the system cannot read (here a folder in its place: an OSError with an errno, as
    an I/O error or a vanished drive gives) stops the reader even then."""
    write(tmp_path, ARM, "01_a.bvh")
    p = write(tmp_path, ARM, "02_b.bvh")
    write(tmp_path, ARM, "03_c.bvh")
    r = BvhReader(tmp_path)
    p.write_text(ARM.replace("0 0 0 90 0 0 0 0 0", "0 0 0 9O 0 0 0 0 0"))
    r.on_error = "skip"
    assert [s.id for s in r.sequences()] == ["01_a", "03_c"]
    assert [s.id for s in r.skipped] == ["02_b"]
    assert re.fullmatch(re.escape(f"cannot be read: {p}, line 20: ") + r".*value '9O' is not a number.*",
                        r.skipped[0].reason)
    p.unlink()
    p.mkdir()
    with pytest.raises(FormatError, match=re.escape(f"{p}: cannot read the file: ")) as info:
        list(r.sequences())
    assert not getattr(info.value, "skippable", False)


def test_on_error_skip_leaves_out_a_sequence_beyond_float32(tmp_path):
    """A motion whose positions overflow float32 (refused by the store as the sequence is written, after the
    reader) is the file's own fault too: skipped and recorded with ``on_error = "skip"``; the stop names the
    way to skip it."""
    from streamcov.data.skeletons import ingest
    from streamcov.errors import skip_hint

    write(tmp_path, ARM, "01_a.bvh")
    write(tmp_path, ARM.replace("1 2 3 0 0 0 90 0 0", "1e39 2 3 0 0 0 90 0 0"), "02_b.bvh")
    with pytest.raises(FormatError, match=r"^\S*02_b\.bvh: frame 3, joint 'shoulder': a coordinate computed from "
                                          r"the file is inf, beyond float32's range") as info:
        ingest(BvhReader(tmp_path), tmp_path / "s.zarr", progress=False)
    assert str(skip_hint(info.value, "--on-error skip")).endswith(
        "; or leave out the files that cannot be read: --on-error skip (listed as skipped; what is stored is kept)")
    store = ingest(BvhReader(tmp_path), tmp_path / "s.zarr", on_error="skip")
    assert store.ids() == ["01_a"]
    (skipped,) = store.attrs["skipped"]
    assert skipped["id"] == "02_b" and re.match(r"cannot be read: \S*02_b\.bvh: frame 3, joint 'shoulder': a coordinate computed",
                                                skipped["reason"])


def test_a_file_name_that_is_not_utf8_is_one_line(tmp_path, capsys):
    """A latin-1 name anywhere in the archive (its digest covers every file) was a traceback of ingestion."""
    import os
    import re

    from streamcov.cli import main

    write(tmp_path / "src", ARM, "01_reach.bvh", "train/reach")
    write(tmp_path / "src", ARM, "02_reach.bvh", "test/reach")
    with open(os.fsencode(tmp_path / "src" / "train" / "reach") + b"/03_caf\xe9.bvh", "w") as f:
        f.write(ARM)
    assert main(["ingest", "skeleton", "--format", "bvh", "--quiet", str(tmp_path / "src"),
                 str(tmp_path / "x.zarr")]) == 2
    err = capsys.readouterr().err.strip()
    assert re.fullmatch(r"streamcov ingest: error: \S+/src/train/reach/03_caf\\xe9\.bvh: its file or folder name "
                        r"is not UTF-8 \(ids, class names and the archive's digests, which cover every file under "
                        r"it, are UTF-8\); rename it, e\.g\. convmv -f latin1 -t utf8 -r --notest FOLDER, or move it out of "
                        r"the folder", err), err
    assert not (tmp_path / "x.zarr").exists()


def test_byte_order_mark_utf8_names_and_performer_prefixes(tmp_path):
    """A UTF-8 BOM (as editors save) was refused as 'not a BVH file'; joint names were decoded as Latin-1 (a UTF-8
    'ê' stored as two letters, a no-break space inside 'à' split the name); the files of two performers named
    Bob:shoulder and Alice:shoulder could not share one layout, with no option to get round it."""
    write(tmp_path, ARM.replace("shoulder", "Bob:shoulder").replace("elbow", "Bob:t\u00eate"), "01_a.bvh")
    (tmp_path / "train/reach/02_b.bvh").write_bytes(
        b"\xef\xbb\xbf" + ARM.replace("shoulder", "Alice:shoulder").replace("elbow", "Alice:t\u00eate").encode())
    r = BvhReader(tmp_path)
    assert r.info.joint_names == ["shoulder", "t\u00eate", "t\u00eate_end"] and r.info.center == (0,)
    for seq in r.sequences():
        np.testing.assert_allclose(seq.frames.reshape(3, 3, 3), ARM_WANT, atol=1e-6)
    # two performers' joints in one file stay as written: their bare names would be one name twice
    p = write(tmp_path / "two", ARM.replace("ROOT shoulder", "ROOT Bob:shoulder").replace("JOINT elbow", "JOINT Ann:shoulder"))
    assert read_bvh_header(p).names == ["Bob:shoulder", "Ann:shoulder", "Ann:shoulder_end"]
    assert BvhReader(tmp_path / "two").info.joint_names == ["Bob:shoulder", "Ann:shoulder", "Ann:shoulder_end"]
    # a name with a no-break space (UTF-8 'à' is C3 A0) is one name
    p = write(tmp_path / "nb", ARM.replace("elbow", "br\u00e0s"))
    assert read_bvh_header(p).names == ["shoulder", "br\u00e0s", "br\u00e0s_end"]


def test_linked_class_folders_are_read_and_loops_refused(tmp_path):
    """A class folder that is a link was left out of the store without a word (``Path.rglob`` does not enter
    linked folders), where a linked file was read; a link loop would read files twice."""
    from streamcov.data.readers import open_reader

    write(tmp_path / "src", ARM, "01_a.bvh", "run")
    write(tmp_path / "elsewhere", ARM.replace("1 2 3", "4 5 6"), "02_b.bvh", "walk")
    (tmp_path / "src" / "walk").symlink_to(tmp_path / "elsewhere" / "walk")
    r = open_reader("bvh", tmp_path / "src")
    assert [(s.id, s.label) for s in r.sequences()] == [("01_a", "run"), ("02_b", "walk")]
    digest = r.record["files"]
    (tmp_path / "elsewhere" / "walk" / "02_b.bvh").write_text(ARM)   # the store's digest covers the linked folder
    assert open_reader("bvh", tmp_path / "src").record["files"] != digest
    (tmp_path / "src" / "walk" / "loop").symlink_to(tmp_path / "src")
    with pytest.raises(FormatError, match=re.escape(f"{tmp_path / 'src' / 'walk' / 'loop'}: this folder is "
                                                    f"{tmp_path / 'src'} again, reached through a linked folder (a link "
                                                    "loop, or two links to one folder): its files would be read twice; "
                                                    "remove one link")):
        BvhReader(tmp_path / "src")
    (tmp_path / "src" / "walk" / "loop").unlink()
    (tmp_path / "src" / "run" / "03_c.bvh").symlink_to(tmp_path / "gone.bvh")
    with pytest.raises(FormatError, match=re.escape(f"{tmp_path / 'src' / 'run' / '03_c.bvh'}: named like a .bvh file "
                                                    "but a link to nothing; rename or remove it")):
        BvhReader(tmp_path / "src")


def test_folders_layout_refuses_mixed_depths_and_empty_names(tmp_path):
    """A file without a split folder beside files in split folders was read with no split (in no fold's rows), and
    a name_pattern group that matched nothing gave the class (or subject) "", which an index refuses."""
    write(tmp_path / "mixed", ARM, "01_a.bvh", "walk")
    write(tmp_path / "mixed", ARM, "02_b.bvh", "train/walk")
    with pytest.raises(FormatError, match=re.escape(f"{tmp_path / 'mixed' / 'walk' / '01_a.bvh'}: file is in a class "
                                                    f"folder directly below {tmp_path / 'mixed'}, but train/walk/02_b.bvh "
                                                    "is in a split folder; put every file in <split>/<class>/ or every "
                                                    "file in <class>/")):
        BvhReader(tmp_path / "mixed")
    p = write(tmp_path / "empty", ARM, "01.bvh", "walk")
    with pytest.raises(FormatError, match=re.escape(f"{p}: the 'motion' group of name_pattern '(?P<subject>[0-9]+)"
                                                    "(?P<motion>.*)' matches nothing in the file name '01'; a class name "
                                                    "cannot be empty: rename the file or pass another name_pattern")):
        BvhReader(tmp_path / "empty", label="name", name_pattern=r"(?P<subject>[0-9]+)(?P<motion>.*)")
    with pytest.raises(FormatError, match=re.escape(f"{p}: the 'subject' group of name_pattern '(?P<subject>[a-z]*)"
                                                    "(?P<rest>.*)' matches nothing in the file name '01'; a subject name "
                                                    "cannot be empty")):
        BvhReader(tmp_path / "empty", name_pattern=r"(?P<subject>[a-z]*)(?P<rest>.*)")
