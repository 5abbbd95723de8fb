"""Finished plans on disk, shared by every serving process: a size-bounded, content-addressed
cache.

An entry is one finished :class:`~engine.workflows.compare.ComparisonRow` (its plan included)
or one workload's SVD bound, under the SHA-256 of ``(package version, workload key, noise,
mechanism)``: a server of another version does not serve it. Its
file is the SHA-256 of the payload followed by the payload (cloudpickle), written to a
temporary file and renamed into place, so a reader sees a whole entry or none. A file whose
payload does not match its digest, or that does not unpickle, is deleted and reported as a miss:
a corrupt entry is never served. Reading an entry marks it used (its modification time);
writing one evicts the least recently used entries until the cache holds at most
``max_bytes``.

The default folder is ``$DPWB_DATA_DIR/plans`` and the default size
``EXPLORER_PLAN_CACHE_MB`` (:data:`DEFAULT_MB`). Plans hold no data, only the public workload, so
they may be shared by every user. A cache that cannot be written (read-only or full disk) logs
one line and goes on as a miss: plans are then kept in the process's memory only.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import cloudpickle

from engine import __version__, data_dir

LOG = logging.getLogger("explorer.planning")
#: The folder under the data directory.
FOLDER = "plans"
#: Default bound on the cache's size (MB), ``EXPLORER_PLAN_CACHE_MB``.
DEFAULT_MB = 512
#: The entry name of a workload's SVD bound (no mechanism is called this).
BOUND = "-bound-"
SUFFIX = ".plan"


def plan_cache_bytes() -> int:
    """``EXPLORER_PLAN_CACHE_MB`` in bytes (default :data:`DEFAULT_MB` MB)."""
    text = os.environ.get("EXPLORER_PLAN_CACHE_MB", "").strip()
    try:
        value = float(text) if text else float(DEFAULT_MB)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise SystemExit(f"EXPLORER_PLAN_CACHE_MB: {text!r} is not a size in MB (allowed: more "
                         "than 0)")
    return int(value * 1e6)


#: A folder changed more recently than this (ns) has no :meth:`PlanCache.version` yet.
SETTLE_NS = 2_000_000_000


def entry_name(key: str, noise: str, name: str, version: str = __version__) -> str:
    """The file name of an entry: the SHA-256 of the package version that plans, its workload
    key, noise and name. Servers of another version (one machine of an agency upgraded before
    the others) neither serve nor overwrite each other's plans."""
    digest = hashlib.sha256(f"{version}\0{key}\0{noise}\0{name}".encode()).hexdigest()
    return digest + SUFFIX


class PlanCache:
    """Entries by ``(workload key, noise, name)`` in ``directory`` (module docstring).

    Args:
        directory: the folder (created on the first write); default ``$DPWB_DATA_DIR/plans``,
            as the variable is at each use.
        max_bytes: the most the entries may take together (bytes).
    """

    def __init__(self, directory: Path | None = None, max_bytes: int | None = None) -> None:
        self._directory = directory
        self.max_bytes = max_bytes if max_bytes is not None else plan_cache_bytes()
        self.error = ""  #: the last write problem, one line ('' while writes work)
        self._lock = threading.Lock()

    @property
    def directory(self) -> Path:
        """The folder of the entries."""
        return self._directory or data_dir() / FOLDER

    def version(self) -> int | None:
        """The folder's modification time (ns): it changes whenever an entry is written or
        removed, by any process. None when it cannot tell: no folder yet, or changed within
        :data:`SETTLE_NS` (a coarse clock could hide a second write in the same tick)."""
        try:
            changed = os.stat(self.directory).st_mtime_ns
        except OSError:
            return None
        return None if time.time_ns() - changed < SETTLE_NS else changed

    def get(self, key: str, noise: str, name: str) -> Any:
        """The entry, or None (missing, or corrupt: then deleted)."""
        path = self.directory / entry_name(key, noise, name)
        try:
            blob = path.read_bytes()
        except OSError:
            return None
        digest, payload = blob[:32], blob[32:]
        try:
            if hashlib.sha256(payload).digest() != digest:
                raise ValueError("its content does not match its digest")
            value = cloudpickle.loads(payload)
        except Exception as exc:  # noqa: BLE001 - any unpickling failure is a corrupt entry
            LOG.warning("plan cache: dropped corrupt entry %s (%s)", path.name, exc)
            path.unlink(missing_ok=True)
            return None
        with contextlib.suppress(OSError):  # a read-only cache still serves
            os.utime(path)  # used now: the last to be evicted
        return value

    def put(self, key: str, noise: str, name: str, value: Any) -> bool:
        """Store an entry (atomically), then evict the least recently used ones beyond
        ``max_bytes``; False when it could not be written (logged once, in :attr:`error`)."""
        try:
            payload = cloudpickle.dumps(value)
        except Exception as exc:  # noqa: BLE001 - a plan that does not pickle stays in memory
            LOG.warning("plan cache: %s/%s/%s cannot be pickled (%s)", key, noise, name, exc)
            return False
        if len(payload) + 32 > self.max_bytes:
            return False
        path = self.directory / entry_name(key, noise, name)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=self.directory, prefix=".entry-")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(hashlib.sha256(payload).digest())
                    fh.write(payload)
                os.replace(temporary, path)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        except OSError as exc:
            line = (f"plan cache: cannot write {str(self.directory)!r} "
                    f"({exc.strerror or exc}); plans are kept in this process only")
            if line != self.error:
                LOG.warning("%s", line)
            self.error = line
            return False
        self.error = ""
        self.evict()
        return True

    def entries(self) -> list[tuple[float, int, Path]]:
        """``(last used, bytes, path)`` of every entry, least recently used first."""
        found = []
        try:
            paths = list(self.directory.glob("*" + SUFFIX))
        except OSError:
            return []
        for path in paths:
            try:
                stat = path.stat()
            except OSError:
                continue  # evicted by another process meanwhile
            found.append((stat.st_mtime, stat.st_size, path))
        return sorted(found)

    def size(self) -> int:
        """Bytes the entries take together."""
        return sum(size for _, size, _ in self.entries())

    def evict(self) -> None:
        """Delete the least recently used entries until at most ``max_bytes`` remain."""
        with self._lock:
            entries = self.entries()
            total = sum(size for _, size, _ in entries)
            for _, size, path in entries:
                if total <= self.max_bytes:
                    break
                path.unlink(missing_ok=True)
                total -= size
