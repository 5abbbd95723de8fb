"""CSV loading over a public domain: labels, bins, codes, and one-line errors."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from engine.data import encode_frame, infer_domain, load_csv
from engine.domain import Domain
from engine.errors import PrivacyLeakWarning, SpecError

DOMAIN = Domain.from_spec(
    {
        "age": {"size": 100, "kind": "numeric"},
        "sex": {"labels": ["female", "male"]},
        "income": {"bin_edges": [0, 10_000, 50_000, 1_000_000]},
    }
)


def csv(text: str, name: str = "people.csv") -> io.StringIO:
    buffer = io.StringIO(text)
    buffer.name = name
    return buffer


def test_labels_bins_and_codes_are_mapped_by_column_name():
    ds = load_csv(
        csv("sex, income ,age\nmale,9999.5,0\n female ,10000,99\nfemale,999999,42\n"), DOMAIN
    )
    assert ds.domain == DOMAIN and ds.records == 3
    assert ds.df.to_dict("list") == {
        "age": [0, 99, 42],
        "sex": [1, 0, 0],
        "income": [0, 1, 2],
    }


def test_out_of_domain_codes_are_reported_with_rows_and_values():
    text = "age,sex,income\n" + "".join(
        f"{age},male,5\n" for age in [1, 2, 3, 4, 120, 5, -1, 300, 7]
    )
    with pytest.raises(SpecError) as info:
        load_csv(csv(text, "adult.csv"), DOMAIN)
    assert str(info.value) == (
        "adult.csv: column 'age': 3 values outside 0..99 (rows 5, 7, 8: 120, -1, 300)"
    )


def test_many_bad_values_are_elided():
    text = "age,sex,income\n" + "".join(f"{100 + i},male,5\n" for i in range(7))
    with pytest.raises(SpecError) as info:
        load_csv(csv(text), DOMAIN)
    assert str(info.value) == (
        "people.csv: column 'age': 7 values outside 0..99 "
        "(rows 1, 2, 3, 4, 5, ...: 100, 101, 102, 103, 104, ...)"
    )


def test_non_integer_codes_unknown_labels_out_of_range_bins_and_blanks():
    with pytest.raises(SpecError) as info:
        load_csv(csv("age,sex,income\n1.5,male,5\nabc,male,5\n"), DOMAIN)
    assert (
        str(info.value) == "people.csv: column 'age': 2 non-integer values (rows 1, 2: 1.5, 'abc')"
    )
    with pytest.raises(SpecError) as info:
        load_csv(csv("age,sex,income\n1,male,5\n2,mael,5\n"), DOMAIN)
    assert str(info.value) == (
        "people.csv: column 'sex': 1 value not among the labels (row 2: 'mael') "
        "(did you mean 'male'?); labels: female, male"
    )
    with pytest.raises(SpecError) as info:
        load_csv(csv("age,sex,income\n1,male,1000000\n2,male,-3\n"), DOMAIN)
    assert str(info.value) == (
        "people.csv: column 'income': 2 values outside [0, 1e+06) (rows 1, 2: 1000000, -3)"
    )
    with pytest.raises(SpecError, match=r"column 'income': 1 missing value \(row 2\)$"):
        load_csv(csv("age,sex,income\n1,male,5\n2,male,\n"), DOMAIN)
    with pytest.raises(SpecError, match=r"column 'income': 1 non-numeric value \(row 1: 'lots'\)"):
        load_csv(csv("age,sex,income\n1,male,lots\n"), DOMAIN)


def test_missing_and_extra_columns_are_named():
    with pytest.raises(SpecError) as info:
        load_csv(csv("age,income\n1,5\n"), DOMAIN)
    assert str(info.value) == (
        "people.csv: missing column 'sex'; the domain needs age, sex, income"
    )
    with pytest.raises(SpecError) as info:
        load_csv(csv("age,sex,income,zip,id\n1,male,5,9,1\n"), DOMAIN)
    assert str(info.value).startswith(
        "people.csv: columns 'zip', 'id' are not in the domain (pass ignore_extra=True"
    )
    ds = load_csv(csv("age,sex,income,zip\n1,male,5,9\n"), DOMAIN, ignore_extra=True)
    assert ds.domain.names == ("age", "sex", "income")


def test_file_errors_are_one_line(tmp_path):
    with pytest.raises(SpecError, match=r"^nowhere\.csv: file not found"):
        load_csv(tmp_path / "nowhere.csv", DOMAIN)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(SpecError, match=r"^empty\.csv: cannot read as CSV"):
        load_csv(empty, DOMAIN)


def test_header_only_file_is_an_empty_dataset(tmp_path):
    path = tmp_path / "header.csv"
    path.write_text("age,sex,income\n")
    ds = load_csv(path, DOMAIN)
    assert ds.records == 0 and int(ds.marginal(())) == 0


def test_encode_frame_codes_raw_values_in_memory():
    frame = pd.DataFrame({"age": [3, 4], "sex": ["male", "female"], "income": [5.0, 20_000.0]})
    ds = encode_frame(frame, DOMAIN)
    assert ds.df.to_dict("list") == {"age": [3, 4], "sex": [1, 0], "income": [0, 1]}


def test_infer_domain_warns_about_the_leak_and_round_trips():
    frame = pd.DataFrame(
        {
            "n": [1, 2, 5],
            "s": ["x", "y", "x"],
            "f": [0.5, 1.5, 2.25],
            "neg": [-3, 0, 2],
            "b": [True, False, True],
        }
    )
    with pytest.warns(PrivacyLeakWarning, match="leaks information"):
        domain = infer_domain(frame, numeric=["n"])
    assert domain.names == ("n", "s", "f", "neg", "b")
    assert domain["n"].size == 6 and domain["n"].kind == "numeric"
    assert domain["s"].labels == ("x", "y")
    assert domain["f"].size == 10 and domain["f"].bin_edges[0] == 0.5
    assert domain["neg"].bin_edges == (-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0)
    assert domain["b"].labels == ("False", "True")
    buffer = io.StringIO(frame.to_csv(index=False))
    codes = load_csv(buffer, domain).df
    assert codes["f"].tolist() == [0, 5, 9]
    assert codes["neg"].tolist() == [0, 3, 5]
    assert codes["b"].tolist() == [1, 0, 1]
    assert isinstance(PrivacyLeakWarning("x"), UserWarning)


def test_infer_domain_can_be_silenced_for_public_data():
    domain = infer_domain(pd.DataFrame({"a": [0, 1]}), warn=False)
    assert domain.shape == (2,)
    np.testing.assert_array_equal(
        load_csv(io.StringIO("a\n1\n1\n"), domain).marginal(["a"]), [0, 2]
    )
