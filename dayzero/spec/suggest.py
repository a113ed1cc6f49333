"""'Did you mean': the known name closest to a misspelt one, as the end of an error message."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """` (did you mean 'b300'?)`, or "" when no known name is close (difflib's 0.6 ratio)."""
    close = difflib.get_close_matches(str(word), sorted(set(known)), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
