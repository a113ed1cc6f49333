"""Where the embedded default's engine and model are cached on this machine, and `dayzero engine`.

Stdlib only on purpose: `tools/build-engine` (development tooling, run before any virtualenv
exists) imports these paths so the build and the runs agree on one cache. The cache lives
outside the repository (``$DAYZERO_CACHE`` or ``~/.cache/dayzero``), keyed by version.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
# The instruction-set level llama.cpp is built at, never the build machine's own (`-march=native`
# put AVX-512/AMX in the binary: SIGILL on another CPU, and greedy outputs that turned with the CPU).
# x86-64-v3 is AVX2+FMA+F16C+BMI2 (Haswell, Zen 1 and later); arm64 the plain ARMv8.2-A with dotprod.
ISA_LEVELS = {"x86_64": "x86-64-v3", "aarch64": "armv8.2-a"}


def isa_level(machine: str | None = None) -> str:
    """The pinned level for this machine's architecture (`uname -m`)."""
    machine = machine or os.uname().machine
    try:
        return ISA_LEVELS[machine]
    except KeyError:
        raise RuntimeError(
            f"no pinned instruction-set level for {machine!r} (known: {', '.join(ISA_LEVELS)})"
        ) from None


# Part of the cache key: the RPC backend (`rpc-server`, `--rpc`) and the pinned level; a build
# without either sits under another name and is rebuilt, not reused.
def build_flavour() -> str:
    return f"rpc+{isa_level()}"


SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_BF16 = "SmolLM2-135M-Instruct-bf16"
# The chat template with tool syntax the llama.cpp cpu cells serve (the card's model_files):
# shipped in the repository, installed beside the GGUF so every host finds it under model_root.
SMOLLM2_TOOLS_TEMPLATE = "smollm2-135m-tools.jinja"
BUILD_SCRIPT = Path("tools") / "build-engine"


def cache_root() -> Path:
    return Path(os.environ.get("DAYZERO_CACHE") or Path.home() / ".cache" / "dayzero")


def server_dir(version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    return cache_root() / "llama.cpp" / f"{version}+{build_flavour()}"


def server_binary(version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    return server_dir(version) / "bin" / "llama-server"


def rpc_server_binary(version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    """llama.cpp's RPC worker: the ranks 1..N-1 of a multi-node cpu cell."""
    return server_dir(version) / "bin" / "rpc-server"


def model_path() -> Path:
    return cache_root() / "models" / SMOLLM2_GGUF


def tools_template_path() -> Path:
    return cache_root() / "models" / SMOLLM2_TOOLS_TEMPLATE


def engines_venv() -> Path:
    """SGLang 0.5.23 and its router (tools/build-sglang): parsers for lint, servers for the cpu cells."""
    return cache_root() / "engines-venv"


def vllm_venv() -> Path:
    """vLLM's CPU build (tools/build-vllm): the parser for lint, the server for the vLLM cpu cells."""
    return cache_root() / "vllm-venv"


def router_venv() -> Path:
    """sglang-router alone (tools/build-router): the routed and pd cells' router, `python-router`."""
    return cache_root() / "router-venv"


def sglang_model_path() -> Path:
    """The bf16 safetensors folder converted from the GGUF, which the SGLang cpu cells serve."""
    return cache_root() / "models" / SMOLLM2_BF16


def print_paths() -> None:
    print(
        f"llama-server {server_binary()}\nrpc-server {rpc_server_binary()}\nmodel {model_path()}\n"
        f"tools-template {tools_template_path()}\nengines-venv {engines_venv()}\n"
        f"vllm-venv {vllm_venv()}\nrouter-venv {router_venv()}\n"
        f"sglang-model {sglang_model_path()}"
    )


def main(argv: list[str] | None = None) -> int:
    """Print the cached paths, or build them with the checkout's `tools/build-engine` (not installed)."""
    parser = argparse.ArgumentParser(prog="dayzero engine")
    parser.add_argument("--print-paths", action="store_true", help="print the cached paths and exit")
    args = parser.parse_args(argv)
    if args.print_paths:
        print_paths()
        return 0
    script = Path.cwd() / BUILD_SCRIPT
    if not script.is_file():
        print(
            f"dayzero engine: no {BUILD_SCRIPT} here: the llama-server build is development tooling "
            "of a dayzero checkout; run this from one (or run its tools/build-engine)",
            file=sys.stderr,
        )
        return 2
    return subprocess.run([sys.executable, str(script)]).returncode
