"""The machine around a run: numba's cache on a read-only install, a full disk under zarr's concurrent writes."""
import asyncio
import errno
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from streamcov import _config


@pytest.fixture(autouse=True)
def _cache_plan_put_back(monkeypatch):
    """The plan of numba's cache that tests here make again (its note and problem are module globals the commands
    read): put back after each, so that later tests in the process do not print its note."""
    for name in ("CACHE", "CACHE_NOTE", "CACHE_PROBLEM"):
        monkeypatch.setattr(_config, name, getattr(_config, name))


def test_a_home_that_cannot_be_written_puts_streamcovs_cache_in_the_temporary_folder(monkeypatch, tmp_path):
    """A read-only or missing home (a container's numeric user): every process warned that it could not write the
    network weights' cache and read the 19 MB network again. The cache goes to <temporary folder>/streamcov-cache-
    <uid>, this user's own (0700), as numba's does; STREAMCOV_CACHE_DIR, or a home that can be written, first."""
    import stat
    import tempfile

    monkeypatch.delenv("STREAMCOV_CACHE_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked / "cache"))   # under a file: nothing can be made there
    got = _config.default_cache_dir()
    assert got == tmp_path / "tmp" / f"streamcov-cache-{os.getuid()}"
    assert stat.S_IMODE(got.stat().st_mode) == 0o700
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home-cache"))
    assert _config.default_cache_dir() == tmp_path / "home-cache" / "streamcov"
    # a relative XDG_CACHE_HOME is ignored, as the XDG spec says (it put the cache in each working folder)
    monkeypatch.setenv("XDG_CACHE_HOME", "relcache")
    monkeypatch.setattr(Path, "home", staticmethod(lambda: tmp_path / "home"))
    assert _config.default_cache_dir() == tmp_path / "home" / ".cache" / "streamcov"
    monkeypatch.setenv("STREAMCOV_CACHE_DIR", str(tmp_path / "given"))
    assert _config.default_cache_dir() == tmp_path / "given"
    # another user's folder of that name in a shared temporary directory is not taken (it could hold their files)
    monkeypatch.delenv("STREAMCOV_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked / "cache"))
    monkeypatch.setattr(_config, "_private_folder", lambda folder: False)
    assert _config.default_cache_dir() == blocked / "cache" / "streamcov"   # the usual place: its writer warns


def test_a_read_only_install_caches_its_kernels_in_the_temporary_folder(monkeypatch, tmp_path):
    """Neither the package's folders nor numba's user cache writable (a container's read-only root and home):
    every kernel's cache=True raised "cannot cache function ...: no locator available" (a traceback). numba's
    cache goes to a folder of the temporary directory, which the workers a run starts inherit."""
    import numba.core.config as nconfig
    import tempfile

    monkeypatch.setenv("NUMBA_CACHE_DIR", "recorded")   # so that monkeypatch puts back the variable as it was
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setattr(nconfig, "CACHE_DIR", "")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    got = _config.plan_numba_cache(writable=lambda folder: str(folder).startswith(str(tmp_path)))
    assert got == str(tmp_path / f"streamcov-numba-{os.getuid()}")
    assert os.environ["NUMBA_CACHE_DIR"] == got == nconfig.CACHE_DIR
    # numba's own places serve: nothing changed
    del os.environ["NUMBA_CACHE_DIR"]
    assert _config.plan_numba_cache(writable=lambda folder: True) is None and "NUMBA_CACHE_DIR" not in os.environ


def test_nowhere_to_write_compiles_without_a_cache(monkeypatch, tmp_path):
    import tempfile

    monkeypatch.setenv("NUMBA_CACHE_DIR", "recorded")   # so that monkeypatch puts back the variable as it was
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))   # its folder is made there, not in the machine's /tmp
    for name in ("JIT_OPTS", "ORDERED_JIT_OPTS"):
        monkeypatch.setitem(getattr(_config, name), "cache", True)
    monkeypatch.setattr(_config, "CACHE", True)
    monkeypatch.setattr(_config, "CACHE_NOTE", None)
    assert _config.plan_numba_cache(writable=lambda folder: False) is None
    assert _config.CACHE is False and not _config.JIT_OPTS["cache"] and not _config.ORDERED_JIT_OPTS["cache"]
    # said by every command (a warning line), where it was silent: each compiled the kernels again
    with pytest.warns(UserWarning, match=r"^numba's cache of compiled kernels is off: .* every command compiles "
                                         r"the kernels again \(about a minute\); set NUMBA_CACHE_DIR to a folder"):
        _config.check_numba_environment()
    # the messages name no folder that is not used (it named numba's user folder, not written to either)
    monkeypatch.setattr(_config, "_writable", lambda folder: False)
    assert _config.numba_cache_dir() == "nowhere (kernels are compiled without a cache)"


def test_a_numba_cache_dir_nothing_can_be_written_to_is_one_line(monkeypatch, tmp_path):
    """A NUMBA_CACHE_DIR that cannot be written, on a read-only install with a read-only home: numba had no
    place for its cache, and the first kernel was its "no locator available" traceback. Kernels compile
    uncached and the commands refuse the setting in one line; a writable NUMBA_CACHE_DIR, or one beside
    writable fallbacks (numba uses those), is no problem."""
    from cli_cases import assert_one_line_error, cli

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "ro"))
    for name in ("JIT_OPTS", "ORDERED_JIT_OPTS"):
        monkeypatch.setitem(getattr(_config, name), "cache", True)
    monkeypatch.setattr(_config, "CACHE", True)
    monkeypatch.setattr(_config, "CACHE_PROBLEM", None)
    assert _config.plan_numba_cache(writable=lambda folder: str(folder) == str(tmp_path / "ro")) is None
    assert _config.plan_numba_cache(writable=lambda folder: "__pycache__" in str(folder)) is None
    assert _config.CACHE and _config.CACHE_PROBLEM is None
    assert _config.plan_numba_cache(writable=lambda folder: False) is None
    assert _config.CACHE is False and not _config.JIT_OPTS["cache"]
    said = (rf"environment variable NUMBA_CACHE_DIR='{tmp_path}/ro': cannot write there \(nor in the package's "
            rf"folders or the home folder, .*\); give a folder this user can write, or unset it$")
    assert re.match(said, _config.numba_environment_problem())
    rc, err, _ = cli("run", "--quiet", "--output", tmp_path / "out")
    assert_one_line_error(rc, err, r"^streamcov run: error: " + said)
    assert not (tmp_path / "out").exists()


def test_no_temporary_folder_and_no_home_compile_without_a_cache(monkeypatch, tmp_path):
    """A read-only root with no usable temporary folder, or a user with no home (HOME unset, a numeric user the
    system does not name): the plan made at import raised (tempfile's FileNotFoundError, pathlib's "Could not
    determine home directory"), so that every command, --help too, was a traceback. Kernels compile
    uncached; a run's check of its output folder and the ConvNet weights (no cache) work without a home."""
    import tempfile

    monkeypatch.setenv("NUMBA_CACHE_DIR", "recorded")
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    for name in ("JIT_OPTS", "ORDERED_JIT_OPTS"):
        monkeypatch.setitem(getattr(_config, name), "cache", True)
    monkeypatch.setattr(_config, "CACHE", True)

    def no_temporary_folder():
        raise FileNotFoundError(2, "No usable temporary directory found in ['/tmp', '/var/tmp', '/usr/tmp']")

    def no_home():
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(tempfile, "gettempdir", no_temporary_folder)
    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert _config._numba_user_cache() is None
    assert _config.plan_numba_cache(writable=lambda folder: False) is None
    assert _config.CACHE is False and _config.CACHE_PROBLEM is None
    assert _config.numba_cache_dir().startswith("nowhere") or "__pycache__" in _config.numba_cache_dir()
    from streamcov.tasks.runner import _check_not_someone_elses

    (tmp_path / "out").mkdir()
    _check_not_someone_elses(tmp_path / "out", (tmp_path / "out").resolve(), "--output")   # no error


@pytest.mark.parametrize("value, refused", [("1", True), (" 2", True), ("0", False), ("", False), ("abc", False)])
def test_numba_disable_jit_is_refused_before_any_work(monkeypatch, value, refused):
    """NUMBA_DISABLE_JIT=1: some kernels are numba intrinsics, which have no Python version: a NotImplementedError
    traceback after the store was written. Refused in one line as numba reads the variable (an integer not 0;
    text is numba's warning and the compiler stays on)."""
    from cli_cases import assert_one_line_error, cli

    monkeypatch.setenv("NUMBA_DISABLE_JIT", value)
    problem = _config.numba_environment_problem()
    if not refused:
        assert problem is None
        return
    said = (rf"environment variable NUMBA_DISABLE_JIT={value!r}: streamcov's kernels run compiled only \(some are "
            rf"numba intrinsics, which have no Python version\); unset it or set it to 0$")
    assert re.match(said, problem)
    rc, err, _ = cli("run", "--quiet", "--output", "/nonexistent-never-made")
    assert_one_line_error(rc, err, r"^streamcov run: error: " + said)
    assert not Path("/nonexistent-never-made").exists()


def test_writes_left_running_on_zarrs_loop_end_before_the_command_returns():
    """One failed chunk write ends an array's write, not its sibling chunk writes: left running, they failed at
    the interpreter's shutdown and printed hundreds of lines of asyncio tracebacks under the command's line.
    The command lets them end, and retrieves their errors."""
    import zarr.core.sync as zsync

    from streamcov.cli import _settle_zarr

    zsync.sync(asyncio.sleep(0))   # zarr's loop, started
    loop = zsync.loop[0]
    started = threading.Event()

    async def sibling():
        started.set()
        await asyncio.sleep(0.3)
        raise OSError(errno.ENOSPC, "No space left on device")

    future = asyncio.run_coroutine_threadsafe(_spawn(sibling), loop)
    task = future.result(5)
    started.wait(5)
    assert not task.done()
    _settle_zarr()
    assert task.done() and isinstance(task.exception(), OSError)
    assert not getattr(task, "_log_traceback", False)   # retrieved: asyncio says nothing of it at exit


async def _spawn(coro_fn):
    return asyncio.get_running_loop().create_task(coro_fn())


def _mounted_tmpfs(path: Path, size: str) -> bool:
    path.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True).returncode == 0


@pytest.mark.slow
def test_a_disk_filled_by_the_fitted_map_is_one_line(tmp_path):
    """A run whose output disk fills while the fitted map's arrays are written (zarr writes their chunks
    concurrently) ends in its one line, without asyncio's tracebacks of the other chunk writes."""
    from streamcov.data.skeletons import ingest
    from streamcov.data.synth import SyntheticSkeletons

    fs = tmp_path / "fs"
    if not _mounted_tmpfs(fs, "12m"):
        pytest.skip("needs to mount a small tmpfs (root, and a mount the container allows)")
    try:
        store = ingest(SyntheticSkeletons(n_sequences=300, seed=1), tmp_path / "s.zarr")
        # the map's 300 landmarks x 73,370 float64 (176 MB) do not fit in 12 MB
        # a process of its own: the tracebacks came at its exit
        proc = subprocess.run([sys.executable, "-m", "streamcov.cli", "run",
                               str(Path(__file__).parents[1] / "pipelines" / "msr_action3d.toml"), "--store",
                               str(store.path), "--output", str(fs / "out"), "--quiet", "--set", "model.max_iter=5"],
                              capture_output=True, text=True, timeout=600)
        rc, err = proc.returncode, proc.stderr
        assert rc == 2 and len(err.strip().splitlines()) == 1, err[:3000]
        assert "no space left on the device" in err
    finally:
        subprocess.run(["umount", str(fs)], capture_output=True)


@pytest.mark.slow
def test_ctrl_c_on_a_local_cluster_is_one_line(tmp_path):
    """A terminal's Ctrl-C reaches the whole process group: every LocalCluster worker printed a KeyboardInterrupt
    traceback (67 lines in all) under the command's `interrupted`. The workers are started with SIGINT ignored;
    the command stops them itself."""
    import signal
    import time

    from streamcov.data.skeletons import ingest
    from streamcov.data.synth import SyntheticSkeletons

    store = ingest(SyntheticSkeletons(n_sequences=600, seed=2), tmp_path / "s.zarr")
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "streamcov.cli", "run", "--store", str(store.path), "--output",
                             str(out), "--workers", "2", "--json", "--set", "model.epochs=10000", "--set",
                             "features.n_components=2000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,
                            # as from a terminal: a process of the test suite may ignore SIGINT, which a child inherits
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        t0 = time.monotonic()
        while not (out / "features.zarr").exists() and proc.poll() is None and time.monotonic() - t0 < 300:
            time.sleep(0.1)
        time.sleep(1.0)   # featurizing or training (10,000 epochs: it does not end first), on the workers
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130 and err.strip() == "streamcov run: interrupted", err[-3000:]


def test_a_second_local_cluster_on_the_machine_says_nothing_of_ports():
    """Its scheduler took the dashboard's port 8787 by default: where another cluster held it, every run with
    --workers warned "Port 8787 is already in use ... Hosting the HTTP server on port N instead"."""
    import socket
    import warnings

    from streamcov.stream.runtime import dask_runtime

    held = socket.socket()
    try:
        held.bind(("127.0.0.1", 8787))
        held.listen()
    except OSError:
        pass   # held by another process already: the same situation
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with dask_runtime("local-cluster", 2) as rt:
                assert rt.info["workers"] == 2
                # on the loopback interface only: a port without a host listened on every interface
                sockets = getattr(rt.client.cluster.scheduler.http_server, "_sockets", {})
                assert sockets and {s.getsockname()[0] for s in sockets.values()} == {"127.0.0.1"}
    finally:
        held.close()
    assert not [w for w in caught if "Port" in str(w.message) or "port" in str(w.message)], \
        [str(w.message) for w in caught]


def test_the_temporary_cache_folder_is_this_users_own(monkeypatch, tmp_path):
    """numba loads its cache index with pickle: a folder of the shared temporary directory that is a link, or
    another user's, is not taken; the next of a few other names is (the cache was turned off without a word,
    and every command compiled the kernels again), and where all are taken the kernels are compiled without a
    cache and a note says so; this user's own, made by an earlier streamcov under a umask of 002 (mode 0775),
    is made 0700 and taken."""
    import numba.core.config as nconfig
    import tempfile

    monkeypatch.setenv("NUMBA_CACHE_DIR", "recorded")   # so that monkeypatch puts back the variable as it was
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setattr(nconfig, "CACHE_DIR", "")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for name in ("JIT_OPTS", "ORDERED_JIT_OPTS"):
        monkeypatch.setitem(getattr(_config, name), "cache", True)
    monkeypatch.setattr(_config, "CACHE", True)
    monkeypatch.setattr(_config, "CACHE_NOTE", None)
    folder = tmp_path / f"streamcov-numba-{os.getuid()}"

    def plan():
        return _config.plan_numba_cache(writable=lambda f: str(f).startswith(str(tmp_path)))

    folder.symlink_to(tmp_path)   # a link planted there: the next name is taken
    assert plan() == f"{folder}-1" and oct(Path(f"{folder}-1").stat().st_mode & 0o777) == "0o700"
    del os.environ["NUMBA_CACHE_DIR"]
    Path(f"{folder}-1").rmdir()
    if os.geteuid() == 0:   # another user's folders (root can make them)
        for n in range(_config.SPARE_TEMP_NAMES):
            Path(f"{folder}-{n + 1}").symlink_to(tmp_path)
        assert plan() is None and _config.CACHE is False and "NUMBA_CACHE_DIR" not in os.environ
        assert _config.CACHE_NOTE.startswith("numba's cache of compiled kernels is off")
        Path(f"{folder}-{_config.SPARE_TEMP_NAMES}").unlink()
        Path(f"{folder}-{_config.SPARE_TEMP_NAMES}").mkdir()
        os.chown(f"{folder}-{_config.SPARE_TEMP_NAMES}", 65534, 65534)
        assert plan() is None and _config.CACHE is False
        for n in range(_config.SPARE_TEMP_NAMES - 1):
            Path(f"{folder}-{n + 1}").unlink()
        Path(f"{folder}-{_config.SPARE_TEMP_NAMES}").rmdir()
    folder.unlink()
    monkeypatch.setattr(_config, "CACHE", True)
    folder.mkdir()
    folder.chmod(0o775)   # an earlier streamcov's, under umask 002
    assert plan() == str(folder) and oct(folder.stat().st_mode & 0o777) == "0o700"
    del os.environ["NUMBA_CACHE_DIR"]
    folder.rmdir()   # made here: mode 0700
    assert plan() == str(folder) and oct(folder.stat().st_mode & 0o777) == "0o700"


def test_the_suites_sweep_of_semaphores_keeps_those_a_process_holds(tmp_path):
    """The suite's end removes the named semaphores its killed processes left (conftest.pytest_sessionfinish):
    one a living process holds is seen as held, one whose every holder was killed with SIGKILL is not. Each is
    followed by its own name (the other test process makes semaphores of its own meanwhile)."""
    import multiprocessing
    import signal

    import conftest

    if not conftest.SHM.is_dir():
        pytest.skip("no /dev/shm")
    ctx = multiprocessing.get_context("spawn")   # a named semaphore kept for the children it may spawn
    lock = ctx.Lock()
    mine = "sem." + lock._semlock.name.lstrip("/")
    assert mine in conftest._semaphores() and mine in conftest._mapped_semaphores()
    del lock
    # a child that makes one and is killed before it can unlink it (its resource tracker killed with it)
    code = ("import multiprocessing, os, signal; lock = multiprocessing.get_context('spawn').Lock(); "
            "print(lock._semlock.name, flush=True); os.killpg(0, signal.SIGKILL)")
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                           start_new_session=True)
    assert child.returncode == -signal.SIGKILL
    left = "sem." + child.stdout.strip().lstrip("/")
    try:
        assert left in conftest._semaphores() and left not in conftest._mapped_semaphores()
    finally:
        (conftest.SHM / left).unlink(missing_ok=True)   # as the sweep does


def test_a_closed_stdout_or_stderr_is_not_a_traceback_nor_mixed(tmp_path):
    """A command started with stdout closed (`>&-`) ran its whole work, then failed ("this is a bug", exit 1)
    writing its result; with stderr closed (`2>&-`) every error line went to stdout, which a script parses. Each
    closed stream is now /dev/null."""
    from streamcov.data.skeletons import ingest
    from streamcov.data.synth import SyntheticSkeletons

    store = ingest(SyntheticSkeletons(n_sequences=20), tmp_path / "s.zarr").path
    cmd = [sys.executable, "-m", "streamcov", "info", str(store), "--json"]
    no_out = subprocess.run(cmd, stderr=subprocess.PIPE, text=True, timeout=120, preexec_fn=lambda: os.close(1))
    assert no_out.returncode == 0 and no_out.stderr == "", no_out.stderr
    bad = [sys.executable, "-m", "streamcov", "info", str(tmp_path / "missing.zarr")]
    no_err = subprocess.run(bad, stdout=subprocess.PIPE, text=True, timeout=120, preexec_fn=lambda: os.close(2))
    assert no_err.returncode == 2 and no_err.stdout == "", no_err.stdout


def test_a_reader_that_leaves_stderr_early_loses_no_result(tmp_path):
    """`streamcov run P 2>&1 >out.json | ...` whose reader ended: the accuracy line to stderr raised
    BrokenPipeError, and the finished run ended with exit 1 ("this is a bug") before its JSON line reached
    stdout. stderr is now /dev/null from then on, and the result is written."""
    pipeline = tmp_path / "p.toml"
    pipeline.write_text('task = "skeleton-classification"\nname = "p"\noutput = "out"\n\n[data.synthetic]\n'
                        'n_sequences = 24\nn_subjects = 4\n\n[features]\nn_components = 32\n\n[model]\n'
                        'epochs = 2\n')
    r, w = os.pipe()
    os.close(r)   # the reader has gone before the first line
    try:
        with open(tmp_path / "out.json", "w") as out:
            proc = subprocess.run([sys.executable, "-m", "streamcov", "run", str(pipeline), "--quiet"], stdout=out,
                                  stderr=w, timeout=300, cwd=tmp_path)
    finally:
        os.close(w)
    assert proc.returncode == 0
    result = json.loads((tmp_path / "out.json").read_text())
    assert result["pipeline"] == "p" and (tmp_path / "out" / "result.json").is_file()


def test_ctrl_c_while_the_parser_imports_is_one_line(monkeypatch, capsys):
    """Ctrl-C in the first half second, while the argument parser imports zarr and the readers, was a
    30-line KeyboardInterrupt traceback and exit -2: one line and 130, as later."""
    from streamcov import cli

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["info", "x"]) == 130
    assert capsys.readouterr().err == "streamcov: interrupted\n"
