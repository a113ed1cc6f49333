"""TEST STAND-IN for sgl_kernel's CPU helper ops (dayzero CI only; see README.md beside this).

Plain-torch bookkeeping ops that SGLang 0.5.23's CPU mode calls for plain serving; any other name
is a function that raises, so imports work and a call needing a real kernel fails loudly.
"""

from __future__ import annotations

import ctypes

import torch

STANDIN = True  # dayzero's preflight and tests tell this package from a real sgl_kernel by it


def _windows(req_pool_indices: torch.Tensor, start_offset: torch.Tensor, end_offset: torch.Tensor):
    """(row, columns of the req-to-token table, slice of the flat tensor) per request; the
    requests' windows are packed in order in the flat tensor."""
    offset = 0
    for req, start, end in zip(
        req_pool_indices.tolist(), start_offset.tolist(), end_offset.tolist(), strict=True
    ):
        n = int(end) - int(start)
        yield int(req), slice(int(start), int(end)), slice(offset, offset + n)
        offset += n


def assign_req_to_token_pool_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int,
) -> None:
    """req_to_token[req, start:end] = the request's slice of out_cache_loc."""
    for req, cols, flat in _windows(req_pool_indices, start_offset, end_offset):
        req_to_token[req, cols] = out_cache_loc[flat].to(req_to_token.dtype)


def assign_extend_cache_locs_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int,
) -> None:
    """The request's slice of out_cache_loc = req_to_token[req, start:end] (the inverse)."""
    for req, cols, flat in _windows(req_pool_indices, start_offset, end_offset):
        out_cache_loc[flat] = req_to_token[req, cols].to(out_cache_loc.dtype)


def copy_all_layer_kv_cache_cpu(
    data_ptrs: torch.Tensor, strides: torch.Tensor, tgt_loc: torch.Tensor, src_loc: torch.Tensor
) -> None:
    """In every buffer (one raw pointer and row size in bytes each), rows src_loc -> tgt_loc.
    Every source row is read before any is written, as the Triton kernel does (safe in place)."""
    pairs = list(zip(tgt_loc.tolist(), src_loc.tolist(), strict=True))
    for base, stride in zip(data_ptrs.tolist(), strides.tolist(), strict=True):
        base, stride = int(base), int(stride)
        rows = [ctypes.string_at(base + int(src) * stride, stride) for _, src in pairs]
        for (tgt, _), row in zip(pairs, rows, strict=True):
            ctypes.memmove(base + int(tgt) * stride, row, stride)


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)

    def missing(*args, **kwargs):
        raise NotImplementedError(
            f"sgl_kernel.{name}: not provided by dayzero's test stand-in for kernels "
            "(tools/sgl-kernel-standin); this path needs the real sgl_kernel"
        )

    missing.__name__ = name
    return missing
