"""Malformed scenario specs: one-line errors that name the field path and suggest a fix."""

from __future__ import annotations

import pytest

from engine.errors import SpecError
from engine.scenario import Scenario
from engine.workloads.spec import BLOCK_NAMES, GROUP_KINDS

D = {"age": {"size": 10, "kind": "numeric"}, "sex": 2, "race": 7}
BLOCKS = ", ".join(BLOCK_NAMES)
OK = [{"product": {"sex": "identity"}}]

CASES = [
    ({"workload": [{"product": {"age": "prefix"}}, {"product": {"age": "prefx"}}]},
     f"workload[1].product.age: unknown block 'prefx' (did you mean 'prefix'?); allowed: "
     f"{BLOCKS}"),
    ({"workload": [{"product": {"agee": "prefix"}}]},
     "workload[0].product.agee: unknown attribute 'agee' (did you mean 'age'?); attributes: "
     "age, sex, race"),
    ({"workload": [{"prodct": {"age": "prefix"}}]},
     "workload[0].prodct: unknown group kind (did you mean 'product'?); allowed: "
     + ", ".join(GROUP_KINDS)),
    ({"workload": [{"marginals": {"kk": 2}}]},
     "workload[0].marginals.kk: unknown key (did you mean 'k'?); allowed: k, upto, sets"),
    ({"workload": [{"marginals": {"k": 5}}]}, "workload[0].marginals.k: must be 0..3, got 5"),
    ({"workload": [{"marginals": {"k": 1, "upto": 2}}]},
     "workload[0].marginals: give exactly one of k, upto, sets (got k, upto)"),
    ({"workload": [{"marginals": {"sets": [["age", "rac"]]}}]},
     "workload[0].marginals.sets[0]: unknown attribute 'rac' (did you mean 'race'?); "
     "attributes: age, sex, race"),
    ({"workload": [{"product": {"age": {"block": "range"}}}]},
     "workload[0].product.age.width: missing (block 'range' needs a width)"),
    ({"workload": [{"product": {"age": {"block": "range", "widht": 3}}}]},
     "workload[0].product.age.widht: unknown key (did you mean 'width'?); allowed: width"),
    ({"workload": [{"product": {"age": {"block": "range", "width": 11}}}]},
     "workload[0].product.age.width: must be 1..10, got 11"),
    ({"workload": [{"product": {"age": {"block": "permuted", "of": "al_range"}}}]},
     f"workload[0].product.age.of: unknown block 'al_range' (did you mean 'all_range'?); "
     f"allowed: {BLOCKS}"),
    ({"workload": [{"product": {"age": {"blok": "prefix"}}}]},
     "workload[0].product.age.blok: unknown key (did you mean 'block'?)"),
    ({"workload": [{"affine": ["age", "sexx"]}]},
     "workload[0].affine[1]: unknown attribute 'sexx' (did you mean 'sex'?); attributes: "
     "age, sex, race"),
    ({"workload": [{"abs_diff": ["age"]}]},
     "workload[0].abs_diff: expected a list of two attribute names"),
    ({"workload": [{"product": {"sex": "identity"}, "weight": -1}]},
     "workload[0].weight: must be a finite number > 0.0, got -1.0"),
    ({"workload": [{"product": {"sex": "identity"}, "wieght": 2}]},
     "workload[0].wieght: unknown key (did you mean 'weight'?)"),
    ({"workload": [{"matrix": {"on": ["sex"], "rows": [[1, 0, 1]]}}]},
     "workload[0].matrix.rows: each row needs 2 entries (one per cell), got 3"),
    ({"workload": [{"random": {"on": ["sex"], "cuont": 3}}]},
     "workload[0].random.cuont: unknown key (did you mean 'count'?); allowed: on, count, p, "
     "seed"),
    ({"workload": [{"product": {"age": {"block": "random", "p": 0}}}]},
     "workload[0].product.age.p: must be a finite number > 0.0 and <= 1.0, got 0.0"),
    ({"workload": [{"product": {"age": "prefix"}, "marginals": {"k": 1}}]},
     "workload[0]: one group kind per item, got product, marginals"),
    ({"workload": []}, "workload: expected a non-empty list of query groups"),
    ({"workloads": OK},
     "workloads: unknown top-level key (did you mean 'workload'?); allowed: domain, workload, "
     "privacy, mechanisms"),
    ({}, "workload: missing"),
    ({"workload": OK, "privacy": {"noise": "gausian", "epsilon": 1}},
     "privacy.noise: unknown noise 'gausian' (did you mean 'gaussian'?); allowed: laplace, "
     "gaussian, zcdp"),
    ({"workload": OK, "privacy": {"noise": "laplace", "epsilon": 1, "delta": 1e-6}},
     "privacy.delta: not a parameter of laplace noise; allowed: noise, epsilon"),
]


@pytest.mark.parametrize("spec,message", CASES, ids=[m.split(":")[0] for _, m in CASES])
def test_malformed_spec(spec: dict, message: str) -> None:
    with pytest.raises(SpecError) as info:
        Scenario.from_spec({"domain": D, **spec})
    assert str(info.value) == message
    assert "\n" not in str(info.value)


def test_malformed_domain_and_mechanisms() -> None:
    with pytest.raises(SpecError) as info:
        Scenario.from_spec({"domain": {"age": {"size": 10, "kind": "numerc"}}, "workload": OK})
    assert str(info.value) == ("domain.age.kind: unknown kind 'numerc' (did you mean "
                               "'numeric'?); allowed: numeric, categorical")
    with pytest.raises(SpecError) as info:
        Scenario.from_spec({"domain": D, "workload": OK, "mechanisms": ["identty"]})
    # the list of allowed names grows as mechanisms are registered
    assert str(info.value).startswith("mechanisms[0]: unknown mechanism 'identty' (did you "
                                      "mean 'identity'?); allowed: ")
    with pytest.raises(SpecError, match=r"^domain: missing$"):
        Scenario.from_spec({"workload": OK})
    with pytest.raises(SpecError, match=r"^scenario: expected a mapping"):
        Scenario.from_spec([1, 2])


def test_malformed_text() -> None:
    with pytest.raises(SpecError) as info:
        Scenario.loads("domain: {age: 3\nworkload: [")
    assert str(info.value).startswith("scenario: not valid YAML: ")
    assert "\n" not in str(info.value)
    with pytest.raises(SpecError, match=r"^scenario: not valid JSON: "):
        Scenario.loads("{'domain': 1}", "json")
    with pytest.raises(SpecError, match=r"^/no/such/spec.yaml: cannot read scenario file"):
        Scenario.load("/no/such/spec.yaml")
