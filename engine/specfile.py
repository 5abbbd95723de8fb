"""Reading spec documents (YAML 1.2 or JSON) into plain Python values, safely.

* YAML is read as **YAML 1.2** by ruamel.yaml's safe loader: ``on:`` is a key (not the
  YAML 1.1 boolean ``True``), ``1e-6`` is a number, and no tag constructs a Python object.
* Plain documents (no tags, directives, tabs or YAML 1.1-only line breaks) are first read by
  libyaml (PyYAML's C parser, ~7x faster on the 270 KB census presets) with ruamel's YAML 1.2
  resolution rules and int/float conversions; anything that parser refuses or that needs more
  (a timestamp, a merge key, a duplicate key, a re-defined anchor, nesting past the limit) is
  read again by ruamel, so values and error messages are exactly ruamel's.
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
import re
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.resolver import implicit_resolvers as _ruamel_implicit_resolvers

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
        value = _load_json(text) if fmt == "json" else _load_yaml(text)
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


def _load_yaml(text: str) -> Any:
    """The YAML 1.2 value of ``text``: libyaml's when it is safe and agrees, else ruamel's."""
    if _libyaml_is_safe_for(text):
        try:
            value = yaml.load(text, Loader=_Core12Loader)  # a safe loader: no tags
        except Exception:  # whatever libyaml or the checks below refuse, ruamel says why
            pass
        else:
            if not isinstance(value, dict | list) or _extent(value)[0] <= MAX_DEPTH:
                return value
    return _yaml().load(text)


#: Widest run of indentation and block indicators (" -?:") that starts a line on the fast
#: path. Each block level needs a column of its own, so this bounds the nesting libyaml's
#: composer (recursive, in C) can meet; real specs indent ~12 columns.
_MAX_BLOCK_PREFIX = 8 * MAX_DEPTH
_DEEP_BLOCK = re.compile(rf"^[ ?:-]{{{_MAX_BLOCK_PREFIX + 1}}}", re.MULTILINE)
#: Text libyaml reads differently from YAML 1.2 or that needs ruamel's constructors: tags,
#: tabs, NEL/LS/PS (line breaks in YAML 1.1, content in 1.2) and byte-order marks.
_NEEDS_RUAMEL = re.compile("[!\t\x85\u2028\u2029\ufeff]|^%", re.MULTILINE)


def _libyaml_is_safe_for(text: str) -> bool:
    return _NEEDS_RUAMEL.search(text) is None and _DEEP_BLOCK.search(text) is None


class _LeftToRuamelError(Exception):
    """A value the libyaml path leaves to ruamel (so that ruamel's value or message is used)."""


#: One NaN object, like ruamel's, so that two ``.nan`` keys collide in both readers.
_NAN = float("nan")
_INF = float("inf")


def _construct_int(loader: yaml.CSafeLoader, node: yaml.ScalarNode) -> int:
    # ruamel's YAML 1.2 conversion: underscores dropped, 0b/0x/0o prefixes, "017" is 17
    digits = node.value.replace("_", "")
    sign = -1 if digits[0] == "-" else 1
    if digits[0] in "+-":
        digits = digits[1:]
    for prefix, base in (("0b", 2), ("0x", 16), ("0o", 8)):
        if digits.startswith(prefix):
            return sign * int(digits[2:], base)
    return sign * int(digits)


def _construct_float(loader: yaml.CSafeLoader, node: yaml.ScalarNode) -> float:
    # ruamel's YAML 1.2 conversion: underscores dropped, .inf/.nan in any listed case
    digits = node.value.replace("_", "").lower()
    sign = -1 if digits[0] == "-" else 1
    if digits[0] in "+-":
        digits = digits[1:]
    if digits == ".inf":
        return sign * _INF
    if digits == ".nan":
        return _NAN
    return sign * float(digits)


def _construct_sequence(loader: yaml.CSafeLoader, node: yaml.SequenceNode) -> Any:
    items: list[Any] = []
    yield items  # children are built after the parent (iteratively, not recursively)
    items.extend(loader.construct_object(child) for child in node.value)


def _construct_mapping(loader: yaml.CSafeLoader, node: yaml.MappingNode) -> Any:
    mapping: dict[Any, Any] = {}
    yield mapping
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node)
        if not isinstance(key, str | int | float | None) or key in mapping:
            raise _LeftToRuamelError("a non-scalar or duplicate key")
        mapping[key] = loader.construct_object(value_node)


def _leave_to_ruamel(loader: yaml.CSafeLoader, node: yaml.Node) -> Any:
    raise _LeftToRuamelError(node.tag)


class _Core12Loader(yaml.CSafeLoader):
    """libyaml's parser with ruamel's YAML 1.2 implicit types and nothing else."""

    yaml_implicit_resolvers: dict[str, list[tuple[str, re.Pattern[str]]]] = {}
    yaml_constructors: dict[str | None, Any] = {}


for _versions, _tag, _pattern, _first in _ruamel_implicit_resolvers:
    if (1, 2) in _versions:
        _Core12Loader.add_implicit_resolver(
            _tag, re.compile(_pattern.pattern, _pattern.flags), _first
        )
for _tag, _construct in (
    ("null", lambda loader, node: None),
    ("bool", lambda loader, node: node.value.lower() == "true"),
    ("int", _construct_int),
    ("float", _construct_float),
    ("str", lambda loader, node: node.value),
    ("seq", _construct_sequence),
    ("map", _construct_mapping),
):
    _Core12Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _construct)
# timestamps, merge keys and any other tag: ruamel's constructors decide
_Core12Loader.add_constructor(None, _leave_to_ruamel)


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
