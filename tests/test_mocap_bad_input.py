"""Bad motion-capture input, table-driven: ``streamcov ingest skeleton --format asf-amc|bvh|c3d``.

Every case is a command a user could type, run in-process (tests/cli_cases.py): a bad file
gives exit 2 and one line ``streamcov ingest: error: <file>, line N: ...`` (binary C3D: the
file), a bad ``--option`` names the option as typed, never a traceback. When an archive
fails after some sequences were committed, the store is left without its completion marker:
``streamcov info`` exits 3 and says INCOMPLETE. Degenerate sequences follow the rule of every
reader (skipped, recorded, warned). The rules: docs/bad_input.md; the formats:
data/mocap_formats.md.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from c3d_bytes import c3d_bytes, damaged_parameter
from cli_cases import Case, assert_one_line_error, cli, run_case
from test_mocap_asf_amc import AMC, ASF
from test_mocap_bvh import ARM

pytestmark = pytest.mark.usefixtures("one_blas_thread")

# an ASF/AMC archive: three sequences in id order, the last one of subject cd
AMC_FILES = ("train/reach/HDM_ab_reach_001_120.amc", "train/wave/HDM_ab_wave_002_120.amc",
             "test/reach/HDM_cd_reach_003_120.amc")
BVH_FILES = ("train/reach/01_reach.bvh", "train/wave/01_wave.bvh", "test/reach/02_reach.bvh")
C3D_FILES = ("train/walk/01_walk.c3d", "train/run/01_run.c3d", "test/walk/02_walk.c3d")
MARKERS = ["LASI", "RASI", "LPSI", "RPSI", "C7"]


def write(root: Path, files: dict) -> Path:
    for name, content in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
    return root


def amc_archive(root: Path, last_amc: str = AMC, cd_asf: str = ASF, extra=None) -> Path:
    """Three motions (the last, of subject cd, is ``last_amc``); each class folder holds the
    .asf of its subjects (``cd_asf`` for cd)."""
    files = {AMC_FILES[0]: AMC, AMC_FILES[1]: AMC, AMC_FILES[2]: last_amc,
             "train/reach/HDM_ab.asf": ASF, "train/wave/HDM_ab.asf": ASF,
             "test/reach/HDM_cd.asf": cd_asf}
    return write(root, {**files, **(extra or {})})


def bvh_archive(root: Path, last: str = ARM, extra=None) -> Path:
    return write(root, {BVH_FILES[0]: ARM, BVH_FILES[1]: ARM, BVH_FILES[2]: last, **(extra or {})})


def trajectory(T: int, n: int = len(MARKERS), seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1500, 1500, (T, n, 3)).round(1)


def c3d_archive(root: Path, last: bytes | None = None, extra=None) -> Path:
    good = c3d_bytes(MARKERS, trajectory(12))
    return write(root, {C3D_FILES[0]: good, C3D_FILES[1]: good, C3D_FILES[2]: last or good,
                        **(extra or {})})


def ingest(fmt: str, archive, *options, chunk_frames: int = 1):
    """``ingest skeleton --format fmt`` of ``archive(tmp / "arch")`` into ``tmp / "s.zarr"``
    (one frame per chunk: every sequence before a failure is committed)."""
    def argv(tmp: Path):
        return ["ingest", "skeleton", "--format", fmt, archive(tmp / "arch"), tmp / "s.zarr",
                "--quiet", "--chunk-frames", chunk_frames,
                *[a for o in options for a in ("--option", o)]]
    return argv


def amc(old: str | None = None, new: str = "", *options, asf=(), **kw):
    """The last motion with ``old`` replaced by ``new``, its .asf with ``asf``: one (old, new)
    pair or a list of them."""
    assert old is None or old in AMC, old
    text = AMC if old is None else AMC.replace(old, new, 1)
    skel = ASF
    for a, b in [asf] if asf and isinstance(asf[0], str) else asf:
        assert a in skel, a
        skel = skel.replace(a, b, 1)
    return ingest("asf-amc", lambda d: amc_archive(d, text, skel, **kw), *options)


def bvh(old: str | None = None, new: str = "", *options, **kw):
    assert old is None or old in ARM, old
    return ingest("bvh", lambda d: bvh_archive(d, ARM if old is None else ARM.replace(old, new, 1),
                                                **kw), *options)


def c3d(last: bytes | None = None, *options, **kw):
    return ingest("c3d", lambda d: c3d_archive(d, last, **kw), *options)


def incomplete(committed: int):
    """The ingestion stopped after ``committed`` sequences: the store says INCOMPLETE."""
    def check(tmp: Path, err, out):
        rc, info_err, _ = cli("info", tmp / "s.zarr", "--json")
        assert rc == 3 and "INCOMPLETE" in info_err, (rc, info_err)
        assert f"({committed} sequences committed)" in info_err, info_err
    return check


def no_store(tmp: Path, err, out):
    """Refused when the archive was opened: nothing was written."""
    assert not (tmp / "s.zarr").exists()


def skipped(reason: str, n_sequences: int = 2):
    """Documented result: the sequence is skipped, recorded and warned; the others ingested."""
    def check(tmp: Path, err, out):
        rc, _, info = cli("info", tmp / "s.zarr", "--json")
        assert rc == 0 and f'"n_sequences": {n_sequences}' in info.replace("\n", ""), info
        assert re.search(reason, err), err
    return check


LAST_AMC = r"HDM_cd_reach_003_120\.amc, line "
ASF_CD = r"HDM_cd\.asf, line "
ASF_AMC = [
    # the skeleton (.asf), read when the archive is opened
    Case("asf-bone-missing-from-hierarchy", amc(asf=("    lower tip\n", "")),
         ASF_CD + r"36: bone 'tip' is not attached in :hierarchy; every bone needs a parent",
         check=no_store),
    Case("asf-hierarchy-names-undefined-bone", amc(asf=("    lower tip\n", "    lower tip wrist\n")),
         ASF_CD + r"47: hierarchy names bone 'wrist', which is not defined in :bonedata"),
    # one subject, two different skeletons (a copy per class folder, as HDM05 has them, one of them edited):
    # the store records one skeleton and its bone lengths per subject, and the motions would be mixed under it
    Case("asf-two-different-copies-of-a-subject", amc(extra={"train/wave/HDM_ab.asf": ASF.replace(
        "     length 0.5\n", "     length 0.6\n", 1)}),
         r"train/wave/HDM_ab\.asf: a second skeleton of subject 'ab' \(for HDM_ab_wave_002_120\.amc\) that differs "
         r"from \S+train/reach/HDM_ab\.asf; one subject has one skeleton", check=no_store),
    Case("amc-name-on-a-folder", amc(extra={"train/wave/HDM_ab_wave_009_120.amc/notes.txt": "x"}),
         r"train/wave/HDM_ab_wave_009_120\.amc: named like a \.amc file but not a file \(a folder\?\); rename or "
         r"remove it$", check=no_store),
    Case("asf-copies-differing-in-comments-only", amc(extra={"train/wave/HDM_ab.asf": "# a copy\n" + ASF}),
         r'"sequences": 3, ', rc=0),
    Case("asf-hierarchy-cycle", amc(asf=("    upper lower\n    lower tip\n", "    lower tip\n    tip lower\n")),
         ASF_CD + r"46: hierarchy has a cycle: lower <- tip <- lower"),
    Case("asf-bone-two-parents", amc(asf=("    lower tip\n", "    lower tip\n    root tip\n")),
         ASF_CD + r"48: bone 'tip' is given a second parent 'root' \(its parent is 'lower', line 47\)"),
    Case("asf-unknown-dof", amc(asf=("dof rx\n", "dof rw\n")), ASF_CD + r"33: unknown dof 'rw'; expected rx, ry, rz"),
    Case("asf-translation-dof", amc(asf=("dof rx\n", "dof rx tx\n")),
         ASF_CD + r"33: dof 'tx' \(bone translation or stretch\) is not supported"),
    Case("asf-bone-without-length", amc(asf=("     length 0.5\n", "")),
         ASF_CD + r"36: bone block lacks 'length' \(every bone needs name, direction, length and axis\)"),
    Case("asf-direction-two-numbers", amc(asf=("direction 2 0 0", "direction 2 0")),
         ASF_CD + r"30: bone direction needs 3 number\(s\), found 2"),
    Case("asf-direction-not-number", amc(asf=("direction 2 0 0", "direction 2 x 0")),
         ASF_CD + r"30: bone direction must be numbers, found '2 x 0'"),
    Case("asf-angle-unit", amc(asf=("angle deg", "angle grad")), ASF_CD + r"7: units angle must be 'deg' or 'rad', found 'grad'"),
    Case("asf-length-unit-zero", amc(asf=("length 0.0254", "length 0")), ASF_CD + r"6: units length must be positive, found '0'"),
    Case("asf-unknown-unit", amc(asf=("  mass 1.0\n", "  volume 1.0\n")),
         ASF_CD + r"5: unknown units field 'volume'; :units takes mass, length, angle"),
    Case("asf-root-order", amc(asf=("order TX TY TZ RX RY RZ", "order TX TY TQ RX RY RZ")),
         ASF_CD + r"11: root order must list distinct tokens among TX TY TZ RX RY RZ"),
    Case("asf-duplicate-bone-name", amc(asf=("name lower", "name upper")),
         ASF_CD + r"29: bone name 'upper' is used twice \(first on line 18\)"),
    Case("asf-end-without-begin", amc(asf=("  end\n  begin\n     id 3", "  end\n  end\n  begin\n     id 3")),
         ASF_CD + r"36: 'end' without a matching 'begin' in :bonedata"),
    Case("asf-no-hierarchy", amc(asf=(":hierarchy\n  begin\n    root upper\n    upper lower\n    lower tip\n  end\n", "")),
         ASF_CD + r"42: no :hierarchy section before the end of the file"),
    Case("asf-other-bones-than-first-subject", amc(asf=[("name tip", "name finger"), ("lower tip", "lower finger")]),
         r"HDM_cd\.asf: cannot share one joint layout with the other files: its bones \(upper, lower, finger\) "
         r"differ from those of .*HDM_ab\.asf \(upper, lower, tip\)"),
    Case("asf-subject-without-skeleton",
         ingest("asf-amc", lambda d: amc_archive(d, extra={"test/reach/HDM_ef_reach_004_120.amc": AMC})),
         r"HDM_ef_reach_004_120\.amc: no skeleton file HDM_ef\.asf for subject 'ef' next to it or in a parent "
         r"folder up to .*; put the subject's \.asf there or pass skeleton_name"),
    # the skeleton's sections, fields and bone blocks, each refusal at its line of the cd copy
    Case("asf-text-before-any-section", amc(asf=(":version 1.10", "version 1.10")),
         ASF_CD + r"2: expected a section keyword such as :units, :root, :bonedata or :hierarchy, found "
                  r"'version'$", check=no_store),
    Case("asf-root-position-infinite", amc(asf=("position 0 0 0", "position 0 inf 0")),
         ASF_CD + r"13: root position must be finite numbers, found '0 inf 0'$"),
    Case("asf-root-axis-three-tokens", amc(asf=("axis XYZ", "axis X Y Z")),
         ASF_CD + r"12: root axis needs one order token such as XYZ$"),
    Case("asf-bone-axis-order-not-permutation", amc(asf=("axis 0 0 90 XYZ", "axis 0 0 90 XYX")),
         ASF_CD + r"32: bone axis order must be a permutation of XYZ \(e\.g\. 'XYZ'\), found 'XYX'$"),
    Case("asf-bone-axis-without-order", amc(asf=("axis 0 0 90 XYZ", "axis 0 0 90")),
         ASF_CD + r"32: bone axis needs three angles and an order token, e\.g\. 'axis 0 0 20 XYZ'; found '0 0 90'$"),
    Case("asf-begin-inside-a-bone", amc(asf=("  end\n  begin\n     id 3", "  begin\n     id 3")),
         ASF_CD + r"35: 'begin' inside the bone that starts on line 27: a bone block must close with 'end'$"),
    Case("asf-field-outside-a-bone-block", amc(asf=("  end\n  begin\n     id 2", "  end\n  length 3\n  begin\n     id 2")),
         ASF_CD + r"27: 'length' outside a begin \.\.\. end bone block$"),
    Case("asf-unknown-bone-field", amc(asf=("     length 0.5\n", "     length 0.5\n     colour red\n")),
         ASF_CD + r"41: unknown bone field 'colour'; expected one of id, name, direction, length, axis, dof, "
                  r"limits, bodymass, cofmass$"),
    Case("asf-bone-not-closed-before-hierarchy", amc(asf=("  end\n:hierarchy", ":hierarchy")),
         ASF_CD + r"36: bone block not closed with 'end' before the next section$"),
    Case("asf-bone-name-two-words", amc(asf=("name lower", "name lower arm")), ASF_CD + r"29: bone name must be one word$"),
    Case("asf-bone-named-root", amc(asf=("name lower", "name root")),
         ASF_CD + r"29: bone name 'root' is reserved for the root segment$"),
    Case("asf-zero-direction", amc(asf=("direction 2 0 0", "direction 0 0 0")),
         ASF_CD + r"30: bone 'lower' has a zero direction vector$"),
    Case("asf-dof-axis-twice", amc(asf=("dof rx\n", "dof rx rx\n")), ASF_CD + r"33: dof lists an axis twice: 'rx rx'$"),
    Case("asf-limits-fewer-than-dof", amc(asf=("dof rx\n", "dof rx ry\n")),
         ASF_CD + r"34: bone 'lower' has 1 limits for 2 dof; give one \(min max\) pair per dof$"),
    Case("asf-limits-odd-count", amc(asf=("limits (-180.0 180.0)\n  end\n  begin\n     id 3",
                                          "limits (-180.0)\n  end\n  begin\n     id 3")),
         ASF_CD + r"34: limits must be \(min max\) pairs, found an odd count of values$"),
    Case("asf-limits-not-numbers", amc(asf=("limits (-180.0 180.0)\n  end\n  begin\n     id 3",
                                            "limits (-180.0 x)\n  end\n  begin\n     id 3")),
         ASF_CD + r"34: limits must be numbers or inf/-inf, found '-180\.0 x'$"),
    Case("asf-no-bonedata", amc(asf=(":bonedata\n", ":bones\n")),
         ASF_CD + r"48: no :bonedata section before the end of the file; an Acclaim skeleton needs :bonedata and "
                  r":hierarchy$"),
    Case("asf-hierarchy-line-outside-begin", amc(asf=(":hierarchy\n  begin\n", ":hierarchy\n")),
         ASF_CD + r"44: hierarchy line outside begin \.\.\. end: 'root upper'$"),
    Case("asf-hierarchy-parent-without-child", amc(asf=("    lower tip\n", "    lower tip\n    lower\n")),
         ASF_CD + r"48: hierarchy line names a parent but no child: 'lower'$"),
    Case("asf-root-as-a-child", amc(asf=("    lower tip\n", "    lower tip\n    tip root\n")),
         ASF_CD + r"48: the root cannot be the child of a bone$"),
    # the motions (.amc), read one at a time: a failure leaves an incomplete store
    Case("amc-bone-missing-from-skeleton", amc("upper 0 0 0", "elbow 0 0 0"),
         LAST_AMC + r"10: bone 'elbow' is not in the skeleton .*HDM_cd\.asf \(its bones: root, upper, lower, tip\)",
         check=incomplete(2)),
    Case("amc-too-few-values", amc("upper 0 0 90", "upper 0 90"),
         LAST_AMC + r"6: too few values for bone 'upper' \(3 values: dof rx ry rz in HDM_cd\.asf, line 16\): found 2",
         check=incomplete(2)),
    Case("amc-more-values-than-dof", amc("lower 90", "lower 90 5"),
         LAST_AMC + r"7: 2 values for bone 'lower' \(1 value: dof rx in HDM_cd\.asf, line 27\): more than the declared dof"),
    Case("amc-dof-not-declared", amc("lower 90\n", "lower 90\ntip 3\n"),
         LAST_AMC + r"8: 1 value\(s\) for bone 'tip', whose dof is not declared in HDM_cd\.asf \(line 36\)"),
    Case("amc-root-too-few", amc("root 1 2 3 0 0 0", "root 1 2 3"),
         LAST_AMC + r"9: too few values for the root \(6 values: TX TY TZ RX RY RZ\): found 3"),
    Case("amc-truncated-last-frame", ingest("asf-amc", lambda d: amc_archive(d, AMC.replace("lower 0\n", ""))),
         LAST_AMC + r"8: file ends inside frame 2, which lacks bone lines for lower: the file is truncated",
         check=incomplete(2)),
    Case("amc-truncated-inside-a-line",
         ingest("asf-amc", lambda d: amc_archive(d, AMC[:AMC.rindex("upper 0 0 0") + len("upper 0")])),
         LAST_AMC + r"10: too few values for bone 'upper'"),
    Case("amc-frame-missing-bone", amc("lower 90\n", ""), LAST_AMC + r"4: frame 1 lacks bone lines for lower"),
    Case("amc-frame-out-of-sequence", amc("\n2\n", "\n3\n"), LAST_AMC + r"8: frame number 3 out of sequence: expected 2"),
    Case("amc-not-a-number", amc("upper 0 0 90", "upper 0 abc 90"),
         LAST_AMC + r"6: value 'abc' is not a number \(expected a plain decimal such as -12\.5"),
    Case("amc-nan", amc("upper 0 0 90", "upper 0 nan 90"), LAST_AMC + r"6: value 'nan' is not a number"),
    Case("amc-decimal-comma", amc("upper 0 0 90", "upper 0 1,5 90"), LAST_AMC + r"6: value '1,5' is not a number"),
    Case("amc-double-sign", amc("upper 0 0 90", "upper 0 --1 90"), LAST_AMC + r"6: value '--1' is not a number"),
    Case("amc-out-of-range", amc("upper 0 0 90", "upper 0 1e999 90"),
         LAST_AMC + r"6: value '1e999' is out of range \(not finite\)"),
    Case("amc-bone-twice", amc("lower 90\n", "lower 90\nupper 0 0 1\n"),
         LAST_AMC + r"8: bone 'upper' appears twice in one frame \(first on line 6\)"),
    Case("amc-frame-line-extra-text", amc("\n2\n", "\n2 x\n"),
         LAST_AMC + r"8: frame number line has extra text 'x'; expected the frame number alone"),
    Case("amc-frame-number-not-integer", amc("\n2\n", "\n2.0\n"), LAST_AMC + r"8: '2\.0' is not a frame number"),
    Case("amc-keyword-in-frames", amc("\n2\n", "\n:DEGREES\n2\n"),
         LAST_AMC + r"8: header keyword ':DEGREES' inside the frame data"),
    Case("amc-no-frame-number-after-header", amc(":DEGREES\n1\n", ":DEGREES\nroot 0 0 0 0 0 0\n1\n"),
         LAST_AMC + r"4: expected the first frame number after the header, found 'root'"),
    # documented result: a header without frames is skipped and recorded
    Case("amc-header-only-skipped", ingest("asf-amc", lambda d: amc_archive(d, AMC[:AMC.index("1\n")])),
         r'"sequences": 2', rc=0, check=skipped(r"1 sequence\(s\) skipped \(HDM_cd_reach_003_120: .*holds a header but no frames")),
]

LAST_BVH = r"02_reach\.bvh, line "
BVH = [
    Case("bvh-truncated", ingest("bvh", lambda d: bvh_archive(d, ARM[:ARM.rindex("1 2 3")])),
         LAST_BVH + r"20: 'Frames: 3' \(line 17\) but the file holds 2 frame rows: the file is truncated",
         check=incomplete(2)),
    Case("bvh-row-too-few-values", bvh("0 0 0 90 0 0 0 0 0", "0 0 0 90 0 0 0 0"),
         LAST_BVH + r"20: frame row has 8 values, expected 9 \(the sum of the hierarchy's CHANNELS counts\)",
         check=incomplete(2)),
    Case("bvh-row-too-many-values", bvh("0 0 0 90 0 0 0 0 0", "0 0 0 90 0 0 0 0 0 7"),
         LAST_BVH + r"20: frame row has 10 values, expected 9"),
    Case("bvh-not-a-number", bvh("0 0 0 90 0 0 0 0 0", "0 0 0 9O 0 0 0 0 0"), LAST_BVH + r"20: value '9O' is not a number"),
    Case("bvh-inf", bvh("0 0 0 90 0 0 0 0 0", "0 0 0 inf 0 0 0 0 0"), LAST_BVH + r"20: value 'inf' is not a number"),
    Case("bvh-more-rows-than-frames", bvh("1 2 3 0 0 0 90 0 0\n", "1 2 3 0 0 0 90 0 0\n0 0 0 0 0 0 0 0 0\n"),
         LAST_BVH + r"22: more frame rows than 'Frames: 3' \(line 17\) declares"),
    Case("bvh-unknown-channel", bvh("Zrotation Xrotation Yrotation\n    End", "Zrotation Xrotation Wrotation\n    End"),
         LAST_BVH + r"9: unknown channel 'Wrotation'; expected Xposition, Yposition, Zposition, Xrotation"),
    Case("bvh-channel-count", bvh("CHANNELS 3 Zrotation", "CHANNELS 2 Zrotation"), LAST_BVH + r"9: CHANNELS says 2 but names 3"),
    Case("bvh-missing-brace", bvh("  JOINT elbow\n  {", "  JOINT elbow\n"),
         LAST_BVH + r"8: expected '\{' after 'elbow' \(line 6\), found 'OFFSET 1 0 0'"),
    # finite numbers whose positions overflow float32: named by file, frame and joint, the store left incomplete
    Case("bvh-offset-overflows", bvh("OFFSET 1 0 0\n    CHANNELS", "OFFSET 1e39 0 0\n    CHANNELS"),
         r"\S*02_reach\.bvh: frame 1, joint 'elbow': a coordinate computed from the file is inf, beyond float32's "
         r"range \(about 3\.4e38\); fix the file's offsets or values, or leave the sequence out; or leave out "
         r"the files that cannot be read: --on-error skip \(listed as skipped; what is stored is kept\)$",
         check=incomplete(2)),
    Case("bvh-offset-two-numbers", bvh("OFFSET 1 0 0\n    CHANNELS", "OFFSET 1 0\n    CHANNELS"),
         LAST_BVH + r"8: OFFSET needs 3 numbers, found 2"),
    Case("bvh-motion-before-hierarchy-closed", bvh("    }\n  }\n}\nMOTION", "    }\n  }\nMOTION"),
         LAST_BVH + r"15: MOTION before the hierarchy is closed: 1 '\}' missing"),
    Case("bvh-frames-not-integer", bvh("Frames: 3", "Frames: three"), LAST_BVH + r"17: frame count must be a non-negative integer"),
    Case("bvh-frame-time-zero", bvh("Frame Time: 0.01", "Frame Time: 0"), LAST_BVH + r"18: frame time must be positive"),
    Case("bvh-frame-time-infinite", bvh("Frame Time: 0.01", "Frame Time: inf"),
         LAST_BVH + r"18: frame time must be positive and finite \(seconds per frame\), found 'inf'$"),
    Case("bvh-not-bvh", bvh("HIERARCHY", "HIERARCHIE"), LAST_BVH + r"1: expected 'HIERARCHY' on the first line"),
    Case("bvh-header-cut", ingest("bvh", lambda d: bvh_archive(d, ARM[:ARM.index("MOTION")])),
         LAST_BVH + r"15: file ends early: expected ROOT or MOTION"),
    Case("bvh-joint-name-twice", bvh("JOINT elbow", "JOINT shoulder"),
         LAST_BVH + r"6: joint name 'shoulder' is used twice \(first on line 2\)"),
    Case("bvh-other-joints-than-first-file", bvh("JOINT elbow", "JOINT forearm"),
         r"02_reach\.bvh: cannot share one joint layout with the other files: its joints \(shoulder, forearm, "
         r"forearm_end\) differ from those of .*01_reach\.bvh"),
    # the hierarchy and the MOTION header, each refusal at its line of the last file
    Case("bvh-text-after-hierarchy", bvh("HIERARCHY", "HIERARCHY x"), LAST_BVH + r"1: unexpected 'x' after HIERARCHY$"),
    Case("bvh-root-without-name", bvh("ROOT shoulder", "ROOT"), LAST_BVH + r"2: ROOT needs a name$"),
    Case("bvh-no-root", bvh("ROOT shoulder", "JOINT shoulder"), LAST_BVH + r"2: expected ROOT, found 'JOINT'$"),
    Case("bvh-offset-misspelt", bvh("  OFFSET 0 0 0", "  OFSET 0 0 0"), LAST_BVH + r"4: expected OFFSET, found 'OFSET'$"),
    Case("bvh-offset-not-numbers", bvh("OFFSET 1 0 0\n    CHANNELS", "OFFSET 1 y 0\n    CHANNELS"),
         LAST_BVH + r"8: OFFSET values must be numbers, found '1 y 0'$"),
    Case("bvh-offset-infinite", bvh("OFFSET 1 0 0\n    CHANNELS", "OFFSET 1 inf 0\n    CHANNELS"),
         LAST_BVH + r"8: OFFSET values must be finite$"),
    Case("bvh-channels-misspelt", bvh("    CHANNELS 3", "    CHANELS 3"),
         LAST_BVH + r"9: expected CHANNELS after the OFFSET of 'elbow', found 'CHANELS'$"),
    Case("bvh-channels-without-count", bvh("CHANNELS 3 Zrotation", "CHANNELS Zrotation"),
         LAST_BVH + r"9: CHANNELS needs a count, e\.g\. 'CHANNELS 3 Zrotation Xrotation Yrotation'$"),
    Case("bvh-channel-twice", bvh("CHANNELS 3 Zrotation Xrotation Yrotation", "CHANNELS 3 Zrotation Xrotation Zrotation"),
         LAST_BVH + r"9: a channel is listed twice: 'Zrotation Xrotation Zrotation'$"),
    Case("bvh-joint-without-name", bvh("JOINT elbow", "JOINT"), LAST_BVH + r"6: JOINT needs a name$"),
    Case("bvh-end-site-misspelt", bvh("End Site", "End Sight"), LAST_BVH + r"10: expected 'End Site', found 'End Sight'$"),
    Case("bvh-text-after-closing-brace", bvh("    }\n  }\n}\nMOTION", "    }\n  } x\n}\nMOTION"),
         LAST_BVH + r"14: unexpected 'x' after '\}'$"),
    # the End Site of elbow is named elbow_end: a joint of that name, declared after it, would share its name
    Case("bvh-end-site-name-clash", bvh("    }\n  }\n}\nMOTION", "    }\n  }\n  JOINT elbow_end\n  {\n    OFFSET 0 1 0\n"
                                        "    CHANNELS 0\n  }\n}\nMOTION"),
         LAST_BVH + r"15: End Site name 'elbow_end' \(its parent's name \+ '_end'\) clashes with a joint of that "
                    r"name; pass end_sites=False$"),
    Case("bvh-frames-line-misspelt", bvh("Frames: 3", "Frame: 3"),
         LAST_BVH + r"17: expected 'Frames: <count>' after MOTION, found 'Frame: 3'$"),
    Case("bvh-frame-time-line-misspelt", bvh("Frame Time: 0.01", "Frametime: 0.01"),
         LAST_BVH + r"18: expected 'Frame Time: <seconds>', found 'Frametime: 0\.01'$"),
    Case("bvh-frame-time-not-a-number", bvh("Frame Time: 0.01", "Frame Time: 0,01"),
         LAST_BVH + r"18: frame time must be a number, found '0,01'$"),
    # no CHANNELS at all: a frame row would have no column to fill, read when the sequence is
    Case("bvh-values-without-channels", bvh("CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation\n"
                                            "  JOINT elbow\n  {\n    OFFSET 1 0 0\n    CHANNELS 3 Zrotation Xrotation "
                                            "Yrotation", "CHANNELS 0\n  JOINT elbow\n  {\n    OFFSET 1 0 0\n    CHANNELS 0"),
         LAST_BVH + r"19: the hierarchy has no channels, yet values follow the header; or leave out the files that "
                    r"cannot be read: --on-error skip", check=incomplete(2)),
    Case("bvh-zero-frames-skipped", bvh("Frames: 3\nFrame Time: 0.01\n0 0 0 0 0 0 0 0 0\n0 0 0 90 0 0 0 0 0\n"
                                        "1 2 3 0 0 0 90 0 0\n", "Frames: 0\nFrame Time: 0.01\n"),
         r'"sequences": 2', rc=0, check=skipped(r"02_reach: .*declares 'Frames: 0'")),
]

LAST_C3D = r"02_walk\.c3d: "
C3D = [
    Case("c3d-not-c3d", c3d(b"not a c3d file at all" * 40),
         LAST_C3D + r"not a readable C3D file \(.*\); check that the file is complete and really C3D"),
    Case("c3d-cut-in-parameters", c3d(c3d_bytes(MARKERS, trajectory(12))[:700]), LAST_C3D + r"not a readable C3D file"),
    Case("c3d-truncated-data", c3d(c3d_bytes(MARKERS, trajectory(200))[:5000]),
         LAST_C3D + r"the file is truncated: its header declares 200 frames \(1 to 200\), the file holds "
         r"\d+", check=incomplete(2)),
    Case("c3d-unknown-units", c3d(c3d_bytes(MARKERS, trajectory(12), units="furlong")),
         LAST_C3D + r"POINT:UNITS is 'furlong'; expected one of"),
    Case("c3d-duplicate-labels", c3d(c3d_bytes(["LASI", "LASI", "LPSI", "RPSI", "C7"], trajectory(12))),
         LAST_C3D + r"POINT:LABELS names LASI more than once; marker names must be distinct"),
    Case("c3d-marker-missing-in-later-file", c3d(c3d_bytes(MARKERS[:-1], trajectory(12, 4))),
         LAST_C3D + r"lacks marker\(s\) C7 that the first file \(01_run\.c3d\) has; pass markers=\[\.\.\.\]",
         check=incomplete(2)),
    Case("c3d-no-markers", ingest("c3d", lambda d: c3d_archive(d, extra={
        C3D_FILES[1]: c3d_bytes(MARKERS, trajectory(12), extra_point_params={"ANGLES": MARKERS})})),
         r"01_run\.c3d: holds no marker points \(POINT:USED is 0 or every point is a model output\)"),
    Case("c3d-option-marker-not-in-file", c3d(None, 'markers=["LASI", "T10"]'),
         r'--option markers=\["LASI", "T10"\]: markers: \'T10\' not in .*01_run\.c3d \(the first file; its '
         r"markers: LASI, RASI, LPSI, RPSI, C7\)"),
    Case("c3d-option-markers-not-a-list", c3d(None, 'markers="LASI"'),
         r'--option markers="LASI": markers must be a non-empty list of distinct marker names'),
    Case("c3d-option-max-missing", c3d(None, "max_missing=2"), r"--option max_missing=2: max_missing must be a fraction in \[0, 1\]"),
    Case("c3d-option-min-frames", c3d(None, 'min_frames="x"'), r'--option min_frames="x": min_frames must be an integer >= 1'),
    Case("c3d-option-zeros-missing", c3d(None, 'zeros_missing="yes"'),
         r'--option zeros_missing="yes": zeros_missing must be true or false'),
    Case("c3d-option-units", c3d(None, 'units="in"'), r"--option units=\"in\": units must be one of 'm', 'cm', 'mm', got 'in'"),
    Case("c3d-missing-markers-skipped", c3d(c3d_bytes(MARKERS, trajectory(12), np.where(np.arange(12)[:, None] < 6, -1.0, 0.0)
                                                      * np.ones((12, len(MARKERS))))),
         r'"sequences": 2', rc=0, check=skipped(r"02_walk: 6 of 12 frames have a missing marker \(limit 20%\)")),
]

INDEX = "file,label,subject\n"
OPTIONS = [
    Case("option-unknown", amc(None, "", "unit=\"cm\""),
         r'--option unit="cm": \'unit\' is not an option of the asf-amc reader \(did you mean \'units\'\?\)'),
    Case("option-units-amc", amc(None, "", 'units="km"'), r"--option units=\"km\": units must be one of 'm', 'cm', 'mm', 'in', got 'km'"),
    Case("option-units-bvh", bvh(None, "", 'units="feet"'), r"--option units=\"feet\": units must be one of 'unknown', 'm'"),
    Case("option-name-pattern-invalid", amc(None, "", 'name_pattern="(?P<subject>"'),
         r'--option name_pattern="\(\?P<subject>": name_pattern is not a valid regular expression'),
    Case("option-name-pattern-no-subject", bvh(None, "", 'name_pattern="^(?P<who>\\\\d+)_.*$"'),
         r"--option name_pattern=.*: name_pattern needs a named group 'subject'"),
    Case("option-name-pattern-no-match", bvh(None, "", 'name_pattern="^s(?P<subject>\\\\d+)$"'),
         r"02_reach\.bvh: file name '02_reach' does not match name_pattern '\^s\(\?P<subject>.*\)\$'"),
    Case("option-layout", bvh(None, "", 'layout="flat"'), r"--option layout=\"flat\": layout must be one of 'folders', 'index', got 'flat'"),
    Case("option-label", amc(None, "", 'label="title"'), r"--option label=\"title\": label must be one of 'folder', 'name'"),
    Case("option-label-map", bvh(None, "", "label_map=5"), r"--option label_map=5: label_map must be a table"),
    # a key that matches no label (a typo left its class unrenamed) and an empty new label (a class named ""),
    # both accepted without a word before
    Case("option-label-map-unknown-key", bvh(None, "", 'label_map={reach="grab", weave="wave2"}'),
         r'^streamcov ingest: error: --option label_map=\{reach = "grab", weave = "wave2"\}: label_map: \'weave\' matches '
         r"no label of the archive \(its labels: 'reach', 'wave'\); check the key$", check=no_store),
    Case("option-label-map-unknown-key-index", bvh(None, "", 'layout="index"', 'label_map={"9"="nine"}', extra={
        "index.csv": INDEX + f"{BVH_FILES[0]},reach,1\n{BVH_FILES[1]},wave,2\n"}),
         r"label_map: '9' matches no label of the archive \(its labels: 'reach', 'wave'\); check the key$"),
    Case("option-label-map-empty-label", bvh(None, "", 'label_map={reach=""}'),
         r'--option label_map=\{reach = ""\}: label_map: \'reach\' = \'\': expected a non-empty class name'),
    Case("option-center-out-of-range", amc(None, "", "center=[99]"),
         r"--option center=\[99\]: center must be a non-empty list of distinct 0-based joint indices in \[0, 3\]"),
    Case("option-center-not-integer", bvh(None, "", "center=[0.5]"), r"--option center=\[0\.5\]: center must be"),
    Case("option-role-typo", bvh(None, "", "roles={hip_centre=[0]}"),
         r"--option roles=\{hip_centre = \[0\]\}: roles: unknown role 'hip_centre' \(did you mean 'hip_center'\?\)"),
    Case("option-role-out-of-range", amc(None, "", "roles={head=[7]}"),
         r"--option roles=\{head = \[7\]\}: roles: 'head' must list distinct 0-based joint indices in \[0, 3\]"),
    Case("option-roles-share-a-joint", amc(None, "", "roles={left_hip=[1], right_hip=[1]}"),
         r"--option roles=\{left_hip = \[1\], right_hip = \[1\]\}: roles: left_hip = \[1\] and right_hip = \[1\] "
         r"share joint 1; the body frame needs them apart \(the axis from one to the other would be zero\); give "
         r"each its own joints$"),
    Case("option-position-channels", bvh(None, "", 'position_channels="both"'),
         r"--option position_channels=\"both\": position_channels must be one of 'replace', 'add'"),
    Case("option-end-sites", bvh(None, "", 'end_sites="no"'), r"--option end_sites=\"no\": end_sites must be true or false"),
    Case("option-frame-rate", amc(None, "", "frame_rate=-120"), r"--option frame_rate=-120: frame_rate must be a positive number"),
    Case("option-skeleton-name-template", amc(None, "", 'skeleton_name="{subject.asf"'),
         r'--option skeleton_name="\{subject\.asf": skeleton_name is not a valid name template'),
    Case("option-skeleton-name-unknown-group", amc(None, "", 'skeleton_name="{person}.asf"'),
         r"--option skeleton_name=\"\{person\}\.asf\": skeleton_name names \{person\}, which is not a group of "
         r"name_pattern"),
    Case("option-roles-not-a-table", bvh(None, "", "roles=5"),
         r"--option roles=5: roles must be a table of role -> 0-based joints such as \{hip_center = \[0\], "
         r"head = \[15\]\}, got 5$", check=no_store),
    # layout="folders": where the files must lie
    Case("folders-no-files", ingest("bvh", lambda d: write(d, {"train/reach/notes.txt": "x"})),
         r"^streamcov ingest: error: \S+/arch: no \*\.bvh files found below this folder; expected "
         r"\[<split>/\]<class>/<file>\.bvh, or an index\.csv with layout='index'$", check=no_store),
    Case("folders-file-too-deep", bvh(None, "", extra={"train/reach/take2/03_reach.bvh": ARM}),
         r"^streamcov ingest: error: \S+/train/reach/take2/03_reach\.bvh: file is 3 folder levels below \S+/arch; the "
         r"folders layout is \[<split>/\]<class>/<file>\.bvh \(use an index\.csv and layout='index' for other "
         r"trees\)$", check=no_store),
    Case("folders-file-at-the-top", amc(extra={"HDM_ab_reach_009_120.amc": AMC}),
         r"^streamcov ingest: error: \S+/arch/HDM_ab_reach_009_120\.amc: file is 0 folder levels below \S+/arch; "
         r"the folders layout is \[<split>/\]<class>/<file>\.amc \(use an index\.csv"),
    # layout="index"
    Case("index-missing", bvh(None, "", 'layout="index"'), r"arch/index\.csv: index file not found; layout='index' needs"),
    Case("index-file-not-found", bvh(None, "", 'layout="index"', extra={"index.csv": INDEX + "gone.bvh,reach,1\n"}),
         r"index\.csv, line 2: sequence file 'gone\.bvh' not found in "),
    Case("index-wrong-extension", bvh(None, "", 'layout="index"', extra={"index.csv": INDEX + "notes.txt,reach,1\n",
                                                                           "notes.txt": "x"}),
         r"index\.csv, line 2: sequence file 'notes\.txt' does not end in \.bvh"),
    Case("index-empty-subject", bvh(None, "", 'layout="index"', extra={"index.csv": INDEX + f"{BVH_FILES[0]},reach,\n"}),
         r"index\.csv, line 2: column 'subject' is empty"),
    Case("index-duplicate-id", bvh(None, "", 'layout="index"', extra={
        "index.csv": "file,label,subject,id\n" + f"{BVH_FILES[0]},reach,1,x\n{BVH_FILES[1]},wave,1,x\n"}),
         r"index\.csv, line 3: sequence id 'x' is used twice \(first on line 2\)"),
    Case("index-missing-column", bvh(None, "", 'layout="index"', extra={"index.csv": "file,label\n01.bvh,walk\n"}),
         r"index\.csv, line 1: header lacks required column\(s\) subject"),
    Case("index-skeleton-not-found", amc(None, "", 'layout="index"', extra={
        "index.csv": "file,label,subject,skeleton\n" + f"{AMC_FILES[0]},reach,ab,gone.asf\n"}),
         r"index\.csv, line 2: skeleton file 'gone\.asf' not found in "),
    Case("index-no-skeleton-for-row", amc(None, "", 'layout="index"', extra={
        "index.csv": INDEX + f"{AMC_FILES[0]},reach,zz\n", "train/reach/other.asf": ASF}),
         r"index\.csv, line 2: no skeleton for HDM_ab_reach_001_120\.amc \(subject 'zz'\): none of .*; add a "
         r"'skeleton' column"),
]


@pytest.mark.parametrize("case", ASF_AMC, ids=lambda c: c.id)
def test_asf_amc(case, tmp_path):
    run_case(case, tmp_path)


@pytest.mark.parametrize("case", BVH, ids=lambda c: c.id)
def test_bvh(case, tmp_path):
    run_case(case, tmp_path)


@pytest.mark.parametrize("case", C3D, ids=lambda c: c.id)
def test_c3d(case, tmp_path):
    pytest.importorskip("ezc3d")
    run_case(case, tmp_path)


def test_c3d_file_that_crashes_ezc3d_stops_or_is_skipped(tmp_path):
    """A file on which ezc3d 1.7.2 dies of a segmentation fault (255 dimensions for POINT:RATE): the command, run
    in this process, gets one line on the file and exit 2; run again with --on-error skip, it resumes, skips the
    file and records it. ezc3d's own version decides which of its failures it is, hence the alternatives."""
    pytest.importorskip("ezc3d")
    argv = c3d(damaged_parameter(c3d_bytes(MARKERS, trajectory(12)), b"RATE", 3, 0xFF))(tmp_path)
    failure = LAST_C3D + r"(ezc3d crashed reading it \(signal SIGSEGV\)|not a readable C3D file)"
    assert_one_line_error(*cli(*argv)[:2], failure)
    incomplete(2)(tmp_path, "", "")
    rc, err, _ = cli(*argv, "--on-error", "skip")
    assert rc == 0 and "Traceback" not in err, err
    skipped(r"1 sequence.* skipped")(tmp_path, err, "")
    rc, _, info = cli("info", tmp_path / "s.zarr", "--json")
    assert rc == 0 and re.search(r"cannot be read: .*" + failure, info), info


def test_c3d_damaged_first_file_stops_or_is_skipped(tmp_path):
    """The archive's layout (markers, units) is the first readable file's: a damaged first file is that file's
    fault, named with exit 2 (it stopped even --on-error skip before, as the archive was opened); with --on-error
    skip it is skipped and recorded, the other files ingested."""
    pytest.importorskip("ezc3d")
    argv = ingest("c3d", lambda d: c3d_archive(d, extra={C3D_FILES[1]: b"not a c3d file at all" * 40}))(tmp_path)
    assert_one_line_error(*cli(*argv)[:2], r"01_run\.c3d: not a readable C3D file.*--on-error skip")
    rc, err, _ = cli(*argv, "--on-error", "skip")
    assert rc == 0 and "Traceback" not in err, err
    skipped(r"1 sequence.* skipped")(tmp_path, err, "")
    assert f"the store lists them (`streamcov info {tmp_path / 's.zarr'}`)" in err, err   # the store's path
    rc, _, info = cli("info", tmp_path / "s.zarr", "--json")
    assert rc == 0 and re.search(r"01_run\.c3d: not a readable C3D file", info), info
    # a later file that lacks a marker is named against the first file that read
    argv = ingest("c3d", lambda d: c3d_archive(d, c3d_bytes(MARKERS[:-1], trajectory(12, 4)), extra={
        C3D_FILES[1]: b"not a c3d file at all" * 40}))(tmp_path / "b")
    assert_one_line_error(*cli(*argv, "--on-error", "skip")[:2],
                          LAST_C3D + r"lacks marker\(s\) C7 that the first readable file \(01_walk\.c3d\) has")


def test_c3d_without_ezc3d_is_one_line_and_no_store(tmp_path, monkeypatch):
    """Without the mocap extra, --format c3d says what to install, exit 2, before a store is made (ezc3d
    is looked up, not imported, in the reading process: the flag stands for an environment without it)."""
    from streamcov.data.readers import c3d as c3d_module

    monkeypatch.setattr(c3d_module, "HAVE_EZC3D", False)
    argv = c3d()(tmp_path)
    # said as it is, not as a fault of "the default options"
    assert_one_line_error(*cli(*argv)[:2], r"ingest: error: --format c3d reads files with the 'ezc3d' package, "
                                           r"which is not installed: pip install 'streamcov\[mocap\]'")
    no_store(tmp_path, "", "")


@pytest.mark.parametrize("case", OPTIONS, ids=lambda c: c.id)
def test_options_and_index_layout(case, tmp_path):
    run_case(case, tmp_path)
