"""The engines' parser answers, remembered: `dayzero lint` imports SGLang (5-10 s) to read argv
lists whose answers depend on nothing but the interpreter, the reading script and the packages
installed next to it. Keyed on those, a repeated lint of the same commands reads the answers
back instead of importing SGLang again; any package installed, removed or upgraded in the
engines venv (or a new script) starts a new cache.

Where: $DAYZERO_LINT_CACHE, else <dayzero cache>/lint. I/O in `installed`, `load` and `store` only.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from dayzero import atomic
from dayzero.cache import cache_root

ENV = "DAYZERO_LINT_CACHE"


def cache_dir() -> Path:
    return Path(os.environ.get(ENV) or cache_root() / "lint")


def installed(python: Path) -> list[str]:
    """What the interpreter's environment holds: each dist-info's name and its RECORD's size and
    mtime (a reinstall of the same version rewrites it)."""
    out = []
    for site in sorted(python.parent.parent.glob("lib/python*/site-packages")):
        for info in sorted(site.glob("*.dist-info")):
            record = info / "RECORD"
            stat = record.stat() if record.exists() else None
            out.append(f"{info.name} {stat.st_size if stat else 0} {stat.st_mtime_ns if stat else 0}")
    return out


def key(python: Path, script: bytes) -> str:
    """One cache per interpreter, script and installed packages."""
    text = "\n".join([str(python.resolve()), hashlib.sha256(script).hexdigest(), *installed(python)])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def command_key(command: dict) -> str:
    return json.dumps([command["parser"], command["argv"]])


def load(path: Path) -> dict:
    """{"versions": ..., "results": {command_key: findings}}; empty when absent or unreadable."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) and isinstance(doc.get("results"), dict) else {}


def store(path: Path, doc: dict) -> None:
    """Written whole, atomically: two lints at once may both write it, the last whole one stays.
    A cache that cannot be written is no error: the next lint parses again."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_json(path, doc)
    except OSError:
        pass
