"""Workloads: 1-D blocks, query groups over attribute subsets, unions, and their spec."""

from engine.workloads.blocks import (
    BLOCK_HELP,
    AllRangeBlock,
    Block,
    CircularRangeBlock,
    IdentityBlock,
    MatrixBlock,
    PermutedBlock,
    PrefixBlock,
    SuffixBlock,
    TotalBlock,
    WidthRangeBlock,
    random_block,
)
from engine.workloads.groups import (
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
    "BLOCK_HELP", "BLOCK_NAMES", "GROUP_KINDS", "AllRangeBlock", "Block", "CircularRangeBlock",
    "Group", "IdentityBlock", "Marginals", "MatrixBlock", "PairQueries", "PermutedBlock",
    "PrefixBlock", "PrefixMarginals", "Product", "SubsetMatrix", "SuffixBlock", "Term",
    "TotalBlock", "WidthRangeBlock", "Workload", "parse_block", "parse_workload",
    "random_block",
]
