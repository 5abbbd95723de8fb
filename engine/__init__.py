"""dpworkbench engine: domains, workloads, privacy units, error, bounds and mechanisms.

Pure numpy/scipy/param; never imports Panel or HoloViews.
"""

from engine.domain import Attribute, Domain
from engine.errors import Cancelled, NotApplicable, SpecError
from engine.privacy import Privacy
from engine.scenario import Scenario
from engine.workloads import Workload

__all__ = ["Attribute", "Cancelled", "Domain", "NotApplicable", "Privacy", "Scenario",
           "SpecError", "Workload"]
