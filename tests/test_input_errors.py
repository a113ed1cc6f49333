"""Issue 28 item 5: input errors a lab can act on.

A misspelt `-m` marker is a usage error (rc 4, with the closest marker) whatever form `--hosts`
takes, before a dry run prints any plan; every error of an inventory is reported at once (file,
YAML path, line, "did you mean"); a host var a selected card needs and the inventory lacks is one
line naming the inventory and the field, rc 4, and `dayzero hosts check` flags it; `hosts check`
never prints Python's None; `dayzero --version`, and dayzero's version in pytest's header.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dayzero import __version__, cli
from dayzero.cli.hosts import facts_line
from dayzero.errors import ConfigError, ConfigErrors
from dayzero.lab.preflight import HostFacts
from dayzero.plugin.markers import selected, unknown_markers
from dayzero.run.host_vars import missing_vars
from dayzero.spec.inventory import Host, load_inventory
from dayzero.spec.matrix import load_matrix

from .conftest import REPO, run_pytest, write_yaml

KINDS = set(load_matrix(REPO / "matrix").hardware)


def lab_inventory(tmp_path, hosts: dict, **top) -> str:
    """An inventory outside the checkout, as a lab keeps one."""
    return str(write_yaml(tmp_path / "lab" / "inventory.yaml", {**top, "hosts": hosts}))


def local_copy(tmp_path) -> str:
    path = tmp_path / "lab" / "local.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text((REPO / "hosts" / "local.yaml").read_text())
    return str(path)


@pytest.mark.parametrize("form", ["space", "equals"])
@pytest.mark.parametrize("dry_run", [(), ("--dry-run",)], ids=["run", "dry-run"])
def test_a_misspelt_marker_is_a_usage_error_whatever_the_form_of_hosts(tmp_path, form, dry_run):
    """`-m b3000 --hosts PATH` exited 5 (the ini's --strict-markers lost with the space form: the
    typo read as an empty lab); with --dry-run the plan of every cell came before the error."""
    inventory = local_copy(tmp_path)
    hosts = ["--hosts", inventory] if form == "space" else [f"--hosts={inventory}"]
    # `b3000` alone: were the typo ignored, nothing would be selected (never an engine started)
    result = run_pytest("-m", "b3000", *hosts, *dry_run, f"--reports={tmp_path / 'out'}")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout[-2000:] + result.stderr[-2000:]
    assert "unknown marker 'b3000' (did you mean 'b300'?)" in result.stderr, result.stderr
    assert "== smollm2" not in result.stdout and "recipe " not in result.stdout, "no plan printed"
    assert "selected cells" not in result.stdout, "no tally of a run that selected nothing"


def test_unknown_markers_name_each_with_the_closest():
    registered = {"b300", "gb300", "cpu", "sglang"}
    assert unknown_markers("cpu and not sglang", registered) == []
    [line] = unknown_markers("b3000 or (cpu and not sglan)", registered)[:1]
    assert "unknown marker 'b3000' (did you mean 'b300'?)" in line
    assert len(unknown_markers("b3000 or (cpu and not sglan)", registered)) == 2
    assert "(did you mean" not in unknown_markers("zzz", registered)[0]
    assert "does not parse" in unknown_markers("cpu and", registered)[0]


def test_selected_evaluates_the_expression_on_the_cells_markers():
    matrix = load_matrix(REPO / "matrix")
    picked = selected("b300 and not dflash", matrix.cells)
    assert picked and all("b300" in c.markers and "dflash" not in c.markers for c in picked)
    assert len(selected(None, matrix.cells)) == len(matrix.cells)


FOUR_TYPOS = {
    "b300-01": {"address": "10.0.0.1", "hardwre": "b300"},
    "b300-02": {"address": "10.0.0.2", "hardwre": "b300"},
    "b300-03": {"address": "10.0.0.3", "hardwre": "b300"},
    "gb300-01": {"address": "10.0.0.4", "hardwre": "gb300"},
}


def test_every_misspelt_host_is_reported_at_once(tmp_path):
    """Four hosts with the same misspelt key gave one error, the last host's, and no hint."""
    path = lab_inventory(tmp_path, FOUR_TYPOS)
    with pytest.raises(ConfigErrors) as err:
        load_inventory(path, KINDS)
    lines = str(err.value).splitlines()
    assert len(lines) == 4 and len(err.value.errors) == 4, lines
    text = Path(path).read_text().splitlines()
    at = [n for n, line in enumerate(text, start=1) if "hardwre:" in line]
    for line, name, number in zip(lines, FOUR_TYPOS, at, strict=True):
        assert line == (
            f"{path}: hosts.{name}: unknown field 'hardwre' (did you mean 'hardware'?) (line {number})"
        )

    result = run_pytest("-m", "cpu", "--hosts", path, "--dry-run")  # the plugin shows all four
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout[-2000:]
    assert (
        sum("unknown field 'hardwre' (did you mean 'hardware'?)" in x for x in result.stderr.splitlines())
        == 4
    )


def test_every_unknown_hardware_kind_is_reported_with_the_closest(tmp_path, capsys):
    hosts = {
        f"h{i}": {"address": f"10.0.0.{i}", "hardware": kind} for i, kind in enumerate(["b3000", "gb3000"])
    }
    path = lab_inventory(tmp_path, hosts)
    assert cli.main(["hosts", "check", "--hosts", path]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith(f"dayzero: {path}: hosts.h") for line in err), err
    assert "unknown hardware 'b3000' (did you mean 'b300'?)" in err[0]
    assert "unknown hardware 'gb3000' (did you mean 'gb300'?)" in err[1]
    text = Path(path).read_text().splitlines()
    for line, kind in zip(err, ["b3000", "gb3000"], strict=True):  # issue 45: with its line
        assert line.endswith(f"(line {text.index(f'    hardware: {kind}') + 1})"), (line, text)


def test_one_error_reads_as_before(tmp_path):
    path = tmp_path / "one.yaml"
    path.write_text("hosts:\n  a: {address: x, hardware: cpu, port: '22'}\n")
    with pytest.raises(ConfigError) as err:
        load_inventory(path, KINDS)
    assert not isinstance(err.value, ConfigErrors)
    assert str(err.value) == f"{path}: hosts.a.port: expected integer, got '22' (line 2)"


NO_MODEL_ROOT = {
    "b300-01": {"address": "127.0.0.1", "port": 1, "hardware": "b300", "accelerators": 8},
    "b300-02": {"address": "127.0.0.1", "port": 1, "hardware": "b300", "accelerators": 8},
}


def test_a_var_the_cards_need_and_the_inventory_lacks_is_one_line_rc_4(tmp_path):
    """It was INTERNALERROR (rc 3) and ~60 lines of traceback blaming the Kimi card."""
    path = lab_inventory(tmp_path, NO_MODEL_ROOT)
    result = run_pytest("-m", "b300", "--hosts", path, "--dry-run")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout[-3000:]
    assert "INTERNALERROR" not in result.stdout + result.stderr and "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert errors == [
        f"ERROR: dayzero: {path}: vars.model_root: missing for b300 host(s) b300-01, b300-02; "
        "kimi-k3.1-pro.yaml uses {model_root} in weights: set it under defaults.vars or each host's vars"
    ], result.stderr
    assert "== kimi" not in result.stdout, "no plan printed"


def test_a_misspelt_jump_stops_the_run_naming_its_field_not_dialled_as_an_alias(tmp_path):
    """Issue 45: `jump: bastoin` was taken as an ssh alias and dialled as the controller's user."""
    hosts = {
        "bastion": {"address": "127.0.0.1", "port": 1, "hardware": "cpu", "slots": 0},
        "b300-01": {"address": "127.0.0.1", "port": 1, "hardware": "b300", "jump": "bastoin"},
    }
    (tmp_path / "ssh_config").write_text("Host gateway\n  HostName 127.0.0.1\n")
    path = lab_inventory(tmp_path, hosts, ssh_config=str(tmp_path / "ssh_config"))
    result = run_pytest("-m", "b300", "--hosts", path, "--dry-run")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout[-3000:] + result.stderr[-3000:]
    assert (
        f"ERROR: dayzero: {path}: hosts.b300-01.jump: 'bastoin' is neither a host of this inventory "
        f"nor a Host of ssh config {tmp_path / 'ssh_config'} (did you mean 'bastion'?)"
    ) in result.stderr, result.stderr
    assert "== kimi" not in result.stdout, "no plan printed"


def test_a_selection_that_needs_no_missing_var_runs(tmp_path):
    """Only the selected cells count: a cpu run is not stopped by b300 hosts without the var."""
    inventory = (REPO / "hosts" / "local.yaml").read_text()
    path = tmp_path / "lab.yaml"
    path.write_text(
        inventory
        + "".join(f"  {n}: {{address: 127.0.0.1, port: 1, hardware: b300}}\n" for n in NO_MODEL_ROOT)
    )
    result = run_pytest("-m", "cpu and not sglang and low_latency", "--hosts", str(path), "--dry-run", "-q")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


def test_missing_vars_of_a_slurm_cluster_name_its_field(tmp_path):
    path = write_yaml(
        tmp_path / "s.yaml", {"slurm": {"partition": "p", "hardware": {"b300": {"gres": "gpu:b300:8"}}}}
    )
    matrix = load_matrix(REPO / "matrix")
    [missing] = missing_vars(matrix, load_inventory(path, KINDS), matrix.cells)
    assert missing.field == "slurm.vars.model_root" and "set it under slurm.vars" in missing.line()
    assert not missing_vars(
        matrix, load_inventory(REPO / "hosts" / "slurm.example.yaml", KINDS), matrix.cells
    )
    assert not missing_vars(matrix, load_inventory(REPO / "hosts" / "lab.example.yaml", KINDS), matrix.cells)


def test_hosts_check_flags_the_missing_var_and_never_prints_none(tmp_path, capsys):
    """An unreachable host printed `None seen`, `memory None/None GB`; the missing var went unsaid."""
    hosts = {
        "dead": {"address": "127.0.0.1", "port": 1, "hardware": "b300", "vars": {"model_root": "/m"}},
        "here": {"transport": "local", "hardware": "cpu", "workdir": str(tmp_path / "work")},
    }
    path = lab_inventory(tmp_path, hosts, known_hosts=str(tmp_path / "known_hosts"))
    assert cli.main(["hosts", "check", "--hosts", path]) == 1
    out = capsys.readouterr()
    text = out.out + out.err
    assert "None" not in text, text
    lines = out.out.splitlines()
    assert lines[0].startswith("dead             UNREACHABLE  "), lines
    here = lines.index(next(line for line in lines if line.startswith("here ")))
    assert lines[here].split()[1] == "UNFIT", lines
    assert any(
        "problem: vars.model_root missing: smollm2-135m.yaml uses {model_root} in weights" in line
        for line in lines[here:]
    ), lines


def test_facts_a_host_did_not_give_are_unknown():
    host = Host(name="h", hardware="b300", accelerators=8)
    line = facts_line(host, HostFacts("h", True))
    assert "None" not in line and line.count("unknown") == 5, line
    full = HostFacts(
        "h", True, accelerators_seen=8, memory_total_gb=10.0, memory_free_gb=9.5, disk_free_gb=3.0, cpus=4
    )
    assert (
        facts_line(host, full)
        == "b300: 8 seen (inventory 8), memory 9.5/10.0 GB free, disk 3.0 GB free, cpus 4"
    )


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"dayzero {__version__}\n"
    header = run_pytest("--collect-only", "-m", "cpu", "--hosts", "hosts/local.yaml")
    assert header.returncode == 0, header.stdout[-2000:]
    expected = f"dayzero: {__version__}, inventory {REPO}/hosts/local.yaml, matrix {REPO}/matrix"
    assert expected in header.stdout.splitlines()[:6], header.stdout[:2000]
