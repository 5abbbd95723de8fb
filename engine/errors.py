"""Exceptions for user-facing input errors, a nearest-name suggester and :func:`one_line`."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class SpecError(ValueError):
    """Bad user input: the message is one line that names the offending field."""


class NotApplicable(ValueError):  # noqa: N818 -- reads as "mechanism not applicable: why"
    """A mechanism cannot serve this workload or privacy unit; the message says why."""


class Cancelled(RuntimeError):  # noqa: N818 -- an outcome, not a failure
    """A long computation was stopped by its caller through the progress callback."""


def suggest(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest choice, or an empty string."""
    match = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


def one_line(exc: BaseException) -> str:
    """A one-line message for any exception: a SpecError or NotApplicable is already one line
    naming its field; anything else is prefixed with its type (``KeyError: 'x'``)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, SpecError | NotApplicable):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class PrivacyLeakWarning(UserWarning):
    """An operation reads private records to decide something that should be public."""
