"""The command line of CONTRACT.md, run as a subprocess: validate, bound, compare, run."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.cli.main import main
from engine.privacy import Privacy

SPEC = """\
domain:
  age: {size: 8, kind: numeric}
  sex: 2
workload:
  - product: {age: prefix, sex: identity}
  - marginals: {k: 1}
privacy: {noise: gaussian, epsilon: 1.0, delta: 1.0e-6}
mechanisms: [identity, h2]
"""
BAD = """\
domain: {age: {size: 8, kind: numeric}, sex: 2}
workload:
  - marginals: {k: 1}
  - product: {age: prefx}
"""


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", *args], capture_output=True,
                          text=True, timeout=300)


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(SPEC)
    return path


def assert_one_line_error(proc: subprocess.CompletedProcess, message: str) -> None:
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [message]
    assert "Traceback" not in proc.stderr


def test_validate(spec: Path, tmp_path: Path) -> None:
    ok = cli("validate", str(spec))
    assert ok.returncode == 0, ok.stderr
    first, header, *estimates = ok.stdout.splitlines()
    assert first == "valid: 26 queries over 16 cells (3 terms), gaussian eps=1 delta=1e-06"
    # then the cost estimate of each of the spec's mechanisms (issue 15)
    assert header.startswith("estimated cost (memory limit ")
    assert [e.split()[0] for e in estimates] == ["identity", "h2"]
    assert all(" plan " in e and "; run " in e for e in estimates)
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD)
    assert_one_line_error(cli("validate", str(bad)),
                          "error: workload[1].product.age: unknown block 'prefx' (did you mean "
                          "'prefix'?); allowed: identity, total, prefix, suffix, all_range, "
                          "range, circular_range, permuted, random, matrix, identity_total")


def test_bound_table_and_json(spec: Path) -> None:
    table = cli("bound", str(spec))
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[:4] == ["queries: 26", "domain_size: 16", "noise: gaussian",
                         "privacy: gaussian eps=1 delta=1e-06"]
    assert lines[4] == "method: kronecker-blocks" and lines[6].startswith("svd_bound_rmse: ")
    assert lines[7] == "svd_bound_kind: exact"
    proc = cli("bound", str(spec), "--json", "--noise", "laplace", "--epsilon", "0.5")
    doc = json.loads(proc.stdout)
    assert doc["queries"] == 26 and doc["domain_size"] == 16 and doc["noise"] == "laplace"
    assert doc["svd_bound_rmse"] == pytest.approx(
        Privacy(noise="laplace", epsilon=0.5).sigma() * math.sqrt(doc["svd_bound"] / 26))
    assert float(lines[6].split(": ")[1]) == pytest.approx(
        Privacy().sigma() * math.sqrt(doc["svd_bound"] / 26), abs=1e-4)


def test_compare_json_shape(spec: Path, capsys) -> None:
    proc = cli("compare", str(spec), "--json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\n") == 1  # one JSON object
    doc = json.loads(proc.stdout)
    assert list(doc)[:7] == ["queries", "domain_size", "noise", "epsilon", "delta",
                             "svd_bound_rmse", "results"]
    assert (doc["queries"], doc["domain_size"], doc["noise"]) == (26, 16, "gaussian")
    assert (doc["epsilon"], doc["delta"]) == (1.0, 1e-6)
    assert [r["mechanism"] for r in doc["results"]] == ["identity", "h2"]  # the spec's list
    for r in doc["results"]:
        assert isinstance(r["rmse"], float) and r["rmse"] >= doc["svd_bound_rmse"]
        assert isinstance(r["plan_seconds"], float)
    # flags override privacy and mechanisms (in process from here on: same code path)
    assert main(["compare", str(spec), "--json", "--rho", "0.5", "--mechanism", "h2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["noise"] == "zcdp" and doc["rho"] == 0.5 and "epsilon" not in doc
    assert [r["mechanism"] for r in doc["results"]] == ["h2"]


def test_compare_reports_not_applicable_and_missing_bound(tmp_path: Path, capsys) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("domain: {a: {size: 100, kind: numeric}, b: {size: 100, kind: numeric}}\n"
                    "workload: [{product: {a: prefix}}, {affine: [a, b]}]\n")
    assert main(["compare", str(path), "--json", "--mechanism", "identity",
                 "--mechanism", "workload"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # a + b <= c is not a Kronecker product, and 10,000 cells are too many for eigvalsh
    assert doc["svd_bound_rmse"] is None and doc["svd_bound_kind"] == "none"
    ident, work = doc["results"]
    assert ident["rmse"] > 0 and "ratio_to_bound" not in ident
    assert work == {"mechanism": "workload", "rmse": None, "plan_seconds": work["plan_seconds"],
                    "error": "not applicable: explicit error needs n <= 8,192 cells; this "
                             "domain has 10,000"}


def test_compare_table(spec: Path) -> None:
    proc = cli("compare", str(spec), "--noise", "laplace", "--epsilon", "2")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("26 queries over 16 cells, laplace noise; SVD bound RMSE ")
    assert lines[1].split() == ["mechanism", "rmse", "x", "bound", "plan", "s"]
    assert [line.split()[0] for line in lines[2:]] == ["identity", "h2"]


def test_bad_flags_exit_2_with_one_line(spec: Path) -> None:
    assert_one_line_error(cli("compare", str(spec), "--mechanism", "identy"),
                          "error: --mechanism[0]: unknown mechanism 'identy' (did you mean "
                          "'identity'?); allowed: " + ", ".join(_names()))


def _names() -> list[str]:
    from engine.mechanisms import registry_names

    return list(registry_names())


@pytest.mark.parametrize("argv,message", [
    (["bound", "{spec}", "--epsilon", "-1"], "error: --epsilon: must be a positive number, "
                                             "got -1.0"),
    (["compare", "{spec}", "--noise", "laplace", "--delta", "1e-6"],
     "error: --delta: not a parameter of laplace noise"),
    (["bound", "{spec}", "--delta", "3"], "error: --delta: must lie strictly between 0 and 1, "
                                         "got 3.0"),
    (["bound", "{spec}", "--noise", "gausian"],
     "error: argument --noise: invalid choice: 'gausian' (choose from laplace, gaussian, zcdp)"),
    (["frobnicate"], "error: argument command: invalid choice: 'frobnicate' (choose from "
                     "validate, bound, compare, run, census, budget)"),
    (["bound", "{missing}"], "error: {missing}: cannot read scenario file (No such file or "
                             "directory)"),
])
def test_bad_input_in_process(argv, message: str, spec: Path, tmp_path: Path, capsys) -> None:
    missing = str(tmp_path / "nope.yaml")
    argv = [a.format(spec=spec, missing=missing) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    # argparse quotes the choices differently across Python versions
    assert err.strip().replace("'", "") == message.format(missing=missing).replace("'", "")


def write_csv(path: Path, records: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    age, sex = rng.integers(0, 8, records), rng.integers(0, 2, records)
    path.write_text("age,sex\n" + "".join(f"{a},{s}\n" for a, s in zip(age, sex, strict=True)))
    return age, sex


def test_run_on_a_csv(spec: Path, tmp_path: Path, capsys) -> None:
    data = tmp_path / "people.csv"
    write_csv(data, 400, 1)
    proc = cli("run", str(spec), "--data", str(data), "--mechanism", "h2", "--seed", "3",
               "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    # the contract's keys first, then the release fields (issue 14) appended compatibly
    assert list(doc)[:5] == ["mechanism", "records", "rho_spent", "seconds", "errors"]
    assert list(doc)[5:] == ["seeded", "notice", "release"]
    assert doc["mechanism"] == "h2" and doc["records"] == 400
    assert doc["rho_spent"] == pytest.approx(Privacy().zcdp_rho())
    assert set(doc["errors"]) == {"rmse", "mean_l1", "mean_l2", "max_l1"}
    assert all(v > 0 for v in doc["errors"].values())
    assert main(["run", str(spec), "--data", str(data), "--mechanism", "h2", "--seed", "3",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["errors"] == doc["errors"]  # seeded
    bad = tmp_path / "bad.csv"
    bad.write_text("age,sex\n3,1\n9,0\n")
    assert_one_line_error(cli("run", str(spec), "--data", str(bad), "--mechanism", "h2"),
                          "error: bad.csv: column 'age': 1 value outside 0..7 (row 2: 9)")


def test_run_errors_match_the_analytic_error(spec: Path, tmp_path: Path, capsys) -> None:
    """Averaged over seeds, the reported RMSE matches the plan's expected RMSE (in process)."""
    from engine.mechanisms import get
    from engine.scenario import Scenario

    data = tmp_path / "people.csv"
    write_csv(data, 300, 2)
    squares = []
    for seed in range(25):
        assert main(["run", str(spec), "--data", str(data), "--mechanism", "identity",
                     "--seed", str(seed), "--json"]) == 0
        squares.append(json.loads(capsys.readouterr().out)["errors"]["rmse"] ** 2)
    s = Scenario.load(spec)
    expected = get("identity").plan(s.workload, s.privacy).rmse()
    assert math.sqrt(np.mean(squares)) == pytest.approx(expected, rel=0.12)


def test_compare_sorts_best_first_names_best_and_bound_and_reports_progress(
        tmp_path: Path) -> None:
    path = tmp_path / "range.yaml"
    path.write_text("domain: {x: {size: 64, kind: numeric}}\n"
                    "workload: [{product: {x: all_range}}]\n"
                    "privacy: {noise: gaussian, epsilon: 1.0, delta: 1.0e-6}\n"
                    "mechanisms: [identity, h2, wavelet, aim-grem]\n")
    proc = cli("compare", str(path))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    # best first: wavelet 11.42 < h2 12.74 < identity 19.82; the bound is 9.62
    assert [line.split()[0] for line in lines[2:6]] == ["wavelet", "h2", "identity",
                                                        "aim-grem"]
    assert [float(line.split()[1]) for line in lines[2:5]] == pytest.approx(
        [11.42, 12.74, 19.82], abs=5e-3)
    assert "not applicable: data-dependent, needs data" in lines[5]
    head, best = lines[0].split("; best: ")
    assert head.endswith("SVD bound RMSE 9.6209") and best.startswith("wavelet at RMSE 11.4")
    assert float(best.split(", ")[1].split(" x")[0]) == pytest.approx(11.42 / 9.62, abs=2e-3)
    progress = proc.stderr.splitlines()
    assert progress[0].startswith("planning 4 mechanisms for 2,080 queries over 64 cells")
    assert progress[1].startswith("[1/4] identity: RMSE 19.8155 (")
    assert progress[2] == "planning h2 ..."
    assert progress[-1].startswith("[4/4] aim-grem: not applicable")
    doc = json.loads(cli("compare", str(path), "--json").stdout)
    assert [r["mechanism"] for r in doc["results"]] == ["identity", "h2", "wavelet",
                                                        "aim-grem"]  # JSON keeps its order
    assert doc["best"] == "wavelet"
    assert doc["order"] == ["wavelet", "h2", "identity", "aim-grem"]


def test_compare_lists_data_dependent_mechanisms_by_default(tmp_path: Path, capsys) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text("domain: {x: {size: 4, kind: numeric}}\n"
                    "workload: [{product: {x: prefix}}]\n")
    assert main(["compare", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {r["mechanism"]: r for r in doc["results"]}
    assert set(rows) == set(_names())
    for name in ("aim-grem", "hierarchical-pgsr"):
        assert rows[name]["rmse"] is None
        assert rows[name]["error"].startswith("not applicable: data-dependent, needs data")
    assert rows[doc["best"]]["rmse"] == min(r["rmse"] for r in rows.values()
                                            if r["rmse"] is not None)
