"""Budget page: the privacy budget ledger (``engine.ledger``) of the data sets this server
releases from.

Register an uploaded CSV (identified by the SHA-256 of its bytes) under any name with a total
budget in rho (zCDP), eps (pure) or (eps, delta); the signed-in user owns it ("anonymous"
without sign-in). The bundled Adult data is not registered: it runs in the teaching sandbox and
is never charged. See every registered data set's spent and remaining budget as a bar
(remaining also as rho and as eps at a chosen delta); archive a data set (its history is kept
as evidence; it takes no new release); list a data set's releases with downloads of each
release record (``release.json``) and its tables (a zip of every file the release wrote).
Releases are charged only by the release pipeline (``engine.workflows.release``), which the
Release, Adaptive and Census pages and the CLI's ``run --out`` / ``census --out`` go through,
all against the same database:
``$DPWB_LEDGER_URL`` or a SQLite file under ``$DPWB_DATA_DIR``.

Example:
    >>> page = BudgetPage(ledger_url="sqlite://")
    >>> page.refresh()
    >>> page.datasets
    []
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

import pandas as pd
import panel as pn
import param

from engine import DEFAULT_DELTA, Budget, Ledger, LedgerError, SpecError, fingerprint_bytes
from explorer.components.lazy_view import Later, laid_out
from explorer.components.markdown import Markdown
from explorer.components.number_box import NumberBox
from explorer.components.plain_help import Select, TextInput

UNIT_LABELS = {"rho (zCDP)": "rho", "eps (pure)": "epsilon", "(eps, delta)": "epsilon-delta"}
#: Which releases each unit takes, beside the menu: the Census page's releases are pure eps.
UNIT_NOTE = ("rho takes every release (a pure eps release counts eps²/2); eps (pure) takes "
             "only pure releases, such as the Census page's; (eps, delta) takes every release "
             "(eps and delta add up; zCDP releases count by their total rho).")


class BudgetPage(pn.viewable.Viewer):
    """Data sets, their budgets and their release history."""

    title = param.String(default="Budget", constant=True, doc="Page title.")
    ledger_url = param.String(default=None, allow_None=True, doc="SQLAlchemy URL of the ledger "
                              "(None: $DPWB_LEDGER_URL or the SQLite default).")
    csv_file = param.Bytes(default=None, doc="Uploaded CSV (its bytes identify the data set).")
    dataset_name = param.String(default="", doc="Name of the data set in the ledger (any "
                                "name not yet registered).")
    unit = param.Selector(default="rho (zCDP)", objects=list(UNIT_LABELS),
                          doc="Unit of the total budget.")
    total = param.Number(default=1.0, bounds=(0, None), inclusive_bounds=(False, True),
                         doc="Total budget (rho or eps).")
    total_delta = param.Number(default=DEFAULT_DELTA, bounds=(0, 1),
                               inclusive_bounds=(False, False),
                               doc="delta of an (eps, delta) total.")
    at_delta = param.Number(default=DEFAULT_DELTA, bounds=(0, 1), inclusive_bounds=(False, False),
                            doc="Report remaining budgets as eps at this delta.")
    selected = param.Selector(default=None, objects=[], allow_None=True,
                              doc="The data set whose releases are listed.")
    release_id = param.Selector(default=None, objects=[], allow_None=True,
                                doc="The release whose record is offered for download.")

    datasets = param.List(default=[], doc="One row per registered data set (spent, remaining).")
    releases = param.List(default=[], doc="The selected data set's releases.")
    status = param.String(default="", doc="Status line.")
    error = param.String(default="", doc="Last error (one line).")

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._view: pn.viewable.Viewable | None = None
        self.param.watch(lambda _: self._load_history(), ["selected"])

    # ------------------------------------------------------------------------- ledger
    def refresh(self) -> None:
        """Reload every data set's status and the selected data set's history."""
        try:
            with Ledger(self.ledger_url) as ledger:
                rows = [self._row(ledger.status(d.name, float(self.at_delta)))
                        for d in ledger.datasets()]
        except LedgerError as exc:
            self.error = str(exc)
            return
        names = [r["data set"] for r in rows]
        self.param.selected.objects = names
        selected = self.selected if self.selected in names else (names[0] if names else None)
        self.param.update(datasets=rows, error="")
        if selected != self.selected:
            self.selected = selected
        else:
            self._load_history()

    @staticmethod
    def _row(status: Any) -> dict[str, Any]:
        doc = status.as_json()
        return {"data set": doc["name"], "owner": doc["owner"],
                "archived": "yes" if doc["archived"] else "no", "unit": doc["unit"],
                "total": doc["total"],
                "budget delta": doc["budget_delta"], "spent": doc["spent"],
                "remaining": doc["remaining"], "remaining rho": doc["remaining_rho"],
                "remaining eps": doc["remaining_epsilon"], "at delta": doc["at_delta"],
                "releases": doc["releases"],
                "spent %": 100.0 * min(doc["spent"] / doc["total"], 1.0),
                "fingerprint": doc["fingerprint"][:12]}

    def _load_history(self) -> None:
        if self.selected is None:
            self.param.update(releases=[])
            self.param.release_id.objects = []
            return
        try:
            with Ledger(self.ledger_url) as ledger:
                history = ledger.history(self.selected)
        except LedgerError as exc:
            self.error = str(exc)
            return
        rows = [{"id": r.id, "time": r.time.isoformat(timespec="seconds"), "status": r.status,
                 "mechanism": r.mechanism, "cost": r.cost.describe(), "user": r.user or "-",
                 "record": r.record_path or "-"} for r in history]
        ids = [r["id"] for r in rows]
        self.param.release_id.objects = ids
        self.param.update(releases=rows, release_id=ids[-1] if ids else None)

    def register(self) -> None:
        """Register the uploaded CSV under ``dataset_name`` with the chosen total, owned by the
        signed-in user (errors land in ``error``)."""
        try:
            if not self.csv_file:
                raise SpecError("data: upload a CSV file")
            unit = UNIT_LABELS[self.unit]
            budget = Budget(unit, float(self.total),
                            float(self.total_delta) if unit == "epsilon-delta" else None)
            with Ledger(self.ledger_url) as ledger:
                entry = ledger.register(self.dataset_name, fingerprint_bytes(self.csv_file),
                                        budget, user=pn.state.user)
        except (SpecError, LedgerError) as exc:
            self.error = str(exc)
            return
        self.param.update(status=f"Registered {entry.name} (owner {entry.owner}) with "
                                 f"{entry.budget.describe()}.", error="")
        self.refresh()
        self.selected = entry.name

    def archive(self) -> None:
        """Archive the selected data set (its owner only; errors land in ``error``)."""
        if self.selected is None:
            self.error = "data set: choose a data set to archive"
            return
        try:
            with Ledger(self.ledger_url) as ledger:
                entry = ledger.archive(self.selected, user=pn.state.user)
        except LedgerError as exc:
            self.error = str(exc)
            return
        self.param.update(status=f"Archived {entry.name}: its history is kept; it takes no new "
                                 "release.", error="")
        self.refresh()

    def record_file(self, name: str) -> io.BytesIO | None:
        """A file of the selected release (``release.json``, a table's CSV; None when
        absent)."""
        folder = self._release_folder()
        path = None if folder is None else folder / name
        return io.BytesIO(path.read_bytes()) if path is not None and path.is_file() else None

    def tables_zip(self) -> io.BytesIO | None:
        """Every file of the selected release (its tables and ``release.json``) as one zip
        (None when the release wrote nothing)."""
        folder = self._release_folder()
        if folder is None or not folder.is_dir():
            return None
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(folder.iterdir()):
                if path.is_file():
                    archive.write(path, path.name)
        buffer.seek(0)
        return buffer

    def _release_folder(self) -> Path | None:
        row = next((r for r in self.releases if r["id"] == self.release_id), None)
        return None if row is None or row["record"] == "-" else Path(row["record"])

    # ------------------------------------------------------------------------- view
    def _bars(self, rows: list[dict[str, Any]]) -> pn.viewable.Viewable:
        if not rows:
            return Markdown("No data set is registered yet.")
        items = []
        for r in rows:
            items.append(Markdown(
                f"**{r['data set']}**: spent {r['spent']:.6g} of {r['total']:.6g} "
                f"({r['unit']}; {r['releases']} releases), remaining {r['remaining']:.6g} = "
                f"rho {r['remaining rho']:.6g} = eps {r['remaining eps']:.6g} at delta "
                f"{r['at delta']:.3g}", margin=(0, 10), css_classes=["budget-line"]))
            items.append(pn.indicators.Progress(value=int(round(r["spent %"])), max=100,
                                                bar_color="warning", sizing_mode="stretch_width",
                                                css_classes=["budget-bar"]))
        return pn.Column(*items, sizing_mode="stretch_width")

    def __panel__(self) -> pn.viewable.Viewable:
        if self._view is not None:
            return self._view
        self.refresh()
        upload = pn.widgets.FileInput(accept=".csv", label="CSV records")
        upload.param.watch(lambda e: self.param.update(
            csv_file=e.new, dataset_name=self.dataset_name or Path(upload.filename or "").stem),
            "value")
        archive = pn.widgets.Button(label="Archive the selected data set", color="warning",
                                    css_classes=["budget-archive"])
        archive.on_click(lambda _: self.archive())
        total = NumberBox.from_param(self, "total", label="Total budget",
                                     css_class="budget-total")
        register = pn.widgets.Button(label="Register", color="primary")
        register.on_click(lambda _: total.problem or self.register())  # the box says why
        reload = pn.widgets.Button(label="Refresh")
        reload.on_click(lambda _: self.refresh())
        controls = laid_out(
            pn.Column,
            # One pane for the heading and its note (each pane is a model on every open).
            Markdown("**Register a data set**\n\nThe bundled Adult data runs in the "
                             "teaching sandbox: it is never charged, so it is not registered "
                             "here.", margin=(0, 10)),
            upload,
            TextInput.from_param(self.param.dataset_name, name="Name",
                                 css_classes=["budget-name"]),
            Select.from_param(self.param.unit, label="Unit", css_classes=["budget-unit"]),
            Markdown(UNIT_NOTE, css_classes=["budget-unit-note"]),
            total,
            # Built the first time the unit needs it (no empty holder until then).
            Later(lambda: pn.Column(NumberBox.from_param(self, "total_delta",
                                                         label="delta (eps, delta)"),
                                    visible=self.param.unit.rx() == "(eps, delta)"),
                  self.param.unit.rx() == "(eps, delta)"),
            register,
            pn.layout.Divider(),
            NumberBox.from_param(self, "at_delta", label="Report remaining eps at delta"),
            reload,
            width=320,
        )
        json_download = pn.widgets.FileDownload(
            callback=pn.bind(self.record_file, "release.json"), filename="release.json",
            label="Download release record", color="success")
        csv_download = pn.widgets.FileDownload(
            callback=self.tables_zip, filename="release.zip",
            label="Download the release's tables (zip)")
        self.param.watch(lambda _: self.refresh(), ["at_delta"])
        body = laid_out(
            pn.Column,
            Markdown(
                f"# {self.title}\n\nEvery release from a registered data set is charged here "
                "before its noise is drawn; a release past the total is refused. zCDP releases "
                "add their rho, pure-eps releases their eps (eps^2/2 in a rho budget), Gaussian "
                "(eps, delta) releases are tracked by their rho. Seeded and evaluation-only runs "
                "are not releases and are not charged."),
            # The status line and the error are empty until the first action: built then.
            Later(lambda: pn.Column(
                Markdown(self.param.status),
                pn.pane.Alert(self.param.error, alert_type="danger",
                              visible=self.param.error.rx.bool(), css_classes=["budget-error"]),
                sizing_mode="stretch_width", margin=0),
                self.param.status.rx.bool().rx.or_(self.param.error.rx.bool())),
            pn.bind(self._bars, self.param.datasets),
            pn.pane.DataFrame(self.param.datasets.rx.pipe(pd.DataFrame), index=False,
                              sizing_mode="stretch_width"),
            Markdown("**Release history**", margin=(0, 10)),
            Select.from_param(self.param.selected, name="Data set"),
            pn.pane.DataFrame(self.param.releases.rx.pipe(pd.DataFrame), index=False,
                              sizing_mode="stretch_width", css_classes=["budget-history"]),
            pn.Row(Select.from_param(self.param.release_id, name="Release"),
                   json_download, csv_download),
            archive,
            sizing_mode="stretch_width",
        )
        self._view = pn.Row(controls, body, sizing_mode="stretch_width")
        return self._view
