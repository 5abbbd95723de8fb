"""Census hierarchy page: consistent private group-size releases (hierarchical-pgsr).

Pick or generate a region hierarchy (nation -> states -> counties), set eps and how it is
split over the levels, choose PGSR variants and run Monte Carlo trials in a worker thread.
The page shows per-level error bars, an error heat map over size x level, consistency
violations and runtimes, and a map-free tree view of one region's released vs true counts.
Every number comes from ``engine.workflows.evaluate.census_trials``; this module only arranges it.
The table downloads as ``census.csv``: plain CSV, counts as whole numbers, with the run's
privacy level, noise and hierarchy as columns (those of
:data:`explorer.components.exports.SCENARIO_COLUMNS`, as the other pages' exports).

The trials are evaluation only (they score releases against the true data). **Release**
draws one release of the chosen variant through the release pipeline
(``engine.workflows.release``): an uploaded hierarchy registered on the Budget page is charged
(pure eps) before any noise is drawn, refused past its budget with what still fits, and kept
beside the ledger; the published tables (one per level, regions named, whole counts with
``margin_95`` and the raw noisy counts; the method says whether the variant's counts are
consistent; :func:`engine.workflows.census_tables.hierarchy_tables`) download here as
``census-release.zip``, with their provenance lines and the record. Synthetic hierarchies
release nothing private, a seeded release is teaching only; neither is charged.

Privacy unit: one *individual* joining or leaving a group (household); the number of groups
n is public. The page says so next to the controls.

Example:
    >>> page = CensusPage(synthetic_spec="levels=1,2,4;groups=200;max_size=5;seed=0",
    ...                   variants=["dp"], trials=2)
    >>> page.run()
    >>> list(page.results_frame()["variant"])
    ['dp']
"""

from __future__ import annotations

import io
from typing import Any

import pandas as pd
import panel as pn
import param

from engine import (
    CENSUS_VARIANT_TITLES,
    CENSUS_VARIANTS,
    SEEDED_LABEL,
    BudgetExceeded,
    Cancelled,
    Cost,
    LedgerError,
    Privacy,
    Progress,
    Release,
    SpecError,
    census_row,
    census_trials,
    example_hierarchy,
    fingerprint_bytes,
    load_hierarchy,
    one_line,
    quote,
    release,
    release_zip,
    synthetic_hierarchy,
)
from explorer.components.exports import SCENARIO_COLUMNS, csv_download
from explorer.components.lazy_view import Later, laid_out, once_true
from explorer.components.markdown import Markdown
from explorer.components.notes import folded_note
from explorer.components.number_box import NumberBox
from explorer.components.plain_help import Select, TextInput
from explorer.components.worker import BackgroundRun

SYNTHETIC = "synthetic"
EXAMPLE = "running example"
UPLOAD = "upload CSV"
DEFAULT_SPEC = "levels=1,6,30;groups=20000;max_size=50;seed=0"
VARIANT_CHOICES = list(CENSUS_VARIANTS)
PRIVACY_NOTE = ("**Privacy unit: one individual** (a person joining or leaving a household); "
                "pure eps-DP, the number of groups n is public. Under the *group* unit (a whole "
                "household added or removed) the matrix-mechanism pages' sensitivities apply.")
NOTE = """
Every region (nation, states, counties...) gets a **histogram of group sizes**: how many
households have 1 person, 2 people, and so on. Each variant adds noise to these counts and then
repairs them in its own way; the table compares them over several simulated releases.

* **rmse**: the typical error of one count (households of one size in one region), in
  households; **rmse_sd** its spread over the trials; **rmse_level_k** the same for level k only
  (1 = the top).
* **violations**: how many parent counts differ from the sum of their children's in a release
  (0 means the published tables add up everywhere); **negative_cells**: counts below zero.
* **seconds**: time per release.

The variants (from Fioretto, Van Hentenryck & Zhu 2021, and two classic baselines):
""" + "\n".join(f"* **{name}**: {title}" for name, title in CENSUS_VARIANT_TITLES.items()) + """

M_DP repairs each histogram by dynamic programming; M_CDP works on cumulative counts;
M_CDP* chains the levels; M_H^R relaxes the problem to a quadratic programme and rounds (its
counts may then not add up); TopDown fixes each level from the one above; GLS is the least
squares estimate (consistent, but not whole numbers).
"""
EMPTY_STATE = ("**No results yet.** Choose a hierarchy and the variants on the left, then press "
               "**Run trials**: the table, the error chart, the heat map and the tree view "
               "appear here.")


def whole_numbers(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every float column whose values are all whole numbers as integers
    (counts print as ``20000``, not ``20000.0``)."""
    out = frame.copy()
    for column in out.columns:
        values = out[column]
        if pd.api.types.is_float_dtype(values) and len(values) and values.notna().all() \
                and (values == values.round()).all():
            out[column] = values.astype("int64")
    return out


def count_text(value: float) -> str:
    """A number of groups as a person reads it, with thousands separators: whole (``20,000``)
    unless a variant released a fraction, then one decimal (GLS: ``4,225.7``)."""
    return f"{value:,.1f}".removesuffix(".0")


#: Columns of the tree view's table, all numbers of groups.
CHILDREN_COUNTS = ("true groups", "released groups", "L1 distance")
#: most size buckets drawn in the tree view (the rest are summarised in the table)
TREE_SIZES = 40
#: Columns ``census.csv`` adds after :data:`SCENARIO_COLUMNS`.
RUN_COLUMNS = ("privacy_unit", "split", "trials")


class CensusPage(BackgroundRun, pn.viewable.Viewer):
    """Census hierarchy: PGSR variants on a generated or uploaded region hierarchy."""

    thread_name = "census-run"

    title = param.String(default="Census hierarchy", constant=True, doc="Page title.")
    source = param.Selector(default=SYNTHETIC, objects=[SYNTHETIC, EXAMPLE, UPLOAD],
                            doc="Where the hierarchy comes from.")
    synthetic_spec = param.String(default=DEFAULT_SPEC,
                                  doc="Synthetic census: levels (regions per level), groups "
                                      "(n), max_size (top bucket), seed.")
    csv_file = param.Bytes(default=None, doc="Uploaded hierarchy CSV (levels..., size[, count]).")
    csv_name = param.String(default="hierarchy.csv", doc="Name of the uploaded CSV.")
    epsilon = param.Number(default=1.0, bounds=(1e-4, 100.0), softbounds=(0.05, 5.0),
                           doc="Total privacy budget eps (pure eps-DP).")
    split = param.Selector(default="uniform", objects=["uniform", "user", "inverse-variance"],
                           doc="How eps is split over the levels.")
    level_weights = param.String(default="", doc="Budget weights per level, root first, "
                                                 "e.g. 1,1,2 (for the user split).")
    noise = param.Selector(default="geometric", objects=["geometric", "laplace"],
                           doc="Integer double-geometric or Laplace noise.")
    variants = param.ListSelector(default=["dp", "cdp", "topdown", "relaxed"],
                                  objects=VARIANT_CHOICES, doc="Variants to compare.")
    trials = param.Integer(default=5, bounds=(1, 500), doc="Monte Carlo trials per variant.")
    seed = param.Integer(default=None, bounds=(0, None), allow_None=True,
                         doc="Seed of the noise, for teaching only (empty: OS entropy).")
    max_size = param.Integer(default=None, bounds=(1, None), allow_None=True,
                             doc="Top size bucket of an uploaded hierarchy: public, never read "
                                 "from the private CSV.")
    heat_variant = param.Selector(default="dp", objects=VARIANT_CHOICES,
                                  doc="Variant shown in the heat map and tree view.")
    region = param.Selector(default=None, objects=[], allow_None=True,
                            doc="Region shown in the tree view.")

    # ----- outputs (set by runs; read by the view and by tests)
    running = param.Boolean(default=False, doc="A run is in progress.")
    status = param.String(default="Choose a hierarchy and variants, then Run.",
                          doc="Status line.")
    error = param.String(default="", doc="Last error message (one line).")
    progress = param.Number(default=0.0, bounds=(0.0, 100.0), doc="Share of trials done (%).")
    results = param.List(default=[], doc="One summary row per variant.")
    description = param.String(default="", doc="One line describing the hierarchy.")
    release_variant = param.Selector(default="dp", objects=VARIANT_CHOICES,
                                     doc="The variant Release draws one release of.")
    ledger_url = param.String(default=None, allow_None=True, doc="SQLAlchemy URL of the budget "
                              "ledger (None: $DPWB_LEDGER_URL or the SQLite default).")
    release_status = param.String(default="", doc="What the last Release did (one line).")
    release_method = param.String(default="", doc="The last release's published tables: "
                                  "post-processing, consistency and margins, in words.")
    quote_line = param.String(default="", doc="What Release would cost and leave (or why it "
                              "is not charged).")

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.hierarchy: Any = None
        self.evaluations: dict[str, Any] = {}
        self._view: pn.viewable.Viewable | None = None
        # The privacy settings the shown results were run with: the CSV describes them, not
        # the widgets now.
        self._run_settings: dict[str, Any] | None = None
        #: the last release through the pipeline (record, tables, ledger status)
        self.released: Release | None = None

    # ----------------------------------------------------------------- engine objects
    def load_hierarchy(self) -> Any:
        """The hierarchy chosen by ``source`` (a SpecError names what is wrong)."""
        if self.source == EXAMPLE:
            return example_hierarchy()
        if self.source == UPLOAD:
            if not self.csv_file:
                raise SpecError("upload: choose a hierarchy CSV first")
            if self.max_size is None:
                raise SpecError("max size: required for an uploaded hierarchy (the size range "
                                "must be public, not read from the private CSV)")
            return load_hierarchy(io.StringIO(self.csv_file.decode("utf-8")),
                                  max_size=self.max_size)
        return synthetic_hierarchy(self.synthetic_spec)

    def weights(self) -> list[float]:
        """Parsed ``level_weights`` (empty unless the split is user-set)."""
        if self.split != "user":
            return []
        try:
            return [float(x) for x in self.level_weights.split(",") if x.strip()]
        except ValueError:
            raise SpecError(f"level weights: expected numbers like 1,1,2, got "
                            f"{self.level_weights!r}") from None

    # ------------------------------------------------------------------------ running
    def _prepare(self) -> None:
        self._progress = Progress()
        self.evaluations = {}
        self._run_settings = self.privacy_settings()
        self.param.update(running=True, error="", progress=0.0, results=[],
                          status="Loading the hierarchy...")

    def _job(self) -> None:
        rows: list[dict[str, Any]] = []
        status, error = "", ""

        def tick(variant: str, trial: int, share: float) -> None:
            self._dispatch(lambda: self.param.update(
                progress=100.0 * share, status=f"{variant}: trial {trial}/{self.trials}"))

        def finished(evaluation: Any) -> None:
            self.evaluations[evaluation.variant] = evaluation
            rows.append(census_row(evaluation))
            self._dispatch(lambda r=list(rows): self.param.update(results=r))

        try:
            hierarchy = self.load_hierarchy()
            weights = self.weights()
            self._dispatch(lambda: self._loaded(hierarchy))
            census_trials(hierarchy, self.variants, self.epsilon, self.trials, noise=self.noise,
                          split=self.split, level_weights=weights, seed=self.seed,
                          progress=self._progress, on_trial=tick, on_variant=finished)
            status = (f"Done: {len(rows)} variant(s) x {self.trials} trial(s) at "
                      f"eps = {self.epsilon:g}. Evaluation against the true data: not a "
                      "release; the budget ledger is not charged.")
        except Cancelled:
            status = f"Cancelled: {len(rows)} variant(s) finished."
        except Exception as exc:  # shown on the page: the user fixes the input
            error = one_line(exc)
            status = "Stopped by an error."
        self._dispatch(lambda: self._finish(rows, status, error))

    def make_release(self) -> None:
        """Draw one release of ``release_variant`` through the release pipeline (charged when
        the uploaded hierarchy is registered; module docstring). The outcome lands in
        ``release_status`` and ``error``; the release in :attr:`released`."""
        try:
            hierarchy = self.load_hierarchy()
            upload = self.source == UPLOAD
            released = release(
                "hierarchical-pgsr", data=hierarchy,
                knobs={"variant": self.release_variant, "noise": self.noise,
                       "split": self.split, "level_weights": self.weights()},
                privacy=Privacy(noise="laplace", epsilon=float(self.epsilon)),
                fingerprint=fingerprint_bytes(self.csv_file) if upload else None,
                seed=self.seed, store=True, ledger=self.ledger_url, user=pn.state.user)
        except BudgetExceeded as exc:
            self.param.update(release_status="Refused: nothing was released.", error=str(exc),
                              release_method="")
            self.update_quote()
            return
        except Exception as exc:  # shown on the page: the user fixes the input
            self.param.update(release_status="Not released.", error=one_line(exc),
                              release_method="")
            return
        self.released = released
        checks = released.record.get("consistency_violations", 0)
        charged = "; ".join(released.notes)
        if released.charged is None:
            charged = f"not charged: {charged}"
        self.param.update(error="", release_method=released.tables.method, release_status=(
            f"Released {self.release_variant} at eps = {self.epsilon:g} "
            f"({checks} consistency violations); {charged}."))
        self.update_quote()

    def update_quote(self) -> None:
        """Put what Release would cost and leave in ``quote_line`` (reads the ledger, writes
        nothing; an uploaded hierarchy is charged, a synthetic one is not)."""
        upload = self.source == UPLOAD and self.csv_file
        try:
            line = quote(Cost.pure(float(self.epsilon)),
                         fingerprint=fingerprint_bytes(self.csv_file) if upload else None,
                         seed=self.seed, ledger=self.ledger_url).line()
        except LedgerError as exc:
            line = str(exc)
        self.quote_line = line

    def released_zip(self) -> bytes:
        """The last release's tables (one CSV per level, each with its provenance lines) and
        ``release.json``, as one zip file.

        Raises:
            ValueError: nothing has been released yet.
        """
        if self.released is None:
            raise ValueError("census-release.zip: nothing released yet")
        return release_zip(self.released.tables, self.released.record)

    def _loaded(self, hierarchy: Any) -> None:
        self.hierarchy = hierarchy
        labels = [hierarchy.tree.label(lev, i) for lev in range(hierarchy.tree.depth)
                  for i in range(hierarchy.tree.level_sizes[lev])]
        self.param.region.objects = labels
        if self.region not in labels:
            self.region = labels[0]
        self.description = hierarchy.describe()

    def _finish(self, rows: list[dict[str, Any]], status: str, error: str) -> None:
        done = [r["variant"] for r in rows]
        changes: dict[str, Any] = {"running": False, "results": rows, "status": status,
                                   "error": error}
        if done and self.heat_variant not in done:
            changes["heat_variant"] = done[0]
        if rows:
            changes["progress"] = 100.0
        self.param.update(**changes)

    # ------------------------------------------------------------------ view-model data
    def results_frame(self) -> pd.DataFrame:
        """One row per finished variant."""
        return pd.DataFrame(self.results)

    def privacy_settings(self) -> dict[str, Any]:
        """The current privacy level and noise as ``census.csv`` columns: pure eps-DP, so
        ``delta`` and ``rho`` are empty; the privacy unit, the budget split over the levels and
        the Monte Carlo trials per variant."""
        split = f"user {self.level_weights}" if self.split == "user" else self.split
        return {"privacy": f"pure eps-DP eps={self.epsilon:g}", "noise": self.noise,
                "epsilon": float(self.epsilon), "delta": None, "rho": None,
                "privacy_unit": "individual", "split": split, "trials": int(self.trials)}

    def export_frame(self) -> pd.DataFrame:
        """The results table as ``census.csv`` saves it: counts as whole numbers, then the
        run's :meth:`privacy_settings` and its hierarchy in the columns of
        :data:`SCENARIO_COLUMNS` (``workload``: the hierarchy in one line; ``queries``: its
        (size, region) counts; ``cells``: its (size, leaf region) cells), then
        :data:`RUN_COLUMNS`.

        Raises:
            ValueError: no run has loaded a hierarchy yet.
        """
        if self._run_settings is None or self.hierarchy is None:
            raise ValueError("census.csv: nothing to export before a run")
        values = {**self._run_settings, "workload": self.hierarchy.describe(),
                  "queries": self.hierarchy.num_queries,
                  "cells": int(self.hierarchy.leaf_counts.size)}
        out = whole_numbers(self.results_frame())
        for column in (*SCENARIO_COLUMNS, *RUN_COLUMNS):
            out[column] = values[column]
        return out

    def level_frame(self) -> pd.DataFrame:
        """Long frame for the error bars: variant, level, rmse, sd, l1."""
        rows = []
        for v, ev in self.evaluations.items():
            names = self.hierarchy.tree.level_names
            for lev, (m, s, l1) in enumerate(zip(ev.rmse_by_level, ev.rmse_by_level_sd,
                                                 ev.l1_by_level, strict=True)):
                rows.append({"variant": v, "level": f"{lev + 1} {names[lev]}",
                             "rmse": float(m), "sd": float(s), "l1": float(l1)})
        return pd.DataFrame(rows, columns=["variant", "level", "rmse", "sd", "l1"])

    def heatmap_frame(self, variant: str | None = None) -> pd.DataFrame:
        """Long frame for the heat map: size bucket, level, RMSE."""
        ev = self.evaluations.get(variant or self.heat_variant)
        if ev is None:
            return pd.DataFrame(columns=["size", "level", "rmse"])
        labels = self.hierarchy.sizes.labels
        names = self.hierarchy.tree.level_names
        rows = [{"size": labels[i], "level": f"{lev + 1} {names[lev]}", "rmse": float(x)}
                for lev, row in enumerate(ev.rmse_size_level) for i, x in enumerate(row)]
        return pd.DataFrame(rows)

    def _region_index(self, label: str | None) -> tuple[int, int]:
        tree = self.hierarchy.tree
        for lev in range(tree.depth):
            for i in range(tree.level_sizes[lev]):
                if tree.label(lev, i) == label:
                    return lev, i
        return 0, 0

    def tree_frame(self, region: str | None = None, variant: str | None = None
                   ) -> pd.DataFrame:
        """The region and its children: per size, true and released counts (last trial)."""
        ev = self.evaluations.get(variant or self.heat_variant)
        if ev is None or self.hierarchy is None:
            return pd.DataFrame(columns=["region", "role", "size", "true", "released"])
        tree, labels = self.hierarchy.tree, self.hierarchy.sizes.labels
        lev, idx = self._region_index(region or self.region)
        nodes = [(lev, idx, "selected")]
        nodes += [(lev + 1, c, "child") for c in tree.children(lev, idx)]
        rows = []
        for node_lev, node, role in nodes:
            true = self.hierarchy.levels[node_lev][node]
            released = ev.last_release.levels[node_lev][node]
            for i, label in enumerate(labels):
                rows.append({"region": tree.names[node_lev][node], "role": role, "size": label,
                             "true": float(true[i]), "released": float(released[i])})
        return pd.DataFrame(rows)

    def breadcrumb(self, region: str | None = None) -> str:
        """Markdown path of the region (root first) with its level names."""
        if self.hierarchy is None:
            return ""
        tree = self.hierarchy.tree
        lev, idx = self._region_index(region or self.region)
        parts = [f"{tree.level_names[i]} **{name}**" for i, name in
                 enumerate(tree.path(lev, idx))]
        children = len(tree.children(lev, idx))
        tail = f" -- {children} {tree.level_names[lev + 1]}(s) below" if children else " (leaf)"
        return " / ".join(parts) + tail

    # ------------------------------------------------------------------------- charts
    def error_bars_chart(self) -> Any:
        """Per-level RMSE (mean over trials) with +-1 sd error bars, one colour per variant."""
        import holoviews as hv
        import holoviews.plotting.bokeh  # noqa: F401  (registers the backend)

        frame = self.level_frame()
        if frame.empty:
            return hv.Curve([]).opts(title="Per-level RMSE (run to fill)", responsive=True,
                                     height=260)
        overlays = []
        for v, part in frame.groupby("variant", sort=False):
            scatter = hv.Scatter(part, "level", ["rmse", "sd", "l1"], label=v).opts(
                size=8, tools=["hover"])
            bars = hv.ErrorBars(part, "level", ["rmse", "sd"])
            curve = hv.Curve(part, "level", "rmse", label=v)
            overlays += [curve, scatter, bars]
        return hv.Overlay(overlays).opts(title="RMSE per (size, region) query, by level "
                                               "(mean +- sd over trials)",
                                         responsive=True, height=300, logy=True,
                                         legend_position="right", ylabel="RMSE",
                                         shared_axes=False)

    def heatmap_chart(self, variant: str | None = None) -> Any:
        """RMSE over size x level for one variant."""
        import holoviews as hv
        import holoviews.plotting.bokeh  # noqa: F401  (registers the backend)

        frame = self.heatmap_frame(variant)
        name = variant or self.heat_variant
        return hv.HeatMap(frame, ["size", "level"], "rmse").opts(
            title=f"RMSE by size x level ({name})", responsive=True, height=260,
            cmap="viridis", colorbar=True, tools=["hover"], xrotation=90,
            shared_axes=False)

    def tree_chart(self, region: str | None = None, variant: str | None = None) -> Any:
        """Released vs true counts of the selected region, per size (first sizes shown)."""
        import holoviews as hv
        import holoviews.plotting.bokeh  # noqa: F401  (registers the backend)

        frame = self.tree_frame(region, variant)
        sel = frame[frame["role"] == "selected"].head(TREE_SIZES)
        long = pd.concat([sel.assign(series="true", count=sel["true"]),
                          sel.assign(series="released", count=sel["released"])])
        if long.empty:
            long = pd.DataFrame({"size": [], "series": [], "count": []})
        return hv.Bars(long, ["size", "series"], "count").opts(
            title=f"{region or self.region}: released vs true (last trial)", responsive=True,
            height=260, tools=["hover"], xrotation=90, multi_level=False, shared_axes=False)

    # ------------------------------------------------------------------------- view
    def __panel__(self) -> pn.viewable.Viewable:
        if self._view is not None:
            return self._view
        upload = pn.widgets.FileInput(accept=".csv", label="Hierarchy CSV")

        def take_csv(event: Any) -> None:
            self.param.update(csv_file=event.new, csv_name=upload.filename or "hierarchy.csv",
                              source=UPLOAD)

        upload.param.watch(take_csv, "value")
        run = pn.widgets.Button(label="Run trials", color="primary")
        release_button = pn.widgets.Button(label="Release", color="success",
                                           css_classes=["census-release"])
        release_button.on_click(lambda event: self.make_release())
        self.update_quote()
        self.param.watch(lambda _: self.update_quote(),
                         ["source", "csv_file", "epsilon", "seed", "ledger_url"])
        release_download = pn.widgets.FileDownload(
            callback=lambda: io.BytesIO(self.released_zip()), filename="census-release.zip",
            label="Download the released tables (zip)", color="light",
            css_classes=["census-release-zip"], width=240)
        released = self.param.release_status.rx.pipe(lambda text: text.startswith("Released"))
        release_download.visible = released
        cancel = pn.widgets.Button(label="Cancel", color="warning")
        run.on_click(lambda event: self.start())
        cancel.on_click(lambda event: self.cancel())
        run.disabled = self.param.running
        cancel.disabled = self.param.running.rx.not_()
        controls = laid_out(
            pn.Column,
            pn.widgets.RadioButtonGroup.from_param(self.param.source, label="Hierarchy"),
            TextInput.from_param(self.param.synthetic_spec, label="Synthetic spec",
                                            visible=self.param.source.rx() == SYNTHETIC),
            Later(lambda: pn.Column(upload, Markdown(
                "CSV header: the level names, then `size` and optionally `count`; one row "
                "per (leaf, size) with its count, or one row per group."),
                NumberBox.from_param(self, "max_size", label="Max size (public top bucket)",
                                     css_class="census-max-size"),
                visible=self.param.source.rx() == UPLOAD), self.param.source.rx() == UPLOAD),
            # Number boxes, not spinners: a spinner's up/down buttons have no name a screen
            # reader can read, and a box says what is wrong with what was typed.
            NumberBox.from_param(self, "epsilon", label="epsilon", css_class="census-epsilon"),
            Select.from_param(self.param.split, label="Budget split over levels"),
            # Parts hidden until a choice shows them are built then, not on every open, and
            # nothing stands in for them until then (``Later``: no empty holder).
            Later(lambda: TextInput.from_param(
                self.param.level_weights, label="Level weights (root first)",
                visible=self.param.split.rx() == "user"), self.param.split.rx() == "user"),
            Select.from_param(self.param.noise, label="Noise"),
            pn.widgets.CheckBoxGroup.from_param(self.param.variants, label="Variants"),
            NumberBox.from_param(self, "trials", label="Trials", css_class="census-trials"),
            NumberBox.from_param(self, "seed", label="Seed (teaching only)",
                                 css_class="census-seed"),
            Later(lambda: pn.pane.Alert(SEEDED_LABEL, alert_type="warning",
                                        visible=self.param.seed.rx().rx.is_not(None)),
                  self.param.seed.rx().rx.is_not(None)),
            pn.Row(run, cancel),
            Markdown("**Release** (one draw, through the budget ledger)",
                             margin=(0, 10)),
            Select.from_param(self.param.release_variant, label="Variant to release"),
            Markdown(self.param.quote_line, css_classes=["census-quote"]),
            release_button,
            # What the last release did, its tables and their method: empty until the first
            # Release, and built then (each pane is a model on every open).
            Later(lambda: pn.Column(
                Markdown(self.param.release_status,
                                 css_classes=["census-release-status"]),
                once_true(lambda: release_download, released, sizing_mode="fixed"),
                Markdown(self.param.release_method,
                                 css_classes=["census-release-method"]), margin=0),
                self.param.release_status.rx.bool().rx.or_(self.param.release_method.rx.bool())),
            Markdown(PRIVACY_NOTE),
            width=320,
        )
        bar = pn.indicators.Progress(value=self.param.progress.rx.pipe(lambda v: int(round(v))),
                                     max=100, sizing_mode="stretch_width")
        has_results = self.param.results.rx.pipe(bool)
        empty = Markdown(EMPTY_STATE, css_classes=["census-empty"],
                                 visible=has_results.rx.not_())
        body = laid_out(
            pn.Column,
            Markdown(
                f"# {self.title}\n\nPrivate group-size histograms (how many households of "
                "each size) for every region of a hierarchy. The consistent variants (dp, cdp, "
                "chain, topdown) release non-negative integers, parents equal to the sums of "
                "their children and every level summing to the public n; relaxed and gls are "
                "baselines that may not be (see the violations column) (Fioretto, Van "
                "Hentenryck & Zhu 2021). Errors are "
                "Monte Carlo RMSE per (size, region) query against the true data "
                "(evaluation only)."),
            folded_note(NOTE),
            # The hierarchy's description and the status in one pane; the error, hidden until
            # there is one, built then.
            Markdown(pn.bind(lambda description, status: "\n\n".join(
                line for line in (description, status) if line),
                self.param.description, self.param.status)),
            Later(lambda: pn.pane.Alert(self.param.error, alert_type="danger",
                                        visible=self.param.error.rx.bool()),
                  self.param.error.rx.bool()),
            bar, empty,
            # Hidden until the first results: built then, not on every open (Later).
            Later(lambda: pn.Column(self._results_view(has_results),
                                    self._tree_view(has_results),
                                    sizing_mode="stretch_width", margin=0), has_results),
            sizing_mode="stretch_width",
        )
        self._view = pn.Row(controls, body, sizing_mode="stretch_width")
        return self._view

    def _results_view(self, has_results: Any) -> pn.Column:
        """The results table, its download and the error bars (shown while there are
        results)."""
        bars = pn.pane.HoloViews(pn.bind(lambda rows: self.error_bars_chart() if rows else None,
                                         self.param.results), sizing_mode="stretch_width")
        table = pn.pane.DataFrame(
            self.param.results.rx.pipe(lambda rows: whole_numbers(pd.DataFrame(rows))),
            index=False, sizing_mode="stretch_width", float_format="{:.4g}".format,
            css_classes=["census-results"])
        download = csv_download(self.export_frame, "census.csv", "Download table (CSV)",
                                css_class="census-csv")
        download.visible = has_results
        return pn.Column(table, download, bars, sizing_mode="stretch_width",
                         visible=has_results)

    def _tree_view(self, has_results: Any) -> pn.Column:
        """The heat map and the tree view of one variant (shown while there are results)."""
        heat = pn.pane.HoloViews(pn.bind(lambda rows, v: self.heatmap_chart(v) if rows else None,
                                         self.param.results, self.param.heat_variant),
                                 sizing_mode="stretch_width")
        tree = pn.pane.HoloViews(pn.bind(lambda rows, v, reg: self.tree_chart(reg, v)
                                         if rows else None,
                                         self.param.results, self.param.heat_variant,
                                         self.param.region), sizing_mode="stretch_width")
        crumb = Markdown(pn.bind(lambda _r, reg: self.breadcrumb(reg),
                                         self.param.results, self.param.region))
        children = pn.pane.DataFrame(
            pn.bind(lambda _r, v, reg: whole_numbers(self._children_table(reg, v)),
                    self.param.results,
                    self.param.heat_variant, self.param.region),
            index=False, sizing_mode="stretch_width", css_classes=["census-children"],
            formatters=dict.fromkeys(CHILDREN_COUNTS, count_text))
        return pn.Column(
            Select.from_param(self.param.heat_variant, label="Variant for the "
                                         "heat map and tree view"),
            heat,
            Markdown("## Tree view"),
            Select.from_param(self.param.region, label="Region"),
            crumb, tree, children, sizing_mode="stretch_width", visible=has_results)

    def _children_table(self, region: str | None, variant: str | None) -> pd.DataFrame:
        """Per child region: true and released totals and L1 distance (last trial)."""
        frame = self.tree_frame(region, variant)
        if frame.empty:
            return pd.DataFrame(columns=["region", "role", *CHILDREN_COUNTS])
        frame = frame.assign(diff=(frame["released"] - frame["true"]).abs())
        out = frame.groupby(["region", "role"], sort=False).agg(
            true=("true", "sum"), released=("released", "sum"), l1=("diff", "sum"))
        return out.reset_index().rename(columns=dict(zip(("true", "released", "l1"),
                                                         CHILDREN_COUNTS, strict=True)))


def census_page() -> CensusPage:
    """A fresh page (one per browser session)."""
    return CensusPage()


if __name__.startswith("bokeh"):  # `panel serve explorer/pages/census.py`
    census_page().servable()
