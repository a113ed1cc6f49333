"""Each role's program checked before launch (`dayzero.lab.presence`): pure checks from the card,
and their shell run on this machine."""

from __future__ import annotations

from dayzero.lab.presence import RoleCheck, check_command, problems, role_checks
from dayzero.lab.transport.local import LocalTransport
from dayzero.spec.inventory import Host
from dayzero.spec.matrix import load_matrix

from .conftest import REPO

HOST = Host(name="h1", hardware="cpu", transport="local", address="127.0.0.1")


def test_every_program_of_a_cell_once_naming_its_roles():
    m = load_matrix(REPO / "matrix")
    routed = m.cell("smollm2-135m/cpu+llama.cpp/routed/baseline")
    assert [(c.role, c.program, c.module) for c in role_checks(m.card(routed), routed)] == [
        ("worker1, worker2", "llama-server", ""),
        ("router", "python-router", "sglang_router"),
    ]
    split = m.cell("smollm2-135m/cpu+llama.cpp/rpc_split/baseline")
    assert [c.program for c in role_checks(m.card(split), split)] == ["llama-server", "rpc-server"]


def run(check: RoleCheck, host: Host = HOST):
    result = LocalTransport(host).run(check_command(host, check), timeout=30)
    return check, result.ok, result.stderr.strip()


def test_the_shell_of_a_check_finds_a_program_its_module_and_says_why_not():
    assert run(RoleCheck("server", "sh"))[1]
    assert run(RoleCheck("router", "python3", "json"))[1]
    absent = run(RoleCheck("server", "dz-no-such-engine"))
    assert not absent[1] and "dz-no-such-engine: not found" in absent[2]
    no_module = run(RoleCheck("router", "python3", "dz_no_such_module"))
    assert not no_module[1] and "no module named dz_no_such_module" in no_module[2]
    # the role's known env counts (a PYTHONPATH), and engine_setup runs first (a PATH)
    assert run(RoleCheck("router", "python3", "devlab", (("PYTHONPATH", str(REPO / "tools")),)))[1]
    setup = Host(
        name="h2",
        hardware="cpu",
        transport="local",
        address="127.0.0.1",
        engine_setup="export PATH=/nonexistent",
    )
    gone = run(RoleCheck("server", "sh"), setup)
    assert not gone[1]
    assert problems([gone], "h2") == [
        "engine absent on h2: role server runs `sh`: sh: not found (or not executable) on the PATH "
        "(after the host's engine_setup)"
    ]
