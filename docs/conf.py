"""Sphinx configuration of the dpworkbench documentation site (``make docs``).

Pages are MyST Markdown; the notebooks in ``notebooks/`` are rendered as pages, executed once
and cached by content (MyST-NB's ``cache`` mode: a notebook runs again only when its code
changes). Two sets of pages are generated here at build time from the installed package, so
they cannot drift from the code: one page per registered mechanism (title, description and
family from the registry, the paper from :data:`PAPERS`) and the notebook copies. No network
is used (no intersphinx).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import engine
from engine.mechanisms import mechanism_class

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent

project = "DP Workbench"
author = "dpworkbench contributors"
copyright = "dpworkbench contributors, Apache-2.0"
release = engine.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinxarg.ext",
]
myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_heading_anchors = 3
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "jupyter_execute"]
templates_path: list[str] = []

html_theme = "pydata_sphinx_theme"
html_title = "DP Workbench"
html_static_path: list[str] = []
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2,
                      "secondary_sidebar_items": ["page-toc"]}

autosummary_generate = True
autodoc_default_options = {"members": True, "undoc-members": False}
autodoc_typehints = "description"
autodoc_member_order = "bysource"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# "Attributes:" sections as fields of the class, not as second descriptions of its members
napoleon_use_ivar = True

# notebooks: run once, cached by content; tests/test_notebooks_run.py is the test of record and
# fills this cache, so after `make test`'s pytest run the docs build executes nothing
nb_execution_mode = "cache"
nb_execution_cache_path = str(DOCS / "_build" / ".jupyter_cache")
nb_execution_timeout = 600
nb_execution_raise_on_error = True
nb_merge_streams = True
# A notebook's HoloViews/Bokeh output is a self-contained script bundle, which MyST-NB
# renders as is; their widget-state and text fallbacks are not needed.
nb_mime_priority_overrides = [("html", "application/vnd.holoviews_load.v0+json", None),
                              ("html", "application/vnd.holoviews_exec.v0+json", None)]
suppress_warnings = ["mystnb.unknown_mime_type"]

#: The paper behind each registered mechanism (or family), for its page.
PAPERS = {
    "identity": "C. Li, M. Hay, V. Rastogi, G. Miklau, A. McGregor. *Optimizing linear "
                "counting queries under differential privacy.* PODS 2010 (the matrix "
                "mechanism; identity is its simplest strategy).",
    "workload": "C. Li et al., PODS 2010 (the matrix mechanism with the workload itself as "
                "the strategy).",
    "h2": "M. Hay, V. Rastogi, G. Miklau, D. Suciu. *Boosting the accuracy of differentially "
          "private histograms through consistency.* VLDB 2010.",
    "hb": "W. Qardaji, W. Yang, N. Li. *Understanding hierarchical methods for differentially "
          "private histograms.* VLDB 2013.",
    "wavelet": "X. Xiao, G. Wang, J. Gehrke. *Differential privacy via wavelet transforms* "
               "(Privelet). ICDE 2010.",
    "hdmm": "R. McKenna, G. Miklau, M. Hay, A. Machanavajjhala. *HDMM: Optimizing error of "
            "high-dimensional statistical queries under differential privacy.* VLDB 2018 / "
            "Journal of Privacy and Confidentiality 2023.",
    "eigen-design": "C. Li, G. Miklau. *An adaptive mechanism for accurate query answering "
                    "under differential privacy.* VLDB 2012.",
    "residual-planner": "Y. Xiao, G. He, D. Zhang, D. Kifer. *An optimal and scalable matrix "
                        "mechanism for noisy marginals under convex loss functions.* "
                        "NeurIPS 2023.",
    "querysmasher": "G. He, Y. Xiao, J. Bai, X. Gu, Z. Ding, W. Yin, D. Kifer. *Accurate and "
                    "scalable matrix mechanisms via divide and conquer.* arXiv:2604.00868, "
                    "2026.",
    "aim-grem": "M. Fuentes, B. Mullins, Y. Xiao, D. Kifer, C. Musco, D. Sheldon. *Fast "
                "private adaptive query answering for large data domains* (AIM+GReM), after "
                "R. McKenna et al., *AIM*, VLDB 2022.",
    "online-tree": "T.-H. H. Chan, E. Shi, D. Song. *Private and continual release of "
                   "statistics.* ACM TISSEC 2011; C. Dwork, M. Naor, T. Pitassi, G. Rothblum. "
                   "*Differential privacy under continual observation.* STOC 2010; with J. "
                   "Honaker's efficient estimate, *Efficient use of differentially private "
                   "binary trees*, 2015.",
    "online-sqrt": "H. Fichtenberger, M. Henzinger, J. Upadhyay. *Constant matters: "
                   "fine-grained error bound on differentially private continual observation.* "
                   "ICML 2023.",
    "online-optimal": "S. Denisov, H. B. McMahan, K. Rush, A. Smith, A. Thakurta. *Improved "
                      "differential privacy for SGD via optimal private linear operators on "
                      "adaptive streams.* NeurIPS 2022.",
    "online-blt": "K. Dvijotham, H. B. McMahan, K. Pillutla, T. Steinke, A. Thakurta. "
                  "*Efficient and near-optimal noise generation for streaming differential "
                  "privacy* (buffered linear Toeplitz). FOCS 2024.",
    "hierarchical-pgsr": "F. Fioretto, P. Van Hentenryck, K. Zhu. *Differential privacy of "
                         "hierarchical census data: an optimization approach.* Artificial "
                         "Intelligence 2021.",
}

#: Where each mechanism is shown at work.
SHOWN_IN = {
    "aim-grem": "notebooks/03-adaptive-aim-grem",
    "hierarchical-pgsr": "notebooks/04-census-hierarchy",
    "querysmasher": "notebooks/05-paper-tables",
    "eigen-design": "notebooks/05-paper-tables",
    "hdmm-opt0": "notebooks/05-paper-tables",
    "online-tree": "notebooks/07-continual-release",
    "online-sqrt": "notebooks/07-continual-release",
    "online-optimal": "notebooks/07-continual-release",
    "online-blt": "notebooks/07-continual-release",
}


def paper(name: str) -> str:
    """The paper of a mechanism: its own entry, else its family's (``hdmm-kron`` -> hdmm)."""
    return PAPERS.get(name) or PAPERS[name.split("-")[0]]


def mechanism_page(name: str) -> str:
    """One mechanism's page, from the registry."""
    cls = mechanism_class(name)
    lines = [f"# {cls.title or name} (`{name}`)", "",
             (cls.description or cls.__doc__ or "").strip(), "",
             "| | |", "| --- | --- |",
             f"| registered name | `{name}` |",
             f"| family | `{cls.family}` |",
             f"| noise | {', '.join(cls.noises)} |",
             f"| needs data | {'yes (data-dependent)' if cls.data_dependent else 'no'} |",
             "", "## Paper", "", paper(name), "", "## Use it", ""]
    if cls.data_dependent:
        lines.append("Data-dependent: it reads the records, so it is run on data rather than "
                     "planned (`python -m engine run SPEC --data CSV --mechanism "
                     f"{name}`).")
    else:
        lines += ["```python", "import engine", "",
                  "# spec: your scenario (a dict as in the scenario spec, a Scenario or a "
                  "Workload)",
                  f'plan = engine.plan(spec, "{name}", privacy={{"noise": "gaussian", '
                  '"epsilon": 1.0}})', "plan.rmse()  # people", "```"]
    if name in SHOWN_IN:
        lines += ["", f"Shown at work in [this notebook](../../{SHOWN_IN[name]}.ipynb)."]
    return "\n".join(lines) + "\n"


def generate(app: object) -> None:
    """Write the generated pages (mechanisms, notebook copies) before Sphinx reads sources."""
    pages = DOCS / "mechanisms" / "generated"
    pages.mkdir(parents=True, exist_ok=True)
    for name in engine.mechanism_names():
        target = pages / f"{name}.md"
        text = mechanism_page(name)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
    notebooks = DOCS / "notebooks"
    notebooks.mkdir(exist_ok=True)
    for source in sorted((ROOT / "notebooks").glob("*.ipynb")):
        target = notebooks / source.name
        if not target.exists() or target.read_bytes() != source.read_bytes():
            shutil.copyfile(source, target)


def setup(app: object) -> None:
    app.connect("builder-inited", generate)  # type: ignore[attr-defined]
