"""The workload builder's view-model: the forms and the operations that edit the draft.

:class:`WorkloadBuilder` edits the session's draft spec. Every change goes through the engine's
validator: a valid draft becomes the current scenario at once, an invalid one is kept as typed
with the validator's one-line message next to the field, and the last valid workload stays
current until the draft is fixed. The page (:mod:`explorer.pages.builder`) shows it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import param

from engine import BLOCKS, GROUPS, Attribute, Domain, Marginals, PairQueries, Product, parse_group
from explorer.components.heatmap import too_big
from explorer.components.messages import plain
from explorer.presets import PRESETS, build_preset

#: Blocks offered in the visual menu: every registered block whose only option is a width
#: (the YAML editor accepts every block).
MENU_BLOCKS = tuple(name for name, block in BLOCKS.items() if set(block.options) <= {"width"})
#: Blocks with richer options, written in the YAML editor.
YAML_ONLY_BLOCKS = tuple(name for name in BLOCKS if name not in MENU_BLOCKS)
#: Group kinds the form builds from chosen attributes (and blocks, for a product), with a
#: plain explanation each; explicit-row kinds are for the YAML editor.
GROUP_HELP = {kind: group.kinds[kind] for kind, group in GROUPS.items()
              if issubclass(group, Product | Marginals | PairQueries)}
#: Largest workload (queries x cells) whose matrix is drawn.
HEATMAP_LIMIT = 1_000_000


def attribute_spec(name: str, size: int, kind: str, labels: str) -> tuple[str, Any]:
    """The ``domain:`` entry for an attribute typed into the form."""
    label_list = [s.strip() for s in labels.split(",") if s.strip()] if labels.strip() else None
    if kind == "categorical" and label_list is None:
        return name, int(size)
    spec: dict[str, Any] = {"size": int(size), "kind": kind}
    if label_list is not None:
        spec["labels"] = label_list
    return name, spec


def _mentions(value: Any, name: str) -> bool:
    """True when an attribute name appears as a key or a string value inside a group spec."""
    if isinstance(value, dict):
        return name in value or any(_mentions(v, name) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_mentions(v, name) for v in value)
    return value == name


def group_summary(group: Any) -> str:
    """A short description of one workload item for the group list."""
    if not isinstance(group, dict):
        return str(group)
    kind = next((k for k in group if k != "weight"), "?")
    body = group.get(kind)
    if kind == "product" and isinstance(body, dict):
        parts = [f"{attr}: {b if isinstance(b, str) else b.get('block', '?')}"
                 for attr, b in body.items()]
        return "product of " + (", ".join(parts) if parts else "the total")
    group_class = GROUPS.get(kind)
    if group_class is not None and issubclass(group_class, Marginals) and isinstance(body, dict):
        if "sets" in body:
            sets = body["sets"]
            shown = "; ".join(" x ".join(s) for s in sets[:4]) + (" ..." if len(sets) > 4 else "")
            return f"{kind.replace('_', '-')} on {shown} ({len(sets)} tables)"
        return f"{kind.replace('_', '-')}, " + ", ".join(f"{k} = {v}" for k, v in body.items())
    return f"{kind}: {body}"


class AttributeForm(param.Parameterized):
    """The 'add an attribute' form."""

    attr_name = param.String(default="", label="Name", doc="Attribute name, e.g. age.")
    size = param.Integer(default=10, bounds=(1, 1_000_000), label="Number of values")
    kind = param.Selector(default="numeric", objects=["numeric", "categorical"], label="Kind")
    labels = param.String(default="", label="Value labels (optional, comma-separated)")


class BlockChoice(param.Parameterized):
    """The block chosen for one attribute of a product group."""

    attribute = param.String(default="", constant=True, doc="The attribute this block is for.")
    block = param.Selector(default="identity", objects=list(MENU_BLOCKS), label="Block")
    width = param.Integer(default=2, bounds=(1, None), label="Width (range blocks)")

    def spec(self) -> Any:
        """The block as a spec value."""
        if "width" in BLOCKS[self.block].options:
            return {"block": self.block, "width": int(self.width)}
        return self.block

    @param.depends("block")
    def help(self) -> str:
        """One line on what the chosen block asks."""
        return f"*{self.attribute}*: {BLOCKS[self.block].help}"


class GroupForm(param.Parameterized):
    """The 'add a query group' form."""

    kind = param.Selector(default="product", objects=list(GROUP_HELP), label="Kind of group")
    attributes = param.ListSelector(default=[], objects=[], label="Attributes")
    weight = param.Number(default=1.0, bounds=(0, None), inclusive_bounds=(False, True),
                          step=0.5, label="Weight (importance)")
    blocks = param.List(default=[], item_type=BlockChoice, doc="One block per attribute.")
    k = param.Integer(default=None, allow_None=True, bounds=(1, None),
                      label="k: all k-way marginals (marginals only)",
                      doc="With kind 'marginals': every table over k of the workload's "
                          "attributes (spec `marginals: {k: K}`), whatever attributes are "
                          "ticked. Empty: the one table over the ticked attributes.")

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._kinds: dict[str, str] = {}

    @property
    def all_k_way(self) -> bool:
        """True when the form asks for every k-way marginal rather than one table."""
        return self.k is not None and issubclass(GROUPS[self.kind], Marginals)

    def set_domain(self, kinds: dict[str, str]) -> None:
        """Offer the draft's attributes (name -> numeric|categorical)."""
        self._kinds = dict(kinds)
        keep = [a for a in self.attributes if a in kinds]
        self.param.attributes.objects = list(kinds)
        self.attributes = keep
        self._sync_blocks()

    @param.depends("attributes", watch=True)
    def _sync_blocks(self) -> None:
        old = {b.attribute: b for b in self.blocks}
        blocks = []
        for name in self.attributes:
            if name in old:
                blocks.append(old[name])
                continue
            numeric = self._kinds.get(name) == "numeric"
            blocks.append(BlockChoice(attribute=name, block="prefix" if numeric else "identity",
                                      name=f"block-{name}"))
        self.blocks = blocks

    @param.depends("kind")
    def help(self) -> str:
        """One line on what the chosen kind of group asks."""
        return GROUP_HELP.get(self.kind, "")

    def spec(self) -> dict[str, Any]:
        """The group as a workload item."""
        attrs = list(self.attributes)
        group = GROUPS[self.kind]
        if issubclass(group, Product):
            body: Any = {b.attribute: b.spec() for b in self.blocks if b.attribute in attrs}
        elif self.all_k_way:
            body = {"k": int(self.k)}
        elif issubclass(group, Marginals):
            body = {"sets": [attrs]}
        else:
            body = attrs
        item: dict[str, Any] = {self.kind: body}
        if self.weight != 1.0:
            item["weight"] = float(self.weight)
        return item


class WorkloadBuilder(param.Parameterized):
    """View-model of the builder page: forms and the operations that edit the draft."""

    attribute = param.ClassSelector(class_=AttributeForm, doc="The attribute form.")
    group = param.ClassSelector(class_=GroupForm, doc="The group form.")
    preset = param.Selector(default="kway", objects=list(PRESETS), label="Preset")
    preset_k = param.Integer(default=2, bounds=(0, 14), label="k (for k-way presets)")
    attribute_error = param.String(default="", doc="Why the last attribute was not added.")
    group_error = param.String(default="", doc="Why the last group was not added.")
    upload_error = param.String(default="", doc="Why the last uploaded file was refused.")
    message = param.String(default="", doc="The last thing done, in words.")
    remove_name = param.Selector(default=None, objects=[], allow_None=True,
                                 label="Remove attribute")
    remove_index = param.Integer(default=1, bounds=(1, None), label="Remove group #")
    pending = param.String(default="", doc="A replacement of the workload waiting to be "
                                           "confirmed, in words ('' when none).")
    undo_label = param.String(default="", doc="What Undo brings back ('' when nothing).")

    def __init__(self, session, **params: Any) -> None:
        params.setdefault("attribute", AttributeForm())
        params.setdefault("group", GroupForm())
        super().__init__(**params)
        self.session = session
        self._pending: Callable[[], Any] | None = None
        self._undo: tuple[dict[str, Any], str, bool] | None = None
        self._edited = False  # the draft was changed by hand since it was last loaded
        self._loading = False
        self.param.preset.names = {p.title: key for key, p in PRESETS.items()}
        session.param.watch(lambda event: self._draft_changed(), "draft")
        session.param.watch(lambda *events: self._hand_edit(), ["draft", "draft_text"])
        self._draft_changed()

    # ----- reading the draft ------------------------------------------------------------------
    def draft(self) -> dict[str, Any]:
        """A copy of the session's draft (always a dict)."""
        draft = self.session.draft
        return copy.deepcopy(draft) if isinstance(draft, dict) else {}

    def domain_spec(self) -> dict[str, Any]:
        """The draft's ``domain:`` mapping ({} when missing or malformed)."""
        domain = self.draft().get("domain")
        return domain if isinstance(domain, dict) else {}

    def workload_items(self) -> list[Any]:
        """The draft's ``workload:`` items ([] when missing or malformed)."""
        items = self.draft().get("workload")
        if isinstance(items, dict):
            return [items]
        return list(items) if isinstance(items, list) else []

    def _draft_changed(self) -> None:
        kinds = {}
        for name, spec in self.domain_spec().items():
            try:
                kinds[str(name)] = Attribute.from_spec(str(name), spec).kind
            except Exception:  # a malformed attribute is listed as categorical until fixed
                kinds[str(name)] = "categorical"
        self.group.set_domain(kinds)
        self.param.remove_name.objects = list(kinds)
        if self.remove_name not in kinds:
            self.remove_name = next(iter(kinds), None)

    # ----- operations -------------------------------------------------------------------------
    def _apply(self, draft: dict[str, Any], done: str) -> str:
        error = self.session.apply_draft(draft)
        self.message = done if not error else f"{done} The scenario is not complete yet."
        return error

    def add_attribute(self) -> str:
        """Add the attribute in the form; '' on success, else the reason (shown by the form)."""
        form = self.attribute
        name = form.attr_name.strip()
        if not name:
            self.attribute_error = "domain: the attribute needs a name"
            return self.attribute_error
        domain = self.domain_spec()
        if name in domain:
            self.attribute_error = f"domain.{name}: there is already an attribute called {name!r}"
            return self.attribute_error
        key, spec = attribute_spec(name, form.size, form.kind, form.labels)
        try:
            Attribute.from_spec(key, spec)
        except Exception as exc:  # the engine's validator names the field
            self.attribute_error = plain(exc)
            return self.attribute_error
        self.attribute_error = ""
        draft = self.draft()
        draft["domain"] = dict(domain, **{key: spec})
        draft.setdefault("workload", self.workload_items())
        self._apply(draft, f"Added attribute {name!r}.")
        form.param.update(attr_name="", labels="")
        return ""

    def remove_attribute(self, name: str) -> None:
        """Remove an attribute and the query groups that use it."""
        draft = self.draft()
        domain = self.domain_spec()
        if name not in domain:
            return
        del domain[name]
        items = self.workload_items()
        kept = [g for g in items if not _mentions(g, name)]
        draft["domain"], draft["workload"] = domain, kept
        dropped = len(items) - len(kept)
        extra = f" and {dropped} query group(s) that used it" if dropped else ""
        self._apply(draft, f"Removed attribute {name!r}{extra}.")

    def add_group(self) -> str:
        """Add the group in the form; '' on success, else the reason (shown by the form)."""
        form = self.group
        if not form.attributes and not form.all_k_way:
            self.group_error = "workload: pick at least one attribute for the group"
            return self.group_error
        item = form.spec()
        items = self.workload_items()
        try:
            domain = Domain.from_spec(self.domain_spec())
            parse_group(copy.deepcopy(item), domain, len(items))
        except Exception as exc:  # the engine's validator names the field
            self.group_error = plain(exc)
            return self.group_error
        self.group_error = ""
        draft = self.draft()
        draft["workload"] = [*items, item]
        self._apply(draft, f"Added a {form.kind.replace('_', '-')} group.")
        return ""

    def remove_group(self, index: int) -> None:
        """Remove workload item ``index`` (0-based)."""
        items = self.workload_items()
        if not 0 <= index < len(items):
            return
        draft = self.draft()
        draft["workload"] = items[:index] + items[index + 1:]
        self._apply(draft, f"Removed query group {index + 1}.")

    # ----- replacing the workload: confirm first, one step back -------------------------------
    def _hand_edit(self) -> None:
        if not self._loading:
            self._edited = True

    def ask(self, action: Callable[[], Any], what: str) -> None:
        """Run ``action`` (which replaces the workload) at once when there is no hand-made
        work to lose (the draft is as last loaded: the default, a preset, a file), else hold
        it until :meth:`confirm`, saying what it replaces (:attr:`pending`)."""
        if not self._edited or not self.domain_spec():
            self._replacing(action)
            return
        self._pending = action
        self.pending = (f"{what} replaces your workload ({self.current_workload()}). "
                        "Replace it? (Undo brings it back.)")

    def confirm(self) -> None:
        """Run the replacement waiting in :attr:`pending`."""
        action, self._pending, self.pending = self._pending, None, ""
        if action is not None:
            self._replacing(action)

    def _replacing(self, action: Callable[[], Any]) -> None:
        """Run a replacement: what it loads is not a hand edit."""
        before, edited = self.draft(), self._edited
        self._loading = True
        try:
            action()
        finally:
            self._loading = False
        # a refused file replaced nothing: hand edits stay hand edits
        self._edited = edited and self.draft() == before

    def cancel(self) -> None:
        """Drop the replacement waiting in :attr:`pending`; the workload stays."""
        self._pending, self.pending = None, ""
        self.message = "Kept your workload."

    def current_workload(self) -> str:
        """The workload in use, in words ("1,014 queries over 1,400 cells ...")."""
        return self.session.workload.describe()

    def _remember(self) -> None:
        """Keep the draft (and its text) for :meth:`undo` before it is replaced."""
        self._undo = (self.draft(), self.session.draft_text, self._edited)
        self.undo_label = f"Undo: back to {self.current_workload()}"

    def undo(self) -> None:
        """Bring back the draft the last replacement (preset, upload, start empty) replaced."""
        if self._undo is None:
            return
        draft, text, edited = self._undo
        self._undo, self.undo_label = None, ""
        self._loading = True
        try:
            self.session.apply_draft(draft, text=text)
        finally:
            self._loading = False
        self._edited = edited
        self.message = "Undone: your previous workload is back."

    def load_preset(self) -> str:
        """Replace the draft with the chosen preset (generic presets keep your attributes);
        :meth:`undo` brings the replaced one back."""
        spec = build_preset(self.preset, self.domain_spec() or None, self.preset_k)
        draft = self.draft()
        spec["privacy"] = draft.get("privacy", spec["privacy"])
        self._remember()
        return self._apply(spec, f"Loaded preset: {PRESETS[self.preset].title}.")

    def start_empty(self) -> None:
        """Clear attributes and groups to build a workload from scratch (privacy is kept;
        :meth:`undo` brings the cleared workload back)."""
        draft = {"domain": {}, "workload": []}
        if "privacy" in self.draft():
            draft["privacy"] = self.draft()["privacy"]
        self._remember()
        self.session.apply_draft(draft)
        self.message = "Cleared. Add attributes, then query groups."

    def upload(self, content: bytes | str | None, filename: str | None) -> str:
        """Load an uploaded scenario; on error keep everything and return the message."""
        if content is None:
            return ""
        filename = filename or "scenario.yaml"
        try:
            text = content.decode("utf-8") if isinstance(content, bytes) else str(content)
        except UnicodeDecodeError:
            self.upload_error = f"{filename}: not a text file (expected YAML or JSON)"
            return self.upload_error
        kept = self._undo, self.undo_label
        self._remember()
        self.upload_error = self.session.load_text(text, filename)
        if self.upload_error:  # nothing was replaced: the earlier undo stays
            self._undo, self.undo_label = kept
        else:
            self.message = f"Loaded {filename}."
        return self.upload_error

    # ----- what the page shows ----------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Queries, cells, groups and terms of the current (valid) workload."""
        w = self.session.scenario.workload
        return {"queries": w.num_queries, "cells": w.domain.size, "groups": len(w.groups),
                "attributes": len(w.domain), "terms": len(w.terms)}

    def attribute_rows(self) -> list[dict[str, Any]]:
        """The draft's attributes as table rows."""
        rows = []
        for name, spec in self.domain_spec().items():
            if isinstance(spec, dict):
                labels = spec.get("labels")
                rows.append({"attribute": name, "values": spec.get("size", len(labels or [])),
                             "kind": spec.get("kind", "categorical"),
                             "labels": ", ".join(map(str, labels)) if labels else ""})
            else:
                rows.append({"attribute": name, "values": spec, "kind": "categorical",
                             "labels": ""})
        return rows

    def group_rows(self) -> list[dict[str, Any]]:
        """The draft's query groups as table rows (query counts when the draft is valid)."""
        counts: dict[int, int] = {}
        if not self.session.draft_error:
            for term in self.session.scenario.workload.terms:
                counts[term.group] = counts.get(term.group, 0) + term.num_queries
        rows = []
        for i, item in enumerate(self.workload_items()):
            weight = item.get("weight", 1.0) if isinstance(item, dict) else 1.0
            rows.append({"#": i + 1, "queries": counts.get(i, ""), "weight": weight,
                         "group": group_summary(item)})
        return rows

    def workload_matrix(self) -> np.ndarray | str:
        """The dense workload matrix when it is small enough to draw, else why not."""
        w = self.session.scenario.workload
        rows, cols = w.num_queries, w.domain.size
        if rows * cols > HEATMAP_LIMIT:
            return (f"The matrix ({rows:,} queries x {cols:,} cells) is too large to draw; "
                    f"the heat map is shown up to {HEATMAP_LIMIT:,} entries.")
        reason = too_big((rows, cols))
        return reason if reason else w.dense()
