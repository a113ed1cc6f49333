"""The embedded default's llama.cpp is built at one pinned instruction-set level, never the build
machine's own: a native build on an AMX Xeon died by SIGILL on the next machine, and greedy
outputs turned with the CPU the binary was built on."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from dayzero.cache import isa_level, rpc_server_binary, server_binary
from dayzero.spec.engine_identity import parse
from devlab.engine_build import cpu_lacks, isa_check, isa_flags, source_text

from .conftest import needs_engine

x86 = pytest.mark.skipif(isa_level() != "x86-64-v3", reason="the disassembly check reads x86-64 registers")


def test_the_build_turns_native_off_and_everything_above_the_level_off():
    flags = isa_flags("x86_64")
    assert "-DGGML_NATIVE=OFF" in flags
    for on in ("AVX2", "FMA", "F16C", "BMI2"):
        assert f"-DGGML_{on}=ON" in flags
    for off in ("AVX512", "AVX512_VNNI", "AVX_VNNI", "AMX_TILE", "AMX_INT8", "AMX_BF16"):
        assert f"-DGGML_{off}=OFF" in flags
    assert isa_flags("aarch64") == ["-DGGML_NATIVE=OFF", "-DGGML_CPU_ARM_ARCH=armv8.2-a+dotprod"]


@x86
def test_a_cpu_below_the_level_is_named_by_what_it_lacks():
    assert cpu_lacks("flags\t: fpu sse sse2 avx avx2 fma f16c bmi2 movbe\n") == []
    assert cpu_lacks("flags\t: fpu sse sse2 avx movbe\n") == ["avx2", "fma", "f16c", "bmi2"]


@x86
@needs_engine
@pytest.mark.parametrize("binary", [server_binary, rpc_server_binary], ids=["llama-server", "rpc-server"])
def test_the_built_engine_holds_no_instruction_above_the_pinned_level(binary):
    """objdump's disassembly of the cached binaries names no zmm, mask or tile register."""
    assert isa_check(binary()) == []


@x86
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_the_disassembly_check_finds_avx512_and_amx(tmp_path):
    """The check can fail: an object built with AVX-512 and AMX is caught, by register."""
    src = tmp_path / "above.c"
    src.write_text(
        "#include <immintrin.h>\n"
        "__m512 add(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }\n"
        "void tiles(void) { _tile_zero(0); _tile_release(); }\n"
    )
    obj = tmp_path / "above.o"
    subprocess.run(["gcc", "-O2", "-mavx512f", "-mamx-tile", "-c", str(src), "-o", str(obj)], check=True)
    found = isa_check(obj)
    assert any("%zmm" in line for line in found) and any("tile" in line for line in found), found


def test_the_level_is_part_of_the_engine_identity_in_evidence():
    """The card's version_command prints the build's SOURCE first: the level lands in the
    identity, so evidence and goldens of another build are told apart."""
    banner = source_text("0.3.36") + "version: 0.5.0-dev (build 0, commit unknown)"
    identity = parse(banner)
    assert identity is not None and identity.version == "0.5.0-dev"
    assert identity.build == f"llama-cpp-python 0.3.36, {isa_level()}"
