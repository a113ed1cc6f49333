"""The vendor guide's first steps (submissions/README.md, "For vendors") run as written in a fresh
HOME (issue 45: `ssh-keygen -f ~/.ssh/...` failed where there was no `~/.ssh`): the key, the
system description and the allowed-signers line. `pack` and `check` need a run's reports; the
submission tests run them on the main job's (tests/test_submission_e2e.py).
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from .conftest import REPO

GUIDE = REPO / "submissions" / "README.md"


def vendor_blocks() -> list[str]:
    """Each ```sh block of the vendor section, its indentation removed."""
    section = GUIDE.read_text().partition("## For vendors")[2].partition("\n## ")[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    return ["\n".join(line.removeprefix("   ") for line in block.splitlines()) for block in blocks]


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")
def test_the_vendor_steps_run_as_written_in_a_fresh_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    blocks = vendor_blocks()
    key, system, pack, check = blocks
    assert "dayzero submission pack" in pack and "dayzero submission check" in check
    signers_line = check.splitlines()[0]  # the allowed-signers file, before the check itself
    for block in (key, system, signers_line):
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block],
            input="",  # ssh-keygen's passphrase prompt: none
            env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, (block, done.stdout, done.stderr)
    assert (home / ".ssh" / "dayzero_acme").is_file() and (home / ".ssh" / "dayzero_acme.pub").is_file()
    assert "system_name: acme" in (home / "dayzero-acme" / "system.yaml").read_text()
    line = (home / "dayzero-acme" / "allowed_signers").read_text()
    assert line.startswith('acme namespaces="dayzero",kinds="b300" ssh-ed25519 '), line
