"""The files of a release: its tables and its record, written atomically, and where they go.

A release directory holds:

* one CSV per released table (named after it: ``age_x_sex.csv``), each opening with ``#``
  comment lines that carry the release's provenance (:func:`provenance_lines`: whether it is a
  private release, a seeded run or a teaching run, the UTC time, the package version, the
  mechanism and its knobs, the privacy level and unit, the noise drawn, the post-processing,
  the data set's SHA-256 and the ledger after the release). ``pandas.read_csv(path,
  comment="#")`` reads them;
* ``release.json``: the record, the same facts and more (workload summary, round ledger).

Everything is written into a hidden staging directory inside the target first and moved into
place only when complete, the record last (``os.replace`` is atomic on POSIX): a failure or a
cancel leaves no half table, and a ``release.json`` beside the tables means they are whole.
:func:`check_out_dir` validates the target before any work (and any charge) is done.

Example:
    >>> import tempfile, os
    >>> import pandas as pd
    >>> d = tempfile.mkdtemp()
    >>> tables = PublishedTables({"answers": pd.DataFrame({"query": [0], "answer": [1.5]})},
    ...                          "none")
    >>> out = write_release(d, tables, {"mechanism": "identity", "notice": None})
    >>> sorted(os.listdir(d))
    ['answers.csv', 'release.json']
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import os
import re
import shutil
import tempfile
import zipfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pandas as pd

from engine.data.bundled import BUNDLED, DATA_DIR
from engine.errors import SpecError
from engine.ledger import data_dir
from engine.workflows.tables import PublishedTables, file_stems

RECORD_FILE = "release.json"
#: The notice of a run on bundled demo data or marked as teaching (never charged).
TEACHING_LABEL = "teaching: not a private release"
#: Record keys repeated as comment lines at the top of every CSV table, in this order.
PROVENANCE_KEYS = ("notice", "time", "package_version", "mechanism", "knobs", "privacy",
                   "privacy_unit", "noise", "post_processing", "data_sha256", "budget")


def package_version() -> str:
    """The installed dpworkbench version (``0+unknown`` when not installed)."""
    try:
        return version("dpworkbench")
    except PackageNotFoundError:
        return "0+unknown"


def utc_now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def check_out_dir(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """The release directory, created if missing; a one-line SpecError naming ``flag`` when it
    is a file, cannot be created or is not writable."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise SpecError(f"{flag}: {str(out)!r} is a file, not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SpecError(f"{flag}: cannot create {str(out)!r} ({exc.strerror})") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise SpecError(f"{flag}: {str(out)!r} is not writable")
    return out


def data_file(data: str) -> tuple[Path, bool]:
    """The file behind a ``--data`` value and whether it is bundled demo data (a name in
    :data:`engine.data.bundled.BUNDLED`, e.g. ``adult``: the teaching sandbox)."""
    if data in BUNDLED:
        return DATA_DIR / f"{data}.csv", True
    return Path(data), False


def release_directory(dataset: str, release_id: int) -> Path:
    """Where a server keeps a charged release: ``<data dir>/releases/<data set>/<id>`` (the
    name reduced to ``[A-Za-z0-9._-]``); the ledger row keeps the path for downloads."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", dataset).strip("._") or "dataset"
    return data_dir() / "releases" / safe / f"{release_id:06d}"


def workload_summary(domain: Any, workload: Any) -> dict[str, Any]:
    """Queries, cells, terms and a SHA-256 of the canonical (domain, workload) spec."""
    spec = {"domain": domain.to_spec(), "workload": workload.to_spec()}
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()
    return {"queries": int(workload.num_queries), "domain_size": int(domain.size),
            "terms": len(workload.terms), "sha256": digest}


def provenance_lines(record: dict[str, Any]) -> list[str]:
    """``# key: value`` lines of :data:`PROVENANCE_KEYS` (the first says what the file is)."""
    notice = record.get("notice") or "private release"
    lines = [f"# release: {notice}"]
    for key in PROVENANCE_KEYS[1:]:
        if key in record:
            value = record[key]
            text = value if isinstance(value, str) else json.dumps(value, default=jsonable)
            lines.append(f"# {key}: {text}")
    return lines


def stamped_csv(frame: pd.DataFrame, record: dict[str, Any]) -> str:
    """A released table as CSV text opening with the record's :func:`provenance_lines` (what a
    download of one table gives)."""
    header = "".join(f"{line}\n" for line in provenance_lines(record))
    return header + frame.to_csv(index=False)


def release_zip(tables: PublishedTables, record: dict[str, Any]) -> bytes:
    """Every table of a release as :func:`stamped_csv` (one CSV per table, named as
    :meth:`PublishedTables.write` names them) and ``release.json``, as one zip file's bytes
    (what a page's "download all tables" gives)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for stem, frame in zip(file_stems(list(tables.frames)), tables.frames.values(),
                               strict=True):
            archive.writestr(f"{stem}.csv", stamped_csv(frame, record))
        archive.writestr(RECORD_FILE, json.dumps(record, indent=2, default=jsonable) + "\n")
    return buffer.getvalue()


def write_release(out_dir: str | os.PathLike[str], tables: PublishedTables,
                  record: dict[str, Any]) -> Path:
    """Write ``tables`` (CSV, with :func:`provenance_lines` on top) and ``release.json`` into
    ``out_dir`` atomically: staged, then moved into place, the record last. Returns the
    directory.

    Raises:
        SpecError: the directory cannot be written (one line naming ``--out``).
    """
    out = check_out_dir(out_dir)
    staging = Path(tempfile.mkdtemp(prefix=".release-", dir=out))
    try:
        tables.write(staging)
        header = "".join(f"{line}\n" for line in provenance_lines(record))
        for csv_file in sorted(staging.glob("*.csv")):
            csv_file.write_text(header + csv_file.read_text())
        with (staging / RECORD_FILE).open("w") as fh:
            json.dump(record, fh, indent=2, default=jsonable)
            fh.write("\n")
        files = sorted(p.name for p in staging.iterdir() if p.name != RECORD_FILE)
        for name in [*files, RECORD_FILE]:
            os.replace(staging / name, out / name)
    except OSError as exc:
        raise SpecError(f"--out: cannot write the release into {str(out)!r} "
                        f"({exc.strerror or exc})") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def jsonable(value: Any) -> Any:
    """numpy scalars and arrays as plain JSON values (``json.dump``'s ``default``)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")
