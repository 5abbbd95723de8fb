"""`python -m engine run` on the bundled Adult data, for data-independent and adaptive
mechanisms, with the spec's attribute order differing from the data's."""

import json
import subprocess
import sys

import pytest

SPEC = """
domain: {race: 5, sex: 2, relationship: 6, "income>50K": 2}
workload:
  - marginals: {k: 2}
privacy: {noise: zcdp, rho: 0.5}
"""


def _run(tmp_path, *args):
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    return subprocess.run([sys.executable, "-m", "engine", "run", str(spec), "--data", "adult",
                           *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("mechanism", ["identity", "aim-grem"])
def test_run_reports_contract_fields_and_small_error(tmp_path, mechanism):
    out = _run(tmp_path, "--mechanism", mechanism, "--seed", "3", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["mechanism"] == mechanism
    assert doc["records"] == 48842
    assert doc["rho_spent"] == pytest.approx(0.5, rel=1e-12)
    assert set(doc["errors"]) == {"rmse", "mean_l1", "mean_l2", "max_l1"}
    # rho = 0.5 on 4-attribute 2-way marginals: per-cell noise is a few counts at most, so a
    # mis-ordered data vector (errors in the thousands) cannot pass.
    assert doc["errors"]["rmse"] < 10


def test_run_points_hierarchies_to_census(tmp_path):
    out = _run(tmp_path, "--mechanism", "hierarchical-pgsr")
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        "not applicable: hierarchical-pgsr releases region hierarchies: use "
        "`python -m engine census`"]
