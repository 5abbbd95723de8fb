"""The SVD bound of every explorer preset: kind (exact / certified floor), RMSE and seconds,
beside the previous behaviour (commit 9e7b4cd, measured on the same machine, 2026-11-28).

Issue 32, item 1: every preset gets its exact bound in under 2 s. SF1 and SF1+ had none before
("no closed form for this union of 33 terms ..."); they are now exact block by block
(engine.analysis.block_spectrum). The Adult and Loans *prefix*-marginals (no bound before
either) get a certified floor: their blocks are too large to eigendecompose on both sides.

Run: ``python benchmarks/svd_bound_presets.py [--repeats 3]`` (one BLAS thread). RMSE at
Gaussian eps = 1, delta = 1e-6 (the presets' privacy); seconds are the median of the repeats.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402

from timing import timed  # noqa: E402

from engine.analysis.svd_bound import svd_bound  # noqa: E402
from engine.privacy import Privacy  # noqa: E402
from engine.scenario import Scenario  # noqa: E402
from explorer.presets import PRESETS, build_preset  # noqa: E402

GAUSS = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)
GOAL_SECONDS = 2.0
#: At 9e7b4cd (before this work): preset -> (method, Gaussian RMSE or None, seconds).
PREVIOUS = {
    "kway": ("marginals", 5.8866, 0.00),
    "prefix_marginals": ("explicit", 13.8581, 0.57),
    "ranges": ("kronecker", 14.5147, 0.00),
    "classic_prefix": ("kronecker", 10.4411, 0.00),
    "classic_all_range": ("kronecker", 12.1517, 0.00),
    "age_sex_race": ("explicit", 7.6789, 0.96),
    "sf1": ("none", None, 0.01),
    "sf1_plus": ("none", None, 0.00),
    "cps_marginals": ("marginals", 7.8517, 0.02),
    "cps_prefix": ("kronecker-marginals", 27.8487, 0.02),
    "adult_marginals": ("marginals", 45.0562, 0.62),
    "adult_prefix": ("none", None, 0.01),
    "loans_marginals": ("marginals", 34.6698, 0.15),
    "loans_prefix": ("none", None, 0.02),
}


def _rmse(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _before(row: tuple[str, float | None, float] | None) -> str:
    if row is None:
        return "(preset added after 9e7b4cd)"
    method, rmse, seconds = row
    return f"{method:<28}{_rmse(rmse):>9}{seconds:>6.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"SVD bound per preset, Gaussian eps=1 delta=1e-6; goal: exact in < {GOAL_SECONDS:g} s")
    print(f"{'preset':<22}{'cells':>11}{'terms':>6}  {'kind':<6}{'method':<21}{'RMSE':>9}"
          f"{'s':>7}{'s/goal':>7}  | before: {'method':<20}{'RMSE':>9}{'s':>6}")
    for key in PRESETS:
        workload = Scenario.from_spec(build_preset(key)).workload
        bound, seconds = timed(lambda w=workload: svd_bound(w), repeats=args.repeats)
        before = PREVIOUS.get(key)
        cells = workload.domain.size
        cells_text = f"{cells:,}" if cells < 10**9 else f"{cells:.1e}"
        print(f"{key:<22}{cells_text:>11}{len(workload.terms):>6}  {bound.kind:<6}"
              f"{bound.method:<21}{_rmse(bound.rmse(workload, GAUSS)):>9}{seconds:>7.2f}"
              f"{seconds / GOAL_SECONDS:>7.2f}  | " + _before(before), flush=True)


if __name__ == "__main__":
    main()
