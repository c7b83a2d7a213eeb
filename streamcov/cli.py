"""The ``streamcov`` command. It parses arguments and delegates; nothing else.

Every error a user can cause is a :class:`~streamcov.errors.StreamcovError`
and becomes one line ``streamcov <cmd>: error: ...`` with exit code 2;
anything else is a bug in streamcov and keeps its traceback (exit code 1).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
import traceback
import warnings
from pathlib import Path


def _ascii_int(text: str, lo: int) -> int:
    """``text`` as an integer >= ``lo`` in ASCII digits, or argparse's one line naming the flag and value:
    Python's int() also reads other scripts' digits (Arabic-Indic "٢" as 2) and underscores ("1_0" as 10)."""
    if not (text.strip().isascii() and text.strip().lstrip("+-").isdigit()):
        from .data.readers.base import digits_hint

        hint = digits_hint(text) or ("; write it without '_'" if "_" in text else "")
        raise argparse.ArgumentTypeError(f"expected an integer >= {lo}, got {text!r}{hint}")
    value = int(text)
    if value < lo:
        raise argparse.ArgumentTypeError(f"expected an integer >= {lo}, got {value}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _ascii_int(text, 1)


def seed_int(text: str) -> int:
    """argparse type of a seed: an integer >= 0."""
    return _ascii_int(text, 0)


def workers_int(text: str) -> int:
    """argparse type of ``--workers``: an integer from 1 to :data:`streamcov._config.MAX_WORKERS`."""
    from ._config import MAX_WORKERS

    value = positive_int(text)
    if value > MAX_WORKERS:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_WORKERS} workers (this machine has "
                                         f"{os.cpu_count()} cores), got {value}")
    return value


def _nonempty(text: str, use: str) -> str:
    """``text`` unless it is an empty path (``""`` would mean the current folder, or crash deep inside)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"empty path; give the path to {use}")
    return text


def nonempty_path(text: str) -> str:
    """argparse type: a path to write to, not empty."""
    return _nonempty(text, "write to")


def nonempty_input(text: str) -> str:
    """argparse type: a path to read, not empty."""
    return _nonempty(text, "read")


def _runtime_args(args):
    """``--scheduler``/``--workers`` mean the same in every command: ``--workers N`` alone is a
    LocalCluster of N single-threaded workers."""
    from .stream.runtime import resolve_runtime

    return resolve_runtime(args.scheduler, args.workers)


def _cmd_run(args) -> int:
    from .errors import ConfigError, RunWarning
    from .tasks import run
    from .tasks.demos import DEMO_NAMES, DEMOS

    if args.pipeline is not None and args.demo is not None:
        raise ConfigError("give a pipeline file or --demo, not both")
    # as typed: run() resolves them (--workers alone is a LocalCluster) and names them as given
    kwargs = dict(overrides=list(args.set or []), store=args.store, output=args.output, scheduler=args.scheduler,
                  workers=args.workers, progress=not (args.quiet or args.json), resume=args.resume,
                  note=lambda message: print(f"streamcov run: note: {message}", file=sys.stderr))
    with warnings.catch_warnings():
        # the run's warnings (given to Python's) are a line each whatever PYTHONWARNINGS or -W say: ignored, they
        # were lost; as errors, the finished run ended as an internal error
        warnings.simplefilter("always", RunWarning)
        if args.pipeline is None:
            demo = args.demo or "skeletons"
            result = run(None, text=DEMOS[demo], text_name=DEMO_NAMES[demo], **kwargs)
        else:
            result = run(args.pipeline, **kwargs)
    line = json.dumps(result, default=str)
    if not args.json:
        acc = result.get("accuracy")
        if acc is not None:
            extra = f" +- {100 * result.get('accuracy_std', 0.0):.1f}" if result.get("n_folds", 1) > 1 else ""
            per = " per fold" if result.get("n_folds", 1) > 1 else ""
            from ._config import CACHE

            compiling = result.get("compile_seconds") or 0.0
            # a first run can spend most of its time compiling the kernels (tens of seconds, by pipeline and
            # machine): said, so that it is not taken for the run's speed. It is measured from before the store's
            # ingestion, which `seconds` of a skeleton run leaves out: not said to be part of it
            later = ", which later runs load from numba's cache" if CACHE else ""
            first = f"; {compiling:.1f} s compiling kernels{later}" if compiling >= 1.0 else ""
            print(f"accuracy {100 * acc:.2f}%{extra}  ({result.get('pipeline')}, "
                  f"{result.get('n_train')} train / {result.get('n_test')} test{per}, "
                  f"{result.get('seconds')} s{first})", file=sys.stderr)
    print(line)
    return 0


def _cmd_predict(args) -> int:
    from .stream.predict import predict

    scheduler, workers = _runtime_args(args)
    summary = predict(args.model, args.store, args.out, scheduler=scheduler, workers=workers,
                      train_accuracy=args.train_accuracy, on_error=args.on_error)
    for note in summary.get("notes", []):
        print(f"streamcov predict: note: {note}", file=sys.stderr)
    acc = f", accuracy {100 * summary['accuracy']:.2f}% on {summary['evaluated_on']}" if "accuracy" in summary else ""
    print(f"predictions of {summary['n']} rows written to {summary['predictions']}{acc}", file=sys.stderr)
    print(json.dumps(summary, default=str))
    return 0


def _cmd_ingest(args) -> int:
    from .data.readers import open_reader
    from .data.skeletons import ingest
    from .errors import ConfigError, FormatError, skip_hint
    from .tasks.config import nul_at, parse_value

    options, given = {}, {}
    for assignment in args.option or []:
        flag = f"--option {assignment}"
        if "=" not in assignment:
            raise ConfigError(f"{flag}: expected key=value, e.g. center=[0] or subset=\"cvpr12\"")
        k, _, v = assignment.partition("=")
        if not k.strip():
            raise ConfigError(f"{flag}: empty key; write key=value")
        value = parse_value(v, flag, k.strip())
        if nul_at(value) is not None:   # as the pipeline files refuse it: no name or unit holds one
            raise ConfigError(f"{flag}: holds a NUL character (\\u0000), which no name or option may contain; "
                              f"remove it")
        if k.strip() in options and options[k.strip()] != value:   # the last one was kept without a word
            raise ConfigError(f"{given[k.strip()]} and {flag}: one reader option given twice; give it once")
        options[k.strip()], given[k.strip()] = value, flag
    reader = open_reader(args.format, args.src, where="--option", **options)
    try:
        store = ingest(reader, args.out, chunk_frames=args.chunk_frames,
                       mode="restart" if args.restart else "resume", progress=not args.quiet, on_error=args.on_error)
    except FormatError as exc:
        raise skip_hint(exc, "--on-error skip") from None
    _warn_skipped("ingest", store.attrs.get("skipped", []), "sequence", store.path)
    print(json.dumps({"store": str(store.path), "sequences": store.n_sequences, "frames": store.n_frames,
                      "joints": store.n_joints, "labels": len(store.label_names),
                      "skipped": len(store.attrs.get("skipped", [])), "repairs": store.attrs.get("repairs", {})}))
    return 0


def _warn_skipped(command: str, skipped: list, unit: str, store) -> None:
    """Skipped items (docs/bad_input.md) on stderr: the first three, and where the full list is."""
    if not skipped:
        return
    from .data.ragged import skipped_text

    print(f"streamcov {command}: warning: {len(skipped)} {unit}(s) skipped {skipped_text(skipped)}; the store "
          f"lists them (`streamcov info {shlex.quote(str(store))}`)", file=sys.stderr)


def _cmd_ingest_images(args) -> int:
    from .data.imageio import excluded_images
    from .data.images import constant_warning, ingest_images
    from .errors import FormatError, skip_hint

    exclude = tuple(args.exclude or ("maps",))
    try:
        store = ingest_images(args.src, args.out, format=args.format, group_level=args.group_level,
                              exclude=exclude, exclude_typed=bool(args.exclude), pixel_dtype=args.pixel_dtype,
                              mode="restart" if args.restart else "resume", progress=not args.quiet,
                              on_error=args.on_error)
    except FormatError as exc:
        raise skip_hint(exc, "--on-error skip") from None
    _warn_skipped("ingest", store.attrs.get("skipped", []), "image", store.path)
    constant = store.constant_images or []
    if constant:   # kept (the store holds every image of the folder), and said
        print(f"streamcov ingest: warning: {constant_warning(constant, len(store), args.src)}; the store lists "
              f"them (`streamcov info {shlex.quote(str(args.out))}`)", file=sys.stderr)
    left_out = excluded_images(args.src, exclude)
    if left_out and not args.quiet:
        print(f"streamcov ingest: note: {left_out} image(s) in folders named {', '.join(map(repr, exclude))} left "
              f"out (--exclude; the default leaves out ETH-80's segmentation maps)", file=sys.stderr)
    print(json.dumps({"store": str(args.out), "images": len(store), "labels": len(store.label_names),
                      "groups": len(store.group_names), "skipped": len(store.attrs.get("skipped", [])),
                      "constant": len(constant), "excluded": left_out}))
    return 0


def _cmd_study(args) -> int:
    from .tasks import run
    from .tasks.study import FULL_NUS, QUICK_NUS

    from .errors import ConfigError

    study = {"learners": args.learners.split(","), "jobs": args.jobs}
    flags = {("study", "learners"): f"--learners {args.learners}", ("study", "jobs"): f"--jobs {args.jobs}",
             ("output",): f"--out {args.out}"}
    try:   # ASCII digits, as every integer flag (int() read "1_0" as 10 and other scripts' digits)
        study["nus"] = ([_ascii_int(v, 1) for v in args.nus.split(",")] if args.nus is not None
                        else list(QUICK_NUS if args.quick else FULL_NUS))
    except argparse.ArgumentTypeError as exc:
        raise ConfigError(f"--nus {args.nus}: expected a comma list of integers >= 1, e.g. 50,500,5000 ({exc})") \
            from None
    for key, flag in (("nus", "--nus"), ("seeds", "--seeds"), ("datasets", "--datasets"), ("maps", "--maps"),
                      ("data_root", "--data"), ("gram_seeds", "--gram-seeds")):
        value = getattr(args, {"data_root": "data"}.get(key, key))
        if value is not None:
            flags[("study", key)] = f"{flag} {value}"
    study["seeds"] = args.seeds if args.seeds is not None else (2 if args.quick else 10)
    # an empty --datasets is an error of the list, not the default (hours of the full study)
    study["datasets"] = (args.datasets.split(",") if args.datasets is not None
                         else (["msr"] if args.quick else ["msr", "florence"]))
    if args.maps is not None:
        study["maps"] = args.maps.split(",")
    if args.data is not None:
        study["data_root"] = args.data
    if args.gram_seeds is not None:
        study["gram_seeds"] = args.gram_seeds
    elif args.quick:   # 20 draws per point of the Gram curves took five of the quick run's ten minutes
        study["gram_seeds"] = 2
    cfg = {"task": "kernel-approx-study", "name": "kernel_approx", "output": args.out, "study": study}
    print(json.dumps(run(cfg, progress=not args.quiet, flags=flags), default=float))
    return 0


def _cmd_study_merge(args) -> int:
    from .tasks.study import merge_results

    rows = merge_results(args.runs, args.out)
    print(json.dumps({"out": args.out, "rows": len(rows), "maps": sorted({(r["dataset"], r["map"]) for r in rows})}))
    return 0


def _cmd_synth(args) -> int:
    from .data.skeletons import ingest
    from .data.synth import SyntheticSkeletons

    from pydantic import ValidationError

    from .errors import ConfigError
    from .tasks.config import expected_of
    from .tasks.schema import SyntheticTable

    given = {"n_sequences": (args.sequences, "--sequences"), "n_subjects": (args.subjects, "--subjects"),
             "n_classes": (args.classes, "--classes"), "seed": (args.seed, "--seed")}
    try:   # the generator's parameters have one schema, the pipeline files' [data.synthetic]
        SyntheticTable(**{k: v for k, (v, _) in given.items()})
    except ValidationError as exc:
        err = exc.errors()[0]
        value, flag = given[err["loc"][0]]
        raise ConfigError(f"{flag} {value}: expected {expected_of(err)}") from None
    source = SyntheticSkeletons(n_sequences=args.sequences, n_subjects=args.subjects, n_classes=args.classes,
                                seed=args.seed, where="--")
    store = ingest(source, args.out, chunk_frames=args.chunk_frames,
                   mode="restart" if args.restart else "resume", progress=not args.quiet)
    print(json.dumps({"store": str(store.path), "sequences": store.n_sequences, "frames": store.n_frames}))
    return 0


def _generated(store) -> bool:
    """Whether ``store`` was written by ``streamcov synth`` (its source record is the generator's)."""
    from .data.ragged import read_only_attrs

    try:
        record = read_only_attrs(store).get("source_record")
    except Exception:   # noqa: BLE001 - a courtesy of the message: an unreadable record is not the generator's
        return False
    return isinstance(record, dict) and record.get("format") == "synthetic"


def _cmd_info(args) -> int:
    from .errors import ConfigError

    if args.verify and args.store is None:
        raise ConfigError("--verify needs a STORE, a MODEL folder or a run's output folder: streamcov info STORE "
                          "--verify")
    out = {}
    if args.threads or args.store is None:
        import numba
        from threadpoolctl import threadpool_info

        from ._config import thread_plan
        out["threads"] = {"plan": thread_plan().as_dict(),
                          "numba_threading_layer_config": numba.config.THREADING_LAYER,
                          "numba_num_threads": numba.config.NUMBA_NUM_THREADS,
                          "blas": [{k: d.get(k) for k in ("internal_api", "num_threads", "version")}
                                   for d in threadpool_info()]}
    ok = True
    if _model_folder(args.store):
        from .stream.model import describe
        # not a model, a newer format, an edited or incomplete description: one line, exit 2
        out["model"] = describe(args.store)
        if args.verify:
            ok = _verify_model(args.store, out)
    elif _run_folder(args.store):
        from .tasks.runner import describe_run
        run = out["run"] = describe_run(args.store)
        task = f" (task {run['task']})" if run.get("task") else ""
        if run.get("problems"):
            ok = False
            print(f"{args.store}: DAMAGED run{task}: {run['problems'][0]}", file=sys.stderr)
        elif not run["complete"]:
            ok = False
            by = run.get("being_written_by")
            if by is not None:
                print(f"{args.store}: INCOMPLETE run{task}: under way, in process {by.get('pid')} on "
                      f"{by.get('host')} since {by.get('started')} ({by.get('command')})", file=sys.stderr)
            else:
                print(f"{args.store}: INCOMPLETE run{task}: no result.json, which a run writes last: it was stopped "
                      f"before it finished; run it again (with --resume a training continues from its checkpoints)",
                      file=sys.stderr)
        if args.verify:   # a run's files beyond its model are its result (read above) and caches it checks itself
            model = Path(args.store) / "model"
            if _model_folder(model):
                run["verified"] = "model"
                ok = _verify_model(model, run) and ok
            elif model.exists() or (run["complete"] and isinstance(run.get("model_path"), str)):
                # a folder that is not a model, or none where the result says the run saved its model
                ok = False
                why = ("holds neither model.json nor model.npz" if model.is_dir() else
                       "is not a folder" if model.exists() else f"is missing (result.json names {run['model_path']})")
                run["model"] = {"path": str(model), "problems": [f"{model.name}/ {why}"]}
                print(f"{model}: DAMAGED model: the run's model folder {why}", file=sys.stderr)
            else:
                run["verified"] = "nothing: the run saved no model"
    elif args.store is not None:
        from .data.ragged import store_status
        st = store_status(args.store)
        out["store"] = st
        if not st["complete"]:
            ok = False
            unit = "images" if "committed_images" in st else "sequences"
            n = st.get(f"committed_{unit}", 0)
            what = f"{n if isinstance(n, int) and not isinstance(n, bool) else '?'} {unit}"
            by = st.get("being_written_by")
            if by is not None:
                print(f"{args.store}: INCOMPLETE store ({what} committed): being written by process {by.get('pid')} "
                      f"on {by.get('host')} since {by.get('started')}", file=sys.stderr)
            elif _generated(args.store):   # streamcov synth reads no files: no --on-error, no source to change
                print(f"{args.store}: INCOMPLETE store ({what} committed): the generation was interrupted; run the "
                      f"same streamcov synth command again to resume", file=sys.stderr)
            else:
                print(f"{args.store}: INCOMPLETE store ({what} committed): the ingestion was interrupted, or "
                      f"stopped at a file it could not read; re-run it to resume (with --on-error skip to leave "
                      f"such a file out, with --restart if its source changed since)", file=sys.stderr)
        if args.verify:
            from .data.integrity import verify
            problems, notes = verify(args.store)
            if st["complete"] and not problems:
                problems = _open_problems(args.store)
            st["problems"] = [*st.get("problems", []), *(p for p in problems if p not in st.get("problems", []))]
            st["notes"] = notes
        if st.get("problems"):
            ok = False
            print(f"{args.store}: DAMAGED store: {'; '.join(st['problems'][:5])}"
                  f"{' (and more)' if len(st['problems']) > 5 else ''}", file=sys.stderr)
    print(json.dumps(out, indent=None if args.json else 2, default=str))
    return 0 if ok else 3


def _verify_model(folder, into: dict) -> bool:
    """``info --verify`` of a model folder: ``into["model"]`` becomes its description after loading it as
    predict does, or its problem (said on stderr: DAMAGED). Returns whether it is sound."""
    from .errors import ModelError
    from .stream.model import describe

    try:
        # not a model, a newer format, an edited or incomplete description: one line, exit 2 (raised on)
        into["model"] = describe(folder, verify=True)
    except ModelError as exc:   # what only --verify reads: the arrays, drawn projections, the parts' fit
        into["model"] = {"path": str(folder), "problems": [str(exc)]}
        print(f"{folder}: DAMAGED model: {exc}", file=sys.stderr)
        return False
    return True


def _open_problems(path) -> list[str]:
    """What opening a complete store the way ``run`` does refuses beyond its chunks (counts, identity,
    widths, attributes): a store that ``run`` refuses is never reported sound by ``info --verify``."""
    from .errors import StoreError
    from .stream.source import open_store_of_kind, store_kind

    kind = store_kind(path)
    if kind is None:
        return []
    try:
        open_store_of_kind(kind, path)
    except StoreError as exc:
        return [str(exc).removeprefix(f"{path}: ")]
    return []


class _StoreOnce(argparse._StoreAction):
    """An option that takes one value: given twice with two values it is refused (argparse kept the last
    without a word: `--chunk-frames 5 --chunk-frames 100`, `--format a --format b`)."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault("_given_once", {})
        if self.dest in given and given[self.dest][1] != values:
            flag, value = given[self.dest]
            parser.error(f"{flag} {value} and {option_string} {values}: one option given twice; give it once")
        given[self.dest] = (option_string, values)
        super().__call__(parser, namespace, values, option_string)


class _Parser(argparse.ArgumentParser):
    """argparse with one error line (no usage block), exit code 2, like every other user error; an option
    of one value given twice with two values is refused (:class:`_StoreOnce`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")

    def parse_args(self, args=None, namespace=None):
        # an unknown flag of a subcommand was refused by the top level ("streamcov: error: unrecognized arguments
        # ... see `streamcov --help`"): refused by the subcommand it was typed to, pointing at its help
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = self
            while True:
                subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
                chosen = getattr(ns, subs[0].dest, None) if subs else None
                if chosen not in (subs[0].choices if subs else {}):
                    break
                parser = subs[0].choices[chosen]
            parser.error(f"unrecognized arguments: {' '.join(extras)}")
        return ns


def build_parser() -> argparse.ArgumentParser:
    from .data.readers import FORMATS
    from .tasks.demos import DEMOS

    p = _Parser(prog="streamcov", description="Covariance descriptors of skeleton sequences and images, out of core: "
                                              "ingest archives into stores, run pipelines, predict with saved "
                                              "models (README.md).")
    from . import __version__

    p.add_argument("--version", action="version", version=f"streamcov {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def runtime_flags(parser):
        parser.add_argument("--scheduler", help="threads (default), synchronous, local-cluster, or tcp://HOST:PORT")
        parser.add_argument("--workers", type=workers_int, help="worker processes (alone: a LocalCluster of that many); "
                                                        "with --scheduler threads, the thread count")

    def on_error_flag(parser, items: str, what: str | None = None):
        parser.add_argument("--on-error", choices=["stop", "skip"], default="stop",
                            help=what or f"a file that is damaged or not of the format: stop (its error; the "
                                         f"{items} stored before it are kept, and the command with --on-error skip "
                                         f"resumes after them), or skip it (listed with the store's skipped "
                                         f"{items})")

    r = sub.add_parser("run", help="run a pipeline file (no file: the embedded default)")
    r.add_argument("pipeline", nargs="?", type=nonempty_input, help="pipeline TOML file")
    r.add_argument("--demo", choices=sorted(DEMOS),
                   help="with no pipeline file: the embedded skeleton default or the image demo")
    r.add_argument("--json", action="store_true", help="print only the JSON result line")
    r.add_argument("--store", help="run the pipeline on another store of the same kind")
    r.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a value of the pipeline file, e.g. features.n_components=2000")
    r.add_argument("--output", help="output folder (default from the pipeline file)")
    runtime_flags(r)
    r.add_argument("--quiet", action="store_true", help="no progress bars")
    r.add_argument("--resume", action="store_true",
                   help="continue from the last checkpoint of an interrupted run in the same output folder")
    r.set_defaults(func=_cmd_run)

    pr = sub.add_parser("predict", help="stream predictions of a saved model over a store")
    pr.add_argument("model", type=nonempty_input, help="model folder (<output>/model of a run)")
    pr.add_argument("store", type=nonempty_input, help="a store of the kind the model was trained on")
    pr.add_argument("--out", type=nonempty_path,
                    help="CSV of id,predicted,label (default: <model>/predictions/<store folder name>.csv, e.g. "
                         "my.zarr.csv)")
    pr.add_argument("--train-accuracy", action="store_true",
                    help="on the model's own store, also the accuracy on its fold's training rows")
    on_error_flag(pr, "images", "with a folder of images: an image that is damaged or not an image stops "
                                "(its error), or is skipped and named in a note, without a prediction")
    runtime_flags(pr)
    pr.set_defaults(func=_cmd_predict)

    i = sub.add_parser("ingest", help="write a raw archive into a store")
    isub = i.add_subparsers(dest="kind", required=True)
    sk = isub.add_parser("skeleton", help="skeleton sequences")
    sk.add_argument("--format", required=True, choices=list(FORMATS))
    sk.add_argument("src", type=nonempty_input)
    sk.add_argument("out", type=nonempty_path)
    sk.add_argument("--restart", action="store_true", help="discard an incomplete store first")
    sk.add_argument("--chunk-frames", type=positive_int, default=None,
                    help="frames per chunk of a new store (default 65536); a store being resumed keeps its own")
    sk.add_argument("--option", action="append", metavar="KEY=VALUE",
                    help="reader option, e.g. subset=\"cvpr12\" or labels=\"modified\"")
    on_error_flag(sk, "sequences")
    sk.add_argument("--quiet", action="store_true")
    sk.set_defaults(func=_cmd_ingest)
    im = isub.add_parser("images", help="labelled images, a folder per class")
    im.add_argument("--format", required=True, choices=["folders"])
    im.add_argument("src", type=nonempty_input)
    im.add_argument("out", type=nonempty_path)
    im.add_argument("--group-level", type=positive_int, default=1,
                    help="folder levels that name the group (2 for ETH-80 category/object)")
    im.add_argument("--exclude", action="append", metavar="NAME",
                    help="folder name to skip at any depth (default: maps; names given replace it: add "
                         "--exclude maps to keep it); a name that matches no folder is refused")
    im.add_argument("--pixel-dtype", default="auto", choices=["auto", "uint8", "uint16", "float32"],
                    help="pixel type of the store (auto: float32 when any image has float pixels, else 16-bit when any "
                         "image is 16-bit, else 8-bit)")
    im.add_argument("--restart", action="store_true", help="discard an incomplete store first")
    on_error_flag(im, "images")
    im.add_argument("--quiet", action="store_true")
    im.set_defaults(func=_cmd_ingest_images)

    s = sub.add_parser("synth", help="write a synthetic skeleton store of any size")
    s.add_argument("out", type=nonempty_path, help="the store to write (resumed when incomplete)")
    s.add_argument("--sequences", type=positive_int, required=True, help="sequences to generate")
    s.add_argument("--subjects", type=positive_int, default=10, help="subjects they are spread over (default 10)")
    s.add_argument("--classes", type=positive_int, default=10, help="action classes, at most 12 (default 10)")
    s.add_argument("--seed", type=seed_int, default=0, help="the generator's seed (default 0)")
    s.add_argument("--chunk-frames", type=positive_int, default=None,
                   help="frames per chunk of a new store (default 65536); a store being resumed keeps its own")
    s.add_argument("--restart", action="store_true", help="discard an incomplete store first")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=_cmd_synth)

    st = sub.add_parser("study", help="studies on the real datasets")
    ssub = st.add_subparsers(dest="study", required=True)
    ka = ssub.add_parser("kernel-approx", help="every feature map against nu: Gram error, variance slope, "
                                             "accuracy (paper 000, Figure 1)")
    ka.add_argument("--quick", action="store_true",
                    help="MSR only, nu in {10, 50, 200, 1000}, 2 seeds (and 2 Gram seeds): a few minutes")
    ka.add_argument("--datasets", help="comma list of msr, florence, utkinect, hdm05")
    ka.add_argument("--maps", help="comma list (default: every map)")
    ka.add_argument("--nus", help="comma list of feature dimensions")
    ka.add_argument("--seeds", type=positive_int, help="map seeds per point (default 10)")
    ka.add_argument("--data", type=nonempty_input,
                    help="folder holding <dataset>/raw (default $STREAMCOV_DATA, else ../shared/data beside the "
                         "source checkout)")
    ka.add_argument("--gram-seeds", type=positive_int,
                    help="map seeds of the Gram-error curves (default 20, 2 with --quick; 1 for a quick "
                         "accuracy-only run)")
    ka.add_argument("--out", default="runs/study_kernel_approx", type=nonempty_path,
                    help="folder for results.csv, table.md and the plots (default runs/study_kernel_approx)")
    ka.add_argument("--jobs", type=positive_int, default=1,
                    help="processes for the accuracy fits (one numba/BLAS thread each; default 1)")
    ka.add_argument("--learners", default="sgd,svm",
                    help="sgd: the pipeline's incremental learner on the features; svm: the exact SVM "
                         "(each fold's CV sigma and C) with its kernel replaced by Z Z^T (default: both)")
    ka.add_argument("--quiet", action="store_true")
    ka.set_defaults(func=_cmd_study)
    mg = ssub.add_parser("merge", help="merge the results.csv of several kernel-approx runs into one report "
                                      "(for each dataset, map and nu, the fields of later runs win)")
    mg.add_argument("runs", nargs="+", type=nonempty_input, help="--out folders of kernel-approx runs, oldest first")
    mg.add_argument("--out", required=True, type=nonempty_path,
                    help="folder for the merged results.csv, table.md and plots")
    mg.set_defaults(func=_cmd_study_merge)

    f = sub.add_parser("info", help="describe a store (complete or not), a model folder or a run's output "
                                    "folder; with --threads, the thread plan")
    f.add_argument("store", nargs="?", type=nonempty_input,
                   help="a store of `ingest` or `synth`, the output folder of a run, or its model folder "
                        "(<output>/model)")
    f.add_argument("--threads", action="store_true", help="show numba/BLAS/Dask thread settings")
    f.add_argument("--verify", action="store_true",
                   help="read every chunk of every array and check its checksum, or every array of a model "
                        "(a run's: its model/) (exit 3 on damage)")
    f.add_argument("--json", action="store_true", help="print the description as one JSON line")
    f.set_defaults(func=_cmd_info)
    return p


def _one_line_warning(command: str):
    """Python warnings (streamcov's, Pillow's, scikit-learn's) as ``streamcov <cmd>: warning: ...``, one
    line each, like the command's own notes, instead of a file, a line number and a source line."""
    def show(message, category, filename, lineno, file=None, line=None):
        text = " ".join(str(message).split())
        print(f"streamcov {command}: warning: {text}", file=sys.stderr)
    return show


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (its write end polls as an error), as opposed to a
    broken pipe elsewhere (a worker's connection), which is a bug to report."""
    import select

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(event & select.POLLERR for _, event in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


def _model_folder(path) -> bool:
    """Whether ``info`` is given a model folder (model.json or model.npz in it) rather than a store."""
    return path is not None and Path(path).is_dir() and any((Path(path) / name).exists()
                                                            for name in ("model.json", "model.npz"))


def _run_folder(path) -> bool:
    """Whether ``info`` is given the output folder of ``streamcov run`` rather than a store (a zarr group): its
    marker, or what an earlier version's run left there (a result.json naming its task, its model/ or
    checkpoints/), as :func:`streamcov.tasks.runner._earlier_streamcov_output` judges a folder to write into."""
    from .lock import OUTPUT_MARKER
    from .tasks.runner import _task_of

    p = None if path is None else Path(path)
    if p is None or not p.is_dir() or (p / "zarr.json").exists():
        return False
    if (p / OUTPUT_MARKER).is_file() or (p / "checkpoints").is_dir() or _model_folder(p / "model"):
        return True
    try:
        result = json.loads((p / "result.json").read_text())
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return False
    return isinstance(result, dict) and _task_of(result) is not None


def _starts_numba(args) -> bool:
    """Whether the command starts numba: every one but ``info STORE``, ``info MODEL`` or ``info RUN`` without
    ``--threads`` (and, for a model or a run's model, without ``--verify``, which loads it as predict does), which
    read files only (described whatever numba's environment variables say)."""
    return (args.command != "info" or args.threads or args.store is None
            or (args.verify and (_model_folder(args.store)
                                 or (_run_folder(args.store) and _model_folder(Path(args.store) / "model")))))


class Terminated(KeyboardInterrupt):
    """SIGTERM (``timeout``, a batch scheduler, systemd, ``kill``) or SIGHUP (the terminal or SSH session of the
    command closed) as an interruption: raised in the main thread, so that what Ctrl-C undoes is undone (a
    predict's temporary copy of an image folder was left behind).

    Parameters
    ----------
    signum : int
        The signal.
    """

    def __init__(self, signum: int | None = None):
        import signal

        super().__init__()
        self.signum = int(signal.SIGTERM if signum is None else signum)

    @property
    def status(self) -> int:
        """The exit status: 128 + the signal, as a shell reports a process it ended (143, 129)."""
        return 128 + self.signum

    @property
    def said(self) -> str:
        """The command's last line after its name: ``terminated``, ``hung up (SIGHUP)``."""
        import signal

        return "hung up (SIGHUP)" if self.signum == getattr(signal, "SIGHUP", None) else "terminated"


def _terminated(signum, frame):
    import signal
    import time

    from ._config import ending_signals, sigterm_again

    first = time.monotonic()
    # its echo ignored, a later one ends: of either signal (systemd's stop sends SIGTERM and then SIGHUP at once;
    # the other's Terminated, raised inside the cleanup of the first, cut it short)
    for s in ending_signals():
        if signal.getsignal(s) is _terminated:
            signal.signal(s, lambda signo, frame: sigterm_again(first, signo))
    raise Terminated(signum)


@contextlib.contextmanager
def _sigterm_interrupts():
    """SIGTERM and SIGHUP raise :class:`Terminated` while a command runs, in the main thread, each where nobody
    else handles it: a program that calls :func:`main` with a handler of its own keeps it, and a command started
    with SIGHUP ignored (``nohup``, a shell's ``trap '' HUP``) goes on after a hangup. The default is put back
    after."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    from ._config import ending_signals

    taken = [s for s in ending_signals() if signal.getsignal(s) is signal.SIG_DFL]
    if not taken:
        yield
        return
    for s in taken:
        signal.signal(s, _terminated)
    previous_hook = sys.unraisablehook
    races = {f"Signal {int(s)} ignored due to race condition" for s in taken}

    def hook(unraisable):
        # SIGTERM delivered twice before Python ran the handler: the handler (which puts the default back for a
        # second SIGTERM) ran once, and Python reports the other delivery as "Signal 15 ignored due to race
        # condition" with a traceback of whatever C call it interrupted; the interruption itself is said once
        if isinstance(unraisable.exc_value, OSError) and str(unraisable.exc_value) in races:
            return
        previous_hook(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        for s in taken:
            signal.signal(s, signal.SIG_DFL)
        sys.unraisablehook = previous_hook


def _to_devnull(fd: int) -> None:
    """``fd`` pointed at /dev/null (a stream whose reader has gone); the descriptor opened for it closed."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


def _hung_up(exc: OSError) -> bool:
    """Whether a write failed because the stream's terminal hung up (EIO: the SSH session or terminal window of
    the command closed while SIGHUP was ignored, or the command's line after SIGHUP)."""
    import errno

    return exc.errno == errno.EIO


def _reader_gone(exc: OSError) -> bool:
    """Whether a write failed because nobody reads the stream any more: a pipe whose reader ended, or a terminal
    that hung up (:func:`_hung_up`)."""
    return isinstance(exc, BrokenPipeError) or _hung_up(exc)


class _ReaderMayLeave:
    """``sys.stderr`` (and ``sys.stdout``) while a command runs: when the stream's reader has gone (``left``, by
    default a piped stderr whose reader ended, `2>&1 >out.json | ...`, or a terminal that hung up), the stream is
    pointed at /dev/null and the command goes on. The first note or warning raised BrokenPipeError, which ended
    a finished run with exit 1 before its JSON line reached stdout; after a hangup with SIGHUP ignored (`trap ''
    HUP`), stdout's next line raised EIO, and a finished run ended as an internal error. A stdout pipe whose
    reader ended (`streamcov info STORE | head`) is not this class's (``left`` = :func:`_hung_up` for stdout):
    the command ends there, as a pipe's writer does."""

    def __init__(self, stream, left=_reader_gone):
        self._stream = stream
        self._left = left

    def _gone(self) -> None:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            _to_devnull(self._stream.fileno())

    def write(self, text):
        try:
            return self._stream.write(text)
        except OSError as exc:
            if not self._left(exc):
                raise
            self._gone()
            return len(text)

    def flush(self):
        try:
            self._stream.flush()
        except OSError as exc:
            if not self._left(exc):
                raise
            self._gone()

    def __getattr__(self, name):
        return getattr(self._stream, name)


def main(argv=None) -> int:
    # a stream the caller closed (`>&-`, `2>&-`): Python makes it None, and print() to a None stderr writes to
    # stdout (every error line went there), to a None stdout fails after the whole run ("this is a bug")
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w"))
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _ReaderMayLeave(stdout, _hung_up), _ReaderMayLeave(stderr)
    try:
        return _main_command(argv)
    finally:
        sys.stdout, sys.stderr = stdout, stderr


def _main_command(argv) -> int:
    from .errors import StreamcovError, command_line

    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:   # --help (0) or a flag error, already printed (2)
        return int(exc.code or 0)
    except KeyboardInterrupt:   # Ctrl-C while the parser imports the readers (the first half second)
        print("streamcov: interrupted", file=sys.stderr)
        return 130
    try:
        with _sigterm_interrupts():
            return _main(args, StreamcovError, command_line)
    except Terminated as exc:   # after the command's own handling: while it returned, or during its cleanup
        print(f"streamcov {args.command}: {exc.said}", file=sys.stderr)
        return exc.status


def _main(args, StreamcovError, command_line) -> int:
    try:
        with warnings.catch_warnings(), command_line(args.command):   # flags as typed, not Python keywords
            warnings.showwarning = _one_line_warning(args.command)
            # numba's environment refused up front, not by a traceback mid-run; never where numba is not started
            if _starts_numba(args):
                from ._config import check_numba_environment

                check_numba_environment()
            status = args.func(args)
            sys.stdout.flush()   # here, where a reader gone early is handled, not at the interpreter's exit
            return status
    except StreamcovError as exc:
        print(f"streamcov {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except Terminated as exc:
        print(f"streamcov {args.command}: {exc.said}", file=sys.stderr)
        return exc.status   # 128 + the signal, as a shell reports a process it ended
    except KeyboardInterrupt:
        print(f"streamcov {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        if not _stdout_closed():
            return _internal_error(args.command)
        # the reader of stdout left (`streamcov info STORE | head`): nothing is wrong, nothing to say;
        # stdout goes to /dev/null so that the interpreter's own flush at exit does not fail again
        _to_devnull(sys.stdout.fileno())
        return 141   # a pipe's writer ended by SIGPIPE: 128 + 13
    except Exception as exc:
        _settle_zarr()
        full = _no_space(exc)
        if full is not None and _numba_cache_write(full):
            from ._config import numba_cache_dir

            print(f"streamcov {args.command}: error: no space left on the device for numba's cache of compiled "
                  f"kernels ({numba_cache_dir()}); free space there, or set NUMBA_CACHE_DIR to a folder with room, "
                  f"then run the same command again: what was complete is kept", file=sys.stderr)
            return 2
        if full is not None:
            # write() gives no file name: then where the command writes, as the user gave it (a run also writes
            # its data.store, a predict of an image folder a copy of it in the temporary folder)
            out = getattr(args, "out", None) or getattr(args, "output", None)
            place = (str(out) if out else f"the output folder of {args.pipeline}" if getattr(args, "pipeline", None)
                     else f"{Path(args.model) / 'predictions'}" if args.command == "predict" else None)
            also = {"run": " or its data.store", "predict": " or the temporary folder (an image folder's copy)"}
            where = (f"{full.filename}: " if full.filename else
                     f"while writing {place}{also.get(args.command, '')}: " if place else "")
            print(f"streamcov {args.command}: error: {where}no space left on the device (or the disk quota is used "
                  f"up); free space or write elsewhere, then run the same command again: what was complete is kept "
                  f"(an interrupted store or run resumes) and nothing half-written is used", file=sys.stderr)
            return 2
        long = _os_error(exc, "ENAMETOOLONG")
        if long is not None:
            # a path given with a name longer than the file system allows: Python 3.11's Path.exists() and is_dir()
            # raise it instead of answering False, wherever an input path is looked at (output paths say it
            # where they are checked)
            name = f"{long.filename}: " if long.filename else ""
            print(f"streamcov {args.command}: error: {name}a file or folder name in this path is longer than the "
                  f"file system allows (File name too long); give a shorter path", file=sys.stderr)
            return 2
        # raised by the file itself or by what it caused, not an error met while handling one (a bug there)
        denied = _os_error(exc, "EACCES", "EPERM", context=False)
        if denied is not None and denied.filename:
            said = f"streamcov {args.command}: error: {denied.filename}: permission denied ({denied.strerror})"
            if _numba_cache_write(denied):
                from ._config import numba_cache_dir

                print(f"{said} in numba's cache of compiled kernels ({numba_cache_dir()}); set NUMBA_CACHE_DIR to a "
                      f"folder this user can write, then run the same command again: what was complete is kept",
                      file=sys.stderr)
            else:
                # another user's store, model or folder (mode 0700, 0600) met where the command looks or writes,
                # not one of the places it checks beforehand: Path.exists() and is_file() raise it
                print(f"{said}; give this user access to it (read, or write where the command writes), or use a "
                      f"copy of its own; nothing half-written is used", file=sys.stderr)
            return 2
        oom = _out_of_memory(exc)
        if oom is not None:
            # numpy's "Unable to allocate 6.18 GiB for an array with shape (5798, 11, 114, 114) ...": the machine
            # (or a ulimit, a container) gave less than the work asked, which the checks made beforehand did not
            # foresee; said in one line with what sizes the work, not as a bug
            what = str(oom).splitlines()[0][:200] if str(oom) else "no detail"
            less = {"run": ": fewer rows per block (dask.block_size), fewer threads or workers (--workers), a "
                           "smaller map (features.n_components, features.fit_sample), rows streamed (model.cache = "
                           "\"stream\"); the run continues with --resume",
                    "study": ": fewer processes (--jobs), fewer values of nu (--nus)",
                    "predict": ": fewer threads or workers (--workers)"}
            fewer = ", or give the work less at a time" + less[args.command] if args.command in less else ""
            print(f"streamcov {args.command}: error: out of memory ({oom.__class__.__name__}: {what}); run it with "
                  f"more memory{fewer}; nothing half-written is used", file=sys.stderr)
            return 2
        return _internal_error(args.command)


def _settle_zarr(timeout: float = 30.0) -> None:
    """Let the writes still running on zarr's event loop end before the command returns. One chunk write that
    failed (a full disk) ends the array's write, not its sibling chunk writes: left running, they failed at the
    interpreter's shutdown and printed hundreds of lines of asyncio tracebacks under the command's one line."""
    import asyncio

    sync = sys.modules.get("zarr.core.sync")
    loop = getattr(sync, "loop", [None])[0] if sync is not None else None
    if loop is None or loop.is_closed() or not loop.is_running():
        return

    async def drain():
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
        for t in tasks:   # their errors retrieved: said once, by the command's line
            if t.done() and not t.cancelled():
                t.exception()

    try:
        asyncio.run_coroutine_threadsafe(drain(), loop).result(timeout + 5.0)
    except Exception:   # a loop that cannot take it: the line is said all the same
        pass


def _numba_cache_write(exc: OSError) -> bool:
    """Whether ``exc`` was raised while numba wrote its cache of compiled kernels (not a file of the command)."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.replace("\\", "/").endswith("numba/core/caching.py"):
            return True
        tb = tb.tb_next
    return False


def _out_of_memory(exc: BaseException) -> MemoryError | None:
    """The MemoryError behind ``exc`` (raised by numpy, perhaps wrapped by a library or by Dask), or None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, MemoryError):
            return exc
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return None


def _no_space(exc: BaseException) -> OSError | None:
    """The OSError of a full disk or quota behind ``exc`` (raised by a library while writing, perhaps wrapped
    by it or by Dask), or None."""
    return _os_error(exc, "ENOSPC", "EDQUOT")


def _os_error(exc: BaseException, *names: str, context: bool = True) -> OSError | None:
    """The OSError of one of the errno ``names`` behind ``exc`` (perhaps wrapped by a library or by Dask), or
    None. ``context=False``: through explicit causes only (``raise ... from``), not an error met while another
    was handled."""
    import errno

    codes = {getattr(errno, n) for n in names if hasattr(errno, n)}
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in codes:
            return exc
        # an error raised while handling another, with "from None", is not caused by it
        exc = exc.__cause__ or (None if exc.__suppress_context__ or not context else exc.__context__)
    return None


def _internal_error(command: str) -> int:
    traceback.print_exc()
    print(f"streamcov {command}: internal error: this is a bug in streamcov; please report it "
          f"with the traceback above", file=sys.stderr)
    return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
