"""``python -m engine budget`` and the ledger's door in ``run --out`` / ``census --out``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli.main import main
from engine.ledger import Ledger
from engine.mechanisms.hierarchical.io import write_hierarchy_csv
from engine.mechanisms.hierarchical.synthetic import synthetic_census


@pytest.fixture
def scenario(scenario: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path, str]:
    """The shared ``(spec, data)`` scenario (tests/engine/conftest.py) and a ledger URL."""
    return *scenario, f"sqlite:///{tmp_path / 'ledger.sqlite'}"


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_run_is_charged_then_refused_with_nothing_written(capsys, scenario, tmp_path) -> None:
    spec, data, url = scenario
    status, out, _ = cli(capsys, "budget", "init", "--data", str(data), "--name", "people",
                         "--rho", "1.2", "--ledger", url)
    assert status == 0 and out.startswith("registered people (")
    run = ("run", str(spec), "--data", str(data), "--mechanism", "identity", "--ledger", url)
    for n in (1, 2):
        status, _, err = cli(capsys, *run, "--out", str(tmp_path / f"r{n}"))
        assert status == 0
        assert err.strip() == f"note: charged rho=0.5 to people: spent {0.5 * n:g} of rho=1.2"
    status, out, err = cli(capsys, *run, "--out", str(tmp_path / "r3"))
    assert status == 2 and out == ""
    assert err.strip() == ("error: budget: refused: data set 'people' has spent 1 / requested "
                           "0.5 (rho=0.5) / total 1.2 (rho); nothing was released")
    assert list((tmp_path / "r3").iterdir()) == []  # --out made the directory, nothing in it
    status, out, _ = cli(capsys, "budget", "history", "people", "--ledger", url, "--json")
    releases = json.loads(out)["releases"]
    assert [r["record"] for r in releases] == [str(tmp_path / "r1"), str(tmp_path / "r2")]
    assert [r["rho"] for r in releases] == [0.5, 0.5]
    status, out, _ = cli(capsys, "budget", "show", "people", "--ledger", url, "--json",
                         "--delta", "1e-9")
    (shown,) = json.loads(out)["datasets"]
    assert shown["spent"] == pytest.approx(1.0, abs=1e-12)
    assert shown["remaining_rho"] == pytest.approx(0.2, abs=1e-12)
    assert shown["at_delta"] == 1e-9 and shown["releases"] == 2


def test_seeded_evaluation_and_unregistered_runs_say_so(capsys, scenario, tmp_path) -> None:
    spec, data, url = scenario
    run = ("run", str(spec), "--data", str(data), "--mechanism", "identity", "--ledger", url)
    _, _, err = cli(capsys, *run, "--out", str(tmp_path / "a"))
    assert err.startswith("note: data set not registered in the budget ledger: this release "
                          "(rho=0.5) is not budgeted; register it with")
    assert not (tmp_path / "ledger.sqlite").exists()  # a hint does not create a database
    assert (tmp_path / "a" / "release.json").exists()  # unregistered releases proceed
    cli(capsys, "budget", "init", "--data", str(data), "--name", "people", "--rho", "1",
        "--ledger", url)
    _, _, err = cli(capsys, *run, "--seed", "3", "--out", str(tmp_path / "b"))
    assert err.strip() == "note: seeded run: not a private release; the budget ledger is not "\
                          "charged"
    _, _, err = cli(capsys, *run)
    assert err.strip() == ("note: evaluation only (no --out): nothing is released; the budget "
                           "ledger is not charged")
    assert Ledger(url).history("people") == []


def test_census_charges_pure_epsilon(capsys, tmp_path) -> None:
    data = tmp_path / "census.csv"
    write_hierarchy_csv(synthetic_census("preset=toy"), data)
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    cli(capsys, "budget", "init", "--data", str(data), "--name", "toy", "--epsilon", "1.5",
        "--ledger", url)
    census = ("census", "--data", str(data), "--max-size", "7", "--trials", "1", "--ledger", url)
    status, _, err = cli(capsys, *census, "--epsilon", "1", "--out", str(tmp_path / "c1"))
    assert status == 0 and err.strip() == "note: charged eps=1 to toy: spent 1 of eps=1.5"
    status, _, err = cli(capsys, *census, "--epsilon", "0.75", "--out", str(tmp_path / "c2"))
    assert status == 2 and err.strip() == (
        "error: budget: refused: data set 'toy' has spent 1 / requested 0.75 (eps=0.75) / "
        "total 1.5 (eps); nothing was released")


@pytest.mark.parametrize("argv,message", [
    (["budget", "init", "--data", "adult", "--name", "a"], "--rho/--epsilon: give exactly one"),
    (["budget", "init", "--data", "adult", "--name", "a", "--rho", "1", "--delta", "1e-6"],
     "--delta: a rho budget has no delta"),
    (["budget", "init", "--data", "adult", "--name", "a", "--rho", "-1"],
     "total: must be a positive number"),
    (["budget", "init", "--data", "missing.csv", "--name", "a", "--rho", "1"],
     "data: cannot read 'missing.csv'"),
    (["budget", "show", "nobody"], "dataset: 'nobody' is not registered"),
    (["budget", "show", "--delta", "2"], "--delta: must lie strictly between 0 and 1"),
    (["budget", "show", "--ledger", "nosuchdb://x"], "ledger: "),
])
def test_bad_budget_input_is_one_line(capsys, argv: list[str], message: str) -> None:
    status, out, err = cli(capsys, *argv)
    assert status == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {message}"), err


def test_corrupted_ledger_file_is_one_line_from_the_cli(capsys, tmp_path) -> None:
    bad = tmp_path / "ledger.sqlite"
    bad.write_bytes(b"garbage " * 200)
    status, _, err = cli(capsys, "budget", "show", "--ledger", f"sqlite:///{bad}")
    assert status == 2
    assert err.strip() == f"error: ledger: cannot open {str(bad)!r}: file is not a database"
