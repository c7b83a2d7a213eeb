"""How much memory the learners may fill with training rows: the one rule of ``[model] cache``."""
from __future__ import annotations

import os

# cache = "auto" keeps the training rows in memory when they take at most this share of it
CACHE_FRACTION = 0.25
CACHE_MODES = ("auto", "memory", "stream")


def available_memory() -> int:
    """Bytes of memory available to this process: the machine's ``MemAvailable``, or less where a container's
    limit leaves less (:func:`streamcov._config.container_room`; inside a container ``/proc/meminfo`` shows the
    host's memory, and rows cached by that figure had the container's processes killed) or ``ulimit -v`` allows
    less (:func:`streamcov._config.total_memory`)."""
    from .._config import container_room, total_memory

    free = _machine_available()
    for cap in (container_room(), total_memory() or None):
        if cap is not None:
            free = min(free, cap)
    return free


def _machine_available() -> int:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:  # pragma: no cover - not Linux
        pass
    try:  # pragma: no cover
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return 1 << 30


def memory_budget(runtime=None) -> int:
    """Bytes the training rows may take: :data:`CACHE_FRACTION` of the workers' memory limits (on a
    cluster) or of the memory available on this machine."""
    total = 0
    if runtime is not None and getattr(runtime, "client", None) is not None:
        workers = runtime.client.scheduler_info(n_workers=-1)["workers"].values()
        total = sum(int(w.get("memory_limit") or 0) for w in workers)
    return int(CACHE_FRACTION * (total or available_memory()))


def use_cache(cache: str, nbytes: int, runtime=None) -> bool:
    """``cache`` is ``memory``, or ``auto`` and ``nbytes`` fit in :func:`memory_budget`."""
    if cache not in CACHE_MODES:
        raise ValueError(f"cache must be one of {CACHE_MODES}, got {cache!r}")
    return cache == "memory" or (cache == "auto" and nbytes <= memory_budget(runtime))
