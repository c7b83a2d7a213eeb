"""The ``streamcov`` command. It parses arguments and delegates; nothing else."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# The embedded default: the built-in generator, eq. (3) map, incremental SGD.
# pipelines/synthetic.toml holds the same text (a test keeps them equal).
DEFAULT_PIPELINE = """
task = "skeleton-classification"
name = "synthetic_default"
seed = 0
output = "runs/{name}"

[data.synthetic]
n_sequences = 600
n_subjects = 10
n_classes = 10
seed = 0

[descriptor]
gamma = 1e-4
normalize = true

[features]
map = "rgw"
n_components = 2000
sigma = 1.0
theta = 0.7
sampling = "stratified"
center = true

[model]
learner = "sgd"
loss = "hinge"
learning_rate = "pa1"
eta0 = 1.0
penalty = "none"
average = false
scale = "center"
epochs = 60

[split]
kind = "subject-parity"
"""

# The image demo (`streamcov run --demo images`): scikit-image's bundled textures,
# no download. pipelines/textures_demo.toml holds the same text (a test keeps them equal).
DEFAULT_IMAGE_PIPELINE = """
# Embedded demo, no download: scikit-image's bundled brick, grass and gravel
# textures cut into 64 x 64 patches (64 per class), per-pixel features
# [x, y, I, |Ix|, |Iy|] (paper 004's Texture set-up), Approx LogHS + Gaussian SVM.
task = "image-classification"
name = "textures_demo"
seed = 0

[dataset]
format = "skimage-textures"
textures = ["brick", "grass", "gravel"]
patch = 64

[features]
preset = "texture"

[method]
name = "approx_loghs"
classifier = "svc"
D = 50
sigma1 = [1.0]
gamma = [1e-3]
sigma2 = [0.5, 1.0]
C = [10.0]
inner_folds = 3
scaling = "per-feature"   # x, y (pixel units) would swamp I, |Ix|, |Iy| under one global scale

[protocol]
kind = "per-class"
n_train = 20
n_repeats = 3
"""
DEMOS = {"skeletons": DEFAULT_PIPELINE, "images": DEFAULT_IMAGE_PIPELINE}


def _user_errors():
    from .pipeline.config import ConfigError
    from .readers.base import SkeletonFormatError
    from .store import StoreError
    from .covariance import NotSPDError
    from .model import ModelFormatError
    errors = (ConfigError, SkeletonFormatError, StoreError, NotSPDError, FileNotFoundError,
              ModelFormatError)
    if "streamcov.images.io" in sys.modules:  # only an image command can raise these
        from .images.io import ImageFormatError
        errors += (ImageFormatError,)
    if "streamcov.tasks.images" in sys.modules:
        from .tasks.images import TaskConfigError
        errors += (TaskConfigError,)
    return errors


def _cmd_run(args) -> int:
    from .pipeline.config import load_pipeline
    from .pipeline.run import run_pipeline

    overrides = list(args.set or [])
    if args.output:
        overrides.append(f'output="{args.output}"')
    if args.pipeline is not None and args.demo is not None:
        raise SystemExit("streamcov run: give a pipeline file or --demo, not both")
    if args.pipeline is None:
        cfg = load_pipeline(None, overrides, store=args.store, text=DEMOS[args.demo or "skeletons"])
        cfg["_file"] = "<embedded default>"
    else:
        cfg = load_pipeline(args.pipeline, overrides, store=args.store)
    scheduler = args.scheduler
    if args.workers is not None and scheduler is None:
        scheduler = "local-cluster"
    result = run_pipeline(cfg, progress=not (args.quiet or args.json), scheduler=scheduler,
                          workers=args.workers, resume=args.resume)
    line = json.dumps(result, default=str)
    if args.json:
        print(line)
    else:
        acc = result.get("accuracy")
        if acc is not None:
            std = result.get("accuracy_std", 0.0)
            extra = f" +- {100 * std:.1f}" if result.get("n_folds", 1) > 1 else ""
            print(f"accuracy {100 * acc:.2f}%{extra}  ({result.get('pipeline')}, "
                  f"{result.get('n_train')} train / {result.get('n_test')} test, "
                  f"{result.get('seconds')} s)", file=sys.stderr)
        print(line)
    return 0


def _cmd_predict(args) -> int:
    from .pipeline.predict import predict_store

    summary = predict_store(args.model, args.store, args.out, scheduler=args.scheduler or "threads",
                            workers=args.workers)
    print(json.dumps(summary, default=str))
    return 0


def _cmd_ingest(args) -> int:
    from .readers import open_source
    from .store import ingest

    options = {}
    for assignment in args.option or []:
        from .pipeline.config import parse_value
        k, _, v = assignment.partition("=")
        options[k.strip()] = parse_value(v.strip())
    source = open_source(args.format, args.src, **options)
    mode = "restart" if args.restart else "resume"
    store = ingest(source, args.out, chunk_frames=args.chunk_frames, mode=mode,
                   progress=not args.quiet)
    summary = {"store": str(store.path), "sequences": store.n_sequences, "frames": store.n_frames,
               "joints": store.n_joints, "labels": len(store.label_names),
               "skipped": len(store.attrs.get("skipped", [])), "repairs": store.attrs.get("repairs", {})}
    print(json.dumps(summary))
    return 0


def _cmd_ingest_images(args) -> int:
    from .images.store import ingest_images

    store = ingest_images(args.src, args.out, format=args.format, group_level=args.group_level,
                          exclude=tuple(args.exclude or ("maps",)), pixel_dtype=args.pixel_dtype,
                          mode="restart" if args.restart else "resume", progress=not args.quiet)
    print(json.dumps({"store": str(args.out), "images": len(store), "labels": len(store.label_names),
                      "groups": len(store.group_names)}))
    return 0


def _cmd_study(args) -> int:
    from .study import FULL_NUS, QUICK_NUS, STUDY_MAPS, kernel_approx_study

    nus = [int(v) for v in args.nus.split(",")] if args.nus else list(QUICK_NUS if args.quick else FULL_NUS)
    seeds = args.seeds or (2 if args.quick else 10)
    datasets = args.datasets.split(",") if args.datasets else (["msr"] if args.quick else ["msr", "florence"])
    maps = args.maps.split(",") if args.maps else list(STUDY_MAPS)
    log = (lambda *a, **k: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    try:
        summary = kernel_approx_study(datasets, maps, nus, seeds, args.out, args.data, log=log,
                                     jobs=args.jobs, learners=args.learners.split(","))
    except ValueError as exc:
        raise SystemExit(f"streamcov study: error: {exc}")
    print(json.dumps({"out": args.out, **{name: {"exact_accuracy": e["exact_accuracy"],
                                                 "variance_slopes": e["variance_slopes"]}
                                          for name, e in summary["datasets"].items()}}, default=float))
    return 0


def _cmd_study_merge(args) -> int:
    from .study import merge_results

    try:
        rows = merge_results(args.runs, args.out)
    except (ValueError, FileNotFoundError) as exc:
        raise SystemExit(f"streamcov study merge: error: {exc}")
    print(json.dumps({"out": args.out, "rows": len(rows),
                      "maps": sorted({(r["dataset"], r["map"]) for r in rows})}))
    return 0


def _cmd_synth(args) -> int:
    from .store import ingest
    from .synth import SyntheticSkeletonSource

    source = SyntheticSkeletonSource(n_sequences=args.sequences, n_subjects=args.subjects,
                                     n_classes=args.classes, seed=args.seed)
    store = ingest(source, args.out, chunk_frames=args.chunk_frames,
                   mode="restart" if args.restart else "resume", progress=not args.quiet)
    print(json.dumps({"store": str(store.path), "sequences": store.n_sequences,
                      "frames": store.n_frames}))
    return 0


def _cmd_info(args) -> int:
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
    if args.store is not None:
        from .store import store_status
        st = store_status(args.store)
        out["store"] = st
        if not st["complete"]:
            what = (f"{st['committed_images']} images" if "committed_images" in st
                    else f"{st.get('committed_sequences', 0)} sequences")
            print(f"{args.store}: INCOMPLETE store ({what} "
                  f"committed): the ingestion was interrupted; re-run it to resume",
                  file=sys.stderr)
    print(json.dumps(out, indent=None if args.json else 2, default=str))
    return 0 if args.store is None or out["store"]["complete"] else 3


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="streamcov", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run a pipeline file (no file: the embedded default)")
    r.add_argument("pipeline", nargs="?", help="pipeline TOML file")
    r.add_argument("--demo", choices=sorted(DEMOS),
                   help="with no pipeline file: the embedded skeleton default or the image demo")
    r.add_argument("--json", action="store_true", help="print only the JSON result line")
    r.add_argument("--store", help="run the pipeline on another store of the same kind")
    r.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a value of the pipeline file, e.g. features.n_components=2000")
    r.add_argument("--output", help="output folder (default from the pipeline file)")
    r.add_argument("--scheduler", help="threads (default), synchronous, local-cluster, or tcp://HOST:PORT")
    r.add_argument("--workers", type=int, help="threads, or with local-cluster the worker count")
    r.add_argument("--quiet", action="store_true", help="no progress bars")
    r.add_argument("--resume", action="store_true",
                   help="continue from the last checkpoint of an interrupted run in the same output folder")
    r.set_defaults(func=_cmd_run)

    pr = sub.add_parser("predict", help="stream predictions of a saved model over a store")
    pr.add_argument("model", help="model folder (runs/<name>/model)")
    pr.add_argument("store")
    pr.add_argument("--out", help="CSV of id,predicted,label")
    pr.add_argument("--scheduler")
    pr.add_argument("--workers", type=int)
    pr.set_defaults(func=_cmd_predict)

    i = sub.add_parser("ingest", help="write a raw archive into a store")
    isub = i.add_subparsers(dest="kind", required=True)
    sk = isub.add_parser("skeleton", help="skeleton sequences")
    sk.add_argument("--format", required=True,
                    choices=["msr-action3d", "florence3d", "utkinect", "generic"])
    sk.add_argument("src")
    sk.add_argument("out")
    sk.add_argument("--restart", action="store_true", help="discard an incomplete store first")
    sk.add_argument("--chunk-frames", type=int, default=65536)
    sk.add_argument("--option", action="append", metavar="KEY=VALUE",
                    help="reader option, e.g. subset=\"cvpr12\" or labels=\"modified\"")
    sk.add_argument("--quiet", action="store_true")
    sk.set_defaults(func=_cmd_ingest)
    im = isub.add_parser("images", help="labelled images, a folder per class")
    im.add_argument("--format", required=True, choices=["folders"])
    im.add_argument("src")
    im.add_argument("out")
    im.add_argument("--group-level", type=int, default=1,
                    help="folder levels that name the group (2 for ETH-80 category/object)")
    im.add_argument("--exclude", action="append", metavar="NAME",
                    help="folder name to skip (default: maps)")
    im.add_argument("--pixel-dtype", default="uint8", choices=["uint8", "uint16", "float32"])
    im.add_argument("--restart", action="store_true", help="discard an incomplete store first")
    im.add_argument("--quiet", action="store_true")
    im.set_defaults(func=_cmd_ingest_images)

    s = sub.add_parser("synth", help="write a synthetic skeleton store of any size")
    s.add_argument("out")
    s.add_argument("--sequences", type=int, required=True)
    s.add_argument("--subjects", type=int, default=10)
    s.add_argument("--classes", type=int, default=10)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--chunk-frames", type=int, default=65536)
    s.add_argument("--restart", action="store_true")
    s.add_argument("--quiet", action="store_true")
    s.set_defaults(func=_cmd_synth)

    st = sub.add_parser("study", help="studies on the real datasets")
    ssub = st.add_subparsers(dest="study", required=True)
    ka = ssub.add_parser("kernel-approx", help="every feature map against nu: Gram error, variance slope, "
                                             "accuracy (paper 000, Figure 1)")
    ka.add_argument("--quick", action="store_true", help="MSR only, nu in {10, 50, 200, 1000}, 2 seeds")
    ka.add_argument("--datasets", help="comma list of msr, florence")
    ka.add_argument("--maps", help="comma list (default: every map)")
    ka.add_argument("--nus", help="comma list of feature dimensions")
    ka.add_argument("--seeds", type=int, help="map seeds per point (default 10)")
    ka.add_argument("--data", help="folder holding <dataset>/raw (default ../shared/data)")
    ka.add_argument("--out", default="runs/study_kernel_approx")
    ka.add_argument("--jobs", type=int, default=1,
                    help="processes for the accuracy fits (one numba/BLAS thread each; default 1)")
    ka.add_argument("--learners", default="sgd,svm",
                    help="sgd: the pipeline's incremental learner on the features; svm: the exact SVM "
                         "(each fold's CV sigma and C) with its kernel replaced by Z Z^T (default: both)")
    ka.add_argument("--quiet", action="store_true")
    ka.set_defaults(func=_cmd_study)
    mg = ssub.add_parser("merge", help="merge the results.csv of several kernel-approx runs into one report "
                                      "(for each dataset, map and nu, the fields of later runs win)")
    mg.add_argument("runs", nargs="+", help="--out folders of kernel-approx runs, oldest first")
    mg.add_argument("--out", required=True, help="folder for the merged results.csv, table.md and plots")
    mg.set_defaults(func=_cmd_study_merge)

    f = sub.add_parser("info", help="describe a store (complete or not) and the thread plan")
    f.add_argument("store", nargs="?")
    f.add_argument("--threads", action="store_true", help="show numba/BLAS/Dask thread settings")
    f.add_argument("--json", action="store_true")
    f.set_defaults(func=_cmd_info)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except _user_errors() as exc:
        print(f"streamcov {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
