"""Uploaded data files by content: ``<data dir>/uploads/<sha256>``, shared by every process.

A session's state holds an upload's name and SHA-256 only (see ``Session.snapshot``); the bytes
are written here once, atomically (a temporary file renamed into place), so a process that
loads the session reads the very file the user uploaded. A file whose content no longer
matches its name (a torn or tampered file) is never returned.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from engine import data_dir, fingerprint_bytes

#: The folder under the data directory.
FOLDER = "uploads"


def uploads_dir() -> Path:
    """``$DPWB_DATA_DIR/uploads`` (not created here)."""
    return data_dir() / FOLDER


class UploadFiles:
    """Upload contents by SHA-256 in ``directory`` (default :func:`uploads_dir`)."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or uploads_dir()

    def put(self, content: bytes) -> str:
        """Keep ``content`` (nothing is written when it is there already); returns its SHA-256.

        Raises:
            OSError: the directory cannot be written (full disk, read-only).
        """
        digest = fingerprint_bytes(content)
        path = self.directory / digest
        if path.exists():
            return digest
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=self.directory, prefix=".upload-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(content)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return digest

    def get(self, digest: str) -> bytes | None:
        """The content with SHA-256 ``digest`` (None when missing, unreadable or damaged)."""
        if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
            return None
        try:
            content = (self.directory / digest).read_bytes()
        except OSError:
            return None
        return content if fingerprint_bytes(content) == digest else None
