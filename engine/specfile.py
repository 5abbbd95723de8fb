"""Reading spec documents (YAML 1.2 or JSON) into plain Python values, safely.

* YAML is read as **YAML 1.2** by ruamel.yaml's safe loader: ``on:`` is a key (not the
  YAML 1.1 boolean ``True``), ``1e-6`` is a number, and no tag constructs a Python object.
* A repeated key at any depth is an error (YAML and JSON alike): the last value silently
  winning would change a spec without telling its author.
* Documents nested deeper than :data:`MAX_DEPTH` or longer than :data:`MAX_CHARS` are refused
  before parsing, with one line, instead of a ``RecursionError`` or a long parse.

Every failure is a :class:`~engine.errors.SpecError` whose message is one line starting with
the ``where`` prefix (``scenario`` unless told).

Example:
    >>> load_text("random: {on: [age]}\\ndelta: 1e-6")
    {'random': {'on': ['age']}, 'delta': 1e-06}
"""

from __future__ import annotations

import json
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from engine.errors import SpecError

#: Deepest nesting of lists and mappings a spec may have (the deepest real spec is ~6).
MAX_DEPTH = 64
#: Longest spec text, in characters (explicit matrix rows up to the group limit fit).
MAX_CHARS = 50_000_000
#: Most values a document may expand to once YAML aliases are followed ("billion laughs").
MAX_NODES = 50_000_000


def load_text(text: str, fmt: str = "yaml", where: str = "scenario") -> Any:
    """Parse spec text (``fmt`` "yaml" or "json") into dicts, lists, strings and numbers.

    Raises:
        SpecError: not valid YAML/JSON, a duplicate key, too deep or too long (one line).
    """
    if fmt not in ("yaml", "json"):
        raise ValueError(f"fmt: expected 'yaml' or 'json', got {fmt!r}")
    if len(text) > MAX_CHARS:
        raise SpecError(
            f"{where}: the document has {len(text):,} characters; the limit is {MAX_CHARS:,}"
        )
    depth = _flow_depth(text)
    if depth > MAX_DEPTH:
        raise SpecError(f"{where}: nested {depth} levels deep; the limit is {MAX_DEPTH}")
    try:
        value = _load_json(text) if fmt == "json" else _yaml().load(text)
    except RecursionError:
        raise SpecError(f"{where}: nested too deeply; the limit is {MAX_DEPTH} levels") from None
    except DuplicateKeyError as exc:
        raise SpecError(f"{where}: {_duplicate_message(exc)}") from None
    except _DuplicateJSONKeyError as exc:
        raise SpecError(f"{where}: duplicate key {exc.args[0]!r}") from None
    except (YAMLError, json.JSONDecodeError, ValueError) as exc:
        raise SpecError(f"{where}: not valid {fmt.upper()}: {_first_line(exc)}") from None
    if isinstance(value, dict | list):
        depth, nodes = _extent(value)
        if depth > MAX_DEPTH:
            raise SpecError(f"{where}: nested {depth} levels deep; the limit is {MAX_DEPTH}")
        if nodes > MAX_NODES:
            raise SpecError(
                f"{where}: the document expands (through aliases) to {nodes:,} "
                f"values; the limit is {MAX_NODES:,}"
            )
    return value


def _yaml() -> YAML:
    # a fresh loader per call: YAML instances keep parser state and are not thread-safe
    loader = YAML(typ="safe", pure=True)
    loader.version = (1, 2)
    loader.allow_duplicate_keys = False
    loader.max_depth = MAX_DEPTH + 1  # one past, so the message below names our limit
    # a re-defined anchor is valid YAML (the later one wins); say nothing about it
    loader.composer.warn_double_anchors = False
    return loader


class _DuplicateJSONKeyError(ValueError):
    pass


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateJSONKeyError(key)
        out[key] = value
    return out


def _load_json(text: str) -> Any:
    # NaN/Infinity are not JSON: refuse them here rather than let them reach the arithmetic
    def refuse(token: str) -> float:
        raise ValueError(f"{token} is not a JSON number")

    return json.loads(text, object_pairs_hook=_unique_pairs, parse_constant=refuse)


def _duplicate_message(exc: DuplicateKeyError) -> str:
    problem = str(getattr(exc, "problem", "") or "duplicate key").strip().splitlines()[0]
    mark = getattr(exc, "problem_mark", None)
    line = f" (line {mark.line + 1})" if mark is not None else ""
    return problem.rstrip(".") + line


def _first_line(exc: Exception) -> str:
    if isinstance(exc, MarkedYAMLError) and exc.problem:
        mark = exc.problem_mark
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        return str(exc.problem).strip().splitlines()[0] + at
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _flow_depth(text: str) -> int:
    """Deepest nesting of ``[``/``{`` outside quoted strings (linear, no parse)."""
    depth = deepest = 0
    quote = ""
    escaped = False
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\" and quote == '"':
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(depth - 1, 0)
    return deepest


def _extent(value: dict | list) -> tuple[int, int]:
    """(nesting depth, number of values once aliases are expanded) of a parsed document.

    Iterative, and linear in the *parsed* size: YAML aliases share one object, whose extent is
    computed once and reused, so an exponential alias bomb costs no more than its text.
    """
    known: dict[int, tuple[int, int]] = {}
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        item, children_done = stack.pop()
        if id(item) in known:
            continue
        children = list(item.values()) if isinstance(item, dict) else item
        containers = [c for c in children if isinstance(c, dict | list)]
        if not children_done:
            if len(stack) > MAX_DEPTH * 1000:  # only a deeper-than-allowed document gets here
                return MAX_DEPTH + 1, 0
            stack.append((item, True))
            stack.extend((c, False) for c in containers if id(c) not in known)
            continue
        depth = 1 + max((known[id(c)][0] for c in containers), default=0)
        nodes = len(children) + sum(known[id(c)][1] for c in containers)
        known[id(item)] = (depth, nodes)
    return known[id(value)]
