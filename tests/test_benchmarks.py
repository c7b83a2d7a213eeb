"""The benchmark scripts still run: each, with its smallest options, ends with its JSON line.

Nothing else runs them, and they reach into the kernels' private signatures and the pipeline files' keys: two
had stopped running unnoticed (a kernel that lost an argument, a default candidate the lbfgs files refuse).
Speed figures come from the scripts themselves, run by hand; this only checks that they run.
"""
import json
import os
import subprocess
import sys

import pytest

from conftest import DATA, REPO

pytestmark = pytest.mark.slow


def _run(args, tmp_path):
    env = {**os.environ, "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, *[str(a) for a in args]], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("args", [
    ["spd_log_kernels.py", "--n", "20", "--repeats", "1"],
    ["spd_log_kernels.py", "--lowrank", "--n", "16", "--repeats", "1"],
    ["pass_kernel.py", "--repeats", "1", "--loads", "1"],
    ["feature_maps.py", "--quick"],
    ["featurize_vs_pyriemann.py", "--quick"],
    ["synth_speed.py"],
    ["store_read.py", "--rows", "2000", "--dim", "100", "--repeats", "1", "--workdir", "{tmp}"],
], ids=lambda a: " ".join(a))
def test_a_benchmark_runs(args, tmp_path):
    if args[0] == "featurize_vs_pyriemann.py":   # the reference it times itself against: the extra `bench`
        pytest.importorskip("pyriemann", reason="pyriemann (pip install streamcov[bench]) is what this benchmark "
                                                "compares with")
    out = _run([REPO / "benchmarks" / args[0], *[a.format(tmp=tmp_path) for a in args[1:]]], tmp_path)
    assert isinstance(out, dict) and out


@pytest.mark.parametrize("args", [
    ["learner_cv.py", "--dataset", "florence", "--seeds", "1", "--nu", "200", "--data", "{data}"],
    ["float32_path.py", "--seeds", "1", "--nu", "200", "--data", "{data}"],
], ids=lambda a: a[0])
def test_a_benchmark_on_real_data_runs(args, tmp_path):
    need = {"learner_cv.py": "florence3d", "float32_path.py": "msr_action3d"}[args[0]]
    if not (DATA / need / "raw").is_dir():
        pytest.skip(f"{DATA / need / 'raw'} is not here (STREAMCOV_DATA)")
    out = _run([REPO / "benchmarks" / args[0], *[a.format(data=DATA) for a in args[1:]]], tmp_path)
    assert isinstance(out, dict) and out
