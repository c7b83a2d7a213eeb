"""Skeleton archive readers: real archives (skipped when absent) and every error path."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import scipy.io

from streamcov.data.readers import FORMATS, open_reader
from streamcov.errors import ConfigError, FormatError
from streamcov.data.readers.florence3d import Florence3DReader
from streamcov.data.readers.generic import GenericCSVReader, read_sequence_csv
from streamcov.data.readers.msr_action3d import MSRAction3DReader
from streamcov.data.readers.utkinect import UTKinectReader

from conftest import DATA  # noqa: E402  (../shared/data, or $STREAMCOV_DATA)
MSR = DATA / "msr_action3d"
FLORENCE = DATA / "florence3d"
UTK = DATA / "utkinect_action3d"


def _need(path: Path) -> Path:
    if not path.is_dir():
        pytest.skip(f"real dataset not available at {path}")
    return path


def _err(path, line=None, text=""):
    """Regex for a FormatError message: file name, line, then ``text``."""
    where = re.escape(Path(path).name) + (rf", line {line}: " if line is not None else r": ")
    return where + ".*" + text


def _read_all(src):
    seqs = list(src.sequences())
    return src, seqs


# --------------------------------------------------------------------------- real data

@pytest.fixture(scope="module")
def msr():
    return _read_all(open_reader("msr-action3d", _need(MSR)))


@pytest.fixture(scope="module")
def florence():
    return _read_all(open_reader("florence3d", _need(FLORENCE)))


@pytest.fixture(scope="module")
def utk():
    return _read_all(open_reader("utkinect", _need(UTK)))


def _check_common(src, seqs):
    ids = [s.id for s in seqs]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for s in seqs:
        assert s.frames.dtype == np.float32 and s.frames.ndim == 2
        assert s.frames.shape[1] == 3 * src.info.n_joints and len(s.frames) >= 2
        assert np.isfinite(s.frames).all()
        assert s.frames.any(axis=1).all()          # no all-zero frame left
        assert s.label in src.info.label_names
    assert len(src.info.joint_names) == src.info.n_joints
    assert all(0 <= c < src.info.n_joints for c in src.info.center)


@pytest.mark.realdata
def test_msr_counts(msr):
    src, seqs = msr
    _check_common(src, seqs)
    assert len(seqs) == 566                       # 567 files, a13_s09_e02 is all zeros
    assert [s.id for s in src.skipped] == ["a13_s09_e02"]
    assert "38 of its 38 frames have all joints at zero (no tracking data), leaving 0" in src.skipped[0].reason
    assert {s.label for s in seqs} == set(src.info.label_names)
    assert src.info.label_names == [f"a{i:02d}" for i in range(1, 21)]
    assert src.info.extra["action_names"]["a01"] == "high arm wave"
    assert {s.subject for s in seqs} == set(range(1, 11))
    # SOURCE.md: 1113 all-zero frames in 20 files, 38 of them in the skipped a13_s09_e02
    assert src.repairs["all_zero_frames_dropped"] == 1113 - 38
    assert sum(len(s.frames) for s in seqs) == 23478 - 1113
    by_id = {s.id: s for s in seqs}
    assert len(by_id["a07_s04_e01"].frames) == 45 - 36
    assert src.info.center == (6,) and src.info.joint_names[6] == "hip_center"


@pytest.mark.realdata
def test_msr_first_frame_equals_text(msr):
    src, seqs = msr
    lines = (MSR / "raw" / "a01_s01_e01_skeleton3D.txt").read_text().split("\n")[:20]
    expected = np.array([[float(v) for v in ln.split()[:3]] for ln in lines], dtype=np.float32)
    assert seqs[0].id == "a01_s01_e01" and seqs[0].label == "a01" and seqs[0].subject == 1
    np.testing.assert_array_equal(seqs[0].frames[0], expected.ravel())


@pytest.mark.realdata
def test_msr_body_is_upright(msr):
    src, seqs = msr
    head = src.info.joint_names.index("head")
    highest = []
    for s in seqs:
        f = s.frames[0].reshape(-1, 3)
        hip = f[list(src.info.center)].mean(axis=0)
        assert f[head, 1] > hip[1] + 0.3, s.id     # head at least 30 cm above the hip centre
        highest.append(np.argmax(f[:, 1]) == head)
    # hands are raised above the head in frame 0 of 3 arm-wave/golf sequences
    assert np.mean(highest) > 0.99 and highest[0]


@pytest.mark.realdata
def test_msr_cvpr12_subset():
    src = MSRAction3DReader(_need(MSR) / "raw", subset="cvpr12")
    ids = [s.id for s in src.sequences()]
    listed = (MSR / "raw" / "extras" / "files_used_in_cvpr12_paper.txt").read_text().split()
    assert len(ids) <= 557 and set(ids) <= set(listed)
    assert len(ids) == 557 and src.skipped == []  # the list leaves out a13_s09_e02
    assert src.info.extra["subset"] == "cvpr12"


@pytest.mark.realdata
def test_florence_counts(florence):
    src, seqs = florence
    _check_common(src, seqs)
    assert len(seqs) == 215 and src.skipped == [] and src.repairs == {}
    assert sum(len(s.frames) for s in seqs) == 4016
    assert {s.subject for s in seqs} == set(range(1, 11))
    counts = [sum(s.label == f"c{a}" for s in seqs) for a in range(1, 10)]
    assert counts == [24, 21, 22, 29, 26, 20, 20, 23, 30]
    assert src.info.extra["action_names"]["c1"] == "wave"
    assert src.info.center == (9, 12)
    assert seqs[0].id == "v001" and seqs[-1].id == "v215"


@pytest.mark.realdata
def test_florence_first_frame_and_axes(florence):
    src, seqs = florence
    cell = scipy.io.loadmat(FLORENCE / "raw" / "skeletal_data.mat")["skeletal_data"][0, 0]
    raw = cell["original_skeletal_data"][0, 0]                # rows: x, depth, vertical
    expected = np.stack([raw[0, :, 0], raw[2, :, 0], raw[1, :, 0]], axis=1)
    np.testing.assert_array_equal(seqs[0].frames[0], expected.astype(np.float32).ravel())
    assert seqs[0].subject == int(cell["subject"][0, 0][0, 0])
    for s in seqs:
        f = s.frames[0].reshape(-1, 3)
        assert np.argmax(f[:, 1]) == 0, s.id                   # head is the highest joint
        assert 2.0 < f[:, 2].min() and f[:, 2].max() < 3.7      # z is the depth (SOURCE.md)


@pytest.mark.realdata
def test_utkinect_counts(utk):
    src, seqs = utk
    _check_common(src, seqs)
    assert len(seqs) == 199
    assert [s.id for s in src.skipped] == ["s10_e02_carry"]
    assert "NaN" in src.skipped[0].reason
    assert len(src.info.label_names) == 10 and {s.label for s in seqs} == set(src.info.label_names)
    assert src.info.label_names[0] == "walk"
    assert {s.subject for s in seqs} == set(range(1, 11))
    # SOURCE.md: 542 repeated frame-id rows over all 20 files
    assert src.repairs["duplicate_frame_rows_dropped"] == 542
    assert src.info.center == (0,)


@pytest.mark.realdata
def test_utkinect_first_frame_equals_text(utk):
    src, seqs = utk
    by_id = {s.id: s for s in seqs}
    rows = [ln.split() for ln in (UTK / "raw" / "joints_s01_e01.txt").read_text().splitlines()]
    inside = [r for r in rows if 252 <= int(r[0]) <= 390]      # walk: 252 390
    expected = np.array([float(v) for v in inside[0][1:]], dtype=np.float32)
    np.testing.assert_array_equal(by_id["s01_e01_walk"].frames[0], expected)
    assert len(by_id["s01_e01_walk"].frames) == len({r[0] for r in inside})
    for s in seqs:
        f = s.frames[0].reshape(-1, 3)
        assert f[3, 1] > f[0, 1] + 0.3, s.id                   # head above the hip centre


@pytest.mark.realdata
def test_utkinect_modified_labels():
    src = UTKinectReader(_need(UTK), labels="modified")
    seqs = {s.id: s for s in src.sequences()}
    orig = {s.id: s for s in UTKinectReader(UTK).sequences()}
    assert len(seqs) == 199 and src.info.extra["labels"] == "modified"
    # walk end 192 -> 270 and push start 2556 -> 3556 (SOURCE.md)
    assert len(seqs["s01_e02_walk"].frames) > len(orig["s01_e02_walk"].frames)
    assert len(seqs["s03_e01_push"].frames) < len(orig["s03_e01_push"].frames)


# --------------------------------------------------------------------------- MSR synthetic

def _msr_text(frames: np.ndarray) -> str:
    """(T, 20, 3) -> file text with a confidence column."""
    lines = [f"{x:.6f} {y:.6f} {z:.6f} 1.000000" for x, y, z in frames.reshape(-1, 3)]
    return "\n".join(lines) + "\n"


@pytest.fixture
def msr_dir(tmp_path):
    rng = np.random.default_rng(0)
    good = rng.uniform(-1, 3, size=(4, 20, 3))
    good[1] = 0.0                                               # one all-zero frame
    (tmp_path / "a02_s03_e01_skeleton3D.txt").write_text(_msr_text(good))
    (tmp_path / "a01_s01_e01_skeleton3D.txt").write_text(_msr_text(good[[0, 2]]))
    (tmp_path / "a05_s02_e02_skeleton3D.txt").write_text(_msr_text(np.zeros((3, 20, 3))))
    (tmp_path / "notes.txt").write_text("not a skeleton file")
    return tmp_path, good


def test_msr_synthetic_repairs_and_skips(msr_dir):
    path, good = msr_dir
    src = open_reader("msr-action3d", path)
    seqs = list(src.sequences())
    assert [s.id for s in seqs] == ["a01_s01_e01", "a02_s03_e01"]
    assert [s.label for s in seqs] == ["a01", "a02"] and [s.subject for s in seqs] == [1, 3]
    np.testing.assert_allclose(seqs[1].frames, good[[0, 2, 3]].reshape(3, 60), atol=1e-6)
    assert src.repairs == {"all_zero_frames_dropped": 1}
    assert [s.id for s in src.skipped] == ["a05_s02_e02"]
    assert src.skipped[0].reason == ("3 of its 3 frames have all joints at zero (no tracking data), leaving 0; at "
                                     "least 2 valid frames are needed")
    # a second pass records the same, not twice as much
    list(src.sequences())
    assert src.repairs == {"all_zero_frames_dropped": 1} and len(src.skipped) == 1
    # one frame: said as such (it read "0 of 1 frames have all joints at zero")
    (path / "a06_s01_e01_skeleton3D.txt").write_text(_msr_text(good[:1]))
    src = open_reader("msr-action3d", path)   # reopened: the new file is listed
    list(src.sequences())
    assert [s.reason for s in src.skipped if s.id == "a06_s01_e01"] == ["the file holds 1 frame; at least 2 are needed"]


def _one_msr_file(tmp_path, lines):
    p = tmp_path / "a01_s01_e01_skeleton3D.txt"
    p.write_text("\n".join(lines) + "\n")
    return p


def _good_lines(n_frames=2):
    return [f"{0.1 * j:.3f} {0.2 * j:.3f} 2.5 1" for j in range(20 * n_frames)]


@pytest.mark.parametrize("line,bad,text", [
    (5, "0.1 0.2 2.5", "expected 4 values per line"),
    (7, "0.1 0.2 2.5 1 9", "expected 4 values per line"),
    (12, "0.1 abc 2.5 1", "'abc' is not a number"),
    (13, "0.1 1_000 2.5 1", "'1_000' is not a number"),
    (33, "0.1 nan 2.5 1", "non-finite"),
    (40, "0.1 0.2 inf 1", "non-finite"),
    # finite, but infinite once stored as float32
    (38, "1e39 0.2 2.5 1", r"value 1e\+39 in column 1 does not fit in float32"),
])
def test_msr_line_errors(tmp_path, line, bad, text):
    lines = _good_lines()
    lines[line - 1] = bad
    p = _one_msr_file(tmp_path, lines)
    with pytest.raises(FormatError, match=_err(p, line, text)):
        list(MSRAction3DReader(tmp_path).sequences())


def test_msr_line_numbers_count_blank_lines(tmp_path):
    lines = _good_lines()
    lines[10] = "0.1 0.2 x 1"
    lines.insert(3, "")                                         # the bad value is now on line 12
    p = _one_msr_file(tmp_path, lines)
    with pytest.raises(FormatError, match=_err(p, 12, "'x' is not a number")):
        list(MSRAction3DReader(tmp_path).sequences())


def test_msr_incomplete_frame(tmp_path):
    p = _one_msr_file(tmp_path, _good_lines() + ["1 2 3 1"])
    with pytest.raises(FormatError, match=_err(p, 41, "41 joint lines is not a multiple "
                                                              "of 20")):
        list(MSRAction3DReader(tmp_path).sequences())


def test_msr_not_text(tmp_path):
    p = tmp_path / "a01_s01_e01_skeleton3D.txt"
    p.write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(FormatError, match=_err(p, 1, "not a UTF-8/ASCII text file")):
        list(MSRAction3DReader(tmp_path).sequences())


def test_msr_open_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a directory"):
        MSRAction3DReader(tmp_path / "nope")
    with pytest.raises(FormatError, match="no aAA_sSS_eEE_skeleton3D.txt files found"):
        MSRAction3DReader(tmp_path)
    p = tmp_path / "a21_s01_e01_skeleton3D.txt"
    p.write_text("")
    with pytest.raises(FormatError, match=_err(p, None, "action id 21")):
        MSRAction3DReader(tmp_path)
    p.unlink()
    _one_msr_file(tmp_path, _good_lines())
    with pytest.raises(ValueError, match="subset must be one of"):
        MSRAction3DReader(tmp_path, subset="cvpr")
    with pytest.raises(FileNotFoundError, match="subset list not found"):
        MSRAction3DReader(tmp_path, subset="cvpr12")


def test_msr_a_sequence_named_twice_or_a_folder_is_refused(tmp_path):
    """Names that differ only in case are one sequence (the pattern ignores case): one file silently replaced
    the other, under the first's label; a folder named like a file was skipped without a word."""
    _one_msr_file(tmp_path, _good_lines())
    other = tmp_path / "A01_S01_E01_Skeleton3D.TXT"
    other.write_text("\n".join(_good_lines()))
    with pytest.raises(FormatError, match=r"a01_s01_e01_skeleton3D\.txt: the same sequence a01_s01_e01 as "
                                          r"A01_S01_E01_Skeleton3D\.TXT \(the names differ only in case\)"):
        MSRAction3DReader(tmp_path)
    other.unlink()
    (tmp_path / "a02_s01_e01_skeleton3D.txt").mkdir()
    with pytest.raises(FormatError, match=r"a02_s01_e01_skeleton3D\.txt: named like a skeleton file but not a file"):
        MSRAction3DReader(tmp_path)


def test_msr_cvpr12_list(tmp_path):
    _one_msr_file(tmp_path, _good_lines())
    (tmp_path / "a02_s01_e01_skeleton3D.txt").write_text("\n".join(_good_lines()))
    (tmp_path / "extras").mkdir()
    lst = tmp_path / "extras" / "files_used_in_cvpr12_paper.txt"
    lst.write_text("a01_s01_e01\na03_s01_e01")                 # no final newline, as released
    src = MSRAction3DReader(tmp_path, subset="cvpr12")
    assert [s.id for s in src.sequences()] == ["a01_s01_e01"]
    assert [s.id for s in src.skipped] == ["a03_s01_e01"]
    assert "no file" in src.skipped[0].reason
    lst.write_text("a01_s01_e01\n\nbogus\n")
    with pytest.raises(FormatError, match=_err(lst, 3, "expected a sequence id")):
        MSRAction3DReader(tmp_path, subset="cvpr12")


def test_msr_accepts_dataset_root(tmp_path):
    (tmp_path / "raw").mkdir()
    _one_msr_file(tmp_path / "raw", _good_lines())
    assert [s.id for s in MSRAction3DReader(tmp_path).sequences()] == ["a01_s01_e01"]


# --------------------------------------------------------------------------- UTKinect synthetic

def _utk_row(fid, rng):
    return f"{fid}  " + "  ".join(f"{v:.6f}" for v in rng.uniform(-1, 3, 60))


LABELS = """s01_e01
walk: 10 14
sitDown:  NaN NaN
standUp: 30 40
pickUp: 16 16
"""


@pytest.fixture
def utk_dir(tmp_path):
    rng = np.random.default_rng(1)
    rows = [_utk_row(f, rng) for f in (10, 10, 12, 14, 16, 18, 18, 18)]
    (tmp_path / "joints_s01_e01.txt").write_text("\n".join(rows) + "\n")
    (tmp_path / "joints_s02_e01.txt").write_text(rows[0] + "\n")   # not labelled
    (tmp_path / "actionLabel.txt").write_text(LABELS)
    (tmp_path / "extras").mkdir()
    (tmp_path / "extras" / "actionLabel_modified.txt").write_text(
        LABELS.replace("walk: 10 14", "walk: 12 18"))
    return tmp_path, rows


def test_utkinect_synthetic(utk_dir):
    path, rows = utk_dir
    src = open_reader("utkinect", path)
    seqs = list(src.sequences())
    assert [s.id for s in seqs] == ["s01_e01_walk"]
    assert seqs[0].label == "walk" and seqs[0].subject == 1
    # ids 10, 10, 12, 14: the repeated id keeps its first row
    expected = np.array([[float(v) for v in rows[i].split()[1:]] for i in (0, 2, 3)], np.float32)
    np.testing.assert_array_equal(seqs[0].frames, expected)
    assert src.repairs == {"duplicate_frame_rows_dropped": 3}
    skipped = {s.id: s.reason for s in src.skipped}
    assert set(skipped) == {"s01_e01_sitDown", "s01_e01_standUp", "s01_e01_pickUp"}
    assert "NaN" in skipped["s01_e01_sitDown"]
    assert "holds 0 valid frame" in skipped["s01_e01_standUp"]
    assert "holds 1 valid frame" in skipped["s01_e01_pickUp"]
    assert src.info.label_names == ["walk", "sitDown", "standUp", "pickUp"]
    assert src.info.extra["unlabelled_recordings"] == ["joints_s02_e01.txt"]
    mod = UTKinectReader(path, labels="modified")
    (walk,) = list(mod.sequences())
    assert len(walk.frames) == 4                                # ids 12, 14, 16, 18
    assert mod.repairs == {"duplicate_frame_rows_dropped": 3}


def test_utkinect_interval_past_the_recording_is_cut_and_recorded(utk_dir):
    """Bounds that reach past the recording's frame ids take the frames there are, and say so."""
    path, _ = utk_dir
    (path / "actionLabel.txt").write_text(LABELS.replace("walk: 10 14", "walk: 12 99999"))
    src = UTKinectReader(path)
    (walk,) = list(src.sequences())
    assert len(walk.frames) == 4                                # ids 12, 14, 16, 18
    assert src.repairs == {"duplicate_frame_rows_dropped": 3, "intervals_cut_to_the_recording": 1}


@pytest.mark.parametrize("line,bad,text", [
    (2, "12 1 2 3", "expected 61 values per line"),
    (3, "14 " + " ".join(["0.5"] * 59) + " zz", "column 61: 'zz' is not a number"),
    (4, "16 " + " ".join(["0.5"] * 59) + " NaN", "non-finite"),
    # a frame id is a frame number: said so for a fraction, a negative, NaN and one beyond float32 (it was "does
    # not fit in float32", as for a coordinate)
    *[(5, f"{fid} " + " ".join(["0.5"] * 60), rf"column 1 \(the frame id\) holds '{re.escape(fid)}', which is not a "
       r"frame number: a frame id is a non-negative integer such as 252; correct the row$")
      for fid in ("18.5", "-18", "nan", "1e300", "1e17")],
    (5, "18 " + " ".join(["0.5"] * 59) + " 1e300", r"value 1e\+300 in column 61 does not fit in float32"),
    # rows out of frame order (a reversed or shuffled file) were stored as they stood: time running backwards
    (4, "11 " + " ".join(["0.5"] * 60), r"frame id 11 comes after frame id 12 \(line 3\): the rows are not in "
                                        r"frame order"),
])
def test_utkinect_joint_file_errors(utk_dir, line, bad, text):
    path, rows = utk_dir
    rows = list(rows)
    rows[line - 1] = bad
    p = path / "joints_s01_e01.txt"
    p.write_text("\n".join(rows) + "\n")
    with pytest.raises(FormatError, match=_err(p, line, text)):
        list(UTKinectReader(path).sequences())


@pytest.mark.parametrize("text,line,msg", [
    ("s01_e01\nwalk 10 14\n", 2, "expected a recording line"),
    ("s01_e01\nwalk: 10\n", 2, "expected a recording line"),
    ("walk: 10 14\ns01_e01\n", 1, "interval line before any recording line"),
    ("s01_e01\nwalk: 14 10\n", 2, "the first frame id is after the last"),
    ("s01_e01\nwalk: 10 1x\n", 2, "must be two non-negative integer frame ids"),
    ("s01_e01\nwalk: NaN abc\n", 2, "must be two non-negative integer frame ids"),
    ("s01_e01\nwalk: 10 14\n\ns01_e01\n", 4, "recording s01_e01 appears twice"),
    ("s01_e01\nwalk: 10 14\nwalk: 16 18\n", 3, "action 'walk' appears twice"),
    ("s01_e01\nwalk: 10 14\ns03_e01\nwalk: 1 2\n", 3, "joints_s03_e01.txt is missing"),
    # a typo would be an eleventh class
    ("s01_e01\nwlak: 10 14\n", 2, r"unknown action 'wlak' \(did you mean 'walk'\?\); UTKinect-Action3D's actions "
                                   r"are walk, sitDown, .*clapHands"),
])
def test_utkinect_label_errors(utk_dir, text, line, msg):
    path, _ = utk_dir
    p = path / "actionLabel.txt"
    p.write_text(text)
    with pytest.raises(FormatError, match=_err(p, line, msg)):
        UTKinectReader(path)


def test_utkinect_open_errors(utk_dir, tmp_path):
    path, _ = utk_dir
    with pytest.raises(ValueError, match="labels must be one of"):
        UTKinectReader(path, labels="fixed")
    (path / "actionLabel.txt").write_text("\n\n")
    with pytest.raises(FormatError, match=_err(path / "actionLabel.txt", None,
                                                       "no recording line")):
        UTKinectReader(path)
    (path / "extras" / "actionLabel_modified.txt").unlink()
    with pytest.raises(FileNotFoundError, match="label file not found"):
        UTKinectReader(path, labels="modified")
    with pytest.raises(FileNotFoundError, match="not a directory"):
        UTKinectReader(path / "missing")


# --------------------------------------------------------------------------- Florence synthetic

def _florence_mat(path, cells):
    arr = np.empty((len(cells), 1), dtype=object)
    for i, c in enumerate(cells):
        arr[i, 0] = c
    scipy.io.savemat(path, {"skeletal_data": arr})


def _cell(T, action=1, subject=1, seed=0):
    raw = np.random.default_rng(seed).uniform(-1, 3, size=(3, 15, T))
    return {"original_skeletal_data": raw, "joint_locations": raw * 0,
            "time_stamps": np.arange(T)[None], "subject": subject, "action": action}


def test_florence_synthetic(tmp_path):
    cells = [_cell(4, action=3, subject=7), _cell(3, action=9, subject=2, seed=1), _cell(2)]
    cells[0]["original_skeletal_data"][:, :, 2] = 0.0           # one all-zero frame
    cells[2]["original_skeletal_data"][:, :, 1] = 0.0           # leaves a single frame
    p = tmp_path / "skeletal_data.mat"
    _florence_mat(p, cells)
    src = open_reader("florence3d", p)
    seqs = list(src.sequences())
    assert [s.id for s in seqs] == ["v001", "v002"]
    assert [s.label for s in seqs] == ["c3", "c9"] and [s.subject for s in seqs] == [7, 2]
    raw = cells[0]["original_skeletal_data"][:, :, [0, 1, 3]]
    expected = np.stack([raw[0], raw[2], raw[1]], axis=-1).transpose(1, 0, 2).reshape(3, 45)
    np.testing.assert_array_equal(seqs[0].frames, expected.astype(np.float32))
    assert src.repairs == {"all_zero_frames_dropped": 1}
    assert [s.id for s in src.skipped] == ["v003"]
    # no extras/action_names.mat here: the names of the dataset description are used
    assert src.info.extra["action_names"]["c2"] == "drink from a bottle"
    assert Florence3DReader(tmp_path).path == p


@pytest.mark.parametrize("mutate,msg", [
    (lambda c: c.pop("original_skeletal_data"), r"cell 2 of 'skeletal_data' \(video v002\): "
                                                "missing field 'original_skeletal_data'"),
    (lambda c: c.update(original_skeletal_data=np.zeros((3, 14, 5))),
     r"cell 2 .*must be a numeric 3 x 15 x T array, got shape \(3, 14, 5\)"),
    (lambda c: c.update(action=10), r"cell 2 .*action 10 is outside 1..9"),
    (lambda c: c.update(subject=np.array([1, 2])), r"cell 2 .*field 'subject' must be one integer"),
    (lambda c: c["original_skeletal_data"].__setitem__((1, 4, 0), np.nan),
     r"cell 2 .*non-finite value in frame 1, joint 5"),
])
def test_florence_cell_errors(tmp_path, mutate, msg):
    cells = [_cell(3), _cell(3, seed=1)]
    mutate(cells[1])
    p = tmp_path / "skeletal_data.mat"
    _florence_mat(p, cells)
    with pytest.raises(FormatError, match=_err(p, None, msg)):
        list(Florence3DReader(p).sequences())


def test_florence_file_errors(tmp_path):
    p = tmp_path / "skeletal_data.mat"
    scipy.io.savemat(p, {"other": np.zeros(3)})
    with pytest.raises(FormatError, match=_err(p, None, "variable 'skeletal_data' not "
                                                                "found")):
        list(Florence3DReader(p).sequences())
    scipy.io.savemat(p, {"skeletal_data": np.zeros((3, 15, 4))})
    with pytest.raises(FormatError, match=_err(p, None, "must be a cell array")):
        list(Florence3DReader(p).sequences())
    p.write_text("this is not a MATLAB file")
    with pytest.raises(FormatError, match=_err(p, None, "cannot read as a MATLAB")):
        list(Florence3DReader(p).sequences())
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no skeletal_data.mat here"):
        Florence3DReader(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="no such file"):
        Florence3DReader(tmp_path / "missing.mat")


# --------------------------------------------------------------------------- generic

def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def gen_dir(tmp_path):
    """The example of data/generic_format.md."""
    _write(tmp_path / "index.csv", "file,label,subject,split\n"
                                   "walk_01.csv,walk,1,train\n"
                                   "seqs/run_07.csv,run,2,test\n")
    _write(tmp_path / "walk_01.csv", "hip_x,hip_y,hip_z,head_x,head_y,head_z\n"
                                     "0.01,0.95,2.50,0.02,1.70,2.48\n"
                                     "0.02,0.95,2.49,0.03,1.71,2.47\n"
                                     "0.03,0.96,2.48,0.03,1.71,2.46\n")
    _write(tmp_path / "seqs" / "run_07.csv", "0.10,0.93,2.60,0.12,1.66,2.58\n"
                                             "0.15,0.92,2.55,0.18,1.65,2.52\n")
    return tmp_path


def test_generic_roundtrip(tmp_path):
    rng = np.random.default_rng(2)
    truth = {}
    rows = ["id,file,subject,label,split,notes"]
    for k in range(5):
        frames = rng.normal(size=(rng.integers(1, 9), 12)).astype(np.float32)
        name = f"part{k % 2}/seq{k}.csv"
        header = "a,b,c,d,e,f,g,h,i,j,k,l\n" if k % 2 else ""
        body = "\n\n".join(",".join(repr(float(v)) for v in fr) for fr in frames)
        _write(tmp_path / name, header + body + "\n")
        sid = f"s{4 - k}"
        truth[sid] = (frames, f"class{k % 3}", k + 1, "train" if k < 3 else "test")
        rows.append(f"{sid},{name}, {k + 1} ,class{k % 3},{truth[sid][3]},free text")
    _write(tmp_path / "index.csv", "\r\n".join(rows) + "\r\n")
    src = open_reader("generic", tmp_path, center=[1, 2], units="mm",
                      joint_names=["a", "b", "c", "d"])
    assert src.info.n_joints == 4 and src.info.center == (1, 2) and src.info.units == "mm"
    assert src.info.joint_names == ["a", "b", "c", "d"] and src.info.source == "generic"
    assert src.info.label_names == ["class0", "class1", "class2"]
    assert src.info.extra["splits"] == ["test", "train"] and len(src) == 5
    seqs = list(src.sequences())
    assert [s.id for s in seqs] == sorted(truth)
    for s in seqs:
        frames, label, subject, split = truth[s.id]
        assert (s.label, s.subject, s.split) == (label, subject, split)
        assert s.frames.dtype == np.float32
        np.testing.assert_array_equal(s.frames, frames)
    assert src.skipped == [] and src.repairs == {}


def test_generic_documented_example(gen_dir):
    src = open_reader("generic", gen_dir / "index.csv", units="m", joint_names=["hip", "head"])
    seqs = list(src.sequences())
    assert [(s.id, s.label, s.subject, s.split, s.frames.shape) for s in seqs] == [
        ("run_07", "run", 2, "test", (2, 6)), ("walk_01", "walk", 1, "train", (3, 6))]
    np.testing.assert_array_equal(seqs[1].frames[0], np.float32([0.01, 0.95, 2.50, 0.02, 1.70,
                                                                 2.48]))
    assert src.info.center == (0,) and src.info.extra["splits"] == ["test", "train"]
    assert GenericCSVReader(gen_dir).info.units == "unknown"
    assert GenericCSVReader(gen_dir).info.joint_names == ["joint0", "joint1"]


def test_generic_id_column_and_no_split(gen_dir):
    _write(gen_dir / "index.csv", " File , LABEL,subject,id\nwalk_01.csv,walk,1,\n"
                                  "seqs/run_07.csv,run,2,zz\n")
    src = GenericCSVReader(gen_dir)
    seqs = list(src.sequences())
    assert [(s.id, s.split) for s in seqs] == [("walk_01", None), ("zz", None)]
    assert src.info.extra["splits"] is None


def test_generic_missing_index(tmp_path):
    with pytest.raises(FormatError, match=_err(tmp_path / "index.csv", None,
                                                       "index file not found")):
        GenericCSVReader(tmp_path)


@pytest.mark.parametrize("index,line,msg", [
    ("file,label\nwalk_01.csv,walk\n", 1, "lacks required column.*subject"),
    ("\nfile,label,subject,Label\nwalk_01.csv,walk,1,x\n", 2, "column 'label' appears twice"),
    ("file,label,subject\nwalk_01.csv,walk,1,extra\n", 2, "row has 4 fields but the header has 3"),
    ("file,label,subject\nwalk_01.csv,walk\n", 2, "row has 2 fields"),
    ("file,label,subject\nwalk_01.csv,walk,1\n\nnope.csv,walk,2\n", 4,
     "sequence file 'nope.csv' not found"),
    ("file,label,subject\n,walk,1\n", 2, "column 'file' is empty"),
    ("file,label,subject\nwalk_01.csv,,1\n", 2, "column 'label' is empty"),
    ("file,label,subject\nwalk_01.csv,walk,S1\n", 2, "'subject' must be an integer below 2\\*\\*31 \\(stored as int32\\), got 'S1'"),
    ("file,label,subject\nwalk_01.csv,walk,1.0\n", 2, "'subject' must be an integer"),
    ("file,label,subject,split\nwalk_01.csv,walk,1,\n", 2, "column 'split' is empty"),
    # one recording under two labels, subjects or ids would be two samples (training rows among test ones)
    ("file,label,subject\nwalk_01.csv,walk,1\nwalk_01.csv,run,2\n", 3,
     r"sequence file 'walk_01\.csv' is listed twice \(first on line 2\); list each recording once"),
    ("file,label,subject,id\nwalk_01.csv,walk,1,a\n./walk_01.csv,walk,1,b\n", 3,
     r"sequence file '\./walk_01\.csv' is listed twice \(first on line 2\)"),
    ("file,label,subject\n", 1, "lists no sequences"),
    ('file,label,subject\n"walk_01.csv,walk,1\n', 2, "row has 1 fields"),  # unclosed quote
    ("file,label,subject\nwalk_01.csv,walk,1\nx,y," + "1" * 200_000 + "\n", 3,
     "not a valid CSV file: field larger than field limit"),
])
def test_generic_index_errors(gen_dir, index, line, msg):
    p = _write(gen_dir / "index.csv", index)
    with pytest.raises(FormatError, match=_err(p, line, msg)):
        GenericCSVReader(gen_dir)


def test_generic_empty_index(gen_dir):
    p = _write(gen_dir / "index.csv", "\n \n")
    with pytest.raises(FormatError, match=_err(p, None, "empty; expected a header row")):
        GenericCSVReader(gen_dir)


def test_generic_empty_first_sequence_is_skipped_and_recorded(gen_dir, tmp_path):
    """An empty file first in id order is skipped and recorded like any file with fewer than 2 distinct
    frames (docs/bad_input.md): the joint count comes from the first file that holds a data row (before:
    the whole ingestion was refused). Every file empty: nothing to ingest, refused."""
    from streamcov.data.skeletons import ingest

    _write(gen_dir / "seqs/run_07.csv", "a,b,c,d,e,f\n\n")
    src = GenericCSVReader(gen_dir)
    assert src.info.n_joints == 2
    store = ingest(src, tmp_path / "s.zarr")
    assert store.ids() == ["walk_01"] and [s["id"] for s in store.attrs["skipped"]] == ["run_07"]
    _write(gen_dir / "walk_01.csv", "hip_x,hip_y,hip_z,head_x,head_y,head_z\n")
    idx = gen_dir / "index.csv"
    with pytest.raises(FormatError, match=_err(idx, 3, r"run_07.csv \(id 'run_07'\) holds no frames, nor does any "
                                                       r"other listed file: there is nothing to ingest")):
        GenericCSVReader(gen_dir)


def test_generic_empty_later_sequence_is_skipped_and_recorded(gen_dir, tmp_path):
    """Any other file with fewer than 2 distinct frames follows the rule of every reader."""
    from streamcov.data.skeletons import ingest

    _write(gen_dir / "walk_01.csv", "a,b,c,d,e,f\n\n")
    store = ingest(GenericCSVReader(gen_dir), tmp_path / "s.zarr")
    assert "walk_01" not in store.ids()
    assert {s["id"]: s["reason"] for s in store.attrs["skipped"]}["walk_01"] == "no frames"


@pytest.mark.parametrize("text,line,msg", [
    ("1,2,3,4,5,6\n\n1,2,3,4,5\n", 3, "expected 6 values per line.*found 5"),
    ("1,2,3,4,5,6\n1,2,3,4,5,6,7,8,9\n", 2, "expected 6 values per line.*found 9"),
    ("1,2,3,4,5,6\n1,2,x3,4,5,6\n", 2, "column 3: 'x3' is not a number"),
    ("1,2,3,4,5,6\n1,2,,4,5,6\n", 2, "column 3: '' is not a number"),
    ("1,2,3,4,5,6\n1 2 3 4 5 6\n", 2, "expected 6 values per line.*found 1"),
    ("1,2,3,4,5,6\n\n1,2,3,nan,5,6\n", 3, "non-finite value nan in column 4"),
    ("1,2,3,4,5,6\n1,2,3,4,-inf,6\n", 2, "non-finite value -inf in column 5"),
    ("1,2,3,4,5,6\n1,2,3,4,5,1e300\n", 2, "does not fit in float32"),
    ("x,y,3,4,5,6\n1,2,3,4,5,6\n", 1, "first row mixes numbers and text"),
    # a first row of missing values was skipped as a header, the frame dropped without a word
    ("NA,NA,NA,NA,NA,NA\n1,2,3,4,5,6\n", 1, r"first row holds only empty or missing values \('NA,NA,NA"),
    (",,,,,\n1,2,3,4,5,6\n", 1, r"first row holds only empty or missing values \(',,,,,'\): neither a header"),
    ("a,b,c,d\n1,2,3,4,5,6\n", 1, "header has 4 columns, expected 6"),
])
def test_generic_sequence_errors(gen_dir, text, line, msg):
    p = _write(gen_dir / "walk_01.csv", text)                   # second in id order
    with pytest.raises(FormatError, match=_err(p, line, msg)):
        list(GenericCSVReader(gen_dir).sequences())


def test_generic_joint_count_not_multiple_of_three(gen_dir):
    p = _write(gen_dir / "seqs" / "run_07.csv", "\nh1,h2,h3,h4\n1,2,3,4\n")
    with pytest.raises(FormatError, match=_err(p, 3, "4 values per row is not a multiple "
                                                             "of 3")):
        GenericCSVReader(gen_dir)


def test_generic_option_errors(gen_dir):
    with pytest.raises(ValueError, match="joint_names has 3 names but .* 2 joints"):
        GenericCSVReader(gen_dir, joint_names=["a", "b", "c"])
    for bad in ([2], [], [0, 0], [-1], ["hip"], 0, [0.5]):
        with pytest.raises(ValueError, match="center must be"):
            GenericCSVReader(gen_dir, center=bad)
    with pytest.raises(ValueError, match="units must be a non-empty string"):
        GenericCSVReader(gen_dir, units="")


def test_read_sequence_csv_header_and_blank_lines(tmp_path):
    p = _write(tmp_path / "s.csv", "\n x , y , z \n\n 1 , 2 , 3 \n4,5,6\n\n")
    np.testing.assert_array_equal(read_sequence_csv(p), np.float32([[1, 2, 3], [4, 5, 6]]))


def test_open_source_unknown_format():
    assert "generic" in FORMATS
    with pytest.raises(ValueError, match="unknown skeleton format 'fbx'"):
        open_reader("fbx", ".")


def _generic_folder(tmp_path, n_joints):
    rng = np.random.default_rng(5)
    _write(tmp_path / "index.csv", "file,label,subject\na.csv,x,1\n")
    _write(tmp_path / "a.csv", "\n".join(",".join(f"{v:.3f}" for v in row)
                                         for row in rng.normal(size=(4, 3 * n_joints))) + "\n")
    return tmp_path


KINECT_V2 = ["SpineBase", "SpineMid", "Neck", "Head", "ShoulderLeft", "ElbowLeft", "WristLeft", "HandLeft",
             "ShoulderRight", "ElbowRight", "WristRight", "HandRight", "HipLeft", "KneeLeft", "AnkleLeft",
             "FootLeft", "HipRight", "KneeRight", "AnkleRight", "FootRight", "SpineShoulder", "HandTipLeft",
             "ThumbLeft", "HandTipRight", "ThumbRight"]
COCO = ["nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder", "right_shoulder",
        "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip", "right_hip", "left_knee",
        "right_knee", "left_ankle", "right_ankle"]


@pytest.mark.parametrize("names,roles,center", [
    (KINECT_V2, {"hip_center": [0], "left_hip": [12], "right_hip": [16], "spine": [1], "neck": [2],
                 "left_shoulder": [4], "right_shoulder": [8], "head": [3]}, (0,)),
    # no hip centre or neck joint: the mean of both hips and of both shoulders
    (COCO, {"hip_center": [11, 12], "left_hip": [11], "right_hip": [12], "neck": [5, 6],
            "left_shoulder": [5], "right_shoulder": [6], "head": [0]}, (11, 12)),
    # names written another way: case and separators do not matter
    (["Pelvis", "Left Hip", "RIGHT-HIP", "neck", "x"], {"hip_center": [0], "left_hip": [1], "right_hip": [2],
                                                         "neck": [3]}, (0,)),
    (["a", "b", "c"], {}, (0,)),
])
def test_generic_roles_found_from_joint_names(tmp_path, names, roles, center):
    src = GenericCSVReader(_generic_folder(tmp_path, len(names)), joint_names=names)
    assert src.info.roles == roles and src.info.center == center


def test_generic_roles_and_center_given_win_over_names(tmp_path):
    folder = _generic_folder(tmp_path, len(KINECT_V2))
    found = GenericCSVReader(folder, joint_names=KINECT_V2).info.roles
    src = GenericCSVReader(folder, joint_names=KINECT_V2, roles={"left_hip": [13], "right_hip": [17]}, center=[12, 16])
    # role by role: the given hips replace the found ones, the other found roles stay
    assert src.info.roles == {**found, "left_hip": [13], "right_hip": [17]} and src.info.center == (12, 16)
    assert found["left_hip"] != [13] and found["neck"]
    # without center, the hip centre found from the names stays the centre when other roles are given
    src = GenericCSVReader(folder, joint_names=KINECT_V2, roles={"neck": [2]})
    assert src.info.center == tuple(found["hip_center"]) and src.info.roles["neck"] == [2]


def test_generic_roles_that_share_a_joint_are_refused(tmp_path):
    """Both hips (or shoulders, or the hip centre and the neck) on one joint would make the body frame's axis
    zero: refused when given, also against a role found from the names that the given ones keep."""
    folder = _generic_folder(tmp_path, len(KINECT_V2))
    found = GenericCSVReader(folder, joint_names=KINECT_V2).info.roles
    with pytest.raises(ValueError, match=r"^roles: left_hip = \[1\] and right_hip = \[1\] share joint 1; the body "
                                         r"frame needs them apart \(the axis from one to the other would be zero\); "
                                         r"give each its own joints$"):
        GenericCSVReader(folder, roles={"left_hip": [1], "right_hip": [1]})
    j = found["left_hip"][0]
    with pytest.raises(ValueError, match=rf"^roles: left_hip = \[{j}\] \(found from the joint names\) and "
                                         rf"right_hip = \[{j}\] share joint {j}; "):
        GenericCSVReader(folder, joint_names=KINECT_V2, roles={"right_hip": [j]})
    h = found["hip_center"][0]
    with pytest.raises(ValueError, match=rf"^roles: hip_center = \[{h}\] \(found from the joint names\) and "
                                         rf"neck = \[{h}\] share joint {h}; "):
        GenericCSVReader(folder, joint_names=KINECT_V2, roles={"neck": [h]})
    # roles on joints of their own are accepted
    assert GenericCSVReader(folder, roles={"left_shoulder": [2], "right_shoulder": [3]}).info.roles


def test_shipped_descriptor_runs_on_generic_store_with_named_joints(tmp_path):
    # the pipelines' descriptor (body frame and body scale) needs roles: named joints give them
    import tomllib

    from streamcov.stream.skeleton import SkeletonDescriptor

    opts = tomllib.loads((Path(__file__).parents[1] / "pipelines" / "msr_action3d.toml").read_text())["descriptor"]
    desc = SkeletonDescriptor(**{k: v for k, v in opts.items() if k not in ("center", "dtype")}, center=(0,))
    src = GenericCSVReader(_generic_folder(tmp_path, len(KINECT_V2)), joint_names=KINECT_V2)
    plan = desc.plan(src.info.n_joints, src.info.roles)
    assert plan.left_hip == (12,) and plan.right_hip == (16,) and plan.neck == (2,)
    with pytest.raises(ConfigError, match=r"descriptor.body_frame and scale needs the joint roles left_hip, "
                                          r"right_hip, neck.*options.roles"):
        desc.plan(src.info.n_joints, GenericCSVReader(tmp_path, joint_names=[f"j{i}" for i in range(25)]).info.roles)


def test_generic_roles_recorded_in_the_store_and_shown_by_info(tmp_path):
    from streamcov.data.ragged import store_status
    from streamcov.data.skeletons import ingest

    src = GenericCSVReader(_generic_folder(tmp_path / "raw", len(COCO)), joint_names=COCO)
    ingest(src, tmp_path / "s.zarr")
    st = store_status(tmp_path / "s.zarr")
    assert st["roles"]["left_hip"] == [11] and st["roles"]["neck"] == [5, 6] and st["center"] == [11, 12]


# --------------------------------------------------------------------------- on_error = "skip"

def test_msr_on_error_skip_records_a_damaged_file_and_reads_the_others(msr_dir):
    """A file that is not of the format stops the reader (its error, marked as one file's fault, which the
    caller's message turns into the way to skip it); with ``on_error = "skip"`` its sequence is recorded in
    ``skipped`` with that error, and every other file is read as before."""
    path, good = msr_dir
    bad = path / "a03_s04_e01_skeleton3D.txt"
    bad.write_text(_msr_text(good).replace("1.000000", "one", 1))
    src = open_reader("msr-action3d", path)
    with pytest.raises(FormatError, match=_err(bad, 1, "'one' is not a number")) as info:
        list(src.sequences())
    assert info.value.skippable is True
    src.on_error = "skip"
    seqs = list(src.sequences())
    assert [s.id for s in seqs] == ["a01_s01_e01", "a02_s03_e01"]
    skipped = {s.id: s.reason for s in src.skipped}
    assert set(skipped) == {"a03_s04_e01", "a05_s02_e02"}
    assert re.fullmatch(rf"cannot be read: {re.escape(str(bad))}, line 1: .*'one' is not a number.*",
                        skipped["a03_s04_e01"])


def test_utkinect_on_error_skip_records_every_interval_of_a_damaged_joints_file(utk_dir):
    path, rows = utk_dir
    rows = list(rows)
    rows[2] = "12 1 2 3"
    p = path / "joints_s01_e01.txt"
    p.write_text("\n".join(rows) + "\n")
    src = UTKinectReader(path)
    src.on_error = "skip"
    assert list(src.sequences()) == []
    skipped = {s.id: s.reason for s in src.skipped}
    # the interval without bounds keeps its own reason; the three with bounds carry the file's error
    assert "NaN" in skipped.pop("s01_e01_sitDown")
    assert set(skipped) == {"s01_e01_walk", "s01_e01_standUp", "s01_e01_pickUp"}
    assert all(re.fullmatch(rf"cannot be read: {re.escape(str(p))}, line 3: expected 61 values per line.*", r)
               for r in skipped.values()), skipped


def test_florence_on_error_skip_records_a_bad_cell(tmp_path):
    cells = [_cell(3), _cell(3, action=10, seed=1), _cell(3, seed=2)]
    p = tmp_path / "skeletal_data.mat"
    _florence_mat(p, cells)
    src = Florence3DReader(p)
    src.on_error = "skip"
    assert [s.id for s in src.sequences()] == ["v001", "v003"]
    assert [(s.id, s.reason) for s in src.skipped] == [
        ("v002", f"cannot be read: {p}: cell 2 of 'skeletal_data' (video v002): action 10 is outside 1..9")]


def test_file_fault_tells_one_file_from_the_system():
    """What ``on_error = "skip"`` may leave out: a file's own damage, marked where a reader raises; not a missing
    file, a read error of the system (a dropped drive would otherwise skip every file after it) or a file that
    differs only from the archive's first file. The marks survive pickling (Dask workers) and do not depend on
    the exception being handled when the error is raised."""
    import errno
    import pickle

    from streamcov.errors import MissingInputError, file_fault, not_the_file

    own = FormatError("f.txt", "'x' is not a number", line=3)
    assert file_fault(own)
    assert not file_fault(MissingInputError("f.txt", "file not found"))
    assert not file_fault(not_the_file(FormatError("f.txt", "cannot read the file: Input/output error")))
    assert not file_fault(ValueError("not a FormatError"))
    try:   # raised while a disk-full error is handled (a retry): still the file's own
        raise OSError(errno.ENOSPC, "No space left on device")
    except OSError:
        assert file_fault(FormatError("f.txt", "frame id 11 comes after frame id 12"))
    marked = not_the_file(FormatError("f.txt", "cannot read the file", line=2))
    marked.skippable = True
    back = pickle.loads(pickle.dumps(marked))
    assert (str(back), back.line, back.own_fault, back.skippable) == (str(marked), 2, False, True)
    assert file_fault(pickle.loads(pickle.dumps(own)))


def test_generic_width_is_voted_by_the_first_files(tmp_path):
    """The generic reader takes its column count from the first data rows of the first files
    (``PEEK_FILES``): a width most of them share is the archive's, and a file of another width, the first
    included, is that file's damage, which ``on_error = "skip"`` skips. Without a majority (a tie, or one
    file) the first file sets it, and a file of another width stops the reader even with ``skip``, with no
    word of skipping (the odd one may be the first file, and skipping would keep it alone); a later row of
    another width is always that file's damage."""
    from streamcov.data.readers.generic import PEEK_FILES
    from streamcov.data.skeletons import ingest

    def archive(name, widths):
        folder = tmp_path / name
        folder.mkdir()
        rows = ["file,label,subject"]
        for i, cols in enumerate(widths):
            (folder / f"s{i}.csv").write_text("\n".join(",".join(str(0.1 * (r + c)) for c in range(cols))
                                                        for r in range(5)) + "\n")
            rows.append(f"s{i}.csv,{'ab'[i % 2]},{1 + i}")
        (folder / "index.csv").write_text("\n".join(rows) + "\n")
        return folder

    assert PEEK_FILES == 5
    # the first file has 2 joints, the 3 others 3: the majority says the first is the odd one
    folder = archive("g", [6, 9, 9, 9])
    with pytest.raises(FormatError, match=_err(folder / "s0.csv", 1, "")) as info:
        ingest(open_reader("generic", folder), tmp_path / "s.zarr")
    assert info.value.own_fault and "as in the first 3 files read" not in str(info.value)
    assert "as in 3 of the first 4 files read (e.g. s1.csv)" in str(info.value)
    store = ingest(open_reader("generic", folder), tmp_path / "s.zarr", on_error="skip")
    assert store.ids() == ["s1", "s2", "s3"] and [s["id"] for s in store.attrs["skipped"]] == ["s0"]
    assert store.n_joints == 3
    # a tie (2 and 2): the first file sets the width, and a file of another width stops even with skip
    folder = archive("h", [6, 9, 6, 9])
    with pytest.raises(FormatError, match=_err(folder / "s1.csv", 1, "")) as info:
        ingest(open_reader("generic", folder), tmp_path / "t.zarr", on_error="skip")
    assert not info.value.own_fault and not getattr(info.value, "skippable", False)
    assert "as in s0.csv, the first file read; if that file is the odd one, fix it instead" in str(info.value)
    # only widths of whole joints vote: two files 7 wide do not outvote a first file 6 wide
    folder = archive("w", [6, 7, 7])
    with pytest.raises(FormatError, match=_err(folder / "s1.csv", 1, "")) as info:
        ingest(open_reader("generic", folder), tmp_path / "w.zarr", on_error="skip")
    assert "expected 6 values per line" in str(info.value) and not info.value.own_fault
    # only the votes of the first PEEK_FILES files count: the sixth and later do not outvote them
    folder = archive("k", [6] * 5 + [9] * 6)
    store = ingest(open_reader("generic", folder), tmp_path / "k.zarr", on_error="skip")
    assert store.n_joints == 2 and len(store.attrs["skipped"]) == 6
    # a later row cut short is that file's damage, skipped
    folder = archive("m", [9, 9, 9, 9])
    (folder / "s2.csv").write_text("0,1,2,3,4,5,6,7,8\n0,1,2,3,4,5\n")
    store = ingest(open_reader("generic", folder), tmp_path / "m.zarr", on_error="skip")
    assert store.ids() == ["s0", "s1", "s3"] and [s["id"] for s in store.attrs["skipped"]] == ["s2"]


def test_c3d_file_the_system_cannot_open_stops_even_with_skip(tmp_path, monkeypatch):
    """ezc3d says only that a file "could not be opened", with no errno: the reader opens the file first, so that
    a permission or an I/O error is the system's (not skipped), as with every other reader."""
    import errno

    from streamcov.data.readers import c3d
    from streamcov.errors import file_fault

    p = tmp_path / "x.c3d"
    p.write_bytes(b"\0" * 512)
    monkeypatch.setattr(c3d, "HAVE_EZC3D", True)   # installed or not: the open comes first

    def refused(path, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(c3d, "open", refused, raising=False)
    with pytest.raises(FormatError, match=re.escape(f"{p}: cannot read the file: Permission denied")) as info:
        c3d.read_c3d(p)
    assert not file_fault(info.value)
