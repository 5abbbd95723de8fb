"""A number box that says what is wrong, next to the box, and keeps what was typed.

A browser's number field silently reverts "abc", "1,000" or an out-of-range value to the last
good one; this box is a text field read by :func:`parse_number` ("1,000" is 1000, "1e-3" is
0.001) and checked by :func:`range_problem`. A refused entry stays in the box as typed, and a
message beside it names the problem, the allowed range and the value still in use.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import panel as pn
import param

#: Thousands separators and spaces a typed number may carry ("1,000", "1 000", "1_000").
_SEPARATORS = re.compile(r"(?<=\d)[,_ ](?=\d{3}(\D|$))")


def parse_number(text: str) -> float:
    """The number in ``text``: "1,000" -> 1000.0, " 2.5 " -> 2.5, "1e-3" -> 0.001.

    Raises:
        ValueError: with a one-line message, for empty text or text that is not a number.
    """
    cleaned = _SEPARATORS.sub("", text.strip())
    if not cleaned:
        raise ValueError("the box is empty: type a number")
    try:
        value = float(cleaned)
    except ValueError:
        raise ValueError(f'"{text.strip()}" is not a number') from None
    if not math.isfinite(value):
        raise ValueError(f'"{text.strip()}" is not a finite number')
    return value


def format_number(value: float | None) -> str:
    """How the box shows a value it did not get typed: ``1,000``, ``0.5``, ``1e-06``."""
    if value is None:
        return ""
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:.6g}"


def range_problem(value: float, low: float | None = None, high: float | None = None, *,
                  low_inclusive: bool = True, high_inclusive: bool = True,
                  integer: bool = False) -> str:
    """Why ``value`` is outside the allowed range ('' when it is inside), naming the range:
    "must be more than 0 (got -5)", "must be between 1 and 1,000 (got 0)"."""
    if integer and not float(value).is_integer():
        return f"must be a whole number (got {format_number(value)})"
    below = low is not None and (value < low or (value == low and not low_inclusive))
    above = high is not None and (value > high or (value == high and not high_inclusive))
    if not (below or above):
        return ""
    got = f"(got {format_number(value)})"
    if low is not None and high is not None:
        return f"must be between {format_number(low)} and {format_number(high)} {got}"
    if low is not None:
        word = "at least" if low_inclusive else "more than"
        return f"must be {word} {format_number(low)} {got}"
    word = "at most" if high_inclusive else "less than"
    return f"must be {word} {format_number(high)} {got}"


class NumberBox(pn.viewable.Viewer):
    """A labelled text box for one number with its message beside it.

    ``value`` is the number in use; typing a valid number sets it (and calls ``on_value``),
    typing anything else leaves it, keeps the text and sets ``problem`` ("eps: "abc" is not a
    number; still using 1."). Setting ``value`` from outside rewrites the text. With
    ``empty_ok`` an empty box means "no number" (``value`` None), as for an optional field.
    """

    value = param.Number(default=None, allow_None=True, doc="The number in use.")
    text = param.String(default="", doc="What the box shows (as typed, when refused).")
    problem = param.String(default="", doc="Why the typed text was refused ('' if not).")

    def __init__(self, *, label: str, value: float | None, low: float | None = None,
                 high: float | None = None, low_inclusive: bool = True,
                 high_inclusive: bool = True, integer: bool = False, css_class: str = "",
                 width: int = 160, on_value: Callable[[float | None], None] | None = None,
                 problem_class: str = "box-problem", empty_ok: bool = False) -> None:
        super().__init__(value=value, text=format_number(value))
        self.label = label
        self._range = {"low": low, "high": high, "low_inclusive": low_inclusive,
                       "high_inclusive": high_inclusive, "integer": integer}
        self._on_value = on_value
        self._problem_class = problem_class
        self._typing = False
        self._empty_ok = empty_ok
        #: The message's own class, ``<css_class>-problem``, that finds it under its box.
        self._own_class = [f"{css_class}-problem"] if css_class else []
        self.input = pn.widgets.TextInput(label=label, value=self.text, width=width,
                                          css_classes=[css_class] if css_class else [])
        self.input.param.watch(self._typed, "value")
        self.param.watch(self._shown, "value")

    @classmethod
    def from_param(cls, owner: param.Parameterized, name: str, *, label: str = "",
                   css_class: str = "", width: int = 200, **options: Any) -> NumberBox:
        """A box for the number parameter ``name`` of ``owner``, kept in step both ways: its
        range, whole-number rule and label come from the parameter (an empty box means None
        where the parameter allows None); a valid entry sets the parameter."""
        parameter = owner.param[name]
        low, high = parameter.bounds or (None, None)
        low_inclusive, high_inclusive = getattr(parameter, "inclusive_bounds", (True, True))
        box = cls(label=label or parameter.label, value=getattr(owner, name), low=low,
                  high=high, low_inclusive=low_inclusive, high_inclusive=high_inclusive,
                  integer=isinstance(parameter, param.Integer), css_class=css_class,
                  width=width, empty_ok=parameter.allow_None,
                  on_value=lambda value: setattr(owner, name, value), **options)
        owner.param.watch(lambda event: setattr(box, "value", event.new), name)
        return box

    def _typed(self, event: param.parameterized.Event) -> None:
        if not self._typing:  # not the box's own rewrite of its text
            self.type(event.new)

    def type(self, text: str) -> None:
        """What happens when ``text`` is entered in the box."""
        self.text = text
        if self._empty_ok and not text.strip():
            number = None
        else:
            try:
                number = parse_number(text)
            except ValueError as exc:
                self._refuse(str(exc))
                return
            problem = range_problem(number, **self._range)
            if problem:
                self._refuse(problem)
                return
        self.problem = ""
        self._typing = True
        try:
            self.value = int(number) if self._range["integer"] and number is not None \
                else number
        finally:
            self._typing = False
        if self._on_value is not None:
            self._on_value(self.value)

    def refuse(self, message: str) -> None:
        """Show ``message`` (a problem found by the owner, e.g. a rule across fields)."""
        self._refuse(message)

    def _refuse(self, message: str) -> None:
        if self.value is not None:
            still = f"; still using {format_number(self.value)}"
        else:
            still = "; still counted as empty" if self._empty_ok else ""
        self.problem = f"{self.label}: {message}{still}."

    def _shown(self, event: param.parameterized.Event) -> None:
        if self._typing:
            return
        self.text = format_number(event.new)
        self.problem = ""
        if self.input.value != self.text:
            self._typing = True
            try:
                self.input.value = self.text
            finally:
                self._typing = False

    def __panel__(self) -> pn.viewable.Viewable:
        message = pn.pane.Markdown(self.param.problem, visible=pn.bind(bool, self.param.problem),
                                   css_classes=[self._problem_class, *self._own_class],
                                   margin=(0, 5),
                                   styles={"color": "#a94400"})
        return pn.Column(self.input, message, margin=0)
