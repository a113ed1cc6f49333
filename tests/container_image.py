"""A real container image on a machine that reaches no image registry: `podman import` of a
rootfs built from this host's own files (dash, a few coreutils, the cached llama-server and its
shared libraries), so container hosts are tested with a real runtime, not a recording stub.

Podman 4.3 from Debian 12 runs it on the CI VM once `/etc/containers/containers.conf` picks runc
(crun refuses cgroups in hybrid mode there) and rlimits at or below the sandbox's own; the tests
skip, saying why, wherever `podman run` does not work.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path

from dayzero.cache import server_binary, server_dir

IMAGE = "localhost/dayzero-llama:test"
TOOLS = ("sh", "cat", "dirname", "head", "sleep", "true")
ENGINE_DIR = "/opt/llama"  # llama-server in bin/, SOURCE beside it, as the host's cache has them


def _libs(binary: str) -> set[str]:
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    return {part for line in out.splitlines() for part in line.split() if part.startswith("/")}


def why_not() -> str:
    """Why a real podman cannot run the image here ('' when it can)."""
    if not shutil.which("podman"):
        return "podman is not installed (apt-get install podman runc)"
    if not server_binary().exists():
        return "llama-server not built: run tools/build-engine"
    return ""


def build(tmp: Path, image: str = IMAGE) -> str:
    """Import the image (idempotent: same files, same id) and return its reference."""
    files: dict[str, str] = {}  # path in the image -> path on this host
    for tool in TOOLS:
        real = shutil.which("dash" if tool == "sh" else tool)
        files[f"/bin/{tool}"] = real
        files.update({lib: lib for lib in _libs(real)})
    for name in ("llama-server", "rpc-server"):
        binary = server_dir() / "bin" / name
        files[f"{ENGINE_DIR}/bin/{name}"] = str(binary)
        files.update({lib: lib for lib in _libs(str(binary))})
    files[f"{ENGINE_DIR}/SOURCE"] = str(server_dir() / "SOURCE")
    tar_path = tmp / "rootfs.tar"
    with tarfile.open(tar_path, "w") as tar:
        for inside, host_path in sorted(files.items()):
            info = tar.gettarinfo(str(Path(host_path).resolve()), arcname=inside.lstrip("/"))
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            with open(Path(host_path).resolve(), "rb") as fh:
                tar.addfile(info, fh)
    subprocess.run(
        ["podman", "import", "--change", f"ENV PATH={ENGINE_DIR}/bin:/bin", str(tar_path), image],
        check=True,
        capture_output=True,
    )
    return image


def runs(image: str) -> str:
    """'' when `podman run` runs the image here, else podman's message."""
    done = subprocess.run(
        ["podman", "run", "--rm", "--network", "none", image, "llama-server", "--version"],
        capture_output=True,
        text=True,
    )
    return "" if done.returncode == 0 else (done.stderr or done.stdout).strip()[-300:]


def containers(name_part: str) -> list[str]:
    """Containers (running or not) whose name contains `name_part`."""
    out = subprocess.run(
        ["podman", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True
    ).stdout
    return [n for n in out.split() if name_part in n]
