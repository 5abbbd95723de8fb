"""dpworkbench engine: domains, workloads, privacy units, error, bounds and mechanisms.

Pure numpy/scipy/param; never imports Panel or HoloViews.
"""

from importlib.metadata import PackageNotFoundError, version

from engine.domain import Attribute, Domain
from engine.errors import Cancelled, NotApplicable, SpecError
from engine.privacy import Privacy
from engine.scenario import Scenario
from engine.workloads import Workload

try:
    #: The installed package's version (pyproject.toml is its one source).
    __version__ = version("dpworkbench")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["Attribute", "Cancelled", "Domain", "NotApplicable", "Privacy", "Scenario",
           "SpecError", "Workload", "__version__"]
