"""Secrets never reach logs, attachments or evidence: every text written out passes `redact`."""

from __future__ import annotations

import re
from collections.abc import Iterable

MASK = "***"
SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY|CREDENTIAL)", re.I)
ASSIGNMENT = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)=('[^']*'|\"[^\"]*\"|\S+)")


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Mask known secret values and `NAME=value` pairs whose name looks secret."""
    for secret in sorted((s for s in secrets if s and len(s) >= 4), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return ASSIGNMENT.sub(
        lambda m: f"{m.group(1)}={MASK}" if is_secret_name(m.group(1)) else m.group(0), text
    )


def redact_env(env: Iterable[tuple[str, str]]) -> dict[str, str]:
    return {k: (MASK if is_secret_name(k) else v) for k, v in env}
