"""The release record: what was released, how, and under which guarantee, written atomically.

A release directory holds two files:

* ``answers.csv`` -- the released answers (one row per answer, a header naming the columns);
* ``release.json`` -- the record: mechanism and its knobs, workload summary and SHA-256 hash,
  privacy unit and level, the adaptive round-by-round ledger where there is one, the noise
  sampler and grid, whether the run was seeded (then :data:`engine.noise.SEEDED_LABEL`),
  the package version and the UTC time.

Both files are written under temporary names in the target directory and renamed into place
only when both are complete (``os.replace`` is atomic on POSIX), so a failure leaves nothing
half-written. :func:`check_out_dir` validates the directory before any work is done.

Example:
    >>> import tempfile, json, os
    >>> d = tempfile.mkdtemp()
    >>> write_release(d, ["query", "answer"], [[0, 1.5]], {"mechanism": "identity"})
    >>> sorted(os.listdir(d)), json.load(open(os.path.join(d, "release.json")))["mechanism"]
    (['answers.csv', 'release.json'], 'identity')
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from engine.errors import SpecError
from engine.noise import SEEDED_LABEL

ANSWERS_FILE = "answers.csv"
RECORD_FILE = "release.json"


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


def workload_summary(domain: Any, workload: Any) -> dict[str, Any]:
    """Queries, cells, terms and a SHA-256 of the canonical (domain, workload) spec."""
    spec = {"domain": domain.to_spec(), "workload": workload.to_spec()}
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()
    return {"queries": int(workload.num_queries), "domain_size": int(domain.size),
            "terms": len(workload.terms), "sha256": digest}


def base_record(mechanism: str, seed: int | None) -> dict[str, Any]:
    """The fields every record carries: mechanism, seeded or not, version, UTC time."""
    from engine import __version__

    return {"mechanism": mechanism, "seeded": seed is not None, "seed": seed,
            "notice": SEEDED_LABEL if seed is not None else None,
            "package_version": __version__,
            "time": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}


def write_release(out_dir: str | os.PathLike[str], header: Sequence[str],
                  rows: Iterable[Sequence[Any]], record: dict[str, Any]) -> None:
    """Write ``answers.csv`` and ``release.json`` into ``out_dir`` atomically (both or none).

    A seeded record's CSV opens with a comment line carrying :data:`SEEDED_LABEL`.
    """
    out = check_out_dir(out_dir)
    temps: list[tuple[str, Path]] = []
    try:
        fd, answers_tmp = tempfile.mkstemp(prefix=".answers-", suffix=".tmp", dir=out)
        temps.append((answers_tmp, out / ANSWERS_FILE))
        with os.fdopen(fd, "w", newline="") as fh:
            if record.get("seeded"):
                fh.write(f"# {SEEDED_LABEL}\n")
            writer = csv.writer(fh)
            writer.writerow(header)
            writer.writerows(rows)
        fd, record_tmp = tempfile.mkstemp(prefix=".release-", suffix=".tmp", dir=out)
        temps.append((record_tmp, out / RECORD_FILE))
        with os.fdopen(fd, "w") as fh:
            json.dump(record, fh, indent=2, default=_jsonable)
            fh.write("\n")
        for tmp, final in temps:
            os.replace(tmp, final)
        temps.clear()
    except OSError as exc:
        raise SpecError(f"--out: cannot write the release into {str(out)!r} "
                        f"({exc.strerror or exc})") from None
    finally:
        for tmp, _ in temps:
            Path(tmp).unlink(missing_ok=True)


def _jsonable(value: Any) -> Any:
    """numpy scalars and arrays, tuples of them, as plain JSON values."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")
