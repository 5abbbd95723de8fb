"""Standing fuzz test of every input door (issue 15): the spec reader and parser, the two CSV
readers and the command-line flag parsers. Arbitrary documents, byte strings and flag values
either work or raise the one-line SpecError / NotApplicable; never another exception.

The spec and CSV cases run in-process under hypothesis' per-example deadline. The command-line
cases run in one child process under ``resource`` limits (address space, CPU seconds) with a
small memory budget for the cost model, so a case that hangs or allocates past its budget fails
the test instead of the machine. The whole file runs in well under a minute.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.domain import Domain
from engine.errors import NotApplicable, SpecError
from engine.scenario import Scenario

#: words a scenario spec is made of, so generated documents reach deep into the parser
KEYS = [
    "domain",
    "workload",
    "privacy",
    "mechanisms",
    "size",
    "kind",
    "labels",
    "bin_edges",
    "product",
    "marginals",
    "prefix_marginals",
    "affine",
    "abs_diff",
    "random",
    "matrix",
    "k",
    "upto",
    "sets",
    "on",
    "count",
    "p",
    "seed",
    "rows",
    "weight",
    "block",
    "width",
    "of",
    "noise",
    "epsilon",
    "delta",
    "rho",
    "calibration",
    "a",
    "b",
    "x",
]
WORDS = [
    "identity",
    "total",
    "prefix",
    "suffix",
    "all_range",
    "range",
    "circular_range",
    "permuted",
    "random",
    "matrix",
    "numeric",
    "categorical",
    "laplace",
    "gaussian",
    "zcdp",
    "hdmm",
    "a",
    "b",
    "x",
    "on",
    "yes",
    "1e-6",
    ".nan",
    "",
]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=70),
    st.integers(),
    st.sampled_from([2**31, 2**63 - 1, 2**63, 10**18, 10**30, 10**300]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(WORDS),
    st.text(max_size=8),
)
DOCUMENTS = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.sampled_from(KEYS), children, max_size=4)
    ),
    max_leaves=24,
)

FUZZ = settings(
    max_examples=150,
    deadline=2000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _accepts_or_refuses(action) -> None:
    try:
        action()
    except (SpecError, NotApplicable) as exc:
        assert "\n" not in str(exc).strip(), str(exc)


@FUZZ
@given(doc=DOCUMENTS)
def test_spec_documents(doc: object) -> None:
    _accepts_or_refuses(lambda: Scenario.from_spec(doc))


@FUZZ
@given(
    domain=st.dictionaries(st.sampled_from(["a", "b", "x"]), SCALARS, min_size=1, max_size=3),
    workload=st.lists(st.dictionaries(st.sampled_from(KEYS), DOCUMENTS, max_size=2), max_size=3),
)
def test_spec_documents_with_a_domain(domain: dict, workload: list) -> None:
    _accepts_or_refuses(lambda: Scenario.from_spec({"domain": domain, "workload": workload}))


@FUZZ
@given(
    text=st.one_of(
        st.text(max_size=300),
        st.lists(
            st.sampled_from(
                [
                    "{",
                    "}",
                    "[",
                    "]",
                    ":",
                    ",",
                    " ",
                    "\n",
                    "- ",
                    "on",
                    "a",
                    "1e-6",
                    "&x ",
                    "*x",
                    "!!str ",
                    "!!python/object:os.system ",
                    "'",
                    '"',
                    "#",
                ]
            ),
            max_size=80,
        ).map("".join),
    ),
    fmt=st.sampled_from(["yaml", "json"]),
)
def test_spec_text(text: str, fmt: str) -> None:
    _accepts_or_refuses(lambda: Scenario.loads(text, fmt))


CSV_DOMAIN = Domain.from_spec(
    {"age": {"bin_edges": [0, 18, 65, 120]}, "sex": {"labels": ["f", "m"]}, "n": 4}
)
CSV_CELLS = st.sampled_from(
    [
        "age",
        "sex",
        "n",
        "size",
        "count",
        "nation",
        "state",
        "1",
        "0",
        "-1",
        "3",
        "f",
        "m",
        "1e300",
        "99999999999999999999",
        "nan",
        "",
        " ",
        '"',
        '""',
        ",",
        "\n",
        "\r",
        "\x00",
        "é",
        "\xff",
    ]
)


@FUZZ
@given(
    data=st.one_of(
        st.binary(max_size=400),
        st.lists(st.lists(CSV_CELLS, max_size=5).map(",".join), max_size=6).map(
            lambda rows: "\n".join(rows).encode("utf-8", "surrogatepass")
        ),
        st.lists(st.lists(CSV_CELLS, max_size=5).map(",".join), max_size=6).map(
            lambda rows: "\n".join(rows).encode("latin-1", "replace")
        ),
    )
)
def test_csv_readers(tmp_path_factory, data: bytes) -> None:
    from engine.data import load_csv
    from engine.mechanisms.hierarchical.io import load_hierarchy_csv

    path = tmp_path_factory.mktemp("csv") / "data.csv"
    path.write_bytes(data)
    _accepts_or_refuses(lambda: load_csv(path, CSV_DOMAIN))
    _accepts_or_refuses(lambda: load_hierarchy_csv(path))
    _accepts_or_refuses(lambda: load_hierarchy_csv(path, max_size=3))


# ----- the command line, in a child process under resource limits -----------------------------
#: address space (bytes) and CPU seconds of the child that runs every command-line case
CHILD_MEMORY = 3 * 2**30
CHILD_CPU_SECONDS = 120
#: The child limits its own memory and CPU before importing the engine (a ``preexec_fn``
#: would make subprocess fork this process, which may hold JAX's threads by then).
DRIVER = f"""
import resource
resource.setrlimit(resource.RLIMIT_AS, ({CHILD_MEMORY}, {CHILD_MEMORY}))
resource.setrlimit(resource.RLIMIT_CPU, ({CHILD_CPU_SECONDS}, {CHILD_CPU_SECONDS}))
import json, sys, traceback
from engine.cli.main import main
failures = []
for argv in json.load(sys.stdin):
    try:
        main(argv)
    except BaseException:
        failures.append([argv, traceback.format_exc().splitlines()[-1]])
print(json.dumps(failures))
"""
NUMBERS = st.sampled_from(
    [
        "1",
        "0",
        "-1",
        "-5",
        "1e300",
        "1e-300",
        "nan",
        "inf",
        "-inf",
        "1e18",
        "99999999999999999999",
        "0.5",
        "abc",
        "",
        "1e9",
        "7",
    ]
)
FLAGS = st.sampled_from(
    [
        "--epsilon",
        "--delta",
        "--rho",
        "--seed",
        "--trials",
        "--max-size",
        "--weights",
        "--memory-limit",
        "--noise",
        "--split",
        "--variant",
        "--sampler",
        "--mechanism",
        "--synthetic",
    ]
)


@settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    cases=st.lists(
        st.tuples(
            st.sampled_from(["validate", "bound", "compare", "run", "census"]),
            st.lists(st.tuples(FLAGS, NUMBERS), max_size=3),
            st.booleans(),
        ),
        min_size=20,
        max_size=20,
    )
)
def test_command_line_flags(tmp_path_factory, cases: list) -> None:
    directory: Path = tmp_path_factory.mktemp("cli")
    spec = directory / "s.yaml"
    spec.write_text(
        "domain: {age: {size: 8, kind: numeric}, sex: 2}\n"
        "workload: [{product: {age: prefix, sex: identity}}]\n"
        "mechanisms: [identity, h2]\n"
    )
    data = directory / "d.csv"
    data.write_text("age,sex,extra\n1,0,x\n7,1,y\n")
    argvs = []
    for command, flags, as_json in cases:
        argv = [command] if command == "census" else [command, str(spec)]
        if command == "run":
            argv += ["--data", str(data)]
        if command == "census":
            argv += ["--trials", "2"]
        for flag, value in flags:
            argv += [flag, value]
        if as_json and command != "validate":
            argv.append("--json")
        argvs.append(argv)
    env = {
        **os.environ,
        "DPWB_MEMORY_LIMIT": "512MB",
        "OPENBLAS_NUM_THREADS": "1",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER],
        input=json.dumps(argvs),
        capture_output=True,
        text=True,
        env=env,
        timeout=150,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    out = proc.stdout.splitlines()
    assert json.loads(out[-1]) == []
    for line in out[:-1]:  # every --json document is strict JSON
        if line.startswith("{"):
            json.loads(line, parse_constant=_not_json)


def _not_json(token: str) -> float:
    raise AssertionError(f"{token} printed in a --json document")
