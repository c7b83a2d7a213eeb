"""``streamcov study kernel-approx``: every explicit map of the Log-Euclidean kernel, side by side.

On the real log-covariance vectors of MSR-Action3D and Florence3D (the
descriptors of paper 000 on the dataset of a pipeline file), for every map of
:data:`streamcov.tasks.schema.STUDY_MAPS` (the maps of paper 000 that take any descriptor):

* the relative Gram error ``||K_hat - K||_F / ||K||_F`` against nu, with
  ``K`` the exact Gaussian kernel exp(-||x - y||^2 / (2 sigma^2)) on a sample
  of training vectors, and the slope of log(mean squared entry error)
  against log(nu): every unbiased Monte Carlo map has variance ~ 1/nu, so
  the slope is near -1 (paper 000's Theorem 2 claims 1/nu^3; see the
  errata of the papers' README);
* accuracy against nu of the pipeline's incremental SGD on each map, over
  several map seeds, with the exact Log-E SVM as a reference line
  (paper 000, Figure 1);
* ``results.csv`` (every number), ``table.md`` and one PNG per dataset and
  figure in ``--out``.

Hyperparameters are those of the dataset's pipeline file (``sigma`` of the
map, learner settings); the exact SVM chooses sigma and C by leave-one-
subject-out CV on the training subjects, as ``pipelines/*_exact.toml`` do.
"""
from __future__ import annotations

import csv
import json
import tempfile
import sys
import time
from pathlib import Path

import numpy as np

from ..errors import ConfigError, arg, path_arg, toml_value
from .schema import STUDY_MAPS   # the maps of paper 000's Figure 1: one list, the schema's

# the source checkout of an editable install (the package's parent folder): its pipelines/ and ../shared/data
REPO = Path(__file__).resolve().parents[2]
# name -> pipeline stem: the pipeline's [data] gives the raw folder, the reader and its options,
# its [descriptor] the descriptor, pipelines/<stem>_exact.toml the exact SVM's grids
DATASETS = {"msr": "msr_action3d", "florence": "florence3d", "utkinect": "utkinect", "hdm05": "hdm05"}
LEARNERS = ("sgd", "svm")
FULL_NUS = (10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
QUICK_NUS = (10, 50, 200, 1000)
PAPER000_GAMMA = 1e-4   # the regularization of paper 000's descriptor, log(C + gamma I)
# The random maps' own options, as the skeleton files had them before they moved to Nystroem features
# (2026-11-27): eq. (3)'s theta by leave-one-subject-out CV on MSR-Action3D's training subjects (Florence3D's by the
# Gram error on its training rows), stratified degrees and centred rows for RGW and Maclaurin
RANDOM_MAP_OPTIONS = {"theta": 0.7, "sampling": "stratified", "center": True}
THETA = {"florence": 0.4}


def random_map_options(name: str) -> dict:
    """:data:`RANDOM_MAP_OPTIONS` with dataset ``name``'s theta (:data:`THETA`; MSR-Action3D's for the others)."""
    return {**RANDOM_MAP_OPTIONS, "theta": THETA.get(name, RANDOM_MAP_OPTIONS["theta"])}


def map_params(name: str, cfg) -> dict:
    """The ``[features]`` of dataset ``name``'s pipeline file (``cfg``: its sigma, bandwidth, fit sample) with
    the random maps' options (:func:`random_map_options`): the base of every map of the study and of the
    benchmarks of paper 000's figures."""
    return {**cfg.features.params(), **random_map_options(name)}


# The incremental learner of the study's sgd columns (and of the benchmarks of paper 000's figures): the SGD settings
# the skeleton files had before their learner became L-BFGS (each chosen by LOSO CV then; HDM05 took MSR-Action3D's)
_LOG_LOSS_SGD = {"learner": "sgd", "loss": "log_loss", "learning_rate": "optimal", "C": 100.0, "penalty": "l2",
                 "average": False, "epochs": 100, "scale": "center"}
PAPER000_SGD = {
    "msr": _LOG_LOSS_SGD,
    "florence": _LOG_LOSS_SGD,
    "utkinect": {"learner": "sgd", "loss": "hinge", "learning_rate": "pa1", "eta0": 1.0, "penalty": "none",
                 "average": False, "epochs": 100, "scale": "center"},
}


def sgd_model(name: str):
    """The ``[model]`` table of :data:`PAPER000_SGD` for dataset ``name`` (MSR-Action3D's for the others)."""
    from .schema import ModelTable

    return ModelTable.model_validate(PAPER000_SGD.get(name, PAPER000_SGD["msr"]))


def rgw_sets(name: str, nu: int | None = None) -> list[str]:
    """``--set`` overrides that put paper 000's eq. (3) map with :func:`map_params`' options on dataset
    ``name``'s pipeline file (``nu``: its ``n_components``), for the benchmarks that measure that map."""
    return (['features.map="rgw"'] + ([] if nu is None else [f"features.n_components={int(nu)}"])
            + [f"features.{k}={json.dumps(v)}" for k, v in random_map_options(name).items()])


def _checkouts() -> list[Path]:
    """Where the dataset pipeline files are looked for: the checkout of an editable install (its ``pipelines/``
    beside the package), then the current folder (the root of a checkout, with streamcov installed from a
    wheel)."""
    return [REPO, Path.cwd()] if (REPO / "pipelines").is_dir() else [Path.cwd()]


def pipeline_file(stem: str) -> Path:
    """The dataset pipeline file ``pipelines/<stem>.toml`` of the source checkout (:func:`_checkouts`): the study
    takes each dataset's reader, protocol, map bandwidth and the exact SVM's grids from it. A wheel installs no
    pipeline files; without a checkout it is one line."""
    tried = [base / "pipelines" / f"{stem}.toml" for base in _checkouts()]
    for path in tried:
        if path.is_file():
            return path
    raise ConfigError(f"the study reads the dataset pipeline file pipelines/{stem}.toml of a streamcov source "
                      f"checkout, not found ({', '.join(str(p) for p in tried)}); run it from the root of a "
                      f"checkout of the repository")


def default_data_root() -> Path:
    """The folder of the datasets when none is given: ``$STREAMCOV_DATA``, else ``../shared/data`` beside the
    checkout whose pipeline files the study reads (:func:`pipeline_file`), as the files' own ``data.source``."""
    import os

    env = os.environ.get("STREAMCOV_DATA")
    if env:
        return Path(env)
    base = pipeline_file(DATASETS["msr"]).parent.parent
    return base.parent / "shared" / "data"


def ingest_dataset(name: str, data_root: Path, workdir: Path):
    """``(store, cfg)``: a real dataset ingested into ``workdir`` by its pipeline file's reader, and
    the typed pipeline file."""
    from ..data.readers import open_reader
    from ..data.skeletons import ingest
    from .config import load_config

    cfg = load_config(pipeline_file(DATASETS[name]))
    folder = Path(cfg.data.source).parent.name          # ../shared/data/<folder>/raw
    raw = Path(data_root) / folder / "raw"
    if not raw.is_dir():
        # named by its key: the loader puts where it was given in front (--data, the file's line)
        raise ConfigError(f"study.data_root = {toml_value(str(data_root))}: dataset {name!r} not found at {raw}; "
                          f"give the folder that holds {folder}/raw")
    store = ingest(open_reader(cfg.data.format, raw, where="data.options", **dict(cfg.data.options)),
                   Path(workdir) / f"{name}.zarr")
    return store, cfg


def dataset_descriptors(name: str, data_root: Path, workdir: Path):
    """Ingest a real dataset and return (store, pipeline config, log-covariance vectors, seconds)."""
    from ..descriptors import skeleton as C

    store, cfg = ingest_dataset(name, data_root, workdir)
    # Figure 1 of paper 000 is drawn on its own descriptor: one covariance of hip-relative positions,
    # C + 1e-4 I, unit-norm log (the pipelines' richer descriptors are studied in docs/descriptors.md)
    sel = C.JointSelection.hip_relative(store.n_joints, store.center)
    t0 = time.perf_counter()
    V = C.log_covariance_vectors(np.asarray(store.frames[:]), store.offsets, sel, PAPER000_GAMMA, True)
    return store, cfg, V, time.perf_counter() - t0


def gram_errors(X: np.ndarray, sigma: float, maps, nus, seeds: int, base_params: dict) -> list[dict]:
    """Relative Frobenius error of Z Z^T against the exact Gaussian Gram matrix of ``X``."""

    from ..features.registry import make_feature_map
    from ..kernels import gaussian_kernel, squared_distances

    K = gaussian_kernel(squared_distances(X), sigma)
    norm = np.linalg.norm(K)
    rows = []
    for m in maps:
        for nu in nus:
            errs, mses = [], []
            for seed in range(seeds):
                Z = make_feature_map(dict(base_params, map=m, n_components=nu), seed).fit(X).transform(X)
                E = Z @ Z.T - K
                errs.append(float(np.linalg.norm(E) / norm))
                mses.append(float(np.mean(E ** 2)))
            # Nystroem takes at most one landmark per row of the sample: past it, its features are those of
            # fewer components than nu (the exact kernel on the sample), said by the report
            rows.append({"map": m, "nu": nu, "gram_rel_error": float(np.mean(errs)),
                         "gram_rel_error_std": float(np.std(errs)), "gram_mse": float(np.mean(mses)),
                         "gram_components": int(Z.shape[1])})
    return rows


def variance_slopes(rows: list[dict], fit_from: int = 50) -> dict:
    """Least-squares slope of log(mean squared entry error) on log(nu), for nu >= ``fit_from``.

    Nystroem is not a Monte Carlo average (its error falls faster once the
    landmarks cover the data), so its slope is reported but not expected at -1.
    On the log-covariance vectors of one dataset, which lie in a small cap of
    the sphere, the errors of all Gram entries move together from draw to
    draw, so one draw is worth one sample: hence the many seeds of the Gram
    part (``gram_seeds``). A point whose map had fewer components than its
    nu (Nystroem past the rows of the Gram sample: the exact kernel on them,
    an error of rounding only) is left out of the fit.
    """
    out = {}
    for m in sorted({r["map"] for r in rows}):
        pts = [(r["nu"], r["gram_mse"]) for r in rows if r["map"] == m and r["nu"] >= fit_from
               and r.get("gram_components", r["nu"]) >= r["nu"]]
        if len(pts) >= 2:
            nu, mse = np.array(pts, dtype=float).T
            out[m] = float(np.polyfit(np.log(nu), np.log(mse), 1)[0])
    return out


def _map_features(V, train, params, seed):
    """Fit the map of ``params`` on the training rows, map every row: (Z, seconds of the transform)."""
    from ..features.registry import make_feature_map

    fmap = make_feature_map(params, seed).fit(V[train])
    t0 = time.perf_counter()
    Z = fmap.transform(V)
    return Z, time.perf_counter() - t0


def _exit_with_parent(parent: int, poll: float = 0.5) -> None:
    """In a worker process of ``study --jobs``: exit as soon as ``parent`` (the study) is gone. Killed (kill -9,
    the out-of-memory killer), it left its workers orphaned, each finishing its fit (minutes for the larger
    maps) and then waiting idle for joblib's five minutes, holding a copy of the descriptors. A thread polls the
    parent once per ``poll`` seconds; started once per process."""
    import os
    import threading

    global _WATCHED
    # only in a direct child of the study (loky's workers): a backend that starts its workers from another
    # process (a forkserver, a remote cluster) would have them exit at once
    if _WATCHED or os.getpid() == parent or os.getppid() != parent:
        return
    _WATCHED = True

    def watch():
        while os.getppid() == parent:
            time.sleep(poll)
        os._exit(1)

    threading.Thread(target=watch, name="streamcov-exit-with-parent", daemon=True).start()


_WATCHED = False


def _in_worker(parent: int, fn, *args):
    """``fn(*args)`` in a worker process that exits with ``parent`` (:func:`_exit_with_parent`)."""
    _exit_with_parent(parent)
    return fn(*args)


def _seed_accuracy(V, y, folds, classes, features, model, m, nu, seed, threads):
    """Mean accuracy over the folds for one map seed; seconds spent in the map's transform.

    The learner is the ``[model]`` table's: incremental SGD, or full-batch L-BFGS (``lbfgs``).
    """
    from .._config import kernel_threads
    from ..stream.lbfgs import train_lbfgs_arrays
    from ..stream.sgd import train_sgd_arrays

    train = train_lbfgs_arrays if model.learner == "lbfgs" else train_sgd_arrays
    per, secs, width = [], 0.0, nu
    with kernel_threads(threads, threads):
        for _, tr, te in folds:
            Z, sec = _map_features(V, tr, dict(features, map=m, n_components=nu), seed)
            secs += sec
            width = min(width, Z.shape[1])
            clf = train(Z, y, tr, classes, model, seed)
            per.append(float((clf.predict(Z[te]) == y[te]).mean()))
    return float(np.mean(per)), secs / len(folds), width


def _seed_svm_accuracy(V, y, folds, exact, features, model, m, nu, seed, threads):
    """Mean accuracy over the folds of the exact SVM with its kernel replaced by the map's.

    Fold by fold, the map is built at the bandwidth that the exact SVM's CV
    chose for that fold and fitted on its training rows, and the same
    ``SVC(kernel="precomputed", C)`` is trained on ``Z Z^T``: a linear SVM on
    the explicit features (the "kernel machine made linear" of paper 000),
    one-vs-one like the exact SVM, with nothing but the kernel changed.
    """
    from sklearn.svm import SVC

    from .._config import kernel_threads

    per, secs, width = [], 0.0, nu
    with kernel_threads(threads, threads):
        for (_, tr, te), ex in zip(folds, exact):
            params = dict(features, map=m, n_components=nu, sigma=ex["sigma"])
            Z, sec = _map_features(V, tr, params, seed)
            secs += sec
            width = min(width, Z.shape[1])
            clf = SVC(kernel="precomputed", C=ex["C"]).fit(Z[tr] @ Z[tr].T, y[tr])
            per.append(float((clf.predict(Z[te] @ Z[tr].T) == y[te]).mean()))
    return float(np.mean(per)), secs / len(folds), width


def accuracies(V, y, folds, classes, features: dict, model, maps, nus, seeds: int, log=None, jobs: int = 1,
               learner: str = "sgd", exact=None) -> list[dict]:
    """Accuracy of the pipeline's learner on every map, nu and seed (mean over the folds).

    Each fold fits the map (its mean row, for a centred map) and the scaler on
    its training rows only. ``log`` gets one line per (map, nu) as it finishes.
    ``jobs > 1`` runs the (map, nu, seed) fits in that many processes, each
    with one numba and one BLAS thread so that they do not oversubscribe the
    cores; the results are the same as with ``jobs = 1`` (every fit is seeded).

    ``features`` is a pipeline's ``[features]`` (a dict), ``model`` its ``[model]`` table.
    ``learner="sgd"`` is the pipeline's incremental learner (``model``);
    ``learner="svm"`` is the exact SVM of each fold with its kernel replaced by
    the map's (``exact``: the per-fold rows of :func:`exact_accuracies`, which
    give sigma and C), see :func:`_seed_svm_accuracy`.
    """
    import os

    from joblib import Parallel, delayed

    from .._config import available_cores
    from ..stream.runtime import resource_trackers_outlive_hangup, workers_ignore_sigint

    if learner == "svm":
        if exact is None:
            raise ValueError("learner='svm' needs the exact SVM's per-fold sigma and C (exact=...)")
        fn, first = _seed_svm_accuracy, exact
    elif learner == "sgd":
        fn, first = _seed_accuracy, classes
    else:
        raise ValueError(f"learner must be 'sgd' or 'svm', got {learner!r}")
    if int(jobs) > available_cores():   # said, not silently cut
        import warnings

        warnings.warn(f"study.jobs = {int(jobs)} (--jobs) and {available_cores()} cores available: "
                      f"{available_cores()} processes used", stacklevel=2)
    jobs = max(1, min(int(jobs), available_cores()))
    points = [(m, nu) for m in maps for nu in nus]
    tasks = [(m, nu, seed) for m, nu in points for seed in range(seeds)]
    threads = 1 if jobs > 1 else available_cores()
    runner = Parallel(n_jobs=jobs, return_as="generator") if jobs > 1 else None
    parent = os.getpid()
    if runner is not None:
        resource_trackers_outlive_hangup(loky=True)   # before loky's workers start them
        # loky spawns its workers in this call: with SIGINT ignored, which they inherit (a Ctrl-C printed a
        # traceback of each under the command's line); this process ends them on its way out
        with workers_ignore_sigint():
            results = runner(delayed(_in_worker)(parent, fn, V, y, folds, first, features, model, m, nu, s, threads)
                             for m, nu, s in tasks)
    else:
        results = (fn(V, y, folds, first, features, model, m, nu, s, threads) for m, nu, s in tasks)
    rows = []
    done: dict = {}
    for (m, nu, _), (acc, sec, width) in zip(tasks, results):
        done.setdefault((m, nu), []).append((acc, sec, width))
        if len(done[(m, nu)]) < seeds:
            continue
        accs = [a for a, _, _ in done[(m, nu)]]
        secs = [t for _, t, _ in done[(m, nu)]]
        # the fewest components of any fold's map: below nu for Nystroem past a fold's training rows
        rows.append({"map": m, "nu": nu, "accuracy": float(np.mean(accs)),
                     "accuracy_std": float(np.std(accs)), "seeds": seeds,
                     "map_ms_per_sequence": 1e3 * float(np.mean(secs)) / len(V),
                     "components": min(w for _, _, w in done[(m, nu)])})
        if log is not None:
            log(f"  {m} nu={nu}: {100 * rows[-1]['accuracy']:.2f} +- {100 * rows[-1]['accuracy_std']:.2f}")
    return rows


def exact_accuracies(V, y, subjects, folds, name: str) -> list[dict]:
    """Exact Log-E SVM per fold, sigma and C by LOSO CV over the grids of ``pipelines/<name>_exact.toml``."""
    from ..stream.exact import exact_svm_fold
    from .config import load_config

    ecfg = load_config(pipeline_file(f"{DATASETS[name]}_exact")).model
    return [exact_svm_fold(V, y, subjects, tr, te, ecfg.sigma_grid, ecfg.C_grid) for _, tr, te in folds]


def _plot(path: Path, rows, key, title, ylabel, logy: bool, hline=None):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for m in sorted({r["map"] for r in rows}):
        pts = sorted((r["nu"], r[key], r.get(key + "_std", 0.0)) for r in rows if r["map"] == m)
        nu, v, s = np.array(pts).T
        ax.errorbar(nu, 100 * v if not logy else v, yerr=100 * s if not logy else None,
                    marker="o", ms=3, capsize=2, label=m)
    if hline is not None:
        ax.axhline(100 * hline, color="k", ls="--", lw=1, label="exact Log-E SVM")
    ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel("nu (feature dimension)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    from ..files import atomic_write

    atomic_write(path, lambda fh: fig.savefig(fh, format="png", dpi=110))   # a kill leaves no cut image
    plt.close(fig)


#: the files of a study's report (:func:`write_report` and ``summary.json``), removed before a study or a merge
#: writes its own into the folder: a report of one run, never one mixed with an earlier run's files
REPORT_FILES = ("results.csv", "table.md", "summary.json", "*_gram_error.png", "*_accuracy.png")


def clear_report(out: Path) -> None:
    """Remove the report files (:data:`REPORT_FILES`) an earlier study or merge left in ``out``."""
    for pattern in REPORT_FILES:
        for p in Path(out).glob(pattern):
            if p.is_file() and not p.is_symlink():
                p.unlink()


_CSV_INTS = ("nu", "seeds", "svm_seeds", "gram_seeds", "components", "svm_components", "gram_components")


def write_report(rows: list[dict], out) -> None:
    """``results.csv``, ``table.md`` and the two PNGs per dataset from the study's rows.

    Each row holds ``dataset``, ``exact_accuracy``, ``map``, ``nu``, the Gram
    fields of :func:`gram_errors` and the accuracy fields of :func:`accuracies`.
    The variance slopes are fitted here from ``gram_mse``.
    """
    from ..files import atomic_write

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    def table(fh):
        w = csv.DictWriter(fh, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        w.writeheader()
        w.writerows(rows)

    atomic_write(out / "results.csv", table, binary=False)   # whole or not at all: a merge reads it
    nus = sorted({r["nu"] for r in rows})
    datasets = {}   # name -> (its rows, exact accuracy, variance slopes)
    for name in dict.fromkeys(r["dataset"] for r in rows):
        mine = [r for r in rows if r["dataset"] == name]
        datasets[name] = (mine, mine[0]["exact_accuracy"], variance_slopes(mine))
        sigma = next((r["sigma"] for r in mine if r.get("sigma") is not None), None)
        sig = f" (sigma = {sigma:g})" if sigma is not None else ""
        _plot(out / f"{name}_gram_error.png", mine, "gram_rel_error",
              f"{name}: relative Gram error{sig}", "||K_hat - K||_F / ||K||_F", True)
    lines = []
    for key, title, short, width in (("accuracy", "pipeline's incremental SGD on the map's features", "SGD",
                                      "components"),
                                     ("svm_accuracy", "exact SVM (same sigma, C) with the map's kernel Z Z^T",
                                      "SVM on Z Z^T", "svm_components")):
        if not any(key in r for r in rows):
            continue
        capped = any(r.get(width, r["nu"]) < r["nu"] for r in rows if key in r)
        lines += [f"Accuracy %, {title}:", "",
                  "| dataset | map | slope | " + " | ".join(f"nu={n}" for n in nus) + " |",
                  "|---|---|---|" + "---|" * len(nus)]
        for name, (mine, ex, slopes) in datasets.items():
            lines.append(f"| {name} | exact Log-E SVM | | " + " | ".join(f"{100 * ex:.1f}" for _ in nus) + " |")
            for m in dict.fromkeys(r["map"] for r in mine):
                cells = {r["nu"]: r for r in mine if r["map"] == m and key in r}
                slope = f"{slopes[m]:.2f}" if m in slopes else "n/a"   # fewer than 2 nu >= 50 to fit
                lines.append(f"| {name} | {m} | {slope} | " + " | ".join(
                    f"{100 * cells[n][key]:.1f} ± {100 * cells[n][key + '_std']:.1f}"
                    f"{'*' if cells[n].get(width, n) < n else ''}" if n in cells else "" for n in nus) + " |")
            _plot(out / f"{name}_{key}.png", [r for r in mine if key in r], key,
                  f"{name}: {short} accuracy against nu", "accuracy %", False, hline=ex)
        if capped:
            lines += ["", "\\* fewer components than nu: Nystroem takes at most one landmark per training row "
                      "(`components` in results.csv), so every training row is a landmark and a larger nu changes "
                      "nothing."]
        lines.append("")
    gram_capped = sorted({(r["dataset"], r["map"], r["gram_components"]) for r in rows
                          if r.get("gram_components", r["nu"]) < r["nu"]})
    for name, m, k in gram_capped:
        at = [r["nu"] for r in rows if (r["dataset"], r["map"], r.get("gram_components")) == (name, m, k)
              and k < r["nu"]]
        lines.append(f"Gram error, {name}, {m}: nu = {', '.join(map(str, at))} have {k} components (one per row of "
                     f"the Gram sample): the exact kernel on the sample, left out of the slope.")
    atomic_write(out / "table.md", lambda fh: fh.write("\n".join(lines) + "\n"), binary=False)


def _expected(column: str) -> tuple:
    """``(holds(v), words)``: the range of a results.csv column. Accuracies (and their spread) are fractions,
    nu and seeds at least 1, sigma above 0, the other errors and times at least 0."""
    if "accuracy" in column:
        return (lambda v: 0.0 <= v <= 1.0), "in [0, 1]"
    if column in _CSV_INTS:
        return (lambda v: v >= 1), ">= 1"
    if column == "sigma":
        return (lambda v: v > 0), "> 0"
    return (lambda v: v >= 0), ">= 0"


def read_results(path) -> list[dict]:
    """Rows of a study's ``results.csv`` with numbers as numbers; a value that is not a finite number in its
    column's range (an edited file: an accuracy of 1.7, a NaN error) is refused, naming its line and column."""
    rows = []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        for r in reader:
            line = reader.line_num
            row = {k: (v if k in ("dataset", "map") else int(v) if k in _CSV_INTS else float(v))
                   for k, v in r.items() if v != "" and k is not None}
            missing = {"dataset", "map", "nu", "exact_accuracy"} - set(row)
            if missing:
                raise ValueError(f"line {line} lacks {sorted(missing)}")
            for k, v in row.items():
                if k in ("dataset", "map"):
                    continue
                holds, words = _expected(k)
                if not (np.isfinite(v) and holds(v)):
                    raise ConfigError(f"{path}, line {line}: column {k!r} = {r[k]}: expected a finite number "
                                      f"{words}; the file was edited or damaged: run the study again for it")
            rows.append(row)
    return rows


def merge_results(runs, out) -> list[dict]:
    """Merge the ``results.csv`` of several study runs into one report in ``out``.

    Runs are read in order; the fields of a later run's row replace those of
    the same (dataset, map, nu) in earlier ones, so a map re-run alone
    (``--maps``) or a run of one learner alone (``--learners``) updates a full
    study. Every run of one dataset must report the same exact accuracy
    (same data, same exact-SVM grid), otherwise they are not comparable.
    """
    from .runner import check_output_folder

    merged: dict = {}   # (dataset, map, nu) -> row, in first-seen order
    exact: dict = {}    # dataset -> (exact accuracy, run that first gave it)
    out = path_arg("out", out, "--out", "the folder for the merged report")
    # the checks of a run's output folder: it writes results.csv, table.md and plots there (into the current
    # folder for an empty --out, over a user's own files, into a model folder or a store before)
    check_output_folder(out, arg("out", out), "kernel-approx-study")
    for run in runs:
        path = Path(run) / "results.csv"
        if Path(run).resolve() == Path(out).resolve():   # its results.csv rewritten, its summary.json left stale
            raise ConfigError(f"{arg('out', out)}: one of the runs to merge ({run}); write the merged report to "
                              f"another folder")
        if not path.is_file():
            raise ConfigError(f"{path}: not found; give the output folder of a study run")
        try:
            rows = read_results(path)
        except ConfigError:
            raise
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path}: not a results.csv of `streamcov study kernel-approx` "
                              f"({exc.__class__.__name__}: {exc})") from None
        if not rows:   # an empty report was written from it, without a word
            raise ConfigError(f"{path}: no rows (an empty or truncated results.csv); run the study again for it")
        for r in rows:
            ex, first = exact.setdefault(r["dataset"], (r["exact_accuracy"], path))
            if abs(r["exact_accuracy"] - ex) > 1e-12:
                raise ConfigError(f"{path}: exact accuracy of {r['dataset']} is {r['exact_accuracy']:.6f}, "
                                 f"{ex:.6f} in {first}; runs on different data or exact-SVM grids "
                                 "cannot be merged")
            merged.setdefault((r["dataset"], r["map"], r["nu"]), {}).update(r)   # later fields win
    rows = list(merged.values())
    from ..lock import output_lock

    with output_lock(out):   # a study writing there, or another merge, is refused: the two reports mixed
        clear_report(out)   # an earlier study's summary.json and plots would stand beside the merged table
        write_report(rows, out)   # (its results.csv and table.md name the folder a study report's: no marker)
    return rows


def kernel_approx_study(datasets=("msr", "florence"), maps=STUDY_MAPS, nus=FULL_NUS, seeds: int = 10,
                        out="runs/study_kernel_approx", data_root=None, gram_sample: int = 300,
                        gram_seeds: int = 20, log=print, jobs: int = 1, learners=LEARNERS) -> dict:
    """Run the study; returns the summary (also written to ``out/summary.json``).

    ``learners``: ``"sgd"`` (the incremental learner of :data:`PAPER000_SGD`) and/or
    ``"svm"`` (the exact SVM with the map's kernel), see :func:`accuracies`.
    """
    return _study(datasets, maps, nus, seeds, out, data_root, gram_sample, gram_seeds, log, jobs,
                  tuple(learners))


def _study(datasets, maps, nus, seeds, out, data_root, gram_sample, gram_seeds, log, jobs=1,
           learners=LEARNERS):
    from ..splits import folds as make_folds

    bad = [a for a in learners if a not in LEARNERS]
    if bad or not learners:
        raise ValueError(f"learner(s) {bad} unknown; choose from {', '.join(LEARNERS)}")
    unknown = [m for m in maps if m not in STUDY_MAPS]
    if unknown:
        raise ValueError(f"unknown map(s) {unknown}; choose from {', '.join(STUDY_MAPS)}")
    data_root = Path(data_root) if data_root else default_data_root()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    clear_report(out)   # an earlier report's files must not stand beside this run's if it stops half-way
    summary: dict = {"maps": list(maps), "nus": list(nus), "seeds": seeds, "datasets": {}}
    csv_rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in datasets:
            if name not in DATASETS:
                raise ValueError(f"unknown dataset {name!r}; choose from {', '.join(DATASETS)}")
            store, cfg, V, _ = dataset_descriptors(name, data_root, tmp)
            from .._config import check_memory

            # the largest map (nu x width) and the features of every sequence (sequences x nu), twice
            check_memory(8.0 * max(nus) * (2 * V.shape[0] + V.shape[1]),
                         f"study.nus = {max(nus)} on {name} ({V.shape[0]} descriptors of {V.shape[1]} "
                         f"numbers)", "use smaller values of nu")
            y = store.labels.astype(np.int64)
            classes = np.arange(len(store.label_names))
            folds = make_folds(cfg.split, store.labels, store.subjects, store_split=store.split,
                               split_names=store.split_names, seed=cfg.seed)
            ex_rows = exact_accuracies(V, y, store.subjects, folds, name)
            ex = float(np.mean([r["accuracy"] for r in ex_rows]))
            log(f"{name}: exact Log-E SVM {100 * ex:.2f}%")
            sigma = float(cfg.features.sigma)
            rng = np.random.default_rng(0)
            train_rows = np.flatnonzero(folds[0][1])
            sample = V[np.sort(rng.choice(train_rows, min(gram_sample, len(train_rows)), replace=False))]
            base, model = map_params(name, cfg), sgd_model(name)
            log(f"{name}: Gram errors, {len(maps)} map(s) x {len(nus)} nu x {gram_seeds} draw(s) on {len(sample)} "
                f"training rows")
            grams = gram_errors(sample, sigma, maps, nus, gram_seeds, base)
            slopes = variance_slopes(grams)
            log(f"{name}: variance slopes {json.dumps({k: round(v, 2) for k, v in slopes.items()})}")
            # each part says from how many draws it comes: the learners' seeds and the Gram matrix's may differ, and
            # a merge of runs keeps each part's (one "seeds" column was overwritten by the last learner's)
            merged = {(g["map"], g["nu"]): dict(g, gram_seeds=gram_seeds) for g in grams}
            accs = svms = []
            if "sgd" in learners:
                accs = accuracies(V, y, folds, classes, base, model, maps, nus, seeds, log=log, jobs=jobs)
                for a in accs:
                    merged[(a["map"], a["nu"])].update(a)
            if "svm" in learners:
                log(f"{name}: exact SVM with the map's kernel (sigma, C of each fold's CV)")
                svms = accuracies(V, y, folds, classes, base, model, maps, nus, seeds, log=log, jobs=jobs,
                                  learner="svm", exact=ex_rows)
                for a in svms:
                    merged[(a["map"], a["nu"])].update(
                        svm_accuracy=a["accuracy"], svm_accuracy_std=a["accuracy_std"], svm_seeds=a["seeds"],
                        svm_components=a["components"])
            for row in merged.values():
                csv_rows.append({"dataset": name, "exact_accuracy": ex, "sigma": sigma, **row})
            summary["datasets"][name] = {"exact_accuracy": ex, "variance_slopes": slopes,
                                         "accuracy": accs, "svm_accuracy": svms, "gram": grams,
                                         "exact_folds": ex_rows}
    from ..files import atomic_write_text

    write_report(csv_rows, out)
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=1, default=float) + "\n")
    return summary


def run_study(cfg, ctx) -> dict:
    """``task = "kernel-approx-study"`` (``streamcov study kernel-approx``): writes the report to the output."""
    st = cfg.study
    # progress, on stderr: stdout holds the command's JSON line alone
    log = (lambda *a, **k: None) if not ctx.progress else (lambda msg: print(msg, file=sys.stderr, flush=True))
    summary = kernel_approx_study(st.datasets, st.maps or STUDY_MAPS, st.nus, st.seeds, ctx.output, st.data_root,
                                  st.gram_sample, st.gram_seeds, log=log, jobs=st.jobs, learners=st.learners)
    return {"out": str(ctx.output.absolute()),
            **{name: {"exact_accuracy": e["exact_accuracy"], "variance_slopes": e["variance_slopes"]}
               for name, e in summary["datasets"].items()}}
