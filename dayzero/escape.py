"""One escaping function for every value a vendor (or any run) controls, wherever dayzero prints it.

A value is first made one visible line: control and format characters (newline, CR, ESC, NUL,
bidi overrides, line separators) become `\\xNN` / `\\uNNNN` and a backslash is doubled, so no
value can start a line of the checker's stdout or stderr or hide text. Then the context's own
metacharacters are neutralised: a Markdown table cell cannot close its cell or open a link or an
HTML tag, a code span cannot be closed, HTML gets entities. Nothing is dropped, so what a finding
shows is still what the bundle holds.
"""

from __future__ import annotations

import html
import unicodedata

CONTEXTS = ("text", "markdown", "code", "html")
LINE_BREAKING = {"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"}
MARKDOWN = {c: "\\" + c for c in "\\`|[]*_"} | {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


def _visible(ch: str) -> str:
    if ch == "\\":
        return "\\\\"
    if ch == " " or unicodedata.category(ch) not in LINE_BREAKING:
        return ch
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


BOUNDARY = " ,;/"  # where a long value may be cut: between words, list items, path parts


def clip(text: str, limit: int) -> str:
    """`text` in at most `limit` characters: cut after the last whole word that fits, then "..."
    (a single word longer than the limit is the one thing cut inside)."""
    if len(text) <= limit:
        return text
    room = max(limit - 3, 0)
    cut = max(text.rfind(ch, 0, room + 1) for ch in BOUNDARY)
    return text[: cut if cut > 0 else room].rstrip(BOUNDARY) + "..."


def escape(value: object, context: str = "text", limit: int | None = None) -> str:
    """`value` as one safe line for `context`: text (a terminal line), markdown (inline text or a
    table cell), code (inside a Markdown code span in a table) or html (element text or an
    attribute). `limit` bounds the visible length (hostile values can be huge)."""
    if context not in CONTEXTS:
        raise ValueError(f"unknown escaping context {context!r}")
    text = value if isinstance(value, str) else repr(value)
    if limit is not None:
        text = clip(text, limit)
    text = "".join(_visible(ch) for ch in text)
    if context == "markdown":
        return "".join(MARKDOWN.get(ch, ch) for ch in text)
    if context == "code":  # a backtick would close the span; GFM splits table cells on any '|'
        return text.replace("`", "\\x60").replace("|", "\\|")
    if context == "html":
        return html.escape(text, quote=True)
    return text
