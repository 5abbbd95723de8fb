"""Download buttons: CSV of a table, plain text (YAML, Python), built when clicked."""

from __future__ import annotations

import io
from collections.abc import Callable

import pandas as pd
import panel as pn


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
