"""Domains: parsing, validation messages, exact sizes, projections and round trips."""

from __future__ import annotations

import pytest

from engine.domain import Attribute, Domain
from engine.errors import SpecError


def test_from_spec_forms() -> None:
    d = Domain.from_spec({"age": {"size": 100, "kind": "numeric"}, "sex": 2,
                          "race": {"size": 3, "labels": ["w", "b", "o"]},
                          "income": {"bin_edges": [0, 10, 50, 1000]}})
    assert d.names == ("age", "sex", "race", "income")
    assert d.shape == (100, 2, 3, 3)
    assert d.size == 1800
    assert d["age"].numeric and not d["sex"].numeric
    assert d["income"].kind == "numeric"  # bin edges imply an ordered attribute
    assert d["race"].value_labels() == ("w", "b", "o")
    assert d["income"].value_labels() == ("[0, 10)", "[10, 50)", "[50, 1000)")
    assert d["sex"].value_labels() == ("0", "1")
    assert Domain.from_spec({"x": {"labels": ["a", "b"]}})["x"].size == 2


def test_to_spec_round_trip() -> None:
    spec = {"age": {"size": 100, "kind": "numeric"}, "sex": 2,
            "race": {"size": 3, "kind": "categorical", "labels": ["w", "b", "o"]},
            "income": {"size": 2, "kind": "numeric", "bin_edges": [0.0, 10.0, 50.0]}}
    d = Domain.from_spec(spec)
    assert d.to_spec() == spec
    assert Domain.from_spec(d.to_spec()) == d


def test_size_is_exact_beyond_int64() -> None:
    d = Domain.from_sizes([40] * 40)
    assert d.size == 40**40
    assert isinstance(d.size, int)
    adult = Domain.from_sizes([100, 100, 100, 99, 85, 42, 16, 15, 9, 7, 6, 5, 2, 2])
    assert adult.size == 641_263_392_000_000_000  # 6.41e17 (HDMM section 7.4)


def test_from_sizes_defaults_and_lookup() -> None:
    d = Domain.from_sizes([3, 4, 5])
    assert d.names == ("a1", "a2", "a3")
    assert all(a.kind == "categorical" for a in d)
    assert len(d) == 3 and "a2" in d and "b" not in d
    assert d.index("a3") == 2
    assert d.indices(["a3", "a1"]) == (2, 0)
    assert d.project(["a3", "a1"]).names == ("a1", "a3")  # domain order kept
    assert d.sorted_names(["a3", "a1", "a3"]) == ("a1", "a3")
    named = Domain.from_sizes([2, 3], names=["x", "y"], kinds=["numeric", "categorical"])
    assert named["x"].numeric


def test_attribute_is_frozen() -> None:
    a = Attribute("x", 3)
    with pytest.raises(AttributeError):
        a.size = 4  # type: ignore[misc]


@pytest.mark.parametrize("spec,message", [
    ({"age": {"size": 0}}, "domain.age.size: must be a positive integer, got 0"),
    ({"age": {"size": 2.5}}, "domain.age.size: must be a positive integer, got 2.5"),
    ({"age": {"sise": 3}},
     "domain.age.sise: unknown key (did you mean 'size'?); allowed: size, kind, labels, "
     "bin_edges"),
    ({"age": {"size": 3, "kind": "numerc"}},
     "domain.age.kind: unknown kind 'numerc' (did you mean 'numeric'?); allowed: numeric, "
     "categorical"),
    ({"a": {"labels": ["x", "x"]}}, "domain.a.labels: labels must be distinct"),
    ({"a": {"size": 3, "labels": ["a", "b"]}}, "domain.a.labels: expected 3 labels, got 2"),
    ({"a": {"bin_edges": [0, 1, 1]}}, "domain.a.bin_edges: edges must be strictly increasing"),
    ({"a": {"size": 3, "bin_edges": [0, 1]}}, "domain.a.bin_edges: expected 4 edges, got 2"),
    ({"a": True}, "domain.a: expected a size or a mapping, got True"),
    ({"a": "x"}, "domain.a: expected a size or a mapping with 'size', got 'x'"),
    ({"a": {"kind": "numeric"}}, "domain.a.size: missing"),
    ({}, "domain: expected a non-empty mapping of attribute name -> size"),
    ([3, 4], "domain: expected a non-empty mapping of attribute name -> size"),
])
def test_domain_spec_errors(spec, message: str) -> None:
    with pytest.raises(SpecError) as info:
        Domain.from_spec(spec)
    assert str(info.value) == message


def test_lookup_errors_suggest_names() -> None:
    d = Domain.from_spec({"age": 3, "sex": 2})
    with pytest.raises(SpecError) as info:
        d.index("agee", "workload[0].product.agee")
    assert str(info.value) == ("workload[0].product.agee: unknown attribute 'agee' "
                               "(did you mean 'age'?); attributes: age, sex")
    with pytest.raises(SpecError, match=r"^domain: duplicate attribute names \['a'\]$"):
        Domain((Attribute("a", 2), Attribute("a", 3)))
    with pytest.raises(SpecError, match="sizes, names and kinds must have the same length"):
        Domain.from_sizes([2, 3], names=["x"])
