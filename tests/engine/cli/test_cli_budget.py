"""``python -m engine budget`` and the ledger's door in ``run --out`` / ``census --out``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli.main import main
from engine.ledger import Ledger
from engine.mechanisms.hierarchical.io import write_hierarchy_csv
from engine.mechanisms.hierarchical.synthetic import synthetic_census
from engine.privacy import cdp_eps


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
    remaining_eps = cdp_eps(0.2, 1e-6)
    assert 3.0 < remaining_eps < 3.2  # CKS: tighter than rho + 2 sqrt(rho ln(1/delta)) = 3.52
    assert err.strip() == ("error: budget: refused: data set 'people' has spent 1 / requested "
                           "0.5 (rho=0.5) / total 1.2 (rho); nothing was released; remaining: "
                           f"rho = 0.2 = eps {remaining_eps:.6g} at delta = 1e-06")
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
    assert err.strip() == ("note: evaluation only: nothing is written, so nothing is released; "
                           "the budget ledger is not charged")
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
        "total 1.5 (eps); nothing was released; remaining: eps = 0.5")
    assert list((tmp_path / "c2").iterdir()) == []


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


def test_bundled_demo_data_is_never_registered_nor_charged(capsys, scenario, tmp_path) -> None:
    spec, _, url = scenario
    status, out, err = cli(capsys, "budget", "init", "--data", "adult", "--name", "demo",
                           "--rho", "1", "--ledger", url)
    assert status == 2 and err.strip() == (
        "error: --data: 'adult' is bundled demo data: it runs in the teaching sandbox and is "
        "never charged; register your own CSV")
    adult = tmp_path / "adult.yaml"
    adult.write_text("domain: {sex: 2, race: 5}\nworkload:\n  - marginals: {k: 1}\n"
                     "privacy: {noise: zcdp, rho: 0.5}\n")
    status, _, err = cli(capsys, "run", str(adult), "--data", "adult", "--mechanism",
                         "identity", "--ledger", url, "--out", str(tmp_path / "demo"))
    assert status == 0
    assert err.strip() == ("note: teaching: not a private release: the teaching sandbox "
                           "(bundled demo data) is never charged to the budget ledger")
    record = json.loads((tmp_path / "demo" / "release.json").read_text())
    assert record["notice"] == "teaching: not a private release" and record["teaching"]
    for table in ("sex.csv", "race.csv"):
        first = (tmp_path / "demo" / table).read_text().splitlines()[0]
        assert first == "# release: teaching: not a private release"
    assert not (tmp_path / "ledger.sqlite").exists()


def test_owner_archive_and_a_yaml_12_domain(capsys, scenario, tmp_path) -> None:
    spec, data, url = scenario
    domain = tmp_path / "domain.yaml"
    domain.write_text("answer: {size: 2, labels: [no, yes]}\n")  # YAML 1.1 would read False
    status, out, _ = cli(capsys, "budget", "init", "--data", str(data), "--name", "mine",
                         "--rho", "1", "--domain", str(domain), "--ledger", url, "--json")
    assert status == 0 and json.loads(out)["owner"].startswith("local:")
    with Ledger(url) as ledger:
        assert ledger.require("mine").domain == {"answer": {"size": 2, "labels": ["no", "yes"]}}
    status, out, _ = cli(capsys, "budget", "archive", "mine", "--ledger", url)
    assert status == 0 and out.startswith("archived mine (")
    status, out, err = cli(capsys, "run", str(spec), "--data", str(data), "--mechanism",
                           "identity", "--ledger", url, "--out", str(tmp_path / "late"))
    assert status == 2 and err.strip() == (
        "error: dataset: 'mine' is archived (its history is kept as evidence; it takes no new "
        "release)")
    assert list((tmp_path / "late").iterdir()) == []
    status, out, _ = cli(capsys, "budget", "show", "mine", "--ledger", url, "--json")
    assert json.loads(out)["datasets"][0]["archived"] is True


def test_teaching_runs_are_never_charged(capsys, scenario, tmp_path) -> None:
    spec, data, url = scenario
    cli(capsys, "budget", "init", "--data", str(data), "--name", "people", "--rho", "1",
        "--ledger", url)
    status, out, err = cli(capsys, "run", str(spec), "--data", str(data), "--mechanism",
                           "identity", "--ledger", url, "--out", str(tmp_path / "t"),
                           "--teaching", "--json")
    assert status == 0 and json.loads(out)["notice"] == "teaching: not a private release"
    assert err.startswith("note: teaching: not a private release: the teaching sandbox")
    census = tmp_path / "census.csv"
    write_hierarchy_csv(synthetic_census("preset=toy"), census)
    cli(capsys, "budget", "init", "--data", str(census), "--name", "toy", "--epsilon", "1",
        "--ledger", url)
    status, out, _ = cli(capsys, "census", "--data", str(census), "--max-size", "7",
                         "--trials", "1", "--ledger", url, "--out", str(tmp_path / "c"),
                         "--teaching", "--json")
    assert status == 0 and json.loads(out)["release"]["teaching"] is True
    with Ledger(url) as ledger:
        assert ledger.history("people") == [] and ledger.history("toy") == []
