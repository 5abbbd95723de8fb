"""Adaptive (data-dependent) page: run AIM+GReM on real data and compare it with ResidualPlanner.

The page is a view-model (parameters: data set, workload, privacy, rounds cap, comparisons) plus
its view. The runs and their errors against the truth come from
``engine.workflows.evaluate.compare_adaptive``; the page only builds its inputs, runs it off the
event loop in a worker thread, and shows the per-round log (its columns explained beside it), the
comparison table (counts as whole numbers with thousands separators) and a CSV export
(``adaptive.csv``: plain CSV with the privacy level, noise and workload as columns).
A user CSV is only accepted with a public domain file (JSON or YAML): the domain is never
inferred from the private records.

Every run releases AIM+GReM through the release pipeline (``engine.workflows.release``): on a
data set registered on the Budget page its cost (the zCDP rho of the (eps, delta) asked for) is
charged before any noise is drawn, a run past the data set's budget is refused with the
ledger's one line (and what still fits), and the release is kept beside the ledger for the
Budget page. The published tables (one per workload marginal, cells named in the data's
values, whole non-negative counts that agree across tables, ``margin_95`` and the raw GReM-MLE
estimate; :func:`engine.workflows.adaptive_tables.adaptive_tables`) are shown here and
download as ``aim-grem-release.zip`` (every table with its provenance lines, and the
record). The comparison rows (errors against the true data) are evaluation only and not part
of the release. A seeded run, the bundled Adult data (the teaching sandbox) or an
unregistered upload is not charged and the status line says so.

Mount it with ``from explorer.pages.adaptive import AdaptivePage``.

Example:
    >>> page = AdaptivePage(attributes=["age", "sex", "race"], max_rounds=10)
    >>> page.run()
    >>> [row["method"] for row in page.results]
    ['AIM+GReM', 'ResidualPlanner (batch)']
"""

from __future__ import annotations

import io
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import pandas as pd
import panel as pn
import param

from engine import (
    AIM_GREM,
    SEEDED_LABEL,
    BudgetExceeded,
    Cancelled,
    Domain,
    Ledger,
    LedgerError,
    Privacy,
    Progress,
    Release,
    SpecError,
    Workload,
    adult_domain,
    compare_adaptive,
    data_file,
    default_url,
    fingerprint_bytes,
    fingerprint_file,
    load_adult,
    load_csv,
    load_text,
    one_line,
    pgm_available,
    quote,
    release,
    release_cost,
    release_rng,
    release_zip,
    sqlite_file,
)
from explorer.components.exports import csv_download, scenario_columns
from explorer.components.notes import folded_note
from explorer.components.number_box import NumberBox
from explorer.components.worker import BackgroundRun
from explorer.pages.compare import WRAPPED_BOXES

ADULT = "Adult (bundled)"
UPLOAD = "Uploaded CSV + domain"
#: seconds between live updates of the chart and progress bar while a run is going.
LIVE_INTERVAL = 0.3
#: The adaptive page's default delta: AIM's experiments (McKenna et al. 2022) use 1e-9, so its
#: results are comparable with the paper's; everywhere else the default is
#: :data:`engine.privacy.DEFAULT_DELTA` (1e-6).
AIM_DELTA = 1e-9

NOTE = """
Here the mechanism looks at the **private records themselves** to decide what to measure, so
unlike the other pages it needs data: the bundled Adult census extract or your own CSV with a
public domain file.

* The **workload** is every k-way marginal (every table of counts over k attributes) of the
  attributes you choose.
* **AIM+GReM** runs in rounds: each round privately picks the marginal that looks worst
  estimated so far (scatter "Selected marginal"), measures it with part of the budget ("Budget
  spent", in zCDP rho) and re-fits all estimates. The last chart shows the workload's error
  falling as rounds go by.
* The table compares methods: **seconds** of run time, **rounds**, **rho spent**, and the
  errors against the true data: the L1 error of a marginal is the sum of its counts'
  absolute errors, in records (mean and max over the marginals), and "/ N" divides it by the
  number of records.
  ResidualPlanner measures every marginal without looking at the data, as a yardstick.
* The **round by round** table under the charts lists AIM+GReM's last rounds; each of its
  columns is explained right above it.
* The errors are an evaluation only: a real release never sees the true answers.
"""
EMPTY_STATE = ("**No results yet.** Choose the data and the attributes on the left, then press "
               "**Run**: the comparison table, its CSV and the per-round charts appear here.")

#: Columns of the per-round log: key in :attr:`AdaptivePage.rounds` -> (title on the page,
#: what it means in plain words). A count is a number of records.
ROUND_COLUMNS: dict[str, tuple[str, str]] = {
    "round": ("Round", "the round number (round 1 comes after the start-up measurement of "
                       "every one-way marginal)"),
    "marginal": ("Marginal measured", "the table of counts picked this round, privately, as "
                                      "the one that looked worst estimated"),
    "rho_round": ("rho this round", "zCDP budget spent this round, on picking the marginal and "
                                    "on measuring it"),
    "rho_used": ("rho spent so far", "zCDP budget spent up to the end of this round, the "
                                     "start-up measurements included"),
    "sigma": ("Noise sigma (records)", "standard deviation of the Gaussian noise added to each "
                                       "count of the marginal measured this round, in records"),
    "expected_l1": ("Expected error of the marginal (records)",
                    "the error AIM+GReM expects on that marginal after this round: the sum of "
                    "its counts' expected absolute errors, in records, worked out from the "
                    "noise alone (no true data)"),
    "workload_error": ("Workload error (records)",
                       "mean over the workload's marginals of the sum of their counts' absolute "
                       "errors after this round, in records, against the true data (evaluation "
                       "only)"),
    "annealed": ("Less noise next round", "yes when this measurement moved the estimate no more "
                                          "than its noise would: the next round then halves "
                                          "sigma (at four times the budget)"),
    "skipped": ("Pieces skipped", "how many of the marginal's pieces (residuals) were not "
                                  "measured because earlier rounds already pin them down; the "
                                  "round's budget is spent all the same"),
}
#: Rows of the released table shown on the page (the download has every cell).
RELEASED_SHOWN = 20
#: Rows of the per-round log shown on the page (the CSV has every round).
ROUNDS_SHOWN = 50
#: The explanation shown above the per-round log.
ROUNDS_HELP = (f"### Round by round (last {ROUNDS_SHOWN} rounds)\n\n" + "\n".join(
    f"* **{title}**: {meaning}." for title, meaning in ROUND_COLUMNS.values()))


def count_text(value: float | None) -> str:
    """A count of records as a person reads it: whole with thousands separators (``2,764``),
    one decimal below 100 (``20.7``); empty when not a number."""
    if value is None or math.isnan(value):
        return ""
    return f"{value:,.1f}" if abs(value) < 100 else f"{value:,.0f}"


def _column_text(column: str) -> Callable[[Any], str]:
    """How the on-page tables print one column's values, chosen from its name."""
    if column in ("rounds", "round", "skipped"):
        return lambda v: f"{int(v):,}"
    if column.endswith("(counts)") or column in ("sigma", "expected_l1", "workload_error"):
        return count_text
    if column == "seconds":
        return lambda v: f"{v:,.2f}"
    if column == "annealed":
        return lambda v: "yes" if v else "no"
    return lambda v: f"{v:.3g}" if isinstance(v, float) else str(v)


def _as_text(frame: pd.DataFrame) -> pd.DataFrame:
    """Every value of ``frame`` as the text the page shows."""
    return frame.apply(lambda values: values.map(_column_text(str(values.name))))


def comparison_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The comparison table as the page shows it: errors in records as whole numbers with
    thousands separators (one decimal below 100), per-record errors and rho to 3 significant
    digits, seconds to 2 decimals."""
    return _as_text(pd.DataFrame(rows))


def rounds_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The last :data:`ROUNDS_SHOWN` rounds as the page shows them: the titles of
    :data:`ROUND_COLUMNS` and counts in records as :func:`count_text` prints them."""
    frame = pd.DataFrame(rows).tail(ROUNDS_SHOWN)
    shown = [column for column in ROUND_COLUMNS if column in frame]
    return _as_text(frame[shown]).rename(
        columns={key: title for key, (title, _) in ROUND_COLUMNS.items()})


def labelled_checkbox(owner: param.Parameterized, name: str, label: str, *, css_class: str,
                      disabled: bool = False) -> pn.widgets.CheckBoxGroup:
    """A check box for the Boolean parameter ``name`` of ``owner``, kept in step both ways,
    whose input sits inside its ``<label>`` (a screen reader reads ``label``).

    A one-box group: Bokeh's single Checkbox puts its text beside the input, not in a label
    tied to it, so the box would have no name."""
    box = pn.widgets.CheckBoxGroup(options=[label], value=[label] if getattr(owner, name) else [],
                                   disabled=disabled, css_classes=[css_class])
    box.param.watch(lambda event: setattr(owner, name, label in event.new), "value")
    owner.param.watch(lambda event: setattr(box, "value", [label] if event.new else []), name)
    return box


def adult_attributes() -> list[str]:
    """Attribute names of the bundled Adult domain (public; no records read)."""
    return list(adult_domain().names)


def parse_domain(text: str, filename: str = "domain") -> Any:
    """A public domain from JSON or YAML text (``{attribute: size | {size, labels, ...}}``).

    Raises:
        SpecError: unreadable text or a bad domain entry (one line naming the field).
    """
    fmt = "json" if filename.lower().endswith(".json") else "yaml"
    spec = load_text(text, fmt, where=filename)
    if isinstance(spec, dict) and "domain" in spec and isinstance(spec["domain"], dict):
        spec = spec["domain"]
    if not isinstance(spec, dict) or not spec:
        raise SpecError(f"{filename}: expected a mapping attribute -> size or "
                        "{size, kind, labels, bin_edges}")
    return Domain.from_spec(spec)


class AdaptivePage(BackgroundRun, pn.viewable.Viewer):
    """Adaptive (data-dependent) marginal release: AIM+GReM against ResidualPlanner."""

    thread_name = "aim-grem-run"

    title = param.String(default="Adaptive (data-dependent)", constant=True,
                         doc="Page title.")
    dataset = param.Selector(default=ADULT, objects=[ADULT, UPLOAD],
                             doc="The records to release marginals of.")
    csv_file = param.Bytes(default=None, doc="Uploaded CSV (header row, one column per "
                                             "domain attribute).")
    csv_name = param.String(default="data.csv", doc="Name of the uploaded CSV.")
    domain_file = param.Bytes(default=None, doc="Uploaded public domain (JSON or YAML).")
    domain_name = param.String(default="domain.json", doc="Name of the uploaded domain file.")
    attributes = param.ListSelector(default=["age", "workclass", "education-num", "sex",
                                             "race", "income>50K"], objects=[],
                                    doc="Attributes the workload covers (empty = all); fewer "
                                        "attributes run faster.")
    way = param.Selector(default=2, objects=[2, 3], doc="All k-way marginals over the chosen "
                                                        "attributes.")
    epsilon = param.Number(default=1.0, bounds=(0.001, 100.0), softbounds=(0.01, 10.0),
                           doc="Privacy loss eps of the (eps, delta) guarantee.")
    delta = param.Number(default=AIM_DELTA, bounds=(1e-15, 0.1),
                         doc="delta of the (eps, delta) guarantee (default 1e-9, AIM's published "
                             "setting; the other pages default to 1e-6).")
    max_rounds = param.Integer(default=None, bounds=(1, 100_000), allow_None=True,
                               doc="Rounds cap (empty: the paper's schedule); the budget is "
                                   "spread over about this many rounds.")
    seed = param.Integer(default=None, bounds=(0, None), allow_None=True,
                         doc="Seed of the run's noise, for teaching only (empty: OS entropy).")
    compare_rp = param.Boolean(default=True, doc="Also run the batch ResidualPlanner on the "
                                                 "same data and budget.")
    compare_pgm = param.Boolean(default=False, doc="Also run AIM+PGM (needs the optional mbi "
                                                   "package: install .[pgm]).")
    post_processing = param.Selector(default="raw", objects=["raw", "clip", "clip+rescale"],
                                     doc="Post-processing of the estimates for the errors "
                                         "shown (raw is the paper's output).")

    # ----- outputs (set by runs; read by the view and by tests)
    running = param.Boolean(default=False, doc="A run is in progress.")
    status = param.String(default="Choose data and a workload, then Run.", doc="Status line.")
    error = param.String(default="", doc="Last error message (one line).")
    progress = param.Number(default=0.0, bounds=(0.0, 100.0),
                            doc="Share of the budget spent by AIM+GReM (percent).")
    rounds = param.List(default=[], doc="AIM+GReM per-round log (rows).")
    results = param.List(default=[], doc="Comparison rows, one per method.")
    ledger_url = param.String(default=None, allow_None=True, doc="SQLAlchemy URL of the budget "
                              "ledger (None: $DPWB_LEDGER_URL or the SQLite default).")
    budget_line = param.String(default="", doc="The data set's budget after the last run.")
    budget_share = param.Number(default=0.0, bounds=(0.0, 100.0),
                                doc="Share of the data set's budget spent (percent).")
    quote_line = param.String(default="", doc="What the next run's release would cost and "
                              "leave (or why it is not charged).")
    released_rows = param.List(default=[], doc="The first rows of the last release's first "
                               "table (attribute values, estimate, margin_95, raw; records).")
    released_name = param.String(default="", doc="Name of the table in ``released_rows``.")
    released_method = param.String(default="", doc="The last release's post-processing and "
                                    "margins, in words.")

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.param.attributes.objects = adult_attributes()
        self._pending: list[dict[str, Any]] = []
        self._last_push = 0.0
        self._lock = threading.Lock()
        self._view: pn.viewable.Viewable | None = None
        # What the shown results were run with: the CSV describes them, not the widgets now.
        self._run_privacy: Any = None
        self._run_workload: Any = None
        self._run_release = ""
        #: the last AIM+GReM release (record, tables, ledger status), None before a run
        self.released: Release | None = None

    # ------------------------------------------------------------------ engine objects
    def load_data(self) -> Any:
        """The chosen records as an ``engine.data.Dataset`` (restricted to the attributes).

        Raises:
            SpecError: missing uploads, a bad domain file or a CSV that does not fit it.
        """
        if self.dataset == ADULT:
            data = load_adult()
        else:
            if not self.domain_file:
                raise SpecError("domain: upload a public domain file (JSON or YAML); the "
                                "domain is never inferred from the private records")
            if not self.csv_file:
                raise SpecError("data: upload a CSV file")
            domain = parse_domain(self.domain_file.decode("utf-8"), self.domain_name)
            data = load_csv(io.StringIO(self.csv_file.decode("utf-8")), domain,
                            ignore_extra=True, source=self.csv_name)
        chosen = [a for a in self.attributes if a in data.domain.names]
        return data.project(chosen) if chosen else data

    def workload(self, data: Any) -> Any:
        """All ``way``-way marginals over the data's attributes.

        Raises:
            SpecError: fewer attributes than the marginal order.
        """
        if len(data.domain.names) < self.way:
            raise SpecError(f"attributes: all {self.way}-way marginals need at least {self.way} "
                            f"attributes, got {len(data.domain.names)}")
        return Workload.marginals(data.domain, k=int(self.way))

    def privacy(self) -> Any:
        """The Gaussian (eps, delta) level; the engine converts it to zCDP rho."""
        return Privacy(noise="gaussian", epsilon=float(self.epsilon), delta=float(self.delta))

    @staticmethod
    def pgm_available() -> bool:
        """True when AIM+PGM can run (mbi and JAX installed)."""
        return pgm_available()

    # ------------------------------------------------------------------------ running
    def _prepare(self) -> None:
        self._progress = Progress()
        self._pending = []
        self._run_privacy, self._run_workload = self.privacy(), None
        self._run_release = SEEDED_LABEL if self.seed is not None else "OS entropy"
        self.released = None
        self.param.update(released_rows=[], released_name="", released_method="",
                          running=True, error="", progress=0.0, rounds=[],
                          results=[], status="Loading data...")

    def _on_round(self, record: Any, share: float, label: Callable[[Any], str]) -> None:
        row = {"round": record.round, "marginal": label(record.marginal),
               "rho_used": record.rho_used, "rho_round": record.rho_round,
               "sigma": record.sigma, "expected_l1": record.expected_l1,
               "workload_error": record.workload_error, "annealed": record.annealed,
               "skipped": len(record.skipped)}
        with self._lock:
            self._pending.append(row)
        now = time.perf_counter()
        if now - self._last_push >= LIVE_INTERVAL or record.final:
            self._last_push = now
            self._dispatch(lambda: self._flush(100.0 * share, f"Round {record.round}: "
                                                              f"{row['marginal']}"))

    def _flush(self, share: float | None = None, status: str | None = None) -> None:
        with self._lock:
            new, self._pending = self._pending, []
        changes: dict[str, Any] = {}
        if new:
            changes["rounds"] = self.rounds + new
        if share is not None:
            changes["progress"] = share
        if status is not None:
            changes["status"] = status
        self.param.update(**changes)

    def fingerprint(self) -> tuple[str, bool]:
        """SHA-256 of the chosen data file (the bundled Adult CSV or the uploaded bytes) and
        whether it is bundled demo data (the teaching sandbox, never charged)."""
        if self.dataset == ADULT:
            path, bundled = data_file("adult")
            return fingerprint_file(path), bundled
        return fingerprint_bytes(self.csv_file or b""), False

    def update_quote(self) -> None:
        """Put what a run would cost and leave in ``quote_line`` (reads the ledger, writes
        nothing)."""
        try:
            fingerprint, bundled = self.fingerprint()
            line = quote(release_cost(self.privacy()), fingerprint=fingerprint, bundled=bundled,
                         seed=self.seed, ledger=self.ledger_url,
                         at_delta=float(self.delta)).line()
        except LedgerError as exc:
            line = str(exc)
        self.quote_line = line

    def _job(self) -> None:
        fingerprint, bundled = None, False
        privacy = self._run_privacy
        try:
            data = self.load_data()
            workload = self._run_workload = self.workload(data)
            fingerprint, bundled = self.fingerprint()
            self._run(data, workload, privacy, fingerprint, bundled)
        except Cancelled:
            self._dispatch(lambda: self._finish([], "Cancelled: nothing was released.", ""))
        except BudgetExceeded as exc:
            message = str(exc)
            self._dispatch(lambda: self._finish([], "Refused: nothing was released.", message))
        except Exception as exc:  # shown as a one-line error; the user's settings stay
            message = one_line(exc)
            self._dispatch(lambda: self._finish([], "Failed.", message))
        finally:
            if fingerprint is not None and self.seed is None and not bundled:
                self._show_budget(fingerprint)

    def _show_budget(self, fingerprint: str) -> None:
        """Put the data set's spent / remaining line and bar on the page (registered data
        only; a SQLite ledger file that does not exist yet is not created)."""
        path = sqlite_file(self.ledger_url or default_url())
        if path is not None and not path.exists():
            return
        try:
            with Ledger(self.ledger_url) as ledger:
                entry = ledger.dataset(fingerprint)
                status = None if entry is None else ledger.status(entry.name, float(self.delta))
        except LedgerError as exc:
            line, share = str(exc), 0.0
        else:
            if status is None:
                return
            line = f"Budget of {status.line()}"
            share = 100.0 * min(status.spent.spent / status.dataset.budget.total, 1.0)
        self._dispatch(lambda: self.param.update(budget_line=line, budget_share=share))

    def _run(self, data: Any, workload: Any, privacy: Any, fingerprint: str,
             bundled: bool) -> None:
        """Release AIM+GReM at ``privacy`` through the release pipeline (charged before any
        noise is drawn when the data set is registered; kept beside the ledger), then run the
        comparisons on the same data (evaluation only). Raises what the release raises
        (a charged release then counts as failed: nothing was published)."""
        names = workload.domain.names
        rho = privacy.zcdp_rho()

        def label(gamma: Any) -> str:
            return " x ".join(names[k] for k in gamma)

        def running(method: str) -> None:
            if method != AIM_GREM:
                self._dispatch(lambda: self._flush(100.0, f"{AIM_GREM} done"))
            self._dispatch(lambda: setattr(self, "status", f"Running {method}..."))

        running(AIM_GREM)
        released = release("aim-grem", data=data, workload=workload, privacy=privacy,
                           knobs={"max_rounds": self.max_rounds}, fingerprint=fingerprint,
                           bundled=bundled, seed=self.seed, store=True, ledger=self.ledger_url,
                           user=pn.state.user, at_delta=float(self.delta),
                           progress=self._progress,
                           on_round=lambda r: self._on_round(r, min(1.0, r.rho_used / rho),
                                                             label))
        self.released = released
        name, frame = next(iter(released.tables.frames.items()))
        rows = frame.head(RELEASED_SHOWN).to_dict("records")
        self._dispatch(lambda: self.param.update(released_rows=rows, released_name=name,
                                                 released_method=released.tables.method))
        self._run_release = released.record["notice"] or "private release (OS entropy)"
        comparison = compare_adaptive(
            data, workload, privacy, residual_planner=self.compare_rp, pgm=self.compare_pgm,
            post_processing=self.post_processing, rng=release_rng(self.seed),
            progress=self._progress, on_method=running, released=released.result)
        ours = released.result
        done = (f"Done: {len(ours.rounds)} rounds, rho = {ours.rho_spent:.6g} spent of "
                f"{comparison.rho:.6g} (eps = {privacy.epsilon:g}, delta = {privacy.delta:g}).")
        if released.charged is not None:
            note = (f"Released: charged {released.charged.describe()} to "
                    f"{released.status.dataset.name} (AIM+GReM estimates; the comparison rows "
                    f"are evaluation only).")
        else:
            note = f"Not charged: {'; '.join(released.notes)}."
        self._dispatch(lambda: self._finish(comparison.rows(), f"{done} {note}", ""))

    def released_zip(self) -> bytes:
        """The released AIM+GReM tables (one CSV per workload marginal, each with the record's
        provenance lines: UTC time, version, mechanism, privacy, noise, post-processing, data
        SHA-256, budget) and ``release.json``, as one zip file.

        Raises:
            ValueError: nothing has been released yet.
        """
        released: Release | None = self.released
        if released is None:
            raise ValueError("aim-grem-release.zip: nothing released yet")
        return release_zip(released.tables, released.record)

    def _finish(self, rows: list[dict[str, Any]], status: str, error: str) -> None:
        self.update_quote()
        self._flush()
        self.param.update(results=rows, status=status, error=error, running=False)
        if error and pn.state.notifications is not None:
            pn.state.notifications.error(error)

    # ---------------------------------------------------------------------- outputs
    def results_frame(self) -> pd.DataFrame:
        """The comparison table (one row per method; errors labelled raw or / N)."""
        return pd.DataFrame(self.results)

    def rounds_frame(self) -> pd.DataFrame:
        """The AIM+GReM per-round log."""
        return pd.DataFrame(self.rounds)

    def export_frame(self) -> pd.DataFrame:
        """The comparison table and the round log as one table, as ``adaptive.csv`` saves it:
        a ``table`` column says which part a row belongs to, ``release`` whether the run was
        seeded, and the run's privacy level, noise and workload are columns on every row
        (:func:`explorer.components.exports.scenario_columns`). Integer columns (``rounds``,
        ``round``, ``skipped``, ...) stay integers, empty on the rows of the other part.

        Raises:
            ValueError: no run has got as far as its workload yet.
        """
        if self._run_workload is None:
            raise ValueError("adaptive.csv: nothing to export before a run")
        parts = [frame for frame in (
            self.results_frame().assign(
                table="comparison (errors against the true data: evaluation only)"),
            self.rounds_frame().assign(table="AIM+GReM rounds")) if len(frame)]
        frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["table"])
        for column in frame.columns:
            if all(pd.api.types.is_integer_dtype(part[column]) for part in parts
                   if column in part):
                frame[column] = frame[column].astype("Int64")
        frame.insert(0, "table", frame.pop("table"))
        frame["release"] = self._run_release
        return scenario_columns(frame, self._run_privacy, self._run_workload)

    def chart(self) -> Any:
        """Per-round HoloViews chart: selected marginal, budget spent and current error."""
        import holoviews as hv
        import holoviews.plotting.bokeh  # noqa: F401  (registers the backend; no notebook JS)

        frame = self.rounds_frame()
        if frame.empty:
            frame = pd.DataFrame({"round": [], "marginal": [], "rho_used": [],
                                  "workload_error": []})
        opts = {"responsive": True, "height": 220, "tools": ["hover"]}
        selected = hv.Scatter(frame, "round", "marginal", label="selected marginal").opts(
            title="Selected marginal", size=6, **opts)
        budget = hv.Curve(frame, "round", "rho_used").opts(
            title="Budget spent (zCDP rho)", **opts)
        error = hv.Curve(frame, "round", "workload_error").opts(
            title="Mean L1 error of the workload (vs true data, evaluation only)", **opts)
        return hv.Layout([selected, budget, error]).cols(1)

    # ------------------------------------------------------------------------- view
    def __panel__(self) -> pn.viewable.Viewable:
        if self._view is not None:
            return self._view
        upload_csv = pn.widgets.FileInput(accept=".csv", label="CSV records")
        upload_domain = pn.widgets.FileInput(accept=".json,.yaml,.yml", label="Domain (JSON/YAML)")

        def take_csv(event: Any) -> None:
            self.param.update(csv_file=event.new, csv_name=upload_csv.filename or "data.csv")

        def take_domain(event: Any) -> None:
            self.param.update(domain_file=event.new,
                              domain_name=upload_domain.filename or "domain.json")
            try:
                names = list(parse_domain(event.new.decode("utf-8"), self.domain_name).names)
            except Exception as exc:  # shown, not raised: the user fixes the file
                self.error = one_line(exc)
                return
            self.param.attributes.objects = names
            self.attributes = [a for a in self.attributes if a in names]

        def take_dataset(event: Any) -> None:
            if event.new == ADULT:
                self.param.attributes.objects = adult_attributes()

        upload_csv.param.watch(take_csv, "value")
        self.update_quote()
        self.param.watch(lambda _: self.update_quote(),
                         ["dataset", "csv_file", "epsilon", "delta", "seed", "ledger_url"])
        upload_domain.param.watch(take_domain, "value")
        self.param.watch(take_dataset, "dataset")

        run = pn.widgets.Button(label="Run", color="primary")
        cancel = pn.widgets.Button(label="Cancel", color="warning")
        run.on_click(lambda event: self.start())
        cancel.on_click(lambda event: self.cancel())
        run.disabled = self.param.running
        cancel.disabled = self.param.running.rx.not_()
        pgm_note = ("" if self.pgm_available() else
                    "AIM+PGM needs the optional mbi package (`pip install .[pgm]`).")
        controls = pn.Column(
            pn.pane.Markdown("**Data**", margin=(0, 10)),
            pn.widgets.RadioButtonGroup.from_param(self.param.dataset, label="Data"),
            pn.Column(upload_csv, upload_domain,
                      pn.pane.Markdown("The domain must be public: it is never inferred from "
                                       "the records."),
                      visible=self.param.dataset.rx() == UPLOAD),
            # Check boxes, not a multi-choice menu: each is a labelled native input that a
            # keyboard and a screen reader reach (the menu's chips carry ARIA states axe
            # refuses), as on the Compare page.
            pn.pane.Markdown("**Attributes** (none ticked: all)", margin=(0, 10)),
            pn.widgets.CheckBoxGroup.from_param(self.param.attributes, inline=True,
                                                sizing_mode="stretch_width",
                                                css_classes=["adaptive-attributes"],
                                                stylesheets=[WRAPPED_BOXES]),
            pn.pane.Markdown("**Workload: all k-way marginals**", margin=(0, 10)),
            pn.widgets.RadioButtonGroup.from_param(self.param.way, label="Marginals (k-way)"),
            # Number boxes, not spinners: a spinner's up/down buttons have no name a screen
            # reader can read, and a box says what is wrong with what was typed.
            NumberBox.from_param(self, "epsilon", label="epsilon", css_class="adaptive-epsilon"),
            NumberBox.from_param(self, "delta", label="delta (1e-9 as in the AIM paper)",
                                 css_class="adaptive-delta"),
            NumberBox.from_param(self, "max_rounds", label="Rounds cap",
                                 css_class="adaptive-rounds-cap"),
            NumberBox.from_param(self, "seed", label="Seed (teaching only)",
                                 css_class="adaptive-seed"),
            pn.pane.Alert(SEEDED_LABEL, alert_type="warning",
                          visible=self.param.seed.rx().rx.is_not(None)),
            labelled_checkbox(self, "compare_rp", "Compare with ResidualPlanner",
                              css_class="adaptive-compare-rp"),
            labelled_checkbox(self, "compare_pgm", "Compare with AIM+PGM",
                              css_class="adaptive-compare-pgm",
                              disabled=not self.pgm_available()),
            pn.pane.Markdown(pgm_note),
            pn.widgets.Select.from_param(self.param.post_processing,
                                         label="Post-processing for errors"),
            pn.Row(run, cancel),
            width=320,
        )
        bar = pn.indicators.Progress(value=self.param.progress.rx.pipe(lambda v: int(round(v))),
                                     max=100, sizing_mode="stretch_width")
        download = pn.Row(
            csv_download(self.export_frame, "adaptive.csv", css_class="adaptive-csv"),
            pn.widgets.FileDownload(callback=lambda: io.BytesIO(self.released_zip()),
                                    filename="aim-grem-release.zip",
                                    label="Download the released tables (zip)", color="light",
                                    css_classes=["adaptive-release-zip"], width=240))
        # HTML tables: bokeh's ColumnDataSource (Tabulator) trips pandas 3 deprecations. Wider
        # than the page (11 columns), they scroll sideways instead of being cut off.
        wide = {"overflow-x": "auto"}
        table = pn.pane.DataFrame(self.param.results.rx.pipe(comparison_table), index=False,
                                  sizing_mode="stretch_width", css_classes=["adaptive-results"],
                                  styles=wide)
        rounds = pn.Column(
            pn.pane.Markdown(ROUNDS_HELP, css_classes=["adaptive-rounds-help"]),
            pn.pane.DataFrame(self.param.rounds.rx.pipe(rounds_table), index=False,
                              sizing_mode="stretch_width", css_classes=["adaptive-rounds"],
                              styles=wide),
            sizing_mode="stretch_width")
        released = pn.Column(
            pn.pane.Markdown(self.param.released_name.rx.pipe(
                lambda name: f"### Released: {name} (first {RELEASED_SHOWN} rows; the download "
                             "has every table, every cell and its provenance)")),
            pn.pane.Markdown(self.param.released_method, css_classes=["adaptive-method"]),
            pn.pane.DataFrame(self.param.released_rows.rx.pipe(pd.DataFrame), index=False,
                              sizing_mode="stretch_width", css_classes=["adaptive-released"]),
            visible=self.param.released_rows.rx.bool())
        chart = pn.pane.HoloViews(pn.bind(lambda _: self.chart(), self.param.rounds),
                                  sizing_mode="stretch_width")
        # Before a run there is nothing to chart: say what to do instead of empty axes.
        has_results = pn.bind(lambda results, rounds: bool(results or rounds),
                              self.param.results, self.param.rounds)
        no_results = pn.bind(lambda results, rounds: not (results or rounds),
                             self.param.results, self.param.rounds)
        body = pn.Column(
            pn.pane.Markdown(
                f"# {self.title}\n\nAIM+GReM (Fuentes, Mullins et al.) chooses which marginals "
                "to measure from the private data itself, measures residuals with budgets set "
                "by Conditional ResidualPlanner and reconstructs with GReM-MLE. Errors compare "
                "against the true data (evaluation only); estimates are the raw, possibly "
                "negative output unless a post-processing is chosen."),
            folded_note(NOTE),
            pn.pane.Markdown(self.param.status, css_classes=["adaptive-status"]),
            pn.pane.Markdown(self.param.quote_line, css_classes=["adaptive-quote"]),
            pn.pane.Alert(self.param.error, alert_type="danger",
                          visible=self.param.error.rx.bool(), css_classes=["adaptive-error"]),
            pn.Column(pn.pane.Markdown(self.param.budget_line),
                      pn.indicators.Progress(
                          value=self.param.budget_share.rx.pipe(lambda v: int(round(v))),
                          max=100, sizing_mode="stretch_width", bar_color="warning",
                          css_classes=["adaptive-budget-bar"]),
                      visible=self.param.budget_line.rx.bool()),
            bar,
            pn.pane.Markdown(EMPTY_STATE, css_classes=["adaptive-empty"],
                             visible=no_results),
            pn.Column(table, download, released, chart, rounds, sizing_mode="stretch_width",
                      visible=has_results),
            sizing_mode="stretch_width",
        )
        self._view = pn.Row(controls, body, sizing_mode="stretch_width")
        return self._view
