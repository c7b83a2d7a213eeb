"""What every skeleton reader yields, and the error it raises on bad input."""
from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field
from typing import Iterator
from pathlib import Path

import numpy as np

from ...errors import FormatError, not_the_file, read_or_skip


@dataclass
class SkeletonSequence:
    """One labelled sequence: ``frames`` is (T, 3*J) float32, joint-major x, y, z."""

    id: str
    frames: np.ndarray
    label: str
    subject: int
    split: str | None = None


@dataclass
class SkeletonInfo:
    """Metadata common to all sequences of a reader; written to the store's attributes.

    ``roles`` names body parts by 0-based joint indices (several joints: their
    mean), for descriptors that need a body frame: ``hip_center``,
    ``left_hip``, ``right_hip``, ``spine``, ``neck``, ``left_shoulder``,
    ``right_shoulder``, ``head``; a reader records those its skeleton has.
    """

    n_joints: int
    joint_names: list[str]
    units: str
    source: str
    center: tuple[int, ...]          # 0-based joints whose mean is the hip centre
    label_names: list[str] | None = None   # fixed class order, if the reader defines one
    extra: dict = field(default_factory=dict)
    roles: dict = field(default_factory=dict)


@dataclass
class SkippedSequence:
    id: str
    reason: str


def too_few_frames(n: int, n_zero: int, holder: str = "the file") -> str:
    """Why a sequence of ``n`` frames, ``n_zero`` of them with every joint at zero (untracked), is skipped:
    fewer than 2 valid frames."""
    if n == 0:
        return f"{holder} holds no frames"
    if n_zero == 0:
        return f"{holder} holds {n} frame; at least 2 are needed"
    return (f"{n_zero} of its {n} frames have all joints at zero (no tracking data), leaving {n - n_zero}; at "
            f"least 2 valid frames are needed")


class SkeletonReader:
    """A reader: ``info``, an iterator over sequences, and what it dropped.

    ``sequences()`` yields in a deterministic order so that an interrupted
    ingestion can resume by sequence id. ``skipped`` and ``repairs`` are filled
    while iterating (e.g. all-zero sequences skipped, all-zero frames dropped,
    duplicated frames removed) and are recorded in the store.
    """

    info: SkeletonInfo
    #: ``"stop"``: a file that is damaged or not of the format stops the reader (its :class:`FormatError`);
    #: ``"skip"``: its sequences are recorded in ``skipped`` with the error and the reader goes on (set by
    #: :func:`streamcov.data.skeletons.ingest`'s ``on_error``; :meth:`_read`)
    on_error: str = "stop"

    def __init__(self):
        self.skipped: list[SkippedSequence] = []
        self.repairs: dict[str, int] = {}

    def _read(self, ids, read, *args):
        """``read(*args)``, the frames of one file (or cell) holding the sequences ``ids``; or None where it
        raises a :class:`FormatError` and :attr:`on_error` is ``"skip"``, each of ``ids`` then recorded in
        ``skipped`` with the error (file, line, what was expected).

        What is not the file's own fault stops even then (:func:`~streamcov.errors.file_fault`): a missing
        file or a read error of the system (every file after it would be skipped too), or a file that differs
        only from the layout of the archive's first file (which may be the odd one)."""
        frames, why = read_or_skip(self.on_error, read, *args)
        if why is not None:
            self.skipped.extend(SkippedSequence(i, why) for i in ids)
        return frames

    def _repair(self, what: str, count: int = 1):
        if count:
            self.repairs[what] = self.repairs.get(what, 0) + int(count)

    def sequences(self) -> Iterator[SkeletonSequence]:  # pragma: no cover - interface
        raise NotImplementedError

    def listed_files(self) -> list:
        """The files an index lists (sequence and skeleton files), which may lie outside the archive's folder
        or in a folder reached through a link: the store's archive digest covers them too
        (:func:`~streamcov.data.readers.open_reader`). Readers of a fixed folder layout list none."""
        entries = getattr(self, "_entries", ())
        return [p for e in entries for p in (e.path, getattr(e, "skeleton", None)) if p is not None]


# --- text parsing shared by the plain-text readers -------------------------

def _read_bytes(path, what: str = "file") -> bytes:
    """The bytes of ``path``; a FormatError naming it (``what``: the kind of file) when it
    cannot be read."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:   # the system's error, not the file's contents: on_error="skip" does not skip it
        raise not_the_file(FormatError(path, f"cannot read the {what}: {exc.strerror}")) from None


#: per-thread read buffer of :func:`_read_scratch` (Dask may read files in several threads)
_SCRATCH = threading.local()
#: larger files get a buffer of their own, not kept after the call
_SCRATCH_KEEP_BYTES = 256 << 20


def _read_scratch(path, what: str = "file") -> np.ndarray:
    """The bytes of ``path`` as a uint8 array in a buffer reused by the calling thread.

    For the compiled scanners, which parse a file in one pass and keep none of its bytes:
    on the BVH benchmark, reading every file into a new buffer took about as long as scanning
    it. The array is valid only until the next call in the same thread: copy what must
    outlive it.

    Parameters
    ----------
    path : str or Path
        The file.
    what : str
        The kind of file, for the message when it cannot be read.

    Returns
    -------
    numpy.ndarray
        uint8, the file's bytes (a view of the thread's buffer).

    Raises
    ------
    FormatError
        The file cannot be read (as :func:`_read_bytes`).
    """
    try:
        with open(path, "rb", buffering=0) as fh:
            size = os.fstat(fh.fileno()).st_size
            buf = getattr(_SCRATCH, "buf", None)
            if buf is None or len(buf) < size + 1:
                buf = bytearray(size + 1)            # + 1: a read of 0 bytes tells the end
                if size < _SCRATCH_KEEP_BYTES:
                    _SCRATCH.buf = buf
            got = 0
            with memoryview(buf) as view:
                while True:                          # until EOF: the file may have grown
                    if got == len(buf):
                        extra = fh.read()
                        if not extra:
                            break
                        return np.frombuffer(bytes(buf[:got]) + extra, np.uint8)
                    k = fh.readinto(view[got:])
                    if not k:
                        break
                    got += k
            return np.frombuffer(buf, np.uint8, count=got)
    except OSError as exc:   # the system's error, not the file's contents: on_error="skip" does not skip it
        raise not_the_file(FormatError(path, f"cannot read the {what}: {exc.strerror}")) from None


def text_encoding(raw: bytes) -> str:
    """``"utf-8"`` when ``raw`` is UTF-8 (what editors and current exporters write), else ``"latin-1"`` (older
    Windows tools; every byte is a character)."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return "latin-1"
    return "utf-8"


def decode_text(raw: bytes) -> str:
    """Text of a file's bytes in :func:`text_encoding`, so that a name's accents are kept as written."""
    return raw.decode(text_encoding(raw))


_ASCII_SPACE = re.compile(r"[ \t\r\n\v\f]+")


def ascii_split(text: str) -> list[str]:
    """The words of ``text`` between ASCII blanks. ``str.split()`` also splits at Unicode blanks (a no-break
    space, U+0085, U+001C-U+001F), which may be part of a joint name or, read as Latin-1, of a UTF-8 letter."""
    return [w for w in _ASCII_SPACE.split(text) if w]


def _read_lines(path) -> list[str]:
    """All lines of a text file (universal newlines, UTF-8 with optional BOM).

    Splitting on ``"\\n"`` only (not :meth:`str.splitlines`) keeps the line
    numbers in error messages equal to what an editor shows.
    """
    try:
        with open(path, encoding="utf-8-sig", newline=None) as fh:
            text = fh.read()
    except UnicodeDecodeError as exc:
        line = Path(path).read_bytes()[:exc.start].count(b"\n") + 1
        raise FormatError(path, f"not a UTF-8/ASCII text file ({exc.reason} at byte "
                                  f"{exc.start}); save it as UTF-8", line=line) from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _nonblank(lines: list[str]) -> tuple[list[str], list[int]]:
    """Non-blank lines and their 1-based line numbers."""
    rows, linenos = [], []
    for i, s in enumerate(lines, 1):
        if s.strip():
            rows.append(s)
            linenos.append(i)
    return rows, linenos


def _parse_numeric_rows(path, rows: list[str], linenos: list[int], *, delimiter: str | None = None,
                        ncols: int | None = None, expect: str = "", id_cols: int = 0) -> np.ndarray:
    """Parse text rows into a finite float64 array of shape (len(rows), ncols), every value within float32.

    Every row must hold the same number of fields (``ncols``, or that of the
    first row when ``ncols`` is None), each a finite number. On the first
    violation a :class:`~streamcov.errors.FormatError` names ``path``, the 1-based line
    (from ``linenos``) and the column. ``expect`` is appended to column-count
    messages to say what a line should contain. The first ``id_cols`` columns
    are not coordinates (a frame id): they are parsed as numbers but their range
    is left to the caller, whose message can say what they should hold.
    """
    if not rows:
        return np.empty((0, ncols or 0), dtype=np.float64)
    hint = f" ({expect})" if expect else ""
    try:
        arr = np.loadtxt(rows, dtype=np.float64, delimiter=delimiter, comments=None, ndmin=2,
                         quotechar=None)
    except ValueError as exc:
        # the C parser only knows row indices without blank lines: find the
        # offending line again to report it the way an editor numbers it
        _locate_parse_error(path, rows, linenos, delimiter, ncols, hint)
        # unreachable unless numpy's parser rejects a token that the check above accepts
        raise FormatError(  # pragma: no cover
            path, f"could not parse numbers: {exc}") from None
    if ncols is not None and arr.shape[1] != ncols:
        raise FormatError(path, f"expected {ncols} values per line{hint}, found "
                                  f"{arr.shape[1]}", line=linenos[0])
    coords = arr[:, id_cols:]
    bad = ~np.isfinite(coords)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        c += id_cols
        raise FormatError(path, f"non-finite value {float(arr[r, c])!r} in column "
                                  f"{c + 1}; all coordinates must be finite numbers",
                                  line=linenos[r])
    # stores keep float32: a larger number would turn into infinity there
    big = np.abs(coords) > np.finfo(np.float32).max
    if big.any():
        r, c = np.argwhere(big)[0]
        c += id_cols
        raise FormatError(path, f"value {float(arr[r, c])!r} in column {c + 1} does not fit in float32",
                          line=linenos[r])
    return arr


def _locate_parse_error(path, rows, linenos, delimiter, ncols, hint):
    expected = ncols
    for row, lineno in zip(rows, linenos):
        fields = row.split(delimiter)
        if expected is None:
            expected = len(fields)
        if len(fields) != expected:
            raise FormatError(path, f"expected {expected} values per line{hint}, found "
                                      f"{len(fields)}", line=lineno)
        for j, tok in enumerate(fields):
            if not _is_plain_number(tok):
                raise FormatError(path, f"column {j + 1}: {tok.strip()!r} is not a number",
                                          line=lineno)


def digits_hint(text: str) -> str:
    """What to fix when ``text`` holds digits other than ASCII 0-9 (full-width ``１２``, Arabic-Indic ``١٢``):
    they look like ASCII ones, and Python's ``int()`` and regular expressions' ``\\d`` read them as numbers,
    which the readers do not; else ''."""
    return "; type the digits as ASCII 0-9" if any(c.isdigit() and not c.isascii() for c in text) else ""


def _is_plain_number(tok: str) -> bool:
    """Whether numpy's text parser reads ``tok`` as a float.

    Python's ``float`` also accepts digit separators (``1_000``) and non-ASCII
    digits, which ``np.loadtxt`` rejects.
    """
    if "_" in tok or not tok.isascii():
        return False
    try:
        float(tok)
    except ValueError:
        return False
    return True
