"""dpworkbench engine: plan differentially private releases of counts and compare mechanisms.

This module is the public face: everything a notebook, the explorer or a user needs is
importable from ``engine`` itself (see ``__all__``); the submodules may move.

Example:
    >>> import engine
    >>> c = engine.compare({"domain": {"age": 64}, "workload": [{"product": {"age": "prefix"}}]},
    ...                    privacy={"noise": "laplace", "epsilon": 1.0},
    ...                    mechanisms=["identity", "h2"])
    >>> c.best().mechanism
    'identity'

Pure numpy/scipy/param: never imports Panel or Bokeh; HoloViews only inside the ``.plot()``
methods (through :mod:`engine.plotting`).
"""

from importlib.metadata import PackageNotFoundError, version

from engine.analysis.svd_bound import Bound, svd_bound
from engine.data import Dataset, load_adult
from engine.domain import Attribute, Domain
from engine.errors import Cancelled, NotApplicable, SpecError
from engine.ledger import Ledger
from engine.mechanisms import Measurement, Plan, registry_names
from engine.privacy import Privacy
from engine.scenario import Scenario
from engine.workflows.compare import Comparison, ComparisonRow, compare, plan
from engine.workflows.evaluate import (
    AdaptiveComparison,
    CensusTrials,
    census_trials,
    compare_adaptive,
    synthetic_hierarchy,
)
from engine.workflows.release import Quote, Release, quote, release
from engine.workloads import Workload

try:
    #: The installed package's version (pyproject.toml is its one source).
    __version__ = version("dpworkbench")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"


def mechanism_names() -> tuple[str, ...]:
    """The registered mechanisms' names, e.g. ``("identity", ..., "hdmm", ...)``.

    (Not called ``mechanisms()``: ``engine.mechanisms`` is the package of the families.)
    """
    return registry_names()


__all__ = ["AdaptiveComparison", "Attribute", "Bound", "Cancelled", "CensusTrials",
           "Comparison", "ComparisonRow", "Dataset", "Domain", "Ledger", "Measurement",
           "NotApplicable", "Plan", "Privacy", "Quote", "Release", "Scenario", "SpecError",
           "Workload",
           "__version__", "census_trials", "compare", "compare_adaptive", "load_adult",
           "mechanism_names", "plan", "quote", "release", "svd_bound",
           "synthetic_hierarchy"]
