"""One-line messages for any exception (engine.errors.one_line)."""

from __future__ import annotations

from engine.errors import Cancelled, NotApplicable, SpecError, one_line


def test_one_line_messages():
    assert one_line(NotApplicable("not applicable: too big")) == "not applicable: too big"
    assert one_line(SpecError("workload[0].product.age: unknown block 'prefx'")) == (
        "workload[0].product.age: unknown block 'prefx'")
    assert one_line(ValueError("bad\nsecond line")) == "ValueError: bad"
    assert one_line(KeyError("x")) == "KeyError: 'x'"
    assert one_line(Cancelled()) == "Cancelled"
