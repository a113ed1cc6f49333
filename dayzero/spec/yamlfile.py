"""Load a YAML or JSON data file and validate it against a schema shipped in the package.

Errors name the file, the path inside it (``modes.low_latency.roles.server.nodes``), the line,
and what was expected, so a lab engineer can fix a matrix without reading our code.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from dayzero.errors import ConfigError

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
    if error.validator == "additionalProperties":
        return f"unknown field ({error.message.split('(')[-1].rstrip(')')})"
    return error.message


def load(path: Path, schema_name: str) -> Any:
    """Parse and validate one file; raise ConfigError for the first problem (the deepest one)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(path, "", f"cannot read: {exc.strerror}") from None
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
    validator = _validator(schema_name)
    errors = sorted(validator.iter_errors(data), key=lambda e: (-len(e.absolute_path), e.message))
    if errors:
        err = jsonschema.exceptions.best_match(errors) or errors[0]
        parts = list(err.absolute_path)
        line = _line_of(yaml.compose(text), parts)  # the tree only for an error's line number
        raise ConfigError(path, format_path(parts), _describe(err) + (f" (line {line})" if line else ""))
    return data


def line_of(path: Path, parts) -> int | None:
    """Line of a value, for errors found after schema validation (unknown references, duplicates)."""
    try:
        return _line_of(yaml.compose(Path(path).read_text()), parts)
    except (OSError, yaml.YAMLError):
        return None
