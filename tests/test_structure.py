"""The shape of the package: no import circles, one place per concept, a lean top level."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

PKG = REPO / "streamcov"


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every streamcov module ``path`` imports, at module level or inside functions."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("streamcov")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("streamcov"):
                continue
            # "from pkg import sub" imports the submodule when there is one
            subs = [f"{mod}.{a.name}" for a in node.names]
            found = [s for s in subs if (REPO / Path(*s.split("."))).with_suffix(".py").exists()
                     or (REPO / Path(*s.split(".")) / "__init__.py").exists()]
            out |= set(found) if found else {mod}
    return out


def import_graph() -> dict[str, set[str]]:
    mods = {module_name(p): p for p in PKG.rglob("*.py")}
    graph = {}
    for name, path in mods.items():
        targets = set()
        for t in imports_of(path):
            # importing a.b.c runs a and a.b first: the nearest existing module is the target
            while t not in mods and "." in t:
                t = t.rsplit(".", 1)[0]
            if t in mods and t != name:
                targets.add(t)
        graph[name] = targets
    return graph


def test_no_import_circle():
    """No module reaches itself through imports, counting imports inside functions
    (a circle hidden in function-local imports is still a circle). Imports of a
    package by its own submodules (``from . import x`` in ``pkg/x.py`` runs
    ``pkg/__init__``) count too; the top-level ``streamcov`` package resolves its
    API lazily (importlib), so it has no static edges."""
    graph = import_graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                cycle = stack[stack.index(m):] + [m]
                pytest.fail("import circle: " + " -> ".join(cycle))
            if m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)
    assert len(graph) > 40   # the walk saw the whole package


def test_kernels_and_descriptors_do_not_reach_the_engine_or_the_tasks():
    """The three layers: numba kernels, public functions and estimators, then the engine and the tasks."""
    graph = import_graph()
    lower = [m for m in graph if m.startswith(("streamcov._kernels", "streamcov.linalg", "streamcov.kernels",
                                               "streamcov.descriptors", "streamcov.features"))]
    for m in lower:
        upper = [t for t in graph[m] if t.startswith(("streamcov.stream", "streamcov.tasks", "streamcov.cli"))]
        assert not upper, f"{m} imports {upper}"
    for m in (m for m in graph if m.startswith("streamcov._kernels")):
        assert all(t.startswith(("streamcov._kernels", "streamcov._config")) for t in graph[m]), m


def test_import_streamcov_is_cheap():
    code = ("import sys, streamcov; heavy = [m for m in ('numba', 'dask', 'zarr', 'sklearn', 'scipy', 'pydantic')"
            " if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_one_did_you_mean():
    """Every message that refuses an unknown name offers the closest one through errors.did_you_mean: the one
    place that imports difflib (seven modules had each worded the hint their own way)."""
    users = sorted(str(p.relative_to(REPO)) for p in PKG.rglob("*.py") if "difflib" in p.read_text())
    assert users == ["streamcov/errors.py"]


def _parallel_kernels() -> set[str]:
    """Names of the _kernels functions that run a parallel region: decorated ``njit(parallel=True)``, or calling
    one (a jitted entry point around a parallel kernel), to a fixed point."""
    defs, calls = {}, {}
    for path in (PKG / "_kernels").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                parallel = any(isinstance(d, ast.Call) and any(k.arg == "parallel" and getattr(k.value, "value", 0)
                                                               for k in d.keywords) for d in node.decorator_list)
                defs[node.name] = defs.get(node.name, False) or parallel
                calls[node.name] = {c.func.id for c in ast.walk(node)
                                    if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
    par = {n for n, p in defs.items() if p}
    while True:
        more = {n for n, called in calls.items() if called & par} - par
        if not more:
            return par
        par |= more


def test_every_python_call_of_a_parallel_kernel_goes_through_run_parallel():
    """numba's workqueue layer aborts the process when two threads run parallel kernels at once; the kernels take
    turns under it only if every call from Python goes through _config.run_parallel (a call made directly would
    abort again under concurrent use)."""
    par = _parallel_kernels()
    # decorated ones, and stack_vec, a jitted entry point around the parallel _stack
    assert {"frames_log_vec", "_stack", "stack_vec", "segment_moments", "ragged_covariances"} <= par
    direct = []
    for path in PKG.rglob("*.py"):
        if "_kernels" in path.parts:
            continue
        tree = ast.parse(path.read_text())
        modules, names = set(), set()   # aliases of _kernels modules, kernels imported by name
        for node in ast.walk(tree):
            # relative (from .._kernels import spd) or absolute (from streamcov._kernels import spd, import
            # streamcov._kernels.spd as ks)
            if isinstance(node, ast.ImportFrom) and node.module:
                module = node.module.removeprefix("streamcov.")
                if module == "_kernels":
                    modules |= {a.asname or a.name for a in node.names}
                elif module.startswith("_kernels."):
                    names |= {a.asname or a.name for a in node.names if a.name in par}
            elif isinstance(node, ast.Import):
                modules |= {a.asname for a in node.names if a.asname and a.name.startswith("streamcov._kernels.")}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if ((isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in modules
                 and f.attr in par) or (isinstance(f, ast.Name) and f.id in names)):
                direct.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not direct, direct


def test_one_version():
    """pyproject.toml said 0.1.0 and streamcov.__version__ 0.2.0: the installed metadata is now read from the one
    place the version is written (setuptools' dynamic version, from the module's text without importing it)."""
    import importlib.metadata
    import tomllib

    import streamcov

    meta = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    assert "version" not in meta["project"] and meta["project"]["dynamic"] == ["version"]
    assert meta["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "streamcov.__version__"}
    assert importlib.metadata.version("streamcov") == streamcov.__version__


def test_streamcov_version_flag(capsys):
    """`streamcov --version` was refused ("the following arguments are required: command", exit 2); it says the
    version of the one place it is written."""
    import streamcov
    from streamcov.cli import main

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"streamcov {streamcov.__version__}\n"


def test_the_source_distribution_covers_every_tracked_file():
    """Without MANIFEST.in setuptools put into the sdist only the package and tests/test*.py: 41 of the test
    modules could not be imported from it (no conftest.py, cli_cases.py), and no pipeline file, data note, doc or
    benchmark was there. Every tracked file is now covered by a line of MANIFEST.in (or is the package, or
    pyproject.toml, which setuptools always takes), and none is left out by its exclusions."""
    import fnmatch

    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: no list of tracked files")
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    grafts, includes, excludes = [], [], []
    for line in (REPO / "MANIFEST.in").read_text().splitlines():
        words = line.split("#")[0].split()
        if words:
            {"graft": grafts, "include": includes, "global-exclude": excludes}[words[0]].extend(words[1:])
    assert grafts and includes and excludes

    def covered(path):
        return (path.startswith("streamcov/") or path == "pyproject.toml" or path in includes
                or any(path.startswith(g.rstrip("/") + "/") for g in grafts))

    def excluded(path):
        return any(fnmatch.fnmatch(part, pat) for part in path.split("/") for pat in excludes)

    assert [p for p in tracked if not covered(p)] == []
    assert [p for p in tracked if excluded(p)] == []
    assert {"tests/conftest.py", "pipelines/msr_action3d.toml", "data/utkinect_splits.toml"} <= set(tracked)


def test_every_module_that_compiles_kernels_stamps_them_by_their_sources_first():
    """A kernel's numba cache is stamped with every kernel module (streamcov._config.stamp_kernels_by_their_sources)
    only if the stamp is in place when the kernel is decorated: every module that compiles kernels lies in
    _kernels (whose __init__ places it) or calls it before its first njit, and is among the modules the stamp
    digests (their text names njit or intrinsic)."""
    pkg = REPO / "streamcov"
    assert "stamp_kernels_by_their_sources()" in (pkg / "_kernels" / "__init__.py").read_text()
    compiling = []
    for path in sorted(pkg.rglob("*.py")):
        text = path.read_text()
        first = min((i for i in (text.find("@njit"), text.find("@intrinsic"), text.find("= njit(")) if i >= 0),
                    default=-1)
        if first < 0:
            continue
        compiling.append(path)
        if path.parent != pkg / "_kernels":
            call = text.find("\nstamp_kernels_by_their_sources()")
            assert 0 <= call < first, f"{path.relative_to(REPO)} compiles kernels before stamping them"
    assert len(compiling) >= 10 and pkg / "data" / "readers" / "_fastparse.py" in compiling
