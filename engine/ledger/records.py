"""Release records kept beside the ledger: where a server writes them, and the record of an
adaptive (AIM+GReM) release.

A release made through the explorer is written to
``<data dir>/releases/<data set>/<release id>/`` (:func:`release_directory`; ``answers.csv``
and ``release.json`` by :func:`engine.workflows.release.write_release`), and the ledger row
keeps that path so the Budget page can offer both files for download.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from engine.ledger.store import data_dir
from engine.workflows.release import base_record, workload_summary, write_release


def release_directory(dataset: str, release_id: int) -> Path:
    """``<data dir>/releases/<data set>/<id>`` (the name reduced to ``[A-Za-z0-9._-]``)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", dataset).strip("._") or "dataset"
    return data_dir() / "releases" / safe / f"{release_id:06d}"


def write_adaptive_release(out_dir: str | Path, result: Any, workload: Any, privacy: Any,
                           knobs: dict[str, Any], seed: int | None = None) -> dict[str, Any]:
    """Write an AIM+GReM result (``engine.mechanisms`` ``aim-grem`` run) as a release record.

    The record's noise entry is the run's own account (``result.details["noise"]``: exact
    discrete Gaussian measurements and exponential-mechanism selection).

    ``answers.csv`` has one row per released cell (``marginal, cell, answer``); the record
    carries the round-by-round ledger (``charge``, ``rho``). Returns the record.
    """
    record = base_record("aim-grem", seed)
    record.update(knobs=knobs, workload=workload_summary(workload.domain, workload),
                  privacy_unit="one record (add/remove) of the data",
                  privacy=privacy.to_spec(), noise=dict(result.details["noise"]),
                  ledger=[{"charge": what, "rho": cost} for what, cost in result.ledger],
                  rho_spent=result.rho_spent)
    rows = [[result.label(g), i, float(v)] for g, est in result.estimates.items()
            for i, v in enumerate(np.asarray(est, float).ravel())]
    write_release(out_dir, ["marginal", "cell", "answer"], rows, record)
    return record
