"""Files written whole or not at all (:func:`atomic_write`), and the temporaries a killed writer leaves.

Below the engine and the descriptors alike: a model, a checkpoint, a run's result, a predictions CSV and the
ConvNet's weight cache are all written through :func:`atomic_write`.
"""
from __future__ import annotations

import os
import re
import stat
import tempfile
from pathlib import Path

from .errors import ConfigError


def _umask() -> int:
    """The process's umask, read without changing it (``os.umask`` sets it while it reads: a thread creating
    a file meanwhile would get the wrong mode)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


#: the suffix of :func:`atomic_write`'s temporary files (named ``.<target>.<8 characters>`` before it)
TMP_SUFFIX = ".streamcov-tmp"


def temporary_prefix(path: Path, owned: bool = False) -> str:
    """The name :func:`atomic_write` gives its temporary before tempfile's 8 characters and :data:`TMP_SUFFIX`
    (a caller probes a folder with it: a name too long for the file system is found before the work)."""
    path = Path(path)
    if owned:
        from .lock import host_tag

        return f".{path.name}.{host_tag()}-{os.getpid()}."
    return f".{path.name}."


def atomic_write(path: Path, write, binary: bool = True, owned: bool = False) -> None:
    """Write ``path`` through ``write(file)`` so that it is either the old file or the complete new one.

    ``owned``: the temporary's name holds this host and pid (``.<name>.<host>-<pid>.<8>.streamcov-tmp``), for a
    file outside a folder that streamcov locks, where :func:`remove_dead_temporaries` tells one that a killed
    process left from one being written.

    The file gets the mode a plain ``open`` would give it (that of the file it replaces, else 0666 less the
    umask), not the 0600 of the temporary file it is written as: a model or result is read by other users
    and by workers running as another user."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temporary_prefix(path, owned), suffix=TMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb" if binary else "w") as fh:   # owns the descriptor from here: closed on any error
            try:
                mode = stat.S_IMODE(os.stat(path).st_mode)
            except OSError:
                mode = 0o666 & ~_umask()
            try:
                os.fchmod(fh.fileno(), mode)
            except OSError:   # a file system without modes (FAT) or owned by another user: the write matters more
                pass
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.replace(tmp, path)
        except IsADirectoryError:   # a folder made where a file goes (a checkpoint, model.json): was a traceback
            raise ConfigError(f"{path}: a folder where streamcov writes a file; move or delete it, then run the same "
                              f"command again") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove_stale_temporaries(folder: Path, targets=None, patterns=()) -> None:
    """Delete the temporary files of :func:`atomic_write` in ``folder`` (not below it), those a killed process
    left (a model.npz as large as the model): ``.<target>.<8 characters>.streamcov-tmp``, for the file names
    ``targets`` (and those the regular expressions ``patterns`` match) only when given (a folder where others may
    write too). Called with the folder's lock held."""
    try:
        entries = list(Path(folder).iterdir())
    except OSError:   # no such folder yet
        return
    names = (r"|".join([*(re.escape(t) for t in targets), *patterns]) if targets is not None else r".+")
    pattern = re.compile(rf"\.(?:{names})\.[a-z0-9_]{{8}}{re.escape(TMP_SUFFIX)}")
    for p in entries:
        if pattern.fullmatch(p.name) and p.is_file() and not p.is_symlink():
            p.unlink(missing_ok=True)


def remove_dead_temporaries(path: Path) -> None:
    """Delete the temporaries of ``atomic_write(path, ..., owned=True)`` that processes of this host which no
    longer exist left (killed with SIGKILL while writing); those of live processes and of other hosts stay."""
    from .lock import left_by_dead

    path = Path(path)
    for p in left_by_dead(path.parent, rf"\.{re.escape(path.name)}\.", rf"\.[a-z0-9_]{{8}}{re.escape(TMP_SUFFIX)}"):
        if p.is_file():
            p.unlink(missing_ok=True)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda fh: fh.write(text), binary=False)
