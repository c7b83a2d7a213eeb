"""One resumable writer (and reader base) for ragged zarr v3 stores: skeletons and images.

A store is a zarr group holding one ragged data array (the frames of all
sequences, or the pixels of all images, one after the other) and one row of
metadata per item::

    <data>      (total, *row_shape)  chunked along the first axis
    offsets     (n + 1,) int64       item i is <data>[offsets[i]:offsets[i+1]]
    <columns>   (n, ...)             e.g. labels, subjects / groups, split, shapes
    id_bytes, id_offsets             UTF-8 ids (ragged bytes; zarr v3 has no stable strings)

String columns are integer codes into name lists kept in the attributes
(``label_names``, ``group_names``, ``split_names``; -1 = none).

Writes go chunk by chunk. After every flush the number of *committed* items
and data rows is recorded in ``attrs["committed"]``, and only after the
arrays it covers are written; the completion marker ``attrs["complete"] =
True`` is written last, after every array and the summary. A store without
it is incomplete: readers refuse it, ``streamcov info`` says so, and the same
ingestion resumes after the last committed item (or restarts, on request).
Every store carries an identity (a random id drawn when the store is
created; a restart draws a new one) that feature stores and models record.
"""
from __future__ import annotations

import json
import os
import shutil
import uuid
from contextlib import contextmanager, suppress
from pathlib import Path

import numpy as np

from ..errors import (ConfigError, FormatError, IncompleteStoreError, StoreError, arg, arg_name, check_utf8_name,
                      int_arg, path_arg, toml_value)
from . import integrity
from .integrity import open_group

_META_CHUNK = 65536


# how to discard an incomplete store: the flag of the commands that write stores, or by hand for `run`, which
# writes one from [data] source or a demo and has no such flag
START_OVER = ("add --restart to `streamcov ingest` or `synth` (mode=\"restart\" in Python), or delete {path} and "
              "run the command again")
# what to do about an incomplete store found damaged on resuming it
RESUME_FIX = ("delete it and ingest again (or add --restart to `streamcov ingest` or `synth`, mode=\"restart\" in "
              "Python)")


def _zarr():
    import zarr
    return zarr


ON_ERROR = ("stop", "skip")


def check_on_error(on_error) -> str:
    """``on_error``, one of :data:`ON_ERROR`, or a :class:`ConfigError` (a ValueError) naming it."""
    if not (isinstance(on_error, str) and on_error in ON_ERROR):
        raise ConfigError(f"on_error must be 'stop' or 'skip' (a file that cannot be read stops the ingestion, "
                         f"or is recorded as skipped), got {on_error!r}")
    return on_error


def ingest_args(out, limit, on_error: str = "stop"):
    """The output path and ``limit`` of an ingestion (``ingest``, ``ingest_images``), checked: ``limit`` stops
    after that many new items without completing the store (to test interruption), an integer >= 1;
    ``on_error`` is one of :data:`ON_ERROR` (what a file that cannot be read does)."""
    if limit is not None:
        int_arg("limit", limit, " (new items before stopping) or None")
    check_on_error(on_error)
    path = path_arg("out", out, "OUT", "the path of the store to write")
    if path.name in ("", ".."):   # the current folder or a parent: the lock beside it, the store in its place
        raise ConfigError(f"{path}: names a folder by {os.fspath(out)!r}, not a store; give the store a name of its "
                          f"own, e.g. {path / 'x.zarr'}")
    from ..lock import RUN_FOLDERS, a_runs_own

    if a_runs_own(path):
        # a run's model or checkpoints folder (its files would be mixed with the store's, and a resumed run saved
        # its model into the store), or one of its files
        raise ConfigError(f"{path}: where the run in {path.parent} (an output folder of streamcov run) writes "
                          f"{RUN_FOLDERS.get(path.name, 'one of its own files')}; write the store elsewhere")
    if os.path.islink(path):   # (False for a name the system refuses: said where the store is written)
        # the lock is named from the path: a second name of one store would take a second lock, and a link
        # (dangling, or to an empty folder) cannot be replaced by the finished store
        try:
            own = f", {path.resolve()}"
        except (OSError, RuntimeError):   # a loop of links
            own = " (it leads to no folder: a loop of links)"
        raise ConfigError(f"{path}: a symbolic link (to {os.readlink(path)}); give the store's own path{own}")
    return path


FEATURE_STORE = "a feature store (written by `streamcov run` for its learner)"


def store_words(path, attrs: dict | None = None) -> str:
    """What the zarr group at ``path`` is, by its attributes (``attrs``, read when not given), for a message:
    ``a skeleton store``, ``an image store``, :data:`FEATURE_STORE` (a run's cache, which has no format
    attribute: `run --store`, `data.store` and `predict` called it "not a streamcov store" or "a foreign
    store"), or ``not a streamcov store (format attribute ...)``."""
    if attrs is None:
        attrs = dict(open_group(path, "r").attrs)
    fmt = attrs.get("format")
    if fmt is None and "fingerprint" in attrs and "bounds" in attrs:
        return FEATURE_STORE
    return {"streamcov.skeleton-sequences": "a skeleton store", "streamcov.images": "an image store"}.get(
        fmt, f"not a streamcov store (format attribute {fmt!r})")


def store_status(path) -> dict:
    """Summary of a store without requiring it to be complete (for ``streamcov info``)."""
    path = Path(path)
    if not path.exists():
        raise StoreError(f"{path}: does not exist")
    g = open_group(path, "r")
    attrs = dict(g.attrs)
    fmt = attrs.get("format")
    if fmt not in ("streamcov.skeleton-sequences", "streamcov.images"):
        what = store_words(path, attrs)
        raise StoreError(f"{path}: {what}{', not a data store' if what == FEATURE_STORE else ''}; `streamcov info` "
                         f"describes the stores of `streamcov ingest` and `synth`, a run's output folder and its "
                         f"model folder")
    # a store written by a newer streamcov: said as `run` says it (its attributes may mean something else)
    check_not_newer(path, attrs)
    status = {"path": str(path), "format": fmt, "complete": attrs.get("complete") is True}
    # every writer records its commit point as counts per unit (sequences/frames, images/pixels)
    committed = attrs.get("committed")
    status.update({f"committed_{unit}": n for unit, n in committed.items()} if isinstance(committed, dict) else {})
    for key in ("identity", "n_sequences", "n_frames", "n_joints", "n_images", "units", "source",
                "center", "roles", "label_names", "group_names", "split_names", "skipped", "constant_images",
                "repairs", "chunk_frames"):
        if key in attrs:
            status[key] = attrs[key]
    if "skipped" in status:
        status["n_skipped"] = len(status["skipped"])
        status["skipped"] = status["skipped"][:20]
    if "constant_images" in status:
        status["n_constant_images"] = len(status["constant_images"])
        status["constant_images"] = status["constant_images"][:20]
    writer = None
    if not status["complete"]:
        from ..lock import store_writer

        writer = store_writer(path)
        if writer is not None:   # its commit point moves as it is read: said, not judged
            status["being_written_by"] = writer
    problems = [] if status["complete"] or writer is not None else progress_problems(g, attrs)
    arrays = attrs.get("arrays", [])
    for name in arrays if integrity.names_list(arrays) else ():
        try:
            if integrity.get_array(g, name) is None:
                problems.append(f"array {name!r} is missing")
        except StoreError as exc:
            problems.append(str(exc))
    if problems:
        status["problems"] = problems
    return status


#: per data store format: the unit of its items and of its data rows, its data array and its coded attributes
UNITS = {"streamcov.skeleton-sequences": ("sequences", "frames", "frames", ("label_names", "split_names")),
         "streamcov.images": ("images", "pixels", "pixels", ("label_names", "group_names", "split_names"))}


def progress_problems(g, attrs: dict, units: tuple | None = None) -> list[str]:
    """What is wrong with the attributes an incomplete store is resumed from (its array list, names, and
    commit point against its arrays): an edited or damaged zarr.json was a traceback on resuming, and
    ``info`` reported it as an ingestion to resume. ``units``: ``(unit, data unit, data array, coded
    attributes)``, by default the :data:`UNITS` of the store's format (a writer passes its own)."""
    unit, data_unit, data, coded = units or UNITS[attrs["format"]]
    problems = []
    arrays = attrs.get("arrays")
    if not integrity.names_list(arrays):
        problems.append(integrity.arrays_problem(arrays))
    for key in coded:
        if not integrity.names_list(attrs.get(key, [])):
            problems.append(f"attribute {key} = {integrity.shown(attrs.get(key))} is not a list of names")
    c = attrs.get("committed")
    k, f = (c.get(unit), c.get(data_unit)) if isinstance(c, dict) else (None, None)
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in (k, f)):
        problems.append(f"attribute committed = {integrity.shown(c)} is not the counts of committed {unit} and "
                        f"{data_unit} (integers >= 0)")
        return problems
    try:
        offsets, rows = integrity.get_array(g, "offsets"), integrity.get_array(g, data)
        if offsets is None or rows is None:
            return problems   # said as a missing array
        unread = (integrity.rows_problem(g, Path(g.store.root), "offsets", k, k + 1)
                  if k + 1 <= offsets.shape[0] and hasattr(g.store, "root") else None)
        if unread is not None:   # a missing chunk reads as 0: named, not called a commit point that does not match
            problems.append(unread)
        elif k + 1 > offsets.shape[0] or f > rows.shape[0] or int(offsets[k]) != f:
            problems.append(f"attribute committed = {integrity.shown(c)} does not match the arrays "
                            f"({offsets.shape[0] - 1} {unit} in offsets, {rows.shape[0]} {data_unit} in {data})")
    except StoreError as exc:
        problems.append(str(exc))
    except Exception as exc:   # a chunk that zarr cannot read: its checksum, a missing file
        problems.append(f"array offsets cannot be read ({exc.__class__.__name__}: {exc})")
    return problems


def _version_words(version) -> str:
    return (f"store format version {version!r}; this streamcov reads versions up to {integrity.FORMAT_VERSION}: "
            f"upgrade streamcov or write the store again")


def check_not_newer(path, attrs: dict) -> None:
    """Refuse a store whose ``format_version`` is above the newest this streamcov reads (written by a newer
    streamcov): the same line for ``run``, ``predict`` and ``info``."""
    version = attrs.get("format_version", 1)
    if isinstance(version, int) and not isinstance(version, bool) and version > integrity.FORMAT_VERSION:
        raise StoreError(f"{path}: {_version_words(version)}")


def open_complete(path: Path, format_name: str, kind: str, unit: str):
    """The zarr group and attributes of a complete store of ``format_name``.

    Raises :class:`StoreError` for another kind of store and
    :class:`IncompleteStoreError` when the completion marker is missing.
    """
    path = Path(path)
    if not path.exists():
        raise StoreError(f"{path}: does not exist")
    g = open_group(path, "r")
    attrs = dict(g.attrs)
    if attrs.get("format") != format_name:
        what = store_words(path, attrs)
        raise StoreError(f"{path}: {what}, but {'an' if kind == 'image' else 'a'} {kind} store is needed here; write one with "
                         f"`streamcov ingest {'skeleton' if kind == 'skeleton' else 'images'}`")
    if attrs.get("complete") is not True:
        c = attrs.get("committed")
        from ..lock import store_writer

        writer = store_writer(path)
        if writer is not None:   # not interrupted: deleting it, as the other message says, would hit a live writer
            raise IncompleteStoreError(
                f"{path}: incomplete {kind} store, being written by process {writer.get('pid')} on "
                f"{writer.get('host')} since {writer.get('started')} ({writer.get('command')}); wait for it to "
                f"finish, then run again")
        raise IncompleteStoreError(
            f"{path}: incomplete {kind} store ({c.get(unit, 0) if isinstance(c, dict) else '?'} {unit} committed, no "
            f"completion marker): the ingestion was interrupted, or stopped at a file it could not read. Re-run "
            f"the command that wrote it (`streamcov ingest`, `synth`, or `run` with [data] source or a demo) to "
            f"resume it (with --on-error skip, or data.on_error = \"skip\", to leave such a file out), or start "
            f"over: "
            f"{START_OVER.format(path=path)}.")
    return g, attrs


def _ready(pending: list, committed: int, written: int):
    """The leading ``pending`` items whose data rows are all on disk, and their end row."""
    end, n = committed, 0
    for item in pending:
        if end + item["size"] > written:
            break
        end += item["size"]
        n += 1
    return pending[:n], end


def _names(index: dict) -> list[str]:
    out = [None] * len(index)
    for name, i in index.items():
        out[i] = name
    return out


def jsonable(obj):
    """``obj`` as plain JSON types (numpy scalars, paths, tuples become JSON values)."""
    return json.loads(json.dumps(obj, default=lambda o: o.item() if isinstance(o, np.generic) else str(o)))


def _move_into_place(building: Path, path: Path) -> None:
    """Rename a store built at ``building`` to ``path`` (a new or empty folder): one atomic step."""
    import os

    if path.is_dir() and not any(path.iterdir()):
        path.rmdir()   # an empty folder given as the output path
    os.replace(building, path)


class RaggedStore:
    """Read access to a complete ragged store (subclasses name the format and the data array)."""

    FORMAT: str = ""
    KIND: str = ""
    UNIT: str = ""
    DATA: str = ""

    def __init__(self, path):
        self.path = Path(path)
        g, attrs = open_complete(self.path, self.FORMAT, self.KIND, self.UNIT)
        self.group = g
        self.attrs = attrs
        version = attrs.get("format_version", 1)
        if not isinstance(version, int):
            raise StoreError(f"{self.path}: {_version_words(version)}")
        check_not_newer(self.path, attrs)
        mismatch = integrity.layout_mismatch(g, attrs)
        if mismatch is not None:
            raise StoreError(f"{self.path}: {mismatch}: the store is damaged: {integrity.WRITE_AGAIN}")
        self.version = version
        self.checked = version >= 2
        self._manifest = integrity.load_manifest(g, self.path) if version >= 3 else None
        for name in attrs.get("arrays", []):
            try:       # each array's metadata read once
                array = integrity.get_array(g, name)
            except StoreError as exc:
                raise StoreError(f"{self.path}: {exc}: the store is damaged: {integrity.WRITE_AGAIN}") from None
            if self.checked and array is not None and \
                    not any(type(c).__name__ == "Crc32cCodec" for c in array.compressors):
                raise StoreError(f"{self.path}: array {name!r} lost its checksum codec (zarr.json edited); "
                                 f"the store is damaged: {integrity.WRITE_AGAIN}")
        self.offsets = self.read("offsets").astype(np.int64)
        if len(self.offsets) < 1 or (np.diff(self.offsets) < 0).any() or self.offsets[0] != 0:
            raise StoreError(f"{self.path}: array 'offsets' is not increasing from 0; the store is damaged: "
                             f"{integrity.WRITE_AGAIN}")

    def check_sealed(self):
        """Refuse a store whose arrays' ``zarr.json`` or attributes differ from those it was written with
        (format 4: :func:`~streamcov.data.integrity.seal_mismatch`). Called last when a store kind is opened,
        after the checks that name an edit more precisely."""
        if self.version >= 4:
            why = integrity.seal_mismatch(self.group, self.path, self.attrs.get("seal"))
            if why is not None:
                raise StoreError(f"{self.path}: {why}; the store is damaged: {integrity.WRITE_AGAIN}")

    def check_rows(self, names, coded: dict | None = None):
        """Every per-item array has one row per item, the data array the rows the offsets cover, the
        counts in the attributes match, and every coded column (``{array: attribute of its names}``)
        indexes its names (-1: none)."""
        n = len(self.offsets) - 1
        damaged = "the store is damaged: " + integrity.WRITE_AGAIN
        claimed = self.attrs.get(f"n_{self.UNIT}")
        if claimed != n:
            raise StoreError(f"{self.path}: attribute n_{self.UNIT} = {claimed!r} but the arrays hold {n}; {damaged}")
        if self.version >= 2 and not (isinstance(self.identity, dict) and self.identity.get("id")):
            raise StoreError(f"{self.path}: the store's identity attribute is missing; {damaged}")
        # what the ingestion recorded, read by info, predict and the tasks' notes: the types it wrote
        for key, ok, what in (("units", lambda v: isinstance(v, str), "a text"),
                              ("skipped", lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v),
                               "a list of tables (id, reason)"),
                              ("constant_images", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
                               "a list of image ids"),
                              ("repairs", lambda v: isinstance(v, dict), "a table"),
                              ("chunk_frames", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
                               "a positive integer")):
            if key in self.attrs and not ok(self.attrs[key]):
                raise StoreError(f"{self.path}: attribute {key} = {str(self.attrs[key])[:60]!r} is not {what}; "
                                 f"{damaged}")
        for name, attr in (coded or {}).items():
            values, names_ = getattr(self, name), self.attrs.get(attr)
            if not isinstance(names_, list) or len(set(names_)) != len(names_):
                raise StoreError(f"{self.path}: attribute {attr} is missing or repeats a name; {damaged}")
            if not all(isinstance(x, str) for x in names_):
                raise StoreError(f"{self.path}: attribute {attr} holds {next(x for x in names_ if not isinstance(x, str))!r}, "
                                 f"not a name (a string); {damaged}")
            if self.group[name].dtype.kind not in "iu":
                raise StoreError(f"{self.path}: array {name!r} is of type {self.group[name].dtype}, not integer codes "
                                 f"(its zarr.json was edited); {damaged}")
            if len(values) and (values.min() < -1 or values.max() >= len(names_)):
                raise StoreError(f"{self.path}: array {name!r} holds codes up to {int(values.max())} but "
                                 f"{attr} names {len(names_)}; {damaged}")
        for name in names:
            if len(getattr(self, name)) != n:
                raise StoreError(f"{self.path}: array {name!r} has {len(getattr(self, name))} rows for {n} items; "
                                 f"the store is damaged: {integrity.WRITE_AGAIN}")
        if "id_offsets" in self.attrs.get("arrays", []):
            why = integrity.ids_problem(self.read("id_offsets"), self.read("id_bytes"), n)
            if why is not None:
                raise StoreError(f"{self.path}: {why}; {damaged}")
        try:
            rows = self.group[self.DATA].shape[0]
        except KeyError:
            raise StoreError(f"{self.path}: array {self.DATA!r} is missing; the store is damaged: "
                             f"{integrity.WRITE_AGAIN}") from None
        if rows != self.offsets[-1]:
            raise StoreError(f"{self.path}: array {self.DATA!r} has {rows} rows but the offsets cover "
                             f"{self.offsets[-1]}; the store is damaged: {integrity.WRITE_AGAIN}")
        for a in (self.offsets, *(getattr(self, name) for name in names)):
            a.setflags(write=False)   # the store's own reading: y = store.labels; y[:] = 0 would change it

    def check_of(self, name: str, start: int | None = None, stop: int | None = None):
        """What :func:`~streamcov.data.integrity.read` checks for rows [start, stop) of ``name``:
        the manifest's checksums of their chunks (format 3), or whether chunks are checked at all."""
        if self._manifest is None:
            return self.checked
        if name not in self._manifest:
            raise StoreError(f"{self.path}: array {name!r} is not in the manifest of chunk checksums; the store "
                             f"is damaged: {integrity.WRITE_AGAIN}")
        array = self.group[name]
        start = 0 if start is None else int(start)
        stop = array.shape[0] if stop is None else int(stop)
        return integrity.expected_checksums(self._manifest[name], array, start, stop)

    def read(self, name: str, start: int | None = None, stop: int | None = None) -> np.ndarray:
        """Rows of array ``name``; a missing, corrupt or foreign chunk is a :class:`StoreError` naming it."""
        try:
            check = self.check_of(name, start, stop)
        except KeyError:
            check = True   # a missing array: read() says so
        return integrity.read(self.group, self.path, name, start, stop, check)

    @property
    def data(self):
        """The ragged data array (zarr), read lazily."""
        return self.group[self.DATA]

    @property
    def identity(self) -> dict:
        """``{"id": ..., "created": ...}``: changes whenever the store is written anew."""
        ident = self.attrs.get("identity")
        return dict(ident) if isinstance(ident, dict) else {}

    @property
    def key(self) -> dict:
        """The store in the fingerprints of what is computed from it: its identity, which the same store keeps
        under any path (given relative, after a change of folder, moved); a store written before identities
        (format 1) by its resolved path."""
        return self.identity or {"path": str(self.path.resolve())}

    @property
    def label_names(self) -> list[str]:
        return list(self.attrs["label_names"])

    @property
    def split_names(self) -> list[str]:
        return list(self.attrs.get("split_names", []))

    def id_of(self, i: int) -> str:
        """The id of item ``i`` alone (:meth:`ids` reads them all)."""
        a, b = (int(v) for v in self.read("id_offsets", i, i + 2))
        return self.read("id_bytes", a, b).astype(np.uint8).tobytes().decode("utf-8")

    def ids(self) -> list[str]:
        raw = self.read("id_bytes").astype(np.uint8).tobytes()
        off = self.read("id_offsets").astype(np.int64)
        return [raw[off[i]:off[i + 1]].decode("utf-8") for i in range(len(off) - 1)]

    def label_strings(self) -> np.ndarray:
        names = np.asarray(self.label_names, dtype=object)
        return names[self.labels]

    def split_strings(self) -> np.ndarray:
        names = np.asarray(self.split_names + [None], dtype=object)
        return names[np.where(self.split < 0, len(self.split_names), self.split)]

    def __len__(self):
        return len(self.offsets) - 1


class RaggedStoreWriter:
    """Append items (a run of data rows plus one row of metadata each); resumable.

    Parameters
    ----------
    path : str or Path
        Store location (a directory).
    format_name, kind, unit, data_unit : str
        Format attribute, the kind named in messages ("skeleton"), the item
        unit ("sequences") and the data-row unit ("frames").
    data : str
        Name of the ragged data array.
    row_shape : tuple of int
        Shape of one data row (``(3 * joints,)`` for frames, ``()`` for pixels).
    dtype : str
        Data type of the data array.
    chunk_rows : int
        Data rows per chunk; the writer holds about one chunk in memory.
    columns : dict
        ``name -> (dtype, tail shape)`` of the per-item metadata arrays.
    coded : dict
        ``column -> attribute`` for string columns coded into name lists
        (``{"labels": "label_names", "split": "split_names"}``); ``None`` is -1.
    attrs : dict
        Attributes written when the store is created (source, joint names, ...).
    same : tuple of str
        Attributes a resumed store must have with the same values (an
        interrupted ingestion of another source is refused).
    initial_names : dict
        Name lists fixed up front (``{"labels": [...]}``), e.g. a dataset's class order.
    mode : {"create", "resume", "restart"}
        ``create`` fails if anything is at ``path``; ``resume`` continues an
        incomplete store after its last committed item (or creates a new
        one); ``restart`` deletes an incomplete store first. A complete
        store is never modified: delete it or choose another path.
    """

    def __init__(self, path, *, format_name: str, kind: str, unit: str, data_unit: str, data: str,
                 row_shape: tuple, dtype: str, chunk_rows: int, columns: dict, coded: dict,
                 attrs: dict, same: tuple = (), initial_names: dict | None = None,
                 mode: str = "resume", chunk_given: bool = True):
        if mode not in ("create", "resume", "restart"):
            raise ValueError(f"mode must be create, resume or restart, got {mode!r}")
        if isinstance(chunk_rows, bool) or int(chunk_rows) != chunk_rows or chunk_rows < 1:
            raise ConfigError(f"{arg('chunk_' + data_unit, chunk_rows)}: expected an integer >= 1 ({data_unit} per "
                              f"chunk)")
        from .._config import check_memory

        # the writer holds about one chunk, and zarr encodes a copy of it
        check_memory(2 * chunk_rows * int(np.prod(row_shape)) * np.dtype(dtype).itemsize,
                     f"{arg('chunk_' + data_unit, chunk_rows)} (a chunk of {chunk_rows} rows)",
                     f"choose a smaller chunk size ({arg_name('chunk_' + data_unit)})")
        self.path = Path(path)
        # a chunk size the caller chose (not the default): a resumed store keeps its own, so another is refused
        self._chunk_rows, self._chunk_given = int(chunk_rows), bool(chunk_given)
        self.format_name, self.kind, self.unit, self.data_unit = format_name, kind, unit, data_unit
        self.data_name, self.row_shape, self.dtype = data, tuple(row_shape), np.dtype(dtype)
        self.columns, self.coded = dict(columns), dict(coded)
        # the rows of items not yet written: a list joined once per write (joining at every item copied the
        # whole buffer, up to a chunk of 16 MB, for each 2-frame sequence: quadratic in the items), and its length
        self._parts: list[np.ndarray] = []
        self._buffered = 0
        self._data_chunk: int | None = None   # the data array's chunk length, read once (a zarr look-up is 1 ms)
        self._pending: list[dict] = []
        self._flush_cut = False   # a flush stopped by an error: the arrays may be past the commit point
        self.resumed_from = 0
        if self.path.exists() and not self.path.is_dir():
            raise StoreError(f"{self.path}: a file, not a store folder; choose another output path")
        inside = enclosing_store(self.path.parent)
        if inside is not None:
            raise StoreError(f"{self.path}: inside the zarr store {inside}; choose an output path outside every "
                             f"store")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:   # a parent is a file, no permission, ...
            raise StoreError(f"{self.path}: cannot create its folder {self.path.parent} ({exc.strerror}); "
                             f"choose another output path") from None
        existing = self.path.is_dir() and any(self.path.iterdir())
        if existing:
            if not (self.path / "zarr.json").is_file():
                held = sorted(p.name for p in self.path.iterdir())
                raise StoreError(f"{self.path}: a folder that is not a zarr store (it holds "
                                 f"{', '.join(held[:3])}{', ...' if len(held) > 3 else ''}); streamcov writes "
                                 f"a store only into a new or empty folder: choose another output path")
            group = open_group(self.path, "r")
            old = dict(group.attrs)
            if old.get("format") is None:
                # a store is built in a hidden folder and moved here whole (_create), so a group without a
                # format attribute is never one of ours left half made: it is the user's, even when its arrays
                # bear our names (it was deleted, attributes and data)
                raise StoreError(f"{self.path}: a zarr store that streamcov did not write (no format attribute); "
                                 f"will not touch it: choose another output path")
            if old.get("complete", False):
                raise StoreError(f"{self.path}: a complete store is already here; delete it or "
                                 f"choose another output path")
            if old.get("format") not in (format_name, None):
                raise StoreError(f"{self.path}: holds something else ({old.get('format')}); "
                                 f"will not touch it")
            if mode == "create":
                raise StoreError(f"{self.path}: an incomplete {kind} store is here; resume it or "
                                 f"restart it (mode=\"restart\")")
            if mode == "restart":
                shutil.rmtree(self.path)
                self._create(int(chunk_rows), attrs, initial_names or {})
            else:
                self._reopen(old, attrs, same)
        else:
            self._create(int(chunk_rows), attrs, initial_names or {})

    # -- setup ------------------------------------------------------------
    def _create(self, chunk_rows, attrs, initial_names):
        """Create the empty store. It is built in a hidden folder beside ``path`` and renamed to it once its
        arrays and attributes are written: a process killed half-way leaves no folder at ``path`` that
        later runs would take for a store of another kind (``format attribute None``) or a resumable one
        without its source record."""
        import os
        from datetime import datetime, timezone

        zarr = _zarr()
        for left in self.path.parent.glob(f".{self.path.name}.creating-*"):   # of a creation killed before
            shutil.rmtree(left, ignore_errors=True)
        building = self.path.with_name(f".{self.path.name}.creating-{os.getpid()}")
        try:
            self._build(zarr, building, chunk_rows, attrs, initial_names, datetime, timezone)
            _move_into_place(building, self.path)
        except BaseException:   # a full disk: the half-made folder goes (it stayed when the store went elsewhere)
            shutil.rmtree(building, ignore_errors=True)
            raise
        self.group = zarr.open_group(str(self.path), mode="r+")
        self._ids: set[str] = set()
        self._committed = 0
        self._committed_rows = 0
        self._written = 0
        self._id_bytes = 0

    def _build(self, zarr, building, chunk_rows, attrs, initial_names, datetime, timezone):
        """The empty store's arrays and attributes, in the hidden folder ``building`` (:meth:`_create`)."""
        g = zarr.open_group(str(building), mode="w")
        opts = integrity.array_options()
        g.create_array(self.data_name, shape=(0, *self.row_shape), chunks=(chunk_rows, *self.row_shape),
                       dtype=self.dtype, fill_value=0, **opts)
        g.create_array("offsets", shape=(1,), chunks=(_META_CHUNK,), dtype="int64", fill_value=0, **opts)
        for name, (dt, tail) in self.columns.items():
            g.create_array(name, shape=(0, *tail), chunks=(_META_CHUNK, *tail), dtype=dt, fill_value=0, **opts)
        g.create_array("id_bytes", shape=(0,), chunks=(1 << 20,), dtype="uint8", fill_value=0, **opts)
        g.create_array("id_offsets", shape=(1,), chunks=(_META_CHUNK,), dtype="int64", fill_value=0, **opts)
        g["offsets"][:] = np.zeros(1, dtype=np.int64)     # written: a missing chunk is then damage
        g["id_offsets"][:] = np.zeros(1, dtype=np.int64)
        self._index = {col: {} for col in self.coded}
        for col, names in initial_names.items():
            self._index[col] = {n: i for i, n in enumerate(names)}
        g.attrs.update({
            "format": self.format_name, "format_version": integrity.FORMAT_VERSION, "complete": False,
            "arrays": [self.data_name, "offsets", *self.columns, "id_bytes", "id_offsets"],
            "identity": {"id": uuid.uuid4().hex,
                         "created": datetime.now(timezone.utc).isoformat(timespec="seconds")},
            **jsonable(attrs),
            **{attr: _names(self._index[col]) for col, attr in self.coded.items()},
            "committed": {self.unit: 0, self.data_unit: 0},
        })

    def _layout_problems(self, g) -> list[str]:
        """Arrays whose type or row shape is not what this writer creates (an edited zarr.json: pixels made
        int8 were resumed, sealed and later blamed on the images)."""
        want = {self.data_name: (np.dtype(self.dtype), tuple(self.row_shape)), "offsets": (np.dtype("int64"), ()),
                "id_bytes": (np.dtype("uint8"), ()), "id_offsets": (np.dtype("int64"), ()),
                **{name: (np.dtype(dt), tuple(tail)) for name, (dt, tail) in self.columns.items()}}
        problems = []
        for name, (dtype, tail) in want.items():
            try:
                a = integrity.get_array(g, name)
            except StoreError as exc:
                problems.append(str(exc))
                continue
            if a is not None and (np.dtype(a.dtype) != dtype or tuple(a.shape[1:]) != tail):
                problems.append(f"array {name!r} holds {np.dtype(a.dtype)} rows of shape {tuple(a.shape[1:])}, "
                                f"where this store writes {dtype} rows of shape {tail} (its zarr.json was edited)")
        return problems

    def _reopen(self, old: dict, attrs: dict, same: tuple):
        zarr = _zarr()
        want = jsonable(attrs)
        for key in same:
            a, b = old.get(key), want.get(key)
            if a != b:
                if isinstance(a, dict) and isinstance(b, dict):   # name the first field that differs
                    # another folder or option first; "files" differs only if the same folder changed
                    sub = next(k for k in sorted(set(a) | set(b), key=lambda k: (k == "files", k))
                               if a.get(k) != b.get(k))
                    if sub == "files" and same_files(a.get("files"), b.get("files")):
                        continue   # the same files (new modification times, or now their content digest)
                    if sub == "files":
                        then, now = a.get("files"), b.get("files")
                        how = (f"files added, removed or modified: {then.get('count')} files then, "
                               f"{now.get('count')} now" if isinstance(then, dict) and isinstance(now, dict) else
                               "or it is not known: the store was begun by an earlier streamcov, which recorded "
                               "no digest of its files")
                        raise StoreError(
                            f"{self.path}: the archive {b.get('path', a.get('path'))} changed since this "
                            f"ingestion began ({how}); resuming would mix two versions of it. Start over: "
                            f"{START_OVER.format(path=self.path)}.")
                    key, a, b = f"{key}.{sub}", a.get(sub), b.get(sub)
                raise StoreError(
                    f"{self.path}: the incomplete {self.kind} store was started with {key} = "
                    f"{toml_value(a)}, this ingestion has {toml_value(b)}; resuming would mix two sources. Start over: "
                    f"{START_OVER.format(path=self.path)}.")
        g = zarr.open_group(str(self.path), mode="r+")
        # (after the source: another one is started over whatever its state)
        problems = progress_problems(g, old, (self.unit, self.data_unit, self.data_name, tuple(self.coded.values())))
        problems += self._layout_problems(g)
        if problems:
            raise StoreError(f"{self.path}: {problems[0]}; the incomplete store is damaged: {RESUME_FIX}")
        have = int(g[self.data_name].chunks[0])
        if self._chunk_given and have != self._chunk_rows:
            raise StoreError(f"{self.path}: the incomplete {self.kind} store was started with chunks of {have} "
                             f"{self.data_unit}, and a store keeps its chunk size: "
                             f"{arg('chunk_' + self.data_unit, self._chunk_rows)} would not be used; resume "
                             f"without it (or with {have}), or start over with it: {START_OVER.format(path=self.path)}.")
        # what passed the checks above as the same source, recorded as it is now: the store completed here is
        # checked against the archive's present modification times
        changed = {key: want.get(key) for key in same if old.get(key) != want.get(key)}
        if changed:
            g.attrs.update(changed)
        c = old.get("committed", {self.unit: 0, self.data_unit: 0})
        k, f = int(c[self.unit]), int(c[self.data_unit])
        # what was committed is read back whole before anything is added to it: zarr reads a missing chunk as
        # zeros and a resume wrote them back as data (labels, ids, the frames of the chunk it goes on filling),
        # sealing a complete store of wrong data that --verify passed; a chunk that no longer decodes was a traceback
        integrity.check_rows(g, self.path, "offsets", k + 1, RESUME_FIX)
        integrity.check_rows(g, self.path, "id_offsets", k + 1, RESUME_FIX)
        for name in self.columns:
            integrity.check_rows(g, self.path, name, k, RESUME_FIX)
        integrity.check_rows(g, self.path, "id_bytes", int(g["id_offsets"][k]) if k else 0, RESUME_FIX)
        integrity.check_rows(g, self.path, self.data_name, f, RESUME_FIX)
        # anything past the commit point may be half written: cut it off
        g[self.data_name].resize((f, *self.row_shape))
        g["offsets"].resize((k + 1,))
        for name, (_, tail) in self.columns.items():
            g[name].resize((k, *tail))
        g["id_offsets"].resize((k + 1,))
        nbytes = int(g["id_offsets"][k]) if k else 0
        g["id_bytes"].resize((nbytes,))
        integrity.remove_partial_chunks(self.path)
        self.group = g
        self._index = {col: {n: i for i, n in enumerate(old.get(attr, []))}
                       for col, attr in self.coded.items()}
        raw = np.asarray(g["id_bytes"][:], dtype=np.uint8).tobytes()
        off = np.asarray(g["id_offsets"][:], dtype=np.int64)
        self._ids = {raw[off[i]:off[i + 1]].decode("utf-8") for i in range(k)}
        self._committed = k
        self._committed_rows = f
        self._written = f
        self._id_bytes = nbytes
        self.resumed_from = k

    # -- writing ----------------------------------------------------------
    def has(self, item_id: str) -> bool:
        """True when ``item_id`` is already committed (skip it on resume)."""
        return item_id in self._ids

    def append(self, item_id: str, rows: np.ndarray, **values) -> bool:
        """Add one item: its data rows and its column values; False when already stored.

        Values of coded columns are names (``None``: -1); the others are
        numbers or small arrays of the column's tail shape.
        """
        if item_id in self._ids:
            return False
        # a copy of its own (np.array copies), since a reader may fill the same array again for its next item
        rows = np.array(rows, dtype=self.dtype)
        if rows.shape[1:] != self.row_shape:
            raise ValueError(f"{item_id}: rows of shape {rows.shape[1:]}, expected {self.row_shape}")
        missing = set(self.columns) - set(values)
        if missing:
            raise ValueError(f"{item_id}: no value for column(s) {sorted(missing)}")
        row = {}
        for col, v in values.items():
            row[col] = (-1 if v is None else self._code(col, str(v))) if col in self.coded else v
        # the rows first: an item is pending only once its rows are buffered (committed_on_error commits it)
        self._parts.append(rows)
        self._buffered += len(rows)
        self._pending.append({"id": item_id, "size": len(rows), "values": row})
        self._ids.add(item_id)
        if self._data_chunk is None:
            self._data_chunk = int(self.group[self.data_name].chunks[0])
        if self._buffered >= self._data_chunk:
            self._flush(whole_chunks_only=True)
        return True

    def _code(self, col, name):
        index = self._index[col]
        if name not in index:
            index[name] = len(index)
        return index[name]

    def _flush(self, whole_chunks_only: bool):
        # set until the flush returns: one cut short by an error is not tried again (committed_on_error), as the
        # items it took off the pending list may be half written past the commit point
        self._flush_cut = True
        self._write_pending(whole_chunks_only)
        self._flush_cut = False

    def _write_pending(self, whole_chunks_only: bool):
        g = self.group
        data = g[self.data_name]
        cf = data.chunks[0]
        n = (self._buffered // cf) * cf if whole_chunks_only else self._buffered
        if n:
            buf = self._parts[0] if len(self._parts) == 1 else np.concatenate(self._parts)
            data.resize((self._written + n, *self.row_shape))
            data[self._written:self._written + n] = buf[:n]
            self._parts = [buf[n:].copy()] if n < len(buf) else []
            self._buffered = len(buf) - n
            self._written += n
        # commit the items whose rows are now all on disk
        done, end = _ready(self._pending, self._committed_rows, self._written)
        if not done:
            return
        self._pending = self._pending[len(done):]
        k, m = self._committed, len(done)
        sizes = np.array([d["size"] for d in done], dtype=np.int64)
        g["offsets"].resize((k + 1 + m,))
        g["offsets"][k + 1:] = self._committed_rows + np.cumsum(sizes)
        for name, (dt, tail) in self.columns.items():
            g[name].resize((k + m, *tail))
            g[name][k:] = np.array([d["values"][name] for d in done], dtype=dt).reshape(m, *tail)
        self._append_ids(k, [d["id"] for d in done])
        self._committed += m
        self._committed_rows = end
        # the commit point moves only after the arrays above are written, in one update with what a store kind
        # records of the items it commits (read again when an interrupted ingestion resumes)
        g.attrs.update({**{attr: _names(self._index[col]) for col, attr in self.coded.items()},
                        **jsonable(self.commit_attrs([d["id"] for d in done])),
                        "committed": {self.unit: self._committed, self.data_unit: self._committed_rows}})

    def commit_attrs(self, ids: list[str]) -> dict:
        """Attributes written with the commit point when items ``ids`` are committed (none here)."""
        return {}

    def _append_ids(self, k: int, ids: list[str]):
        g = self.group
        encoded = [i.encode("utf-8") for i in ids]
        blob = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        g["id_bytes"].resize((self._id_bytes + len(blob),))
        if len(blob):
            g["id_bytes"][self._id_bytes:] = blob
        g["id_offsets"].resize((k + 1 + len(ids),))
        g["id_offsets"][k + 1:] = self._id_bytes + np.cumsum([len(e) for e in encoded])
        self._id_bytes += len(blob)

    def flush(self):
        """Write everything buffered and commit it (the store stays incomplete)."""
        self._flush(whole_chunks_only=False)

    def close(self, summary: dict | None = None) -> None:
        """Flush, write the summary attributes, then the completion marker (last)."""
        self._flush(whole_chunks_only=False)
        if self._pending:  # pragma: no cover - guarded by _flush
            raise StoreError("internal error: items left uncommitted at close")
        if self._committed == 0:
            raise StoreError(f"{self.path}: no {self.unit[:-1]} was written, so there is nothing to store")
        g = self.group
        g.attrs.update({f"n_{self.unit}": self._committed, f"n_{self.data_unit}": self._committed_rows,
                        **jsonable(summary or {})})
        # the checksum of every chunk, so that a chunk of another store is told apart, then the marker
        integrity.write_manifest(g, self.path, g.attrs["arrays"])
        g.attrs["complete"] = True

    @property
    def committed(self) -> int:
        return self._committed

    @contextmanager
    def committed_on_error(self):
        """What an ingestion ended by an error leaves: its appended items committed, or no store.

        The items appended before the error are whole (an item is checked
        before it is appended), so they are committed and the incomplete
        store resumes after them. A store that then holds no item is
        removed: ``info`` would call it an interrupted ingestion, yet it
        holds nothing to resume (the lock then removes the folders made for it).
        """
        try:
            yield self
        except Exception:
            if self._pending and not self._flush_cut:
                try:
                    self.flush()
                except Exception:   # the error was the write itself: the store stays at its last commit point
                    pass
            if not self._committed:
                shutil.rmtree(self.path, ignore_errors=True)
            raise

    @property
    def old_attrs(self) -> dict:
        return dict(self.group.attrs)


class IdsOf:
    """The ids of ``store`` read one at a time, ``ids[i]``: for messages that name an item only when there is
    something to say (:meth:`RaggedStore.ids` reads them all)."""

    def __init__(self, store):
        self.store = store

    def __getitem__(self, i) -> str:
        return self.store.id_of(int(i))


def files_digest(paths, root) -> dict:
    """``{"count", "digest"}`` of files (relative path, size, modification time): recorded with a
    store's source, and made again, without opening a file, by every run that checks the store against its
    archive (:func:`same_files`)."""
    import hashlib

    root = Path(root)
    h = hashlib.sha256()
    n = 0
    for p in sorted(Path(p) for p in paths):
        rel = _relative(p, root)
        check_utf8_name(p, rel)   # any file of the archive: the digest is of UTF-8 names
        st = p.stat()
        h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        n += 1
    return {"count": n, "digest": h.hexdigest()}


def content_digest(paths, root) -> str:
    """SHA-256 of files by what they hold (relative path, size, SHA-256 of the bytes, read in blocks), in the
    order of their relative paths: the same for a copy of an archive with new modification times (copied,
    unpacked or checked out again). Ingestion records it as ``files["content"]`` of a store's source."""
    import hashlib

    root = Path(root)
    h = hashlib.sha256()
    for rel, p in sorted((_relative(Path(p), root), Path(p)) for p in paths):
        try:
            h.update(f"{rel}\0{p.stat().st_size}\0{integrity.file_sha256(p)}\n".encode())
        except OSError as exc:   # every file of the archive is read, also those its reader never opens
            raise FormatError(p, f"cannot read it ({exc.strerror}), and a store records the contents of every "
                                 f"file of its archive; make it readable, or move it out of {root}") from None
    return h.hexdigest()


def _relative(p: Path, root: Path) -> str:
    """``p``'s name in the digests of its archive ``root``: its path relative to the root; a file outside the
    root (listed by an index) by its absolute path."""
    return p.name if p == root else p.relative_to(root).as_posix() if p.is_relative_to(root) else p.as_posix()


def same_files(old, new, content=None) -> bool:
    """Whether two ``files`` records of source records (:func:`files_digest`'s, with the ``"content"`` of
    :func:`content_digest` when ingestion wrote them) are of the same files; the one comparison of a store's
    archive for ``run``, a resumed ingestion and ``predict``. ``old``: a store's; ``new``: another store's,
    or the archive's as it is now, with ``content()`` computing its content digest (called only when needed).

    - Both record their content: the same count and content digest.
    - The same count and metadata digest: the same files, no file read. Every run takes this path; its known
      limit, as make's and rsync's: a file rewritten in place at the same size, its modification time set
      back, is not seen.
    - Otherwise, ``old`` recording its content and ``content`` given: the same count and content digest (the
      archive copied, unpacked or checked out again: new modification times, the same files). A match is
      remembered in the user cache (:func:`record_copy`), so later runs over the same copy read no file again:
      the fast path's test, against the copy's metadata.

    A record without a content digest (written by an earlier streamcov) is otherwise of other files."""
    if not (isinstance(old, dict) and isinstance(new, dict)) or old.get("count") != new.get("count"):
        return False
    if "content" in old and "content" in new:
        return old["content"] == new["content"]
    if old.get("digest") is not None and old.get("digest") == new.get("digest"):
        return True
    if "content" not in old or content is None:
        return False
    if is_known_copy(old["content"], new.get("digest")):
        return True
    if content() != old["content"]:
        return False
    record_copy(old["content"], new.get("digest"))
    return True


def _copies_of(content: str, digest):
    """``(path, known)``: the record of the copies of contents ``content`` (:func:`content_digest`) in the user
    cache and the metadata digests it holds (:func:`files_digest`; none when it is missing or unreadable), or
    None where there is nothing to record (not two digests, no cache). The records lie in ``archives/`` of
    the user cache (:func:`streamcov._config.default_cache_dir`), one small file per content digest holding
    the metadata digests of its copies (the 16 latest); a cache that cannot be read or written only means the
    contents are read again."""
    from .._config import default_cache_dir

    if not (isinstance(content, str) and isinstance(digest, str)):
        return None
    try:
        path = default_cache_dir() / "archives" / f"{content[:32]}.json"
    except RuntimeError:   # no home directory (a container's user without one, HOME unset): no cache
        return None
    try:
        rec = json.loads(path.read_text())
        known = rec["digests"] if rec.get("content") == content and isinstance(rec.get("digests"), list) else []
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        known = []
    return path, known


def is_known_copy(content: str, digest) -> bool:
    """Whether the files of metadata digest ``digest`` (:func:`files_digest`) were found to hold the contents
    ``content`` (:func:`content_digest`) before (:func:`record_copy`)."""
    copies = _copies_of(content, digest)
    return copies is not None and digest in copies[1]


def record_copy(content: str, digest) -> None:
    """Record that the files of metadata digest ``digest`` hold the contents ``content``, for
    :func:`is_known_copy`; a cache that cannot be written records nothing."""
    copies = _copies_of(content, digest)
    if copies is None or digest in copies[1]:
        return
    path, known = copies
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"content": content, "digests": [*known, digest][-16:]}))
        os.replace(tmp, path)
    except OSError:
        with suppress(OSError):   # no folder for it, or a file in its place
            tmp.unlink()


def skipped_text(skipped: list) -> str:
    """``(id: reason; id: reason; id: reason and K more)``: the items a store records in ``attrs["skipped"]``,
    the first three named, as ingestion and predict report them."""
    shown = "; ".join(f"{s.get('id')}: {s.get('reason')}" for s in skipped[:3])
    more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
    return f"({shown}{more})"


def enclosing_store(path) -> Path | None:
    """The zarr store (a folder holding ``zarr.json``) that ``path`` is, or lies inside, or None: where an
    output must never be written (it would sit among the store's arrays, or replace their metadata)."""
    path = Path(path)
    return next((p for p in (path, *path.resolve().parents) if (p / "zarr.json").is_file()), None)


def inside_source(path, source) -> Path | None:
    """The archive folder ``source`` (a source record's ``path``) when ``path`` is that folder or lies inside
    it, else None: a store written there would add its own files to the archive it records."""
    if not source or not Path(source).is_dir():
        return None
    root = Path(source).resolve()
    where = Path(os.path.abspath(path))
    return root if where.is_relative_to(root) or where.resolve().is_relative_to(root) else None


def outside_source(path, source) -> None:
    """Refuse a skeleton store ``path`` inside the archive folder ``source`` it is written from, in one line:
    its own files would join the archive's digest (every file under the folder), so every later run would
    find the archive changed and refuse the store. Checked before the ingestion's lock file (beside the
    store) is made. (An image store may lie in its image folder: the scan skips zarr stores.)"""
    source_dir = inside_source(path, source)
    if source_dir is not None:
        raise StoreError(f"{path}: inside the folder {source_dir} that it is written from; its files would become "
                         f"part of that archive, which would then look changed to every later run: choose an "
                         f"output path outside {source_dir}")


def read_only_attrs(path) -> dict:
    """Attributes of the store at ``path`` (complete or not)."""
    return dict(open_group(path, "r").attrs)
