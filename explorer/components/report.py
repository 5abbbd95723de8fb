"""A one-page HTML report of a comparison that opens offline: every style and the chart are
inline (an SVG), nothing is fetched."""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from explorer.components.charts import color_of

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 60em; margin: 2em auto; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
.privacy { background: #eef5ff; padding: 0.8em; border-left: 4px solid #3b7dd8; }
"""


def _markdown_bold(text: str) -> str:
    """Escape, then turn ``**x**`` into ``<strong>x</strong>``."""
    return re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html.escape(text))


def rmse_svg(names: Sequence[str], rmses: Sequence[float], bound: float | None) -> str:
    """Horizontal bars of RMSE per mechanism, with the SVD bound as a dashed line."""
    width, left, bar, gap = 640, 150, 18, 6
    top = max([*rmses, bound or 0.0, 1e-12])
    height = len(names) * (bar + gap) + 30
    scale = (width - left - 60) / top
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'role="img" aria-label="RMSE per mechanism">']
    for i, (name, value) in enumerate(zip(names, rmses, strict=True)):
        y = 10 + i * (bar + gap)
        parts.append(f'<text x="{left - 6}" y="{y + bar - 5}" text-anchor="end" '
                     f'font-size="12">{html.escape(name)}</text>')
        parts.append(f'<rect x="{left}" y="{y}" width="{value * scale:.1f}" height="{bar}" '
                     f'fill="{color_of(name)}"><title>{html.escape(name)}: {value:.4f}'
                     "</title></rect>")
        parts.append(f'<text x="{left + value * scale + 4:.1f}" y="{y + bar - 5}" '
                     f'font-size="11">{value:.4g}</text>')
    if bound:
        x = left + bound * scale
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="4" y2="{height - 18}" '
                     'stroke="#444" stroke-dasharray="5,4"/>')
        parts.append(f'<text x="{x:.1f}" y="{height - 4}" font-size="11" text-anchor="middle">'
                     f"SVD bound {bound:.4g}</text>")
    parts.append("</svg>")
    return "".join(parts)


def _table(frame: pd.DataFrame, css_class: str) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    rows = []
    for record in frame.itertuples(index=False):
        cells = []
        for value in record:
            if isinstance(value, float):
                text = "" if math.isnan(value) else f"{value:,.4f}"
                cells.append(f'<td class="num">{text}</td>')
            else:
                cells.append(f"<td>{html.escape('' if value is None else str(value))}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<table class="{css_class}"><thead><tr>{head}</tr></thead><tbody>'
            + "".join(rows) + "</tbody></table>")


def html_report(*, headline: str, table: pd.DataFrame, bound: float | None,
                worst: pd.DataFrame | None, worst_of: str | None, privacy: str,
                workload: str, scenario_yaml: str, made: Mapping[str, Any]) -> str:
    """The report page.

    Args:
        headline: the compare page's headline (``**bold**`` allowed).
        table: one row per mechanism with ``mechanism`` and ``rmse`` columns (best first).
        bound: the SVD bound as an RMSE (None where not computable).
        worst: the worst queries of ``worst_of`` (None when there are none to show).
        worst_of: the mechanism whose worst queries are listed.
        privacy: the privacy level in words (``gaussian eps=1 delta=1e-06``).
        workload: the workload in words.
        scenario_yaml: the scenario, as the YAML that reproduces the comparison.
        made: :func:`explorer.components.exports.provenance` (date, version, workload hash,
            privacy unit).
    """
    planned = table[table["rmse"].notna()]
    chart = rmse_svg(list(planned["mechanism"]), [float(v) for v in planned["rmse"]], bound)
    worst_html = ("<p>No planned mechanism to show per-query errors for.</p>" if worst is None
                  else f"<p>The queries with the largest expected error under "
                       f"<strong>{html.escape(worst_of or '')}</strong>; <em>error_95</em>: "
                       "the answer is within +/- this many people of the truth with 95 % "
                       "probability (the compare page's per-query table for this mechanism, "
                       f"and its CSV per-query-{html.escape(worst_of or '')}.csv).</p>"
                  + _table(worst, "worst-queries"))
    statement = (f"Every mechanism in this comparison is differentially private at "
                 f"<strong>{html.escape(privacy)}</strong>, for the privacy unit of one record "
                 "(adding or removing one person's row). The errors are expected values "
                 "computed from the mechanisms' plans: they do not depend on the data, and "
                 "producing this report used no privacy budget.")
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        "<title>Comparison of mechanisms</title>", f"<style>{STYLE}</style></head><body>",
        "<h1>Comparison of mechanisms</h1>",
        f'<p class="headline">{_markdown_bold(headline)}</p>',
        f"<p>Workload: {html.escape(workload)} (SHA-256 of its spec: "
        f"<code class=\"workload-hash\">{html.escape(str(made['workload_sha256']))}</code>)."
        "</p>",
        f"<p class=\"made\">Made {html.escape(str(made['created_utc']))} with dpworkbench "
        f"{html.escape(str(made['version']))}; privacy unit: "
        f"{html.escape(str(made['privacy_unit']))}.</p>",
        "<h2>Typical error per count (RMSE, in people)</h2>", chart,
        "<h2>Every mechanism</h2>", _table(table, "comparison"),
        "<h2>Worst queries</h2>", worst_html,
        "<h2>Privacy</h2>", f'<p class="privacy">{statement}</p>',
        "<h2>Scenario</h2>", f'<pre class="scenario">{html.escape(scenario_yaml)}</pre>',
        "</body></html>", ""])
