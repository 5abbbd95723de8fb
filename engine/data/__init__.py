"""Data: integer-coded records over a public domain, CSV loading, discretisation, bundled sets."""

from engine.data.bundled import BUNDLED, adult_domain, load_adult
from engine.data.csv import csv_header, encode_frame, infer_domain, load_csv
from engine.data.dataset import DEFAULT_MAX_CELLS, Dataset
from engine.data.discretise import bin_numeric, code_categorical, encode, integer_codes

__all__ = [
    "BUNDLED",
    "DEFAULT_MAX_CELLS",
    "Dataset",
    "adult_domain",
    "bin_numeric",
    "csv_header",
    "code_categorical",
    "encode",
    "encode_frame",
    "infer_domain",
    "integer_codes",
    "load_adult",
    "load_csv",
]
