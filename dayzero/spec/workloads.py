"""Workloads as data, and the protocol that makes their numbers stable.

A workload file (`suites/workloads/<name>.yaml`, schema `workload`) says what the requests look
like: random token ids of exact lengths, chat prompts shipped in the repo (prose or code), or
multi-turn agent sessions over a long shared prefix. A model card may refine one under its own
name (`workloads: {random-128-32: {from: random, isl: 128, osl: 32}}`). Building requests is
pure: the same workload, count and repetition give the same requests on every machine.

How many of them a measurement sends, and how often, is the card's protocol
(`dayzero.spec.card.Protocol`).
"""

from __future__ import annotations

import json
import math
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from dayzero.errors import ConfigError
from dayzero.spec import yamlfile
from dayzero.spec.card import ModelCard

WARMUP_OFFSET = 100_003  # warm-up prompts differ from measured ones, so no cache is pre-filled
REPETITION_STRIDE = 7_919  # each repetition draws new prompts: a prompt cache must not help rep 2
SALT_STRIDE = 1_000_003  # so do measurements at other concurrencies on the same server
DEFAULT_ISL = 128


def suites_dir(goldens_dir: Path | None = None, matrix_root: Path | None = None) -> Path:
    """Where workloads and evals live: $DAYZERO_SUITES, else next to the goldens or the matrix, else
    `suites/` of the working directory (the checkout a run is in; the package ships no suites)."""
    if os.environ.get("DAYZERO_SUITES"):
        return Path(os.environ["DAYZERO_SUITES"])
    for base in (
        goldens_dir and Path(goldens_dir).parent,
        matrix_root and Path(matrix_root).parent / "suites",
    ):
        if base and (base / "workloads").is_dir():
            return base
    return Path.cwd() / "suites"


def _jsonl(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        raise ConfigError(path, "", f"cannot read JSON lines: {exc}") from None


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str  # random | chat | agentic
    spec: dict[str, Any] = field(compare=False, repr=False)
    prompts: tuple[dict, ...] = field(default=(), compare=False, repr=False)
    prefix: str = field(default="", compare=False, repr=False)
    tasks: tuple[dict, ...] = field(default=(), compare=False, repr=False)

    @property
    def tag(self) -> str:
        return self.spec.get("tag", self.kind)

    @property
    def exact_output(self) -> bool:
        """Random workloads always ask for exact lengths; others when the workload says so."""
        return self.kind == "random" or bool(self.spec.get("exact_output"))

    @property
    def turns(self) -> int:
        return self.spec.get("turns", 1) if self.kind == "agentic" else 1

    def requests(self, n: int, repetition: int = 0, warmup: bool = False, salt: int = 0) -> list[dict]:
        """`n` requests (agentic: sessions totalling at least `n` turns) for one client run.

        `salt` tells measurements on one server apart (the concurrency): a server's prompt cache
        must not serve one measurement the prompts of another.
        """
        offset = repetition * REPETITION_STRIDE + salt * SALT_STRIDE + (WARMUP_OFFSET if warmup else 0)
        build = {"random": self._random, "chat": self._chat, "agentic": self._agentic}[self.kind]
        return build(n, offset, "w" if warmup else f"r{repetition}")

    def _extra(self) -> dict:
        extra = dict(self.spec.get("extra") or {})
        if self.exact_output:
            extra.setdefault("ignore_eos", True)
        return extra

    def _random(self, n: int, offset: int, label: str) -> list[dict]:
        rng = random.Random(self.spec.get("seed", 0) + offset)
        isl, osl = self.spec.get("isl", DEFAULT_ISL), self.spec.get("osl", 64)
        ratio = self.spec.get("range_ratio", 1.0)
        low, high = self.spec.get("vocab", (1000, 30000))
        # randrange(low, high) is low + _randbelow(high - low): the same draws without its argument
        # checks, which were half the submission checker's time (it rebuilds every phase's prompts)
        below, span = rng._randbelow, high - low
        if span <= 0:
            raise ConfigError(self.name, "vocab", f"expected [low, high) with low < high, got {low}, {high}")
        out = []
        for i in range(n):
            n_in = rng.randint(max(1, math.ceil(isl * ratio)), isl)
            n_out = rng.randint(max(1, math.ceil(osl * ratio)), osl)
            out.append(
                {
                    "id": f"{self.name}-{label}-{i}",
                    "kind": "completion",
                    "tag": self.tag,
                    "prompt": [low + below(span) for _ in range(n_in)],
                    "input_len": n_in,
                    "max_tokens": n_out,
                    "extra": self._extra(),
                }
            )
        return out

    def _chat(self, n: int, offset: int, label: str) -> list[dict]:
        if not self.prompts:
            raise ConfigError(self.name, "prompts", "workload has no prompts")
        out = []
        for i in range(n):
            p = self.prompts[(i + offset) % len(self.prompts)]
            out.append(
                {
                    "id": f"{self.name}-{label}-{i}-{p.get('id', '')}",
                    "kind": "chat",
                    "tag": p.get("tag", self.tag),
                    "prompt": p["prompt"],
                    "max_tokens": p.get("max_tokens", self.spec.get("max_tokens", 128)),
                    "extra": self._extra(),
                }
            )
        return out

    def _agentic(self, n: int, offset: int, label: str) -> list[dict]:
        if not self.tasks:
            raise ConfigError(self.name, "tasks", "workload has no tasks")
        turns = self.turns
        out = []
        for i in range(math.ceil(n / turns)):
            task = self.tasks[(i + offset) % len(self.tasks)]
            texts = (list(task["turns"]) * turns)[:turns]
            out.append(
                {
                    "id": f"{self.name}-{label}-s{i}-{task.get('id', '')}",
                    "kind": "chat",
                    "tag": self.tag,
                    "messages": [{"role": "system", "content": self.prefix}],
                    "turns": [{"content": t, "max_tokens": self.spec.get("max_tokens", 96)} for t in texts],
                    "max_tokens": self.spec.get("max_tokens", 96),
                    "extra": self._extra(),
                }
            )
        return out


def _validate(spec: dict, where: Path | str, path: str) -> None:
    errors = list(jsonschema.Draft202012Validator(yamlfile.schema("workload")).iter_errors(spec))
    if errors:
        err = jsonschema.exceptions.best_match(errors)
        raise ConfigError(where, ".".join([path, *map(str, err.absolute_path)]).strip("."), err.message)


def load_workload(directory: Path, name: str, overrides: Mapping | None = None) -> Workload:
    """Read `<directory>/<file>.yaml` (file = overrides' `from`, else the name) and refine it."""
    overrides = dict(overrides or {})
    stem = overrides.pop("from", None) or name
    path = Path(directory) / f"{stem}.yaml"
    base = yamlfile.load(path, "workload") if path.exists() else {}
    if not base and "kind" not in overrides:
        raise ConfigError(path, "", f"no workload {stem!r} in {directory}")
    spec = {**base, **overrides}
    _validate(spec, path, "")
    root = path.parent
    prompts: tuple[dict, ...] = ()
    tasks: tuple[dict, ...] = ()
    prefix = ""
    if spec["kind"] == "chat":
        if "prompts" not in spec:
            raise ConfigError(path, "prompts", "a chat workload needs a prompts file")
        prompts = tuple(_jsonl(root / spec["prompts"]))
    if spec["kind"] == "agentic":
        for key in ("prefix", "tasks"):
            if key not in spec:
                raise ConfigError(path, key, "an agentic workload needs a prefix and a tasks file")
        prefix = (root / spec["prefix"]).read_text()
        tasks = tuple(_jsonl(root / spec["tasks"]))
    return Workload(name, spec["kind"], spec, prompts, prefix, tasks)


def resolve(card: ModelCard, name: str, directory: Path, max_tokens: int = 64) -> Workload:
    """A card's workload by name. `default` (floors without one): random, 128 in, max_tokens out."""
    entries = card.workloads
    if name in entries:
        return load_workload(directory, name, entries[name])
    if name == "default":
        return load_workload(directory, name, {"from": "random", "isl": DEFAULT_ISL, "osl": max_tokens})
    return load_workload(directory, name)
