"""The one loader of pipeline files: TOML, ``--set`` overrides, ``--store``, validation.

:func:`load_config` reads a pipeline file (or a TOML text, or a dict),
applies ``--set section.key=value`` overrides and ``--store``, picks the
task's schema (:mod:`streamcov.tasks.schema`) from the registry and
validates every table against it. A value the schema refuses gives one
:class:`~streamcov.errors.ConfigError` line that names where the value came
from (``pipelines/x.toml, line 12`` or ``--set model.epochs=2.5``), the key
as written, the value, what was expected, and, for an unknown key, the
closest known one. A ``[model]`` key that the chosen learner does not read
(or a ``[method]`` key that the chosen method does not read, a ``[split]``
key of another kind, ...: :data:`~streamcov.tasks.schema.KEYED_ERRORS`) is
refused the same way, naming where that key was written; when a ``--set``
changes the file's choice (``model.learner``, ``method.name``,
``method.classifier``, ``split.kind``: :data:`~streamcov.tasks.schema.SWITCH_KEYS`),
the file's keys of that table that the new choice does not read are dropped
instead, with one note. Relative paths are resolved here, once.

A float literal that float64 cannot hold (``1e-400`` reads as 0, ``1e400`` as
infinity) is refused where it is written (:func:`refuse_unrepresentable`), in
a file as in a ``--set``. The checks that run later, against the store or the
data, name the key first (``descriptor.center = [99]: ...``);
:meth:`Origins.naming` puts where that key's value came from in front.
"""
from __future__ import annotations

import contextlib
import math
import re
import tomllib
import typing
from pathlib import Path

from pydantic import BaseModel, ValidationError

from ..errors import (DEEP, MAX_DEPTH, ConfigError, NotSPDError, StreamcovError, arg, did_you_mean,
                      loads_within_depth, path_arg, say_note, toml_error, toml_value)
from .registry import get_task

# keys that moved; an old pipeline file gets told where they went
RENAMED = {
    ("dataset",): "[data] (with `store` for an image store, `source` for a folder)",
    ("dataset", "path"): "data.store (an image store) or data.source (a folder)",
    ("protocol",): "[split]",
    ("features",): "[pixels] (the per-pixel features of the image tasks)",
    ("dask", "block_sequences"): "dask.block_size",
    ("dask", "block_images"): "dask.block_size",
    ("split", "fold"): "split.folds = [K]",
    ("split", "max_splits"): "split.folds = [0, 1, ...]",
}


class _Unrepresentable(float):
    """A TOML float literal that float64 cannot hold: the 0 or infinity it reads as, and ``literal``, as written."""

    literal: str


def _parse_float(literal: str) -> float:
    """tomllib's ``parse_float``: the float of ``literal``, or an :class:`_Unrepresentable` when its digits say
    a nonzero finite number but float64 reads it as 0 (below 5e-324) or as infinity (above 1.8e308)."""
    value = float(literal)
    mantissa = re.split("[eE]", literal)[0]
    if (value == 0 and re.search("[1-9]", mantissa)) or (math.isinf(value) and "inf" not in literal):
        value = _Unrepresentable(value)
        value.literal = literal
    return value


def loads(text: str) -> dict:
    """``tomllib.loads``, with the float literals that float64 cannot hold marked (:func:`refuse_unrepresentable`)."""
    return tomllib.loads(text, parse_float=_parse_float)


def refuse_unrepresentable(value, where, path: tuple = ()) -> None:
    """Refuse a float literal of a TOML value that float64 cannot hold, in one line.

    ``1e-400`` would be read as 0 and ``1e400`` as infinity without a word (tomllib rounds), and a run
    would go on with them until a late error far from the cause (or none). The one check for pipeline
    files, pipeline texts, ``--set`` and ``--option`` values.

    Parameters
    ----------
    value : a value of :func:`loads` (tables and lists are searched)
    where : callable
        ``where(key path)``: where that key was written (``p.toml, line 12``, ``--set ...``).
    path : tuple
        The key path of ``value`` (list indices included).
    """
    if isinstance(value, _Unrepresentable):
        keys = tuple(p for p in path if not isinstance(p, int))
        dotted = ".".join(str(p) for p in path)
        sign, mag = ("-", "its magnitude is ") if value.literal.lstrip().startswith("-") else ("", "")
        if value == 0:
            why = (f"{mag}below float64's smallest positive value (5e-324), so it would be read as 0; write 0 if "
                   f"zero is meant, or check the exponent")
        else:
            why = (f"{mag}above float64's largest value (1.8e308), so it would be read as {sign}infinity; write "
                   f"{sign}inf if {'minus ' if sign else ''}infinity is meant, or check the exponent")
        raise ConfigError(f"{where(keys)}: {dotted + ' = ' if dotted else ''}{value.literal}: {why}")
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        refuse_unrepresentable(v, where, (*path, k))


def _quoted_hint(text: str, flag: str, key: str | None) -> str:
    """The assignment written again with ``text`` quoted, when ``text`` reads as text (a path, words): a shell
    removes the double quotes of ``--set data.store="/x.zarr"``, so a value the user did quote arrives bare."""
    if not key or re.match(r"[+\-]?(\d|\.\d|inf|nan)", text) or text[0] in "[{" or any(q in text for q in "\"'\\"):
        return ""
    if flag.startswith("--"):   # the command line's --set or --option
        name = flag.split(" ", 1)[0]
        return f", e.g. {name} '{key}=\"{text}\"' (in a shell, single quotes around it keep the double quotes)"
    return f", e.g. '{key}=\"{text}\"'"


def _short(flag: str, keep: int = 120) -> str:
    """A flag shown in a message, cut to ``keep`` characters (a value thousands of brackets deep was a line of
    10,000)."""
    return flag if len(flag) <= keep else f"{flag[:keep]}... ({len(flag)} characters)"


def parse_value(text: str, flag: str | None = None, key: str | None = None):
    """A ``--set`` (or ``--option``) value: a TOML literal (number, bool, list, quoted string) or a bare word.

    ``flag``: the assignment as the user typed it (``--set k=v``), in front of every message (default: the
    value as an item of ``overrides``); ``key``: the dotted key it is given to, named with ``flag`` when a
    float literal cannot be held (:func:`refuse_unrepresentable`).
    """
    if flag is None:
        flag = arg("overrides", text, flag="--set", item=True)
    text = text.strip()
    if not text:
        raise ConfigError(f"{flag}: empty value; give a TOML literal, e.g. 2000, true, \"text\" or [0, 1]")
    try:
        # the value one level below the document's table, and as deep as its key leaves room for
        doc = loads_within_depth(loads, f"v = {text}", MAX_DEPTH + 1 - (len(key.split(".")) if key else 0))
    except tomllib.TOMLDecodeError:
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-/]*", text):
            return text
        raise ConfigError(f"{flag}: value {text!r} is not a TOML literal; write numbers as 2000, "
                          f"booleans as true, lists as [0, 1] and text in double quotes"
                          f"{_quoted_hint(text, flag, key)}") from None
    if doc is None:
        raise ConfigError(f"{_short(flag)}: the value is {DEEP}; give a number, text, or a list or table a few "
                          f"levels deep")
    if set(doc) != {"v"}:   # a line break in the value: what follows it was a key of its own, dropped silently
        shown = flag.replace("\r", "\\r").replace("\n", "\\n")   # the error stays one line
        raise ConfigError(f"{shown}: the value holds a line break followed by more TOML "
                          f"({', '.join(k for k in doc if k != 'v')}); give one value per --set")
    value = doc["v"]
    refuse_unrepresentable(value, lambda _: flag, tuple(key.split(".")) if key else ())
    return value


def _set(raw: dict, parts: list[str], value, flag: str):
    node = raw
    for i, p in enumerate(parts[:-1]):
        if p not in node:
            node[p] = {}
        if not isinstance(node[p], dict):
            raise ConfigError(f"{flag}: {'.'.join(parts[:i + 1])} is a value, not a table")
        node = node[p]
    old = node.get(parts[-1])
    if isinstance(value, dict) and isinstance(old, dict):
        # a table given to a table merges into it, key by key, as TOML's own dotted keys would: the
        # file's other keys stay (replacing the whole table would drop them without a word)
        for k, v in value.items():
            _set(old, [k], v, flag)
        return
    node[parts[-1]] = value


def _leaf_values(parts: list, value) -> dict:
    """``key path -> value`` of every key a --set assigns: the key, or every key of a table value (merged key by
    key, so the table's other keys keep their origin)."""
    if isinstance(value, dict) and value:
        return {leaf: v2 for k, v in value.items() for leaf, v2 in _leaf_values([*parts, k], v).items()}
    return {tuple(parts): value}


def overrides_list(overrides) -> list:
    """``overrides`` as a list of ``key=value`` strings, read once (a generator); a lone string (read a character
    at a time) or an item of another type is refused with one line."""
    if isinstance(overrides, str):
        raise ConfigError(f"overrides={overrides!r}: give a list of key=value strings, e.g. [{overrides!r}]")
    try:
        items = list(overrides)
    except TypeError:
        raise ConfigError(f"overrides={overrides!r}: give a list of key=value strings") from None
    for item in items:
        if not isinstance(item, str):
            raise ConfigError(f"{arg('overrides', item, flag='--set', item=True)}: expected a key=value string, "
                              f"e.g. 'model.epochs=30'")
    return items


def apply_override(raw: dict, assignment: str, origins: dict | None = None, earlier: dict | None = None) -> list:
    """Apply ``key.sub=value`` (a ``--set``, an item of ``overrides``) in place; record where the value came
    from. ``earlier``: ``key path -> (flag, value)`` of the overrides applied before, updated. The later of
    two values of one key wins (a preset of --set's in a shell variable, then one of its keys changed); the
    notes returned say so, since it had been done without a word (a typo in a long command line)."""
    flag = arg("overrides", assignment, flag="--set", item=True)
    if "=" not in assignment:
        raise ConfigError(f"{flag}: expected key=value, e.g. features.n_components=2000")
    key, _, text = assignment.partition("=")
    parts = [p.strip() for p in key.strip().split(".")]
    if not key.strip() or any(not p for p in parts):
        raise ConfigError(f"{flag}: empty key; write section.key=value, e.g. model.epochs=30")
    if len(parts) > MAX_DEPTH:
        raise ConfigError(f"{_short(flag)}: the key has {len(parts)} parts, {DEEP}; write section.key=value, "
                          f"e.g. model.epochs=30")
    value = parse_value(text, flag, ".".join(parts))
    if value == {}:
        node = raw
        for p in parts:
            node = node.get(p) if isinstance(node, dict) else None
        if isinstance(node, dict) and node:   # merged into the file's table key by key: nothing would change
            name = ".".join(parts)
            raise ConfigError(f"{flag}: an empty table changes nothing: a table given by --set merges into the "
                              f"file's {name} key by key, and a --set cannot remove a file's key; set the keys to "
                              f"change ({name}.KEY=VALUE), or edit the file")
    assigned = _leaf_values(parts, value)
    notes = []
    if earlier is not None:
        # an empty table merges nothing (--set model={}): it replaces no key
        leaves = {leaf: v for leaf, v in assigned.items() if v != {}}
        replaced = {}
        for leaf, v in leaves.items():
            # a key given twice, or a key and the table holding it (--set model.C=10 --set model={C=100})
            for k, (before, x) in list(earlier.items()):
                if (k[:len(leaf)] == leaf or leaf[:len(k)] == k) and (x != v or type(x) is not type(v)):
                    replaced.setdefault(before, []).append(".".join(map(str, leaf)))
                    del earlier[k]
        # the keys named when they are not just the one this --set gave (a table's, or a key of a table given before)
        notes = [f"{flag} replaces {before}" + ("" if keys == [".".join(parts)] else f" ({', '.join(keys)})")
                 for before, keys in replaced.items()]
        earlier.update({leaf: (flag, v) for leaf, v in leaves.items()})
    _set(raw, parts, value, flag)
    if origins is not None:
        for leaf in assigned:
            origins[leaf] = flag
    return notes


def _outside_strings(text: str) -> str:
    """``text`` (one line of TOML) with the contents of its one-line strings blanked (the same length: a position
    in it is one in ``text``) and its comment cut: what remains of its brackets and triple quotes is structure."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == "#":
            break
        if c in "\"'" and text[i:i + 3] != c * 3:
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if c == '"' and text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _closing(text: str, quote: str, start: int = 0) -> int:
    """Where ``quote`` (a triple quote) closes a multi-line string in ``text`` from ``start``, or -1; in a basic
    string (\"\"\") a quote escaped by a backslash does not close it."""
    i = text.find(quote, start)
    while i >= 0 and quote == '\"\"\"':
        k = i
        while k > 0 and text[k - 1] == "\\":
            k -= 1
        if (i - k) % 2 == 0:
            return i
        i = text.find(quote, i + 1)
    return i


def key_lines(text: str) -> dict:
    """``(table..., key) -> 1-based line`` of every ``key = value`` of a TOML text, and of table headers.

    Every prefix of a dotted key is recorded too (``[data]`` then ``model.epochs = 1`` makes the key
    ``data.model``). The lines inside a multi-line string or a multi-line array or table are values, not keys
    or headers (a ``key = ...`` in a multi-line text was taken as the key's line)."""
    out: dict = {}
    table: tuple = ()
    in_string = None   # the triple quote of a multi-line string being read
    depth = 0          # brackets and braces of a value still open
    for lineno, line in enumerate(text.split("\n"), 1):
        rest = line
        if in_string is not None:
            end = _closing(line, in_string)
            if end < 0:
                continue
            rest, in_string = line[end + 3:], None
        elif depth == 0:
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            m = re.match(r"^\[\[?\s*([^\]]+?)\s*\]\]?", s)
            if m:
                table = tuple(p.strip().strip("\"'") for p in m.group(1).split("."))
                out.setdefault(table, lineno)
                continue
            m = re.match(r"""^(["']?[A-Za-z0-9_\-]+["']?(?:\s*\.\s*["']?[A-Za-z0-9_\-]+["']?)*)\s*=""", s)
            if m:
                key = tuple(p.strip().strip("\"'") for p in m.group(1).split("."))
                for i in range(1, len(key) + 1):
                    out.setdefault(table + key[:i], lineno)
                rest = s[m.end():]
        while True:   # the value's structure: a multi-line string opened, brackets left open
            bare = _outside_strings(rest)
            quotes = [(bare.find(q), q) for q in ('"""', "'''") if q in bare]
            if not quotes:
                depth += sum(bare.count(c) for c in "[{") - sum(bare.count(c) for c in "]}")
                break
            at, q = min(quotes)
            depth += sum(bare[:at].count(c) for c in "[{") - sum(bare[:at].count(c) for c in "]}")
            end = _closing(rest, q, at + 3)
            if end < 0:   # opened here, closed on a later line
                in_string = q
                break
            rest = rest[end + 3:]
        depth = max(depth, 0)
    return out


class Origins:
    """Where each value of a configuration came from, for error messages.

    ``file``: the pipeline file (None for a dict); ``lines``: ``key path -> line`` (:func:`key_lines`);
    ``written``: the key paths of the values the file gives; ``flags``: ``key path -> flag``
    of the values a ``--set`` (or another flag) gives.
    """

    def __init__(self, file: str | None, lines: dict | None = None, written=()):
        self.file = file
        self.lines = dict(lines or {})
        self.written = set(written)
        self.flags: dict = {}

    def where(self, path: tuple) -> str:
        path = tuple(path)
        for n in range(len(path), 0, -1):
            if path[:n] in self.flags:
                return self.flags[path[:n]]
        for key, flag in self.flags.items():   # a table that only a --set created
            if path and key[:len(path)] == path:
                return flag
        if self.file is None:
            return "pipeline"
        for n in range(len(path), 0, -1):
            if path[:n] in self.lines:
                return f"{self.file}, line {self.lines[path[:n]]}"
        return self.file

    def given(self, path: tuple) -> str | None:
        """Where the value of ``path`` was given (:meth:`where`): by a flag, or in the file; None for a
        value nobody gave (a default), and for one of a dict (nothing more to say than its key)."""
        path = tuple(path)
        if any(path[:n] in self.flags for n in range(1, len(path) + 1)):
            return self.where(path)
        if self.file is not None and any(w[:len(path)] == path or path[:len(w)] == w for w in self.written):
            return self.where(path)
        return None

    @contextlib.contextmanager
    def naming(self):
        """Put where the value came from in front of a :class:`ConfigError` raised inside that names a key
        first (``descriptor.center = [99]: centre joint 99 outside 0..19 ...``): the checks that need the
        store or the data, made after loading, name the key but cannot know whether it came from the file
        or from ``--set``. One about the data that names keys as suspects further on (``... e.g.
        descriptor.gamma far above the covariances``) gets where those the user gave came from at its end.
        A key nobody gave (a default) is left as it is. A :class:`NotSPDError` is treated as such a message
        about the data: its remedy names the key ``descriptor.gamma``, which gets where it was given."""
        try:
            yield
        except (ConfigError, NotSPDError) as exc:
            text = str(exc)
            m = _KEY_FIRST.match(text)
            where = self.given(tuple(m.group(1).split("."))) if m else None
            if where is not None:
                exc.args = (f"{where}: {text}", *exc.args[1:])
            elif m is None:
                given = [(k, self.given(tuple(k.split(".")))) for k in dict.fromkeys(_KEY_ANY.findall(text))]
                shown = [w if w.startswith("--") else f"{k} at {w}" for k, w in given if w is not None]
                if shown:
                    exc.args = (f"{text} (given: {'; '.join(shown)})", *exc.args[1:])
            raise


# a message that starts with a dotted key: "descriptor.center = [99]: ...", "data.source 'x': ..."
_KEY_FIRST = re.compile(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?=[ :]|$)")
# a dotted key anywhere in a message (file names such as p.toml match too, but no one gave them as keys); a
# key may start with a capital (model.C, method.D: they were never named with where they were given)
_KEY_ANY = re.compile(r"(?<![\w./])([a-z_]+(?:\.[A-Za-z_]\w*)+)(?![\w./])")


def _written(value, path: tuple = ()) -> list:
    """The key paths of the values of a table (those of its tables, not the tables themselves)."""
    if isinstance(value, dict) and value:
        return [leaf for k, v in value.items() for leaf in _written(v, (*path, k))]
    return [path] if path else []


def _plain(value):
    """A copy of a Python-API configuration in the types a TOML file gives: numpy scalars as Python
    numbers, paths as text, tuples as lists (a notebook's ``np.int64(100)``, ``Path(...)`` or ``(6,)``)."""
    import copy
    import os

    import numpy as np

    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return copy.deepcopy(value)


def read_toml(path=None, text: str | None = None, name: str | None = None):
    """``(raw dict, origins)`` of a pipeline file or text (``name``: how messages name the text)."""
    if text is None:
        path = Path(path)
        if path.is_dir():
            raise ConfigError(f"{path}: a folder, not a pipeline file; give a .toml file "
                              f"(examples in pipelines/)")
        if not path.exists():
            raise ConfigError(f"{path}: pipeline file not found")
        if not path.is_file():
            raise ConfigError(f"{path}: not a regular file (a device or a pipe); give a .toml file "
                              f"(examples in pipelines/)")
        try:
            data = path.read_bytes()
            text = data.decode("utf-8-sig")   # a byte-order mark is accepted
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read it ({exc.strerror})") from None
        except UnicodeDecodeError as exc:
            line = data[:exc.start].count(b"\n") + 1
            raise ConfigError(f"{path}, line {line}: not UTF-8 text ({exc.reason} at byte {exc.start}); save "
                              f"the file as UTF-8") from None
    name = str(path) if path is not None else name or "<pipeline text>"
    try:
        raw = loads_within_depth(loads, text)
    except tomllib.TOMLDecodeError as exc:
        raise toml_error(name, exc) from None
    if raw is None:
        raise ConfigError(f"{name}: {DEEP}; a pipeline's tables and values lie a few levels deep: check the "
                          f"file")
    origins = Origins(name, key_lines(text), _written(raw))
    refuse_unrepresentable(raw, origins.where)
    return raw, origins


def load_config(source=None, overrides=(), store=None, *, text: str | None = None, task: str | None = None,
                flags: dict | None = None, note=None, scheduler: str | None = None, output=None):
    """Read, override and validate a pipeline; returns the task's typed configuration.

    Parameters
    ----------
    source : path, dict or None
        A pipeline file, or an already parsed dict (the Python API).
    overrides : sequence of str
        ``--set section.key=value`` assignments, applied in order.
    store : path, optional
        ``--store``: run on this store instead of the file's input.
    text : str, optional
        TOML text instead of a file (the embedded defaults).
    task : str, optional
        Task name when the pipeline gives none (default: skeleton-classification).
    flags : dict, optional
        ``key path -> command-line flag`` for values a command set from its
        flags, so that errors name the flag (``("study", "maps"): "--maps"``).
    note : callable, optional
        ``note(message)`` gets each note of the loading (a value that is dropped, replaced or not read, and
        why), once the configuration is valid; default: printed to stderr as ``note: ...``.
    scheduler : str, optional
        ``--scheduler``, which replaces ``dask.scheduler``: with ``synchronous`` or
        an address, the file's ``dask.workers`` is not read and is dropped, with a note.
    output : path, optional
        ``--output``: the output folder as typed (not read as TOML); like the file's ``output`` it may hold
        ``{name}``, the pipeline's name, and no other brace.
    """
    if source is not None and not isinstance(source, dict) and text is None:
        source = path_arg("source", source, None, "the pipeline file (.toml)")
    return load_config_and_origins(source, overrides, store, text=text, task=task, flags=flags, note=note,
                                   scheduler=scheduler, output=output)[0]


def load_config_and_origins(source=None, overrides=(), store=None, *, text: str | None = None,
                            task: str | None = None, flags: dict | None = None, note=None,
                            scheduler: str | None = None, output=None, text_name: str | None = None,
                            flags_given: dict | None = None):
    """``(configuration, origins)``: :func:`load_config`, and the :class:`Origins` of its values, whose
    :meth:`Origins.naming` names them in the errors of the checks made later
    (:func:`streamcov.tasks.runner.run`). ``flags_given``: the command line's ``scheduler`` and ``workers``
    as typed (None: not given), refused beside a ``--set`` of the same ``[dask]`` key."""
    if source is not None and text is not None:   # one of them would be ignored
        raise ConfigError("a pipeline and text=... both given: give one pipeline (a file, a dict or a TOML text)")
    overrides = overrides_list(overrides)
    store = None if store is None else path_arg("store", store, None, "the folder of a store (written by "
                                                                          "`streamcov ingest`)")
    file = None
    if isinstance(source, dict):
        raw, origins = _plain(source), Origins(None)
    elif text is not None:
        raw, origins = read_toml(None, text, text_name)
    elif source is not None:
        file = Path(source)
        raw, origins = read_toml(file)
    else:
        raise ConfigError("no pipeline given: pass a pipeline file, a dict or a TOML text")
    origins.flags.update(flags or {})
    # the tables as the file wrote them, before the overrides (a --set that switches a choice drops them)
    file_tables = {k: dict(v) for k, v in raw.items() if isinstance(v, dict)}
    earlier: dict = {}
    replaced = [n for assignment in overrides for n in apply_override(raw, assignment, origins.flags, earlier)]
    if output is not None:
        if ("output",) in origins.flags:   # a --set output=... beside --output: one of them would be ignored
            raise ConfigError(f"{origins.flags[('output',)]} {arg('output', output)}: two output folders; give one")
        raw["output"] = str(output)
        origins.flags[("output",)] = arg("output", output)
    # a --set of the scheduler's keys beside the command line's own flag as typed (``flags_given``: --workers
    # alone means a local-cluster, which is no --scheduler): one of them would be ignored
    for key, what in (("scheduler", "schedulers"), ("workers", "worker counts")):
        value = (flags_given or {}).get(key)
        if value is not None and ("dask", key) in origins.flags:
            raise ConfigError(f"{origins.flags[('dask', key)]} {arg(key, value)}: two {what}; give one")
    name = raw.get("task", task or "skeleton-classification")
    spec = get_task(name, where=origins.where(("task",)))
    if store is not None:
        if ("data", "store") in origins.flags:   # a --set data.store=... beside --store: one would be ignored
            raise ConfigError(f"{origins.flags[('data', 'store')]} {arg('store', store)}: two stores; give one")
        if spec.store_key is None:
            raise ConfigError(f"{arg('store', store)}: task {name!r} generates its own data and reads no store")
        data = raw.setdefault("data", {})
        if not isinstance(data, dict):
            raise ConfigError(f"{origins.where(('data',))}: data must be a table")
        data["store"] = str(store)
        for key in spec.store_voids():
            # a --set of what --store replaces (the source, its reader's settings): one of them would be ignored
            given = next((p for p in origins.flags if p[:2] == ("data", key)), None)
            if given is not None:
                raise ConfigError(f"{origins.flags[given]} {arg('store', store)}: --store replaces data.{key} (the "
                                  f"store is read, not the source); give one")
            data.pop(key, None)
        data.update(dict(spec.store_sets))
        origins.flags[("data", "store")] = arg("store", store)
        _check_store_flag(store, spec)
    raw.setdefault("task", name)
    if file is not None:
        raw.setdefault("name", file.stem)
    _check_no_nul(raw, origins)
    schema = spec.schema()
    notes = replaced + _drop_keys_of_a_switched_choice(raw, file_tables, schema, origins)
    notes += _drop_file_workers_of_a_set_scheduler(raw, file_tables, origins)
    try:
        cfg = schema.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_first_error(exc, schema, origins)) from None
    cfg, dropped = _drop_reader_keys_without_source(cfg, origins)
    notes += dropped
    cfg, dropped = _drop_workers_of_another_scheduler(cfg, scheduler, origins)
    notes += dropped
    notes += _features_of_the_exact_svm(cfg, origins)
    notes += _keys_turned_off(cfg, origins)
    cfg = _resolve_paths(cfg, file, origins, notes)
    if store is None:
        _check_store_kind(cfg, spec, origins)
    _check_source_not_a_store(cfg, spec, origins)
    _check_feature_map(cfg, origins)
    for message in notes:   # only for a configuration that loads: an error stays one line
        say_note(message, note)
    return cfg, origins


def nul_at(value, path: tuple = ()) -> tuple | None:
    """The keys down to the first text (a value, or a key of a table) holding a NUL character in a parsed
    TOML value, or None: names and paths are made of such texts, and the operating system refuses a path with
    a NUL (a ValueError deep in the run otherwise). Read for pipeline files, ``--set`` and ``--option``."""
    if isinstance(value, str):
        return path if "\0" in value else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    for k, v in items:
        at = path + ((k,) if isinstance(value, dict) else ())
        found = nul_at(k, at) if isinstance(k, str) else None
        if found is None:
            found = nul_at(v, at)
        if found is not None:
            return found
    return None


def _check_no_nul(raw, origins: Origins) -> None:
    at = nul_at(raw)
    if at is not None:
        keys = ".".join(str(k).replace("\0", "\\u0000") for k in at)   # a key may hold it too: written as typed
        raise ConfigError(f"{origins.where(at)}: {keys} holds a NUL character (\\u0000), "
                          f"which no name or path may contain; remove it")


def _drop_keys_of_a_switched_choice(raw: dict, file_tables: dict, schema, origins: Origins) -> list[str]:
    """A ``--set`` switched a table's choice (``model.learner``, ``method.name`` or ``method.classifier``,
    ``split.kind``): drop the file's keys of that table that the new choice does not read.

    One file then runs with another learner, method or split from the command line (the README's
    ``$SGD`` runs an lbfgs file with sgd): its ``max_iter`` and ``tol`` do not apply to sgd. Only keys
    written in the file (or the dict) go; returns the notes that name them (one per table). A key that a
    ``--set`` or a flag gives and the choice does not read stays an error (the schema's keyed errors).
    """
    from .schema import SWITCH_KEYS, FeaturesTable, map_params_of, switched_reads

    notes = []
    for table, current in raw.items():
        cls = _submodel(schema, table)
        switch = SWITCH_KEYS.get(cls)
        file_table = file_tables.get(table)
        if (switch is None or not isinstance(current, dict) or not file_table or (table,) in origins.flags):
            continue
        flags = [origins.flags[(table, k)] for k in switch if (table, k) in origins.flags]
        if not flags or all(current.get(k) == file_table.get(k) for k in switch):
            continue
        new, old = switched_reads(cls, current), switched_reads(cls, file_table)
        if new is None:
            continue
        keys, reads = new
        if cls is FeaturesTable:   # a map's own further keys (rff-blocks' block_size): read by the maps that take them
            extra = tuple(k for k in file_table if k not in cls.model_fields)
            keys = (*keys, *extra)
            reads = (*reads, *(k for k in extra if k in map_params_of(current.get("map", "rgw"))))
            if old is not None:
                old = (old[0], (*old[1], *(k for k in extra if k in map_params_of(file_table.get("map", "rgw")))))
        dropped = [k for k in file_table if k in keys and k not in reads and (table, k) not in origins.flags
                   and k in current and (old is None or k in old[1])]
        if not dropped:
            continue
        for k in dropped:
            del current[k]
        choice = (f"learner {toml_value(current['learner'])}" if switch == ("learner",) else
                  " with ".join(f"{table}.{k} = {toml_value(current[k])}" for k in switch if k in current))
        notes.append(f"{', '.join(f'{table}.{k}' for k in dropped)} ({origins.file or 'pipeline'}) "
                     f"{'does' if len(dropped) == 1 else 'do'} not apply to {choice} from {' '.join(flags)}; "
                     f"dropped")
    return notes


def _drop_file_workers_of_a_set_scheduler(raw: dict, file_tables: dict, origins: Origins) -> list[str]:
    """``--set dask.scheduler=...`` switching to a scheduler that reads no worker count (synchronous, an address):
    the file's ``dask.workers`` is dropped with a note, as ``--scheduler`` drops it (it was refused beside the
    new scheduler, and a --set cannot remove a file's key: the switch could not be made)."""
    from ..stream.runtime import workers_unread

    dask, file_dask = raw.get("dask"), file_tables.get("dask") or {}
    if (not isinstance(dask, dict) or ("dask", "scheduler") not in origins.flags or ("dask", "workers") in
            origins.flags or "workers" not in file_dask or "workers" not in dask
            or not isinstance(dask.get("scheduler"), str)):
        return []
    has = workers_unread(dask["scheduler"])
    if has is None:
        return []
    del dask["workers"]
    return [f"dask.workers ({origins.file or 'pipeline'}) does not apply to dask.scheduler = "
            f"{toml_value(dask['scheduler'])} from {origins.flags[('dask', 'scheduler')]} ({has}); dropped"]


def _drop_reader_keys_without_source(cfg, origins: Origins):
    """The ``[data]`` keys of the reader of an archive (the table's ``READER_KEYS``: ``format`` and
    ``options`` of skeletons; ``format``, ``group_level``, ``exclude``, ``pixel_dtype`` of image folders)
    without ``data.source``: the reader is opened only to ingest ``source``, so they are not read; dropped
    with a note (a file may keep them to say how its store was written). Checked by the schema first: a
    value it refuses stays an error."""
    data = getattr(cfg, "data", None)
    keys = getattr(type(data), "READER_KEYS", ())
    fields = type(data).model_fields if data is not None else {}
    if not keys or data.source:
        return cfg, []
    dropped = [k for k in keys if k in data.model_fields_set]
    if not dropped:
        return cfg, []
    where = dict.fromkeys(origins.flags.get(("data", k), origins.file or "pipeline") for k in dropped)
    note = (f"{', '.join(f'data.{k}' for k in dropped)} ({', '.join(where)}) "
            f"{'is' if len(dropped) == 1 else 'are'} not read without data.source (the reader of an archive "
            f"is opened only to ingest data.source into data.store); dropped")
    data = data.model_copy(update={k: fields[k].get_default(call_default_factory=True) for k in dropped})
    return cfg.model_copy(update={"data": data}), [note]


def _features_of_the_exact_svm(cfg, origins: Origins) -> list[str]:
    """``model.learner = "exact-svm"`` computes the exact kernel and reads no ``[features]``: a key of it that a
    ``--set`` gives is refused (it was ignored without a word); a file's map other than ``none`` gets a note
    (the file's map serves its streamed learner; ``--set model.learner="exact-svm"`` runs the same file
    exactly)."""
    model, features = getattr(cfg, "model", None), getattr(cfg, "features", None)
    if model is None or features is None or getattr(model, "learner", None) != "exact-svm":
        return []
    keys = [*features.model_fields_set, *(features.model_extra or {})]
    given = [k for k in keys if ("features", k) in origins.flags and not (k == "map" and features.map == "none")]
    if given:
        raise ConfigError(f"{origins.where(('features', given[0]))}: features.{given[0]} is not read by "
                          f"model.learner = \"exact-svm\", which computes the exact kernel (no feature map): remove "
                          f"it, or choose a streamed learner (model.learner = \"lbfgs\" or \"sgd\")")
    if features.map != "none":
        return [f"[features] (map \"{features.map}\", {origins.file or 'pipeline'}) is not read by model.learner = "
                f"\"exact-svm\", which computes the exact kernel"]
    return []


def _keys_turned_off(cfg, origins: Origins) -> list[str]:
    """Keys that another key of their table turns off, each named with where it was given in a note.

    ``[tgp]``: ``tgp.degrees`` fixes the degrees, so the degree CV's ``cv``, ``cv_max_train`` and
    ``degree_grid`` (unless ``oracle_grid`` evaluates that grid) are not read; without the Gegenbauer basis
    in ``tgp.bases`` its weights are not read. ``[model]``: ``n_iter_no_change`` counts the epochs (or
    iterations) without progress on held-out rows, read only with ``validation_fraction > 0``; the SGD
    learner's ``eta0`` is not read by ``learning_rate = "optimal"``, its ``C`` and ``alpha`` not with
    ``penalty = "none"`` beside another learning rate; ``C`` is not read beside ``alpha``. ``[features]``:
    ``fit_sample`` is not read by a map fitted on no rows (:func:`~streamcov.features.registry.needs_data`).
    ``[dask]``: ``prefetch`` is read by the SGD learner alone. A note, not a refusal: the shipped files set
    these keys, and ``--set tgp.degrees=[2, 3]`` or ``--set model.learning_rate="optimal"`` on one of them is
    the way to run that setting (a ``--set`` cannot remove a file's key)."""
    rules = []   # (table, keys, why, the key that turns them off)
    t = getattr(cfg, "tgp", None)
    if t is not None and t.degrees is not None:
        rules.append(("tgp", ("cv", "cv_max_train") + (() if t.oracle_grid else ("degree_grid",)),
                      f"tgp.degrees = {toml_value(t.degrees)} fixes the degrees (no cross-validation)", "degrees"))
    if t is not None and "gegenbauer" not in t.bases:
        rules.append(("tgp", ("gegenbauer_weight_input", "gegenbauer_weight_output"),
                      f"tgp.bases = {toml_value(t.bases)} has no Gegenbauer basis", "bases"))
    m = getattr(cfg, "model", None)
    learner = getattr(m, "learner", None)
    if learner in ("sgd", "lbfgs") and m.validation_fraction == 0:
        rules.append(("model", ("n_iter_no_change",), "it counts the epochs without progress on held-out rows, "
                      "and model.validation_fraction = 0 holds none out", "validation_fraction"))
    if learner == "sgd" and m.learning_rate == "optimal":
        rules.append(("model", ("eta0",), 'model.learning_rate = "optimal" sets its own step sizes',
                      "learning_rate"))
    if learner == "sgd" and m.penalty == "none" and m.learning_rate != "optimal":
        # alpha = 1 / (C n) weighs the penalty, and sets the step sizes of "optimal" only
        rules.append(("model", ("C", "alpha"), f'model.penalty = "none" leaves no penalty to weigh (and '
                      f'model.learning_rate = "{m.learning_rate}" takes no step size from its weight)', "penalty"))
    elif learner in ("sgd", "lbfgs") and m.alpha is not None:
        rules.append(("model", ("C",), f"model.alpha = {toml_value(m.alpha)} gives the penalty's weight "
                      f"(alpha = 1 / (C n))", "alpha"))
    f = getattr(cfg, "features", None)
    if f is not None and learner != "exact-svm" and f.map != "none":
        from ..features.registry import needs_data

        if not needs_data({"map": f.map, "center": f.center, "bandwidth": f.bandwidth}):
            rules.append(("features", ("fit_sample",), f'map "{f.map}" with bandwidth "{f.bandwidth}"'
                          f'{" and center = false" if f.map in ("rgw", "maclaurin") else ""} is drawn from the '
                          f"width of the rows alone, fitted on none of them", "map"))
    d = getattr(cfg, "dask", None)
    if d is not None and learner in ("lbfgs", "exact-svm"):
        what = ("passes over the feature store in Dask tasks" if learner == "lbfgs" else
                "holds the descriptors in memory")
        rules.append(("dask", ("prefetch",), f'it counts the blocks read ahead of the SGD learner, and '
                      f'model.learner = "{learner}" {what}', ("model", "learner")))
    notes = []
    for table, keys, why, cause in rules:
        cause = cause if isinstance(cause, tuple) else (table, cause)
        values = getattr(cfg, table)
        given = [k for k in keys if k in values.model_fields_set]
        if not given:
            continue
        where = list(dict.fromkeys(origins.given((table, k)) or "pipeline" for k in given))
        lines = [w.rpartition(", line ")[2] for w in where if origins.file and w.startswith(f"{origins.file}, line ")]
        if len(where) > 1 and len(lines) == len(where):   # one file: "p.toml, lines 22, 23"
            where = [f"{origins.file}, lines {', '.join(lines)}"]
        notes.append(f"{', '.join(f'{table}.{k}' for k in given)} ({'; '.join(where)}) "
                     f"{'is' if len(given) == 1 else 'are'} not read: {why} "
                     f"({origins.given(cause) or 'the default'})")
    return notes


def _drop_workers_of_another_scheduler(cfg, scheduler: str | None, origins: Origins):
    """``--scheduler synchronous`` or an address replaces the file's ``dask.scheduler``: its ``dask.workers``
    (threads of "threads", processes of "local-cluster") is then not read. The file's is dropped with a
    note, as the schema refuses it beside ``dask.scheduler`` and the command line beside ``--workers``;
    one that a ``--set`` gives is refused."""
    from ..stream.runtime import workers_unread

    dask = getattr(cfg, "dask", None)
    has = workers_unread(scheduler)
    if has is None or dask is None or dask.workers is None:
        return cfg, []
    flag = origins.flags.get(("dask", "workers"))
    if flag is not None:
        raise ConfigError(f"{flag} {arg('scheduler', scheduler)}: dask.workers sets the threads of "
                          f"{arg('scheduler', 'threads')} or the processes of a local-cluster; {has}")
    note = (f"dask.workers ({origins.file or 'pipeline'}) does not apply to {arg('scheduler', scheduler)} ({has}); "
            f"dropped")
    return cfg.model_copy(update={"dask": dask.model_copy(update={"workers": None})}), [note]


def _check_store_kind(cfg, spec, origins: Origins) -> None:
    """An existing ``data.store`` of another kind than the task reads, named where it was given (the file's
    line, or the ``--set``) as ``--store`` is: it was refused later by the store's path alone."""
    data = getattr(cfg, "data", None)
    path = getattr(data, "store", None) if data is not None else None
    if spec.store_kind is None or any(getattr(data, k, None) != v for k, v in spec.store_sets):
        return   # data read from elsewhere (format = "folders")
    kind = _store_kind_at(path)
    if kind is not None and kind != spec.store_kind:
        raise ConfigError(f"{origins.where(('data', 'store'))}: data.store = {toml_value(path)}: "
                          f"{_wrong_kind(kind, spec)}")


_WRITERS = {"skeleton": "`streamcov ingest skeleton` or `synth`", "image": "`streamcov ingest images`"}
_SOURCES = {"skeleton": "an archive to ingest", "image": "a folder of images (a folder per class) to ingest"}


def _check_source_not_a_store(cfg, spec, origins: Origins) -> None:
    """A ``data.source`` that is a store of streamcov's (the ingested store given where its archive or image
    folder goes), named where it was given and pointed to ``data.store``: it was read as an archive (\"index
    file not found\") or as a folder of class folders (\"no images in class folders\")."""
    data = getattr(cfg, "data", None)
    path = getattr(data, "source", None) if data is not None else None
    if spec.store_kind is None or getattr(data, "format", None) in ("store", "skimage-textures"):
        return   # data.source not read
    kind = _store_kind_at(path)
    if kind is None:
        return
    where = f"{origins.where(('data', 'source'))}: data.source = {toml_value(path)}"
    what = f"{_a_store(kind)} (written by {_WRITERS[kind]})"
    if kind != spec.store_kind:
        raise ConfigError(f"{where}: {what}, but task {spec.name!r} reads {spec.store_kind} stores, and "
                          f"data.source takes {_SOURCES[spec.store_kind]}")
    sets = "".join(f" with data.{k} = {toml_value(v)}" for k, v in spec.store_sets)
    store = getattr(data, "store", None)
    fix = ("remove data.source (data.store names this store already)"
           if store and Path(store).resolve() == Path(path).resolve()
           else f"give it as data.store = {toml_value(path)}{sets} and remove data.source")
    raise ConfigError(f"{where}: {what}, not {_SOURCES[kind]}; {fix}")


def _check_store_flag(store, spec) -> None:
    from ..stream.source import store_kind

    where = arg("store", store)
    if not Path(store).exists():
        raise ConfigError(f"{where}: no such store; write one with `streamcov ingest`")
    if not Path(store).is_dir():
        raise ConfigError(f"{where}: a file, not a store (a store is a folder, written by `streamcov ingest`)")
    try:
        kind = store_kind(store)
    except StreamcovError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if spec.store_kind is not None and kind != spec.store_kind:
        raise ConfigError(f"{where}: {_wrong_kind(kind, spec, store)}")


def _store_kind_at(path) -> str | None:
    """The kind of the streamcov store a configuration path names, or None where there is none to read (no
    path, no ``zarr.json``; damaged, foreign or unreadable: said where the store is opened)."""
    from ..stream.source import store_kind

    if not path or not (Path(path) / "zarr.json").is_file():
        return None
    try:
        return store_kind(path)
    except (StreamcovError, OSError):
        return None


def _a_store(kind: str) -> str:
    return f"{'an' if kind == 'image' else 'a'} {kind} store"


def _wrong_kind(kind: str | None, spec, path=None) -> str:
    """What a store of ``kind`` (None: none of the kinds tasks read, said by its attributes at ``path``) is,
    given to a task that reads another kind."""
    from ..data.ragged import store_words

    what = _a_store(kind) if kind else store_words(path) if path is not None else "not a streamcov store"
    return f"{what}, but task {spec.name!r} reads {spec.store_kind} stores"


# -------------------------------------------------------------------- messages
_TYPE_WORDS = {
    "int_type": "an integer", "int_from_float": "an integer", "float_type": "a number",
    "bool_type": "true or false", "string_type": "a quoted string", "list_type": "a list [..]",
    "dict_type": "a table", "model_type": "a table", "finite_number": "a finite number",
    "missing": "a value", "literal_error": None,
}


def expected_of(err: dict) -> str:
    t, ctx = err["type"], err.get("ctx", {})
    if t == "literal_error":
        values = ctx.get("expected", "").replace("'", '"')
        return values if (", " not in values and " or " not in values) else "one of " + values
    if t in _TYPE_WORDS and _TYPE_WORDS[t]:
        return _TYPE_WORDS[t]
    for key, word in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
        if t.endswith(("greater_than", "greater_than_equal", "less_than", "less_than_equal")) and key in ctx:
            return f"a value {word} {ctx[key]}"
    # lengths and patterns in plain words, not pydantic's ("List should have at least 1 item after validation")
    if t in ("too_short", "string_too_short"):
        n, what = ctx.get("min_length"), ("list", "item") if t == "too_short" else ("string", "character")
        return f"a non-empty {what[0]}" if n == 1 else f"a {what[0]} of at least {_count(n, what[1])}"
    if t in ("too_long", "string_too_long"):
        n, what = ctx.get("max_length"), ("list", "item") if t == "too_long" else ("string", "character")
        return f"a {what[0]} of at most {_count(n, what[1])}"
    if t == "string_pattern_mismatch":
        from .schema import PATTERN_WORDS
        return PATTERN_WORDS.get(ctx.get("pattern"), f"text matching {ctx.get('pattern')}")
    if t == "value_error":
        return err["msg"].removeprefix("Value error, ")
    msg = err["msg"].removeprefix("Input should be ")
    return msg[0].lower() + msg[1:]


def _count(n, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _inside_the_list(errs: list, path: tuple, schema) -> list:
    """Of the errors of one key whose value is a list, those of the list itself (its length) or of its entries:
    the errors of a union's other members (``sigma2 = [-1]`` is no number either) say nothing about a list."""
    return [e for e in errs if e["type"] in ("too_short", "too_long")
            or len(_field_path(e["loc"], schema)) > len(path)]


def _fields(model: type[BaseModel] | None) -> dict:
    return {} if model is None else model.model_fields


def _submodel(model, key):
    """The table model of field ``key`` of ``model`` (through Optional/Union), or None."""
    f = _fields(model).get(key)
    if f is None:
        return None
    ann = f.annotation
    for cand in (ann, *typing.get_args(ann)):
        if isinstance(cand, type) and issubclass(cand, BaseModel):
            return cand
    return None


def _field_path(loc: tuple, schema, extra: bool = False) -> tuple:
    """The key path of a pydantic error location, without union-member tags (list indices kept)."""
    path, model = [], schema
    for i, part in enumerate(loc):
        if isinstance(part, int):
            path.append(part)
        elif model is not None and part in _fields(model):
            path.append(part)
            model = _submodel(model, part)
        elif extra and i == len(loc) - 1:
            path.append(part)   # the unknown key itself
        # else: a union-member tag such as "int" or "function-after[...]"
    return tuple(path)


def _table_of(schema, path: tuple):
    model = schema
    for part in path:
        model = _submodel(model, part)
    return model


def _keys(err, schema) -> tuple:
    path = _field_path(err["loc"], schema, extra=err["type"] == "extra_forbidden")
    return tuple(p for p in path if not isinstance(p, int))


def _first_error(exc: ValidationError, schema, origins: Origins) -> str:
    from .schema import KEYED_ERRORS

    # an unknown key first: a misspelt or renamed table also leaves its right name "missing"
    errs = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    first = errs[0]
    keys = _keys(first, schema)
    path = _field_path(first["loc"], schema, extra=first["type"] == "extra_forbidden")
    same = [e for e in errs if _keys(e, schema) == keys]
    dotted = ".".join(str(p) for p in path) if path else "pipeline"
    where = origins.where(keys)
    more = len({_keys(e, schema) for e in errs}) - 1
    tail = f" ({more} more problem{'s' if more > 1 else ''} after this one)" if more > 0 else ""
    if first["type"] == "extra_forbidden":
        parent = _table_of(schema, keys[:-1])
        known = sorted(_fields(parent))
        hint = ""
        if keys in RENAMED:
            hint = f"; renamed: use {RENAMED[keys]}"
        else:
            hint = did_you_mean(keys[-1], known)
        section = f"[{'.'.join(keys[:-1])}]" if len(keys) > 1 else "the top level"
        return f"{where}: unknown key {dotted!r}{hint}; {section} takes: {', '.join(known)}{tail}"
    if first["type"] in KEYED_ERRORS:
        # an error about one key (a [model] key that the chosen learner does not read, a [method] key that
        # the chosen method does not read, a [split] key of another kind, ...): where that key came from
        # (ctx["key"]: its dotted path from the table that raised)
        return f"{origins.where(keys + tuple(first['ctx']['key'].split('.')))}: {first['msg']}{tail}"
    if first["type"] == "missing":
        return f"{where}: {dotted} is required (expected {expected_of(first)}){tail}"
    if first["type"] == "value_error" and isinstance(first.get("input"), dict):
        # a whole-table check (e.g. "[data] needs `store`")
        return f"{where}: {expected_of(first)}{tail}"
    if isinstance(first["input"], list) and _inside_the_list(same, path, schema):
        # a union of a value and a list of them, given a list: what is wrong with the list (or the entry)
        same = _inside_the_list(same, path, schema)
        first = same[0]
        path = _field_path(first["loc"], schema)
        dotted = ".".join(str(p) for p in path)
    same = [e for e in same if _field_path(e["loc"], schema) == path]   # one entry of a list: its own errors
    expected = " or ".join(dict.fromkeys(expected_of(e) for e in same))
    value = first["input"]
    return f"{where}: {dotted} = {toml_value(value)}: expected {expected}{tail}"


# ---------------------------------------------------------------------- paths
def _root(file: Path | None) -> Path | None:
    # pipelines/<file>.toml: paths of shipped pipeline files are written from the project root
    return None if file is None else file.resolve().parent.parent


def home_expanded(path: str, where: str = "pipeline", key: str = "path") -> str:
    """``path`` with a leading ``~`` or ``~user`` expanded; a :class:`ConfigError` naming ``where`` and ``key`` where
    there is no such home: ``Path.expanduser`` raised RuntimeError (an "internal error" traceback) for a user
    without one (HOME unset, a container's numeric user), and ``os.path.expanduser`` kept the ``~``, so that an
    output folder named ``~`` was made in the working directory."""
    path = str(path)
    if not path.startswith("~"):
        return path
    try:
        got = str(Path(path).expanduser())
    except RuntimeError:
        got = path
    if got.startswith("~"):
        raise ConfigError(f"{where}: {key} = {toml_value(path)}: '{path.split('/')[0]}' names no home folder here "
                          f"(HOME is not set, or the system knows no such user); give the full path")
    return got


def resolve_input(path: str | None, file: Path | None) -> str | None:
    """An input path as written when it exists (relative: from the working directory), else the first that
    exists of the pipeline file's folder and the folder above it (shipped files, ``pipelines/<file>.toml``,
    write paths from the project root), else as written (:func:`searched` says so). ``~`` is expanded first
    (:func:`home_expanded`)."""
    if path is None:
        return None
    p = Path(home_expanded(path))
    if p.is_absolute() or p.exists() or file is None:
        return str(p)
    for alt in (file.resolve().parent / p, _root(file) / p):
        if alt.exists():
            return str(alt)
    return str(p)


def searched(path) -> str:
    """What a message about a missing input adds when its path is relative: where it was looked for."""
    if str(path).startswith("~") or Path(str(path)).is_absolute():
        return ""
    return (" (a relative path is looked for in the working directory, then, in a pipeline file, in the file's "
            "folder and the folder above it)")


def _resolve_paths(cfg, file: Path | None, origins: Origins | None = None, notes: list | None = None):
    def resolved(value, *key):
        if origins is not None:   # a "~" without a home named where it was given
            value = home_expanded(value, origins.where(key), ".".join(key))
        # a path typed on the command line (--set) is the working directory's, as --store is; a file's falls
        # back to the file's folder (`--set data.store="runs/x.zarr"` from another folder found the store beside
        # the pipeline file, which --store of the same text refused)
        typed = origins is not None and any(key[:n] in origins.flags for n in range(1, len(key) + 1))
        got = resolve_input(value, None if typed else file)
        beside = resolve_input(value, file) if typed else got
        if beside != got and notes is not None:   # where earlier versions looked: said, not followed silently
            notes.append(f"{origins.where(key)}: {value} is not in the working directory, where a path given so "
                         f"is looked for; {beside} (from the pipeline file's folder or the one above it) is not used: "
                         f"give {beside} to use it")
        return got

    updates = {}
    data = getattr(cfg, "data", None)
    if data is not None:
        du = {k: resolved(getattr(data, k), "data", k) for k in ("store", "source")
              if getattr(data, k, None) is not None}
        if du:
            updates["data"] = data.model_copy(update=du)
    split = getattr(cfg, "split", None)
    if split is not None and split.file:   # looked for as every input is (the working directory first)
        updates["split"] = split.model_copy(update={"file": resolved(split.file, "split", "file")})
    study = getattr(cfg, "study", None)
    if study is not None and study.data_root is not None:
        updates["study"] = study.model_copy(update={"data_root": resolved(study.data_root, "study", "data_root")})
    # "~" expanded as in the input paths above: kept as typed it made a folder named "~" in the working directory
    updates["output"] = home_expanded(str(cfg.output), origins.where(("output",)) if origins is not None
                                      else "pipeline", "output").replace("{name}", cfg.name)
    return cfg.model_copy(update=updates)


def _check_feature_map(cfg, origins: Origins):
    """Build the feature map of ``[features]`` once: unknown map parameters and bad values fail here."""
    features = getattr(cfg, "features", None)
    if features is None or not hasattr(features, "params"):
        return
    from ..features.registry import make_feature_map

    params = features.params()
    try:
        fmap = make_feature_map(params, 0)
        if fmap is not None and hasattr(fmap, "_validate_params"):
            fmap._validate_params()
    except ConfigError as exc:
        key = str(exc).split()[0].removeprefix("features.")
        raise ConfigError(f"{origins.where(('features', key))}: {exc}") from None
    except (ValueError, TypeError) as exc:
        # scikit-learn's validation names the parameter: "The 'n_components' parameter of RBFSampler must be ..."
        m = re.search(r"The '(\w+)' parameter", str(exc))
        if m and m.group(1) in params:
            raise ConfigError(f"{origins.where(('features', m.group(1)))}: features.{m.group(1)}: {exc}") from None
        raise ConfigError(f"{origins.where(('features',))}: [features] {exc}") from None


def output_dir(cfg) -> Path:
    return Path(cfg.output)
