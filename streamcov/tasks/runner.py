"""Run a pipeline: load and validate it, run its task, write ``result.json``."""
from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

from ..errors import ConfigError, arg, arg_name, bool_arg, path_arg, say_note
from ..lock import OUTPUT_LOCK, OUTPUT_MARKER, RUN_FOLDERS, new_folders_undone, output_lock
from .config import load_config_and_origins, overrides_list
from .registry import RunContext, get_task


def run(pipeline, *, overrides=(), store=None, output=None, scheduler=None, workers=None,
        progress: bool = False, resume: bool = False, text: str | None = None, flags: dict | None = None,
        note=None, text_name: str | None = None) -> dict:
    """Run a pipeline file, a dict or a validated configuration; returns its result.

    The result is also written to ``<output>/result.json``.

    Parameters
    ----------
    pipeline : path, dict, a configuration from :func:`.config.load_config`, or None
        None when ``text`` gives the pipeline.
    overrides : sequence of str
        ``section.key=value`` assignments, as ``--set``.
    store : path, optional
        Run on this store instead of the pipeline's input (``--store``).
    output : path, optional
        Output folder (default: the pipeline's ``output``).
    scheduler, workers :
        None (default): the pipeline's ``[dask] scheduler`` (itself ``threads`` by default); ``threads``,
        ``synchronous``, ``local-cluster`` (``workers``
        single-threaded worker processes) or a scheduler address
        ``tcp://HOST:PORT``, or a ``distributed.Client`` or cluster object of the caller's (its scheduler's
        address: the caller's client is left as it is); ``workers`` alone means a LocalCluster of that many.
    progress, resume : bool
        Progress bars; continue an interrupted run from its checkpoints.
    text : str, optional
        TOML text of the pipeline, given with ``pipeline=None`` (``streamcov run --demo``); a path or a dict
        beside it is refused.
    flags : dict, optional
        ``key path -> command-line flag`` for values a command set from its flags, so that errors name the
        flag (:func:`.config.load_config`); not read for a validated configuration run as it is (without
        ``overrides`` or ``store``).
    note : callable, optional
        ``note(message)`` gets the loader's notes (:func:`.config.load_config`) and the run's own; default:
        printed to stderr as ``note: ...``.
    text_name : str, optional
        How messages name ``text`` (default ``<pipeline text>``).
    """
    output = None if output is None else path_arg("output", output, None, "the folder to write the results into")
    resume, progress = bool_arg("resume", resume), bool_arg("progress", progress)
    if pipeline is not None and not isinstance(pipeline, dict) and not hasattr(pipeline, "model_dump"):
        pipeline = path_arg("pipeline", pipeline, "PIPELINE", "the pipeline file (.toml)")
    if output is not None and "\0" in str(output):
        raise ConfigError(f"{arg_name('output')}: holds a NUL character (\\u0000), which no path may contain; "
                          f"remove it")
    from ..stream.runtime import resolve_runtime

    typed, typed_workers = scheduler, workers   # as given: --workers alone resolves to a local-cluster
    scheduler, workers = resolve_runtime(scheduler, workers)
    overrides = overrides_list(overrides)   # once: a generator is read here and nowhere else
    if hasattr(pipeline, "task") and hasattr(pipeline, "model_dump") and text is not None:
        # load_config's refusal, for a configuration that would run as it is (text was read nowhere)
        raise ConfigError("a pipeline and text=... both given: give one pipeline (a file, a dict or a TOML text)")
    if hasattr(pipeline, "task") and hasattr(pipeline, "model_dump") and (overrides or store is not None
                                                                          or output is not None):
        # a validated configuration with overrides, a store or an output folder: validated again with them (the
        # folder's {name} filled in and checked, "~" expanded, as from a file), never run without them
        pipeline = pipeline.model_dump(mode="json", exclude_unset=True)
    if hasattr(pipeline, "task") and hasattr(pipeline, "model_dump"):
        cfg = pipeline
        naming, origins = contextlib.nullcontext, None
    else:
        sets = overrides
        cfg, origins = load_config_and_origins(pipeline, sets, store, text=text, text_name=text_name,
                                               flags=flags, note=note, scheduler=scheduler,
                                               flags_given={"scheduler": typed, "workers": typed_workers},
                                               output=None if output is None else Path(output))
        # the task's own checks (against the store, the data) name a key; where its value came from goes in front
        naming = origins.naming
    dask = getattr(cfg, "dask", None)
    if dask is None:   # an in-memory task (image evaluation, TGP, the study): nothing would read these
        given = [(k, v) for k, v in (("scheduler", typed), ("workers", workers), ("resume", resume or None))
                 if v is not None]
        if given:
            other = ("; task \"image-stream-classification\" runs images out of core, on any scheduler"
                     if cfg.task == "image-classification" else "")
            raise ConfigError(f"{' '.join(arg(k, v) for k, v in given)}: task {cfg.task!r} runs in memory in this "
                              f"process, with no Dask scheduler and no checkpoints to resume from; leave "
                              f"{' and '.join(arg_name(k) for k, _ in given)} out{other}")
    if dask is not None and workers is None and (scheduler or dask.scheduler) == "local-cluster":
        # --workers was checked by resolve_runtime; a count in the file, or one worker process per core, here
        # (a task without a [dask] table starts no cluster)
        from ..stream.runtime import check_local_workers

        with naming():
            check_local_workers(dask.workers, f"dask.workers = {dask.workers}" if dask.workers is not None else
                                arg("scheduler", scheduler) if scheduler else 'dask.scheduler = "local-cluster"')
    if resume and getattr(getattr(cfg, "model", None), "learner", None) == "exact-svm":
        # the exact SVM trains in memory and writes no checkpoints: --resume changes nothing (said, not silent)
        say_note(f"{arg('resume', True)}: learner \"exact-svm\" trains in memory and writes no checkpoints; "
                 f"there is nothing to resume, and the run computes its kernel again", note)
    spec = get_task(cfg.task)
    out = Path(cfg.output)
    if resume and getattr(getattr(cfg, "model", None), "learner", None) != "exact-svm" and not _resumable(out):
        # a requeued job started from another folder resolves a relative output elsewhere: it trained from the
        # start in a new folder without a word
        say_note(f"{arg('resume', True)}: {out} holds nothing to resume (no checkpoint, finished fold or feature "
                 f"store); the run starts from the beginning", note)
    where = (arg("output", output) if output is not None else
             origins.flags[("output",)] if origins is not None and ("output",) in origins.flags else
             f"output = \"{cfg.output}\"")   # (a flag of another name: `study --out`)
    resolved = check_output_folder(out, where, cfg.task, getattr(getattr(cfg, "data", None), "source_read", None))
    _check_store_not_written(cfg, origins, resolved, where)
    # another store where the run writes its model or checkpoints (the run's own data store is said above, in its
    # key's words): their files would be mixed into it (the model saved into it, refused by FittedPipeline.save
    # after the whole training)
    for name, what in RUN_FOLDERS.items():
        if (resolved / name / "zarr.json").is_file():
            raise ConfigError(f"{where}: {resolved / name} is a zarr store where a run writes {what}; move or delete "
                              f"it, or choose another output folder")
    ctx = RunContext(output=out, scheduler=scheduler, workers=workers, progress=progress, resume=resume)
    t0, started = time.perf_counter(), time.time()
    # a run refused (bad input found by the task's own checks) before it wrote anything but its marker leaves no
    # folder it created; one that wrote features, checkpoints or a store there keeps them for --resume
    with new_folders_undone(out, leftovers=(OUTPUT_MARKER,)):
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:   # a parent is a file, no permission, ...
            raise ConfigError(f"{where}: cannot create the folder {out} ({exc.strerror})") from None
        with output_lock(out):
            if _task_of(_marker(out)) is None:   # none, or one naming no task (check_output_folder refused the rest)
                from ..files import atomic_write_text

                # whole or absent: a marker left empty by a full disk named no task, and the next run of another
                # task wrote its results beside this one's
                atomic_write_text(out / OUTPUT_MARKER,
                                  json.dumps({"written_by": "streamcov run", "task": cfg.task}) + "\n")
            earlier = _earlier_store(out / "result.json")
            store = getattr(getattr(cfg, "data", None), "store", None)
            if earlier is not None and store is not None and not resume and not _same_store(earlier, store, out):
                # a shipped file run on a user's store writes the file's output folder (runs/{name}): said, not done
                # silently
                say_note(f"{out}: the results of an earlier run on another store ({earlier}) are replaced; "
                         f"give --output to keep both", note)
            _check_writable(out, where)
            # an earlier run's summary goes first: a run stopped half-way must not leave it looking like its own
            # (its details too: an image run stopped by a full disk left the earlier run's accuracy there)
            for name in ("result.json", "predictions.csv", *(p.name for p in out.glob(DETAILS))):
                (out / name).unlink(missing_ok=True)
            if (out / "predictions.csv.tmp").is_file():   # an earlier streamcov's temporary of it
                (out / "predictions.csv.tmp").unlink()
            from ..files import remove_stale_temporaries

            # what a kill left half written: the run's own files in its folder (where predict --out may write
            # too), everything in the folders that are the run's alone
            remove_stale_temporaries(out, ("result.json", "predictions.csv", OUTPUT_MARKER),
                                     patterns=(r"[A-Za-z0-9_]+_details\.json",))
            remove_stale_temporaries(out / "checkpoints")
            remove_stale_temporaries(out / "model")
            from .._config import compile_clock

            with naming(), compile_clock() as compiling:
                result = spec.run(cfg, ctx)
            result = {"task": cfg.task, **result, "compile_seconds": round(compiling.seconds, 3)}
            # every task reports it beside its own figure; the file's figure is of the file's data: not reported
            # for other data given by a flag (--store, --set data.source=...), unless a flag gives it too
            other_data = origins is not None and any(k[:2] in _DATA_CHOICE for k in origins.flags) and \
                ("paper_accuracy",) not in origins.flags
            if getattr(cfg, "paper_accuracy", None) is not None and not other_data:
                result["paper_accuracy"] = cfg.paper_accuracy
            result.setdefault("seconds", round(time.perf_counter() - t0, 3))
            result.update(provenance(cfg, started))
            result = finite_json(result)
            text = json.dumps(result, indent=2, default=json_default, allow_nan=False) + "\n"
            from ..files import atomic_write_text
            atomic_write_text(out / "result.json", text)
    import warnings

    from ..errors import RunWarning

    for w in result.get("warnings", []):   # only in the result, they reached no notebook user
        warnings.warn(w, RunWarning, stacklevel=2)
    return result


def provenance(cfg, started: float) -> dict:
    """What a result records to be audited and run again: ``config``, the configuration as run (``--set``
    applied, paths resolved; ``run(result["config"])`` runs it again), ``versions`` of streamcov (with
    ``code_sha256``, the digest of its modules: a checkout's version names a release, not its code) and of the
    libraries, and when it ran (UTC). The result had held the model's and map's settings only: a run's
    ``[descriptor]``, ``[split]`` or ``dask.block_size`` could not be told from it."""
    import datetime
    import os
    import platform

    from .. import __version__
    from .._config import code_identity, library_versions

    def utc(t: float) -> str:
        return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(timespec="seconds")

    versions = {"streamcov": __version__, "code_sha256": code_identity("package")["streamcov"],
                "python": platform.python_version(),
                **library_versions("numpy", "numba", "scipy", "scikit-learn", "dask", "distributed", "zarr")}
    config = cfg.model_dump(mode="json", exclude_unset=True)
    # its paths absolute, as the result's others: a store found in the working folder was kept as typed
    if config.get("output"):
        config["output"] = os.path.abspath(config["output"])
    for table, key in (("data", "store"), ("data", "source"), ("split", "file"), ("study", "data_root")):
        if isinstance(config.get(table), dict) and isinstance(config[table].get(key), str):
            config[table][key] = os.path.abspath(config[table][key])
    return {"config": config, "versions": versions, "started_utc": utc(started), "finished_utc": utc(time.time())}


def _resumable(out: Path) -> bool:
    """Whether the output folder ``out`` holds something a resumed run continues from: a learner's checkpoint or
    finished fold (``checkpoints/``), or a store the run writes (features, a ConvNet's hypercolumns)."""
    try:
        return any((out / "checkpoints").glob("*")) or any(p for pattern in WRITTEN_STORES for p in out.glob(pattern))
    except OSError:
        return False


#: the details files of a run's tasks (image_classification_details.json, <task>_details.json)
DETAILS = "*_details.json"


def _earlier_store(result: Path):
    """The store an earlier run's ``result.json`` names, or None (none there, or unreadable: nothing to say)."""
    try:
        doc = json.loads(result.read_text())
    except (OSError, ValueError):
        return None
    store = doc.get("store") if isinstance(doc, dict) else None
    return store if isinstance(store, str) and store else None


def _same_path(a, b) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return str(a) == str(b)


def _same_store(earlier: str, store, out: Path) -> bool:
    """Whether the store an earlier run's ``result.json`` names is ``store``. Runs before 2026-12-01 recorded it
    as given, relative to their working directory, which is unknown: such a path is the store when it names it
    from the working directory or from a folder above the output folder (a run started from the folder that
    holds both, the usual layout), so that a later run from elsewhere says nothing false about another store."""
    if Path(earlier).is_absolute():
        return _same_path(earlier, store)
    try:
        bases = [Path.cwd(), *Path(out).resolve().parents]
    except OSError:
        return _same_path(earlier, store)
    return any(_same_path(base / earlier, store) for base in bases)


def check_output_folder(out: Path, where: str, task: str, source=None) -> Path:
    """Refuse an output folder that a run of ``task`` must not write into, naming it as ``where`` says (the
    flag or key as typed); returns it resolved. Not a file, a store, a model folder, the folder it reads its
    data from (``source``), a folder of files no streamcov run wrote, nor one of another task's outputs
    (its result and plots would lie beside that task's model and predictions); the names it writes not taken
    by the other kind of entry. ``streamcov run`` and ``streamcov study merge`` check their folders here."""
    try:
        out.exists()
    except OSError as exc:   # a name too long for the file system, a folder that cannot be searched
        raise ConfigError(f"{where}: cannot use {out} ({exc.strerror}); choose another output folder") from None
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{where}: {out} is a file, not a folder; choose another output folder")
    try:
        resolved = out.resolve()
    except (OSError, RuntimeError) as exc:   # a loop of symbolic links
        raise ConfigError(f"{where}: cannot use {out} ({getattr(exc, 'strerror', None) or exc}); choose another "
                          f"output folder") from None
    # a run writes features.zarr, model/ and result.json: never into a store (it would sit among its
    # arrays) nor into a model folder (two models' files mixed)
    from ..data.ragged import enclosing_store, inside_source   # here: the data package brings zarr

    store = enclosing_store(out)
    if store is not None:
        raise ConfigError(f"{where}: {out} is {'a zarr store' if store == out else f'inside the zarr store {store}'}; "
                          f"choose an output folder outside every store")
    # nor into the folder it reads its data from (as data.store is not, data.ragged.outside_source): the run's
    # files would join that archive or image folder, which every later run would then find changed or unreadable
    source = inside_source(out, source)
    if source is not None:
        raise ConfigError(f"{where}: {out} lies inside {source}, the data.source folder this run reads; its files "
                          f"would join that folder's data, and a store ingested from it would then be found "
                          f"out of date: choose an output folder outside {source}")
    if (out / "model.json").is_file():
        raise ConfigError(f"{where}: {out} is a model folder (it holds model.json); choose another output folder")
    _check_not_someone_elses(out, resolved, where)
    _check_own_names(out, where)
    marker = _marker(out)
    other = _task_of(marker)
    if marker is None and (out / OUTPUT_MARKER).is_file():
        raise ConfigError(f"{where}: {out / OUTPUT_MARKER} is empty or damaged (written while the disk was full?), so "
                          f"which task's outputs the folder holds is unknown; delete that file if they are this "
                          f"task's ({task!r}), or choose another output folder")
    if other is not None and other != task:
        raise ConfigError(f"{where}: {out} holds the outputs of a run of task {other!r}; this one ({task!r}) would "
                          f"leave its results beside that run's: choose another output folder")
    return resolved


def _marker(out: Path) -> dict | None:
    """The marker of the output folder ``out``: a JSON object, or None (no marker, or one empty or damaged)."""
    try:
        doc = json.loads((out / OUTPUT_MARKER).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _task_of(marker: dict | None) -> str | None:
    """The task a marker names (None: no marker, or one naming none)."""
    task = (marker or {}).get("task")
    return task if isinstance(task, str) else None


def _earlier_streamcov_output(out: Path) -> bool:
    """Whether ``out`` was written by a streamcov from before :data:`OUTPUT_MARKER`: its ``result.json`` names
    the task, a feature store there holds a fingerprint, a run left its checkpoints or lock, or it holds a
    study's report (``study merge`` writes no marker)."""
    if (out / "checkpoints").is_dir() or (out / OUTPUT_LOCK).exists():
        return True
    try:   # the report of `streamcov study` (kernel-approx or merge): results.csv of its columns, table.md
        with open(out / "results.csv", encoding="utf-8") as fh:
            header = fh.readline().strip().split(",")
        if (out / "table.md").is_file() and {"dataset", "exact_accuracy", "map", "nu"} <= set(header):
            return True
    except (OSError, UnicodeDecodeError):
        pass
    try:
        earlier = json.loads((out / "result.json").read_text())
        if isinstance(earlier, dict) and "task" in earlier:
            return True
    except (OSError, ValueError):
        pass
    for store in out.glob("features*.zarr"):
        try:
            if "fingerprint" in json.loads((store / "zarr.json").read_text()).get("attributes", {}):
                return True
        except (OSError, ValueError, AttributeError):
            pass
    return False


def _check_not_someone_elses(out: Path, resolved: Path, where: str) -> None:
    """Refuse an output folder that holds files no streamcov run wrote (a run writes its results, features,
    model, checkpoints, tables and figures there, and would overwrite or delete files of the same names), and
    the file system's root or the home folder. Names starting with a dot, and output folders of other runs
    nested in it, are not counted. ``resolved``: ``out`` resolved."""
    try:
        home = Path.home().resolve()
    except (RuntimeError, KeyError, OSError):   # HOME unset for a user the system does not name (a container's)
        home = None
    if resolved == Path(resolved.anchor) or resolved == home:
        what = "the root of the file system" if resolved == Path(resolved.anchor) else "your home folder"
        raise ConfigError(f"{where}: {out} is {what}; give a folder of its own for the run's outputs, e.g. "
                          f"{(home or Path.cwd()) / 'streamcov-runs' / 'NAME'}")
    if not out.is_dir() or (out / OUTPUT_MARKER).is_file():
        return
    # another run's output folder inside this one is a run's too
    theirs = sorted(p.name for p in out.iterdir() if not p.name.startswith(".") and not (p / OUTPUT_MARKER).is_file())
    if theirs and not _earlier_streamcov_output(out):
        raise ConfigError(f"{where}: {out} holds {theirs[0]!r}{' and more' if len(theirs) > 1 else ''}, which no "
                          f"streamcov run wrote; a run writes its results, features and model there and would "
                          f"overwrite files of the same names: choose a new or empty output folder")


# names a run writes in its output folder, by kind: a file where it writes a folder (model, checkpoints, a
# feature store or a generated store, *.zarr) or a folder where it writes a file stopped it with a traceback
# at that step, after its features were computed
RUN_FILES = {"result.json": "its result", "predictions.csv": "its predictions"}
# the stores a run writes in its output folder (feature stores, a ConvNet's hypercolumns): not one it is given
WRITTEN_STORES = ("features*.zarr", "hypercolumns.zarr")


def _check_own_names(out: Path, where: str) -> None:
    """Refuse an output folder where a name the run writes is taken by the other kind of entry (a file named
    ``model``, a folder named ``result.json``) or by a link (the run wrote through it, into another run's folder),
    naming it."""
    if not out.is_dir():
        return
    # a link to an existing folder the run writes into: the run wrote through it (another run's model overwritten).
    # Not result.json or predictions.csv (a run removes them first and writes new files), nor a store it only reads
    written = ([(out / name, what) for name, what in RUN_FOLDERS.items()]
               + [(p, "its features") for pattern in WRITTEN_STORES for p in sorted(out.glob(pattern))])
    linked = [(p, what) for p, what in written if p.is_symlink() and p.exists()]
    if linked:
        path, what = linked[0]
        raise ConfigError(f"{where}: {path} is a link to {path.resolve()}, and a run writes {what} there through "
                          f"it; remove the link, or choose another output folder")

    def not_a_folder(p: Path) -> str | None:
        if p.is_dir() or not (p.exists() or p.is_symlink()):
            return None
        return "a link to nothing" if not p.exists() else "a file"

    wrong = [(p, f"{kind} where a run writes {what} (a folder)") for name, what in RUN_FOLDERS.items()
             if (kind := not_a_folder(p := out / name))]
    wrong += [(p, f"{kind} where a run writes a store (a folder)") for p in sorted(out.glob("*.zarr"))
              if (kind := not_a_folder(p))]
    wrong += [(p, f"a folder where a run writes {what} (a file)") for name, what in RUN_FILES.items()
              if (p := out / name).is_dir()]
    if wrong:
        path, what = wrong[0]
        raise ConfigError(f"{where}: {path} is {what}; move or delete it, or choose another output folder")


def _check_writable(out: Path, where: str) -> None:
    """Refuse, before anything of an earlier run is removed, an output folder where this user cannot write what the
    run writes again: the folder, the run's files and everything inside its folders and stores (a team's shared
    folder whose feature store is another user's). The earlier ``result.json`` was removed first, then the run
    stopped at that store: the other user's result was lost for nothing."""
    import os

    # the folder takes new files and loses the earlier result (a file of its own is replaced, never written). A
    # store is checked whole, even one this run would only read (its fingerprint the same): which it computes
    # again is known only when it opens it, after the result is gone
    tops = [out, *(p for name in RUN_FOLDERS if (p := out / name).exists()),
            *(p for pattern in (*WRITTEN_STORES, "synthetic.zarr") for p in sorted(out.glob(pattern)))]

    def refuse(path):
        raise ConfigError(f"{where}: {path} cannot be written by this user ({_owner(path)}), and the run writes "
                          f"there; the earlier run's files are left as they are: choose another output folder, or "
                          f"ask the owner for write access")

    def unlistable(exc: OSError):   # a folder of another user's mode 0700: nothing in it could be checked
        refuse(exc.filename or top)

    for top in tops:
        if not os.access(top, os.R_OK | os.W_OK | os.X_OK):
            refuse(top)
        for folder, _, files in ([] if top == out else os.walk(top, onerror=unlistable)):
            # a folder must take new names (rename, remove); a file of a store may be written in place (zarr)
            checks = [(folder, os.R_OK | os.W_OK | os.X_OK), *((os.path.join(folder, f), os.W_OK) for f in files)]
            for path, mode in checks:
                if not os.access(path, mode):
                    refuse(path)


def _owner(path) -> str:
    """``owned by <user>`` of ``path`` (the uid where no user has it), for a message."""
    import os
    import pwd

    try:
        uid = os.stat(path).st_uid
    except OSError:
        return "owner unknown"
    try:
        return f"owned by {pwd.getpwuid(uid).pw_name}"
    except KeyError:
        return f"owned by uid {uid}"


#: the [data] keys that choose which data a run reads (not how it reads them: on_error, pixel_dtype)
_DATA_CHOICE = {("data", k) for k in ("store", "source", "format", "options", "synthetic", "group_level", "exclude",
                                      "textures", "patch", "max_per_class", "max_train", "max_test", "n_samples",
                                      "noise", "test_fraction")}


def _check_store_not_written(cfg, origins, out: Path, where: str) -> None:
    """Refuse a ``data.store`` at (or inside) a name the run writes in its output folder ``out`` (resolved): the
    model, the checkpoints or a feature store written over or into the data store (a model folder inside the
    store; the store overwritten by the features, then a traceback)."""
    path = getattr(getattr(cfg, "data", None), "store", None)
    if path is None:
        return
    try:
        store = Path(path).resolve()
    except (OSError, RuntimeError):
        return   # said where the store is opened
    written = [out / name for name in RUN_FOLDERS] + [out / name for name in RUN_FILES]
    hit = next((p for p in written if store == p or p in store.parents), None)
    if hit is None and store.parent == out and any(store.match(pattern) for pattern in WRITTEN_STORES):
        hit = store
    if hit is not None:
        key = origins.where(("data", "store")) if origins is not None else "data.store"
        what = {**RUN_FOLDERS, **RUN_FILES}.get(hit.name, "its features")
        at = "is" if hit == store else f"lies inside {hit},"
        raise ConfigError(f"{key}: data.store = \"{path}\" {at} where the run writes {what} ({where}): store the "
                          f"data elsewhere, or choose another output folder")


def finite_json(obj, path="", reasons=None):
    """``obj`` with every NaN or infinite number replaced by None; ``null_values`` says where and why.

    JSON has no NaN: a bare ``NaN`` in ``result.json`` breaks strict readers.
    """
    import math

    top = reasons is None
    reasons = {} if top else reasons
    if isinstance(obj, dict):
        out = {k: finite_json(v, f"{path}.{k}" if path else str(k), reasons) for k, v in obj.items()}
    elif isinstance(obj, (list, tuple)):
        out = [finite_json(v, f"{path}.{i}", reasons) for i, v in enumerate(obj)]
    elif isinstance(obj, float) and not math.isfinite(obj):
        reasons[path] = f"not a finite number ({obj})"
        out = None
    else:
        try:
            import numpy as np
            if isinstance(obj, np.floating) and not np.isfinite(obj):
                reasons[path] = f"not a finite number ({obj})"
                return None
        except ImportError:  # pragma: no cover
            pass
        out = obj
    if top and reasons and isinstance(out, dict):
        out["null_values"] = reasons
    return out


def json_default(o):
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


# the fields of a run's description that are not result.json's: a result naming one of them (not written by any
# streamcov) must not replace it
_DESCRIPTION_KEYS = ("path", "task", "complete", "problems", "being_written_by", "checkpoints", "folds",
                     "warnings", "streamcov", "files", "model", "verified")


def describe_run(path) -> dict:
    """What the output folder ``path`` of ``streamcov run`` holds, for ``streamcov info``.

    ``result.json`` is written last, once a run has finished (an earlier one is removed when the next run
    starts): without it the run is under way (``being_written_by``, the holder of the folder's lock: a run, or
    a ``predict --out`` writing there) or was stopped (``complete`` False; ``checkpoints``, the folds whose
    training it saved). With it: the result's numbers and words (task, pipeline, accuracy, seconds, the store it
    read, when it ran), each fold's accuracy and sizes, its warnings, the streamcov that wrote it, and which of
    the files a run writes in its folder are there (``files``: model/, predictions.csv, features*.zarr).
    ``problems``: a ``result.json`` that is not a file or not a JSON object (the result cannot be read).
    """
    from ..lock import output_writer

    path = Path(path)
    marker = _marker(path)
    out: dict = {"path": str(path), "task": _task_of(marker), "complete": False}
    writer = output_writer(path)
    if writer is not None:
        out["being_written_by"] = writer
    result_file = path / "result.json"
    if not result_file.exists():
        out["checkpoints"] = sorted(p.name for p in (path / "checkpoints").glob("*.npz"))
        return out
    try:
        result = json.loads(result_file.read_text())
    except (OSError, ValueError, UnicodeDecodeError, RecursionError) as exc:
        result = exc
    if not isinstance(result, dict):
        why = ("a folder" if result_file.is_dir() else
               f"{type(result).__name__}: {result}" if isinstance(result, Exception) else
               f"a JSON {type(result).__name__}")
        out["problems"] = [f"result.json is not a run's result ({why})"]
        return out
    out["complete"] = True
    out.update({k: v for k, v in result.items() if (v is None or isinstance(v, (str, int, float, bool)))
                and k not in _DESCRIPTION_KEYS})
    if isinstance(result.get("task"), str):
        out["task"] = result["task"]
    folds = result.get("folds")
    if isinstance(folds, list):
        out["folds"] = [{k: f[k] for k in ("fold", "accuracy", "n_train", "n_test") if k in f}
                        for f in folds if isinstance(f, dict)]
    if isinstance(result.get("warnings"), list):
        out["warnings"] = result["warnings"]
    versions = result.get("versions")
    if isinstance(versions, dict):
        out["streamcov"] = versions.get("streamcov")
    out["files"] = {"model": any((path / "model" / name).is_file() for name in ("model.json", "model.npz")),
                    "predictions": (path / "predictions.csv").is_file(),
                    "feature_stores": sorted(p.name for p in path.glob("features*.zarr") if p.is_dir())}
    return out


__all__ = ["describe_run", "json_default", "run"]
