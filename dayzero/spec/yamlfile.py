"""Load a YAML or JSON data file and validate it against a schema shipped in the package.

Errors name the file, the path inside it (``modes.low_latency.roles.server.nodes``), the line,
and what was expected (an unknown field with the known one it is closest to), so a lab engineer
can fix a matrix without reading our code; every error of a file at once, one line each.
"""

from __future__ import annotations

import copy
import json
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from dayzero.errors import ConfigError, raise_all
from dayzero.spec.suggest import did_you_mean

# libyaml's loader where PyYAML was built with it (over 10x faster on a model card); the pure-Python
# one otherwise and for errors, so a message reads the same either way.
_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@cache
def schema(name: str) -> dict:
    return json.loads(resources.files("dayzero.spec.schemas").joinpath(f"{name}.schema.json").read_text())


@cache
def _validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema(name))


def format_path(parts) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _line_of(node: yaml.Node | None, parts) -> int | None:
    """Walk the composed YAML tree along a path to find the line a value came from."""
    for part in parts:
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            break
    return node.start_mark.line + 1 if node is not None else None


def _describe(error: jsonschema.ValidationError) -> str:
    if error.validator == "type":
        return f"expected {error.validator_value}, got {error.instance!r}"
    if error.validator == "enum":
        return f"expected one of {error.validator_value}, got {error.instance!r}"
    return error.message


def _problems(error: jsonschema.ValidationError) -> list[tuple[list, list, str]]:
    """(path shown, path of its line, message) of one error; an object's unknown fields one each,
    at their own line, with the known field each is closest to."""
    parts = list(error.absolute_path)
    known = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
    if error.validator == "additionalProperties" and error.validator_value is False and known:
        extra = [key for key in error.instance if key not in known]
        return [(parts, [*parts, key], f"unknown field {key!r}{did_you_mean(key, known)}") for key in extra]
    return [(parts, parts, _describe(error))]


def _duplicates(node: yaml.Node | None, parts: list) -> list[tuple[int, str, str]]:
    """Keys given twice in one mapping, anywhere in the tree (a YAML loader keeps the last one)."""
    out = []
    if isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for k, v in node.value:
            line = k.start_mark.line + 1
            if k.value in first:
                said = f"duplicate key {k.value!r} (line {line}; first at line {first[k.value]}): one is lost"
                out.append((line, format_path([*parts, k.value]), said))
            first.setdefault(k.value, line)
            out += _duplicates(v, [*parts, k.value])
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            out += _duplicates(v, [*parts, i])
    return out


def load(path: Path, schema_name: str) -> Any:
    """Parse and validate one file; raise ConfigError for its problems (the deepest of each), all
    of them (`ConfigErrors`) in the order of the file's lines. A text parsed and valid before is
    not parsed again (a copy of what it gave): the submission checker reads each cell's golden
    and card once a phase, each a YAML parse and a schema walk."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(path, "", f"cannot read: {exc.strerror}") from None
    return copy.deepcopy(_valid(str(path), schema_name, text))


@lru_cache(maxsize=256)
def _valid(where: str, schema_name: str, text: str) -> Any:
    """The data of `text`, valid against the schema (errors name `where`); raised, not kept."""
    path = Path(where)
    try:
        data = yaml.load(text, Loader=_FAST_LOADER)
    except yaml.YAMLError:
        data = None  # parsed again below by the pure-Python loader, whose message is the one we show
    if data is None:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"line {mark.line + 1}" if mark else ""
            raise ConfigError(path, where, f"not valid YAML: {getattr(exc, 'problem', exc)}") from None
    twice = _duplicates(yaml.compose(text, Loader=_FAST_LOADER), [])
    raise_all([ConfigError(path, where, message) for _, where, message in twice])
    validator = _validator(schema_name)
    errors = list(validator.iter_errors(data))
    if errors:
        tree = yaml.compose(text)  # the tree only for the errors' line numbers
        found = []
        for top in errors:  # each a problem of its own; best_match picks the deepest of its branches
            for parts, at, message in _problems(jsonschema.exceptions.best_match([top]) or top):
                line = _line_of(tree, at)
                found.append((line or 0, format_path(parts), message + (f" (line {line})" if line else "")))
        raise_all([ConfigError(path, where, message) for _, where, message in sorted(set(found))])
    return data


def line_of(path: Path, parts) -> int | None:
    """Line of a value, for errors found after schema validation (unknown references, duplicates)."""
    try:
        return _line_of(yaml.compose(Path(path).read_text()), parts)
    except (OSError, yaml.YAMLError):
        return None
