"""Issue 15's corpus: every class of bad or extreme input gets exit 2 and one stderr line that
names the field or flag, never a traceback, a hang or a silently wrong result.

Each case writes its files into a temporary directory (``{dir}`` in the arguments is replaced
by it) and runs the command line in-process under a small memory budget
(``--memory-limit``), so an estimate that fails to refuse would show as a MemoryError here.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from engine.cli.main import main

SMALL = """\
domain: {age: {size: 4, kind: numeric}, sex: 2}
workload: [{product: {age: prefix, sex: identity}}]
privacy: {noise: laplace, epsilon: 1}
mechanisms: [identity]
"""
SIXTY_FOUR = "domain: {" + ", ".join(f"a{i}: 10" for i in range(64)) + "}\n"
CENSUS = "nation,state,size,count\nUS,GA,1,2\nUS,GA,3,1\nUS,NY,2,1\n"

# (id, files, argv, expected exit status, text the one stderr line must contain)
CASES = [
    # sizes that pass validation and then hang or exhaust memory
    (
        "total-1e18",
        {"s.yaml": "domain: {x: 1000000000000000000}\nworkload: [{product: {x: total}}]\n"},
        ["run", "{dir}/s.yaml", "--data", "{dir}/x.csv", "--mechanism", "identity"],
        2,
        "identity: running on data needs vectors over all 1e+18 cells",
    ),
    (
        "prefix-1e9-bound",
        {"s.yaml": "domain: {x: 1000000000}\nworkload: [{product: {x: prefix}}]\n"},
        ["bound", "{dir}/s.yaml"],
        0,
        "",
    ),
    (
        "size-1e30",
        {
            "s.yaml": "domain: {x: 1000000000000000000000000000000}\n"
            "workload: [{product: {x: prefix}}]\n"
        },
        ["validate", "{dir}/s.yaml"],
        2,
        "domain.x.size: must be at most",
    ),
    (
        "identity-1e9-run",
        {
            "s.yaml": "domain: {x: 1000000000}\nworkload: [{product: {x: identity}}]\n",
            "x.csv": "x\n1\n",
        },
        ["run", "{dir}/s.yaml", "--data", "{dir}/x.csv", "--mechanism", "identity"],
        2,
        "identity: running on data needs vectors over all 1e+09 cells",
    ),
    (
        "cells-1e64-identity",
        {
            "s.yaml": SIXTY_FOUR
            + "workload: [{product: {"
            + ", ".join(f"a{i}: identity" for i in range(64))
            + "}}]\n"
        },
        ["run", "{dir}/s.yaml", "--data", "{dir}/x.csv", "--mechanism", "identity"],
        2,
        "identity: running on data needs vectors over all 1e+64 cells",
    ),
    (
        "census-max-size-1e10",
        {"c.csv": CENSUS},
        ["census", "--data", "{dir}/c.csv", "--max-size", "10000000000"],
        2,
        "--max-size: needs tables of",
    ),
    ("census-trials-1e9", {}, ["census", "--trials", "1000000000"], 2, "--trials: must be"),
    (
        "census-synthetic-huge",
        {},
        ["census", "--synthetic", "levels=1,6,30;groups=20000;max_size=1000000000;seed=0"],
        2,
        "--synthetic: synthetic.levels/max_size: needs tables of",
    ),
    (
        "census-groups-20-digits",
        {},
        ["census", "--synthetic", "levels=1,6,30;groups=100000000000000000000"],
        2,
        "--synthetic: synthetic.groups: bad value",
    ),
    # tracebacks instead of exit 2
    (
        "nested-yaml",
        {"s.yaml": "a: " + "[" * 5000 + "]" * 5000 + "\n"},
        ["validate", "{dir}/s.yaml"],
        2,
        "scenario: nested 5000 levels deep; the limit is 64",
    ),
    (
        "nested-json",
        {"s.json": '{"a": ' + "[" * 5000 + "]" * 5000 + "}"},
        ["validate", "{dir}/s.json"],
        2,
        "scenario: nested 5001 levels deep",
    ),
    (
        "run-data-directory",
        {"s.yaml": SMALL},
        ["run", "{dir}/s.yaml", "--data", "{dir}"],
        2,
        "is a directory, not a CSV file",
    ),
    (
        "run-seed-negative",
        {"s.yaml": SMALL, "d.csv": "age,sex\n1,0\n"},
        ["run", "{dir}/s.yaml", "--data", "{dir}/d.csv", "--seed", "-1"],
        2,
        "--seed",
    ),
    (
        "laplace-epsilon-1e300",
        {"s.yaml": SMALL, "d.csv": "age,sex\n1,0\n"},
        ["run", "{dir}/s.yaml", "--data", "{dir}/d.csv", "--epsilon", "1e300"],
        2,
        "--epsilon: 1e+300 puts the noise scale out of a float's range",
    ),
    (
        "run-epsilon-1e-300-json",
        {"s.yaml": SMALL, "d.csv": "age,sex\n1,0\n"},
        ["run", "{dir}/s.yaml", "--data", "{dir}/d.csv", "--epsilon", "1e-300", "--json"],
        2,
        "--epsilon: 1e-300 puts the noise scale",
    ),
    (
        "spec-epsilon-1e300",
        {"s.yaml": SMALL.replace("epsilon: 1", "epsilon: 1e300")},
        ["compare", "{dir}/s.yaml"],
        2,
        "privacy.epsilon: 1e+300 puts the noise scale",
    ),
    (
        "census-epsilon-1e-300",
        {},
        ["census", "--epsilon", "1e-300"],
        2,
        "--epsilon: must be a finite number >= 1e-12",
    ),
    (
        "census-size-1e300",
        {"c.csv": "nation,state,size\nUS,GA,1e300\n"},
        ["census", "--data", "{dir}/c.csv", "--max-size", "7"],
        2,
        "row 2: size",
    ),
    (
        "census-size-20-digits",
        {"c.csv": "nation,state,size\nUS,GA,12345678901234567890\n"},
        ["census", "--data", "{dir}/c.csv", "--max-size", "7"],
        2,
        "row 2: size 12345678901234567890 is past",
    ),
    (
        "csv-field-too-long",
        {"c.csv": "nation,state,size\nUS," + "G" * 140_000 + ",1\n"},
        ["census", "--data", "{dir}/c.csv", "--max-size", "7"],
        2,
        "field larger than field limit (131072)",
    ),
    (
        "census-latin1",
        {"c.csv": b"nation,state,size\nUS,G\xe9,1\n"},
        ["census", "--data", "{dir}/c.csv", "--max-size", "7"],
        2,
        "not UTF-8 text (byte 22",
    ),
    (
        "run-latin1",
        {"s.yaml": SMALL, "d.csv": b"age,sex\n1,\xe9\n"},
        ["run", "{dir}/s.yaml", "--data", "{dir}/d.csv"],
        2,
        "d.csv: cannot read as CSV",
    ),
    # the README's own syntax, rejected under YAML 1.1
    (
        "on-is-a-key",
        {
            "s.yaml": "domain: {a: 4, b: 3}\nworkload: [{random: {on: [a, b], "
            "count: 3}}]\nprivacy: {noise: gaussian, epsilon: 1, "
            "delta: 1e-6}\nmechanisms: [identity]\n"
        },
        ["validate", "{dir}/s.yaml"],
        0,
        "",
    ),
    # silently wrong
    (
        "duplicate-attribute",
        {"s.yaml": "domain: {age: 8, age: 4}\nworkload: [{product: {age: prefix}}]\n"},
        ["validate", "{dir}/s.yaml"],
        2,
        'scenario: found duplicate key "age"',
    ),
    (
        "duplicate-deep-json",
        {
            "s.json": '{"domain": {"x": {"size": 2, "size": 3}}, '
            '"workload": [{"product": {"x": "identity"}}]}'
        },
        ["validate", "{dir}/s.json"],
        2,
        "scenario: duplicate key 'size'",
    ),
    (
        "nan-bin-edges",
        {
            "s.yaml": "domain: {age: {bin_edges: [0, .nan, 10]}}\n"
            "workload: [{product: {age: prefix}}]\n"
        },
        ["validate", "{dir}/s.yaml"],
        2,
        "domain.age.bin_edges: edges must be finite",
    ),
    (
        "inf-bin-edges",
        {
            "s.yaml": "domain: {age: {bin_edges: [0, 5, .inf]}}\n"
            "workload: [{product: {age: prefix}}]\n"
        },
        ["validate", "{dir}/s.yaml"],
        2,
        "domain.age.bin_edges: edges must be finite",
    ),
    (
        "counts-past-int64",
        {"c.csv": "nation,state,size,count\nUS,GA,1,99999999999999999999\n"},
        ["census", "--data", "{dir}/c.csv", "--max-size", "7"],
        2,
        "row 2: count 99999999999999999999 is past",
    ),
    (
        "counts-sum-past-int64",
        {
            "c.csv": "nation,state,size,count\nUS,GA,1,4611686018427387904"
            "\nUS,NY,1,4611686018427387904\n"
        },
        ["census", "--data", "{dir}/c.csv", "--max-size", "7"],
        2,
        "count: the counts add up to",
    ),
    (
        "max-size-negative",
        {"c.csv": CENSUS},
        ["census", "--data", "{dir}/c.csv", "--max-size", "-5"],
        2,
        "--max-size: expected an integer >= 1, got -5",
    ),
    (
        "weights-without-user-split",
        {"c.csv": CENSUS},
        ["census", "--data", "{dir}/c.csv", "--max-size", "7", "--weights", "1,2"],
        2,
        "--weights: only used with --split user",
    ),
    (
        "memory-limit-bad-unit",
        {"s.yaml": SMALL},
        ["validate", "{dir}/s.yaml", "--memory-limit", "12XB"],
        2,
        "--memory-limit",
    ),
    (
        "memory-limit-refuses",
        {"s.yaml": SMALL},
        ["bound", "{dir}/s.yaml", "--memory-limit", "1KB"],
        0,
        "",
    ),
]


def _write(directory: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = directory / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


@pytest.mark.parametrize(
    ("files", "argv", "status", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input_is_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    files: dict[str, str | bytes],
    argv: list[str],
    status: int,
    message: str,
) -> None:
    _write(tmp_path, files)
    args = [a.replace("{dir}", str(tmp_path)) for a in argv]
    if "--memory-limit" not in args:
        args += ["--memory-limit", "2GB"]
    code = main(args)
    err = capsys.readouterr().err
    assert code == status, err
    if status == 0:
        assert "Traceback" not in err
        return
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert message in lines[0], lines[0]


def test_census_columns_are_read_by_header_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``count`` before ``size`` was read as a region level (exit 0, rmse 0.0)."""
    docs = []
    for name, text in (
        ("a.csv", CENSUS),
        ("b.csv", "nation,state,count,size\nUS,GA,2,1\nUS,GA,1,3\nUS,NY,1,2\n"),
    ):
        (tmp_path / name).write_text(text)
        assert (
            main(
                [
                    "census",
                    "--data",
                    str(tmp_path / name),
                    "--max-size",
                    "4",
                    "--trials",
                    "3",
                    "--seed",
                    "0",
                    "--json",
                ]
            )
            == 0
        )
        docs.append(json.loads(capsys.readouterr().out))
    assert docs[0]["regions_by_level"] == docs[1]["regions_by_level"] == [1, 2]
    assert docs[0]["groups"] == docs[1]["groups"] == 4
    assert docs[0]["rmse"] == docs[1]["rmse"] > 0


def test_run_reads_the_spec_columns_of_a_wider_csv(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "s.yaml").write_text(SMALL)
    (tmp_path / "d.csv").write_text("id,age,sex,zip\n1,1,0,x\n2,3,1,y\n3,0,0,z\n")
    assert main(["run", str(tmp_path / "s.yaml"), "--data", str(tmp_path / "d.csv"), "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["records"] == 3
    assert "note: --data: ignored columns id, zip (not attributes of the spec)" in (
        out.err.splitlines()
    )
    (tmp_path / "m.csv").write_text("id,age\n1,1\n")
    assert main(["run", str(tmp_path / "s.yaml"), "--data", str(tmp_path / "m.csv")]) == 2
    assert "sex" in capsys.readouterr().err


def test_json_output_is_strict_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Non-finite numbers become null: ``json.loads`` with NaN/Infinity forbidden parses it."""
    (tmp_path / "s.yaml").write_text(
        SIXTY_FOUR + "workload: [{marginals: {k: 1}}]\nmechanisms: [identity, residual-planner]\n"
    )
    assert main(["compare", str(tmp_path / "s.yaml"), "--json"]) == 0

    def refuse(token: str) -> float:
        raise AssertionError(f"{token} in JSON output")

    doc = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert doc["svd_bound_rmse"] is None or doc["svd_bound_rmse"] > 0
    rows = {r["mechanism"]: r for r in doc["results"]}
    # identity's error over 1e64 cells is astronomically large but finite; RP's is small
    assert rows["identity"]["rmse"] > 1e30 > 1e3 > rows["residual-planner"]["rmse"] > 0


def test_compare_keeps_running_after_an_over_budget_mechanism(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "s.yaml").write_text("domain: {x: 64}\nworkload: [{product: {x: prefix}}]\n")
    assert (
        main(
            [
                "compare",
                str(tmp_path / "s.yaml"),
                "--mechanism",
                "hdmm-opt0",
                "--mechanism",
                "identity",
                "--memory-limit",
                "300KB",
                "--json",
            ]
        )
        == 0
    )
    rows = {r["mechanism"]: r for r in json.loads(capsys.readouterr().out)["results"]}
    assert rows["hdmm-opt0"]["error"] == (
        "not applicable: hdmm-opt0: needs a dense 64 x 64 "
        "Gram (4.59e+05 bytes); the limit is 293 KiB"
    )
    # identity on prefix(64): tr(W^T W) / m = (64 * 65 / 2) / 64 = 32.5 at sigma(1, 1e-6)
    assert rows["identity"]["rmse"] == pytest.approx(4.224679 * math.sqrt(32.5), rel=1e-6)
