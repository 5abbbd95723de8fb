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

from engine.analysis.continual import HorizonError
from engine.analysis.cost_model import format_bytes
from engine.analysis.expected_error import QUERY_LIMIT, reconstruction_map
from engine.analysis.per_query_error import (
    METHODS,
    PerQueryErrors,
    chernoff_half_width,
    gaussian_half_width,
    typical_half_width,
)
from engine.analysis.strategy_picture import BlockImage, block_image, value_count_variances
from engine.analysis.svd_bound import Bound, svd_bound
from engine.data import Dataset, adult_domain, load_adult, load_csv
from engine.domain import Attribute, Domain
from engine.errors import Cancelled, NotApplicable, SpecError, one_line
from engine.executor import (
    SCHEDULER_VARIABLE,
    WorkerLost,
    dask_client,
    dask_executor,
    local_pool,
    scheduler_from_environment,
)
from engine.ledger import (
    Budget,
    BudgetExceeded,
    Cost,
    Ledger,
    LedgerError,
    data_dir,
    database_message,
    default_url,
    fingerprint_bytes,
    fingerprint_file,
    sqlite_file,
    sqlite_transactions,
    upgrade_schema,
)
from engine.ledger.charge import release_cost
from engine.mechanisms import Measurement, Plan, get, mechanism_class, registry_names
from engine.mechanisms.views import (
    Fact,
    FactsView,
    MatrixView,
    SeriesView,
    TableView,
    View,
    WeightsView,
)
from engine.noise import SEEDED_LABEL, release_rng
from engine.privacy import DEFAULT_DELTA, Privacy, budget_name, cdp_eps, cdp_rho
from engine.progress import Progress
from engine.scenario import Scenario
from engine.specfile import load_text
from engine.workflows.compare import Comparison, ComparisonRow, compare, plan, plan_row
from engine.workflows.continual import (
    ContinualPrice,
    continual_spec,
    is_continual,
    is_online,
    online_mechanisms,
    price_of_continual_release,
)
from engine.workflows.evaluate import (
    AIM_GREM,
    CENSUS_VARIANT_TITLES,
    CENSUS_VARIANTS,
    AdaptiveComparison,
    CensusTrials,
    census_row,
    census_trials,
    compare_adaptive,
    example_hierarchy,
    load_hierarchy,
    pgm_available,
    synthetic_hierarchy,
)
from engine.workflows.release import Quote, Release, quote, release
from engine.workflows.release_files import (
    data_file,
    jsonable,
    release_zip,
    stamped_csv,
    workload_summary,
)
from engine.workloads import BLOCKS, GROUPS, Marginals, PairQueries, Product, Workload, catalog
from engine.workloads.catalog import classic_prefix
from engine.workloads.labels import readable_labels
from engine.workloads.spec import parse_group

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


__all__ = [
    "AIM_GREM",
    "AdaptiveComparison",
    "Attribute",
    "BLOCKS",
    "BlockImage",
    "Bound",
    "Budget",
    "BudgetExceeded",
    "CENSUS_VARIANTS",
    "CENSUS_VARIANT_TITLES",
    "Cancelled",
    "CensusTrials",
    "Comparison",
    "ComparisonRow",
    "ContinualPrice",
    "Cost",
    "DEFAULT_DELTA",
    "Dataset",
    "Domain",
    "Fact",
    "FactsView",
    "GROUPS",
    "HorizonError",
    "Ledger",
    "LedgerError",
    "METHODS",
    "Marginals",
    "MatrixView",
    "Measurement",
    "NotApplicable",
    "PairQueries",
    "PerQueryErrors",
    "Plan",
    "Privacy",
    "Product",
    "Progress",
    "QUERY_LIMIT",
    "Quote",
    "Release",
    "SCHEDULER_VARIABLE",
    "SEEDED_LABEL",
    "Scenario",
    "SeriesView",
    "SpecError",
    "TableView",
    "View",
    "WeightsView",
    "WorkerLost",
    "Workload",
    "__version__",
    "adult_domain",
    "block_image",
    "budget_name",
    "catalog",
    "cdp_eps",
    "cdp_rho",
    "census_row",
    "census_trials",
    "chernoff_half_width",
    "classic_prefix",
    "compare",
    "compare_adaptive",
    "continual_spec",
    "dask_client",
    "dask_executor",
    "data_dir",
    "database_message",
    "data_file",
    "default_url",
    "example_hierarchy",
    "fingerprint_bytes",
    "fingerprint_file",
    "format_bytes",
    "gaussian_half_width",
    "is_continual",
    "is_online",
    "get",
    "jsonable",
    "load_adult",
    "load_csv",
    "load_hierarchy",
    "load_text",
    "local_pool",
    "mechanism_class",
    "mechanism_names",
    "one_line",
    "online_mechanisms",
    "parse_group",
    "pgm_available",
    "plan",
    "plan_row",
    "price_of_continual_release",
    "quote",
    "readable_labels",
    "reconstruction_map",
    "registry_names",
    "release",
    "release_cost",
    "release_rng",
    "release_zip",
    "scheduler_from_environment",
    "sqlite_file",
    "sqlite_transactions",
    "stamped_csv",
    "svd_bound",
    "synthetic_hierarchy",
    "typical_half_width",
    "upgrade_schema",
    "value_count_variances",
    "workload_summary",
]
