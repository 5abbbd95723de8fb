"""Workload builder: describe the data's attributes and the counts you need, visually or in YAML.

The page shows the view-model of :mod:`explorer.pages.builder_forms` (:class:`WorkloadBuilder`),
which edits the session's draft spec: a valid draft becomes the current scenario at once, an
invalid one is kept as typed with the validator's one-line message next to the field.

What a page open builds (issue 30: a page in under 0.2 s of web-process CPU): the attribute
card, the summary and the YAML editor. The cards under the attribute card and the workload's
matrix are built when the reader scrolls near them; messages, questions and the block choices
the first time there is one; the tables and the summary follow the session by watchers of the
page rather than bound functions (cheaper to open).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import panel as pn
import param

from engine import BLOCKS
from explorer.components.background import on_page_tick
from explorer.components.exports import text_download
from explorer.components.heatmap import matrix_heatmap
from explorer.components.lazy_view import on_sight, styled_as_on_open
from explorer.components.markdown import Markdown
from explorer.components.notes import caption
from explorer.components.number_box import NumberBox
from explorer.components.progress import served
from explorer.components.spec_editor import SpecEditor, error_in
from explorer.components.table import DataTable
from explorer.pages.base import Page
from explorer.pages.builder_forms import YAML_ONLY_BLOCKS, BlockChoice, WorkloadBuilder
from explorer.presets import PRESETS

#: About the height of the query-group, preset and file cards under the attribute card, in
#: pixels (their placeholder's until the reader scrolls near them and they are built, with the
#: workload's matrix beside them).
LOWER_CARDS_HEIGHT = 1300
#: Rows of the attribute and group tables shown at once; longer tables turn pages.
TABLE_PAGE_ROWS = 15

NOTE = """
**A workload** is the list of counting queries you want answered about a table of records,
such as "how many people are 30 or younger, by sex". Each record falls into one *cell*: one
combination of attribute values. The number of cells (the *domain size*) is the product of the
attribute sizes.

* **Attributes**: give each one a name and the number of values it takes. *Numeric* means
  the values are ordered (ages, incomes), so cumulative and range queries make sense;
  *categorical* values have no order (sex, race).
* **Query groups** build the queries. A *product* picks one *block* per attribute (all
  counts, the total, cumulative counts, ranges...) and asks every combination; attributes you
  leave out are summed over. *Marginals* are full cross-tables.
* **Presets** load common shapes, and the benchmark workloads from the HDMM paper.
* The **YAML** box on the right is the same scenario as text. Edit either side; the other
  follows. If something is wrong, a red message says which field, and your work stays.
* For small workloads, the **heat map** shows the query matrix: one row per query, one column
  per cell, coloured where a query counts that cell.
"""


class BuilderPage(Page):
    """The workload builder page."""

    title = "Workload builder"
    note = NOTE

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.model = WorkloadBuilder(self.session)
        #: The group form's number boxes (k, weight) and each block choice's width box, by
        #: attribute; filled when the query-group card is built.
        self.group_boxes: dict[str, NumberBox] = {}
        self.width_boxes: dict[str, tuple[BlockChoice, NumberBox]] = {}

    def __panel__(self) -> pn.viewable.Viewable:
        session = self.session
        session.sync_draft_privacy()
        if served():
            # Bound first: the SVD bound of each workload built here starts at once, on its
            # own thread, so Compare opens with it (Adult's takes 1-1.5 s) instead of
            # waiting for it while the page is built.
            self._start_bound()
            self.watch(session, lambda *events: self._start_bound(), "scenario")
        intro = ("Describe your data's attributes and the counts you need. Then "
                 f"{self.link('/compare', 'compare mechanisms')} on it.")
        right = pn.Column(
            Markdown("### Summary", margin=(0, 10)),
            self._summary(),
            SpecEditor(session=session),
            sizing_mode="stretch_width", min_width=420,
        )
        self._draft_status_in(right, 1)

        def lower() -> pn.viewable.Viewable:
            # the matrix on the next tick: the cards go to the browser first, not after it
            def matrix() -> None:
                right.append(styled_as_on_open(self._heatmap_part))

            if not on_page_tick(pn.state.curdoc, matrix):
                matrix()
            return styled_as_on_open(lambda: pn.Column(
                self._groups_card(), self._presets_card(), self._files_card(),
                sizing_mode="stretch_width", margin=0))

        # The cards under the attribute card and the workload's matrix under the editor start
        # below the first screen (about 920 px down in a 1280x900 window): built when the
        # reader scrolls near them, which in a browser is right after the first screen (they
        # are within on_sight's look-ahead).
        left = pn.Column(self._attributes_card(), on_sight(lower, LOWER_CARDS_HEIGHT),
                         sizing_mode="stretch_width", min_width=420)
        page = pn.Column(self.header(intro),
                         pn.Row(left, right, sizing_mode="stretch_width"),
                         sizing_mode="stretch_width", css_classes=["builder-page"])
        self._notices_in(page, 1)
        return page

    def _notices_in(self, layout: pn.layout.ListPanel, index: int) -> None:
        """At ``layout[index]``: the last thing done, the confirmation a replacement waits
        for, and the one-step Undo, each built the first time there is one (most opens show
        none of them), in that order, then shown while there is one."""
        model = self.model

        def message() -> pn.pane.Alert:
            return pn.pane.Alert(model.param.message, alert_type="info",
                                 css_classes=["builder-message"],
                                 visible=model.param.message.rx.pipe(bool))

        def question() -> pn.Row:
            replace = pn.widgets.Button(label="Replace my workload", color="warning",
                                        css_classes=["confirm-replace"])
            replace.on_click(lambda event: model.confirm())
            keep = pn.widgets.Button(label="Keep mine", color="light",
                                     css_classes=["cancel-replace"])
            keep.on_click(lambda event: model.cancel())
            return pn.Row(pn.pane.Alert(model.param.pending, alert_type="warning",
                                        css_classes=["replace-question"], margin=(0, 10)),
                          replace, keep, visible=model.param.pending.rx.pipe(bool))

        def undo() -> pn.widgets.Button:
            button = pn.widgets.Button(label=model.param.undo_label, color="light",
                                       css_classes=["undo-replace"],
                                       visible=model.param.undo_label.rx.pipe(bool))
            button.on_click(lambda event: model.undo())
            return button

        parts = {"message": message, "pending": question, "undo_label": undo}
        built: dict[str, pn.viewable.Viewable] = {}
        column = pn.Column(sizing_mode="stretch_width", margin=0)

        def first(*events: param.parameterized.Event) -> None:
            new = [name for name in parts
                   if name not in built and (getattr(model, name) or not served())]
            if new:
                if not built:
                    layout.insert(index, column)
                built.update((name, styled_as_on_open(parts[name])) for name in new)
                column.objects = [built[name] for name in parts if name in built]

        model.param.watch(first, list(parts))
        first()

    def _start_bound(self) -> None:
        """Compute the current workload's SVD bound in the background unless stored."""
        self.session.start_bound()

    # ----- cards ------------------------------------------------------------------------------
    def _attributes_card(self) -> pn.viewable.Viewable:
        model = self.model
        attribute = model.attribute
        low, high = attribute.param.size.bounds
        size = NumberBox(label=attribute.param.size.label, value=attribute.size, low=low,
                         high=high, integer=True, css_class="attr-size", width=200,
                         on_value=lambda value: setattr(attribute, "size", int(value)))
        attribute.param.watch(lambda event: setattr(size, "value", event.new), "size")
        self.size_box = size
        name = pn.widgets.TextInput.from_param(attribute.param.attr_name, placeholder="e.g. age",
                                               css_classes=["attr-name"])
        kind = pn.widgets.RadioButtonGroup.from_param(attribute.param.kind,
                                                      css_classes=["attr-kind"])
        labels = pn.widgets.TextInput.from_param(attribute.param.labels,
                                                 css_classes=["attr-labels"])
        form = pn.Column(name, size, kind, labels, css_classes=["attribute-form"],
                         sizing_mode="stretch_width")
        add = pn.widgets.Button(label="Add attribute", color="primary",
                                css_classes=["add-attribute"])
        add.on_click(lambda event: self.add_attribute())
        empty = pn.widgets.Button(label="Start empty", color="light",
                                  css_classes=["start-empty"])
        empty.on_click(lambda event: model.ask(model.start_empty, "Starting empty"))
        remove = pn.widgets.Select.from_param(model.param.remove_name, width=180,
                                              css_classes=["remove-attribute-choice"])
        remove_button = pn.widgets.Button(label="Remove", color="light", align="end")
        remove_button.on_click(
            lambda event: model.remove_name and model.remove_attribute(model.remove_name))

        def table() -> pn.viewable.Viewable:
            rows = model.attribute_rows()
            if not rows:
                return Markdown("*No attributes yet.*", css_classes=["attribute-table"])
            return listing_table(rows, "attribute-table")

        card = pn.Card(
            table(),
            form,
            pn.Row(add, empty),
            pn.Row(remove, remove_button),
            title="1. Attributes", sizing_mode="stretch_width", css_classes=["attributes-card"],
        )
        self._following(card, 0, table, ["draft"])
        error_in(card, 2, model, "attribute_error")
        return card

    def add_attribute(self) -> str:
        """What "Add attribute" does: nothing but say why while the size box holds a refused
        entry (the form's last good size would be used silently), else add it."""
        if self.size_box.problem:
            self.model.attribute_error = (f"{self.size_box.problem} The attribute was not "
                                          "added.")
            return self.model.attribute_error
        return self.model.add_attribute()

    def add_group(self) -> str:
        """What "Add group" does: nothing but say why while a box of the form (k, weight, a
        block's width) holds a refused entry, else add the group."""
        group = self.model.group
        boxes = [*self.group_boxes.values(), *(
            box for choice, box in self.width_boxes.values()
            if choice in group.blocks and "width" in BLOCKS[choice.block].options)]
        problems = [box.problem for box in boxes if box.problem]
        if problems:
            self.model.group_error = f"{' '.join(problems)} The group was not added."
            return self.model.group_error
        return self.model.add_group()

    def width_box(self, choice: BlockChoice) -> NumberBox:
        """The width box of one block choice (made once per choice)."""
        known = self.width_boxes.get(choice.attribute)
        if known is None or known[0] is not choice:
            known = self.width_boxes[choice.attribute] = (choice, NumberBox.from_param(
                choice, "width", css_class=f"width-{choice.attribute}",
                label=f"Width for {choice.attribute} (range blocks)"))
        return known[1]

    def _groups_card(self) -> pn.viewable.Viewable:
        model, group = self.model, self.model.group
        k = NumberBox.from_param(group, "k", css_class="group-k")
        weight = NumberBox.from_param(group, "weight", css_class="group-weight")
        form = pn.Column(
            pn.widgets.Select.from_param(group.param.kind, css_classes=["group-kind"]),
            pn.widgets.CheckButtonGroup.from_param(group.param.attributes,
                                                   css_classes=["group-attributes"]),
            k, weight, css_classes=["group-form"], sizing_mode="stretch_width")
        self.group_boxes.update(k=k, weight=weight)

        def block_widgets(blocks: list[BlockChoice], kind: str) -> pn.viewable.Viewable:
            if kind != "product" or not blocks:
                return pn.Spacer(height=0)
            rows = []
            for choice in blocks:
                rows.append(pn.Row(
                    pn.widgets.Select.from_param(choice.param.block,
                                                 label=f"Block for {choice.attribute}",
                                                 css_classes=[f"block-{choice.attribute}"],
                                                 width=170),
                    pn.Column(self.width_box(choice), visible=pn.bind(
                        lambda b: "width" in BLOCKS[b].options, choice.param.block)),
                    Markdown(choice.help, sizing_mode="stretch_width"),
                    sizing_mode="stretch_width"))
            return pn.Column(*rows, sizing_mode="stretch_width", css_classes=["block-choices"])

        add = pn.widgets.Button(label="Add group", color="primary",
                                css_classes=["add-group"])
        add.on_click(lambda event: self.add_group())
        remove = NumberBox.from_param(model, "remove_index", width=120,
                                      css_class="remove-group-index")
        remove_button = pn.widgets.Button(label="Remove", color="light", align="end")
        remove_button.on_click(lambda event: remove.problem  # the box says what is wrong
                               or model.remove_group(model.remove_index - 1))

        def table() -> pn.viewable.Viewable:
            rows = model.group_rows()
            if not rows:
                return Markdown("*No query groups yet.*", css_classes=["group-table"])
            return listing_table(rows, "group-table")

        # The block choices are built the first time a product group has attributes ticked,
        # then follow the form.
        blocks = pn.Column(sizing_mode="stretch_width", margin=0)

        def show_blocks(*events: param.parameterized.Event) -> None:
            if blocks.objects or (group.kind == "product" and group.blocks):
                blocks.objects = [block_widgets(group.blocks, group.kind)]

        group.param.watch(show_blocks, ["blocks", "kind"])
        show_blocks()

        card = pn.Card(
            table(),
            form,
            Markdown(group.help, margin=(0, 10)),
            blocks,
            Markdown(f"More blocks ({', '.join(YAML_ONLY_BLOCKS)}) are available in "
                             "the YAML editor.", styles={"color": "#555",
                                                         "font-size": "0.9em"}),
            add,
            pn.Row(remove, remove_button),
            title="2. Query groups", sizing_mode="stretch_width", css_classes=["groups-card"],
        )
        self._following(card, 0, table, ["draft", "draft_error"])
        error_in(card, 5, model, "group_error")
        return card

    def _presets_card(self) -> pn.viewable.Viewable:
        model = self.model
        k = NumberBox.from_param(model, "preset_k", css_class="preset-k")
        form = pn.Column(pn.widgets.Select.from_param(model.param.preset), k,
                         sizing_mode="stretch_width", css_classes=["preset-form"])
        load = pn.widgets.Button(label="Load preset", color="primary",
                                 css_classes=["load-preset"])
        load.on_click(lambda event: k.problem or model.ask(  # the box says what is wrong
            model.load_preset, f"Loading the preset '{PRESETS[model.preset].title}'"))
        describe = Markdown(
            pn.bind(lambda key: PRESETS[key].description, model.param.preset), margin=(0, 10))
        return pn.Card(form, describe, load, title="Presets", collapsed=False,
                       sizing_mode="stretch_width", css_classes=["presets-card"])

    def _files_card(self) -> pn.viewable.Viewable:
        model = self.model
        upload = pn.widgets.FileInput(accept=".yaml,.yml,.json", css_classes=["spec-upload"],
                                      label="Upload a scenario")

        def on_upload(event: Any) -> None:
            content, filename = upload.value, upload.filename

            def load() -> None:
                error = model.upload(content, filename)
                if error and pn.state.notifications is not None:
                    pn.state.notifications.error(error, duration=8000)

            if content is not None:
                model.ask(load, f"Loading {filename or 'the file'}")

        upload.param.watch(on_upload, "value")
        download = text_download(self.session.export_yaml, "scenario.yaml",
                                 "Download scenario (YAML)", css_class="yaml-download")
        card = pn.Card(
            Markdown("Load a scenario file (YAML or JSON), or save the current one.",
                             margin=(0, 10)),
            upload,
            download,
            title="Files", sizing_mode="stretch_width", css_classes=["files-card"],
        )
        error_in(card, 2, model, "upload_error", "upload-error")
        return card

    # ----- summary ------------------------------------------------------------------------------
    def _following(self, layout: pn.layout.ListPanel, index: int,
                   build: Callable[[], pn.viewable.Viewable], names: list[str]) -> None:
        """Put ``build()`` anew at ``layout[index]`` whenever the session's ``names`` change
        (a watcher of this page: cheaper to open than a bound function)."""
        def rebuild(*events: param.parameterized.Event) -> None:
            layout[index] = build()

        self.watch(self.session, rebuild, names)

    def _stats_text(self) -> str:
        stats = self.model.stats()
        return (f"**{stats['queries']:,}** queries over **{stats['cells']:,}** cells "
                f"(domain size), {stats['attributes']} attribute(s), {stats['groups']} "
                "query group(s).")

    def _draft_status(self) -> str:
        error = self.session.draft_error
        return ("The draft is not valid yet, so the last valid workload stays in use: "
                f"{error}") if error else ""

    def _summary(self) -> pn.pane.Markdown:
        """The workload's size and the YAML editor's heading (one pane: one model less to
        build on every open), kept current by a watcher of this page."""
        def text() -> str:
            return f"{self._stats_text()}\n\n### Scenario as YAML"

        stats = Markdown(text(), css_classes=["workload-stats"], margin=(0, 10),
                                 sizing_mode="stretch_width")
        self.watch(self.session, lambda *events: setattr(stats, "object", text()), "scenario")
        return stats

    def _draft_status_in(self, layout: pn.layout.ListPanel, index: int) -> None:
        """Say at ``layout[index]`` when the draft is not valid and the last valid workload
        stays in use: an alert built the first time that happens, hidden while it is valid."""
        shown: list[pn.pane.Alert] = []

        def update(*events: param.parameterized.Event) -> None:
            text = self._draft_status()
            if shown:
                shown[0].param.update(object=text, visible=bool(text))
            elif text:
                shown.append(pn.pane.Alert(text, alert_type="warning",
                                           css_classes=["draft-status"],
                                           sizing_mode="stretch_width"))
                layout.insert(index, shown[0])

        self.watch(self.session, update, "draft_error")
        update()

    def _heatmap_part(self) -> pn.viewable.Viewable:
        """The workload matrix's title and its heat map (or why it is not drawn)."""
        return pn.Column(Markdown("### The workload matrix", margin=(0, 10)),
                         pn.bind(self._heatmap_view, self.session.param.scenario),
                         sizing_mode="stretch_width", margin=0)

    def _heatmap_view(self, scenario: Any) -> pn.viewable.Viewable:
        matrix = self.model.workload_matrix()
        if isinstance(matrix, str):
            return Markdown(matrix, margin=(0, 10))
        rows, cols = matrix.shape
        return pn.Column(
            pn.pane.HoloViews(matrix_heatmap(matrix, f"Workload: {rows} queries x {cols} cells",
                                             xlabel="data cell", ylabel="query"),
                              sizing_mode="stretch_width", css_classes=["workload-heatmap"]),
            caption("Each row is one query and each column one cell (a combination of "
                    "attribute values, first attribute changing slowest). A coloured entry "
                    "means the query counts the records in that cell."),
            sizing_mode="stretch_width")


def listing_table(rows: list[dict[str, Any]], css_class: str) -> DataTable:
    """A read-only table of the draft's attributes or groups that hides no row and cuts no
    text: its height follows its rows and its columns their longest entry; over
    :data:`TABLE_PAGE_ROWS` rows it turns pages (with the page buttons under it)."""
    return DataTable(pd.DataFrame(rows), css_classes=[css_class], sizing_mode="stretch_width",
                     page_size=TABLE_PAGE_ROWS)
