"""Bad input: an output written into the folder that a pipeline's ``[data] source`` names.

A run's output folder inside that folder (``--output``, the pipeline's ``output``, ``run(output=...)``) added
the run's files to the archive or image folder, which every later run then found changed (a skeleton
archive's store refused) or unreadable (a class folder without images); predictions written into the archive
a skeleton store was ingested from did the same. Each is refused in one line before anything is written, as
``data.store`` inside ``data.source`` is (tests/test_bad_input.py), and the same command with the output
elsewhere runs.
"""
from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from cli_cases import assert_one_line_error, cli
from test_bad_input import IMAGE_PIPELINE, SKELETON_PIPELINE, image_folder, write_archive

pytestmark = pytest.mark.usefixtures("one_blas_thread")

def skeleton_pipeline(tmp: Path, output: Path) -> Path:
    """The skeleton pipeline on the generic archive ``tmp/a`` (ingested into ``tmp/g.zarr``), its output
    ``output``; train subjects 1 and 2 (the archive's subject parity is its class)."""
    text = (SKELETON_PIPELINE.format(out=output, store=tmp / "g.zarr")
            .replace("[data]\n", f'[data]\nsource = "{write_archive(tmp / "a")}"\nformat = "generic"\n')
            .replace('kind = "subject-parity"', 'kind = "subjects"\ntrain_subjects = [1, 2]'))
    path = tmp / "p.toml"
    path.write_text(text)
    return path


def refused(where: str, out: Path, source: Path, command: bool = True) -> str:
    """The pattern of the whole error line (``command``: with the command's ``streamcov run: error:``)."""
    source = source.resolve()
    return ("^streamcov run: error: " if command else "^") + re.escape(
        f"{where}: {out} lies inside {source}, the data.source folder this run reads; its files would join that "
        f"folder's data, and a store ingested from it would then be found out of date: choose an output folder "
        f"outside {source}") + "$"


def archive_files(tmp: Path) -> set:
    return {p.name for p in (tmp / "a").iterdir()}


def test_output_flag_inside_the_archive(tmp_path):
    pipeline, out = skeleton_pipeline(tmp_path, tmp_path / "o"), tmp_path / "a" / "run"
    before = archive_files(tmp_path)
    rc, err, _ = cli("run", pipeline, "--output", out, "--quiet")
    assert_one_line_error(rc, err, refused(f"--output {out}", out, tmp_path / "a"))
    assert archive_files(tmp_path) == before and not (tmp_path / "g.zarr").exists()
    rc, err, _ = cli("run", pipeline, "--output", tmp_path / "o2", "--quiet")
    assert rc == 0, err
    assert archive_files(tmp_path) == before
    rc, err, _ = cli("run", pipeline, "--quiet")   # the store is reused: its archive is unchanged
    assert rc == 0, err


def test_output_key_inside_the_archive(tmp_path):
    out = tmp_path / "a" / "run"
    rc, err, _ = cli("run", skeleton_pipeline(tmp_path, out), "--quiet")
    assert_one_line_error(rc, err, refused(f'output = "{out}"', out, tmp_path / "a"))
    assert not out.exists() and not (tmp_path / "g.zarr").exists()


def test_output_argument_inside_the_archive(tmp_path):
    from streamcov import load_config, run
    from streamcov.errors import ConfigError

    pipeline, out = skeleton_pipeline(tmp_path, tmp_path / "o"), tmp_path / "a"
    for given in (pipeline, load_config(pipeline)):   # a file, and a validated configuration
        with pytest.raises(ConfigError, match=refused(f"output={str(out)!r}", out, out, command=False)):
            run(given, output=out)
    assert archive_files(tmp_path) == {"index.csv", *(f"s{i:02d}.csv" for i in range(8))}
    assert not (tmp_path / "g.zarr").exists()


def test_output_inside_the_archive_with_store_flag(tmp_path):
    """``--store`` replaces ``[data] source``: the run reads the store alone, and its output may lie anywhere
    outside that store (the archive folder is not this run's data)."""
    pipeline = skeleton_pipeline(tmp_path, tmp_path / "o")
    assert cli("run", pipeline, "--quiet")[0] == 0   # writes g.zarr from the archive
    rc, err, _ = cli("run", pipeline, "--store", tmp_path / "g.zarr", "--output", tmp_path / "a" / "run", "--quiet")
    assert rc == 0, err


def test_image_output_inside_the_image_folder(tmp_path):
    folder = image_folder("i1", n=4, size=16)(SimpleNamespace(tmp=tmp_path))
    pipeline = tmp_path / "img.toml"
    pipeline.write_text(IMAGE_PIPELINE.format(out=tmp_path / "o", store=tmp_path / "i1.zarr").replace(
        "[data]\n", f'[data]\nsource = "{folder}"\n'))
    out = folder / "run"
    rc, err, _ = cli("run", pipeline, "--output", out, "--quiet")
    assert_one_line_error(rc, err, refused(f"--output {out}", out, folder))
    assert sorted(p.name for p in folder.iterdir()) == ["a", "b"] and not (tmp_path / "i1.zarr").exists()
    rc, err, _ = cli("run", pipeline, "--quiet")
    assert rc == 0, err


def test_predictions_inside_the_archive_of_the_store(tmp_path):
    assert cli("run", skeleton_pipeline(tmp_path, tmp_path / "o"), "--quiet")[0] == 0
    before, out = archive_files(tmp_path), tmp_path / "a" / "preds" / "p.csv"
    source = (tmp_path / "a").resolve()
    rc, err, _ = cli("predict", tmp_path / "o" / "model", tmp_path / "g.zarr", "--out", out)
    assert_one_line_error(rc, err, "^streamcov predict: error: " + re.escape(
        f"--out {out}: inside {source}, the archive the store was ingested from; the file would become part of "
        f"that archive, which every later run would then find changed: write the predictions outside {source}")
        + "$")
    assert archive_files(tmp_path) == before
    rc, err, _ = cli("predict", tmp_path / "o" / "model", tmp_path / "g.zarr", "--out", tmp_path / "p.csv")
    assert rc == 0 and (tmp_path / "p.csv").is_file(), err


# ------------------------------------------------ the output folder of a loaded configuration, "~", result paths
def _archive_pipeline(tmp: Path, output: str) -> Path:
    path = skeleton_pipeline(tmp, tmp / "unused")
    path.write_text(path.read_text().replace(f'output = "{tmp / "unused"}"', f'output = "{output}"'))
    return path


def test_api_output_of_a_loaded_configuration_is_filled_in_and_checked(tmp_path, monkeypatch):
    """``run(load_config(file), output=...)``: the folder's ``{name}`` filled in and a misspelt placeholder
    refused, as from the file or ``--output``; it made literal folders ``{name}_api`` and ``{nmae}``."""
    import streamcov as sc
    from streamcov.errors import ConfigError

    monkeypatch.chdir(tmp_path)
    cfg = sc.load_config(_archive_pipeline(tmp_path, "runs/{name}"))
    res = sc.run(cfg, output="runs/{name}_api", progress=False)
    assert Path(res["model_path"]) == tmp_path / "runs" / "bad_input_api" / "model"
    with pytest.raises(ConfigError, match=r'output = "runs/\{nmae\}": expected a folder whose only placeholder '
                                          r'is \{name\}'):
        sc.run(cfg, output="runs/{nmae}", progress=False)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["bad_input_api"]


def test_output_with_a_tilde_is_the_home_folder(tmp_path, monkeypatch):
    """``output = "~/..."`` is read as the input paths are (their ``~`` was expanded): kept as typed it made a
    folder named ``~`` in the working directory."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    code, err, out = cli("run", _archive_pipeline(tmp_path, "~/runs/{name}"), "--json", "--quiet")
    assert code == 0, err
    import json

    assert json.loads(out.strip().splitlines()[-1])["model_path"] == str(home / "runs" / "bad_input" / "model")
    assert (home / "runs" / "bad_input" / "result.json").is_file()
    assert list(work.iterdir()) == []


def test_a_tilde_without_a_home_is_one_line(tmp_path, monkeypatch):
    """``~`` where it names no home folder (HOME unset for a user the system does not name, a container's numeric
    user; ``~someone`` of no such user): an input path's ``~`` was pathlib's RuntimeError (an "internal error"
    traceback), and the output's was kept, making a folder named ``~`` in the working directory. One line naming
    the file's line or the flag, exit 2, nothing made."""
    import pwd

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("HOME")

    def nobody(uid):
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", nobody)
    file = _archive_pipeline(tmp_path, "~/runs/{name}")
    said = r": '~' names no home folder here \(HOME is not set, or the system knows no such user\); give the full path$"
    rc, err, _ = cli("run", file, "--quiet")
    assert_one_line_error(rc, err, rf"^streamcov run: error: {re.escape(str(file))}, line \d+: output = "
                                   rf'"~/runs/\{{name\}}"' + said)
    rc, err, _ = cli("run", file, "--quiet", "--output", tmp_path / "o", "--set", 'data.store="~/s.zarr"')
    assert_one_line_error(rc, err, r'^streamcov run: error: --set data.store="~/s.zarr": data.store = "~/s.zarr"'
                                   + said)
    monkeypatch.undo()
    rc, err, _ = cli("run", file, "--quiet", "--output", "~no-such-user-here/o")
    assert_one_line_error(rc, err, r"^streamcov run: error: --output ~no-such-user-here/o: output = "
                                   r"\"~no-such-user-here/o\": '~no-such-user-here' names no home folder here")
    assert list(work.iterdir()) == [] and not (tmp_path / "o").exists()


def test_result_paths_are_absolute(tmp_path, monkeypatch):
    """The result's paths are absolute, as its store: a model path read after a change of working directory
    (a notebook's ``os.chdir``) names the model, not a folder relative to where the run was."""
    import streamcov as sc

    (tmp_path / "w").mkdir()
    monkeypatch.chdir(tmp_path / "w")
    res = sc.run(_archive_pipeline(tmp_path, "runs/{name}"), progress=False)
    monkeypatch.chdir(tmp_path)
    for key in ("model_path", "predictions_path", "features_path", "store"):
        assert Path(res[key]).is_absolute() and Path(res[key]).exists(), (key, res[key])
    sc.predict(res["model_path"], res["store"], tmp_path / "again.csv", scheduler="synchronous")
    assert len((tmp_path / "again.csv").read_text().splitlines()) == 1 + 8   # a header, a line per sequence
