"""A scenario: domain, workload, privacy level and mechanisms, as one YAML/JSON document.

Example:
    >>> s = Scenario.from_spec({"domain": {"x": 8}, "workload": [{"product": {"x": "prefix"}}]})
    >>> s.workload.num_queries
    8
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from engine.domain import Domain
from engine.errors import SpecError, suggest
from engine.mechanisms import registry_names
from engine.privacy import Privacy
from engine.specfile import load_text
from engine.workloads.spec import parse_workload
from engine.workloads.workload import Workload

TOP_KEYS = ("domain", "workload", "privacy", "mechanisms")


@dataclass(frozen=True, eq=False)
class Scenario:
    """A parsed scenario spec (see CONTRACT.md)."""

    domain: Domain
    workload: Workload
    privacy: Privacy = field(default_factory=Privacy)
    mechanisms: tuple[str, ...] = ()

    @classmethod
    def from_spec(cls, spec: Any) -> Scenario:
        """Validate and parse a spec mapping; errors are one-line SpecErrors with the path."""
        if not isinstance(spec, Mapping):
            raise SpecError("scenario: expected a mapping with domain and workload")
        for key in spec:
            if key not in TOP_KEYS:
                raise SpecError(f"{key}: unknown top-level key{suggest(str(key), TOP_KEYS)}; "
                                f"allowed: {', '.join(TOP_KEYS)}")
        if "domain" not in spec:
            raise SpecError("domain: missing")
        if "workload" not in spec:
            raise SpecError("workload: missing")
        domain = Domain.from_spec(spec["domain"])
        workload = parse_workload(spec["workload"], domain)
        privacy = Privacy.from_spec(spec["privacy"]) if "privacy" in spec else Privacy()
        mechs = parse_mechanisms(spec.get("mechanisms", []))
        return cls(domain, workload, privacy, mechs)

    def to_spec(self) -> dict[str, Any]:
        """The scenario as a plain mapping that ``from_spec`` parses back to an equal one."""
        spec: dict[str, Any] = {"domain": self.domain.to_spec(),
                                "workload": self.workload.to_spec(),
                                "privacy": self.privacy.to_spec()}
        if self.mechanisms:
            spec["mechanisms"] = list(self.mechanisms)
        return spec

    @classmethod
    def loads(cls, text: str, fmt: str = "yaml") -> Scenario:
        """Parse YAML 1.2 (a superset of JSON) or JSON text (see :mod:`engine.specfile`)."""
        return cls.from_spec(load_text(text, fmt))

    @classmethod
    def load(cls, path: str | Path) -> Scenario:
        """Read a ``.yaml``/``.yml``/``.json`` scenario file."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise SpecError(f"{path}: cannot read scenario file ({exc.strerror})") from None
        except UnicodeDecodeError as exc:
            raise SpecError(f"{path}: not UTF-8 text (byte {exc.start})") from None
        return cls.loads(text, "json" if p.suffix.lower() == ".json" else "yaml")

    def dumps(self, fmt: str = "yaml") -> str:
        """The scenario as YAML or JSON text."""
        spec = self.to_spec()
        if fmt == "json":
            return json.dumps(spec, indent=2)
        return yaml.safe_dump(spec, sort_keys=False, default_flow_style=None)


def parse_mechanisms(value: Any, where: str = "mechanisms") -> tuple[str, ...]:
    """Validate a list of registered mechanism names."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple):
        raise SpecError(f"{where}: expected a list of mechanism names")
    names = registry_names()
    for i, name in enumerate(value):
        if name not in names:
            raise SpecError(f"{where}[{i}]: unknown mechanism {name!r}"
                            f"{suggest(str(name), names)}; allowed: {', '.join(names)}")
    return tuple(value)
