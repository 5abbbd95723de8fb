"""Download buttons: CSV of a table, plain text (YAML, Python, HTML), built when clicked.

Every CSV is plain (a header row, then data; no comment lines) and describes itself:
:func:`scenario_columns` adds the privacy level, noise and workload as columns, and
:func:`described` adds to those the privacy unit, the date, the version, the workload's hash
and the SVD bound (:data:`PROVENANCE_COLUMNS`).
"""

from __future__ import annotations

import datetime
import io
from collections.abc import Callable
from typing import Any

import pandas as pd
import panel as pn

import engine
from engine import Privacy, Workload, workload_summary
from explorer.components.people import GAUSSIAN_FACTOR

#: The columns :func:`scenario_columns` adds, in order.
SCENARIO_COLUMNS = ("privacy", "noise", "epsilon", "delta", "rho", "workload", "queries",
                    "cells")


def scenario_columns(frame: pd.DataFrame, privacy: Privacy, workload: Workload
                     ) -> pd.DataFrame:
    """``frame`` with the privacy level, noise and workload summary as trailing columns
    (the same value on every row; epsilon/delta/rho empty where the noise has none)."""
    spec: dict[str, Any] = privacy.to_spec()
    values = {"privacy": privacy.describe(), "noise": privacy.noise,
              "epsilon": spec.get("epsilon"), "delta": spec.get("delta"),
              "rho": spec.get("rho"), "workload": workload.describe(),
              "queries": workload.num_queries, "cells": workload.domain.size}
    out = frame.copy()
    for column in SCENARIO_COLUMNS:
        out[column] = values[column]
    return out


#: The columns :func:`described` adds after :data:`SCENARIO_COLUMNS`, in order.
PROVENANCE_COLUMNS = ("privacy_unit", "created_utc", "version", "workload_sha256",
                      "svd_bound_rmse", "svd_bound_error_95")
#: The privacy unit of every plan the explorer compares.
PRIVACY_UNIT = "one record (add/remove one person's row)"


def provenance(workload: Workload, bound_rmse: float | None) -> dict[str, Any]:
    """What an export is of and when: privacy unit, UTC time, the dpworkbench version, the
    SHA-256 of the workload's spec, and the SVD bound as an RMSE and as a typical error in
    people at 95 % (1.96 x the RMSE; None where there is no bound)."""
    return {"privacy_unit": PRIVACY_UNIT,
            "created_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "version": engine.__version__,
            "workload_sha256": workload_summary(workload.domain, workload)["sha256"],
            "svd_bound_rmse": bound_rmse,
            "svd_bound_error_95": None if bound_rmse is None else GAUSSIAN_FACTOR * bound_rmse}


def described(frame: pd.DataFrame, privacy: Privacy, workload: Workload,
              bound_rmse: float | None) -> pd.DataFrame:
    """``frame`` with :func:`scenario_columns` and then :func:`provenance`'s columns."""
    out = scenario_columns(frame, privacy, workload)
    values = provenance(workload, bound_rmse)
    for column in PROVENANCE_COLUMNS:
        out[column] = values[column]
    return out


def frame_to_csv(frame: pd.DataFrame) -> str:
    """A table as CSV text (no index column)."""
    return frame.to_csv(index=False)


def csv_download(frame: Callable[[], pd.DataFrame], filename: str,
                 label: str = "Download CSV", css_class: str = "csv-download"
                 ) -> pn.widgets.FileDownload:
    """A button that saves ``frame()`` as CSV; the table is built at click time."""
    return text_download(lambda: frame_to_csv(frame()), filename, label, css_class)


def text_download(text: Callable[[], str], filename: str, label: str,
                  css_class: str = "text-download") -> pn.widgets.FileDownload:
    """A button that saves ``text()`` under ``filename``; the text is built at click time."""
    return pn.widgets.FileDownload(
        callback=lambda: io.StringIO(text()), filename=filename, label=label,
        color="light", css_classes=[css_class], width=200,
    )
