"""A scenario spec as the text the builder's editor shows: YAML out, YAML 1.2 in.

Pure functions on spec dictionaries, shared by the session's spec editing and its export.
"""

from __future__ import annotations

from typing import Any

import yaml

from engine import load_text as read_spec


class _PlainDumper(yaml.SafeDumper):
    """Writes a value shared by several keys in full each time (no ``&id001`` anchors)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_yaml(spec: Any) -> str:
    """A spec as YAML: block style for the top levels, flow style for short inner lists; no
    anchors or aliases."""
    return yaml.dump(spec, Dumper=_PlainDumper, sort_keys=False, default_flow_style=None,
                     width=100)


def explicit_totals(workload: Any, domain: Any) -> Any:
    """The workload items with every empty ``product: {}`` (the grand total) written as
    ``product: {<first attribute>: total}``, which means the same queries."""
    items = workload if isinstance(workload, list) else [workload]
    first = next(iter(domain)) if isinstance(domain, dict) and domain else None
    out = []
    for item in items:
        if isinstance(item, dict) and item.get("product") == {} and first is not None:
            item = {**item, "product": {first: "total"}}
        out.append(item)
    return out


def parse_yaml(text: str) -> Any:
    """The spec in YAML 1.2 ``text`` ({} for blank text); raises a one-line ``SpecError``."""
    return read_spec(text) if text.strip() else {}


def parse_upload(text: str, filename: str) -> Any:
    """The spec in an uploaded file's ``text``: JSON when ``filename`` ends in ``.json``, else
    YAML 1.2; raises a one-line ``SpecError``."""
    return read_spec(text, "json" if filename.lower().endswith(".json") else "yaml")
