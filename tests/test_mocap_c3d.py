"""C3D: files built byte by byte (float and integer formats) and with ezc3d, read back."""
import os
import re
from pathlib import Path

import numpy as np
import pytest

ezc3d = pytest.importorskip("ezc3d")

from c3d_bytes import c3d_bytes, damaged_parameter  # noqa: E402
from streamcov.data.readers.base import FormatError  # noqa: E402
from streamcov.data.readers.c3d import C3dReader, read_c3d  # noqa: E402

LABELS = ["LASI", "RASI", "LPSI", "RPSI", "C7", "LSHO", "RSHO"]


def trajectory(T, N=len(LABELS), seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1500, 1500, (T, N, 3)).round(1)      # mm, 0.1 mm resolution


def put(tmp_path, data: bytes, name="s1_walk.c3d", folder="walk"):
    d = tmp_path / folder
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)
    return d / name


@pytest.mark.parametrize("scale", [-1.0, 0.1])
def test_hand_made_file_float_and_integer(tmp_path, scale):
    xyz = trajectory(20)
    p = put(tmp_path, c3d_bytes(LABELS, xyz, scale=scale, units="mm", rate=200.0))
    r = C3dReader(tmp_path)
    (seq,) = list(r.sequences())
    assert r.info.joint_names == LABELS and r.info.units == "m"
    assert r.info.extra["frame_rate"] == 200.0 and r.info.extra["units_in_first_file"] == "mm"
    assert (seq.id, seq.label, seq.subject) == (p.stem, "walk", 0)
    np.testing.assert_allclose(seq.frames.reshape(20, len(LABELS), 3), xyz / 1000, atol=1e-6)
    assert r.repairs == {} and r.skipped == []
    assert r.info.roles["hip_center"] == [0, 1, 2, 3] and r.info.center == (0, 1, 2, 3)
    assert r.info.roles["left_shoulder"] == [5] and r.info.roles["neck"] == [4]


@pytest.mark.parametrize("units,factor", [("m", 1.0), ("cm", 0.01), ("in", 0.0254)])
def test_units_converted_to_metres(tmp_path, units, factor):
    xyz = trajectory(5) / 1000
    put(tmp_path, c3d_bytes(LABELS, xyz, units=units))
    (seq,) = list(C3dReader(tmp_path).sequences())
    np.testing.assert_allclose(seq.frames.reshape(5, -1, 3), xyz * factor, rtol=1e-6)
    (seq,) = list(C3dReader(tmp_path, units="mm").sequences())
    np.testing.assert_allclose(seq.frames.reshape(5, -1, 3), xyz * factor * 1000, rtol=1e-6)


def test_missing_markers_drop_frames_and_skip_sequences(tmp_path):
    xyz = trajectory(10)
    res = np.zeros((10, len(LABELS)))
    res[[2, 5], 3] = -1                          # 2 frames of 10 lose a marker: dropped
    put(tmp_path, c3d_bytes(LABELS, xyz, res), "s1_a.c3d")
    res2 = np.zeros((10, len(LABELS)))
    res2[:4, 0] = -1                             # 4 of 10 (> 20 %): the sequence is skipped
    put(tmp_path, c3d_bytes(LABELS, xyz, res2), "s2_b.c3d")
    r = C3dReader(tmp_path)
    seqs = list(r.sequences())
    assert [s.id for s in seqs] == ["s1_a"]
    keep = [t for t in range(10) if t not in (2, 5)]
    np.testing.assert_allclose(seqs[0].frames.reshape(8, -1, 3), xyz[keep] / 1000, atol=1e-6)
    assert r.repairs == {"frames_with_missing_markers_dropped": 2}
    assert [s.id for s in r.skipped] == ["s2_b"]
    assert "4 of 10 frames have a missing marker" in r.skipped[0].reason
    r = C3dReader(tmp_path, max_missing=0.5)
    assert [s.id for s in r.sequences()] == ["s1_a", "s2_b"]
    assert r.repairs == {"frames_with_missing_markers_dropped": 6}


def test_zeros_as_missing_and_model_outputs_left_out(tmp_path):
    xyz = trajectory(6, N=len(LABELS) + 1)
    xyz[1, 2] = 0
    put(tmp_path, c3d_bytes(LABELS + ["LKneeAngles"], xyz,
                            extra_point_params={"ANGLES": ["LKneeAngles"]}))
    r = C3dReader(tmp_path, zeros_missing=True)
    assert r.info.joint_names == LABELS
    (seq,) = list(r.sequences())
    assert len(seq.frames) == 5 and r.repairs == {"frames_with_missing_markers_dropped": 1}
    (seq,) = list(C3dReader(tmp_path).sequences())
    assert len(seq.frames) == 6


def test_round_trip_with_ezc3d_writer_and_marker_selection(tmp_path):
    xyz = trajectory(12)
    c = ezc3d.c3d()
    c["parameters"]["POINT"]["RATE"]["value"] = [120]
    c["parameters"]["POINT"]["LABELS"]["value"] = tuple(LABELS)
    c["parameters"]["POINT"]["UNITS"]["value"] = ["mm"]
    pts = np.ones((4, len(LABELS), 12))
    pts[:3] = xyz.transpose(2, 1, 0)
    c["data"]["points"] = pts
    (tmp_path / "walk").mkdir()
    c.write(str(tmp_path / "walk" / "s3_x.c3d"))
    # a second file with the markers in another order
    put(tmp_path, c3d_bytes(LABELS[::-1], xyz[:, ::-1], rate=120.0), "s4_y.c3d")
    r = C3dReader(tmp_path, markers=["RSHO", "LASI"])
    seqs = list(r.sequences())
    assert r.info.joint_names == ["RSHO", "LASI"] and r.info.extra["frame_rate"] == 120.0
    for s in seqs:
        np.testing.assert_allclose(s.frames.reshape(12, 2, 3), xyz[:, [6, 0]] / 1000, atol=1e-6)


def test_bad_files(tmp_path):
    p = put(tmp_path, b"not a c3d file at all" * 40)
    with pytest.raises(FormatError, match=re.escape(f"{p}: not a readable C3D file")):
        C3dReader(tmp_path)
    good = c3d_bytes(LABELS, trajectory(4))
    p = put(tmp_path, good[:700])                # cut inside the parameter section
    with pytest.raises(FormatError, match=re.escape(f"{p}: not a readable C3D file")):
        C3dReader(tmp_path)
    p = put(tmp_path, c3d_bytes(LABELS, trajectory(4), units="furlong"))
    with pytest.raises(FormatError, match=re.escape(f"{p}: POINT:UNITS is 'furlong'")):
        C3dReader(tmp_path)
    put(tmp_path, c3d_bytes(LABELS, trajectory(4)))
    p2 = put(tmp_path, c3d_bytes(LABELS[:-1], trajectory(4, N=6)), "s9_z.c3d")
    with pytest.raises(FormatError, match=re.escape(f"{p2}: lacks marker(s) RSHO")):
        list(C3dReader(tmp_path).sequences())


def test_read_c3d_reports_nan_for_invalid_points(tmp_path):
    xyz = trajectory(3)
    res = np.zeros((3, len(LABELS)))
    res[0, 0] = -1
    p = put(tmp_path, c3d_bytes(LABELS, xyz, res, scale=0.5))
    labels, X, non_markers, unit, rate = read_c3d(p)
    assert labels == LABELS and unit == "mm" and rate == 100.0 and non_markers == set()
    assert np.isnan(X[0, 0]).all() and np.isfinite(X[1:]).all()
    np.testing.assert_allclose(X[1:], np.round(xyz[1:] / 0.5) * 0.5 / 1000, atol=1e-9)


@pytest.mark.parametrize("record,field,value", [
    (b"RATE", 3, 0xFF),          # 255 dimensions: ezc3d 1.7.2 dies of a segmentation fault
    (b"DATA_START", 2, 0xFF),    # a character parameter read from an integer's bytes: the same
    (b"LABELS", 3, 0x7F),        # 127 dimensions: ezc3d 1.7.2 never returns
    (b"LABELS", 2, 0x07),        # an unknown type: ezc3d raises
])
def test_a_file_that_crashes_or_hangs_ezc3d_is_one_error_on_the_file(tmp_path, monkeypatch, record, field, value):
    """Single bytes of the parameter section overwritten (found by overwriting each byte of a valid file):
    whatever ezc3d does with them, the reading process survives and gets one FormatError naming the file. Which
    of the three messages depends on ezc3d's version, so any is accepted; the mechanism is tested exactly below."""
    from streamcov.data.readers import c3d
    monkeypatch.setattr(c3d, "READ_SECONDS", 3.0)
    good = c3d_bytes(LABELS, trajectory(6))
    p = put(tmp_path, damaged_parameter(good, record, field, value))
    with pytest.raises(FormatError, match=re.escape(f"{p}: ") + "(ezc3d crashed reading it|ezc3d did not finish "
                       "reading it in 3 s|not a readable C3D file)"):
        read_c3d(p)
    q = put(tmp_path, good, "s2_walk.c3d")                      # the next file is read by a new process
    np.testing.assert_allclose(read_c3d(q)[1], trajectory(6) / 1000, atol=1e-6)


FAKE_CHILD = '''
import importlib.util, os, signal, sys, time
spec = importlib.util.spec_from_file_location("child", {real!r})
child = importlib.util.module_from_spec(spec)
spec.loader.exec_module(child)
if "{start}" == "fail":
    raise SystemExit("ModuleNotFoundError: no ezc3d here")


def contents(path):      # in place of ezc3d: what the file's name asks for
    print("noise from the library")                  # neither of the two may reach the protocol's stream
    os.write(1, b"noise written to file descriptor 1\\n")
    if "segv" in path:
        os.kill(os.getpid(), signal.SIGSEGV)
    if "killed" in path:
        os.kill(os.getpid(), signal.SIGKILL)
    if "hang" in path:
        time.sleep(60)
    if "raise" in path:
        raise RuntimeError("Bad c3d formatting")
    if "exit" in path:
        sys.stderr.write("MemoryError\\n")
        sys.stderr.flush()
        os._exit(1)
    if "odd" in path:
        return Odd()                                   # a reply the reader cannot unpickle
    return {{"pid": os.getpid(), "cwd": os.getcwd(), "path": path}}


class Odd:
    pass


child.contents = contents
child.main()
'''


def test_ezc3d_process_reports_crash_hang_and_kill_and_starts_again(tmp_path, monkeypatch):
    from streamcov.data.readers import c3d
    from streamcov.errors import MissingExtraError, file_fault
    script = tmp_path / "child.py"
    real = str(Path(c3d.__file__).with_name("_c3d_child.py"))
    script.write_text(FAKE_CHILD.format(start="ok", real=real))
    proc = c3d._Ezc3dProcess(script)
    monkeypatch.setattr(c3d, "READ_SECONDS", 2.0)
    files = {}
    for name in ("a", "segv", "hang", "killed", "raise", "odd", "exit", "b"):
        files[name] = tmp_path / f"{name}.c3d"
        files[name].write_bytes(b"x")
    try:
        pid = proc.read(files["a"])["pid"]
        assert proc.read(files["a"])["pid"] == pid                 # one process for many files
        with pytest.raises(FormatError, match=re.escape(f"{files['raise']}: not a readable C3D file (RuntimeError: "
                                                        "Bad c3d formatting); check that")):
            proc.read(files["raise"])
        assert proc.read(files["a"])["pid"] == pid                 # an error does not end the process
        with pytest.raises(FormatError, match=re.escape(f"{files['segv']}: ezc3d crashed reading it (signal "
                                                        "SIGSEGV); the file is damaged or not C3D")) as e:
            proc.read(files["segv"])
        assert file_fault(e.value)                                 # on_error="skip" may skip it
        assert proc.read(files["b"])["pid"] != pid
        with pytest.raises(FormatError, match=re.escape(f"{files['hang']}: ezc3d did not finish reading it in "
                                                        "2 s")) as e:
            proc.read(files["hang"])
        assert file_fault(e.value)
        with pytest.raises(FormatError, match=re.escape(f"{files['killed']}: ezc3d was stopped while reading it "
                                                        "(SIGKILL: the system may have run out of memory, or "
                                                        "be shutting down); free memory")) as e:
            proc.read(files["killed"])
        assert not file_fault(e.value)                             # memory, not the file: stops even with skip
        with pytest.raises(FormatError, match=re.escape(f"{files['odd']}: the reply of the process that reads it "
                                                        "with ezc3d could not be taken (AttributeError: ")) as e:
            proc.read(files["odd"])
        assert not file_fault(e.value)                             # not the file's doing
        with pytest.raises(FormatError, match=re.escape(f"{files['exit']}: the process that reads it with ezc3d "
                                                        "stopped (exit code 1: MemoryError); free memory")) as e:
            proc.read(files["exit"])
        assert not file_fault(e.value)                             # its Python stopped: not ezc3d on the file
        assert proc.read(files["b"])["pid"] > 0
        monkeypatch.setattr(proc, "_reply", lambda timeout: (_ for _ in ()).throw(KeyboardInterrupt))
        proc.stop()
        with pytest.raises(KeyboardInterrupt):                     # a Ctrl-C while the process starts
            proc.read(files["a"])
        assert proc._proc is None                                  # stopped: its "ready" cannot answer a file
        monkeypatch.undo()
        monkeypatch.chdir(tmp_path)
        assert proc.read(Path("b.c3d"))["path"] == str(files["b"])  # a path as given, relative to the reader's
    finally:
        proc.stop()
    script.write_text(FAKE_CHILD.format(start="fail", real=real))
    with pytest.raises(MissingExtraError, match=r"--format c3d reads files with ezc3d in a process of its own, "
                       r"which did not start \(\S+ \S+child\.py: ModuleNotFoundError: no ezc3d here\); check that"):
        c3d._Ezc3dProcess(script).read(files["a"])


@pytest.mark.skipif(not hasattr(__import__("signal"), "alarm"), reason="signal.alarm: POSIX only")
def test_a_process_stuck_in_ezc3d_ends_itself(tmp_path):
    """A reader that dies (kill, a kernel restart) leaves its process stuck in ezc3d's loop, which reads no EOF:
    it ends itself by SIGALRM a few seconds after the file's time limit."""
    import signal

    from streamcov.data.readers import _c3d_child, c3d
    script = tmp_path / "child.py"
    script.write_text(FAKE_CHILD.format(start="ok", real=str(Path(c3d.__file__).with_name("_c3d_child.py"))))
    proc = c3d._Ezc3dProcess(script)
    proc._start()
    try:
        import pickle
        pickle.dump((str(tmp_path / "hang.c3d"), 0.0), proc._proc.stdin)   # as a reader would, then nothing
        proc._proc.stdin.flush()
        assert proc._proc.wait(timeout=_c3d_child.ALARM_GRACE + 20) == -signal.SIGALRM
    finally:
        proc.stop()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork: POSIX only")
def test_a_forked_process_reads_with_a_process_of_its_own(tmp_path):
    """A process forked while the reading process's ezc3d process runs must not write to the same pipes (the two
    would answer each other's files): the fork starts its own, and both read correctly."""
    from streamcov.data.readers import c3d
    p = put(tmp_path, c3d_bytes(LABELS, trajectory(5)))
    assert read_c3d(p)[0] == LABELS
    parents = c3d._EZC3D._proc.pid
    pid = os.fork()
    if pid == 0:                                   # the fork: exit code 0 only if all went right
        code = 1
        try:
            code = 0 if read_c3d(p)[0] == LABELS and c3d._EZC3D._proc.pid != parents else 3
        finally:
            os._exit(code)
    assert read_c3d(p)[0] == LABELS and c3d._EZC3D._proc.pid == parents
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork: POSIX only")
def test_a_fork_does_not_keep_the_parents_ezc3d_process_waiting(tmp_path):
    """The parent's ezc3d process ends on EOF of its stdin. A fork must not hold a copy of that pipe's write end:
    with one, the process would wait for files after the parent died (a SIGKILL closes nothing else), as long as
    the fork lived. Here the parent closes its end while the fork sleeps: the process must end at once."""
    import select
    import time

    from streamcov.data.readers import c3d
    p = put(tmp_path, c3d_bytes(LABELS, trajectory(5)))
    assert read_c3d(p)[0] == LABELS
    child = c3d._EZC3D._proc
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                   # the fork: says it is up, then only lives
        try:
            os.write(w, b"up")
            time.sleep(30)
        finally:
            os._exit(0)
    try:
        os.close(w)
        assert select.select([r], [], [], 10)[0] and os.read(r, 2) == b"up"
        child.stdin.close()                        # as a dead parent's would be
        assert child.wait(timeout=10) == 0         # EOF reached it: no copy in the fork
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(r)
        c3d._EZC3D.stop()


def test_stderr_tail_reads_only_the_end_of_a_long_log(tmp_path, monkeypatch):
    """The line that says why the process stopped is the last one; a long log before it is not read whole."""
    import tempfile

    from streamcov.data.readers import c3d
    proc = c3d._Ezc3dProcess()
    proc._stderr = tempfile.TemporaryFile()
    proc._stderr.write(b"x" * (3 * c3d.STDERR_TAIL_BYTES) + b"\nearlier\nMemoryError: the last line\n")
    read = []
    real = proc._stderr.read
    monkeypatch.setattr(proc._stderr, "read", lambda *a: read.append(len(b := real(*a))) or b, raising=False)
    assert proc._stderr_tail() == "MemoryError: the last line"
    assert read == [c3d.STDERR_TAIL_BYTES]
    proc._stderr.close()


def test_prints_as_the_process_starts_and_odd_sys_path_entries(tmp_path, monkeypatch):
    """What the child's Python prints as it starts (a sitecustomize found on the reader's sys.path, which the
    child is given) cannot corrupt the replies, and a sys.path entry that is not text (a notebook's
    sys.path.append(Path(...)), which imports skip) is left out of the child's."""
    import sys

    from streamcov.data.readers import c3d
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("print('hello from sitecustomize')\n")
    monkeypatch.setattr(sys, "path", [str(site), *sys.path, tmp_path / "a Path object"])
    p = put(tmp_path, c3d_bytes(LABELS, trajectory(5)))
    proc = c3d._Ezc3dProcess()
    try:
        proc._start()
        proc._stderr.seek(0)
        assert proc._stderr.read().decode() == "hello from sitecustomize\n"   # it ran, and printed, in the child
        np.testing.assert_allclose(proc.read(p)["points"][:3].transpose(2, 1, 0), trajectory(5), atol=1e-3)
    finally:
        proc.stop()


@pytest.mark.skipif(os.name != "posix", reason="the replies' own pipe: POSIX")
def test_a_process_started_with_its_standard_streams_closed_reads_c3d(tmp_path):
    """A daemon-style process with file descriptors 0, 1 and 2 closed: the replies' pipe got descriptor 2, which
    the child's stderr then replaced, and no C3D file could be read (an error blaming the ezc3d install)."""
    import subprocess
    import sys

    p = put(tmp_path, c3d_bytes(LABELS, trajectory(5)))
    out = tmp_path / "labels.txt"
    code = ("from streamcov.data.readers.c3d import read_c3d\n"
            f"labels = ','.join(read_c3d({str(p)!r})[0])\n"     # before any file is opened: 0, 1, 2 still free
            f"open({str(out)!r}, 'w').write(labels)\n")
    subprocess.run(["bash", "-c", 'exec "$0" -c "$1" <&- >&- 2>&-', sys.executable, code], timeout=120,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(x for x in sys.path if isinstance(x, str) and x)})
    assert out.read_text() == ",".join(LABELS)


def test_performer_prefixes_frame_rates_and_unnamed_points(tmp_path):
    """Vicon names markers Bob:LASI and Alice:LASI: two performers' files could not share one layout, markers=[...]
    did not help. The archive's frame rate was the first file's whatever the others'. Files without POINT:LABELS
    (points called point<k>) were matched by position, a longer file's last points dropped without a word."""
    xyz = trajectory(6)
    put(tmp_path, c3d_bytes([f"Alice:{m}" for m in LABELS], xyz), "alice_1.c3d")
    put(tmp_path, c3d_bytes([f"Bob:{m}" for m in LABELS[::-1]], xyz[:, ::-1], rate=250.0), "bob_1.c3d")
    r = C3dReader(tmp_path)
    assert r.info.joint_names == LABELS and r.info.extra["frame_rate"] is None   # 100 and 250 Hz
    for s in r.sequences():
        np.testing.assert_allclose(s.frames.reshape(6, len(LABELS), 3), xyz / 1000, atol=1e-6)
    r = C3dReader(tmp_path, markers=["Bob:RSHO", "LASI"])   # as written in one file, or bare
    assert r.info.joint_names == ["Bob:RSHO", "LASI"]
    for s in r.sequences():
        np.testing.assert_allclose(s.frames.reshape(6, 2, 3), xyz[:, [6, 0]] / 1000, atol=1e-6)
    put(tmp_path, c3d_bytes([f"Bob:{m}" for m in LABELS], xyz, rate=100.0), "bob_1.c3d")
    assert C3dReader(tmp_path).info.extra["frame_rate"] == 100.0
    unnamed = tmp_path / "unnamed"
    put(unnamed, c3d_bytes([""] * 2, xyz[:, :2]), "a_1.c3d")
    p = put(unnamed, c3d_bytes([""] * 3, xyz[:, :3]), "b_1.c3d")
    r = C3dReader(unnamed)
    assert r.info.joint_names == ["point0", "point1"]
    with pytest.raises(FormatError, match=re.escape(f"{p}: holds 3 points and the first file (a_1.c3d) 2, and "
                                                    "markers kept are unnamed points (POINT:LABELS leaves them blank: "
                                                    "point0, point1), matched by position: write the labels, or ingest "
                                                    "the files of each point count on their own")):
        list(r.sequences())
    put(unnamed, c3d_bytes([""] * 2, xyz[:, 2:4]), "b_1.c3d")   # as many points: matched by position, as before
    assert [s.frames.shape for s in C3dReader(unnamed).sequences()] == [(6, 6), (6, 6)]
    # a blank label beside named markers kept: read by name whatever the counts
    named = tmp_path / "named"
    put(named, c3d_bytes(LABELS[:3], xyz[:, :3]), "a_1.c3d")
    put(named, c3d_bytes(LABELS[:3] + [""], xyz[:, :4]), "b_1.c3d")
    assert [s.frames.shape for s in C3dReader(named).sequences()] == [(6, 9), (6, 9)]
    # two performers in one file: their bare names would collide, so kept whole; one performer's markers chosen
    both = tmp_path / "both"
    put(both, c3d_bytes(["Bob:LASI", "Bob:RASI", "Alice:LASI", "Alice:RASI"], xyz[:, :4]), "s1_a.c3d")
    r = C3dReader(both, markers=["Bob:LASI", "Bob:RASI"])
    (seq,) = list(r.sequences())
    assert r.info.joint_names == ["Bob:LASI", "Bob:RASI"]
    np.testing.assert_allclose(seq.frames.reshape(6, 2, 3), xyz[:, :2] / 1000, atol=1e-6)


def test_header_frame_rate_in_each_processor_format(tmp_path):
    """The header's rate as Intel (little-endian IEEE), MIPS (big-endian IEEE) and DEC F-float: 100.0 is 0.78125 x
    2^7, so DEC's first word is sign 0, exponent 128 + 7, fraction bits 1001000... = 0x43C8, stored low byte first."""
    import struct

    from streamcov.data.readers.c3d import _header_rate

    good = bytearray(c3d_bytes(LABELS, trajectory(2), rate=100.0))
    processor = 512 + 3   # the parameter section starts at block 2
    for code, rate_bytes in ((84, struct.pack("<f", 100.0)), (86, struct.pack(">f", 100.0)),
                             (85, bytes([0xC8, 0x43, 0x00, 0x00]))):
        data = bytearray(good)
        data[processor] = code
        data[20:24] = rate_bytes
        (tmp_path / "f.c3d").write_bytes(bytes(data))
        assert _header_rate(tmp_path / "f.c3d") == 100.0, code
    (tmp_path / "f.c3d").write_bytes(bytes(good[:100]))
    assert _header_rate(tmp_path / "f.c3d") is None
