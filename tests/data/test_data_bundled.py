"""The bundled Adult data: record count, domain from the JSON, consistent marginals."""

from __future__ import annotations

import itertools
import json

import numpy as np

from engine.data import BUNDLED, adult_domain, load_adult
from engine.data.bundled import DATA_DIR
from engine.workloads.catalog import ADULT_ORDERED


def test_adult_domain_matches_the_json_in_order_and_size():
    sizes = json.loads((DATA_DIR / "adult-domain.json").read_text())
    domain = adult_domain()
    assert domain.names == tuple(sizes)
    assert domain.shape == tuple(sizes.values())
    numeric = {a.name for a in domain if a.kind == "numeric"}
    assert (
        numeric
        == set(ADULT_ORDERED)
        == {"age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"}
    )


def test_load_adult_has_all_records_over_the_bundled_domain():
    adult = load_adult()
    assert adult.records == 48842
    assert adult.domain == adult_domain()
    assert BUNDLED["adult"]() is adult
    assert (DATA_DIR / "PROVENANCE.md").read_text().count("361705d") == 1


def test_adult_two_way_marginals_sum_to_the_record_count():
    adult = load_adult()
    for pair in itertools.combinations(adult.domain.names, 2):
        marginal = adult.marginal(pair)
        assert marginal.shape == adult.domain.project(pair).shape
        assert marginal.sum() == 48842
    # race precedes sex in the domain, so axis 0 is race whatever order was asked.
    np.testing.assert_array_equal(
        adult.marginal(["sex", "race"]).sum(axis=1), adult.marginal(["race"])
    )
