"""`streamcov study kernel-approx`: Gram errors, variance slopes, files, on real MSR-Action3D vectors."""
import csv
import json
import os
import re

import numpy as np
import pytest

from conftest import dataset
from streamcov.errors import ConfigError
from streamcov.cli import main
from streamcov.tasks.study import gram_errors, variance_slopes


def test_gram_error_variance_decays_as_one_over_nu(rng):
    X = rng.normal(size=(60, 20))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    maps = ["rff", "orf", "rgw", "maclaurin", "fastfood", "qmc"]
    rows = gram_errors(X, 1.0, maps, [64, 256, 1024], seeds=10, base_params={"sigma": 1.0})
    slopes = variance_slopes(rows)
    # Monte Carlo maps: mean squared error c / nu, slope -1 (not paper 000's -3). Measured with
    # 10 seeds per point over a 16x range of nu: -0.96 to -1.04; +-0.3 leaves room for the
    # seed-to-seed scatter of the fitted slope. Halton points decay faster (measured -1.22).
    for m in ("rff", "orf", "rgw", "maclaurin", "fastfood"):
        assert -1.3 < slopes[m] < -0.7, (m, slopes[m])
    assert slopes["qmc"] < -0.9
    for m in maps:
        errs = [r["gram_rel_error"] for r in rows if r["map"] == m]
        assert errs[0] > errs[2]


def test_study_command_writes_csv_table_and_plots(tmp_path, capsys, monkeypatch):
    from streamcov.tasks import study

    seen = []
    real = study.accuracies

    def spy(V, y, folds, classes, features, model, *args, **kw):
        seen.append((features, model))
        return real(V, y, folds, classes, features, model, *args, **kw)

    monkeypatch.setattr(study, "accuracies", spy)
    data = dataset("msr_action3d").parents[1]
    out = tmp_path / "study"
    # an earlier study's report in the folder (another dataset's plots): gone before this one writes, not mixed in
    _fake_run(out, "florence", ["rgw"], 0.5)
    assert (out / "florence_accuracy.png").is_file()
    assert main(["study", "kernel-approx", "--datasets", "msr", "--maps", "rgw,rff", "--nus", "50,2000",
                 "--seeds", "1", "--data", str(data), "--out", str(out), "--quiet"]) == 0
    # the README's study: eq. (3) with the options the files had (theta 0.7, stratified, centred) and the SGD
    # learner the files had (log loss, C = 100), whatever map and learner the pipeline file ships now
    assert len(seen) == 2
    for features, model in seen:
        assert (features["theta"], features["sampling"], features["center"], features["sigma"]) == (
            0.7, "stratified", True, 1.0)
        assert (model.learner, model.loss, model.C, model.epochs) == ("sgd", "log_loss", 100.0, 100)
    summary = json.loads(capsys.readouterr().out)
    assert 0.84 < summary["msr"]["exact_accuracy"] < 0.86   # the exact SVM of the README: 85.1%
    rows = list(csv.DictReader(open(out / "results.csv")))
    assert {(r["map"], r["nu"]) for r in rows} == {(m, n) for m in ("rgw", "rff") for n in ("50", "2000")}
    for r in rows:
        assert 0.0 < float(r["gram_rel_error"]) < 1.0
        assert 0.3 < float(r["accuracy"]) <= 1.0    # 20 classes: chance is 5%
        assert 0.3 < float(r["svm_accuracy"]) <= 1.0
        # each part's draws in a column of its own (one "seeds" column was the last learner's)
        assert (r["seeds"], r["svm_seeds"], r["gram_seeds"]) == ("1", "1", "20")
    for m in ("rgw", "rff"):
        e = {r["nu"]: float(r["gram_rel_error"]) for r in rows if r["map"] == m}
        assert e["2000"] < e["50"]   # 40x the features: about 6x less error expected
    assert (out / "msr_accuracy.png").stat().st_size > 1000
    assert (out / "msr_gram_error.png").stat().st_size > 1000
    assert (out / "msr_svm_accuracy.png").stat().st_size > 1000
    assert "| msr | rgw |" in (out / "table.md").read_text()
    assert not (out / "florence_accuracy.png").exists() and not (out / "florence_gram_error.png").exists()


@pytest.mark.parametrize("args, msg", [
    (["--maps", "rgw,bogus"], r'--maps rgw,bogus: study.maps.1 = "bogus": expected one of "rgw", "rff"'),
    (["--datasets", "kth"], r'--datasets kth: study.datasets.0 = "kth": expected one of "msr", "florence", "utkinect" or "hdm05"'),
    (["--learners", "sgd,lbfgs"], r'--learners sgd,lbfgs: study.learners.1 = "lbfgs": expected one of "sgd" or "svm"'),
    (["--nus", "10,many"], r"--nus 10,many: expected a comma list of integers"),
    (["--seeds", "0"], r"argument --seeds: expected an integer >= 1, got 0"),
    (["--gram-seeds", "0"], r"argument --gram-seeds: expected an integer >= 1, got 0"),
])
def test_study_rejects_bad_flags(tmp_path, capsys, args, msg):
    import re

    assert main(["study", "kernel-approx", *args, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.match(r"streamcov study( kernel-approx)?: error: ", err), err
    assert re.search(msg, err), err


def test_study_flags_reach_the_study_table(tmp_path, monkeypatch):
    import streamcov.tasks as tasks

    seen = {}
    monkeypatch.setattr(tasks, "run", lambda cfg, **kw: seen.update(cfg) or {})
    assert main(["study", "kernel-approx", "--datasets", "hdm05", "--learners", "svm", "--gram-seeds", "1",
                 "--maps", "rgw,rff", "--out", str(tmp_path)]) == 0
    assert seen["study"]["gram_seeds"] == 1 and seen["study"]["learners"] == ["svm"]
    assert seen["study"]["maps"] == ["rgw", "rff"] and seen["output"] == str(tmp_path)


def test_parallel_accuracies_equal_serial(rng, tmp_path, monkeypatch):
    import signal

    import streamcov._config as config
    from streamcov.features.registry import make_feature_map
    from streamcov.stream.sgd import train_sgd_arrays
    from streamcov.tasks import study
    from streamcov.tasks.study import accuracies

    X = rng.normal(size=(80, 10))
    y = (X[:, 0] > 0).astype(np.int64) + 2 * (X[:, 1] > 0)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    tr = np.arange(80) < 60
    folds = [("f", tr, ~tr)]
    from streamcov.tasks.schema import ModelTable

    features = {"sigma": 1.0, "theta": 0.7, "center": True}
    model = ModelTable(loss="log_loss", learning_rate="optimal", C=10.0, epochs=5, scale="center",
                       shuffle_blocks=2)
    # where each fit ran, and with how many threads: a file each process appends to (the workers' own copy of
    # the module is not this one)
    ran = tmp_path / "ran"
    real = study._seed_accuracy

    def recorded(*a):
        import signal

        sigint = signal.getsignal(signal.SIGINT)   # the workers ignore it: a Ctrl-C is the study's to handle
        with open(ran, "a") as f:
            f.write(f"{os.getpid()} {a[-1]} {-1 if callable(sigint) else int(sigint)}\n")
        return real(*a)

    monkeypatch.setattr(study, "_seed_accuracy", recorded)
    monkeypatch.setattr(config, "available_cores", lambda: 2)   # jobs=2 is not cut to one on a one-core machine

    def fits(sigint):
        lines = [line.split() for line in ran.read_text().splitlines()]
        ran.unlink()
        assert {int(s) for _, _, s in lines} == {sigint}
        return [(int(pid), int(threads)) for pid, threads, _ in lines]

    args = (X, y, folds, np.arange(4), features, model, ["rgw", "rff"], [16, 64], 2)
    serial = accuracies(*args, jobs=1)
    here = signal.getsignal(signal.SIGINT)   # (a test process may ignore it)
    assert fits(-1 if callable(here) else int(here)) == [(os.getpid(), 2)] * 8   # 2 maps x 2 nus x 2 seeds, here,
    # on the cores there are
    parallel = accuracies(*args, jobs=2)
    # SIGINT ignored in the workers (each printed a KeyboardInterrupt traceback at a Ctrl-C), not here
    in_parallel = fits(int(signal.SIG_IGN))
    assert signal.getsignal(signal.SIGINT) is here   # put back
    # in worker processes, one thread each
    assert len(in_parallel) == 8 and all(pid != os.getpid() and threads == 1 for pid, threads in in_parallel)
    # every fit is seeded, so processes change nothing but the wall time
    assert [(r["map"], r["nu"], r["accuracy"], r["accuracy_std"]) for r in serial] == \
        [(r["map"], r["nu"], r["accuracy"], r["accuracy_std"]) for r in parallel]
    # each row: the mean and spread over the seeds of the fold's accuracy, the map and learner drawn from the seed
    for r in serial:
        per_seed = []
        for seed in range(2):
            fmap = make_feature_map(dict(features, map=r["map"], n_components=r["nu"]), seed).fit(X[tr])
            Z = fmap.transform(X)
            per_seed.append(np.mean(train_sgd_arrays(Z, y, tr, np.arange(4), model, seed).predict(Z[~tr]) == y[~tr]))
        assert (r["accuracy"], r["accuracy_std"]) == (np.mean(per_seed), np.std(per_seed)), r
    assert len({r["accuracy"] for r in serial}) > 1   # the maps and sizes give different results


def test_study_workers_exit_when_the_study_is_killed(tmp_path):
    """A study killed (kill -9) left its --jobs workers orphaned: each finished its fit (minutes for the larger
    maps), then waited idle for joblib's five minutes. They now exit within a second of it: here a task that
    would sleep two minutes is cut short."""
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    script = tmp_path / "study_like.py"
    script.write_text(
        "import os, sys, time\n"
        "from joblib import Parallel, delayed\n"
        "from streamcov.tasks.study import _in_worker\n"
        "def fit(i):\n"
        "    print(os.getpid(), flush=True)\n"
        "    time.sleep(120)\n"
        "    return i\n"
        "if __name__ == '__main__':\n"
        "    list(Parallel(n_jobs=2)(delayed(_in_worker)(os.getpid(), fit, i) for i in range(2)))\n")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        workers = [int(proc.stdout.readline()) for _ in range(2)]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def alive(pid):   # a zombie (exited, not yet reaped by the reaper it was given to) is gone
        try:
            return " Z" not in Path(f"/proc/{pid}/stat").read_text().split(")")[-1][:3]
        except OSError:
            return False

    deadline = time.monotonic() + 15   # a poll of 0.5 s; the margin is for a loaded machine
    while any(alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [w for w in workers if alive(w)]
    for w in left:
        os.kill(w, signal.SIGKILL)
    assert not left, f"workers {left} outlived the killed study"


def test_the_exit_watch_starts_only_in_a_direct_child_of_the_study(monkeypatch):
    """Workers that a backend starts from another process (a forkserver, a remote cluster) have another parent
    from the start: the watch would have them exit at once (the fits then hung). It starts only in a direct child
    of the study."""
    import threading

    from streamcov.tasks import study

    monkeypatch.setattr(study, "_WATCHED", False)
    before = threading.active_count()
    study._exit_with_parent(os.getppid() + 100000)   # a study that is not this process's parent
    study._exit_with_parent(os.getpid())              # the study itself (jobs = 1)
    assert study._WATCHED is False and threading.active_count() == before


def _fake_run(folder, dataset, maps, acc, exact=0.8):
    from streamcov.tasks.study import write_report

    rows = [{"dataset": dataset, "exact_accuracy": exact, "sigma": 1.0, "map": m, "nu": nu,
             "gram_rel_error": 1.0 / nu, "gram_rel_error_std": 0.0, "gram_mse": 1.0 / nu,
             "accuracy": acc, "accuracy_std": 0.01, "seeds": 2, "map_ms_per_sequence": 0.1}
            for m in maps for nu in (10, 100, 1000)]
    write_report(rows, folder)


def test_study_merge_replaces_rerun_maps(tmp_path, capsys):
    _fake_run(tmp_path / "full", "msr", ["rgw", "rff", "maclaurin"], 0.5)
    _fake_run(tmp_path / "rerun", "msr", ["maclaurin"], 0.7)
    assert main(["study", "merge", str(tmp_path / "full"), str(tmp_path / "rerun"),
                 "--out", str(tmp_path / "merged")]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 9
    rows = list(csv.DictReader(open(tmp_path / "merged" / "results.csv")))
    acc = {(r["map"], r["nu"]): float(r["accuracy"]) for r in rows if r["nu"] != "1000"}
    assert acc == {("rgw", "10"): 0.5, ("rgw", "100"): 0.5, ("rff", "10"): 0.5, ("rff", "100"): 0.5,
                   ("maclaurin", "10"): 0.7, ("maclaurin", "100"): 0.7}
    table = (tmp_path / "merged" / "table.md").read_text().splitlines()
    # map order of the first run is kept; slope of mse = 1/nu is exactly -1
    assert [line.split(" | ")[1] for line in table[5:8]] == ["rgw", "rff", "maclaurin"]
    assert "| msr | maclaurin | -1.00 | 70.0 ± 1.0 | 70.0 ± 1.0 | 70.0 ± 1.0 |" in table
    assert (tmp_path / "merged" / "msr_accuracy.png").stat().st_size > 1000


def test_study_merge_takes_the_folders_lock_and_leaves_no_earlier_report_beside_its_own(tmp_path, capsys):
    """`study merge` wrote into a folder a study was writing (no lock): the folder ended with the merge's
    results.csv beside the study's summary.json. It takes the output lock, and removes an earlier report's files
    (summary.json, plots of other datasets) before writing its own."""
    import socket

    _fake_run(tmp_path / "full", "msr", ["rgw", "rff"], 0.5)
    merged = tmp_path / "merged"
    _fake_run(merged, "hdm05", ["rgw"], 0.4)   # an earlier study's report
    (merged / "summary.json").write_text("{}")
    assert (merged / "hdm05_gram_error.png").is_file()
    lock_file = merged / ".streamcov.lock"
    fd = os.open(lock_file, os.O_CREAT | os.O_WRONLY)
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # a study writing there: a live holder of this host
        os.write(fd, json.dumps({"pid": os.getppid(), "host": socket.gethostname(), "command": "streamcov study",
                                 "started": "2026-01-01 00:00:00"}).encode())
        assert main(["study", "merge", str(tmp_path / "full"), "--out", str(merged)]) == 2
        assert re.search(r"output folder \S+merged is being written by process \d+ .*\(streamcov study\)",
                         capsys.readouterr().err)
        assert (merged / "summary.json").exists() and "hdm05" in (merged / "results.csv").read_text()
    finally:
        os.close(fd)
    lock_file.unlink()
    assert main(["study", "merge", str(tmp_path / "full"), "--out", str(merged)]) == 0
    assert (merged / "results.csv").is_file() and not (merged / "summary.json").exists()
    assert not (merged / "hdm05_gram_error.png").exists() and not lock_file.exists()


def test_study_merge_refuses_mismatched_runs(tmp_path):
    from cli_cases import assert_one_line_error, cli

    a, b, m = tmp_path / "a", tmp_path / "b", tmp_path / "m"
    _fake_run(a, "msr", ["rgw"], 0.5, exact=0.8)
    _fake_run(b, "msr", ["rff"], 0.5, exact=0.9)
    rc, err, _ = cli("study", "merge", a, b, "--out", m)
    assert_one_line_error(rc, err, rf"^streamcov study: error: {re.escape(str(b / 'results.csv'))}: exact accuracy "
                                   rf"of msr is 0\.900000, 0\.800000 in {re.escape(str(a / 'results.csv'))}; runs on "
                                   rf"different data or exact-SVM grids cannot be merged$")
    assert not m.exists()
    # another dataset's exact accuracy is no mismatch
    _fake_run(tmp_path / "c", "florence", ["rff"], 0.5, exact=0.9)
    assert cli("study", "merge", a, tmp_path / "c", "--out", m)[0] == 0
    rc, err, _ = cli("study", "merge", tmp_path / "nope", "--out", m)
    assert_one_line_error(rc, err, r"nope/results\.csv: not found; give the output folder of a study run$")


def test_study_merge_refuses_a_results_csv_without_its_columns(tmp_path):
    """A results.csv without the exact accuracy (another program's table, a column removed by hand): one line
    naming the file, the line and the column."""
    from cli_cases import assert_one_line_error, cli

    _fake_run(tmp_path / "a", "msr", ["rgw"], 0.5)
    path = tmp_path / "a" / "results.csv"
    rows = list(csv.DictReader(open(path)))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[k for k in rows[0] if k != "exact_accuracy"], extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    rc, err, _ = cli("study", "merge", tmp_path / "a", "--out", tmp_path / "m")
    assert_one_line_error(rc, err, rf"^streamcov study: error: {re.escape(str(path))}: not a results\.csv of "
                                   rf"`streamcov study kernel-approx` \(ValueError: line 2 lacks "
                                   rf"\['exact_accuracy'\]\)$")
    assert not (tmp_path / "m").exists()


def test_study_merge_refuses_an_empty_run_and_its_own_input(tmp_path, capsys):
    """An empty results.csv merged into an empty report without a word; --out among the runs rewrote that run's
    results.csv and table.md and left its summary.json stale."""
    import re

    _fake_run(tmp_path / "a", "msr", ["rgw"], 0.5)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "results.csv").write_text("")
    assert main(["study", "merge", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "m")]) == 2
    assert re.search(r"b/results\.csv: no rows \(an empty or truncated results\.csv\); run the study again for it$",
                     capsys.readouterr().err.strip())
    assert main(["study", "merge", str(tmp_path / "a"), "--out", str(tmp_path / "a")]) == 2
    assert re.search(r"--out \S+/a: one of the runs to merge \(\S+/a\); write the merged report to another folder$",
                     capsys.readouterr().err.strip())


def test_study_merge_out_gets_the_checks_of_a_run_output(tmp_path, capsys, monkeypatch):
    """`study merge --out` is checked as a run's output folder (it wrote its report into the current folder for
    an empty --out, over a user's own results.csv, into a model folder or a store); a merged report's folder is
    marked, so merging into it again is allowed; `study kernel-approx --data ''` is refused (it read the default
    data folder)."""
    import re

    _fake_run(tmp_path / "a", "msr", ["rgw"], 0.5)
    run = [str(tmp_path / "a")]
    assert main(["study", "merge", *run, "--out", ""]) == 2
    assert re.search(r"argument --out: empty path", capsys.readouterr().err)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "results.csv").write_text("my own numbers\n")
    assert main(["study", "merge", *run, "--out", str(mine)]) == 2
    assert re.search(r"^streamcov study: error: --out \S+/mine: \S+/mine holds 'results\.csv', which no streamcov "
                     r"run wrote", capsys.readouterr().err)
    assert (mine / "results.csv").read_text() == "my own numbers\n"
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model.json").write_text("{}")
    assert main(["study", "merge", *run, "--out", str(tmp_path / "model")]) == 2
    assert re.search(r"is a model folder \(it holds model\.json\)", capsys.readouterr().err)
    for _ in range(2):   # the second time into the folder the first one wrote (a study report: no marker)
        assert main(["study", "merge", *run, "--out", str(tmp_path / "m")]) == 0
        capsys.readouterr()
    # a report folder of an earlier version, as the README merges into docs/study (subfolders, no marker)
    import shutil

    from conftest import REPO

    shutil.copytree(REPO / "docs" / "study", tmp_path / "earlier")
    assert main(["study", "merge", *run, "--out", str(tmp_path / "earlier")]) == 0
    capsys.readouterr()
    assert main(["study", "kernel-approx", "--data", "", "--out", str(tmp_path / "k")]) == 2
    assert re.search(r"argument --data: empty path", capsys.readouterr().err)
    # the study's own output folder is named by its flag (it was `output = "..."`)
    assert main(["study", "kernel-approx", "--datasets", "msr", "--out", str(mine)]) == 2
    assert re.search(r"^streamcov study: error: --out \S+/mine: \S+/mine holds 'results\.csv'", capsys.readouterr().err)


@pytest.mark.parametrize("column, value, expected", [("accuracy", "1.7", r"in \[0, 1\]"),
                                                   ("gram_rel_error", "nan", r">= 0"),
                                                   ("gram_mse", "-1e-3", r">= 0"), ("sigma", "0", r"> 0")])
def test_study_merge_refuses_values_no_study_writes(tmp_path, capsys, column, value, expected):
    """An edited results.csv (an accuracy of 1.7 went into the table as 170 %, a NaN error crashed the plots
    after results.csv was written) is refused before anything is written, naming the line and column."""
    import re

    _fake_run(tmp_path / "a", "msr", ["rgw"], 0.5)
    path = tmp_path / "a" / "results.csv"
    rows = list(csv.DictReader(open(path)))
    rows[1][column] = value
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert main(["study", "merge", str(tmp_path / "a"), "--out", str(tmp_path / "m")]) == 2
    assert re.search(rf"^streamcov study: error: \S+results\.csv, line 3: column '{column}' = {re.escape(value)}: expected a finite number "
                     rf"{expected}; the file was edited or damaged", capsys.readouterr().err)
    assert not (tmp_path / "m").exists()


def test_study_table_says_when_a_slope_cannot_be_fitted(tmp_path):
    """A map with fewer than 2 values of nu >= 50 has no variance slope: "n/a", not "nan"."""
    from streamcov.tasks.study import write_report

    write_report([{"dataset": "msr", "exact_accuracy": 0.8, "sigma": 1.0, "map": "rgw", "nu": 10,
                   "gram_rel_error": 0.1, "gram_rel_error_std": 0.0, "gram_mse": 0.1, "accuracy": 0.5,
                   "accuracy_std": 0.01, "seeds": 2, "map_ms_per_sequence": 0.1}], tmp_path)
    table = (tmp_path / "table.md").read_text()
    assert "| msr | rgw | n/a | 50.0 ± 1.0 |" in table and "nan" not in table


def test_svm_on_nystroem_features_is_the_exact_svm(rng):
    """With every training row as a landmark, Nystroem's Z Z^T equals the exact kernel on
    train x train and test x train, so the "svm" learner must reproduce the exact SVM's
    predictions; a random map at small nu must not (it is a different kernel)."""
    from streamcov.tasks.study import accuracies
    from streamcov.stream.exact import exact_svm_fold

    X = rng.normal(size=(90, 6))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X[:, 0] > 0).astype(np.int64) + 2 * (X[:, 1] > 0.2)
    subjects = np.arange(90) % 6
    tr = subjects < 4
    folds = [("f", tr, ~tr)]
    ex = [exact_svm_fold(X, y, subjects, tr, ~tr, [0.5, 1.0], [1.0, 10.0])]
    features = {"sigma": 99.0, "theta": 0.7, "center": True}
    (nys,) = accuracies(X, y, folds, np.arange(4), features, None, ["nystroem"], [200], 1, learner="svm",
                        exact=ex)
    assert nys["accuracy"] == ex[0]["accuracy"]
    (rff,) = accuracies(X, y, folds, np.arange(4), features, None, ["rff"], [2], 3, learner="svm", exact=ex)
    # each seed: the map at the fold's sigma, fitted on its training rows, and the fold's C on Z Z^T
    from sklearn.svm import SVC

    from streamcov.features.registry import make_feature_map

    per_seed = []
    for seed in range(3):
        fmap = make_feature_map(dict(features, map="rff", n_components=2, sigma=ex[0]["sigma"]), seed)
        Z = fmap.fit(X[tr]).transform(X)
        svc = SVC(kernel="precomputed", C=ex[0]["C"]).fit(Z[tr] @ Z[tr].T, y[tr])
        per_seed.append(np.mean(svc.predict(Z[~tr] @ Z[tr].T) == y[~tr]))
    assert (rff["accuracy"], rff["accuracy_std"]) == (np.mean(per_seed), np.std(per_seed))
    assert rff["accuracy_std"] > 0 and rff["accuracy"] < nys["accuracy"]   # 2 features: seeds differ, all worse
    with pytest.raises(ValueError, match=r"learner='svm' needs the exact SVM's per-fold sigma and C"):
        accuracies(X, y, folds, np.arange(4), features, None, ["rff"], [2], 1, learner="svm")
    with pytest.raises(ValueError, match=r"learner must be 'sgd' or 'svm', got 'lbfgs'"):
        accuracies(X, y, folds, np.arange(4), features, None, ["rff"], [2], 1, learner="lbfgs")


def test_nystroem_past_its_rows_is_said_and_left_out_of_the_slope(rng, tmp_path):
    """Nystroem takes at most one landmark per row: on a Gram sample of 40 rows, nu = 64 and 256 are 40
    components (the exact kernel on the sample: an error of rounding), and a fold of 60 training rows gives the
    learner 60. The study reported them under their nu without a word, and fitted a variance slope through the
    rounding; the rows now say their components, the slope leaves them out (none left to fit: n/a), and the
    table marks the cells and says why."""
    from streamcov.tasks.schema import ModelTable
    from streamcov.tasks.study import accuracies, write_report

    X = rng.normal(size=(40, 6))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    grams = gram_errors(X, 1.0, ["nystroem", "rff"], [16, 64, 256], seeds=2, base_params={"sigma": 1.0})
    got = {(r["map"], r["nu"]): r["gram_components"] for r in grams}
    assert got == {("nystroem", 16): 16, ("nystroem", 64): 40, ("nystroem", 256): 40,
                   ("rff", 16): 16, ("rff", 64): 64, ("rff", 256): 256}
    assert max(r["gram_rel_error"] for r in grams if r["map"] == "nystroem" and r["nu"] > 40) < 1e-6
    slopes = variance_slopes(grams)
    assert "nystroem" not in slopes and "rff" in slopes   # nu = 64, 256 left out: one point >= 50 is none
    V = rng.normal(size=(80, 6))
    V /= np.linalg.norm(V, axis=1, keepdims=True)
    y = (V[:, 0] > 0).astype(np.int64)
    tr = np.arange(80) < 60
    model = ModelTable(loss="log_loss", learning_rate="optimal", C=10.0, epochs=2, scale="center", shuffle_blocks=2)
    accs = accuracies(V, y, [("f", tr, ~tr)], np.arange(2), {"sigma": 1.0}, model, ["nystroem"], [16, 256], 1)
    assert [(r["nu"], r["components"]) for r in accs] == [(16, 16), (256, 60)]
    merged = {(g["map"], g["nu"]): dict(g, dataset="d", exact_accuracy=0.9, sigma=1.0, gram_seeds=2)
              for g in grams}
    for a in accs:
        merged[(a["map"], a["nu"])].update(a)
    write_report(list(merged.values()), tmp_path)
    table = (tmp_path / "table.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith("| d | nystroem |"))
    assert row.count("*") == 1 and row.split("|")[-2].strip().endswith("*"), row   # nu = 256 only
    assert "fewer components than nu: Nystroem takes at most one landmark per training row" in table
    assert "Gram error, d, nystroem: nu = 64, 256 have 40 components (one per row of the Gram sample)" in table
    with open(tmp_path / "results.csv") as f:
        assert {"components", "gram_components"} <= set(next(csv.reader(f)))


def test_exact_svm_grid_search_is_cross_val_score_and_takes_one_class_inner_folds(rng):
    """select_sigma_C scores each inner fold as scikit-learn's cross_val_score does (the same table); an inner
    fold whose training subjects performed one class only scores that class's constant prediction instead of
    stopping the run; a grid of one pair runs no CV, so one training subject is enough."""
    from sklearn.model_selection import cross_val_score
    from sklearn.svm import SVC

    from streamcov.kernels import block_gaussian_kernel, block_distances
    from streamcov.splits import inner_folds
    from streamcov.stream.exact import exact_svm_fold, select_sigma_C

    X = rng.normal(size=(60, 5))
    y = (X[:, 0] > 0).astype(np.int64)
    g = np.arange(60) % 4
    sigmas, Cs = [0.5, 8.0, 2.0], [0.1, 1000.0, 1.0, 10.0]   # unsorted: the best pair is inside the grid

    def sklearn_table(X, y, g, sigmas, Cs):   # rows sigma, columns C, as select_sigma_C lays it out
        return np.array([[cross_val_score(SVC(kernel="precomputed", C=c), block_gaussian_kernel(X, None, sigma=s), y,
                                          cv=inner_folds(y, g)).mean() for c in Cs] for s in sigmas])

    def first_best(table, sigmas, Cs):   # the first maximum in row-major order: the earlier sigma, then C
        a, b = np.unravel_index(np.argmax(table), table.shape)
        return sigmas[a], Cs[b]

    sigma, C, cv, table = select_sigma_C(block_distances(X, None, None, 1), y, g, sigmas, Cs)
    expected = sklearn_table(X, y, g, sigmas, Cs)
    np.testing.assert_array_equal(table, expected)
    assert np.ptp(expected) > 0.1   # a grid that matters: the pair chosen is not any pair
    assert cv == expected.max() and (sigma, C) == first_best(expected, sigmas, Cs)
    # pairs that tie (C too small to fit: the majority class everywhere): the first of the grid is taken
    _, _, _, tied = select_sigma_C(block_distances(X, None, None, 1), y, g, [8.0, 0.5], [1e-3, 1e-4])
    assert np.all(tied == tied[0, 0])
    assert select_sigma_C(block_distances(X, None, None, 1), y, g, [8.0, 0.5], [1e-3, 1e-4])[:2] == (8.0, 1e-3)
    # the exact SVM of a fold: its pair is the first best of the inner CV on the training subjects, and it
    # predicts as scikit-learn's SVC on the same Gaussian kernel with that pair
    s6 = np.arange(60) % 6
    tr, te = s6 < 4, s6 >= 4
    res, _, pred = exact_svm_fold(X, y, s6, tr, te, sigmas, Cs, return_model=True)
    inner = sklearn_table(X[tr], y[tr], s6[tr], sigmas, Cs)
    assert (res["sigma"], res["C"]) == first_best(inner, sigmas, Cs) and res["cv_accuracy"] == inner.max()
    svc = SVC(kernel="precomputed", C=res["C"]).fit(block_gaussian_kernel(X[tr], None, sigma=res["sigma"]), y[tr])
    direct = svc.predict(block_gaussian_kernel(X[te], X[tr], sigma=res["sigma"]))
    np.testing.assert_array_equal(pred, direct)
    assert res["accuracy"] == np.mean(direct == y[te]) and 0.6 < res["accuracy"] < 1.0
    # two training subjects, each of whom performed one class: every inner fold trains on one class (SVC
    # would refuse it) and tests on the other
    y1 = np.where(g[:30] % 2 == 0, 0, 1)
    g1 = g[:30] % 2
    d1 = block_distances(X[:30], None, None, 1)
    with pytest.warns(UserWarning, match=r"in every inner fold the training subjects performed one class, so every "
                                         r"\(sigma, C\) scores alike and the first of each grid is taken"):
        _, _, cv1, table1 = select_sigma_C(d1, y1, g1, [0.5, 2.0], [1.0])
    assert cv1 == 0.0 and np.all(table1 == 0.0)   # trained on the other subject's class, tested on this one's
    # a 1 x 1 grid: nothing to choose, no CV, one training subject fits
    tr = g == 0
    res = exact_svm_fold(X, y, g, tr, ~tr, [1.0], [10.0])
    assert res["cv_accuracy"] is None and (res["sigma"], res["C"]) == (1.0, 10.0)
    svc = SVC(kernel="precomputed", C=10.0).fit(block_gaussian_kernel(X[tr], None, sigma=1.0), y[tr])
    assert res["accuracy"] == np.mean(svc.predict(block_gaussian_kernel(X[~tr], X[tr], sigma=1.0)) == y[~tr])
    with pytest.raises(ConfigError, match=r"at least 2 training subjects in every fold; with one, give one value "
                                          r"to each grid \(e.g. --set model.sigma_grid=\[1.0\]"):
        exact_svm_fold(X, y, g, tr, ~tr, [1.0, 2.0], [10.0])


def test_the_default_maps_are_those_the_schema_accepts(monkeypatch, tmp_path):
    """With no --maps the study runs every map --maps accepts, and no other: the ConvNet-head map (rff-head)
    was in the default list, which read the descriptors' last 1280 columns as a head (wrong rows on
    MSR-Action3D, a traceback on Florence3D's 1035 columns)."""
    import streamcov.tasks.study as study
    from streamcov.tasks.schema import STUDY_MAPS

    seen = {}

    def fake(datasets, maps, *a, **k):
        seen["maps"] = tuple(maps)
        return {"datasets": {}}

    monkeypatch.setattr(study, "kernel_approx_study", fake)
    assert main(["study", "kernel-approx", "--datasets", "msr", "--out", str(tmp_path)]) == 0
    assert seen["maps"] == STUDY_MAPS and "rff-head" not in seen["maps"]


def test_study_refuses_a_nu_no_memory_holds(tmp_path, monkeypatch):
    """--nus 10000000000 was a numpy MemoryError traceback once the descriptors were computed; it is one line
    naming the value, before any map is drawn."""
    import streamcov.tasks.study as study
    from streamcov.errors import ConfigError

    monkeypatch.setattr(study, "dataset_descriptors", lambda *a: (None, None, np.zeros((100, 50)), None))
    with pytest.raises(ConfigError, match=r"^study\.nus = 10000000000 on msr \(100 descriptors of 50 numbers\): needs "
                                          r"\S+ \S+ of memory, this process may use \S+ \S+; use smaller values of nu$"):
        study.kernel_approx_study(datasets=("msr",), maps=("rgw",), nus=(10, 10**10), out=tmp_path / "o",
                                  log=lambda *a: None)


def test_quick_study_takes_two_gram_draws_unless_told(monkeypatch, tmp_path):
    """--quick kept the 20 draws per point of the full study's Gram curves: five of its ten minutes. It takes 2,
    as its accuracy seeds; --gram-seeds still decides."""
    from streamcov import tasks

    seen = []
    monkeypatch.setattr(tasks, "run", lambda cfg, **kw: seen.append(cfg["study"]) or {})
    assert main(["study", "kernel-approx", "--quick", "--out", str(tmp_path / "a"), "--quiet"]) == 0
    assert main(["study", "kernel-approx", "--quick", "--gram-seeds", "5", "--out", str(tmp_path / "b"),
                 "--quiet"]) == 0
    assert main(["study", "kernel-approx", "--out", str(tmp_path / "c"), "--quiet"]) == 0
    assert [s.get("gram_seeds") for s in seen] == [2, 5, None]   # None: the schema's 20


def test_study_finds_the_checkouts_pipeline_files_from_an_installed_streamcov(tmp_path, monkeypatch, capsys):
    """Installed from a wheel (no pipelines/ beside the package), the study looked for the dataset pipeline files
    and the datasets in site-packages: "site-packages/pipelines/msr_action3d.toml: pipeline file not found"
    whatever the folder. They are now looked for in the current folder (the root of a checkout) as well, the
    datasets in $STREAMCOV_DATA, else ../shared/data beside that checkout; without any, one line that says so."""
    import shutil

    from conftest import REPO
    from streamcov.tasks import study

    site = tmp_path / "site-packages"   # what an installed package's parent holds: no pipelines/
    site.mkdir()
    monkeypatch.setattr(study, "REPO", site)
    monkeypatch.delenv("STREAMCOV_DATA", raising=False)
    elsewhere = tmp_path / "work"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with pytest.raises(ConfigError, match=r"^the study reads the dataset pipeline file pipelines/msr_action3d\.toml "
                                          r"of a streamcov source checkout, not found \(.*work/pipelines/"
                                          r"msr_action3d\.toml\); run it from the root of a checkout"):
        study.pipeline_file("msr_action3d")
    assert main(["study", "kernel-approx", "--quick", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pipelines/msr_action3d.toml of a streamcov source checkout" in err[0], err

    checkout = tmp_path / "checkout"
    shutil.copytree(REPO / "pipelines", checkout / "pipelines")
    monkeypatch.chdir(checkout)
    assert study.pipeline_file("florence3d_exact") == checkout / "pipelines" / "florence3d_exact.toml"
    assert study.default_data_root() == tmp_path / "shared" / "data"
    monkeypatch.setenv("STREAMCOV_DATA", str(tmp_path / "elsewhere"))
    assert study.default_data_root() == tmp_path / "elsewhere"
    # an editable install's checkout comes first, from any folder
    monkeypatch.setattr(study, "REPO", REPO)
    monkeypatch.chdir(elsewhere)
    assert study.pipeline_file("msr_action3d") == REPO / "pipelines" / "msr_action3d.toml"
