"""Releasing for real from the command line: OS entropy, seeded labels, grids, --out records."""

from __future__ import annotations

import csv
import json
import os

import numpy as np
import pandas as pd
import pytest

from engine.cli.main import main
from engine.mechanisms import get
from engine.mechanisms.hierarchical.io import write_hierarchy_csv
from engine.mechanisms.hierarchical.synthetic import synthetic_census
from engine.noise import SEEDED_LABEL
from engine.privacy import Privacy
from engine.scenario import Scenario


def table_lines(path) -> list[str]:
    """The lines of a released CSV after its ``#`` provenance lines."""
    return [line for line in path.read_text().splitlines() if not line.startswith("#")]


def provenance(path) -> dict[str, str]:
    """The ``# key: value`` lines of a released CSV."""
    return dict(line[2:].split(": ", 1) for line in path.read_text().splitlines()
                if line.startswith("# "))


#: The one table of AGE_SEX_SPEC's workload (prefix(age) x identity(sex)).
TABLE = "prefix_age_x_identity_sex.csv"


def read_table(path) -> pd.DataFrame:
    """A released table, read past its provenance lines, values as written."""
    return pd.read_csv(path, comment="#", dtype={"size": str})


def run_json(capsys, *argv: str) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def one_line_error(capsys, argv: list[str], starts: str) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {starts}"), lines


@pytest.mark.parametrize("mechanism", ["identity", "hdmm"])
def test_unseeded_runs_differ_and_are_not_labelled(capsys, scenario, mechanism: str) -> None:
    spec, data = scenario
    argv = ("run", str(spec), "--data", str(data), "--mechanism", mechanism)
    first, second = run_json(capsys, *argv), run_json(capsys, *argv)
    assert first["errors"]["rmse"] != second["errors"]["rmse"]
    for doc in (first, second):
        assert doc["seeded"] is False and doc["notice"] is None
        assert doc["release"]["seed"] is None and doc["release"]["noise"]["exact"] is True


def test_seeded_runs_repeat_and_say_they_are_not_private(capsys, scenario, tmp_path) -> None:
    spec, data = scenario
    argv = ("run", str(spec), "--data", str(data), "--mechanism", "hdmm", "--seed", "5")
    first, second = run_json(capsys, *argv), run_json(capsys, *argv)
    assert first["errors"] == second["errors"]
    assert first["notice"] == SEEDED_LABEL == "seeded: reproducible, not a private release"
    assert main([*argv]) == 0
    assert f"notice: {SEEDED_LABEL}" in capsys.readouterr().out
    out = tmp_path / "seeded"
    assert main([*argv, "--out", str(out)]) == 0
    capsys.readouterr()
    assert (out / TABLE).read_text().splitlines()[0] == f"# release: {SEEDED_LABEL}"
    assert json.loads((out / "release.json").read_text())["notice"] == SEEDED_LABEL
    again = tmp_path / "again"
    assert main([*argv, "--out", str(again)]) == 0
    capsys.readouterr()
    assert table_lines(again / TABLE) == table_lines(out / TABLE)  # the same seeded tables


def test_out_writes_the_tables_and_the_record(capsys, scenario, tmp_path) -> None:
    spec, data = scenario
    out = tmp_path / "release"
    doc = run_json(capsys, "run", str(spec), "--data", str(data), "--mechanism", "identity",
                   "--out", str(out))
    assert sorted(n for n in os.listdir(out) if not n.endswith(".parquet")) == [
        TABLE, "release.json"]
    record = json.loads((out / "release.json").read_text())
    assert record == json.loads(json.dumps(doc["release"]))
    assert record["workload"]["queries"] == 16 and len(record["workload"]["sha256"]) == 64
    assert record["privacy"] == {"noise": "zcdp", "rho": 0.5}
    assert record["noise"]["sampler"] == "discrete_gaussian"
    assert record["noise"]["grid_spacing"] == 1.0  # identity is an integer strategy
    assert record["noise"]["guarantee"]["rho"] == pytest.approx(0.5, rel=1e-12)
    assert record["seeded"] is False and record["package_version"]
    plan = get("identity").plan(Scenario.load(spec).workload, Privacy(noise="zcdp", rho=0.5))
    assert record["expected_rmse"] == pytest.approx(plan.rmse(), rel=1e-12)  # factor 1
    rows = list(csv.reader(table_lines(out / TABLE)))
    assert rows[0] == ["age", "sex", "estimate", "margin_95", "raw"] and len(rows) == 17
    # prefixes of the numeric age (the last one covers every age) by sex
    ages = ["0", "0-1", "0-2", "0-3", "0-4", "0-5", "0-6", "total"]
    assert [r[0] for r in rows[1:]] == [a for a in ages for _ in range(2)]
    assert [r[1] for r in rows[1:]] == ["0", "1"] * 8
    stamp = provenance(out / TABLE)
    assert stamp["release"] == "private release" and stamp["mechanism"] == "identity"
    assert stamp["time"] == record["time"] and stamp["time"].endswith("+00:00")  # UTC
    assert stamp["package_version"] == record["package_version"]
    assert json.loads(stamp["privacy"]) == {"noise": "zcdp", "rho": 0.5}
    assert stamp["privacy_unit"] == "one record (add/remove) of the data"
    assert json.loads(stamp["noise"])["scale"] == record["noise"]["scale"] > 0
    assert stamp["post_processing"] == record["post_processing"]
    assert stamp["post_processing"].startswith("consistent: one non-negative estimate")
    assert stamp["data_sha256"] == record["data_sha256"] and len(record["data_sha256"]) == 64
    assert json.loads(stamp["budget"])["charged"] is False
    raw = np.array([float(r[4]) for r in rows[1:]]).reshape(8, 2)
    assert np.array_equal(raw, np.round(raw))  # on the integer grid
    estimate = np.array([int(r[2]) for r in rows[1:]]).reshape(8, 2)
    # whole prefix counts of one non-negative vector: they never decrease along the ages
    assert (estimate[0] >= 0).all() and (np.diff(estimate, axis=0) >= 0).all()
    # identity's prefix of k ages sums k counts of noise sd 1: margin 1.96 sqrt(k)
    margins = np.array([float(r[3]) for r in rows[1:]]).reshape(8, 2)
    # published to the hundredth of a person
    assert np.array_equal(margins, np.round(
        1.959963984540054 * np.sqrt(np.arange(1, 9))[:, None] * np.ones((1, 2)), 2))


def test_measurements_lie_on_the_stated_grid(scenario) -> None:
    spec, data = scenario
    s = Scenario.load(spec)
    from engine.data import load_csv

    dataset = load_csv(str(data), s.domain)
    plan = get("hdmm").plan(s.workload, Privacy(noise="gaussian", epsilon=1.0, delta=1e-6))
    for k in (0, 3, 12):
        m = plan.measure(dataset, grid_exponent=k)
        spacing = m.noise.spacing
        assert spacing == (1.0 if m.noise.grid_exponent == 0 else 2.0**-k)
        assert np.array_equal(m.y / spacing, np.round(m.y / spacing))
        assert m.noise.scale >= plan.noise_std()  # never less noise than the plan


def test_aim_grem_run_records_its_ledger(capsys, tmp_path) -> None:
    spec = tmp_path / "m.yaml"
    spec.write_text("domain: {a: 3, b: 4, c: 2}\nworkload:\n  - marginals: {k: 2}\n"
                    "privacy: {noise: zcdp, rho: 1.0}\n")
    data = tmp_path / "d.csv"
    rng = np.random.default_rng(0)
    data.write_text("a,b,c\n" + "".join(f"{rng.integers(3)},{rng.integers(4)},"
                                        f"{rng.integers(2)}\n" for _ in range(200)))
    out = tmp_path / "aim"
    doc = run_json(capsys, "run", str(spec), "--data", str(data), "--mechanism", "aim-grem",
                   "--out", str(out))
    ledger = doc["release"]["ledger"]
    assert ledger and sum(row["rho"] for row in ledger) == pytest.approx(1.0, rel=1e-9)
    assert doc["release"]["noise"]["exact"] is True  # discrete Gaussian, exact selection
    assert "exponential" in doc["release"]["noise"]["selection"]
    assert sorted(p.name for p in out.iterdir()) == ["a_x_b.csv", "a_x_c.csv", "b_x_c.csv",
                                                     "release.json"]
    tables = {name: read_table(out / f"{name}.csv") for name in ("a_x_b", "a_x_c", "b_x_c")}
    assert list(tables["a_x_b"].columns) == ["a", "b", "estimate", "margin_95", "raw"]
    assert tables["a_x_b"]["a"].tolist() == [0] * 4 + [1] * 4 + [2] * 4
    for frame in tables.values():  # whole, non-negative, one total, margins stated
        assert frame["estimate"].dtype == np.int64 and (frame["estimate"] >= 0).all()
        assert frame["estimate"].sum() == tables["a_x_b"]["estimate"].sum()
        assert (frame["margin_95"] > 0).all()
    for attr, (left, right) in {"a": ("a_x_b", "a_x_c"), "b": ("a_x_b", "b_x_c"),
                                "c": ("a_x_c", "b_x_c")}.items():  # exactly consistent
        assert (tables[left].groupby(attr)["estimate"].sum().tolist()
                == tables[right].groupby(attr)["estimate"].sum().tolist())
    assert doc["release"]["post_processing"].startswith(
        "consistent: whole counts fitted to the released GReM-MLE marginals by raking")


@pytest.mark.parametrize(("flags", "starts"), [
    (["--grid", "-1"], "--grid: expected an integer in [0, 40]"),
    (["--grid", "x"], "--grid: expected an integer in [0, 40]"),
    (["--seed", "abc"], "--seed: expected a non-negative integer"),
    (["--seed", "-2"], "--seed: expected a non-negative integer"),
])
def test_bad_release_flags_get_one_line(capsys, scenario, tmp_path, flags, starts) -> None:
    spec, data = scenario
    out = tmp_path / "never"
    one_line_error(capsys, ["run", str(spec), "--data", str(data), *flags, "--out", str(out)],
                   starts)
    assert not out.exists()


def test_bad_out_gets_one_line_and_nothing_is_written(capsys, scenario, tmp_path) -> None:
    spec, data = scenario
    a_file = tmp_path / "file.txt"
    a_file.write_text("keep me")
    one_line_error(capsys, ["run", str(spec), "--data", str(data), "--out", str(a_file)],
                   "--out: ")
    assert a_file.read_text() == "keep me"
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):  # running as root: permissions do not bind
            pytest.skip("directory permissions are not enforced for this user")
        one_line_error(capsys, ["run", str(spec), "--data", str(data), "--out",
                                str(locked / "sub")], "--out: cannot create")
        one_line_error(capsys, ["run", str(spec), "--data", str(data), "--out", str(locked)],
                       "--out: ")
        assert os.listdir(locked) == []
    finally:
        locked.chmod(0o700)


def test_census_needs_a_public_size_range(capsys, tmp_path) -> None:
    path = tmp_path / "h.csv"
    write_hierarchy_csv(synthetic_census("levels=1,3,8;groups=600;max_size=6;seed=3"), path)
    one_line_error(capsys, ["census", "--data", str(path)], "--max-size: required with --data")
    out = tmp_path / "census"
    doc = run_json(capsys, "census", "--data", str(path), "--max-size", "9", "--trials", "1",
                   "--out", str(out))
    assert doc["size_buckets"] == 10 and doc["seeded"] is False
    record = json.loads((out / "release.json").read_text())
    assert record["noise"]["sampler"] == "discrete_laplace" and record["noise"]["exact"]
    assert record["domain"]["sizes"]["max_size"] == 9
    levels = [read_table(out / f"{name}.csv") for name in ("nation", "state", "county")]
    assert sorted(p.name for p in out.iterdir()) == ["county.csv", "nation.csv", "release.json",
                                                     "state.csv"]
    assert list(levels[2].columns) == ["nation", "state", "county", "size", "estimate",
                                       "margin_95", "raw"]
    assert [len(t) for t in levels] == [10, 3 * 10, 8 * 10]
    for table in levels:  # whole, non-negative, every level sums to the public n
        assert table["estimate"].dtype == np.int64 and (table["estimate"] >= 0).all()
        assert table["estimate"].sum() == 600 and (table["margin_95"] > 0).all()
    # parent = sum of children, exactly
    assert (levels[2].groupby(["state", "size"], sort=False)["estimate"].sum().tolist()
            == levels[1]["estimate"].tolist())
    assert (levels[1].groupby("size", sort=False)["estimate"].sum().tolist()
            == levels[0]["estimate"].tolist())
    assert record["post_processing"].startswith("dp: M_DP")
    assert "'estimate' column is consistent" in record["post_processing"]


def test_census_seeded_is_labelled_and_unseeded_differs(capsys) -> None:
    argv = ["census", "--synthetic", "levels=1,3,9;groups=500;max_size=8;seed=1", "--trials",
            "1"]
    a, b = run_json(capsys, *argv), run_json(capsys, *argv)
    assert a["rmse"] != b["rmse"] and a["notice"] is None
    seeded = run_json(capsys, *argv, "--seed", "2")
    assert seeded["notice"] == SEEDED_LABEL and seeded == {**seeded, "seeded": True}
    assert main([*argv, "--seed", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == SEEDED_LABEL


def test_census_laplace_sampler_releases_exact_noise_on_its_grid(capsys, tmp_path) -> None:
    argv = ["census", "--synthetic", "levels=1,3,9;groups=500;max_size=8;seed=1", "--trials",
            "1", "--sampler", "laplace"]
    out = tmp_path / "laplace"
    a = run_json(capsys, *argv, "--out", str(out))
    b = run_json(capsys, *argv)
    assert a["rmse"] != b["rmse"] and a["notice"] is None
    noise = json.loads((out / "release.json").read_text())["noise"]
    assert noise["sampler"] == "discrete_laplace" and noise["exact"] is True
    assert noise["grid_exponent"] == 10 and noise["grid_spacing"] == 2.0**-10
    raw = np.concatenate([read_table(out / f"{name}.csv")["raw"].to_numpy()
                          for name in ("nation", "state", "county")])
    # the raw noisy counts lie on the grid 2**-10 (the published estimates are whole)
    assert np.array_equal(raw * 1024, np.round(raw * 1024)) and raw.sum() > 0
    assert not np.array_equal(raw, np.round(raw))
    seeded = [run_json(capsys, *argv, "--seed", "4") for _ in range(2)]
    assert seeded[0]["rmse"] == seeded[1]["rmse"] and seeded[0]["notice"] == SEEDED_LABEL
