"""A launch's arguments as an engine's log prints them, and a recipe command read into that form.

vLLM prints the arguments it parsed that differ from its defaults ("non-default args: {...}"),
SGLang every one of them ("server_args={...}"): both a Python dict keyed by argparse's names. A
recipe command is read into the same names (`--max-num-seqs 4` is `max_num_seqs`) and values made
canonical on both sides (`canonical`), so the two compare as text. Pure.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from collections.abc import Callable, Mapping, Sequence

SHORT_FLAG = re.compile(r"^-[A-Za-z]")

Args = tuple[tuple[str, str], ...]


def canonical(value) -> str:
    """One argument's value as text both sides agree on: numbers by value, a one-element list as
    its element (`served_model_name: ['default']` is `--served-model-name default`), JSON for dicts."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return format(float(value), "g")
    if isinstance(value, list | tuple):
        return canonical(value[0]) if len(value) == 1 else " ".join(canonical(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    text = str(value)
    if text[:1] in "{[":
        try:
            return canonical(json.loads(text))
        except ValueError:
            return text
    try:
        return format(float(text), "g")
    except ValueError:
        return text


def logged(text: str, pattern: re.Pattern) -> Args | None:
    """The arguments of the first line `pattern` (its group 1: a Python dict) matches, canonical;
    None where the log prints none or the dict does not parse."""
    for line in text.splitlines():
        if m := pattern.search(line):
            try:
                found = ast.literal_eval(m.group(1))
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return None
            if not isinstance(found, dict):
                return None
            return tuple(sorted((str(k), canonical(v)) for k, v in found.items()))
    return None


def recipe_args(argv: Sequence[str], aliases: Mapping[str, str] = {}) -> dict[str, str]:
    """A launch's arguments (after its launcher) in the log's form: `--max-num-seqs 4` is
    `max_num_seqs: 4`, a flag without a value is true (`--no-x`: x false), a short flag its long
    name where `aliases` knows it, a positional argument the model tag."""
    out: dict[str, list[str]] = {}
    key = None
    for arg in argv:
        if arg.startswith("--") or SHORT_FLAG.match(arg):
            key, _, value = arg.lstrip("-").partition("=")
            key = aliases.get(key, key.replace("-", "_"))
            out[key] = [value] if value else []
        elif key is None:
            out["model_tag"] = [arg]
        else:
            out[key].append(arg)
    args = {k: canonical(v if len(v) != 1 else v[0]) if v else "true" for k, v in out.items()}
    for key in [k for k, v in args.items() if k.startswith("no_") and v == "true"]:
        args.setdefault(key[3:], "false")
    return args


def command_args(
    command: str, start: Callable[[list[str]], int | None], aliases: Mapping[str, str] = {}
) -> dict[str, str] | None:
    """`recipe_args` of a launch command string (`start`: where its arguments begin in its argv);
    None where no launcher of the engine starts it."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    at = start(argv)
    return None if at is None else recipe_args(argv[at:], aliases)
