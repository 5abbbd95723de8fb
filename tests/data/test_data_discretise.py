"""Discretisation helpers: binning and label coding return codes and the Attribute."""

from __future__ import annotations

import pandas as pd
import pytest

from engine.data import bin_numeric, code_categorical, integer_codes
from engine.errors import SpecError


def test_equal_width_bins_over_a_public_range():
    codes, attribute = bin_numeric(
        pd.Series([0, 9.99, 10, 99.5], name="age"), n=10, value_range=(0, 100)
    )
    assert codes.tolist() == [0, 0, 1, 9]
    assert attribute.name == "age" and attribute.kind == "numeric" and attribute.size == 10
    assert attribute.bin_edges[:3] == (0.0, 10.0, 20.0)


def test_given_edges_are_half_open():
    codes, attribute = bin_numeric(pd.Series(["1", "5", "4.999"]), [1, 5, 10], name="x")
    assert codes.tolist() == [0, 1, 0] and attribute.size == 2
    with pytest.raises(SpecError, match=r"column 'x': 1 value outside \[1, 10\) \(row 1: 10\)"):
        bin_numeric(pd.Series([10]), [1, 5, 10], name="x")


def test_binning_argument_errors():
    with pytest.raises(SpecError, match="either edges or n and value_range"):
        bin_numeric(pd.Series([1], name="x"))
    with pytest.raises(SpecError, match="needs both n and value_range"):
        bin_numeric(pd.Series([1], name="x"), n=3)
    with pytest.raises(SpecError, match=r"x\.value_range"):
        bin_numeric(pd.Series([1], name="x"), n=3, value_range=(5, 5))
    with pytest.raises(SpecError, match="no name given"):
        bin_numeric(pd.Series([1]), n=3, value_range=(0, 5))


def test_code_categorical_by_label():
    codes, attribute = code_categorical(
        pd.Series(["b", " a", "c", "b"], name="grade"), ["a", "b", "c"], kind="numeric"
    )
    assert codes.tolist() == [1, 0, 2, 1]
    assert attribute.labels == ("a", "b", "c") and attribute.kind == "numeric"
    numbers, _ = code_categorical(pd.Series([1.0, 3.0], name="n"), ["1", "3"])
    assert numbers.tolist() == [0, 1]
    with pytest.raises(SpecError, match=r"1 value not among the labels \(row 2: 'z'\)"):
        code_categorical(pd.Series(["a", "z"], name="grade"), ["a", "b"])


def test_integer_codes_accept_integral_values_only():
    assert integer_codes(pd.Series(["0", "2", "1.0"], name="c"), 3).tolist() == [0, 2, 1]
    with pytest.raises(SpecError, match=r"1 missing value \(row 2\)"):
        integer_codes(pd.Series([0, None], name="c", dtype="Int64"), 3)
    with pytest.raises(SpecError, match=r"1 value outside 0\.\.2 \(row 1: inf\)"):
        integer_codes(pd.Series([float("inf")], name="c"), 3)
