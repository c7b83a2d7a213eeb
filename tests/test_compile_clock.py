"""A run says how much of its time was numba compiling kernels (``compile_seconds``).

A first run with an empty numba cache spends 25-35 s of a 30-40 s demo compiling, inside ``fit_seconds`` or
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


def test_a_run_records_its_compilation_and_the_command_says_it(tmp_path, capsys, monkeypatch):
    """result["compile_seconds"]; the command's summary line says how much of the run's seconds it was, from 1 s
    up (a run whose kernels all came from the cache says nothing of it)."""
    import contextlib

    import streamcov._config as config
    from streamcov.cli import main

    class Clock:
        seconds = 12.345

    @contextlib.contextmanager
    def measured():
        yield Clock()

    out = tmp_path / "demo"
    monkeypatch.setattr(config, "compile_clock", measured)
    assert main(["run", "--demo", "images", "--output", str(out)]) == 0
    captured = capsys.readouterr()
    res = json.loads(captured.out.strip().splitlines()[-1])
    assert res["compile_seconds"] == 12.345
    assert json.loads((out / "result.json").read_text())["compile_seconds"] == 12.345
    assert f"{res['seconds']} s, 12.3 s of it compiling kernels, which later runs load from numba's cache)" \
        in captured.err
    Clock.seconds = 0.4
    assert main(["run", "--demo", "images", "--output", str(out)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out.strip().splitlines()[-1])["compile_seconds"] == 0.4
    assert "compiling" not in captured.err
