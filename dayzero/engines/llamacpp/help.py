"""llama-server's own argument table, read from its `--help`, and an argv checked against it.

The help prints one entry per argument, flush left: its names separated by commas, then an
optional value placeholder (``N``, ``FNAME``, ``{none,linear,yarn}``, ``[on|off|auto]``, ``<0|1>``
or, for list-valued flags, the comma-separated choices), then the description from column 40.
The parsed table is cached beside the binary, so a lint reads the help once per build.

llama.cpp's `rpc-server` (ranks 1..N-1 of a multi-node cpu cell) prints the same entry format
indented by two spaces (`  -p, --port PORT   port to bind to`); its table is read the same way
from its own `--help`, so lint checks rpc-server commands against rpc-server itself.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from dayzero.errors import DayzeroError

CACHE_NAME = "help-table.json"
CHOICES = (
    re.compile(r"^\{([^{}]+)\}$"),  # {none,linear,yarn}
    re.compile(r"^\[([a-z0-9_-]+(?:\|[a-z0-9_-]+)+)\]$"),  # [on|off|auto]
    re.compile(r"^<([a-z0-9_-]+(?:\|[a-z0-9_-]+)+)>$"),  # <0|1>
)
LIST = re.compile(r"^[a-z0-9_-]+(?:,[a-z0-9_-]+)+$")  # none,draft-simple,... (comma-separated list)


def parse_help(text: str, indent: int = 0) -> dict[str, dict]:
    """{flag: {"value": takes a value, "choices": [...] or None, "list": comma-separated values}};
    entries start `indent` spaces in (0 for llama-server, 2 for rpc-server)."""
    table: dict[str, dict] = {}
    for line in text.splitlines():
        if not line.startswith(" " * indent + "-"):
            continue
        line = line[indent:]
        spec = re.split(r"\s{2,}", re.sub(r",\s+", ", ", line), maxsplit=1)[0]
        parts = [p.strip() for p in spec.split(", ")]
        last_name, _, meta = parts[-1].partition(" ")
        names = [p.split(" ")[0] for p in parts[:-1]] + [last_name]
        choices, is_list = None, False
        for pattern in CHOICES:
            m = pattern.match(meta)
            if m:
                choices = re.split(r"[,|]", m.group(1))
        if choices is None and LIST.match(meta):
            choices, is_list = meta.split(","), True
        entry = {"value": bool(meta), "choices": choices, "list": is_list}
        for name in names:
            if name.startswith("-"):
                table[name] = entry
    return table


INDENT = {"rpc-server": 2}  # programs whose help entries are indented


def table(binary: Path) -> dict[str, dict]:
    """The argument table of this llama-server (or rpc-server) build, cached next to its bin/."""
    binary = Path(binary)
    if not binary.exists():
        raise DayzeroError(f"no {binary.name} at {binary}: run tools/build-engine")
    name = CACHE_NAME if binary.name == "llama-server" else f"help-{binary.name}.json"
    cache = binary.parent.parent / name
    if cache.exists() and cache.stat().st_mtime >= binary.stat().st_mtime:
        return json.loads(cache.read_text())
    done = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60)
    parsed = parse_help(done.stdout + done.stderr, INDENT.get(binary.name, 0))
    if "--port" not in parsed:
        raise DayzeroError(f"{binary} --help printed no argument table (exit {done.returncode})")
    cache.write_text(json.dumps(parsed, sort_keys=True))
    return parsed


# Value flags llama.cpp's arg parser lets a command repeat (each adds one more).
REPEATABLE = frozenset(
    {
        "--lora",
        "--lora-scaled",
        "--control-vector",
        "--control-vector-scaled",
        "--override-kv",
        "--override-tensor",
        "-ot",
        "--override-tensor-draft",
        "-otd",
    }
)


def check(args: dict[str, dict], argv: Sequence[str], program: str = "llama-server") -> list[dict]:
    """Findings for an argv (without the program name): unknown, missing value, bad choice, a
    value flag given twice (llama.cpp keeps the last)."""
    findings = []
    seen: set[str] = set()
    i = 0
    while i < len(argv):
        token = argv[i]
        flag, eq, inline = token.partition("=")
        entry = args.get(flag) if flag.startswith("-") else None
        if entry is None:
            kind = "unknown" if token.startswith("-") else "unexpected value"
            findings.append({"flag": flag, "kind": kind, "message": f"not in {program} --help"})
            i += 1
            continue
        i += 1
        if not entry["value"]:
            continue
        if flag in seen and flag not in REPEATABLE:
            findings.append(
                {"flag": flag, "kind": "given twice", "message": f"{program} keeps the last value"}
            )
        seen.add(flag)
        if eq:
            value = inline
        elif i < len(argv) and (
            not argv[i].startswith("-") or argv[i].lstrip("-").replace(".", "").isdigit()
        ):
            value = argv[i]
            i += 1
        else:
            findings.append({"flag": flag, "kind": "missing value", "message": "expects a value"})
            continue
        choices = entry["choices"]
        values = value.split(",") if entry["list"] else [value]
        bad = [v for v in values if choices and v not in choices]
        if bad:
            findings.append(
                {"flag": flag, "kind": "bad choice", "message": f"{bad[0]!r} not in {', '.join(choices)}"}
            )
    return findings
