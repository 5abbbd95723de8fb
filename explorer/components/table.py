"""A table a screen reader can read: a plain HTML ``<table>`` with sortable columns.

Panel's Tabulator marks its table ``role="grid"`` and puts a focusable scrolling ``<div>``
between the grid and its rows, which the grid role forbids; no Tabulator or Panel option
removes it, so a screen reader cannot walk the rows and axe-core reports every Tabulator as a
critical violation (issue 29). :class:`DataTable` shows a DataFrame as a real ``<table>``
and keeps what the pages used of Tabulator:

* column titles, number formats (Python format specs, e.g. ``",.1f"``), widths, hidden columns;
* sorting: each column title is a button (``aria-sort`` says the order), numbers sort as
  numbers, empty cells last;
* one selectable row (``selectable=True``): a click on the row, or Enter/Space on its first
  cell (a toggle button), selects it; again, unselects. ``selection`` holds the row's position
  in ``value``, whatever the sort, as Tabulator's did;
* pages of ``page_size`` rows with Previous / Next buttons;
* a fixed ``height`` scrolls, and the scrolling box takes the keyboard focus (arrow keys).

The browser gets the cells as text formatted in Python (the ``value`` itself stays here), so a
table shows exactly what its CSV and the tests read. Missing numbers show as an empty cell.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import pandas as pd
import param
from panel.custom import JSComponent

#: The browser side: a table, its sort buttons, the selection and the page buttons.
TABLE_ESM = """
export function render({ model }) {
  const box = document.createElement("div");
  box.className = "data-table";
  const scroll = document.createElement("div");
  scroll.className = "table-scroll";
  const table = document.createElement("table");
  const pager = document.createElement("div");
  pager.className = "table-pages";
  scroll.append(table);
  box.append(scroll, pager);
  let order = null;  // [column index, 1 ascending or -1 descending]
  let page = 0;

  const compare = (a, b) => {
    if (a === null || b === null) { return a === b ? 0 : (a === null ? 1 : -1); }
    if (typeof a === "number" && typeof b === "number") { return a - b; }
    return String(a).localeCompare(String(b), undefined, {numeric: true});
  };
  const sorted = () => {
    const rows = model.rows.map((cells, position) => ({cells, position}));
    if (order !== null) {
      const [column, sign] = order;
      rows.sort((r, s) => {
        const a = r.cells[column][1], b = s.cells[column][1];
        if (a === null || b === null) { return compare(a, b); }
        return sign * compare(a, b) || r.position - s.position;
      });
    }
    return rows;
  };
  const choose = (position) => {
    const chosen = model.selection.length === 1 && model.selection[0] === position;
    model.selection = chosen ? [] : [position];
  };

  const draw = () => {
    table.replaceChildren();
    const colgroup = document.createElement("colgroup");
    const head = document.createElement("thead");
    const titles = document.createElement("tr");
    model.columns.forEach(([field, title], index) => {
      const col = document.createElement("col");
      if (model.widths[field]) { col.style.width = model.widths[field]; }
      colgroup.append(col);
      const th = document.createElement("th");
      th.scope = "col";
      th.dataset.field = field;
      const button = document.createElement("button");
      button.type = "button";
      button.className = "sort";
      button.textContent = title;
      if (order !== null && order[0] === index) {
        th.setAttribute("aria-sort", order[1] > 0 ? "ascending" : "descending");
      }
      button.addEventListener("click", () => {
        order = order !== null && order[0] === index && order[1] > 0 ? [index, -1] : [index, 1];
        draw();
      });
      th.append(button);
      titles.append(th);
    });
    head.append(titles);
    const body = document.createElement("tbody");
    const rows = sorted();
    const size = model.page_size || rows.length || 1;
    const pages = Math.max(1, Math.ceil(rows.length / size));
    page = Math.min(page, pages - 1);
    for (const {cells, position} of rows.slice(page * size, (page + 1) * size)) {
      const tr = document.createElement("tr");
      const chosen = model.selection.includes(position);
      if (chosen) { tr.className = "selected"; }
      cells.forEach(([text], index) => {
        const td = document.createElement("td");
        td.dataset.field = model.columns[index][0];
        if (model.selectable && index === 0) {
          const pick = document.createElement("button");
          pick.type = "button";
          pick.className = "pick";
          pick.textContent = text;
          pick.setAttribute("aria-pressed", String(chosen));
          td.append(pick);
        } else {
          td.textContent = text;
        }
        tr.append(td);
      });
      if (model.selectable) { tr.addEventListener("click", () => choose(position)); }
      body.append(tr);
    }
    table.append(colgroup, head, body);
    pager.replaceChildren();
    if (pages > 1) {
      const step = (text, to) => {
        const button = document.createElement("button");
        button.type = "button";
        button.textContent = text;
        button.disabled = to < 0 || to >= pages;
        button.addEventListener("click", () => { page = to; draw(); });
        return button;
      };
      const where = document.createElement("span");
      where.textContent = `Page ${page + 1} of ${pages} (${rows.length} rows)`;
      pager.append(step("Previous page", page - 1), where, step("Next page", page + 1));
    }
    const scrolls = model.height !== null;
    scroll.classList.toggle("scrolls", scrolls);
    if (scrolls) { scroll.tabIndex = 0; } else { scroll.removeAttribute("tabindex"); }
  };
  model.on(["rows", "columns", "widths", "selection", "selectable", "page_size"], draw);
  draw();
  return box;
}
"""

#: Bootstrap's table look, inside the component's shadow root.
TABLE_CSS = """
.data-table { width: 100%; height: 100%; display: flex; flex-direction: column; }
.table-scroll { flex: 1 1 auto; min-height: 0; }
.table-scroll.scrolls { overflow: auto; }
table { width: 100%; border-collapse: collapse; font-size: 0.875rem; }
th, td { padding: 4px 8px; border-bottom: 1px solid #dee2e6; text-align: left;
         vertical-align: top; overflow-wrap: break-word; }
thead th { border-bottom: 2px solid #adb5bd; background: #f8f9fa; position: sticky; top: 0; }
tbody tr:nth-child(even) { background: #f8f9fa; }
tbody tr.selected { background: #cfe2ff; }
button.sort, button.pick { all: unset; cursor: pointer; font-weight: inherit; }
button.sort { font-weight: 600; }
button.sort:focus-visible, button.pick:focus-visible, .table-scroll:focus-visible {
  outline: 2px solid #0a58ca; outline-offset: 1px; }
th[aria-sort="ascending"] button.sort::after { content: " \\25B2"; }
th[aria-sort="descending"] button.sort::after { content: " \\25BC"; }
.table-pages { display: flex; gap: 8px; align-items: center; padding: 6px 0; }
.table-pages button { padding: 2px 8px; }
"""


def cell(value: Any, spec: str) -> list[Any]:
    """One cell as ``[text, sort key]``: the text formatted by ``spec`` ('' for a missing
    number), the key the number itself (None when missing) or the text."""
    if isinstance(value, bool | np.bool_):
        return [str(bool(value)), str(bool(value))]
    if isinstance(value, numbers.Real):
        if not math.isfinite(value):
            return ["", None]
        number = int(value) if isinstance(value, numbers.Integral) else float(value)
        return [format(number, spec) if spec else str(number), number]
    if value is None or value is pd.NA or value is pd.NaT:
        return ["", None]
    return [str(value), str(value)]


class DataTable(JSComponent):
    """A DataFrame as an accessible HTML table (see the module docstring)."""

    value = param.DataFrame(default=None, allow_None=True, precedence=-1, doc="""
        The rows shown, in this order until a reader sorts by a column.""")
    titles = param.Dict(default={}, precedence=-1, doc="Column -> its title (default: its name).")
    formats = param.Dict(default={}, precedence=-1, doc="""
        Column -> Python format spec of its numbers (``",.1f"``); others as ``str``.""")
    hidden_columns = param.List(default=[], precedence=-1, doc="Columns not shown.")
    widths = param.Dict(default={}, doc="Column -> CSS width (``'18%'``).")
    selectable = param.Boolean(default=False, doc="Whether a click selects one row.")
    selection = param.List(default=[], doc="Positions in ``value`` of the selected row.")
    page_size = param.Integer(default=None, allow_None=True, bounds=(1, None), doc="""
        Rows per page (None: every row on one page).""")
    columns = param.List(default=[], constant=True, doc="[field, title] of each shown column.")
    rows = param.List(default=[], constant=True, doc="Each row's cells as [text, sort key].")

    _esm = TABLE_ESM
    _stylesheets = [TABLE_CSS]
    #: Kept in Python (precedence -1 keeps them out of the browser's data model as well).
    _rename = {"value": None, "titles": None, "formats": None, "hidden_columns": None}

    def __init__(self, value: pd.DataFrame | None = None, **params: Any) -> None:
        super().__init__(value=value, **params)
        self._cells()

    @param.depends("value", "titles", "formats", "hidden_columns", watch=True)
    def _cells(self) -> None:
        frame = self.value if self.value is not None else pd.DataFrame()
        shown = [c for c in frame.columns if c not in self.hidden_columns]
        columns = [[str(c), str(self.titles.get(c, c))] for c in shown]
        rows = [[cell(v, self.formats.get(c, "")) for c, v in zip(shown, values, strict=True)]
                for values in frame[shown].itertuples(index=False, name=None)]
        selection = [i for i in self.selection if i < len(frame)]
        with param.edit_constant(self):
            self.param.update(columns=columns, rows=rows, selection=selection)
