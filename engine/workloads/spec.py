"""Parse and validate the ``workload:`` block of a scenario spec.

Blocks and group kinds are looked up by name in their registries
(:data:`~engine.workloads.blocks.BLOCKS`, :data:`~engine.workloads.groups.GROUPS`); each class
reads its own options. Errors are :class:`~engine.errors.SpecError` with one line that names
the field path, e.g. ``workload[1].product.age: unknown block 'prefx' (did you mean
'prefix'?)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.domain import Attribute, Domain
from engine.errors import SpecError
from engine.workloads.blocks import BLOCKS, Block
from engine.workloads.groups import GROUPS, Group
from engine.workloads.workload import Workload

#: Block names of the spec, in registry order.
BLOCK_NAMES = tuple(BLOCKS)
#: Group kinds of the spec, in registry order.
GROUP_KINDS = tuple(GROUPS)


def parse_block(spec: Any, attr: Attribute, where: str) -> Block:
    """Build a 1-D block over ``attr`` from its spec (a bare name or a mapping with
    ``block:``)."""
    return Block.from_spec(spec, attr.size, where)


def parse_group(spec: Any, domain: Domain, index: int) -> Group:
    """Parse one item of the ``workload:`` list."""
    return Group.from_spec(spec, domain, index)


def parse_workload(spec: Any, domain: Domain) -> Workload:
    """Parse the ``workload:`` list into a :class:`Workload`."""
    if isinstance(spec, Mapping):
        spec = [spec]
    if not isinstance(spec, list | tuple) or not spec:
        raise SpecError("workload: expected a non-empty list of query groups")
    return Workload(domain, tuple(parse_group(g, domain, i) for i, g in enumerate(spec)))
