"""Builder presets: the HDMM paper's benchmark schemas, and generic shapes on the user's domain."""

from __future__ import annotations

import pytest

from engine.mechanisms import get
from engine.privacy import Privacy
from engine.scenario import Scenario
from explorer.presets import DEMO_DOMAIN, PRESETS, build_preset

# (queries m, cells n, terms) from HDMM section 11.2 (see the paper notes, section 7.4).
PAPER_SIZES = {
    "sf1": (4151, 29_440, 33),
    # 33 products with [I; T] on state, as the paper defines SF1+ (the menu once wrote it as
    # 66: each table per state and nationally, the same queries)
    "sf1_plus": (215_852, 1_501_440, 33),
    "cps_marginals": (618_120, 280_000, 32),
    "cps_prefix": (600_000, 280_000, 8),
    "adult_marginals": (21_043_262, 641_263_392_000_000_000, 470),
    "adult_prefix": (148_137, 641_263_392_000_000_000, 91),
    "loans_marginals": (279_751, 8_253_571_517_395_200, 188),
    "loans_prefix": (279_751, 8_253_571_517_395_200, 188),
    "classic_prefix": (256, 256, 1),
    "classic_all_range": (32_896, 256, 1),
}


@pytest.mark.parametrize("key", sorted(PAPER_SIZES))
def test_benchmark_presets_have_the_papers_sizes(key):
    workload = Scenario.from_spec(build_preset(key)).workload
    assert (workload.num_queries, workload.domain.size, len(workload.terms)) == \
        PAPER_SIZES[key]


def test_sf1_identity_error_matches_the_paper():
    # HDMM Table 6 (Laplace, eps = 1): Identity RMSE 23.20 on SF1.
    workload = Scenario.from_spec(build_preset("sf1")).workload
    plan = get("identity").plan(workload, Privacy(noise="laplace", epsilon=1.0))
    assert plan.rmse() == pytest.approx(23.20, abs=0.005)


def test_generic_presets_use_the_users_attributes():
    domain = {"age": {"size": 8, "kind": "numeric"}, "sex": 2}
    kway = Scenario.from_spec(build_preset("kway", domain, k=1)).workload
    assert kway.domain.names == ("age", "sex") and kway.num_queries == 10
    ranges = Scenario.from_spec(build_preset("ranges", domain)).workload
    assert ranges.num_queries == 36 * 2  # all 36 intervals of age, for each sex
    prefix = Scenario.from_spec(build_preset("prefix_marginals", domain, k=2)).workload
    assert prefix.num_queries == 16
    # k larger than the number of attributes is clipped instead of failing.
    assert Scenario.from_spec(build_preset("kway", domain, k=9)).workload.num_queries == 16


def test_generic_presets_fall_back_to_a_demo_domain():
    spec = build_preset("kway", None, k=2)
    assert spec["domain"] == DEMO_DOMAIN
    assert Scenario.from_spec(spec).workload.num_queries == 32 * 16 + 32 * 2 + 16 * 2


def test_range_preset_makes_an_attribute_ordered_when_none_is():
    spec = build_preset("ranges", {"colour": 4})
    assert spec["domain"]["colour"] == {"size": 4, "kind": "numeric"}
    assert Scenario.from_spec(spec).workload.num_queries == 10


def test_every_preset_is_a_valid_scenario_with_a_description():
    for key, preset in PRESETS.items():
        Scenario.from_spec(build_preset(key))
        assert preset.title and preset.description.endswith(".")
    with pytest.raises(KeyError, match="unknown 'nope'"):
        build_preset("nope")
