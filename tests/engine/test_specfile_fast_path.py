"""The libyaml fast path of :mod:`engine.specfile` gives exactly ruamel's YAML 1.2 values.

Every document is read twice: by :func:`~engine.specfile.load_text` as shipped and with the
fast path switched off (ruamel alone, the reader before the fast path existed). The values must
be identical in type and value (compared by ``repr``, so ``1``/``1.0``/``True`` and NaN are told
apart), or both must raise the same one-line :class:`SpecError`. Each table row also says
whether libyaml itself must read it (``FAST``) or must leave it to ruamel (``RUAMEL``), so a
row cannot pass by falling back.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import specfile
from engine.errors import SpecError
from engine.specfile import load_text

FAST, RUAMEL = "fast", "ruamel"

# (id, document, which reader produces the value)
DOCUMENTS = [
    ("yaml11-booleans-are-strings", "on: yes\noff: no\ny: n\nOn: [Yes, NO, ON, off]\n", FAST),
    ("yaml12-booleans", "a: [true, True, TRUE, false, False, FALSE, tRUE]\n", FAST),
    ("nulls", "a: [null, Null, NULL, ~, nULL, ]\nb:\nc: ''\n~: 1\n", FAST),
    ("decimal-ints", "a: [0, 7, -3, +12, 017, -017, 1_000, 99999999999999999999999]\n", FAST),
    ("octal-hex-binary", "a: [0o17, -0o17, 0x1F, 0x1f, -0xff, 0b101, 0o8, 0xG, 0B1, 0X1]\n", FAST),
    ("sexagesimal-is-text", "a: [1:30, 190:20:30, 1:30.5]\n", FAST),
    (
        "floats",
        "a: [1e-6, 1E6, 1.5, -2.25, +.5, .5, 1., 6.02e+23, 1_0.5, .5e3, .5e+3, 1e, 0.1e-3]\n",
        FAST,
    ),
    ("inf-nan", "a: [.inf, -.inf, +.Inf, .INF, .nan, .NaN, .NAN, -.nan, .Nan, inf, nan]\n", FAST),
    ("nan-keys-collide", ".nan: 1\n.NaN: 2\n", RUAMEL),
    ("number-keys", "2: a\n1.5: b\ntrue: c\nnull: d\n0x10: e\n", FAST),
    ("bool-int-keys-collide", "1: a\ntrue: b\n", RUAMEL),
    ("int-float-keys-collide", "a: {1: x, 1.0: y}\n", RUAMEL),
    ("quoted-are-strings", "a: ['1', \"2\", 'true', \"null\", '.inf', '', \"\"]\n", FAST),
    (
        "escapes",
        'a: "tab\\there \\"q\\" \\\\ \\u263A \\U0001F600 \\x41 \\/ \\0 \\a \\e \\N \\_ \\L \\P"\n'
        "b: 'it''s'\n",
        FAST,
    ),
    ("bad-escape", 'a: "\\q"\n', RUAMEL),
    (
        "block-scalars",
        "lit: |\n  one\n   two\n\n  three\nfold: >-\n  a\n  b\n\n  c\nkeep: |+\n  x\n\n"
        "ind: |2\n   lead\nend: 1\n",
        FAST,
    ),
    ("multi-line-plain", "a: one\n  two\n\n  three\nb: 'q\n  r'\nc: \"s\\\n  t\"\n", FAST),
    ("comments", "# head\na: 1 # one\nb: 'x # y'\nc: x#y\n", FAST),
    ("crlf", "a: 1\r\nb:\r\n  - x\r\n  - y\r\n", FAST),
    ("unicode", "größe: 4\n名前: [α, β]\nemoji: 😀\n", FAST),
    ("flow-plain-colon", "{a:1, b: 2, 'c':3, \"d\":4, http://x: y}\n", FAST),
    ("flow-single-pair", "[a: 1, b]\n", FAST),
    ("explicit-keys", "? a\n: 1\n? [x, y]\n: 2\n", RUAMEL),
    ("empty-document", "", FAST),
    ("comment-only", "# nothing\n", FAST),
    ("document-markers", "---\na: 1\n...\n", FAST),
    ("two-documents", "a: 1\n---\nb: 2\n", RUAMEL),
    ("anchors-aliases", "base: &b {size: 4}\nx: *b\ny: [*b, &s 3, *s]\n", FAST),
    ("alias-as-key", "k: &k name\n*k : 1\n", FAST),
    ("redefined-anchor", "a: &x 1\nb: &x 2\nc: *x\n", RUAMEL),
    ("undefined-alias", "a: *nope\n", RUAMEL),
    ("merge-key", "base: &b {a: 1, b: 2}\nx:\n  <<: *b\n  b: 3\n", RUAMEL),
    ("merge-list", "p: &p {a: 1}\nq: &q {b: 2}\nx: {<<: [*p, *q], c: 3}\n", RUAMEL),
    ("timestamp", "a: 2020-01-02\nb: 2001-12-14t21:59:43.10-05:00\n", RUAMEL),
    ("not-timestamp", "a: 2020-1-2\nb: 20200102\n", FAST),
    ("value-key", "=: 1\n", RUAMEL),
    ("duplicate-top", "domain: {age: 8}\ndomain: {sex: 2}\n", RUAMEL),
    ("duplicate-nested", "a:\n  b:\n    - {c: 1, d: 2, c: 3}\n", RUAMEL),
    ("duplicate-flow", "domain: {age: 8, age: 4}\n", RUAMEL),
    ("tabs", "a:\t1\nb: [1,\t2]\n", RUAMEL),
    ("tab-indent", "a:\n\t- 1\n", RUAMEL),
    ("yaml-directive-12", "%YAML 1.2\n---\non: 017\n", RUAMEL),
    ("yaml-directive-11", "%YAML 1.1\n---\non: 017\n", RUAMEL),
    ("explicit-tags", "a: !!str 017\nb: !!float 1\nc: !!int '7'\n", RUAMEL),
    ("python-tag", "a: !!python/object:os.system echo\n", RUAMEL),
    ("set-tag", "a: !!set {x, y}\n", RUAMEL),
    ("nel-line-break", "a: x\x85y\n", RUAMEL),
    ("byte-order-mark", "\ufeffa: 1\n", RUAMEL),
    ("bad-indent", "a:\n  b: 1\n c: 2\n", RUAMEL),
    ("unclosed-flow", "a: [1, 2\n", RUAMEL),
    ("control-character", "a: \x07\n", RUAMEL),
    ("list-key", "[a, b]: 1\n", RUAMEL),
    ("scalar-document", "017\n", FAST),
    ("deep-block", "".join(" " * i + f"k{i}:\n" for i in range(70)) + " " * 70 + "v\n", RUAMEL),
    ("deep-dashes", "- " * 70 + "x\n", RUAMEL),
    ("wide-indent", " " * 600 + "a: 1\n", RUAMEL),
]


def _ruamel_only(text: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as patch:
        patch.setattr(specfile, "_libyaml_is_safe_for", lambda text: False)
        return _outcome(text)


def _outcome(text: str) -> str:
    try:
        return "value " + repr(load_text(text))
    except SpecError as exc:
        return "error " + str(exc)


def _libyaml_reads(text: str) -> bool:
    if not specfile._libyaml_is_safe_for(text):
        return False
    try:
        value = yaml.load(text, Loader=specfile._Core12Loader)  # noqa: S506 (a safe loader)
    except Exception:
        return False
    return not isinstance(value, dict | list) or specfile._extent(value)[0] <= specfile.MAX_DEPTH


@pytest.mark.parametrize(
    ("text", "reader"), [d[1:] for d in DOCUMENTS], ids=[d[0] for d in DOCUMENTS]
)
def test_fast_path_gives_ruamels_value_or_message(
    text: str, reader: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _libyaml_reads(text) == (reader == FAST)
    assert _outcome(text) == _ruamel_only(text, monkeypatch)


def test_values_are_yaml12_core_schema() -> None:
    """Spot values, stated outright (not only "same as ruamel")."""
    value = load_text(
        "on: [yes, no, true, FALSE]\nint: [017, 0o17, 0x1F, -3]\n"
        "float: [1e-6, .inf, -.INF, 2.]\nnulls: [~, null, NULL]"
    )
    assert value == {
        "on": ["yes", "no", True, False],
        "int": [17, 15, 31, -3],
        "float": [1e-6, float("inf"), float("-inf"), 2.0],
        "nulls": [None, None, None],
    }
    assert [type(v) for v in value["int"] + value["float"]] == [int] * 4 + [float] * 4


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "a:\n  b: 1\n  b: 2\n",
            'scenario: found duplicate key "b" with value "2" (original value: "1") (line 3)',
        ),
        (
            "domain: {age: 8, age: 4}\n",
            'scenario: found duplicate key "age" with value "4" (original value: "8") (line 1)',
        ),
    ],
)
def test_duplicate_keys_keep_ruamels_one_line_message(text: str, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_text(text)
    assert str(caught.value) == message


def test_deep_nesting_keeps_its_message() -> None:
    text = "".join(" " * (2 * i) + f"k{i}:\n" for i in range(70)) + "  " * 70 + "v\n"
    with pytest.raises(SpecError, match=r"^scenario: (nested|not valid YAML)"):
        load_text(text)


def test_census_preset_parses_identically() -> None:
    from explorer.presets import build_preset
    from explorer.session import dump_yaml

    text = dump_yaml(build_preset("sf1"))
    assert _libyaml_reads(text)
    fast = yaml.load(text, Loader=specfile._Core12Loader)  # noqa: S506 (a safe loader)
    assert repr(fast) == repr(specfile._yaml().load(text))
    assert repr(load_text(text)) == repr(fast)


SCALAR_CHARS = "0123456789_+-.eEoxbOXBinfaNIFtrueTRUlsn~:"


@settings(max_examples=300, deadline=None)
@given(scalar=st.text(alphabet=SCALAR_CHARS, min_size=1, max_size=8))
def test_scalar_resolution_matches_ruamel(scalar: str) -> None:
    """Plain scalars made of number/boolean/null characters resolve as ruamel resolves them."""
    for text in (f"k: {scalar}\n", f"[{scalar}]\n", f"{scalar}: 1\n"):
        with pytest.MonkeyPatch.context() as monkeypatch:
            assert _outcome(text) == _ruamel_only(text, monkeypatch), text
