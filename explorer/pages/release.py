"""Release page: publish counts from your own data with a plan the Compare page made.

Three steps, each on the page:

1. **The plan**: one of the session's finished plans at the live privacy level, best first (the
   recommended one preselected), with its typical error in people at 95 %.
2. **The data**: a CSV uploaded in this session (kept with the session, on every page, until
   another file replaces it), whose SHA-256 names the data set in the budget ledger; or the
   bundled Adult data, which runs in the teaching sandbox (never charged, every output says
   "teaching: not a private release").
3. **The cost**: what the release costs and what the data set's budget keeps after it
   (:func:`engine.workflows.release.quote`), before anything is drawn; then *Release*.

The release goes through the engine's one pipeline (:func:`engine.workflows.release.release`):
the ledger is charged before any noise is drawn, the noise comes from the operating system's
entropy with exact samplers, and the published tables (one per workload term: the domain's own
values, whole non-negative counts that agree across tables, a 95 % margin) are shown and offered
for download with the release record.

Example:
    >>> from explorer.session import Session
    >>> page = ReleasePage(session=Session())
    >>> page.mechanism is None or page.mechanism in page.param.mechanism.objects
    True
"""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import pandas as pd
import panel as pn
import param

from engine import (
    BudgetExceeded,
    Dataset,
    LedgerError,
    Release,
    SpecError,
    fingerprint_bytes,
    jsonable,
    load_adult,
    load_csv,
    one_line,
    quote,
    release,
    release_cost,
    stamped_csv,
)
from explorer.components.exports import text_download
from explorer.components.table import DataTable
from explorer.pages.base import Page
from explorer.session.model import Upload

UPLOAD = "Your CSV file"
TEACHING = "Adult (bundled): teaching, not a private release"
#: The largest CSV the page reads (bytes): above it the file is refused before it is parsed.
MAX_UPLOAD_BYTES = 200 * 2**20
#: Rows of a published table shown on the page (the download has all of them).
SHOWN_ROWS = 500


class ReleasePage(Page):
    """Release a planned mechanism on a data set, charged to the budget ledger."""

    title = "Release"
    note = ("A release answers every query of the workload from real data, with noise drawn "
            "from the operating system's entropy. Its privacy cost is charged to the data set's "
            "budget before any noise is drawn; a release the budget cannot pay for is refused "
            "and nothing is drawn. The published counts are whole, never negative and agree "
            "across tables (a 1-way table is the sum of every 2-way table that contains it); "
            "the margin is the half-width of the 95 % interval of the unbiased estimate.")

    mechanism = param.Selector(default=None, objects=[], allow_None=True,
                               doc="The planned mechanism to release with (best first).")
    source = param.Selector(default=UPLOAD, objects=[UPLOAD, TEACHING],
                            doc="Where the records come from.")
    table = param.Selector(default=None, objects=[], allow_None=True,
                           doc="The published table shown on the page.")
    ledger_url = param.String(default=None, allow_None=True,
                              doc="SQLAlchemy URL of the ledger (None: the server's default).")
    data_status = param.String(default="", doc="What the chosen data is (one line).")
    data_error = param.String(default="", doc="Why the chosen data cannot be used (one line).")
    quote_line = param.String(default="", doc="What a release would cost and leave.")
    release_status = param.String(default="", doc="What the last release did.")
    error = param.String(default="", doc="Why the last release did not happen (one line).")
    released = param.ClassSelector(class_=Release, default=None, allow_None=True,
                                   doc="The last release made on this page.")

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.refresh_plans()
        self.check_data()
        self.watch(self.session, lambda *_: self.refresh_plans(), ["comparison"])
        self.watch(self.session, lambda *_: self.check_data(), ["upload", "scenario"])
        self.param.watch(lambda _: self.check_data(), ["source"])
        self.param.watch(lambda _: self.update_quote(), ["mechanism", "ledger_url"])

    # ------------------------------------------------------------------------- plans
    def planned_rows(self) -> list[Any]:
        """The session's finished, data-independent plans, best first."""
        comparison = self.session.comparison
        if comparison is None:
            return []
        return [row for row in comparison.rows if row.plan is not None]

    def refresh_plans(self) -> None:
        """Offer the finished plans; keep the chosen one while it is planned, else the best."""
        names = [row.mechanism for row in self.planned_rows()]
        keep = self.mechanism if self.mechanism in names else (names[0] if names else None)
        self.param.mechanism.objects = names
        self.mechanism = keep
        self.update_quote()

    # -------------------------------------------------------------------------- data
    def take_upload(self, content: bytes | None, filename: str | None) -> None:
        """Keep an uploaded CSV with the session once it reads over the workload's domain;
        a file that does not (empty, over :data:`MAX_UPLOAD_BYTES`, not UTF-8, columns or
        values that do not fit) is refused with one line and the previous file is kept."""
        upload = Upload(filename or "data.csv", content or b"")
        try:
            read_records(upload, self.session.workload.domain)
        except SpecError as exc:
            kept = self.session.upload
            self.data_error = str(exc) + (f" (still using {kept.name})" if kept else "")
            return
        self.source = UPLOAD
        self.session.upload = upload

    def dataset(self) -> tuple[Dataset, str | None, bool]:
        """The chosen records over the workload's attributes, their SHA-256 and whether they
        are the bundled teaching data.

        Raises:
            SpecError: no file, a file that is not UTF-8 text, or records that do not fit the
                workload's domain (one line naming the column and rows).
        """
        domain = self.session.workload.domain
        if self.source == TEACHING:
            adult = load_adult()
            names = list(domain.names)
            missing = [n for n in names if n not in adult.domain.names]
            if missing:
                raise SpecError(
                    f"data: the bundled Adult data has no attribute {missing[0]!r} (it has "
                    f"{', '.join(adult.domain.names)}); upload your own CSV or load the Adult "
                    "preset on the Workload page")
            data = adult.project(names)
            if data.domain.shape != domain.shape:
                raise SpecError("data: the bundled Adult data's attribute sizes differ from the "
                                "workload's; load the Adult preset on the Workload page")
            return data, None, True
        upload = self.session.upload
        if upload is None:
            raise SpecError(f"data: upload a CSV file with a header row and one column per "
                            f"attribute ({', '.join(domain.names)})")
        return read_records(upload, domain), fingerprint_bytes(upload.content), False

    def check_data(self) -> None:
        """Read the chosen data now, so a problem shows next to the field before Release."""
        try:
            data, _, bundled = self.dataset()
        except SpecError as exc:
            self.param.update(data_error=str(exc), data_status="")
        else:
            what = "the bundled Adult data" if bundled else self.session.upload.name
            self.param.update(data_error="",
                              data_status=f"{what}: {data.records:,} records over "
                                          f"{', '.join(data.domain.names)}.")
        self.update_quote()

    # ---------------------------------------------------------------------- release
    def update_quote(self) -> None:
        """What Release would cost and leave, from the ledger (writes nothing)."""
        row = self.session.row(self.mechanism) if self.mechanism else None
        if row is None or row.plan is None:
            self.quote_line = ""
            return
        upload = self.session.upload if self.source == UPLOAD else None
        try:
            self.quote_line = quote(
                release_cost(row.plan.privacy),
                fingerprint=fingerprint_bytes(upload.content) if upload is not None else None,
                bundled=self.source == TEACHING, ledger=self.ledger_url).line()
        except LedgerError as exc:
            self.quote_line = str(exc)

    def make_release(self) -> None:
        """Release the chosen plan on the chosen data through the pipeline; the outcome goes
        to ``release_status`` / ``error`` and the release to :attr:`released`."""
        plan = self.session.plan(self.mechanism) if self.mechanism else None
        if plan is None:
            self.param.update(release_status="Not released.",
                              error="plan: no finished plan; plan the workload on Compare first")
            return
        try:
            data, fingerprint, bundled = self.dataset()
            made = release(plan, data=data, fingerprint=fingerprint, bundled=bundled,
                           store=True, ledger=self.ledger_url, user=pn.state.user or None)
        except BudgetExceeded as exc:
            self.param.update(release_status="Refused: nothing was drawn or released.",
                              error=str(exc))
            self.update_quote()
            return
        except Exception as exc:  # shown next to the button: the user fixes the input
            self.param.update(release_status="Not released.", error=one_line(exc))
            return
        names = list(made.tables.frames)
        self.param.table.objects = names
        self.param.update(released=made, table=names[0] if names else None, error="",
                          release_status=" ".join(made.notes) or "Released.")
        self.update_quote()

    # ---------------------------------------------------------------------- outputs
    def table_frame(self, name: str | None = None) -> pd.DataFrame:
        """A published table of the last release (empty before one)."""
        name = name or self.table
        if self.released is None or name is None:
            return pd.DataFrame()
        return self.released.tables.frames[name]

    def tables_zip(self) -> bytes:
        """Every published table (CSV, with the record's provenance lines) and the release
        record, as one zip file.

        Raises:
            ValueError: nothing has been released yet.
        """
        if self.released is None:
            raise ValueError("release.zip: nothing released yet")
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, frame in self.released.tables.frames.items():
                archive.writestr(f"{file_stem(name)}.csv",
                                 stamped_csv(frame, self.released.record))
            archive.writestr("release.json", json.dumps(self.released.record, indent=2,
                                                        default=jsonable))
        return buffer.getvalue()

    # ------------------------------------------------------------------------- view
    def __panel__(self) -> pn.viewable.Viewable:
        plan_pick = pn.widgets.Select.from_param(self.param.mechanism, label="Plan to release",
                                                 width=420, css_classes=["release-plan"])
        no_plan = pn.pane.Markdown(
            f"No plan is finished yet: {self.link('/compare', 'plan the workload on Compare')} "
            "first, then come back.", visible=pn.bind(lambda m: m is None, self.param.mechanism),
            css_classes=["release-no-plan"])
        source = pn.widgets.RadioButtonGroup.from_param(self.param.source, label="Data",
                                                        css_classes=["release-source"])
        upload = pn.widgets.FileInput(accept=".csv", label="CSV records",
                                      css_classes=["release-upload"])

        def take(event: Any) -> None:
            self.take_upload(event.new, upload.filename)

        upload.param.watch(take, "value")
        data_error = pn.pane.Alert(self.param.data_error, alert_type="warning",
                                   visible=pn.bind(bool, self.param.data_error),
                                   css_classes=["release-data-error"])
        data_status = pn.pane.Markdown(self.param.data_status, css_classes=["release-data"])
        quote_pane = pn.pane.Markdown(self.param.quote_line, css_classes=["release-quote"])
        button = pn.widgets.Button(label="Release", color="primary",
                                   css_classes=["release-button"])
        button.on_click(lambda _: self.make_release())
        error = pn.pane.Alert(self.param.error, alert_type="danger",
                              visible=pn.bind(bool, self.param.error),
                              css_classes=["release-error"])
        status = pn.pane.Markdown(self.param.release_status, css_classes=["release-status"])
        return pn.Column(
            self.header("Publish the workload's counts from your data with a planned "
                        "mechanism. The budget is charged before any noise is drawn."),
            pn.pane.Markdown("### 1. The plan"), plan_pick, no_plan,
            pn.pane.Markdown("### 2. The data"), source, upload, data_status, data_error,
            pn.pane.Markdown("### 3. What it costs"), quote_pane, button, error, status,
            pn.panel(self._published, css_classes=["release-tables"]),
            sizing_mode="stretch_width", css_classes=["release-page"])

    @param.depends("released", "table")
    def _published(self) -> pn.viewable.Viewable:
        if self.released is None:
            return pn.Column()
        frame = self.table_frame()
        pick = pn.widgets.Select.from_param(self.param.table, label="Published table",
                                            width=300, css_classes=["release-table-pick"])
        shown = DataTable(frame.head(SHOWN_ROWS), sizing_mode="stretch_width", height=320,
                          css_classes=["release-table"])
        more = (f"The first {SHOWN_ROWS:,} of {len(frame):,} rows; the download has them all."
                if len(frame) > SHOWN_ROWS else "")
        record = self.released.record
        stem = file_stem(self.table or "table")
        downloads = pn.Row(
            text_download(lambda: stamped_csv(self.table_frame(), record), f"{stem}.csv",
                          f"Download {self.table} (CSV)"),
            pn.widgets.FileDownload(callback=lambda: io.BytesIO(self.tables_zip()),
                                    filename="release.zip", label="Download all tables and "
                                    "the release record (zip)", color="primary",
                                    css_classes=["release-zip"]))
        return pn.Column(pn.pane.Markdown(f"### Published tables\n{self.released.tables.method}"),
                         pick, shown, pn.pane.Markdown(more), downloads,
                         sizing_mode="stretch_width")


def read_records(upload: Upload, domain: Any) -> Dataset:
    """The records of an uploaded CSV over ``domain`` (extra columns ignored).

    Raises:
        SpecError: an empty file, one over :data:`MAX_UPLOAD_BYTES` (refused before it is
            parsed), one that is not UTF-8 text, or columns / values that do not fit.
    """
    size = len(upload.content)
    if size == 0:
        raise SpecError(f"data: {upload.name} is empty")
    if size > MAX_UPLOAD_BYTES:
        raise SpecError(f"data: {upload.name} is {size / 2**20:,.0f} MB; at most "
                        f"{MAX_UPLOAD_BYTES / 2**20:,.0f} MB can be released here (use "
                        "`python -m engine run --data FILE --out DIR`)")
    try:
        text = upload.content.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SpecError(f"data: {upload.name} is not UTF-8 text; save it as a UTF-8 CSV and "
                        "upload it again") from None
    return load_csv(io.StringIO(text), domain, ignore_extra=True, source=upload.name)


def file_stem(name: str) -> str:
    """A table name as a file name: ``age x sex`` -> ``age_x_sex``."""
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in name).strip("_.")
    return stem or "table"
