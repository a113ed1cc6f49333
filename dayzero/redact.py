"""Secrets never reach logs, attachments or evidence: every text written out passes `redact`.

Three sources of secrets are masked: values passed in (the inventory's `engine_setup` lines, and
the values of secret-named `NAME=value` assignments inside them), values registered when a
recipe's secret env is resolved on the controller (`register`: a recipe may name its secret
anything, so the value itself is what must never leak), and any `NAME=value` pair whose name
looks secret.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from dayzero import atomic

MASK = "***"
SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY|CREDENTIAL)", re.I)
ASSIGNMENT = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)=('[^']*'|\"[^\"]*\"|\S+)")
# In a command, a value runs to the next separator: quoting that hides a quote stays covered.
COMMAND_ASSIGNMENT = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)=[^;&|\n]*")


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


_REGISTERED: set[str] = set()


def register(value: str) -> None:
    """Remember a secret value resolved in this process, so every later `redact` masks it."""
    if value and len(value) >= 4:
        _REGISTERED.add(value)


def _values(secrets: Iterable[str]) -> set[str]:
    """The given secrets plus the values of secret-named assignments inside them (set-up lines)."""
    out = set(_REGISTERED)
    for secret in secrets:
        if not secret:
            continue
        out.add(secret)
        for m in ASSIGNMENT.finditer(secret):
            if is_secret_name(m.group(1)):
                value = m.group(2).rstrip(";")
                out.add(value)
                out.add(value.strip("'\""))
    return {s for s in out if len(s) >= 4}


def inside(secrets: Iterable[str]) -> tuple[str, ...]:
    """The secret values inside set-up lines (their secret-named assignments'), not the lines:
    for a preview that shows a host's setup with only its secrets masked."""
    secrets = tuple(secrets)
    return tuple(v for v in _values(secrets) if v not in secrets)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Mask known secret values and `NAME=value` pairs whose name looks secret."""
    for secret in sorted(_values(secrets), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return ASSIGNMENT.sub(
        lambda m: f"{m.group(1)}={MASK}" if is_secret_name(m.group(1)) else m.group(0), text
    )


def redact_command(command: str, limit: int = 160) -> str:
    """A command for an error message, on one line: every `NAME=value` masked whatever its name
    (commands carry `export ...` of recipe env), then known secrets as `redact` does."""
    text = redact(COMMAND_ASSIGNMENT.sub(rf"\1={MASK}", command)).replace("\n", "; ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def redact_env(env: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Mask by name, and by value for secrets the recipe marked explicitly (`register`)."""
    return {k: (MASK if is_secret_name(k) or v in _REGISTERED else redact(v)) for k, v in env}


def redact_tree(value, secrets: Iterable[str] = ()):
    """Every string inside a JSON-like document masked (for whole documents such as evidence)."""
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {k: redact_tree(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_tree(v, secrets) for v in value]
    return value


def redact_file(path: Path, secrets: Iterable[str] = ()) -> None:
    """Rewrite a file copied into reports/ (a server log may echo its environment) with secrets masked."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return
    masked = redact(text, secrets)
    if masked != text:
        atomic.write_text(path, masked)
