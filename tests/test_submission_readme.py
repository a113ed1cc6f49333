"""Issue 28 item 6: submissions/README.md as written, key to verdict.

The README's shell blocks are run as they stand, in order, by bash: the vendor's in a clean
clone of this commit that holds a synthetic run of the cpu cells (`tests/submission_corpus`;
"run the suites" is the one step not run), with HOME in tmp_path; the maintainers' in a second
clone, given the public key and the bundle the vendor sent. What differs from the text:
`ssh-keygen` gets `-q -N ''` (it would ask for a passphrase), and the example's values are this
lab's (`LAB_VALUES`: hardware `cpu` for `b300`, engine `llama.cpp` for `sglang`, a digest of the
right form for the placeholder `sha256:...`). The README cannot drift from what works: a command
it shows that fails, or an allowed-signers line without kinds, fails here.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from dayzero.spec.matrix import load_matrix

from .submission_corpus.lab import REPO
from .submission_corpus.synthetic import synthetic_run

README = REPO / "submissions" / "README.md"
BLOCK = re.compile(r"^( *)```sh\n(.*?)^\1```", re.S | re.M)


def sh_blocks(section: str) -> list[str]:
    """The ```sh blocks of a `## section` of the README, dedented."""
    text = README.read_text()
    start = text.index(f"\n## {section}\n")
    end = text.find("\n## ", start + 1)
    body = text[start : end if end != -1 else None]
    return [
        "".join(line[len(m.group(1)) :] for line in m.group(2).splitlines(True)) for m in BLOCK.finditer(body)
    ]


# The example's values -> this lab's: its hardware kind, the engine its cells run, and a digest
# of the right form for the README's placeholder.
LAB_VALUES = {
    r"\bb300\b": "cpu",
    r"NVIDIA 580\.65\.06, CUDA 13\.0": "none (cpu)",  # the driver a cpu host has (preflight's)
    r"name: sglang,": "name: llama.cpp,",
    r'"sha256:\.\.\."': f'"sha256:{hashlib.sha256(b"the vendor guide").hexdigest()}"',  # zeros: refused
}


def here(block: str) -> str:
    """The block as this lab runs it: no passphrase prompt, this lab's values for the example's."""
    block = block.replace("ssh-keygen -t", "ssh-keygen -q -N '' -t")
    for example, value in LAB_VALUES.items():
        block = re.sub(example, value, block)
    return block


def clone(dest: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(REPO), str(dest)], check=True, capture_output=True)
    return dest


def run(block: str, cwd: Path, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": str(home), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", here(block)], cwd=cwd, env=env, capture_output=True, text=True
    )


def test_the_vendor_path_runs_as_written_from_key_to_accepted(tmp_path):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    vendor = clone(tmp_path / "vendor")
    synthetic_run(load_matrix(vendor / "matrix"), vendor / "reports", vendor / "suites" / "goldens")

    blocks = sh_blocks("For vendors")
    assert [b.split()[0] for b in blocks] == ["mkdir", "mkdir", "dayzero", "echo"], blocks
    assert 'kinds=\\"' in blocks[-1]  # the allowed-signers line binds the key to kinds
    for block in blocks:
        done = run(block, vendor, home)
        assert done.returncode == 0, (block, done.stdout, done.stderr)
    assert done.stdout.splitlines()[-1].startswith("acme.tar.gz: accepted ("), done.stdout

    maintainers = clone(tmp_path / "maintainers")  # what the vendor sends: the public key, the bundle
    shutil.copy(home / ".ssh" / "dayzero_acme.pub", maintainers)
    shutil.copy(home / "dayzero-acme" / "acme.tar.gz", maintainers)
    [block] = sh_blocks("For maintainers")
    done = run(block, maintainers, home)
    assert done.returncode == 0, (block, done.stdout, done.stderr)
    assert "acme.tar.gz: accepted (" in done.stdout and "acceptance table:" in done.stdout, done.stdout
    accepted = list((maintainers / "reports" / "evidence").glob("*.json"))
    assert accepted and all('"source": "acme"' in p.read_text() for p in accepted), accepted


def test_the_readme_line_without_kinds_signs_for_nothing(tmp_path):
    """The example as it stood before issue 28 (no kinds): the checker refuses it, saying why."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    vendor = clone(tmp_path / "vendor")
    synthetic_run(load_matrix(vendor / "matrix"), vendor / "reports", vendor / "suites" / "goldens")
    *first, check = sh_blocks("For vendors")
    for block in first:
        assert run(block, vendor, home).returncode == 0, block
    done = run(check.replace(',kinds=\\"b300\\"', ""), vendor, home)
    assert done.returncode == 1 and "no key of acme bound to kinds" in done.stdout, done.stdout
