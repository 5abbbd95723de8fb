"""Plain HTML for the notebook representations (``_repr_html_``) of engine objects.

Strings only: no Panel, no HoloViews, nothing a browser has to load. Every value is escaped.

Example:
    >>> table([("rmse", "8.06")], header=("what", "value"))[:7]
    '<table '
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence

import numpy as np

#: Largest matrix (rows x columns) drawn as a picture.
GRID_LIMIT = (64, 128)
#: Most rectangles in one picture (a matrix without runs of equal entries draws one per cell;
#: past this the page would carry hundreds of kilobytes for a thumbnail).
RECT_LIMIT = 2_000

_TABLE_STYLE = "border-collapse:collapse;font-size:0.9em"
_CELL_STYLE = "padding:2px 8px;border-bottom:1px solid #ddd;text-align:left"


def escape(value: object) -> str:
    """``value`` as escaped HTML text."""
    return html.escape(str(value))


def number(value: float | None, digits: int = 4) -> str:
    """A float with ``digits`` significant digits ("n/a" for None or nan)."""
    if value is None or not math.isfinite(value):
        return "n/a"
    if abs(value) >= 10 ** (digits - 1):
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def table(rows: Iterable[Sequence[object]], *, header: Sequence[str] | None = None,
          bold_first: bool = False) -> str:
    """An HTML table of already formatted cells (escaped here)."""
    parts = [f'<table style="{_TABLE_STYLE}">']
    if header is not None:
        parts.append("<tr>" + "".join(f'<th style="{_CELL_STYLE}">{escape(h)}</th>'
                                      for h in header) + "</tr>")
    for i, row in enumerate(rows):
        weight = "font-weight:bold;" if bold_first and i == 0 else ""
        parts.append("<tr>" + "".join(f'<td style="{weight}{_CELL_STYLE}">{escape(c)}</td>'
                                      for c in row) + "</tr>")
    parts.append("</table>")
    return "".join(parts)


def titled(title: str, *body: str, note: str = "") -> str:
    """A block with a bold title line, the body parts and an optional small note."""
    out = f"<div><p style=\"margin:0 0 4px\"><b>{escape(title)}</b></p>{''.join(body)}"
    if note:
        out += f'<p style="margin:4px 0 0;font-size:0.8em;color:#555">{escape(note)}</p>'
    return out + "</div>"


def grid(matrix: np.ndarray, *, title: str = "") -> str:
    """A small matrix as an SVG picture: white 0, dark blue the largest ``|entry|``.

    Each run of equal entries in a row is one rectangle, so structured matrices (prefixes,
    trees, marginals) stay a few kilobytes. Returns "" when the matrix is larger than
    :data:`GRID_LIMIT` or needs more than :data:`RECT_LIMIT` rectangles.
    """
    M = np.abs(np.asarray(matrix, dtype=float))
    if M.ndim != 2 or M.shape[0] > GRID_LIMIT[0] or M.shape[1] > GRID_LIMIT[1] or M.size == 0:
        return ""
    top = float(M.max()) or 1.0
    rows, cols = M.shape
    rects = []
    for i, line in enumerate(M):
        start = 0
        for j in range(1, cols + 1):
            if j == cols or line[j] != line[start]:
                if line[start] > 0:
                    rects.append(f'<rect x="{start}" y="{i}" width="{j - start}" height="1" '
                                 f'fill-opacity="{line[start] / top:.2f}"/>')
                start = j
    if len(rects) > RECT_LIMIT:
        return ""
    scale = max(2, min(8, 480 // max(rows, cols)))
    caption = f'<br><span style="font-size:0.8em">{escape(title)}</span>' if title else ""
    return (f'<div><svg width="{cols * scale}" height="{rows * scale}" '
            f'viewBox="0 0 {cols} {rows}" preserveAspectRatio="none" '
            f'style="border:1px solid #ccc" shape-rendering="crispEdges">'
            f'<g fill="#1f4e8c">{"".join(rects)}</g></svg>{caption}</div>')
