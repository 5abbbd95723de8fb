"""`python -m engine run SPEC --data CSV --out DIR` publishes tables a data steward can hand out
(issue 28, item 2): one table per workload term, cells named in the domain's own values
(`female` / `male`, bins as `30-39`, `total` for a summed attribute), whole non-negative
counts that agree exactly across tables, a positive 95 % margin per cell, and a record that
says which post-processing ran. `--raw` publishes the unbiased estimates only, and their
95 % intervals cover the true answers about 95 % of the time."""

from __future__ import annotations

import importlib.util
import json
import os
import re
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from engine.cli.main import main
from engine.data import load_csv
from engine.errors import SpecError
from engine.mechanisms import get
from engine.noise import SEEDED_LABEL
from engine.scenario import Scenario
from engine.workflows.release import release

SPEC = """
domain:
  sex: {labels: [female, male]}
  age: {kind: numeric, bin_edges: [0, 30, 40, 50, 65, 100]}
  smoker: {labels: ["no", "yes"]}
workload:
  - marginals: {k: 1}
  - marginals: {k: 2}
  - product: {sex: identity, age: total, smoker: identity}
privacy: {noise: zcdp, rho: 0.1}
"""
VALUES = {"sex": ["female", "male"], "age": ["0-29", "30-39", "40-49", "50-64", "65-99"],
          "smoker": ["no", "yes"]}
#: The tables of SPEC's workload: file stem -> the attributes it keeps (the rest summed).
MARGINALS = {"sex": ("sex",), "age": ("age",), "smoker": ("smoker",),
             "sex_x_age": ("sex", "age"), "sex_x_smoker": ("sex", "smoker"),
             "age_x_smoker": ("age", "smoker")}
SUMMED = "identity_sex_x_total_age_x_identity_smoker"
RECORDS = 500


@pytest.fixture
def steward(tmp_path: Path) -> tuple[Path, Path]:
    """``(spec, data)``: SPEC as YAML and 500 seeded people in their raw values (labels and
    ages in years), as a steward's CSV holds them."""
    spec = tmp_path / "survey.yaml"
    spec.write_text(SPEC)
    rng = np.random.default_rng(11)
    sex = rng.choice(["female", "male"], RECORDS)
    age = rng.integers(18, 95, RECORDS)
    smoker = np.where(rng.random(RECORDS) < np.where(age < 40, 0.35, 0.2), "yes", "no")
    data = tmp_path / "survey.csv"
    data.write_text("sex,age,smoker\n" + "".join(
        f"{s},{a},{k}\n" for s, a, k in zip(sex, age, smoker, strict=True)))
    return spec, data


def run(capsys, spec: Path, data: Path, out: Path, *flags: str) -> dict:
    argv = ["run", str(spec), "--data", str(data), "--out", str(out), "--json", *flags]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def read(out: Path, stem: str) -> pd.DataFrame:
    """A published table, every value column as text (as a spreadsheet shows it)."""
    return pd.read_csv(out / f"{stem}.csv", comment="#",
                       dtype=dict.fromkeys(VALUES, str), keep_default_na=False)


def true_counts(data: Path, attrs: tuple[str, ...]) -> pd.Series:
    """The true counts of a marginal from the raw CSV (age binned as the domain bins it)."""
    frame = pd.read_csv(data, keep_default_na=False)
    frame["age"] = pd.cut(frame["age"], [0, 30, 40, 50, 65, 100], right=False,
                          labels=VALUES["age"]).astype(str)
    return frame.groupby(list(attrs)).size()


@pytest.mark.parametrize("mechanism", ["identity", "hdmm"])
def test_run_out_publishes_labelled_whole_consistent_counts_with_margins(
        capsys, steward, tmp_path, mechanism: str) -> None:
    spec, data = steward
    out = tmp_path / mechanism
    doc = run(capsys, spec, data, out, "--mechanism", mechanism)
    csvs = sorted(name for name in os.listdir(out) if name.endswith(".csv"))
    assert csvs == sorted(f"{stem}.csv" for stem in [*MARGINALS, SUMMED])

    tables = {stem: read(out, stem) for stem in MARGINALS}
    totals = set()
    for stem, attrs in MARGINALS.items():
        table = tables[stem]
        assert list(table.columns) == [*attrs, "estimate", "margin_95", "raw"]
        # every cell of the marginal, named in the domain's values, in the domain's order
        expected = pd.MultiIndex.from_product([VALUES[a] for a in attrs]).to_list()
        assert [tuple(row) for row in table[list(attrs)].itertuples(index=False)] == expected
        assert table["estimate"].dtype == np.int64 and (table["estimate"] >= 0).all()
        assert (table["margin_95"] > 0).all() and np.isfinite(table["margin_95"]).all()
        assert table["raw"].dtype == np.float64
        totals.add(int(table["estimate"].sum()))
        # the counts estimate the truth: within 4 margins of it (the margins are 95 % ones)
        truth = true_counts(data, attrs).reindex(pd.MultiIndex.from_tuples(expected)
                                                 if len(attrs) > 1 else
                                                 [e[0] for e in expected], fill_value=0)
        assert (np.abs(table["estimate"].to_numpy() - truth.to_numpy())
                <= 4 * table["margin_95"].to_numpy() + 1).all()
    # one total for every table, near the true number of records (the sum of the sex
    # margins bounds 1.96 sd of the total of the raw sex table)
    assert len(totals) == 1
    (total,) = totals
    assert abs(total - RECORDS) <= 3 * float(tables["sex"]["margin_95"].sum()) + 1

    # exact consistency: a 1-way table equals the sums of every 2-way table containing it
    for first, second in combinations(VALUES, 2):
        pair = tables[f"{first}_x_{second}"]
        for attr in (first, second):
            one_way = tables[attr].set_index(attr)["estimate"]
            summed = pair.groupby(attr, sort=False)["estimate"].sum()
            assert summed.to_dict() == one_way.to_dict()

    # a summed attribute reads `total`; the table equals sex x smoker
    summed_table = read(out, SUMMED)
    assert list(summed_table.columns) == ["sex", "age", "smoker", "estimate", "margin_95",
                                          "raw"]
    assert set(summed_table["age"]) == {"total"}
    assert summed_table["estimate"].tolist() == tables["sex_x_smoker"]["estimate"].tolist()

    record = json.loads((out / "release.json").read_text())
    assert record == json.loads(json.dumps(doc["release"]))
    # fitted to the strategy's measurements, or to the workload answers of a plan that
    # reconstructs them its own way (an hdmm operator with a measurer)
    assert re.match(r"consistent: one non-negative estimate of the data \(one count per cell\) "
                    r"fitted to (the noisy measurements|the released workload answers) by "
                    r"variance-weighted least squares", record["post_processing"])
    assert "it holds for the unbiased raw estimate" in record["post_processing"]
    stamp = [line for line in (out / "sex.csv").read_text().splitlines()
             if line.startswith("# post_processing: ")]
    assert stamp == [f"# post_processing: {record['post_processing']}"]
    parquet = sorted(name for name in os.listdir(out) if name.endswith(".parquet"))
    if importlib.util.find_spec("pyarrow") is None:
        assert parquet == []  # CSV only; pyarrow is optional (the `parquet` extra)
    else:
        assert parquet == sorted(f"{stem}.parquet" for stem in [*MARGINALS, SUMMED])
        assert pd.read_parquet(out / "sex.parquet")["estimate"].tolist() == \
            tables["sex"]["estimate"].tolist()


def test_raw_publishes_the_unbiased_estimates_the_counts_were_made_from(capsys, steward,
                                                                        tmp_path) -> None:
    spec, data = steward
    seeded = ("--mechanism", "hdmm", "--seed", "9")
    counts = run(capsys, spec, data, tmp_path / "counts", *seeded)
    raw = run(capsys, spec, data, tmp_path / "raw", *seeded, "--raw")
    assert raw["notice"] == counts["notice"] == SEEDED_LABEL
    assert raw["release"]["post_processing"].startswith(
        "raw: the unbiased least-squares estimates, unrounded")
    assert raw["errors"] == counts["errors"]  # the errors are those of the raw answers
    for stem, attrs in MARGINALS.items():
        table = read(tmp_path / "raw", stem)
        assert list(table.columns) == [*attrs, "margin_95", "raw"]
        with_counts = read(tmp_path / "counts", stem)
        # the same noise (seeded): post-processing changes the counts, not the raw estimates
        assert np.array_equal(table["raw"].to_numpy(), with_counts["raw"].to_numpy())
        assert np.array_equal(table["margin_95"].to_numpy(),
                              with_counts["margin_95"].to_numpy())
    assert (read(tmp_path / "raw", "sex")["raw"] % 1 != 0).any()  # unrounded


def test_run_help_documents_raw_and_the_tables(capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(["run", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--raw publish the unbiased least-squares estimates only" in text
    assert "one CSV per workload term" in text and "margin_95" in text and "Parquet" in text


def test_raw_95_percent_intervals_cover_the_truth_95_percent_of_the_time(steward) -> None:
    """200 seeded releases of 37 answers each (7,400 query-draws): the share of true answers
    inside raw +/- margin_95 is 0.95 within 0.93..0.97 (about 4 binomial standard
    deviations for independent draws; the answers of one release share its noise)."""
    spec, data = steward
    scenario = Scenario.load(spec)
    dataset = load_csv(str(data), scenario.domain)
    plan = get("hdmm").plan(scenario.workload, scenario.privacy)
    truth = scenario.workload.answer(dataset.datavector())
    inside = []
    for seed in range(200):
        frames = release(plan, data=dataset, seed=seed, post_process="raw").tables.frames
        raw = np.concatenate([f["raw"].to_numpy() for f in frames.values()])
        margin = np.concatenate([f["margin_95"].to_numpy() for f in frames.values()])
        inside.append(np.abs(raw - truth) <= margin)
    inside = np.concatenate(inside)
    assert inside.size == 200 * (2 + 5 + 2 + 10 + 4 + 10 + 4)
    assert 0.93 <= inside.mean() <= 0.97, inside.mean()


def test_an_unknown_post_processing_is_one_line_before_anything_is_done(steward,
                                                                         tmp_path) -> None:
    spec, data = steward
    scenario = Scenario.load(spec)
    out = tmp_path / "never"
    with pytest.raises(SpecError) as refused:
        release("identity", data=load_csv(str(data), scenario.domain),
                workload=scenario.workload, privacy=scenario.privacy, out=out,
                post_process="rounded")
    assert str(refused.value) == "post_process: unknown 'rounded'; allowed: consistent, raw"
    assert not out.exists()


def test_fit_space_marginals_fits_the_tables_themselves(capsys, steward, tmp_path) -> None:
    """``--fit-space marginals`` on 1- and 2-way marginals: the same noise (seeded), the same
    raw estimates and margins, counts fitted in the tables' own space that still agree and
    share one total; a bad value is one line."""
    spec, data = steward
    marginals_only = tmp_path / "marginals.yaml"
    marginals_only.write_text(SPEC.replace(
        "  - product: {sex: identity, age: total, smoker: identity}\n", ""))
    seeded = ("--mechanism", "hdmm", "--seed", "9")
    cells = run(capsys, marginals_only, data, tmp_path / "cells", *seeded)
    fitted = run(capsys, marginals_only, data, tmp_path / "fitted", *seeded,
                 "--fit-space", "marginals")
    assert cells["release"]["post_processing"].startswith(
        "consistent: one non-negative estimate of the data (one count per cell)")
    assert fitted["release"]["post_processing"].startswith(
        "consistent: non-negative 1- and 2-way tables (")
    tables = {stem: read(tmp_path / "fitted", stem) for stem in MARGINALS}
    for stem in MARGINALS:
        before = read(tmp_path / "cells", stem)
        assert np.array_equal(tables[stem]["raw"].to_numpy(), before["raw"].to_numpy())
        assert np.array_equal(tables[stem]["margin_95"].to_numpy(),
                              before["margin_95"].to_numpy())
        counts = tables[stem]["estimate"].to_numpy()
        assert counts.dtype.kind == "i" and (counts >= 0).all()
    totals = {int(t["estimate"].sum()) for t in tables.values()}
    assert len(totals) == 1
    for pair in ("sex_x_age", "sex_x_smoker", "age_x_smoker"):
        for attr in MARGINALS[pair]:
            assert (tables[pair].groupby(attr, sort=False)["estimate"].sum()
                    .reindex(tables[attr][attr]).tolist() == tables[attr]["estimate"].tolist())
    assert main(["run", str(marginals_only), "--data", str(data), "--fit-space", "tables"]) != 0
    assert capsys.readouterr().err.strip() == ("error: argument --fit-space: invalid choice: "
                                               "'tables' (choose from 'auto', 'cells', "
                                               "'marginals', 'three-way')")
    scenario = Scenario.load(spec)
    with pytest.raises(SpecError, match="^fit_space: unknown 'tables'; allowed: auto, cells, "):
        release("identity", data=load_csv(str(data), scenario.domain),
                workload=scenario.workload, privacy=scenario.privacy, fit_space="tables",
                seed=1)
