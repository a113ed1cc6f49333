"""The sgl_kernel TEST stand-in (tools/sgl-kernel-standin): each op against a plain reference.

The stand-in needs torch, which only the engines venv has (tools/build-sglang), so each check runs
there as a script; the reference computations are plain Python loops over lists, written from
what SGLang's own Triton kernels do (sglang/srt/mem_cache/allocation.py, kernels/ops/...)."""

from __future__ import annotations

import os
import subprocess
import textwrap

import pytest

from dayzero.cache import engines_venv

PYTHON = engines_venv() / "bin" / "python"
pytestmark = pytest.mark.skipif(
    not PYTHON.exists() and not os.environ.get("CI"),
    reason="no engines venv: run tools/build-sglang (CI builds it in tools/setup; there this never skips)",
)

SETUP = """
import random, torch, sgl_kernel
assert sgl_kernel.STANDIN
random.seed(7)
table = torch.randint(0, 1000, (6, 40), dtype=torch.int32)
reqs = torch.tensor([4, 0, 2])
starts = torch.tensor([3, 0, 10])
ends = torch.tensor([9, 5, 11])
"""


def _run(body: str) -> str:
    proc = subprocess.run(
        [str(PYTHON), "-c", SETUP + textwrap.dedent(body)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_assign_req_to_token_pool_writes_each_requests_window():
    _run("""
    locs = torch.arange(100, 112, dtype=torch.int64)  # 6 + 5 + 1 new locations, packed in order
    expect = table.tolist()
    k = 0
    for r, s, e in zip(reqs.tolist(), starts.tolist(), ends.tolist()):
        for j in range(s, e):
            expect[r][j] = 100 + k
            k += 1
    sgl_kernel.assign_req_to_token_pool_cpu(reqs, table, starts, ends, locs, table.shape[1])
    assert table.tolist() == expect, (table.tolist(), expect)
    """)


def test_assign_extend_cache_locs_reads_each_requests_window():
    _run("""
    out = torch.full((12,), -1, dtype=torch.int64)
    rows = zip(reqs.tolist(), starts.tolist(), ends.tolist())
    expect = [v for r, s, e in rows for v in table.tolist()[r][s:e]]
    sgl_kernel.assign_extend_cache_locs_cpu(reqs, table, starts, ends, out, table.shape[1])
    assert out.tolist() == expect, (out.tolist(), expect)
    """)


def test_copy_all_layer_kv_cache_copies_rows_in_every_buffer_even_in_place():
    _run("""
    layers = [torch.randn(16, 8, dtype=torch.bfloat16) for _ in range(3)]
    ptrs = torch.tensor([t.data_ptr() for t in layers], dtype=torch.uint64)
    strides = torch.tensor([t.stride(0) * t.element_size() for t in layers], dtype=torch.int64)
    tgt, src = torch.tensor([2, 5, 7]), torch.tensor([5, 7, 1])  # 5 and 7 are read and written
    expect = []
    for t in layers:
        rows = t.tolist()
        new = [list(r) for r in rows]
        for a, b in zip(tgt.tolist(), src.tolist()):
            new[a] = list(rows[b])
        expect.append(new)
    sgl_kernel.copy_all_layer_kv_cache_cpu(ptrs, strides, tgt, src)
    assert [t.tolist() for t in layers] == expect
    """)


def test_any_other_op_imports_and_refuses_to_run():
    out = _run("""
    from sgl_kernel import fused_experts_cpu
    try:
        fused_experts_cpu(1)
    except NotImplementedError as e:
        print(e)
    """)
    assert "fused_experts_cpu" in out and "stand-in" in out
