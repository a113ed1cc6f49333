"""Writes that readers never see half done: a temporary file beside the target, then `os.replace`.

Evidence, goldens, raw records and accepted submissions are read by other processes (xdist
workers, `dayzero report`, a nightly comparing with last night) while a run may be interrupted
at any moment; every such document goes through here.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path


def write_bytes(path: Path, data: bytes) -> Path:
    """Write `data` to `path` atomically (the parent folder is created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Unique per process and thread, so two writers of one path never share a temporary file.
    partial = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.partial")
    try:
        partial.write_bytes(data)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return path


def write_text(path: Path, text: str) -> Path:
    return write_bytes(path, text.encode())


def write_json(path: Path, doc, *, indent: int | None = 2, sort_keys: bool = True) -> Path:
    """A JSON document, by default pretty-printed with sorted keys and a final newline."""
    text = json.dumps(doc, indent=indent, sort_keys=sort_keys)
    return write_text(path, text + "\n" if indent is not None else text)
