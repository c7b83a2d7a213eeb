"""Experiment tasks run by ``streamcov run PIPELINE.toml``.

Each module exposes ``TASKS = {name: fn}`` with
``fn(cfg: dict, out_dir: pathlib.Path, progress: bool) -> dict``: ``cfg`` is the
parsed pipeline file and the returned dict is the JSON result.
"""
