"""One writer per folder: a lock file naming its holder, and stale locks of dead processes.

``streamcov run`` holds ``<output>/.streamcov.lock`` while it writes an
output folder, and an ingestion holds ``<store>.lock`` beside the store.
A second writer is refused with one line naming the holder (pid, host,
command, start time). The file is created exclusively and held with the
kernel's ``flock``, which a process that dies (kill -9) releases: its lock is
then taken over, by one process only. A lock file of this host that no process
holds is stale whatever pid it names (the pid may since name another process).
"""
from __future__ import annotations

import contextlib
import itertools
import json
import os
import socket
import sys
import time
from pathlib import Path

from .errors import StoreError


def host_tag() -> str:
    """This machine's name as it goes into a file name (beside a pid: whose process left the file)."""
    import re

    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "host"


def left_by_dead(folder, before: str, after: str) -> list:
    """The entries of ``folder`` (not links) named ``<before><this host>-<pid><after>`` (``before`` and ``after``
    regular expressions) whose process no longer exists on this host: what a process killed with SIGKILL left.
    Those of live processes and of other hosts sharing the folder (their pids are not this host's) are not
    listed."""
    import re

    pattern = re.compile(rf"{before}{re.escape(host_tag())}-(\d+){after}")
    try:
        entries = list(Path(folder).iterdir())
    except OSError:   # no such folder
        return []
    return [p for p in entries if (m := pattern.fullmatch(p.name)) and not p.is_symlink()
            and not _alive(int(m.group(1)))]


def _alive(pid) -> bool:
    """Whether process ``pid`` exists. Only a positive integer names one process: 0 and negative numbers
    would ask about process groups (``kill(-1, 0)`` succeeds), anything else is no pid at all."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # exists, owned by someone else
        return True
    except (OverflowError, OSError):   # beyond pid_t: no such process
        return False
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Whether ``pid`` has exited and only waits to be reaped (a zombie: ``kill(pid, 0)`` still succeeds;
    where nothing reaps it, a container without an init, it stays one for good). Linux's ``/proc``; False
    where it cannot be told."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] == b"Z"   # the state, after the command's ")"
    except (OSError, IndexError):
        return False


def _holder(path: Path) -> dict | None:
    """The holder recorded in a lock file; None while it is being written (empty or partial JSON)."""
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        return None


def _is_holder(holder) -> bool:
    """Whether a lock file's contents name a holder: a JSON object with the writer's host and pid."""
    return (isinstance(holder, dict) and isinstance(holder.get("host"), str) and isinstance(holder.get("pid"), int)
            and not isinstance(holder.get("pid"), bool))


def _dead(holder: dict) -> bool:
    """Whether the holder of a lock is a process of this host that no longer runs (kill -9): a stale lock."""
    return holder["host"] == socket.gethostname() and not _alive(holder["pid"])


def _store_lock_path(store_path: Path) -> Path:
    """The lock file of a store being ingested: beside it (a store folder holds only zarr nodes)."""
    return store_path.with_name(store_path.name + ".lock")


def _not_a_lock(path: Path, what: str) -> StoreError:
    return StoreError(f"{what}: its lock file {path} is not one streamcov wrote (a JSON object with the pid and "
                      f"host of the writer); if no streamcov command is writing there, delete it and run again")


def why_not_a_folder(folder: Path, exc: OSError) -> str:
    """Why ``folder`` could not be created: the file that stands in its path, or the system's reason."""
    folder = Path(folder)
    file = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), None)
    return f"{file} is a file, not a folder" if file is not None else str(exc.strerror)


@contextlib.contextmanager
def new_folders_undone(folder, leftovers: tuple = ()):
    """Within it, ``folder`` and those of its parents that do not exist on entry are removed again when the body
    fails and leaves them empty, but for the files ``leftovers`` in ``folder`` (written by the body's own set-up,
    such as an output folder's marker; they go too): a refused command leaves no folder behind (refused by its
    own checks, a StreamcovError, or by the system: an input path with a name too long, which the command line
    says in one line). A folder that existed before, or that holds anything else (a store, features or
    checkpoints to resume from), stays."""
    folder = Path(folder)
    new = list(itertools.takewhile(lambda p: not os.path.lexists(p), (folder, *folder.parents)))
    try:
        yield
    except Exception:
        for p in new:
            try:
                if p == folder and set(os.listdir(p)) <= set(leftovers):
                    for name in leftovers:
                        (p / name).unlink(missing_ok=True)
                p.rmdir()   # only when empty: what the body wrote there stays, and so do the folders above it
            except FileNotFoundError:   # the body failed before making it
                continue
            except OSError:
                break
        raise


@contextlib.contextmanager
def exclusive(lock_path, what: str, command: str | None = None):
    """Hold the lock file ``lock_path`` for writing ``what``; refuse when another process holds it."""
    lock_path = Path(lock_path)
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:   # a parent is a file, no permission, ...
        why = why_not_a_folder(lock_path.parent, exc)
        raise StoreError(f"{what}: cannot create the folder {lock_path.parent} ({why}); choose another path") from None
    me = {"pid": os.getpid(), "host": socket.gethostname(),
          "command": command or " ".join(sys.argv), "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    fd = _take(lock_path, what, me)
    try:
        yield
    finally:
        try:
            holder = _holder(lock_path)
        except OSError:
            holder = None
        # unlinked while still locked: a process that opened this file before finds it gone once it locks it
        if isinstance(holder, dict) and holder.get("pid") == me["pid"] and holder.get("host") == me["host"]:
            lock_path.unlink(missing_ok=True)
        os.close(fd)


def _flock(fd) -> bool | None:
    """An exclusive, non-blocking ``flock`` on ``fd``: True when taken, False when another open file holds it,
    None where the file system has no such locks (NFS without lockd, some FUSE and Lustre mounts)."""
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    except OSError:   # ENOLCK, ENOSYS, EOPNOTSUPP: the lock file's content alone excludes there
        return None


def _take(lock_path: Path, what: str, me: dict) -> int:
    """Create ``lock_path`` (exclusively) with ``me`` in it, taking over a stale one; its descriptor.

    The file is created with ``O_EXCL``, which every file system makes atomic (network ones included), and
    held with ``flock`` where the file system has it, which the kernel releases when its holder dies. A file
    already there is locked before it is judged: a live holder's lock is refused, and a stale one (its holder
    dead on this host, a kill -9) is deleted and created anew by the one process that locked it: two that had
    both read it as stale both took it over, when deleting was the only step. A file of this host that no
    process holds is stale whatever pid it names; a holder of another host, or, on a file system without
    flock, a live process of this host by its pid, is refused by the file's content."""
    for _ in range(20):   # the file may be deleted or replaced between our steps: look again
        try:
            fd = os.open(lock_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            _take_over(lock_path, what)   # refuses, or frees the path: look again
            continue
        except IsADirectoryError:
            raise _not_a_lock(lock_path, what) from None
        except OSError as exc:   # a name too long, a read-only or virtual file system (/proc), no permission
            raise StoreError(f"{what}: cannot write there ({exc.strerror}); choose another path") from None
        try:
            if _flock(fd) is False:
                # another process locked the new, empty file first (we were stalled between creating and locking
                # it) and judges it stale: it is that one's now; writing into it would make two holders
                os.close(fd)
                continue
            os.write(fd, json.dumps(me).encode())
            os.fsync(fd)   # the holder visible to other hosts at once (a network file system caches writes)
            if not _names(lock_path, fd):
                # a process that found this file empty and unlocked (we were stalled between creating and locking
                # it) deleted it and made its own, and released it: ours is a file no path names; look again
                os.close(fd)
                continue
            return fd
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            with contextlib.suppress(OSError):
                lock_path.unlink()
            raise
    raise _busy(what, lock_path, None)


def _names(lock_path: Path, fd: int) -> bool:
    """Whether ``lock_path`` still names the file open as ``fd``."""
    try:
        here, ours = os.stat(lock_path), os.fstat(fd)
    except FileNotFoundError:
        return False
    return (here.st_ino, here.st_dev) == (ours.st_ino, ours.st_dev)


def _take_over(lock_path: Path, what: str) -> None:
    """The lock file found at ``lock_path``: refused (a :class:`StoreError` naming its holder) unless it is
    stale, then deleted while this process holds its ``flock`` (so no other process can judge it at the same
    time); returns when the path may be free again (deleted, or replaced meanwhile)."""
    import stat

    try:
        fd = os.open(lock_path, os.O_RDONLY | os.O_NONBLOCK)   # read-only: another user's file can be judged too
    except FileNotFoundError:
        return
    except PermissionError:   # another user's (umask 077): its holder may be writing there now
        raise StoreError(f"{what}: its lock file {lock_path} cannot be read (permission denied): another user's "
                         f"streamcov may be writing there now; write elsewhere, or ask its owner (the file's) "
                         f"to delete it once no command of theirs writes there") from None
    except OSError:   # a folder, a special file
        raise _not_a_lock(lock_path, what) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):   # a fifo, a device, a link to one: not a lock file
            raise _not_a_lock(lock_path, what)
        locked = _flock(fd)
        if locked is False:   # held: its holder lives (it may not have written itself in yet)
            holder = _holder(lock_path)
            raise _busy(what, lock_path, holder if _is_holder(holder) and not _dead(holder) else None)
        try:
            if os.fstat(fd).st_ino != os.stat(lock_path).st_ino:
                return   # deleted and made again by another process since we opened it: look again
        except FileNotFoundError:
            return
        text = os.pread(fd, 1 << 16, 0)
        if text.strip():
            try:
                holder = json.loads(text)
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise _not_a_lock(lock_path, what) from None
            if not _is_holder(holder):
                raise _not_a_lock(lock_path, what)
            # locked by us, a holder of this host is stale whatever its pid says: a live holder keeps its flock,
            # and the pid may since name another process (a reboot, a container restarted, pids wrapped round).
            # Without flock (the file system has none), the pid alone tells
            if not (_dead(holder) or (locked and holder["host"] == socket.gethostname())):
                raise _busy(what, lock_path, holder)
        elif not locked:
            # being written right now (created, not yet written), or left empty by a crash during that; without
            # flock only its age tells (a future time, a clock ahead: not taken before it is 10 s old)
            if not time.time() - os.fstat(fd).st_mtime > 10.0:
                raise _busy(what, lock_path, None)
        # else empty and unlocked by its creator: dead before locking it, or stalled between creating and locking
        # it, and then it finds the path no longer names its file and looks again (_take)
        try:
            lock_path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:   # a sticky folder and another user's file
            raise StoreError(f"{what}: its lock file {lock_path} is stale (its writer is gone) but cannot be "
                             f"deleted ({exc.strerror}); delete it and run again") from None
    finally:
        os.close(fd)   # after the unlink: a process that opened the old file finds it replaced once it locks it


def _busy(what: str, lock_path: Path, holder: dict | None) -> StoreError:
    who = ("another process" if holder is None else
           f"process {holder.get('pid')} on {holder.get('host')} since {holder.get('started')} "
           f"({holder.get('command')})")
    return StoreError(f"{what} is being written by {who}; wait for it to finish or write elsewhere "
                      f"(lock file {lock_path})")


def store_writer(store_path) -> dict | None:
    """The holder (pid, host, command, start) of the lock of the store at ``store_path`` while a process holds
    it, else None (no lock, or a stale one, judged as :func:`_take_over` judges it: a lock of this host that no
    process holds, or one of a dead process of this host): an incomplete store being written right now, which
    ``streamcov info`` must not judge by a commit point that moves as it reads."""
    return lock_holder(_store_lock_path(Path(store_path)))


def output_writer(folder) -> dict | None:
    """The holder of the lock of the output folder ``folder`` while a run holds it (:func:`store_writer`)."""
    return lock_holder(Path(folder) / OUTPUT_LOCK)


def lock_holder(path: Path) -> dict | None:
    """The holder of the lock file ``path`` while a live process holds it, else None (:func:`store_writer`)."""
    try:
        holder = _holder(path)
    except OSError:
        return None
    if not _is_holder(holder) or _dead(holder):
        return None
    if holder["host"] == socket.gethostname() and _unheld(path):
        return None
    return holder


def _unheld(path: Path) -> bool:
    """Whether no process holds the ``flock`` of the lock file ``path`` (False where it cannot be told: a file
    system without flock, an unreadable file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        return _flock(fd) is True   # released with the descriptor below
    finally:
        os.close(fd)


# the lock file of an output folder of ``streamcov run``
OUTPUT_LOCK = ".streamcov.lock"
# an output folder of ``streamcov run`` holds this file: later runs may write there again
OUTPUT_MARKER = ".streamcov-output"
# the files a run writes at the top of its output folder, which nothing else may replace
RUN_FILES = ("result.json", "predictions.csv", OUTPUT_MARKER, OUTPUT_LOCK)
# the folders a run writes there (what each holds, as messages name it)
RUN_FOLDERS = {"model": "its model", "checkpoints": "its checkpoints"}


def a_runs_own(path) -> bool:
    """Whether ``path`` names a file or folder a run writes at the top of its output folder (one holding
    :data:`OUTPUT_MARKER`), written yet or not: nothing else (predictions, a store) may take its place."""
    path = Path(path)
    return (path.name in RUN_FILES or path.name in RUN_FOLDERS) and (path.parent / OUTPUT_MARKER).exists()


def output_lock(folder, command: str | None = None):
    """The lock of an output folder of ``streamcov run``; ``command`` is what its lock file names as the holder
    (default: this process's command line)."""
    folder = Path(folder)
    return exclusive(folder / OUTPUT_LOCK, f"output folder {folder}", command)


@contextlib.contextmanager
def store_lock(store_path):
    """The lock of a store being ingested (beside it: a store folder holds only zarr nodes); the path is checked
    by the ingestion (:func:`streamcov.data.ragged.ingest_args`: an empty one would name the current folder).
    An ingestion refused while holding it leaves none of the folders the lock created (the store's parents)
    unless it wrote a store there."""
    store_path = Path(store_path)
    with new_folders_undone(store_path.parent), exclusive(_store_lock_path(store_path), f"store {store_path}"):
        yield
