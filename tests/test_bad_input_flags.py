"""Bad input: settings dropped or misread between a pipeline file, ``--set`` and the other flags.

Each case is what a user typed and got silently (a setting ignored, another input used, part of a value
dropped) or could not fix; now one ``streamcov <cmd>: error: ...`` line, or a note naming what is not read.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_cases import assert_one_line_error, cli
from conftest import REPO
from test_bad_input import Env, shared  # noqa: F401 - the module's stores and model, built once

pytestmark = pytest.mark.usefixtures("one_blas_thread")


@pytest.fixture
def env(shared, tmp_path):  # noqa: F811
    return Env(tmp_path, shared)


def small(env, extra: str = "", **top) -> Path:
    """A skeleton-classification file on the shared synthetic store."""
    head = "".join(f"{k} = {v}\n" for k, v in top.items())
    text = (f'task = "skeleton-classification"\nname = "small"\noutput = "{env.tmp / "out"}"\n{head}'
            f'[data]\nstore = "{env.shared["synth"]}"\n[features]\nn_components = 20\n[model]\nepochs = 2\n{extra}')
    f = env.tmp / "small.toml"
    f.write_text(text)
    return f


@pytest.mark.parametrize("sets, key", [
    (['data.source="/nowhere/msr"', 'data.format="msr-action3d"'], "source"),
    (["data.synthetic.n_sequences=5"], "synthetic"),
    (['data.options={subset="cvpr12"}'], "options")])
def test_store_flag_beside_a_set_of_what_it_replaces_is_refused(env, sets, key):
    """--store replaces the file's source and its reader's settings; a --set of one of them beside it was dropped
    without a word (the run read the store, exit 0)."""
    argv = ["run", small(env), "--quiet", "--store", env.shared["synth"], *[a for s in sets for a in ("--set", s)]]
    rc, err, _ = cli(*argv)
    assert_one_line_error(rc, err, rf"^streamcov run: error: --set data\.{key}\S* --store \S+: --store replaces "
                                   rf"data\.{key} \(the store is read, not the source\); give one$")


def test_a_split_file_given_by_set_is_looked_for_in_the_working_directory_first(env, monkeypatch):
    """split.file from a --set is a path the user typed where they stand: the file's folder was searched first,
    and a splits file of the same name there was used instead, without a word. A path typed on the command line
    is the working directory's alone, as --store's is (data.store and data.source alike); one written in the
    pipeline file is looked for there too."""
    from streamcov.tasks.config import load_config

    here, there = env.tmp / "cwd", env.tmp / "p"
    here.mkdir()
    there.mkdir()
    (here / "sp.toml").write_text("# the one typed\n")
    (there / "sp.toml").write_text("# another\n")
    f = there / "a.toml"
    f.write_text(small(env).read_text())
    monkeypatch.chdir(here)
    cfg = load_config(f, ['split.kind="subject-splits-file"', 'split.file="sp.toml"'], note=lambda m: None)
    assert cfg.split.file == "sp.toml" and os.path.samefile(cfg.split.file, here / "sp.toml")
    (here / "sp.toml").unlink()   # not the file's folder: the path typed names none here, and a note says so
    notes = []
    cfg = load_config(f, ['split.kind="subject-splits-file"', 'split.file="sp.toml"'], note=notes.append)
    assert cfg.split.file == "sp.toml" and not os.path.exists(cfg.split.file)
    assert notes == [f"overrides item 'split.file=\"sp.toml\"': sp.toml is not in the working directory, where a "
                     f"path given so is looked for; {there / 'sp.toml'} (from the pipeline file's folder or the one "
                     f"above it) is not used: give {there / 'sp.toml'} to use it"]
    f.write_text(small(env).read_text() + '[split]\nkind = "subject-splits-file"\nfile = "sp.toml"\n')
    assert os.path.samefile(load_config(f, note=lambda m: None).split.file, there / "sp.toml")   # written in it


@pytest.mark.parametrize("learner, what", [
    ("lbfgs", "passes over the feature store in Dask tasks"), ("exact-svm", "holds the descriptors in memory")])
def test_prefetch_is_said_to_be_unread_by_a_learner_that_reads_no_blocks_ahead(env, learner, what):
    """dask.prefetch counts the blocks read ahead of the SGD learner; with lbfgs (every shipped skeleton file's
    learner) or the exact SVM it was accepted and ignored."""
    from streamcov.tasks.config import load_config

    notes = []
    sets = ["dask.prefetch=64", f'model.learner="{learner}"'] + (['features.map="none"'] if learner == "exact-svm"
                                                                  else [])
    load_config(small(env), sets, note=notes.append)
    assert (f"dask.prefetch (overrides item 'dask.prefetch=64') is not read: it counts the blocks read ahead of the "
            f"SGD learner, and model.learner = \"{learner}\" {what} (overrides item 'model.learner=\"{learner}\"')"
            in notes), notes
    notes.clear()
    load_config(small(env), ["dask.prefetch=64"], note=notes.append)   # the SGD learner reads it
    assert not [n for n in notes if "prefetch" in n]


def test_a_pose_task_with_a_store_and_a_source_is_refused_and_store_replaces_the_files_source(env):
    """tgp-pose read data.store and ignored data.source beside it (another dataset's archive, unchecked); the
    shipped file names a source, so --store replaces it there."""
    from streamcov.errors import ConfigError
    from streamcov.tasks.config import load_config

    f = env.tmp / "pose.toml"
    f.write_text(f'task = "tgp-pose"\n[data]\nstore = "{env.shared["synth"]}"\nsource = "/elsewhere/raw"\n')
    with pytest.raises(ConfigError, match=r"^\S+pose\.toml, line 4: data\.source \(the MSR-Action3D archive\) and "
                                          r"data\.store \(a store of it\) are two sources of frames, and the store "
                                          r"would be read alone: give one of them \(a file's data\.source is "
                                          r"replaced by `streamcov run FILE --store STORE`\)$"):
        load_config(f)
    cfg = load_config(REPO / "pipelines" / "msr_pose_tgp.toml", store=env.shared["synth"], note=lambda m: None)
    assert cfg.data.store == str(env.shared["synth"]) and cfg.data.source_read is None   # the store is read


def test_an_empty_table_that_would_create_a_table_is_taken(env):
    """--set TABLE={} is refused where the file has that table (nothing would change: test_bad_input's
    set-key-and-an-empty-table) but creates a table of defaults where it has none."""
    from streamcov.tasks.config import load_config

    cfg = load_config(small(env), ["dask={}"], note=lambda m: None)
    assert cfg.dask.prefetch == 2


def test_switching_the_map_by_set_drops_the_files_own_keys_of_the_old_map(env):
    """A map's own key in the file (rff-blocks' block_size) stayed when --set features.map switched to a map
    without it, and was refused: a --set cannot remove a file's key, so the switch could not be made. It is
    dropped with a note, as a switched learner's keys are; the refusal's list of keys now holds sigma."""
    from streamcov.errors import ConfigError
    from streamcov.tasks.config import load_config

    f = small(env)
    f.write_text(f.read_text().replace("n_components = 20\n", 'n_components = 20\nmap = "rff-blocks"\n'
                                                              "block_size = 16\n"))
    notes = []
    cfg = load_config(f, ['features.map="rff"'], note=notes.append)
    assert "block_size" not in (cfg.features.model_extra or {})
    assert notes == ["features.block_size (" + str(f) + ") does not apply to features.map = \"rff\" from overrides "
                     "item 'features.map=\"rff\"'; dropped"], notes
    with pytest.raises(ConfigError, match=r"features\.block_size is not a parameter of RBFSampler; accepted: "
                                          r"bandwidth, fit_sample, n_components, sigma$"):
        load_config(f, ['features.map="rff"', "features.block_size=4"], note=lambda m: None)
    # strict as the declared keys: true was taken as a block size of 1
    with pytest.raises(ConfigError, match=r"features\.block_size = true: expected a number \(as "
                                          r"GaussianRandomFeatures's block_size, default 4096\)$"):
        load_config(f, ["features.block_size=true"], note=lambda m: None)


@pytest.mark.parametrize("nus, why", [("1_0,50", r"got '1_0'; write it without '_'"),
                                      ("10,\u0665\u0660", r"got '\u0665\u0660'; type the digits as ASCII 0-9"),
                                      ("10,0", r"got 0")])
def test_study_nus_are_ascii_integers_as_every_integer_flag(tmp_path, nus, why):
    rc, err, _ = cli("study", "kernel-approx", "--nus", nus, "--datasets", "msr", "--data", tmp_path,
                     "--out", tmp_path / "x")
    assert_one_line_error(rc, err, rf"^streamcov study: error: --nus {nus}: expected a comma list of integers >= 1, "
                                   rf"e\.g\. 50,500,5000 \(expected an integer >= 1, {why}\)$")


def test_a_set_scheduler_that_reads_no_workers_drops_the_files_workers(env):
    """--set dask.scheduler="synchronous" on a file with dask.workers: refused naming workers, which a --set
    cannot remove (an error the user could not fix); --scheduler synchronous dropped them with a note. The
    --set does the same now."""
    from streamcov.tasks.config import load_config

    notes = []
    cfg = load_config(small(env, "[dask]\nworkers = 2\n"), ['dask.scheduler="synchronous"'], note=notes.append)
    assert cfg.dask.scheduler == "synchronous" and cfg.dask.workers is None
    assert any(n.startswith("dask.workers (") and "does not apply to dask.scheduler = \"synchronous\" from "
               "overrides item 'dask.scheduler=\"synchronous\"' (a synchronous run has one thread); dropped" in n
               for n in notes), notes


def test_key_lines_skip_multi_line_values_and_read_quoted_and_dotted_keys():
    """The lines errors are reported at: a key = value inside a multi-line string or array was taken for a key
    (the error pointed into the name's text), a single-quoted key was reported at its table's header, a dotted
    key under a table at the header too."""
    from streamcov.tasks.config import key_lines

    text = ('name = """demo\n[model]\nepochs = 1\n"""\ntask = "x"\n[model]\n\'epochs\' = 2.5\nx = [\n  [1, 2],\n'
            '  [3, 4],\n]\n[data]\nmodel.epochs = 2.5\ns = "a # b [ c"  # [\nz = 4\n')
    lines = key_lines(text)
    assert lines == {("name",): 1, ("task",): 5, ("model",): 6, ("model", "epochs"): 7, ("model", "x"): 8,
                     ("data",): 12, ("data", "model"): 13, ("data", "model", "epochs"): 13, ("data", "s"): 14,
                     ("data", "z"): 15}


def test_a_set_value_with_a_line_break_is_refused(env):
    """--set $'model.epochs=3\\nseed = 5': the second line was a key of its own, dropped (seed stayed 0)."""
    rc, err, _ = cli("run", small(env), "--quiet", "--set", "model.epochs=3\nseed = 5")
    assert_one_line_error(rc, err, r"^streamcov run: error: --set model\.epochs=3\\nseed = 5: the value holds a line "
                                   r"break followed by more TOML \(seed\); give one value per --set$")


@pytest.mark.parametrize("key, value, what, why", [
    ("output", '" "', "a folder", "not a blank text"), ("name", '" "', "a name", "not a blank text"),
    ("name", '"a\\tb"', "a name", r"without control characters \(it holds '\\t'\)"),
    ("output", '"runs/a\\nb"', "a folder", r"without control characters \(it holds '\\n'\)")])
def test_blank_or_control_characters_in_folder_names_are_refused(env, key, value, what, why):
    """output = " " made a folder named by a space (--output " " is refused as an empty path), a tab or a line
    break in the name a folder no one can type."""
    rc, err, _ = cli("run", small(env), "--quiet", "--set", f"{key}={value}")
    assert_one_line_error(rc, err, rf"^streamcov run: error: --set {key}=\S*.*: {key} = .*: expected {what}, {why}$"
                          if "blank" in why else rf"^streamcov run: error: .*expected {what} {why}$")


def test_exclude_maps_typed_on_a_folder_without_maps_is_refused(tmp_path):
    """--exclude maps given by the user on a folder with no maps folder was accepted (the default's exemption,
    for ETH-80's segmentation maps), though --help says a name that matches no folder is refused."""
    import numpy as np
    from PIL import Image

    for c in "ab":
        (tmp_path / "imgs" / c).mkdir(parents=True)
        for i in range(2):
            Image.fromarray(np.full((8, 8), 40 * i + 9, dtype=np.uint8)).save(tmp_path / "imgs" / c / f"{i}.png")
    rc, err, _ = cli("ingest", "images", "--format", "folders", tmp_path / "imgs", tmp_path / "s.zarr",
                     "--exclude", "maps", "--quiet")
    assert_one_line_error(rc, err, r"^streamcov ingest: error: --exclude maps, or data\.exclude = \"maps\" in a "
                                   r"pipeline: no folder of that name under \S+imgs; check the name")
    assert not (tmp_path / "s.zarr").exists()
    assert cli("ingest", "images", "--format", "folders", tmp_path / "imgs", tmp_path / "s.zarr", "--quiet")[0] == 0
    # class folders that are links to folders holding maps: the scan follows links, and finds them
    (tmp_path / "real" / "a" / "maps").mkdir(parents=True)
    (tmp_path / "real" / "b").mkdir()
    for d in ("a", "a/maps", "b"):
        for i in range(2):
            Image.fromarray(np.full((8, 8), 40 * i + 9, dtype=np.uint8)).save(tmp_path / "real" / d / f"{i}.png")
    (tmp_path / "links").mkdir()
    for c in "ab":
        (tmp_path / "links" / c).symlink_to(tmp_path / "real" / c)
    rc, err, out = cli("ingest", "images", "--format", "folders", tmp_path / "links", tmp_path / "l.zarr",
                       "--exclude", "maps", "--quiet")
    assert rc == 0 and '"excluded": 2' in out, err


def test_python_dash_m_streamcov_is_the_command():
    """``python -m streamcov`` failed: no streamcov.__main__."""
    done = subprocess.run([sys.executable, "-m", "streamcov", "run", "--set", "x"], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == "streamcov run: error: --set x: expected key=value, e.g. features.n_components=2000"


@pytest.mark.parametrize("argv, where", [
    (["run", "p.toml", "--sett", "x=1"], "streamcov run"),
    (["ingest", "skeleton", "--format", "generic", "a", "b", "--bogus"], "streamcov ingest skeleton"),
    (["study", "kernel-approx", "--quik"], "streamcov study kernel-approx")])
def test_an_unknown_flag_is_refused_by_the_subcommand_it_was_typed_to(argv, where):
    """It was refused by the top level, "streamcov: error: unrecognized arguments ... (see `streamcov --help`)",
    whose help does not list the subcommand's flags."""
    rc, err, _ = cli(*argv)
    bad = " ".join(argv[-2:] if argv[-1] == "x=1" else argv[-1:])
    assert_one_line_error(rc, err, rf"^{where}: error: unrecognized arguments: {bad} \(see `{where} --help`\)$")
