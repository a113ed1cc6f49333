"""Is the engine there before it is launched? One check per role of a cell, run by preflight.

A role's program (`llama-server`, `rpc-server`, `python3 -m sglang_router...`) must resolve and
run on the host once its `engine_setup` has run: otherwise the launch dies with `exec: ...: not
found` and the cell would read as a product failure. Each host of a cell is checked for every
role of the cell, since which host runs which role depends on the lease order.

`check_command` is the seam for container hosts: it builds the shell that runs on a host for one
role; a container host wraps the role's part (`RoleCheck.shell`) in `docker run IMAGE` instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from dayzero.spec.card import ModelCard
from dayzero.spec.inventory import Host
from dayzero.spec.matrix import Cell
from dayzero.spec.recipe import PLACEHOLDER, templates
from dayzero.spec.shell import exports, quote

NOT_FOUND = 127  # the shell's status for a command it cannot find (126: found, not executable)


@dataclass(frozen=True)
class RoleCheck:
    """One role's program, the python module it runs with `-m` (its top-level package), if any,
    and the role's environment as far as it is known before hosts are (no placeholder, no secret):
    a PYTHONPATH there decides whether the module is found."""

    role: str
    program: str
    module: str = ""
    env: tuple[tuple[str, str], ...] = ()

    @property
    def shell(self) -> str:
        """Shell that exits 0 when the program (and its module) can run, else says why on stderr."""
        p = quote(self.program)
        missing = quote(f"{self.program}: not found (or not executable) on the PATH")
        text = exports(dict(self.env)) + (
            f"command -v -- {p} >/dev/null 2>&1 || {{ echo {missing} >&2; exit {NOT_FOUND}; }}"
        )
        if self.module:
            find = f"import importlib.util,sys; sys.exit(importlib.util.find_spec({self.module!r}) is None)"
            text += (
                f"; {p} -c {quote(find)} >/dev/null 2>&1 || "
                f"{{ echo {quote(f'{self.program}: no module named {self.module}')} >&2; exit 1; }}"
            )
        return text

    @property
    def described(self) -> str:
        return f"role {self.role} runs `{self.program}" + (f" -m {self.module}`" if self.module else "`")


def _check(role: str, argv: Sequence[str], env: Sequence[tuple[str, str]]) -> RoleCheck | None:
    """The check of a role's argv; None when its program is only known once hosts are (a placeholder)."""
    if not argv or PLACEHOLDER.search(argv[0]):
        return None
    module = argv[2].split(".")[0] if len(argv) > 2 and argv[1] == "-m" else ""
    known = tuple((k, v) for k, v in env if not PLACEHOLDER.search(v))
    return RoleCheck(role, argv[0], "" if PLACEHOLDER.search(module) else module, known)


def role_checks(card: ModelCard, cell: Cell) -> tuple[RoleCheck, ...]:
    """Every role's program of the cell (rank 0's and, on a multi-node role, the worker ranks'),
    checked once per program, naming every role that runs it. Pure: from the card's templates,
    before any host is known."""
    roles: dict[RoleCheck, list[str]] = {}
    for t in templates(card, cell):
        for argv in (t.argv, t.worker_argv):
            if (check := _check("", argv, t.env)) is not None:
                named = roles.setdefault(check, [])
                named += [] if t.role in named else [t.role]
    return tuple(replace(check, role=", ".join(r)) for check, r in roles.items())


def check_command(host: Host, check: RoleCheck) -> str:
    """What preflight runs on `host` for one role: the host's `engine_setup`, then the role's
    check. (The seam for container hosts: run `check.shell` inside the image instead.)"""
    setup = f"{host.engine_setup}\n" if host.engine_setup else ""
    return f"{setup}{check.shell}"


def problems(results: Iterable[tuple[RoleCheck, bool, str]], host: str) -> list[str]:
    """The absent or unrunnable roles of one host, each naming host, role and command."""
    return [
        f"engine absent on {host}: {check.described}: {why or 'failed'} (after the host's engine_setup)"
        for check, ok, why in results
        if not ok
    ]
