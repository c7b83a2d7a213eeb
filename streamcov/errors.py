"""One error hierarchy for everything a user can cause.

Every error a user can cause with an input (a pipeline file, a flag, a raw
archive, a store, a model) is a :class:`StreamcovError`; the command line
turns it into one line ``streamcov <cmd>: error: <message>`` and exit code 2.
Anything else that escapes is a bug in streamcov and keeps its traceback.
Messages name the culprit (file and line, the pipeline key or flag as the
user typed it), say what was expected and how to fix it.
"""
from __future__ import annotations

import contextlib
import contextvars
import datetime
import json
import os
import re


class StreamcovError(Exception):
    """Base class of the errors a user can cause; never a bug in streamcov."""


class ConfigError(StreamcovError, ValueError):
    """A pipeline file, a ``--set`` override or a command-line flag is invalid."""


class FormatError(StreamcovError, ValueError):
    """An input file does not have the expected format.

    The message names the file and, where there is one, the 1-based line,
    and says what was expected.
    """

    #: whether the file itself is at fault (damaged, cut short, not of the format), which an ingestion's
    #: ``on_error="skip"`` may leave out; False for a read error of the system and for a file that differs
    #: only from the layout the archive's first file set (:func:`not_the_file`, :func:`file_fault`)
    own_fault = True

    def __init__(self, path, message: str, line: int | None = None):
        self.path = str(path)
        self.line = line
        self.reason = message
        where = f"{self.path}, line {line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")

    def __reduce__(self):  # picklable across Dask workers despite the custom __init__; marks kept
        return (type(self), (self.path, self.reason, self.line), dict(self.__dict__))


def check_utf8_name(path, relative) -> None:
    """FormatError naming ``path`` when ``relative`` (its name within the archive) is not UTF-8 (a latin-1
    name of an old zip archive: ``caf\\xe9``): ids, class names and the archive's digests are UTF-8, and
    such a name was a traceback."""
    try:
        os.fspath(relative).encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        raise FormatError(shown, "its file or folder name is not UTF-8 (ids, class names and the archive's "
                                 "digests, which cover every file under it, are UTF-8); rename it, e.g. convmv -f "
                                 "latin1 -t utf8 -r --notest FOLDER, or move it out of the folder") from None


def not_the_file(exc: FormatError) -> FormatError:
    """``exc`` marked as not one file's own fault (:attr:`FormatError.own_fault`), returned to be raised: a
    read error of the system (a missing file, a permission, an I/O error, a dropped network drive), after
    which every later file would fail too and be skipped; or a file that differs only from the layout the
    archive's first file set (its column count, its markers), where the odd one may be the first file."""
    exc.own_fault = False
    return exc


def unlistable_folder(root):
    """An ``onerror`` for :func:`os.walk` over ``root``: a folder that cannot be listed (another user's, mode 0700)
    is refused in one line, where ``os.walk`` would leave out its files without a word."""
    from pathlib import Path

    def refuse(exc: OSError):
        raise not_the_file(FormatError(Path(exc.filename or root), f"cannot list the folder: {exc.strerror}; "
                                       "give read access to it or move it out of the folder read")) from None
    return refuse


def file_fault(exc: BaseException) -> bool:
    """Whether ``exc``, raised while one file of an archive was read, is that file's own fault (damaged, cut
    short, not of the format), which ``on_error = "skip"`` may leave out: a :class:`FormatError` not marked
    by :func:`not_the_file` (nor a :class:`MissingInputError`)."""
    return isinstance(exc, FormatError) and exc.own_fault


def read_or_skip(on_error: str, read, *args, failed: str = "cannot be read"):
    """``(read(*args), None)``; or ``(None, why)`` where ``read`` raised a :class:`FormatError` that is the
    file's own fault (:func:`file_fault`) and ``on_error`` is ``"skip"``, ``why`` being ``failed`` and the
    error (file, line, what was expected). Otherwise the error is raised, marked ``skippable`` where it is the
    file's own (its message may then name ``on_error``'s ``"skip"``: :func:`skip_hint`). The one decision of
    every reader (``SkeletonReader._read``), the image ingestion and the skeleton store's check."""
    try:
        return read(*args), None
    except FormatError as exc:
        if not file_fault(exc):
            raise
        if on_error != "skip":
            exc.skippable = True
            raise
        return None, f"{failed}: {exc}"


def skip_hint(exc: FormatError, how: str, then: str = "listed as skipped; what is stored is kept") -> FormatError:
    """``exc`` with the way to leave its file out, ``how`` as the user would write it (``--on-error skip``,
    ``data.on_error = "skip"``), where a reader stopped at it and the file alone is at fault (:func:`file_fault`;
    the reader marked it ``skippable``); ``exc`` itself otherwise. ``then`` says what becomes of them."""
    if not getattr(exc, "skippable", False):
        return exc
    return type(exc)(exc.path, f"{exc.reason}; or leave out the files that cannot be read: {how} ({then})",
                     line=exc.line)


class MissingInputError(FormatError, FileNotFoundError):
    """An input file or folder that a reader needs is not there (also a ``FileNotFoundError``)."""

    own_fault = False


class StoreError(StreamcovError):
    """A store cannot be used as asked: missing, another kind, incomplete, damaged."""


class IncompleteStoreError(StoreError):
    """The store has no completion marker: an ingestion did not finish."""


class NotSPDError(StreamcovError, ValueError):
    """A matrix that should be symmetric positive definite is not."""


class ModelError(StreamcovError, ValueError):
    """A model folder is missing, damaged, or does not fit the data it is applied to."""


class RunWarning(UserWarning):
    """What a run found doubtful in its own results (a learner that took no step or learned nothing, sequences
    left out): listed in the result's ``warnings`` and given to Python's warnings, so that a notebook shows it
    (``streamcov run`` prints each as a warning line)."""


class MissingExtraError(ConfigError, ImportError):
    """An optional extra of streamcov is not installed (e.g. ``pip install 'streamcov[cnn]'``)."""


class WeightsError(StreamcovError, ValueError):
    """A file of pretrained weights is not the expected one: wrong hash, damaged, or another format."""


class UnsafePickleError(WeightsError):
    """A weight pickle asks for something the restricted unpickler does not allow; nothing was run."""


# whether messages name the caller's arguments as command-line flags (the ``streamcov`` command) or as the
# Python keywords of the function called (a notebook): set by :func:`command_line`
_COMMAND_LINE = contextvars.ContextVar("streamcov_command_line", default=False)


# the subcommand running (``run``, ``ingest``): the prefix of the notes that :func:`say_note` prints
_COMMAND = contextvars.ContextVar("streamcov_command", default="")


@contextlib.contextmanager
def command_line(command: str = ""):
    """Within it, :func:`arg` names arguments as the ``streamcov`` command's flags (``--output runs/x``);
    outside, as the Python keywords they are (``output='runs/x'``). ``command``: the subcommand, whose name
    starts the notes printed (``streamcov run: note: ...``), as it starts its warnings and errors."""
    token, named = _COMMAND_LINE.set(True), _COMMAND.set(command)
    try:
        yield
    finally:
        _COMMAND.reset(named)
        _COMMAND_LINE.reset(token)


def say_note(message: str, note=None) -> None:
    """Give ``message`` to ``note`` (a caller's callable), or print it on stderr as ``note: ...``, after
    ``streamcov <command>: `` within :func:`command_line`."""
    if note is not None:
        note(message)
        return
    import sys

    command = _COMMAND.get()
    print(f"{f'streamcov {command}: ' if command else ''}note: {message}", file=sys.stderr)


def arg(keyword: str, value, flag: str | None = None, item: bool = False) -> str:
    """An argument as the user typed it, for the front of a message.

    Parameters
    ----------
    keyword : str
        The Python keyword (``output``, ``out_csv``, ``train_accuracy``).
    value :
        Its value; ``True`` for a switch (``--resume`` / ``resume=True``).
    flag : str, optional
        The command line's flag, when it is not ``--`` + ``keyword`` with dashes (``--set``, ``--out``).
    item : bool
        ``value`` is one item of a list argument (``overrides``): ``overrides item 'k=v'`` in Python.
    """
    if _COMMAND_LINE.get():
        name = arg_name(keyword, flag)
        return name if value is True else f"{name} {value}"
    shown = os.fspath(value) if isinstance(value, os.PathLike) else value
    return f"{keyword} item {shown!r}" if item else f"{keyword}={shown!r}"


def arg_name(keyword: str, flag: str | None = None) -> str:
    """The name alone of :func:`arg`'s argument: ``--output`` on the command line, ``output`` in Python."""
    if _COMMAND_LINE.get():
        return flag or "--" + keyword.replace("_", "-")
    return keyword


def toml_value(v) -> str:
    """A value as a pipeline file writes it, for messages that show a key with its value: ``"text"``, ``true``,
    ``["maps"]``, ``{subset = "cvpr12"}`` (Python's repr would show ``'text'``, ``True``, ``('maps',)``,
    ``{'subset': 'cvpr12'}``, which is not what the user wrote); TOML has no null: None is ``(not set)``."""
    if hasattr(v, "item") and getattr(v, "shape", None) == ():   # a numpy scalar: np.float64(0.5) is 0.5
        v = v.item()
    if isinstance(v, (str, os.PathLike)):
        return json.dumps(os.fspath(v), ensure_ascii=False)   # a TOML basic string: quotes and \ escaped
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k if re.fullmatch(r'[A-Za-z0-9_-]+', str(k)) else toml_value(str(k))} = "
                               f"{toml_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (datetime.date, datetime.time)):   # a TOML date or time, as written (not datetime.date(...))
        return v.isoformat()
    return "(not set)" if v is None else repr(v)


def case_twins(names, where: dict | None = None) -> str:
    """Names that differ only in case, for a warning: ``'C0' and 'c0'; ...`` (three groups at most), each name
    followed by ``where[name]`` when given (`` (line 5)``); empty when there are none. Two classes to the code,
    most often one to the user (a typo, or one folder on a case-insensitive file system)."""
    by_case: dict = {}
    for n in sorted(set(names)):
        by_case.setdefault(n.casefold(), []).append(n)
    same = [g for g in by_case.values() if len(g) > 1]
    shown = "; ".join(" and ".join(f"{n!r}{(where or {}).get(n, '')}" for n in g) for g in same[:3])
    return shown + (" ..." if len(same) > 3 else "")


def did_you_mean(word, choices, *, cutoff: float = 0.6, show=repr) -> str:
    """`` (did you mean 'x'?)`` for the choice closest to a misspelt ``word`` (difflib's ratio of at least
    ``cutoff``), or ``""`` when none is close: the one hint of every message that refuses an unknown name.
    ``show`` writes the choice (``repr``; :func:`toml_value` for a value of a pipeline file)."""
    import difflib

    choices = [str(c) for c in choices]
    # a choice that differs only by case first (model.c for model.C: one letter, too short for difflib's ratio)
    close = [c for c in choices if c.lower() == str(word).lower() and c != str(word)][:1] or \
        difflib.get_close_matches(str(word), choices, n=1, cutoff=cutoff)
    return f" (did you mean {show(close[0])}?)" if close else ""


def ingest_option(keyword: str, value=None) -> str:
    """An image ingestion option named for both routes to it: the ingestion's argument as typed (:func:`arg`:
    ``--group-level 2`` on the command line, ``group_level=2`` in Python), then its pipeline key
    (``data.group_level = 2``); names alone when ``value`` is None. The same option reaches the ingestion
    from ``streamcov ingest``, from :func:`~streamcov.data.images.ingest_images` and from a pipeline's
    ``[data]``."""
    if value is None:
        return f"{arg_name(keyword)}, or data.{keyword} in a pipeline"
    return f"{arg(keyword, value)}, or data.{keyword} = {toml_value(value)} in a pipeline"


def path_arg(keyword: str, value, flag: str | None, what: str):
    """``value`` as a :class:`pathlib.Path`, refused with one line naming ``keyword`` as typed (:func:`arg`)
    when it is not a path (``None``, a number, bytes) or is empty (which would mean the current folder:
    ``what`` says what to give instead)."""
    from pathlib import Path

    if isinstance(value, bytes) or not isinstance(value, (str, os.PathLike)):
        raise ConfigError(f"{arg(keyword, value, flag)}: expected a path (a str or pathlib.Path), got "
                          f"{type(value).__name__}")
    if not os.fspath(value).strip():
        raise ConfigError(f"{arg_name(keyword, flag)}: empty path; give {what}")
    return Path(value)


def bool_arg(keyword: str, value, flag: str | None = None) -> bool:
    """``value`` as a bool, refused with one line unless it is one (``"no"`` would read as true)."""
    import numpy as np

    if not isinstance(value, (bool, np.bool_)):
        raise ConfigError(f"{arg(keyword, value, flag)}: expected True or False")
    return bool(value)


def int_arg(keyword: str, value, note: str = "") -> int:
    """``value`` as an int >= 1, refused with one line unless it is one (a bool, a float, a string or a count
    below 1); ``note`` follows "expected an integer >= 1" in the message (what the count counts)."""
    from numbers import Integral

    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ConfigError(f"{arg(keyword, value)}: expected an integer >= 1{note}")
    return int(value)


# how deep tables and arrays may lie within each other in a pipeline file, a --set or a splits file: a
# pipeline's values lie a few levels deep, and the readers that walk them recurse (thousands of levels were a
# RecursionError traceback)
MAX_DEPTH = 64
DEEP = f"nested too deeply (tables or arrays more than {MAX_DEPTH} levels within each other)"


def too_deep(value, limit: int = MAX_DEPTH) -> bool:
    """Whether tables or lists lie more than ``limit`` levels within each other in ``value`` (walked without
    recursion)."""
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, (dict, list, tuple)):
            if depth >= limit:
                return True
            stack.extend((x, depth + 1) for x in (v.values() if isinstance(v, dict) else v))
    return False


def loads_within_depth(loads, text: str, limit: int = MAX_DEPTH):
    """``loads(text)`` (a TOML parse: its TOMLDecodeError raised), or None when its tables and arrays lie more
    than ``limit`` levels within each other, a parse that recursed past Python's limit included (thousands of
    levels). The one rule of pipeline files, ``--set`` values and splits files (:data:`DEEP` says it)."""
    try:
        doc = loads(text)
    except RecursionError:
        return None
    return None if too_deep(doc, limit) else doc


def toml_error(name, exc: Exception) -> "ConfigError":
    """A TOML syntax error as one line: ``file, line L, column C: invalid TOML: ...``."""
    import re

    msg = str(exc)
    m = re.search(r"\s*\(at line (\d+), column (\d+)\)$", msg)
    if m:
        msg = msg[:m.start()]
        name = f"{name}, line {m.group(1)}, column {m.group(2)}"
    else:
        msg = re.sub(r"\s*\(at end of document\)$", " at the end of the file", msg)
    return ConfigError(f"{name}: invalid TOML: {msg[0].lower() + msg[1:]} (TOML: key = value, text in double "
                       f"quotes, each key once per table)")


__all__ = ["ConfigError", "FormatError", "IncompleteStoreError", "MissingExtraError", "MissingInputError", "ModelError",
           "NotSPDError", "RunWarning", "StoreError", "StreamcovError", "UnsafePickleError", "WeightsError", "arg",
           "arg_name", "bool_arg", "check_utf8_name", "command_line", "file_fault", "int_arg", "not_the_file",
           "path_arg", "read_or_skip", "skip_hint", "toml_error", "toml_value"]
