"""Reader for C3D marker trajectories (binary, e.g. Vicon, Qualisys, OptiTrack exports).

The files are read with ``ezc3d`` (PyPI ``ezc3d``, maintained by the pyomeca group, a
compiled wheel for CPython 3.10+ on Linux, macOS and Windows, MIT licence). It reads integer
and floating-point C3D, applies ``POINT:SCALE`` and marks invalid points (residual < 0) as NaN
(checked by the tests on files written byte by byte from the format description). The pure-Python ``c3d`` package was not chosen: it yields
frames one at a time through a Python generator (slow on long trials) and leaves the
residual/scale conventions to the caller.

ezc3d runs in a process of its own (:class:`_Ezc3dProcess`, started once per reading process):
on some damaged files it dies of a segmentation fault or never returns, which would otherwise end
the ingestion, or a notebook's kernel, without a word. Either is one :class:`FormatError` on the
file (a crash; more than ``READ_SECONDS`` + ``READ_SECONDS_PER_MB`` per MB), which
``on_error="skip"`` may skip, and the next file gets a new process.

Joints and units
----------------
Every marker (3D point) is a joint, named by ``POINT:LABELS`` (then ``LABELS2``, ...; blank
labels become ``point<k>``). Points listed in ``POINT:ANGLES``, ``FORCES``, ``MOMENTS``,
``POWERS``, ``SCALARS`` or ``REACTIONS`` (model outputs stored as points) are not markers and
are left out unless ``markers`` names them. Coordinates are converted from ``POINT:UNITS``
(``mm``, ``cm``, ``dm``, ``m``, ``in``, ``ft``; anything else is an error) to ``units``
(default metres). Axes are those of the file (usually z up).

Missing markers (documented rule)
---------------------------------
A marker is missing in a frame when its residual is negative (ezc3d turns those coordinates
into NaN), when a coordinate is not finite, or (``zeros_missing=True``) when it is exactly
``(0, 0, 0)``, which some exporters write for gaps. Then:

1. every frame in which any kept marker is missing is dropped, counted in
   ``repairs["frames_with_missing_markers_dropped"]``;
2. a sequence that would lose more than ``max_missing`` of its frames (default 0.2), or keep
   fewer than ``min_frames`` (default 2), is not yielded and is recorded in ``skipped`` with
   the counts.

Layout, labels and subjects as for the other readers (:mod:`._layout`). All files must hold the
kept markers (by name; their order in a file may differ). Names are compared without the
``Subject:`` prefix that Vicon writes for each performer (``Bob:LASI`` matches ``Alice:LASI``);
the default markers are kept without it, ``markers`` given as written. Unnamed points
(``point<k>``) are matched by position: files whose kept markers are unnamed must all hold as
many points.
``info.extra["frame_rate"]`` is the first file's ``POINT:RATE`` when every file's header gives
one rate, else None.
"""
from __future__ import annotations

import atexit
import importlib.util
import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np

from ...errors import MissingExtraError, file_fault, not_the_file
from ._layout import GENERIC_PATTERN, ArchiveReader, find_roles, one_of, without_subject
from .base import FormatError

#: whether ezc3d is installed: looked up, not imported (it runs only in the reading process's child, and its
#: import costs this process about 0.2 s)
try:
    HAVE_EZC3D = importlib.util.find_spec("ezc3d") is not None
except (ImportError, ValueError):   # a module in sys.modules without a spec (a stand-in): there
    HAVE_EZC3D = "ezc3d" in sys.modules

#: files tried, in order, for the archive's layout when the first ones are damaged
PEEK_FILES = 5

#: POINT:UNITS -> metres
UNIT_METRES = {"mm": 0.001, "millimeters": 0.001, "millimetres": 0.001, "cm": 0.01,
               "dm": 0.1, "m": 1.0, "meters": 1.0, "metres": 1.0, "in": 0.0254,
               "inch": 0.0254, "inches": 0.0254, "ft": 0.3048}
#: output unit -> metres per unit
OUT_UNITS = {"m": 1.0, "cm": 0.01, "mm": 0.001}

#: name of a point that POINT:LABELS leaves blank or does not name: ``point<k>`` (0-based)
UNNAMED = "point"

NON_MARKER_GROUPS = ("ANGLES", "FORCES", "MOMENTS", "POWERS", "SCALARS", "REACTIONS")

#: Plug-in Gait style marker names -> roles (first complete group wins)
ROLE_NAMES = {
    "hip_center": [["LASI", "RASI", "LPSI", "RPSI"], ["LASI", "RASI", "SACR"],
                   ["LASI", "RASI"], ["LIAS", "RIAS", "LIPS", "RIPS"]],
    "left_hip": [["LASI", "LPSI"], ["LASI"], ["LIAS"], ["LGTR"]],
    "right_hip": [["RASI", "RPSI"], ["RASI"], ["RIAS"], ["RGTR"]],
    "spine": [["T10"], ["T8"], ["STRN", "T10"], ["STRN"]],
    "neck": [["C7", "CLAV"], ["C7"], ["CLAV"]],
    "left_shoulder": [["LSHO"], ["LSHOULDER"], ["LACR"]],
    "right_shoulder": [["RSHO"], ["RSHOULDER"], ["RACR"]],
    "head": [["LFHD", "RFHD", "LBHD", "RBHD"], ["HEAD"], ["LFHD", "RFHD"]],
}


#: seconds ezc3d may take on a file before it is stopped: this many, plus READ_SECONDS_PER_MB
READ_SECONDS = 30.0
READ_SECONDS_PER_MB = 2.0


#: bytes of the child's stderr read for the line that says why it stopped
STDERR_TAIL_BYTES = 1 << 16


class _Ezc3dProcess:
    """ezc3d in a child process (``_c3d_child.py``), started once and reused, started again
    after a file killed it or was stopped.

    ezc3d is compiled code that dies of a segmentation fault on some damaged parameter
    sections and loops without end on others (found by overwriting single bytes of valid
    files); in the reading process either would end the ingestion, or the notebook's kernel,
    without a word. In the child, a crash or a file that takes longer than its time limit is
    one :class:`FormatError` on that file (skipped under ``on_error="skip"``), and the next
    file gets a fresh process. The child gets absolute paths (the reader's working directory
    may change), the reader's ``sys.path``, a session of its own (a Ctrl-C is the reader's), and
    ends itself a few seconds after a file's time limit, so that one stuck in ezc3d does not
    outlive a reader that died.
    """

    def __init__(self, script: Path = Path(__file__).with_name("_c3d_child.py")):
        self.script = script
        self._lock = threading.Lock()
        self._proc = None
        self._replies = None
        self._out = None
        self._stderr = None
        self._forked_from = []

    def forget(self):
        """In a process forked from this one: leave the parent's child process to the parent (its pipes
        would mix the two's requests and replies) and start anew; the lock may have been held at the fork.
        The parent's objects are kept, never closed: the reply thread, which does not exist in the fork,
        may have held the lock of the pipe's reader, so closing it would wait for ever."""
        self._lock = threading.Lock()
        if self._proc is not None:
            self._forked_from.append((self._proc, self._out, self._stderr))
            try:   # the fork's copy of the parent child's stdin goes to /dev/null (the descriptor stays valid for
                # the object that is never closed): a copy held here would keep that child waiting for files
                # after the parent died, for as long as the fork lives
                null = os.open(os.devnull, os.O_RDONLY)
                try:
                    os.dup2(null, self._proc.stdin.fileno(), inheritable=False)   # as the pipe was
                finally:
                    os.close(null)
            except (OSError, ValueError):   # closed already: nothing is held
                pass
        self._proc = None

    def _start(self):
        self._stderr = tempfile.TemporaryFile()
        # ezc3d where the reader has it: the reader's sys.path (entries a path list can carry)
        paths = [p for p in sys.path if isinstance(p, str) and p and os.pathsep not in p]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
        # the replies come on a pipe of their own where the system can pass one: what the child's Python
        # prints as it starts (a sitecustomize, a .pth file), before the script runs, goes to stdout
        own_pipe = os.name == "posix"
        r = w = None
        try:
            if own_pipe:
                import fcntl

                r, w0 = os.pipe()
                try:   # at 3 or above: a process started with 0, 1 or 2 closed got the pipe there, and the
                    w = fcntl.fcntl(w0, fcntl.F_DUPFD_CLOEXEC, 3)   # child's stdio replaced it
                finally:
                    os.close(w0)
            self._proc = subprocess.Popen(
                [sys.executable, str(self.script), *([str(w)] if own_pipe else [])], stdin=subprocess.PIPE,
                stdout=self._stderr if own_pipe else subprocess.PIPE, stderr=self._stderr, env=env,
                pass_fds=(w,) if own_pipe else (), start_new_session=own_pipe)
        except OSError as exc:
            for fd in (r, w):
                if fd is not None:
                    os.close(fd)
            self._stderr.close()
            raise self._not_started(f"{exc.__class__.__name__}: {exc}") from None
        if own_pipe:
            os.close(w)
            self._out = os.fdopen(r, "rb")
        else:
            self._out = self._proc.stdout
        try:
            self._replies = queue.Queue()
            threading.Thread(target=self._pump, args=(self._out, self._replies),
                             daemon=True, name="streamcov-ezc3d-replies").start()
            ready = self._reply(60.0)
        except BaseException:                # interrupted: "ready" would answer the first file
            self.stop()
            raise
        if ready != ("ready",):
            tail = (f"{ready.__class__.__name__}: {ready}" if isinstance(ready, BaseException)
                    else self._stderr_tail())
            self.stop()
            raise self._not_started(tail)

    def _not_started(self, why: str) -> MissingExtraError:
        return MissingExtraError(f"--format c3d reads files with ezc3d in a process of its own, which did not "
                                 f"start ({sys.executable} {self.script}: {why}); check that "
                                 f"'{sys.executable} -c \"import ezc3d\"' works")

    @staticmethod
    def _pump(stream, replies):
        try:
            while True:
                replies.put(pickle.load(stream))
        except EOFError:                     # the process ended
            replies.put(None)
        except BaseException as exc:  # noqa: BLE001 - a reply this process cannot take (MemoryError): said
            replies.put(exc)

    def _reply(self, timeout):
        try:
            return self._replies.get(timeout=timeout)
        except queue.Empty:
            return "timeout"

    def _stderr_tail(self) -> str:
        """The last line the child wrote on stderr (the exception that stopped it)."""
        try:   # its last 64 KiB: a library that logged a lot before it failed is not read whole
            self._stderr.seek(max(0, self._stderr.seek(0, os.SEEK_END) - STDERR_TAIL_BYTES))
            lines = self._stderr.read().decode(errors="replace").strip().splitlines()
            return lines[-1][-300:] if lines else "no message"
        except (OSError, ValueError):
            return "no message"

    def stop(self):
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait()
            for f in (self._proc.stdin, self._out, self._stderr):
                try:
                    f.close()
                except OSError:
                    pass
        self._proc = None

    def read(self, path: Path) -> dict:
        """The file's points, residuals and POINT parameters, or a :class:`FormatError`."""
        limit = READ_SECONDS + READ_SECONDS_PER_MB * path.stat().st_size / 2 ** 20
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self.stop()
                self._start()
            self._stderr.seek(0)             # what it says on stderr is kept for one file at a time
            self._stderr.truncate()
            try:
                try:
                    pickle.dump((os.path.abspath(path), limit), self._proc.stdin)
                    self._proc.stdin.flush()
                except OSError:
                    pass                     # the process has ended: its reply says how
                reply = self._reply(limit)
            except BaseException:            # interrupted: its reply would answer the next file
                self.stop()
                raise
            if isinstance(reply, tuple) and reply[0] == "ok":
                return reply[1]
            if isinstance(reply, tuple) and reply[0] == "error":
                raise FormatError(path, f"not a readable C3D file ({reply[1]}: {reply[2]}); check "
                                  "that the file is complete and really C3D")
            try:
                code = self._proc.wait(timeout=5.0) if reply is None else None
            except subprocess.TimeoutExpired:
                code = None
            tail = self._stderr_tail()
            self.stop()
            if reply == "timeout":
                raise FormatError(path, f"ezc3d did not finish reading it in {limit:.0f} s (a damaged "
                                  "parameter section can make it loop); check that the file is "
                                  "complete and really C3D")
            if reply is not None or code is None:   # the reply could not be taken: not the file's doing
                why = (f"{reply.__class__.__name__}: {reply}" if isinstance(reply, BaseException)
                       else f"an unexpected reply {str(reply)[:80]}")
                raise not_the_file(FormatError(path, f"the reply of the process that reads it with ezc3d "
                                               f"could not be taken ({why}); free memory and run the "
                                               "command again"))
            stopped = {getattr(signal, n) for n in ("SIGKILL", "SIGTERM", "SIGHUP", "SIGINT") if hasattr(signal, n)}
            if -code in stopped:   # stopped from outside (out of memory, a shutdown): not the file's fault
                raise not_the_file(FormatError(path, f"ezc3d was stopped while reading it "
                                               f"({signal.Signals(-code).name}: the system may have run out "
                                               f"of memory, or be shutting down); free memory and run the "
                                               f"command again"))
            if code >= 0:   # its Python stopped (the reply could not be made): not ezc3d's crash on the file
                raise not_the_file(FormatError(path, f"the process that reads it with ezc3d stopped (exit code "
                                               f"{code}: {tail}); free memory and run the command again"))
            how = f"signal {signal.Signals(-code).name}" if -code in signal.valid_signals() else f"signal {-code}"
            raise FormatError(path, f"ezc3d crashed reading it ({how}); the file is damaged or not "
                              "C3D: copy it again, or leave it out")


_EZC3D = _Ezc3dProcess()
atexit.register(_EZC3D.stop)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_EZC3D.forget)


def _param(point: dict, name, default=None):
    value = point.get(name)
    return default if value is None else value


def _header(path) -> tuple[bytes, bytes] | None:
    """The file's header block (512 bytes) and its processor type (the parameter section's fourth byte: 0x54
    Intel, 0x55 DEC, 0x56 MIPS), or None when the file is too short or not C3D."""
    with open(path, "rb") as fh:
        head = fh.read(512)
        if len(head) < 512 or head[1] != 0x50 or head[0] < 2:
            return None
        fh.seek((head[0] - 1) * 512 + 3)
        return head, fh.read(1)


def _header_rate(path) -> float | None:
    """The 3D frame rate in the file's header (words 11-12, a float in the processor's format: Intel and MIPS
    are IEEE, little- and big-endian; DEC's F-float is the IEEE float of its two words swapped, divided by 4),
    or None when the file is too short or not C3D. Read for every file, where the whole file is read
    (by ezc3d) only for the first."""
    try:
        found = _header(path)
    except OSError:
        return None   # the reading of the sequences says why
    if found is None:
        return None
    head, processor = found
    b = head[20:24]
    if processor == b"\x56":
        rate = struct.unpack(">f", b)[0]
    elif processor == b"\x55":
        rate = struct.unpack("<f", bytes([b[2], b[3], b[0], b[1]]))[0] / 4
    else:
        rate = struct.unpack("<f", b)[0]
    return rate if np.isfinite(rate) and rate > 0 else None


def _declared_frames(path) -> tuple[int, int] | None:
    """First and last frame numbers in the file's own header (words 4 and 5; byte order from the
    processor type of the parameter section), or None when it does not say."""
    found = _header(path)
    if found is None:
        return None
    head, processor = found
    first, last = struct.unpack_from(">HH" if processor == b"\x56" else "<HH", head, 6)
    return (first, last) if last >= first else None


def read_c3d(path, *, zeros_missing: bool = False):
    """(labels, positions (T, N, 3) in metres with NaN for missing, non-marker labels, rate)."""
    if not HAVE_EZC3D:
        raise MissingExtraError("--format c3d reads files with the 'ezc3d' package, which is not installed: "
                                "pip install 'streamcov[mocap]'")
    path = Path(path)
    if not path.is_file():
        raise not_the_file(FormatError(path, "file not found"))
    try:   # ezc3d says only "could not be opened", without the system's error: a permission, an I/O error
        open(path, "rb").close()
    except OSError as exc:
        raise not_the_file(FormatError(path, f"cannot read the file: {exc.strerror}")) from None
    c = _EZC3D.read(path)
    pts, point = c["points"], c["point"]                          # (4, N, T)
    n_points = pts.shape[1] if pts.ndim == 3 else 0
    # ezc3d reads a cut file up to where it ends and rewrites its header to match: compare
    # with the frame count the file itself declares
    declared = _declared_frames(path)
    n_frames = pts.shape[2] if pts.ndim == 3 else 0
    if declared is not None and n_points and n_frames < declared[1] - declared[0] + 1:
        raise FormatError(path, f"the file is truncated: its header declares "
                          f"{declared[1] - declared[0] + 1} frames ({declared[0]} to "
                          f"{declared[1]}), the file holds {n_frames}")
    labels = list(_param(point, "LABELS", []) or [])
    k = 2
    while len(labels) < n_points and _param(point, f"LABELS{k}") is not None:
        labels += list(_param(point, f"LABELS{k}"))
        k += 1
    labels = [str(x).strip() for x in labels[:n_points]]
    labels += [""] * (n_points - len(labels))
    labels = [lb or f"{UNNAMED}{i}" for i, lb in enumerate(labels)]
    if len(set(labels)) != len(labels):
        dup = sorted({x for x in labels if labels.count(x) > 1})
        raise FormatError(path, f"POINT:LABELS names {', '.join(dup)} more than once; marker "
                          "names must be distinct")
    units = _param(point, "UNITS", ["mm"])
    unit = (str(units[0]) if len(units) else "mm").strip().lower()
    if unit not in UNIT_METRES:
        raise FormatError(path, f"POINT:UNITS is {unit!r}; expected one of "
                          f"{', '.join(sorted(UNIT_METRES))}")
    xyz = pts[:3].transpose(2, 1, 0) if n_points else np.zeros((0, 0, 3))     # (T, N, 3)
    missing = ~np.isfinite(xyz).all(axis=-1)
    res = c["residuals"] if n_points else None
    if res is not None and np.size(res):
        missing |= (np.asarray(res)[0].T < 0)
    if zeros_missing:
        missing |= (xyz == 0).all(axis=-1)
    xyz = xyz * UNIT_METRES[unit]
    xyz[missing] = np.nan
    non_markers = set()
    for g in NON_MARKER_GROUPS:
        v = _param(point, g)
        if v is not None:
            non_markers |= {str(x).strip() for x in v}
    rate = _param(point, "RATE", None)
    rate = float(np.asarray(rate).ravel()[0]) if rate is not None and np.size(rate) else None
    return labels, xyz, non_markers, unit, rate


def _marker_index(labels: list[str]) -> dict[str, int]:
    """Marker name -> point index of one file: each label as written and, where it has one, without its
    ``Subject:`` prefix (Vicon writes ``Bob:LASI``; :func:`._layout.without_subject`). A name asked for is
    looked up as written, then without its own prefix (:func:`_point_of`)."""
    pos = {lb: i for i, lb in enumerate(labels)}
    for i, b in enumerate(without_subject(labels)):
        pos.setdefault(b, i)
    return pos


def _point_of(pos: dict[str, int], marker: str) -> int | None:
    return pos.get(marker, pos.get(marker.rsplit(":", 1)[-1]))


class C3dReader(ArchiveReader):
    """C3D marker sequences from a folder tree or an ``index.csv``.

    Parameters
    ----------
    path, layout, label, label_map, name_pattern
        As for the other readers (:mod:`._layout`).
    units : {"m", "cm", "mm"}
        Output unit (files are converted from their ``POINT:UNITS``).
    markers : list of str, optional
        Markers to keep, in this order (default: the markers of the first file in id order
        that reads, model outputs excluded; a damaged file before it, one of the first
        ``PEEK_FILES``, is refused or skipped when the sequences are read).
    max_missing : float
        Largest fraction of frames that may be dropped for missing markers before the
        sequence is skipped.
    min_frames : int
        Fewest frames a yielded sequence keeps.
    zeros_missing : bool
        Treat a marker at exactly (0, 0, 0) as missing.
    center, roles : optional
        Hip-centre joints (default: the ``hip_center`` role, else joint 0) and roles
        (default: Plug-in Gait marker names, see ``ROLE_NAMES``).
    """

    source = "c3d"
    ext = ".c3d"

    def __init__(self, path, *, layout: str = "folders", units: str = "m",
                 label: str = "folder", label_map: dict | None = None,
                 name_pattern: str = GENERIC_PATTERN, markers=None, max_missing: float = 0.2,
                 min_frames: int = 2, zeros_missing: bool = False, center=None,
                 roles: dict | None = None):
        super().__init__()
        self.scale = 1.0 / OUT_UNITS[one_of("units", units, tuple(OUT_UNITS))]
        if isinstance(max_missing, bool) or not isinstance(max_missing, (int, float)) or not (
                0 <= max_missing <= 1):
            raise ValueError(f"max_missing must be a fraction in [0, 1], got {max_missing!r}")
        if isinstance(min_frames, bool) or not isinstance(min_frames, int) or min_frames < 1:
            raise ValueError(f"min_frames must be an integer >= 1, got {min_frames!r}")
        if not isinstance(zeros_missing, bool):
            raise ValueError(f"zeros_missing must be true or false, got {zeros_missing!r}")
        if markers is not None and (not isinstance(markers, (list, tuple)) or not markers or not all(
                isinstance(m, str) for m in markers) or len(set(markers)) != len(markers)):
            raise ValueError(f"markers must be a non-empty list of distinct marker names such as "
                             f'["LASI", "RASI"], got {markers!r}')
        self.max_missing = float(max_missing)
        self.min_frames = min_frames
        self.zeros_missing = zeros_missing
        self._open(path, layout=layout, label=label, label_map=label_map,
                   name_pattern=name_pattern)
        # the layout (markers, units, rate) is the first readable file's: a damaged file before it is that
        # file's fault, read again (and refused, or skipped with on_error = "skip") with the others
        damaged = []
        for entry in self._entries[:PEEK_FILES]:
            try:
                labels, _, non_markers, unit, rate = read_c3d(entry.path, zeros_missing=zeros_missing)
            except FormatError as exc:
                if not file_fault(exc):   # the system's error, or ezc3d's absence: every file would fail
                    raise
                damaged.append(exc)
                continue
            break
        else:
            raise damaged[0]
        first = entry.path
        self._first = f"the first {'readable ' if damaged else ''}file ({first.name})"
        self._n_points = len(labels)
        if markers is None:
            markers = without_subject([lb for lb in labels if lb not in non_markers])
            if not markers:
                raise FormatError(first, "holds no marker points (POINT:USED is 0 or every point "
                                  "is a model output); pass markers=[...]")
        else:
            pos = _marker_index(labels)
            lost = [m for m in markers if _point_of(pos, m) is None]
            if lost:
                raise ValueError(f"markers: {', '.join(map(repr, lost))} not in {first} (the "
                                 f"first {'readable ' if damaged else ''}file; its markers: {', '.join(labels)})")
        self.markers = list(markers)   # as given: Bob:LASI is looked up as written, then as LASI (_point_of)
        unnamed = {f"{UNNAMED}{i}" for i, lb in enumerate(labels) if lb == f"{UNNAMED}{i}"}
        self._unnamed_kept = [m for m in self.markers if m in unnamed]
        # the archive's frame rate when every file's header gives the first file's (POINT:RATE is the rate)
        rates = {_header_rate(e.path) for e in self._entries} - {None}
        if rate is not None and len(rates) > 1:
            rate = None
        self._describe(self.markers, units=units, center=center, roles=roles,
                       found_roles=find_roles(self.markers, ROLE_NAMES),
                       extra={"frame_rate": rate, "units_in_first_file": unit,
                              "max_missing": self.max_missing, "min_frames": self.min_frames,
                              "zeros_missing": self.zeros_missing,
                              "missing_rule": "frames with any missing marker are dropped; "
                                              "sequences losing more than max_missing of their "
                                              "frames or keeping fewer than min_frames are "
                                              "skipped"})

    def read(self, entry):
        """(frames (T', 3J) float32 after dropping, dropped count, total count)."""
        labels, xyz, _, _, _ = read_c3d(entry.path, zeros_missing=self.zeros_missing)
        if self._unnamed_kept and len(labels) != self._n_points:
            # point<k> is a position, not a name: with other point counts the positions need not be the same markers
            raise not_the_file(FormatError(entry.path, f"holds {len(labels)} points and {self._first} "
                                           f"{self._n_points}, and markers kept are unnamed points (POINT:LABELS "
                                           f"leaves them blank: {', '.join(self._unnamed_kept)}), matched by "
                                           "position: write the labels, or ingest the files of each point count on "
                                           "their own"))
        pos = _marker_index(labels)
        at = [_point_of(pos, m) for m in self.markers]
        lost = [m for m, i in zip(self.markers, at) if i is None]
        if lost:
            # the layout of the first file: which of the two is odd, on_error="skip" cannot tell
            raise not_the_file(FormatError(entry.path, f"lacks marker(s) {', '.join(lost)} that {self._first} "
                                           "has; pass markers=[...] to keep only markers every file has"))
        X = xyz[:, at] * self.scale
        bad = np.isnan(X).any(axis=(1, 2))
        return X[~bad].reshape(int((~bad).sum()), -1).astype(np.float32), int(bad.sum()), len(X)

    def _frames(self, entry) -> np.ndarray | str:
        """The missing-marker rule of the module docstring."""
        frames, dropped, total = self.read(entry)
        kept = total - dropped
        if total == 0:
            return "the file holds no frames"
        if dropped > self.max_missing * total or kept < self.min_frames:
            return (f"{dropped} of {total} frames have a missing marker (limit "
                    f"{self.max_missing:.0%}); {kept} left, at least {self.min_frames} needed")
        self._repair("frames_with_missing_markers_dropped", dropped)
        return frames
