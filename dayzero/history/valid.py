"""A JSON schema compiled into one yes/no check: the store's ingest validates 10^5 evidence files.

jsonschema walks the schema for every document (~1 ms for a real cell's evidence, most of an
ingest's time); this compiles a schema once into nested closures (~0.1 ms a document). It only
says yes or no: a document it refuses is validated again by jsonschema, which names the field
and stays the authority (`sources.read_file`). It knows the keywords dayzero's evidence schema
uses and refuses to compile any other (`Unsupported`), so it never passes what it cannot read.
Meanings follow JSON Schema 2020-12 as jsonschema implements them: `integer` accepts 1.0, a
boolean is neither a number nor equal to one, `pattern` searches, keywords of one type ignore
values of another; checked against jsonschema on mutated documents in tests/test_history_valid.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable

Check = Callable[[object], bool]
IGNORED = {"$schema", "$id", "$comment", "title", "description", "default", "examples", "$defs"}


class Unsupported(ValueError):
    """A keyword this compiler does not implement: use jsonschema for that schema."""


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


TYPES: dict[str, Check] = {
    "string": lambda v: isinstance(v, str),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": _is_number,
    "integer": lambda v: _is_number(v) and (isinstance(v, int) or float(v).is_integer()),
}


def _equal(a: object, b: object) -> bool:
    """JSON equality: True is not 1, 1 is 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def compile_schema(schema: dict) -> Check:
    """The schema's check; `$ref`s to `#/$defs/...` resolved within it."""
    defs: dict[str, Check] = {}
    root = schema

    def ref(target: str) -> Check:
        if not target.startswith("#/$defs/"):
            raise Unsupported(f"$ref {target!r}")
        name = target.removeprefix("#/$defs/")
        if name not in defs:
            defs[name] = lambda v: True  # placeholder while compiling a recursive definition
            defs[name] = node(root["$defs"][name])
        return lambda v: defs[name](v)

    def node(s: object) -> Check:
        if s is True or s == {}:
            return lambda v: True
        if not isinstance(s, dict):
            raise Unsupported(f"schema {s!r}")
        unknown = set(s) - IGNORED - KEYWORDS
        if unknown:
            raise Unsupported(", ".join(sorted(unknown)))
        checks = [KEYWORDS_OF[k](s[k], s, node, ref) for k in s if k in KEYWORDS_OF]
        return _all([c for c in checks if c is not None])

    return node(schema)


def _all(checks: list[Check]) -> Check:
    """The checks in order, the common sizes unrolled (a generator a node was half the time)."""
    if not checks:
        return lambda v: True
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        a, b = checks
        return lambda v: a(v) and b(v)
    if len(checks) == 3:
        a, b, c = checks
        return lambda v: a(v) and b(v) and c(v)

    def every(v):  # a loop, not all(generator): 4x faster here
        for c in checks:  # noqa: SIM110
            if not c(v):
                return False
        return True

    return every


def _type(value, s, node, ref) -> Check:
    kinds = [TYPES[t] for t in ([value] if isinstance(value, str) else value)]
    if len(kinds) == 1:
        return kinds[0]
    return lambda v: any(k(v) for k in kinds)


def _properties(value, s, node, ref) -> Check:
    props = {k: node(v) for k, v in value.items()}
    extra = s.get("additionalProperties", True)
    other = None if extra is True else node(extra) if extra is not False else False

    def check(v):
        if not isinstance(v, dict):
            return True
        for k, item in v.items():
            c = props.get(k)
            if c is not None:
                if not c(item):
                    return False
            elif other is False or (other is not None and not other(item)):
                return False
        return True

    return check


def _additional(value, s, node, ref) -> Check | None:
    if "properties" in s:
        return None  # checked with the properties
    return _properties({}, s, node, ref)


def _required(value, s, node, ref) -> Check:
    needed = frozenset(value)
    return lambda v: not isinstance(v, dict) or needed.issubset(v.keys())


def _items(value, s, node, ref) -> Check:
    item = node(value)

    def check(v):
        if isinstance(v, list):
            for x in v:
                if not item(x):
                    return False
        return True

    return check


def _enum(value, s, node, ref) -> Check:
    if all(isinstance(e, str) for e in value):
        names = frozenset(value)
        return lambda v: isinstance(v, str) and v in names
    return lambda v: any(_equal(v, e) for e in value)


def _const(value, s, node, ref) -> Check:
    return lambda v: _equal(v, value)


def _pattern(value, s, node, ref) -> Check:
    search = re.compile(value).search
    return lambda v: not isinstance(v, str) or search(v) is not None


def _minimum(value, s, node, ref) -> Check:
    return lambda v: not _is_number(v) or v >= value


def _one_of(value, s, node, ref) -> Check:
    options = [node(o) for o in value]
    return lambda v: sum(1 for o in options if o(v)) == 1


def _ref(value, s, node, ref) -> Check:
    return ref(value)


KEYWORDS_OF = {
    "type": _type,
    "properties": _properties,
    "additionalProperties": _additional,
    "required": _required,
    "items": _items,
    "enum": _enum,
    "const": _const,
    "pattern": _pattern,
    "minimum": _minimum,
    "oneOf": _one_of,
    "$ref": _ref,
}
KEYWORDS = set(KEYWORDS_OF)
