"""Packaging facts: one version (from the installed metadata) and PEP 561 markers."""

from importlib.metadata import version
from pathlib import Path

import engine
import explorer


def test_one_version_read_from_the_package_metadata() -> None:
    assert engine.__version__ == version("dpworkbench")
    assert explorer.__version__ == engine.__version__


def test_packages_declare_their_type_hints() -> None:
    for package in (engine, explorer):
        assert (Path(package.__file__).parent / "py.typed").is_file()
