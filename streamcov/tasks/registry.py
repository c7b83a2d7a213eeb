"""The registry of tasks: every experiment ``streamcov run`` can run, with one signature.

A task is a schema (:mod:`.schema`) and a runner ``run(cfg, ctx) -> dict``:
``cfg`` is the validated pipeline (:func:`.config.load_config`), ``ctx`` a
:class:`RunContext` (output folder, scheduler, workers, progress, resume),
the returned dict the JSON result. Runners are imported only when their task
runs.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError, did_you_mean


@dataclass(frozen=True)
class TaskSpec:
    """A registered task.

    ``store_key``: the ``[data]`` key that ``--store`` replaces (None: the
    task generates its own data); ``store_replaces``: keys that ``--store``
    makes void (a source to ingest, a generator), with the reader keys of
    the task's ``[data]`` table (:meth:`store_voids`); ``store_sets``: keys it sets;
    ``store_kind``: the kind of store it reads (``skeleton`` or ``image``).
    """

    name: str
    schema_name: str
    runner: str
    summary: str
    store_key: str | None = "store"
    store_replaces: tuple = ("source", "synthetic")
    store_sets: tuple = ()
    store_kind: str | None = "skeleton"

    def schema(self):
        from . import schema
        return getattr(schema, self.schema_name)

    def store_voids(self) -> tuple:
        """The ``[data]`` keys ``--store`` removes: :attr:`store_replaces` and the ``READER_KEYS`` of the
        task's data table (they only say how to read ``source``)."""
        data = self.schema().model_fields.get("data")
        return (*self.store_replaces, *getattr(data.annotation if data else None, "READER_KEYS", ()))

    def run(self, cfg, ctx) -> dict:
        module, fn = self.runner.split(":")
        return getattr(importlib.import_module(module, __package__), fn)(cfg, ctx)


TASKS = {t.name: t for t in (
    TaskSpec("skeleton-classification", "SkeletonClassification", ".classify:run_skeleton",
             "skeleton sequences -> log-covariance descriptors -> feature map -> learner"),
    TaskSpec("image-stream-classification", "ImageStreamClassification", ".classify:run_image_stream",
             "images out of core: covariance operators -> random features -> incremental SGD",
             store_kind="image"),
    TaskSpec("image-classification", "ImageClassification", ".image_eval:run_image_classification",
             "paper 004's methods in memory with nested cross-validation", store_sets=(("format", "store"),),
             store_replaces=("source", "textures", "patch"), store_kind="image"),
    TaskSpec("tgp-sshape", "TGPSShape", ".tgp:run_sshape", "paper 003: the S-shape inverse problem",
             store_key=None, store_kind=None),
    TaskSpec("tgp-digits", "TGPDigits", ".tgp:run_digits", "paper 003: digits centre reconstruction",
             store_key=None, store_kind=None),
    TaskSpec("tgp-pose", "TGPPose", ".tgp:run_pose", "paper 003: MSR-Action3D arm joints from the body",
             store_replaces=("source",)),
    TaskSpec("kernel-approx-study", "KernelApproxStudy", ".study:run_study",
             "paper 000, Figure 1: every feature map against nu", store_key=None, store_kind=None),
)}


def get_task(name, where: str = "pipeline") -> TaskSpec:
    if not isinstance(name, str):   # a list or a table would not look up: said as typed (TOML, not Python)
        from ..errors import toml_value

        raise ConfigError(f"{where}: task = {toml_value(name)}: expected the name of a task as a string (one of "
                          f"{', '.join(TASKS)})")
    if name not in TASKS:
        raise ConfigError(f"{where}: unknown task {name!r}{did_you_mean(name, TASKS)}; the tasks are "
                          f"{', '.join(TASKS)}")
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


__all__ = ["RunContext", "TASKS", "TaskSpec", "get_task"]
