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
from engine.domain import Domain
from engine.errors import SpecError
from engine.workloads import catalog

DATA_DIR = Path(__file__).resolve().parents[2] / "assets" / "data"


def adult_domain() -> Domain:
    """The public domain of the bundled Adult data, without reading the records.

    The attributes, their sizes and which are ordered (``numeric``) come from the catalogue's
    Adult schema (:data:`engine.workloads.catalog.ADULT_SIZES`, ``ADULT_ORDERED``); their order
    is the data's, from ``adult-domain.json``.

    Returns:
        A 14-attribute domain (sizes in values per attribute).

    Raises:
        SpecError: when the file is missing or disagrees with the catalogue.
    """
    path = DATA_DIR / "adult-domain.json"
    try:
        sizes = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError(f"adult: bundled domain file not found at {path}") from None
    if sizes != catalog.ADULT_SIZES:
        raise SpecError(f"adult: {path.name} does not list the catalogue's Adult attributes "
                        f"and sizes ({', '.join(f'{k} {v}' for k, v in sizes.items())})")
    schema = catalog.adult_domain()
    return Domain.from_spec({name: schema[name] for name in sizes})


@functools.cache
def load_adult() -> Dataset:
    """The bundled UCI Adult records (48,842) over :func:`adult_domain`.

    Cached: a Dataset is immutable, so every caller shares one copy.

    Returns:
        The data set.
    """
    return load_csv(DATA_DIR / "adult.csv", adult_domain())


BUNDLED: dict[str, Callable[[], Dataset]] = {"adult": load_adult}
