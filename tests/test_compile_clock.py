"""A run says how much of its time was numba compiling kernels (``compile_seconds``).

A first run with an empty numba cache spent most of a demo's 30-40 s compiling, inside ``fit_seconds`` or
``featurize_ms_per_sequence``; the result read as the run's speed, with nothing to tell the two apart.
"""
import json
import threading
import time

import numpy as np
from numba import njit

from streamcov._config import compile_clock


def _fresh_kernels():
    """Two kernels of this call alone (never cached, never compiled before): ``outer`` calls ``inner``."""
    @njit(cache=False)
    def inner(x):
        return np.sqrt(x * x + 1.0).sum()

    @njit(cache=False)
    def outer(x):
        return inner(x) + inner(2.0 * x)

    return outer


def _fresh_scalar_kernel():
    """A kernel of this call alone whose compilation compiles nothing else (no callee, no array function)."""
    @njit(cache=False)
    def scalar(x):
        y = 0.0
        for i in range(10):
            y += x * i
        return y

    return scalar


def test_a_compilation_is_counted_once_and_a_compiled_kernel_not_at_all():
    outer = _fresh_kernels()
    x = np.arange(5.0)
    t0 = time.perf_counter()
    with compile_clock() as first:
        outer(x)
    wall = time.perf_counter() - t0
    # outer's compilation compiles inner inside it: counted once, so never more than the block's own time
    assert 0.0 < first.seconds <= wall
    with compile_clock() as again:
        outer(x)
    assert again.seconds == 0.0


def test_a_compilation_in_another_thread_is_counted():
    """The threaded scheduler's tasks compile in Dask's threads, not in the thread that opened the clock."""
    outer = _fresh_kernels()
    with compile_clock() as clock:
        t = threading.Thread(target=outer, args=(np.arange(3.0),))
        t.start()
        t.join()
    assert clock.seconds > 0.0


def test_a_compilation_under_way_when_the_clock_opens_leaves_the_later_ones_counted():
    """numba's TimingListener took the end of a compilation begun in another thread before it was installed for
    one of its own: its depth went below 0, and a compilation inside the block then read 0 s."""
    from numba.core import event

    started = threading.Event()

    class Flag(event.Listener):
        def on_start(self, ev):
            started.set()

        def on_end(self, ev):
            pass

    other, mine = _fresh_scalar_kernel(), _fresh_scalar_kernel()
    with event.install_listener("numba:compile", Flag()):
        t = threading.Thread(target=other, args=(1.0,))
        t.start()
        assert started.wait(60)
        with compile_clock() as clock:
            mine(2.0)   # waits for numba's lock, then compiles
        t.join()
    assert clock.seconds > 0.0


def _stub_task(monkeypatch, work):
    """``streamcov run`` of the image demo with its task replaced by ``work()`` (the runner, the result and the
    command's line are what is tested, not a task)."""
    from streamcov.tasks import runner

    class Spec:
        @staticmethod
        def run(cfg, ctx):
            work()
            return {"pipeline": "stub", "accuracy": 0.5, "n_train": 2, "n_test": 2}

    monkeypatch.setattr(runner, "get_task", lambda task: Spec)


def test_a_run_records_its_compilation_and_the_command_says_it(tmp_path, capsys, monkeypatch):
    """result["compile_seconds"], measured in the run; the command's summary line says it from 1 s up (a run
    whose kernels all came from the cache says nothing of it)."""
    import contextlib

    import streamcov._config as config
    from streamcov.cli import main

    outer = _fresh_kernels()
    _stub_task(monkeypatch, lambda: outer(np.arange(3.0)))
    out = tmp_path / "demo"
    assert main(["run", "--demo", "images", "--output", str(out), "--json"]) == 0
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert first["compile_seconds"] > 0.0
    assert json.loads((out / "result.json").read_text())["compile_seconds"] == first["compile_seconds"]
    assert main(["run", "--demo", "images", "--output", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["compile_seconds"] == 0.0

    class Clock:
        seconds = 12.345

    @contextlib.contextmanager
    def measured():
        yield Clock()

    monkeypatch.setattr(config, "compile_clock", measured)
    assert main(["run", "--demo", "images", "--output", str(out)]) == 0
    captured = capsys.readouterr()
    res = json.loads(captured.out.strip().splitlines()[-1])
    assert res["compile_seconds"] == 12.345
    later = ", which later runs load from numba's cache" if config.CACHE else ""
    assert f"{res['seconds']} s; 12.3 s compiling kernels{later})" in captured.err
    Clock.seconds = 0.4
    assert main(["run", "--demo", "images", "--output", str(out)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out.strip().splitlines()[-1])["compile_seconds"] == 0.4
    assert "compiling" not in captured.err
