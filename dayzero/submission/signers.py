"""The allowed-signers file, with the hardware kinds each vendor key may submit for.

A line is OpenSSH's (`<vendor> namespaces="dayzero" <key type> <key> [comment]`) plus one option
of ours, `kinds="b300,gb300"`: the hardware kinds that key signs for. ssh-keygen refuses options
it does not know, so it is shown each line without it, and only the lines whose kinds cover
every kind a bundle claims. A key without `kinds` is bound to no kind and signs for nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Set
from dataclasses import dataclass

KINDS = re.compile(r'(?:^|,)kinds="([^"]*)"')
KEY_TYPE = re.compile(r"^(ssh-|ecdsa-|sk-)")


@dataclass(frozen=True)
class SignerLine:
    principals: tuple[str, ...]
    kinds: frozenset[str]  # empty: bound to no kind
    line: str  # the line as ssh-keygen reads it, our option removed


def signer_lines(text: str) -> Iterator[SignerLine]:
    for raw in text.splitlines():
        stripped = raw.strip()
        parts = stripped.split(None, 2)
        if not stripped or stripped.startswith("#") or len(parts) < 3:
            continue
        principals, options, rest = parts
        kinds: frozenset[str] = frozenset()
        if not KEY_TYPE.match(options):
            if found := KINDS.search(options):
                kinds = frozenset(k for k in found.group(1).split(",") if k)
            options = KINDS.sub("", options).strip(",")
            rest = f"{options} {rest}" if options else rest
        yield SignerLine(tuple(principals.split(",")), kinds, f"{principals} {rest}")


def for_ssh_keygen(text: str, vendor: str | None = None, kinds: Set[str] | None = None) -> str:
    """The lines ssh-keygen may verify with: every line, or `vendor`'s that cover `kinds`."""
    chosen = [
        s.line
        for s in signer_lines(text)
        if vendor is None or (vendor in s.principals and kinds is not None and set(kinds) <= s.kinds)
    ]
    return "".join(f"{line}\n" for line in chosen)


def bound_kinds(text: str, vendor: str) -> set[str]:
    """Every kind some key of `vendor` may sign for."""
    return {k for s in signer_lines(text) if vendor in s.principals for k in s.kinds}
