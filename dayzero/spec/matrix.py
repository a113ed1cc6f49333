"""The matrix as data: hardware catalogue + model cards, expanded into cells.

Everything here is pure after loading: the same files give the same cells in the same order.
Unknown references and duplicate cells are `ConfigError`s raised before any test runs.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from dayzero import devices
from dayzero.devices import DeviceTool
from dayzero.errors import ConfigError, raise_all
from dayzero.spec import card as model_card
from dayzero.spec import floorfiles, references, yamlfile
from dayzero.spec import sweeps as sweep_spec
from dayzero.spec.card import ModelCard, as_names, matches
from dayzero.spec.cell import Cell
from dayzero.spec.workloads import suites_dir

HARDWARE_FILE = "hardware.yaml"
MODELS_DIR = "models"


@dataclass(frozen=True)
class Peak:
    """What one accelerator of a kind can do at most, as published: the roofline's figures
    (`dayzero.checks.roofline`), and the margin a claim may exceed them by before it is called
    implausible. A kind without a bandwidth figure whose accelerator is the host's own CPU
    (device tool `nproc`) has its bandwidth measured on every host by preflight."""

    margin: float
    source: str
    memory_bandwidth_gbs: float | None = None
    compute_tflops: Mapping[str, float] = field(default_factory=dict)  # by dtype: fp4, fp8, bf16


@dataclass(frozen=True)
class Hardware:
    name: str
    vendor: str
    memory_gb: float | None
    accelerators_per_node: int | None
    device_query: str
    display_name: str = ""
    notes: str = ""
    price: dict | None = None  # per_accelerator_hour, currency, source: the benchmark card's cost
    peak: Peak | None = None  # None: no public figure; the roofline is then not checked
    capacity_mib: float | None = None  # what the device reports (nvidia-smi memory.total): fit's capacity
    working_set: float | None = None  # the share of memory its GPU may map (a Mac's unified memory)
    memory_source: str = ""  # where capacity_mib and working_set were read

    @property
    def device(self) -> DeviceTool:
        """The device tool its hosts are asked with (`dayzero.devices`, checked at load)."""
        return devices.get(self.device_query)

    @property
    def measured(self) -> bool:
        """Its bandwidth is the host's own, measured by preflight (no published figure)."""
        return self.device.cpu and not (self.peak and self.peak.memory_bandwidth_gbs)


@dataclass(frozen=True)
class Matrix:
    root: Path
    hardware: dict[str, Hardware]
    cards: dict[str, ModelCard]  # by model: each card as its file's top level declares it
    cells: tuple[Cell, ...]
    # by (model, engine): every engine a card serves, its top level's included
    engine_cards: dict[tuple[str, str], ModelCard] = field(default_factory=dict)

    def cell(self, cell_id: str) -> Cell:
        for c in self.cells:
            if c.id == cell_id:
                return c
        raise KeyError(cell_id)

    def card(self, cell: Cell) -> ModelCard:
        """The card (engine variant included) a cell's recipe, floors and checks come from."""
        if cell.engine:
            return self.engine_cards[(cell.model, cell.engine)]
        return self.cards[cell.model]

    def renamed(self, cell_id: str, engine: str) -> Cell | None:
        """The cell an id of an older matrix is now, where only the engine axis changed: a kind
        that gained a second engine (`cpu` -> `cpu+llama.cpp`) or lost it, for evidence of
        `engine`; None where no cell of that model, kind, mode and strategy is served by it."""
        parts = cell_id.split("/")
        if len(parts) != 4:
            return None
        model, kind, mode, strategy = parts
        hardware = kind.split("+", 1)[0]
        for c in self.cells:
            same = (c.model, c.hardware, c.mode, "+".join((c.strategy, *c.options))) == (
                model,
                hardware,
                mode,
                strategy,
            )
            if same and c.id != cell_id and self.card(c).engine.name == engine:
                return c
        return None

    @property
    def marker_names(self) -> dict[str, str]:
        """Every name usable with `-m`, with a description, whether or not a host can run it."""
        names: dict[str, str] = {}
        for hw in self.hardware.values():
            names[hw.name] = f"hardware {hw.display_name or hw.name} ({hw.vendor})"
        for (model, engine), card in self.engine_cards.items() or (
            ((c.model, ""), c) for c in self.cards.values()
        ):
            names[model] = f"model {card.display_name}"
            if len(self.engines(model)) > 1:
                names.setdefault(engine, f"engine {engine}")
            for kind, kind_names in (
                ("mode", card.modes),
                ("strategy", card.strategies),
                ("option", card.options),
            ):
                for name in kind_names:
                    names.setdefault(name, f"{kind} {name}")
        return names

    def engines(self, model: str) -> list[str]:
        """The engines a model's card serves, its top level's first."""
        return [engine for m, engine in self.engine_cards if m == model]

    def digest(self, cells: Iterable[Cell]) -> str:
        """Hash of the model cards and hardware entries the cells come from, as written (floors,
        probes, golden policies included: a card changed since a run is a different rulebook)."""
        cells = list(cells)
        payload = {
            "hardware": {c.hardware: self.hardware[c.hardware].__dict__ for c in cells},
            "cards": {c.model: self.card(c).raw for c in cells},
        }
        calibrated = {
            c.id: self.card(c).calibrations[c.id] for c in cells if c.id in self.card(c).calibrations
        }
        if calibrated:  # its floors files: a cell's bounds (absent, the digest reads as before they were)
            payload["calibrated"] = calibrated
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def load_hardware(path: Path) -> dict[str, Hardware]:
    """The catalogue; a `device_query` no installed device tool answers to is an error here."""
    data = yamlfile.load(path, "hardware")
    out = {}
    for name, fields in data["hardware"].items():
        tool = fields["device_query"]
        if tool not in devices.registered():
            line = yamlfile.line_of(path, ["hardware", name, "device_query"])
            raise ConfigError(
                path,
                f"hardware.{name}.device_query",
                f"unknown device tool {tool!r}{devices.closest(tool)}; expected one of "
                f"{sorted(devices.registered())} (a device tool is added by a dayzero.devices entry point)"
                + (f" (line {line})" if line else ""),
            )
        peak = fields.pop("peak", None)
        out[name] = Hardware(name=name, **fields, peak=Peak(**peak) if peak else None)
    return out


def _check_refs(path: Path, where: list, names, known, what: str) -> None:
    for i, name in enumerate(names):
        if name not in known:
            parts = [*where, i] if not isinstance(names, dict) else [*where, name]
            line = yamlfile.line_of(path, parts)
            raise ConfigError(
                path,
                yamlfile.format_path(parts),
                f"unknown {what} {name!r}; expected one of {sorted(known)}"
                + (f" (line {line})" if line else ""),
            )


def _validate_card(path: Path, data: dict, hardware: dict[str, Hardware]) -> None:
    modes, strategies, options = data["modes"], data["strategies"], data.get("options") or {}
    _check_refs(path, ["hardware"], data["hardware"], hardware, "hardware")
    for i, entry in enumerate(data["cells"]):
        _check_refs(path, ["cells", i, "hardware"], entry["hardware"], data["hardware"], "hardware")
        _check_refs(path, ["cells", i, "modes"], entry["modes"], modes, "mode")
        _check_refs(path, ["cells", i, "strategies"], entry["strategies"], strategies, "strategy")
        for j, combo in enumerate(entry.get("options", [])):
            _check_refs(path, ["cells", i, "options", j], combo, options, "option")
    for mode_name, mode in modes.items():
        roles = mode.get("roles") or {}
        for role_name, role in roles.items():
            target = role.get("colocate")
            if target and target not in roles:
                _check_refs(
                    path, ["modes", mode_name, "roles", role_name, "colocate"], [target], roles, "role"
                )
    for kind, layers in (("strategies", strategies), ("options", options)):
        for name, layer in layers.items():
            known_roles = {"server"} | {r for m in modes.values() for r in (m.get("roles") or {})}
            _check_refs(path, [kind, name, "roles"], layer.get("roles", []), known_roles, "role")
    for i, rule in enumerate(data.get("unsupported", [])):
        for key, known in (
            ("hardware", data["hardware"]),
            ("mode", modes),
            ("strategy", strategies),
            ("option", options),
        ):
            if key in rule["when"]:
                _check_refs(path, ["unsupported", i, "when", key], as_names(rule["when"][key]), known, key)


def parallel_size(sizes: Mapping | None) -> int | None:
    """Accelerators a mode's `parallel` sizes use (tp x dp x pp; EP splits within them), or None."""
    return sizes.get("tp", 1) * sizes.get("dp", 1) * sizes.get("pp", 1) if sizes else None


def _nodes(data: dict, kind: str, mode: str, hw: Hardware) -> int:
    """The card's nodes of a kind, or as many as the mode's `parallel` sizes need."""
    used = parallel_size(data["modes"][mode].get("parallel"))
    if not used or not hw.accelerators_per_node:
        return data["hardware"][kind].get("nodes", 1)
    return -(-used // hw.accelerators_per_node)


def expand_card(
    path: Path, data: dict, hardware: dict[str, Hardware], engine_axis: frozenset[str] = frozenset()
) -> list[Cell]:
    """The cells a card declares, in file order, with published statuses and unsupported reasons.
    On the kinds of `engine_axis` (served by several of the card's engines) cells carry the engine."""
    _validate_card(path, data, hardware)
    model = data["model"]
    cells: dict[str, tuple[Cell, int]] = {}
    for i, entry in enumerate(data["cells"]):
        combos = [tuple(c) for c in entry.get("options", [[]])] or [()]
        for hw, mode, strategy, opts in itertools.product(
            entry["hardware"], entry["modes"], entry["strategies"], combos
        ):
            nodes = _nodes(data, hw, mode, hardware[hw])
            engine = data["engine"]["name"] if hw in engine_axis else ""
            cell = Cell(model, hw, mode, strategy, opts, nodes=nodes, engine=engine)
            if cell.id in cells:
                raise ConfigError(
                    path,
                    f"cells[{i}]",
                    f"duplicate cell {cell.id!r}: cells[{cells[cell.id][1]}] already declares it",
                )
            cells[cell.id] = (cell, i)
    published = data.get("published", {})
    for cell_id in published:
        if cell_id not in cells:
            raise ConfigError(path, f"published.{cell_id}", "no such cell in this card's cells")
    reference = (data.get("goldens") or {}).get("reference")
    if reference is not None and reference not in cells:
        raise ConfigError(path, "goldens.reference", f"no such cell in this card's cells: {reference!r}")
    out = []
    for cell, _ in cells.values():
        reason = next((r["reason"] for r in data.get("unsupported", []) if matches(r["when"], cell)), "")
        status = "unsupported" if reason else published.get(cell.id, "pending")
        out.append(Cell(**{**cell.__dict__, "published": status, "reason": reason}))
    return out


ENGINES = "engines"
# What an entry of `engines:` may replace: everything that says how the model is served; the
# model's own data (probes, workloads, protocol, accuracy, goldens' reference) stays shared.
ENGINE_KEYS = (
    "engine",
    "weights",
    "model_files",
    "ready_deadline",
    "vars",
    "recipe",
    "hardware",
    "modes",
    "strategies",
    "options",
    "cells",
    "unsupported",
    "published",
    "floors",
    "speculative",
    "accuracy",
    "goldens",
    "mamba_ratio",
    "tool_calls",
    "roofline",
)


def engine_variants(path: Path, data: dict) -> dict[str, dict]:
    """A card's data per engine: the top level as written, then each `engines:` entry laid over
    it (each key it names replaces the top level's). Keyed by `engine.name`."""
    base = {k: v for k, v in data.items() if k != ENGINES}
    variants = {base["engine"]["name"]: base}
    for name, overlay in (data.get(ENGINES) or {}).items():
        if overlay["engine"]["name"] != name:
            raise ConfigError(
                path,
                f"{ENGINES}.{name}.engine.name",
                f"expected {name!r} (the entry's key), got {overlay['engine']['name']!r}",
            )
        if name in variants:
            raise ConfigError(
                path, f"{ENGINES}.{name}", f"engine {name!r} is already the card's top-level engine"
            )
        variants[name] = {**base, **overlay}
    return variants


def _kinds(data: dict) -> set[str]:
    return {hw for entry in data["cells"] for hw in entry["hardware"]}


def _expand_variant(path: Path, name: str, data: dict, top: bool, hardware, axis) -> list[Cell]:
    """A variant's cells; an error in what an `engines:` entry replaced names that entry."""
    try:
        return expand_card(path, data, hardware, axis)
    except ConfigError as e:
        if top or e.path.split(".")[0].split("[")[0] not in ENGINE_KEYS:
            raise
        # the line is the entry's own, not the top level's that the message was written with
        parts = [int(p[1:-1]) if p.startswith("[") else p for p in re.findall(r"\[\d+\]|[^.\[\]]+", e.path)]
        line = yamlfile.line_of(path, [ENGINES, name, *parts])
        message = re.sub(r" \(line \d+\)$", "", e.message) + (f" (line {line})" if line else "")
        raise ConfigError(path, f"{ENGINES}.{name}.{e.path}", message) from None


def load_matrix(root: Path) -> Matrix:
    root = Path(root)
    if not (root / HARDWARE_FILE).exists():
        raise ConfigError(root, "", f"no {HARDWARE_FILE} (the hardware catalogue) in the matrix directory")
    hardware = load_hardware(root / HARDWARE_FILE)
    workload_files = references.suite_workloads(suites_dir(matrix_root=root))
    cards: dict[str, ModelCard] = {}
    engine_cards: dict[tuple[str, str], ModelCard] = {}
    cells: list[Cell] = []
    for path in sorted((root / MODELS_DIR).glob("*.yaml")):
        data = yamlfile.load(path, "model_card")
        if data["model"] in cards:
            raise ConfigError(
                path, "model", f"model {data['model']!r} is also declared in {cards[data['model']].path}"
            )
        variants = engine_variants(path, data)
        kinds = [kind for variant in variants.values() for kind in _kinds(variant)]
        axis = frozenset(kind for kind in kinds if kinds.count(kind) > 1)
        errors: list[ConfigError] = []
        for i, (name, variant) in enumerate(variants.items()):
            mine = _expand_variant(path, name, variant, i == 0, hardware, axis)
            cells.extend(mine)
            card = engine_cards[(data["model"], name)] = model_card.parse(path, variant)
            sweep_spec.parse(card)  # a bad sweep is a load error
            overlay = (data.get(ENGINES) or {}).get(name) if i else None
            errors += references.workload_errors(path, variant, workload_files, overlay, [ENGINES, name])
            errors += references.placeholder_errors(path, variant, overlay, [ENGINES, name])
        raise_all(list({str(e): e for e in errors}.values()))  # every reference at once, each once
        cards[data["model"]] = engine_cards[(data["model"], next(iter(variants)))]
    if not cards:
        raise ConfigError(root / MODELS_DIR, "", "no model cards (*.yaml) found")
    return _with_floors_files(Matrix(root, hardware, cards, tuple(cells), engine_cards))


def _with_floors_files(m: Matrix) -> Matrix:
    """The matrix with each cell's floors files' bounds on its cards (`spec.floorfiles`), read
    against the floors the cards give each cell: a file naming another cell or check fails here."""
    floors = {c.id: {f.name: f.direction for f in model_card.floors_for(m.card(c), c)} for c in m.cells}
    found = floorfiles.load(m.root, floors)
    if not found:
        return m
    engine_cards = {
        (model, engine): replace(
            card, calibrations={cell: b for cell, b in found.items() if cell.split("/")[0] == model}
        )
        for (model, engine), card in m.engine_cards.items()
    }
    cards = {model: engine_cards[(model, m.engines(model)[0])] for model in m.cards}
    return replace(m, cards=cards, engine_cards=engine_cards)
