"""Secrets: marked in the model card, resolved on the controller, and found in no report file."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dayzero.errors import ConfigError
from dayzero.redact import MASK, redact, redact_env
from dayzero.spec.inventory import Host
from dayzero.spec.matrix import load_matrix
from dayzero.spec.recipe import digest, render

from .conftest import REPO, run_pytest
from .stub_cells import stub_card, stub_inventory, stub_matrix

CELL = "smollm2-135m/cpu+llama.cpp/low_latency/baseline"


def with_secret_env(matrix_dir: Path, name: str = "HUB_AUTH", var: str = "DZ_TEST_HUB_AUTH") -> None:
    path = matrix_dir / "models" / "smollm2-135m.yaml"
    card = yaml.safe_load(path.read_text())
    card["recipe"]["env"] = {name: {"secret_from_env": var}, "PLAIN": "visible"}
    path.write_text(yaml.safe_dump(card, sort_keys=False))


HOST = Host(name="h", hardware="cpu", transport="local", address="127.0.0.1", vars=(("model_root", "/m"),))


def test_a_marked_secret_is_resolved_at_render_time_and_kept_out_of_the_digest(matrix_dir, monkeypatch):
    with_secret_env(matrix_dir)
    matrix = load_matrix(matrix_dir)
    cell = matrix.cell(CELL)
    monkeypatch.setenv("DZ_TEST_HUB_AUTH", "first-value-123")
    first = render(matrix, cell, [HOST])
    assert dict(first.launches[0].env)["HUB_AUTH"] == "first-value-123"
    monkeypatch.setenv("DZ_TEST_HUB_AUTH", "other-value-456")
    second = render(matrix, cell, [HOST])
    assert first.digest == second.digest == digest(matrix.card(cell), cell)
    # once resolved, the value is masked wherever it shows up, whatever the variable is called
    assert "other-value-456" not in redact(
        f"server says HUB_AUTH is other-value-456 ({second.launches[0].shell})"
    )
    assert redact_env(second.launches[0].env) == {"HUB_AUTH": MASK, "PLAIN": "visible"}


def test_an_unset_secret_stops_the_cell_naming_the_variable(matrix_dir, monkeypatch):
    with_secret_env(matrix_dir, var="DZ_TEST_UNSET_SECRET")
    monkeypatch.delenv("DZ_TEST_UNSET_SECRET", raising=False)
    matrix = load_matrix(matrix_dir)
    with pytest.raises(ConfigError, match="secret DZ_TEST_UNSET_SECRET is not set"):
        render(matrix, matrix.cell(CELL), [HOST])


def test_secret_values_in_setup_lines_are_masked_on_their_own():
    setup = "export LAB_TOKEN=tok-abc-123; export PATH=/opt/x:$PATH"
    assert redact("echo tok-abc-123", [setup]) == f"echo {MASK}"
    assert redact("LAB_TOKEN='tok-abc-123'", []) == f"LAB_TOKEN={MASK}"
    assert redact("plain /opt/x text", [setup]) == "plain /opt/x text"


def encodings(secret: str) -> list[bytes]:
    """The value as bytes and as it would look inside base64 at each of the 3 alignments."""
    raw = secret.encode()
    out = [raw]
    for shift in range(3):
        enc = base64.b64encode(b"\0" * shift + raw)[4 if shift else 0 :]
        out.append(enc[: len(enc) - 4])
    return out


def files_containing(root: Path, secrets: list[str]) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            for secret in secrets:
                if any(e and e in data for e in encodings(secret)):
                    hits.append(f"{path.relative_to(root)}: {secret}")
    return hits


def test_planted_secrets_appear_in_no_file_under_reports(tmp_path):
    """A recipe env secret and a set-up line secret, through a server that prints its environment."""
    recipe_secret = "rcp-planted-7Hq2Zx91"
    setup_secret = "stp-planted-Kd83Lm20"
    card = stub_card(env={"HUB_AUTH": {"secret_from_env": "DZ_TEST_RECIPE_SECRET"}}, echo_env=True)
    mdir = stub_matrix(tmp_path, card)
    inv = stub_inventory(
        tmp_path,
        setup=f"export LAB_TOKEN={setup_secret}; export DZ_SETUP_SEEN=$LAB_TOKEN",
        slots=1,
    )
    reports = tmp_path / "reports"
    env = {"DZ_TEST_RECIPE_SECRET": recipe_secret}
    result = run_pytest(
        "-q",
        "-rA",
        "-m",
        "low_latency",
        f"--matrix={mdir}",
        f"--hosts={inv}",
        f"--reports={reports}",
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    built = subprocess.run(
        [sys.executable, "-m", "dayzero.cli", f"--matrix={mdir}", "report", f"--reports={reports}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env},
    )
    assert built.returncode == 0, built.stdout + built.stderr
    # the server really saw both values (its log shows them masked) ...
    logs = list(reports.glob("runs/*/*/logs/*.log"))
    assert logs
    log = logs[0].read_text()
    assert f"HUB_AUTH={MASK}" in log and f"setup: {MASK}" in log
    # ... and no file under reports/ holds either, plain or base64-encoded (the single-file report)
    assert (reports / "allure-report" / "index.html").stat().st_size > 0
    assert (reports / "acceptance.html").exists()
    assert files_containing(reports, [recipe_secret, setup_secret]) == []
    assert recipe_secret not in result.stdout + result.stderr


@pytest.mark.parametrize("prefix", [b"", b"x", b"xy", b"xyz"])
def test_the_grep_finds_a_secret_even_base64_encoded(tmp_path, prefix):
    (tmp_path / "a.html").write_bytes(
        b"<script>" + base64.b64encode(prefix + b"the-secret-99 and more") + b"</script>"
    )
    assert files_containing(tmp_path, ["the-secret-99"]) == ["a.html: the-secret-99"]
    assert files_containing(tmp_path, ["not-there-77"]) == []


def test_a_whole_document_is_masked_string_by_string():
    from dayzero.redact import redact_tree

    doc = {"error": "ssh: export LAB_TOKEN=tok-abc-123 failed", "n": 3, "xs": ["tok-abc-123", None]}
    assert redact_tree(doc, ["export LAB_TOKEN=tok-abc-123"]) == {
        "error": f"ssh: {MASK} failed",
        "n": 3,
        "xs": [MASK, None],
    }


def test_dayzero_recipe_prints_a_secret_env_masked(matrix_dir):
    """`dayzero recipe` shows the recipe as `--dry-run` does: the resolved secret never in clear."""
    with_secret_env(matrix_dir, var="DZ_TEST_RECIPE_CLI_SECRET")
    shown = subprocess.run(
        [sys.executable, "-m", "dayzero.cli", f"--matrix={matrix_dir}", "recipe", CELL],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DZ_TEST_RECIPE_CLI_SECRET": "cli-planted-5Rw8Tq"},
    )
    assert shown.returncode == 0, shown.stderr
    assert "cli-planted-5Rw8Tq" not in shown.stdout + shown.stderr
    assert f"HUB_AUTH={MASK}" in shown.stdout and "PLAIN=visible" in shown.stdout
    assert "llama-server" in shown.stdout


def test_a_command_in_an_error_message_has_every_assignment_masked():
    from dayzero.redact import redact_command

    shown = redact_command("export MODE='a b'\"'\"'c'; run --n-predict=5 &&\nnext")
    assert shown == f"export MODE={MASK}; run --n-predict={MASK}&&; next"
    assert redact_command("x" * 200).endswith("...") and len(redact_command("x" * 200)) == 160
