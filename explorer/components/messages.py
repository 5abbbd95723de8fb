"""Messages for people: what went wrong in words, never an exception's class name.

``engine.errors.one_line`` prefixes anything but a SpecError with its type (``ValueError:
...``), which is right for a log or a terminal; a page shows :func:`plain` instead.
"""

from __future__ import annotations

import re

#: A leading "SomeError: " (or Exception/Warning) that a message may carry from a lower layer.
_CLASS_PREFIX = re.compile(r"^(?:[A-Za-z_][\w.]*?(?:Error|Exception|Warning|Applicable)"
                           r"|Cancelled):\s*")
#: What a page says for an exception without a message.
NO_DETAILS = "something went wrong (the details are in the server log)"


def plain(problem: BaseException | str) -> str:
    """The first line of an exception's message (or of a message), without class names:
    ``ValueError("x: too big")`` -> ``x: too big``; ``KeyError('age')`` -> ``unknown name
    'age'``; a message-less exception -> :data:`NO_DETAILS`."""
    text = str(problem).strip()
    text = text.splitlines()[0].strip() if text else ""
    if isinstance(problem, KeyError) and text:
        text = f"unknown name {text}"
    while _CLASS_PREFIX.match(text):
        text = _CLASS_PREFIX.sub("", text, count=1)
    return text or NO_DETAILS
