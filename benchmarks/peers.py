"""Ours beside the HDMM peer's published code, measured in one run: CPU time and RMSE ratios.

Cases (Laplace noise, eps = 1, every mechanism at its default settings):

* OPT_0 on all ranges of n = 256, 1024 (2048, 4096 with ``--large``): ``hdmm-opt0`` against
  the peer's ``PIdentity(n/16, n)`` with one start. Goal: CPU <= 1.0x and RMSE <= 1.0x for
  n = 256-2048; n = 4096 plans in < 60 s.
* Three Kronecker workloads: ``hdmm-kron`` and ``hdmm`` against the peer's ``KronPIdentity``,
  best of 3 starts. Goals: RMSE <= 1.0x; ``hdmm`` (which stops where no further operator can
  pay for itself, issue 32) at most 3x ``hdmm-kron``'s CPU (the ``vs kron`` column).

With ``--peer-python PATH --peer-path DIR`` every trial runs in a fresh process (ours under
this interpreter, the peer's under PATH with DIR on its import path, e.g. the peer's ``src``
folder), one BLAS thread each; CPU is ``time.process_time`` around the optimisation alone and
each figure is the median over ``--trials`` seeds. Each of our
workers first plans an 8-cell workload outside the timer, so that one-time process costs
(lazy imports, threadpoolctl's library scan) count no more than the peer's imports do. The
peer's code is never shipped or fetched here: install it yourself in a separate environment
(it wants an older numpy/scipy). Without ``--peer-python`` the script prints the peer figures
recorded in benchmarks/README.md, with the date they were measured, and measures ours only.

Run: ``python benchmarks/peers.py [--quick] [--large | --kronecker] [--trials 3]
[--peer-python PATH --peer-path DIR]`` (quick: n = 256 and one Kronecker workload, one
trial, about 20 s with the peer).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from engine.domain import Domain
from engine.mechanisms import get
from engine.privacy import Privacy
from engine.workloads import AllRangeBlock, IdentityBlock, PrefixBlock, Product, Workload

ONE_THREAD = {name: "1" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "benchmarks" / "README.md"
#: Heading of the README section holding the recorded peer figures.
RECORD_HEADING = "### Peers measured"

#: Kronecker workloads: per attribute (block, size); the peer gets p = max(1, n // 16) per
#: p-Identity factor, as its own examples do.
KRON_CASES = {
    "P64xR64xI8": (("prefix", 64), ("all-range", 64), ("identity", 8)),
    "R128xP32": (("all-range", 128), ("prefix", 32)),
    "P16xP16xR16xI4": (("prefix", 16), ("prefix", 16), ("all-range", 16), ("identity", 4)),
}

#: Runs under the peer's interpreter: calls its public API only; prints one JSON line.
PEER_WORKER = textwrap.dedent("""
    import json, math, sys, time
    import numpy as np
    from hdmm import matrix, templates, workload
    case = json.loads(sys.argv[1])
    # compatibility: the peer's sensitivity relies on np.abs calling __abs__, which numpy
    # stopped doing for classes that opt out of ufuncs; call __abs__ directly as intended
    matrix.EkteloMatrix.sensitivity = lambda self: np.max(self.__abs__().sum(axis=0))
    blocks = {"prefix": workload.Prefix, "all-range": workload.AllRange,
              "identity": matrix.Identity}
    if case["kind"] == "opt0":
        n = case["n"]
        W = workload.AllRange(n)
        start = time.process_time()
        loss = templates.PIdentity(max(1, n // 16), n, seed=case["seed"]).optimize(W)
        cpu = time.process_time() - start
        m = W.shape[0]
    else:
        factors = [blocks[b](n) for b, n in case["factors"]]
        W = matrix.Kronecker(factors)
        m = int(np.prod([f.shape[0] for f in factors]))
        ns = [n for _, n in case["factors"]]
        cpu, loss = 0.0, math.inf
        for seed in range(case["starts"]):
            np.random.seed(case["seed"] * 1000 + seed)
            start = time.process_time()
            T = templates.KronPIdentity([max(1, n // 16) for n in ns], ns)
            loss = min(loss, T.optimize(W))
            cpu += time.process_time() - start
    print(json.dumps({"cpu": cpu, "rmse": math.sqrt(2.0 * loss / m)}))
""")


def ours_worker(case: dict) -> dict:
    """One trial of ours (in this process): CPU seconds of ``plan`` and the plan's RMSE."""
    blocks = {"prefix": PrefixBlock, "all-range": AllRangeBlock, "identity": IdentityBlock}
    laplace = Privacy(noise="laplace", epsilon=1.0)
    # once per process, outside the timer (as the peer's imports are): psutil's import for the
    # memory guard and threadpoolctl's scan of the loaded libraries, about 15 ms together
    small = Domain.from_sizes([8], ["x"], ["numeric"])
    get("hdmm-opt0").plan(Workload(small, (Product((("x", AllRangeBlock(8)),)),)), laplace)
    if case["kind"] == "opt0":
        n = case["n"]
        domain = Domain.from_sizes([n], ["x"], ["numeric"])
        workload = Workload(domain, (Product((("x", AllRangeBlock(n)),)),))
        mechanism = get("hdmm-opt0", seed=case["seed"])
    else:
        names = [f"a{i}" for i in range(len(case["factors"]))]
        domain = Domain.from_sizes([n for _, n in case["factors"]], names, ["numeric"] * len(names))
        product = Product(
            tuple((name, blocks[b](n)) for name, (b, n) in zip(names, case["factors"], strict=True))
        )
        workload = Workload(domain, (product,))
        mechanism = get(case["mechanism"], seed=case["seed"])
    start = time.process_time()
    plan = mechanism.plan(workload, laplace)
    cpu = time.process_time() - start
    return {"cpu": cpu, "rmse": plan.rmse()}


def run_trial(case: dict, peer: tuple[str, str] | None) -> dict:
    """One trial in a fresh process, one BLAS thread: ours, or the peer's when ``peer``."""
    env = {**os.environ, **ONE_THREAD}
    if peer is None:
        env["PYTHONPATH"] = str(ROOT)
        cmd = [sys.executable, __file__, "--worker", json.dumps(case)]
    else:
        python, path = peer
        env["PYTHONPATH"] = path
        cmd = [python, "-c", PEER_WORKER, json.dumps(case)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"peers: trial {case} failed: {last}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def median_of(case: dict, trials: int, peer: tuple[str, str] | None) -> dict:
    """Medians of CPU seconds and RMSE over ``trials`` seeds."""
    runs = [run_trial({**case, "seed": seed}, peer) for seed in range(trials)]
    return {key: statistics.median(r[key] for r in runs) for key in ("cpu", "rmse")}


def recorded() -> str:
    """The README section with the recorded peer figures (its first line holds the date)."""
    text = README.read_text()
    match = re.search(rf"^{re.escape(RECORD_HEADING)}.*?(?=^#)", text, re.S | re.M)
    if match is None:
        raise SystemExit(f"peers: {README} has no '{RECORD_HEADING}' section")
    return match.group(0).strip()


def row(label: str, ours: dict, peer: dict | None, goal: str) -> str:
    """One printed line: ours, the peer's and the ratios."""
    if peer is None:
        return f"{label:28} {ours['cpu']:9.3f} {ours['rmse']:10.4f}"
    cpu_ratio = ours["cpu"] / peer["cpu"] if peer["cpu"] > 0 else math.inf
    return (
        f"{label:28} {ours['cpu']:9.3f} {ours['rmse']:10.4f} | {peer['cpu']:9.3f} "
        f"{peer['rmse']:10.4f} | {cpu_ratio:6.2f}x {ours['rmse'] / peer['rmse']:7.4f}x  "
        f"{goal}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer-python", help="a python that can import the peer's hdmm")
    parser.add_argument("--peer-path", default="", help="added to the peer's import path")
    parser.add_argument("--trials", type=int, default=3, help="seeds per case (median)")
    parser.add_argument("--quick", action="store_true", help="n = 256 and one Kronecker case")
    parser.add_argument("--large", action="store_true", help="also n = 2048 and 4096 (slow)")
    parser.add_argument("--kronecker", action="store_true", help="the Kronecker rows only")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(ours_worker(json.loads(args.worker))))
        return
    if args.trials < 1:
        parser.error("--trials: must be at least 1")
    peer = (args.peer_python, args.peer_path) if args.peer_python else None
    if peer is None:
        print(recorded(), "\n\nOurs, measured now (no --peer-python given):")
    sizes = [256] if args.quick else [256, 1024] + ([2048, 4096] if args.large else [])
    if args.kronecker:
        sizes = []
    kron = list(KRON_CASES)[:1] if args.quick else list(KRON_CASES)
    trials = 1 if args.quick else args.trials
    print(
        f"Laplace eps = 1, defaults, one BLAS thread, fresh process per trial, median of "
        f"{trials}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(
        f"{'case':28} {'ours cpu':>9} {'ours rmse':>10}"
        + (f" | {'peer cpu':>9} {'peer rmse':>10} | {'cpu':>7} {'rmse':>8}  goal" if peer else "")
    )
    for n in sizes:
        case = {"kind": "opt0", "n": n}
        # n = 2048/4096 once each: minutes of CPU on a shared machine
        t = 1 if n >= 2048 else trials
        ours = median_of(case, t, None)
        if n == 4096:
            print(
                f"{'all-range 4096 hdmm-opt0':28} {ours['cpu']:9.3f} {ours['rmse']:10.4f}   "
                "goal: < 60 s",
                flush=True,
            )
            continue
        theirs = median_of(case, t, peer) if peer else None
        print(row(f"all-range {n} hdmm-opt0", ours, theirs, "goal: cpu, rmse <= 1.0x"), flush=True)
    for name in kron:
        factors = KRON_CASES[name]
        theirs = (
            median_of({"kind": "kron", "factors": factors, "starts": 3}, trials, peer)
            if peer
            else None
        )
        kron_cpu = math.nan
        for mechanism in ("hdmm-kron", "hdmm"):
            ours = median_of(
                {"kind": "kron", "factors": factors, "mechanism": mechanism}, trials, None
            )
            if mechanism == "hdmm-kron":
                kron_cpu, goal = ours["cpu"], "goal: rmse <= 1.0x (best of 3)"
            else:
                goal = (f"goal: rmse <= 1.0x; vs kron {ours['cpu'] / kron_cpu:.2f}x cpu "
                        "(<= 3x)")
            print(row(f"{name} {mechanism}", ours, theirs, goal), flush=True)


if __name__ == "__main__":
    main()
