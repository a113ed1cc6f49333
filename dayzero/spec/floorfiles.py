"""Floors files: each cell's calibrated bounds, per CPU kind, as `dayzero floors calibrate` wrote
them (`matrix/floors/<model>/<cell id, / as __>.<cpu kind>.yaml`).

A card rule covers several cells, and each cell measures differently: a bound calibrated on one
holds for that cell alone. The matrix loader reads every file here and attaches its bounds to its
cell's floors by check name (`Floor.calibrated`, through `ModelCard.calibrations`), so the run
and the submission checker (which loads the lab's matrix the same way) judge by the same bound.
A file naming a cell, a check or a side the matrix does not have is a load error naming the file
and the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from dayzero.errors import ConfigError, raise_all
from dayzero.spec import yamlfile

FLOORS_DIR = "floors"
SCHEMA = "floors_file"
# How a calibrated bound sits against the clean runs' intervals, stated in every file written.
RULE = (
    "min: fraction x the slowest clean run's interval lower bound; max: the slowest clean run's "
    "interval upper bound / fraction; slowdown_margin: how far the fastest clean run slowed "
    "`slowdown` times sits past the bound (under 1: such a slowdown would pass it)"
)

Bounds = dict[str, tuple[tuple[str, float], ...]]  # check name -> ((cpu kind, bound), ...)


def file_name(cell_id: str, cpu_kind: str) -> str:
    return f"{cell_id.replace('/', '__')}.{cpu_kind}.yaml"


def path_of(matrix_root: Path, cell_id: str, cpu_kind: str) -> Path:
    """Where `dayzero floors calibrate` writes a cell's floors for a CPU kind, and the loader reads them."""
    return Path(matrix_root) / FLOORS_DIR / cell_id.split("/")[0] / file_name(cell_id, cpu_kind)


def _error(path: Path, parts: list, message: str) -> ConfigError:
    line = yamlfile.line_of(path, parts)
    return ConfigError(path, yamlfile.format_path(parts), message + (f" (line {line})" if line else ""))


def parse(path: Path, data: Mapping, floors: Mapping[str, Mapping[str, str]]) -> tuple[str, Bounds]:
    """The cell and its bounds from one file's data (schema-valid); `floors` is the matrix's
    cells' floors, cell id -> {check name: direction}."""
    cell = data["cell"]
    if cell not in floors:
        raise _error(path, ["cell"], f"no such cell in the matrix: {cell!r}")
    prefix = file_name(cell, "")[: -len(".yaml")]
    kind = path.name[len(prefix) : -len(".yaml")] if path.name.startswith(prefix) else ""
    if path.parent.name != cell.split("/")[0] or not kind or "." in kind or kind in ("unknown", "mixed"):
        raise _error(
            path,
            ["cell"],
            f"the file's name says another cell or no CPU kind; expected "
            f"{FLOORS_DIR}/{cell.split('/')[0]}/{file_name(cell, '<cpu kind>')}",
        )
    said = (data.get("provenance") or {}).get("cpu_kinds")
    if said is not None and list(said) != [kind]:
        raise _error(path, ["provenance", "cpu_kinds"], f"expected [{kind}] (the file's name), got {said}")
    errors: list[ConfigError] = []
    out: dict[str, tuple[tuple[str, float], ...]] = {}
    known = floors[cell]
    for i, floor in enumerate(data["floors"]):
        name, direction = floor["check"], "max" if "max" in floor else "min"
        bound = float(floor[direction])
        field, why = ("check", "") if name in known else ("check", f"no floor {name!r} in {cell}")
        if not why and name in out:
            why = f"{name} is calibrated twice in this file"
        elif not why and known[name] != direction:
            field, why = direction, f"{name} is a {known[name]} floor in the card; expected `{known[name]}:`"
        elif not why:
            field, why = direction, wrong_side(direction, bound, floor.get("interval_sides") or ())
        if why:
            hint = f"; expected one of {sorted(known)}" if why.startswith("no floor") else ""
            errors.append(_error(path, ["floors", i, field], why + hint))
        else:
            out[name] = ((kind, bound),)
    raise_all(errors)
    return cell, out


def wrong_side(direction: str, bound: float, sides) -> str:
    """Why a calibrated bound would fail a clean run it was calibrated on ('' where it would not):
    a floor above the worst lower interval bound, a ceiling below the worst upper one."""
    if not sides:
        return ""
    if direction == "min" and bound > min(sides):
        return f"{bound:g} is above a clean run's lower bound {min(sides):g}; expected at most that ({RULE})"
    if direction == "max" and bound < max(sides):
        return f"{bound:g} is below a clean run's upper bound {max(sides):g}; expected at least that ({RULE})"
    return ""


def load(matrix_root: Path, floors: Mapping[str, Mapping[str, str]]) -> dict[str, Bounds]:
    """Every floors file under the matrix, by cell id: check name -> its (cpu kind, bound) pairs."""
    out: dict[str, dict[str, tuple[tuple[str, float], ...]]] = {}
    errors: list[ConfigError] = []
    for path in sorted((Path(matrix_root) / FLOORS_DIR).glob("*/*.yaml")):
        try:
            cell, bounds = parse(path, yamlfile.load(path, SCHEMA), floors)
        except ConfigError as e:
            errors += getattr(e, "errors", None) or [e]
            continue
        mine = out.setdefault(cell, {})
        for check, pairs in bounds.items():
            mine[check] = tuple(sorted((*mine.get(check, ()), *pairs)))
    raise_all(errors)
    return out
