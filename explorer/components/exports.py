"""Download buttons: CSV of a table, plain text (YAML, Python, HTML), built when clicked.

Every CSV is plain (a header row, then data; no comment lines) and describes itself:
:func:`scenario_columns` adds the privacy level, noise and workload as columns.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pandas as pd
import panel as pn

from engine.privacy import Privacy
from engine.workloads.workload import Workload

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
