"""The registry of tasks: every experiment ``streamcov run`` can run, with one signature.

A task is a schema (:mod:`.schema`) and a runner ``run(cfg, ctx) -> dict``:
``cfg`` is the validated pipeline (:func:`.config.load_config`), ``ctx`` a
:class:`RunContext` (output folder, scheduler, workers, progress, resume),
the returned dict the JSON result. :func:`run` loads, validates, runs and
writes ``result.json``; the command line and the Python API both call it.
Runners are imported only when their task runs.
"""
from __future__ import annotations

import importlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError


@dataclass(frozen=True)
class TaskSpec:
    """A registered task.

    ``store_key``: the table key that ``--store`` replaces (None: the task
    generates its own data); ``store_replaces``: keys that ``--store`` makes
    void (a source to ingest, a generator).
    """

    name: str
    schema_name: str
    runner: str
    summary: str
    store_key: str | None = "store"
    store_replaces: tuple = ("source", "synthetic")

    def schema(self):
        from . import schema
        return getattr(schema, self.schema_name)

    def run(self, cfg, ctx) -> dict:
        module, fn = self.runner.split(":")
        return getattr(importlib.import_module(module, __name__), fn)(cfg, ctx)


TASKS = {t.name: t for t in (
    TaskSpec("skeleton-classification", "SkeletonClassification", ".classify:run_skeleton",
             "skeleton sequences -> log-covariance descriptors -> feature map -> learner"),
    TaskSpec("image-stream-classification", "ImageStreamClassification", ".classify:run_image_stream",
             "images out of core: covariance operators -> random features -> incremental SGD"),
    TaskSpec("image-classification", "ImageClassification", ".image_eval:run_image_classification",
             "paper 004's methods in memory with nested cross-validation"),
    TaskSpec("tgp-sshape", "TGPSShape", ".tgp:run_sshape", "paper 003: the S-shape inverse problem",
             store_key=None),
    TaskSpec("tgp-digits", "TGPDigits", ".tgp:run_digits", "paper 003: digits centre reconstruction",
             store_key=None),
    TaskSpec("tgp-pose", "TGPPose", ".tgp:run_pose", "paper 003: MSR-Action3D arm joints from the body"),
    TaskSpec("kernel-approx-study", "KernelApproxStudy", ".study:run_study",
             "paper 000, Figure 1: every feature map against nu", store_key=None),
)}


def get_task(name, where: str = "pipeline") -> TaskSpec:
    if name not in TASKS:
        import difflib

        close = difflib.get_close_matches(str(name), list(TASKS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"{where}: unknown task {name!r}{hint} (known: {', '.join(TASKS)})")
    return TASKS[name]


@dataclass
class RunContext:
    """How a task runs: where it writes, on which Dask scheduler, with progress bars or not."""

    output: Path
    scheduler: str | None = None     # None: the pipeline's [dask] scheduler
    workers: int | None = None
    progress: bool = False
    resume: bool = False
    extra: dict = field(default_factory=dict)


def run(pipeline, *, overrides=(), store=None, output=None, scheduler=None, workers=None,
        progress: bool = False, resume: bool = False, text: str | None = None, flags: dict | None = None) -> dict:
    """Run a pipeline file, a dict or a validated configuration; returns its result.

    The result is also written to ``<output>/result.json``.

    Parameters
    ----------
    pipeline : path, dict or a configuration from :func:`.config.load_config`
    overrides : sequence of str
        ``section.key=value`` assignments, as ``--set``.
    store : path, optional
        Run on this store instead of the pipeline's input (``--store``).
    output : path, optional
        Output folder (default: the pipeline's ``output``).
    scheduler, workers :
        ``threads`` (default), ``synchronous``, ``local-cluster`` (``workers``
        single-threaded worker processes) or a scheduler address
        ``tcp://HOST:PORT``; ``workers`` alone means a LocalCluster of that many.
    progress, resume : bool
        Progress bars; continue an interrupted run from its checkpoints.
    """
    from .config import load_config

    if hasattr(pipeline, "task") and hasattr(pipeline, "model_dump"):
        cfg = pipeline if output is None else pipeline.model_copy(update={"output": str(output)})
    else:
        sets = list(overrides)
        if output is not None:
            sets.append(f'output="{Path(output)}"')
        cfg = load_config(pipeline if text is None else None, sets, store, text=text, flags=flags)
    spec = get_task(cfg.task)
    out = Path(cfg.output)
    out.mkdir(parents=True, exist_ok=True)
    if workers is not None and scheduler is None:
        scheduler = "local-cluster"
    ctx = RunContext(output=out, scheduler=scheduler, workers=workers, progress=progress, resume=resume)
    t0 = time.perf_counter()
    result = spec.run(cfg, ctx)
    result = {"task": cfg.task, **result}
    result.setdefault("seconds", round(time.perf_counter() - t0, 3))
    (out / "result.json").write_text(json.dumps(result, indent=2, default=json_default) + "\n")
    return result


def json_default(o):
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


__all__ = ["RunContext", "TASKS", "TaskSpec", "get_task", "run"]
