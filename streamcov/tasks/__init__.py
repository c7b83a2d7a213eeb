"""Tasks: every experiment ``streamcov run`` can run.

* :mod:`.registry`: the tasks, each a schema and a runner with one signature;
* :mod:`.schema` and :mod:`.config`: the one schema and the one loader of pipeline files;
* :mod:`.runner`: :func:`run`, for the command line and the Python API;
* runners: :mod:`.classify` (skeletons and images through the engine),
  :mod:`.image_eval` (paper 004 in memory), :mod:`.tgp` (paper 003), :mod:`.study` (paper 000, Figure 1).
"""
from .registry import TASKS, RunContext, TaskSpec, get_task
from .runner import run

__all__ = ["RunContext", "TASKS", "TaskSpec", "get_task", "run"]
