"""Workloads: 1-D blocks and query groups (with their name registries), unions, their spec,
and the catalogue of the papers' workloads (:mod:`engine.workloads.catalog`)."""

from engine.workloads.blocks import (
    BLOCKS,
    AllRangeBlock,
    Block,
    CircularRangeBlock,
    IdentityBlock,
    IdentityTotalBlock,
    MatrixBlock,
    PermutedBlock,
    PrefixBlock,
    RandomBlock,
    SuffixBlock,
    TotalBlock,
    WidthRangeBlock,
)
from engine.workloads.groups import (
    GROUPS,
    Group,
    Marginals,
    PairQueries,
    PrefixMarginals,
    Product,
    SubsetMatrix,
)
from engine.workloads.spec import BLOCK_NAMES, GROUP_KINDS, parse_block, parse_workload
from engine.workloads.term import Term
from engine.workloads.workload import Workload

__all__ = [
    "BLOCKS", "BLOCK_NAMES", "GROUPS", "GROUP_KINDS", "AllRangeBlock", "Block",
    "CircularRangeBlock", "Group", "IdentityBlock", "IdentityTotalBlock", "Marginals",
    "MatrixBlock", "PairQueries", "PermutedBlock", "PrefixBlock", "PrefixMarginals", "Product",
    "RandomBlock", "SubsetMatrix", "SuffixBlock", "Term", "TotalBlock", "WidthRangeBlock",
    "Workload", "parse_block", "parse_workload",
]
