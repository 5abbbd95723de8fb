"""Data sets shipped with the project, loadable without any download.

Only UCI Adult for now (see ``assets/data/PROVENANCE.md``): 48,842 records over 14 attributes
already coded as small integers by private-pgm.

Example:
    >>> adult_domain().shape[:3]
    (85, 9, 100)
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path

from engine.data.csv import load_csv
from engine.data.dataset import Dataset
from engine.domain import Attribute, Domain
from engine.errors import SpecError

DATA_DIR = Path(__file__).resolve().parents[2] / "assets" / "data"

# Ordered Adult attributes (private-pgm bins of a number), for prefix and range workloads.
ADULT_NUMERIC = frozenset(
    {"age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"}
)


def adult_domain() -> Domain:
    """The public domain of the bundled Adult data, without reading the records.

    Attribute order and sizes come from ``adult-domain.json``; the attributes in
    :data:`ADULT_NUMERIC` are ``numeric``, the rest ``categorical``.

    Returns:
        A 14-attribute domain (sizes in values per attribute).
    """
    path = DATA_DIR / "adult-domain.json"
    try:
        sizes = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError(f"adult: bundled domain file not found at {path}") from None
    return Domain(
        tuple(
            Attribute(name, int(size), "numeric" if name in ADULT_NUMERIC else "categorical")
            for name, size in sizes.items()
        )
    )


@functools.cache
def load_adult() -> Dataset:
    """The bundled UCI Adult records (48,842) over :func:`adult_domain`.

    Cached: a Dataset is immutable, so every caller shares one copy.

    Returns:
        The data set.
    """
    return load_csv(DATA_DIR / "adult.csv", adult_domain())


BUNDLED: dict[str, Callable[[], Dataset]] = {"adult": load_adult}
