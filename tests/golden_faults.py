"""Broken engines for real, built as modified copies of the model a cell serves (issue 39): what
goldens exist to catch, and what a near-tie tolerance must not let through.

Each fault writes a model root (the inventory var `model_root`) beside the real one: the same
file names, every unchanged file a symlink, the faulty one a modified copy. Four faults, on each
engine's own files:
- `template`: a wrong chat template (Llama 2's `[INST]` format instead of SmolLM2's ChatML);
- `rope`: a wrong RoPE base (1e3 instead of 1e5): the bf16 checkpoint's config.json, the GGUF's
  `llama.rope.freq_base`;
- `weights`: a corrupted weight: one MLP projection of layer 10 with its sign flipped (bf16 sign
  bits; in the Q4_1 GGUF the scale and minimum of every block), a file of the same size, so a
  size check passes it;
- `tokenizer`: another model's tokenizer, as a vocabulary whose ids map to other strings (the
  HF tokenizer's ids permuted; in the GGUF, tokens of equal length swapped in place).
"""

from __future__ import annotations

import json
import random
import shutil
import struct
from pathlib import Path

FAULTS = ("template", "rope", "weights", "tokenizer")
WRONG_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}[INST] {{ m['content'] }} [/INST]"
    "{% elif m['role'] == 'assistant' %} {{ m['content'] }}{{ eos_token }}{% endif %}{% endfor %}"
)
WRONG_ROPE_BASE = 1000.0
FLIPPED = "blk.10.ffn_down.weight"  # the GGUF's name; the checkpoint's below
FLIPPED_HF = "model.layers.10.mlp.down_proj.weight"


def mirror(src: Path, dst: Path) -> None:
    """dst: every entry of src as a symlink (a folder's entries too, one level down)."""
    dst.mkdir(parents=True, exist_ok=True)
    for entry in src.iterdir():
        target = dst / entry.name
        if entry.is_dir():
            mirror(entry, target)
        else:
            target.symlink_to(entry)


def own_copy(path: Path) -> Path:
    """Replace a mirrored symlink with a real copy that may be modified."""
    real = path.resolve()
    path.unlink()
    shutil.copyfile(real, path)
    return path


def build(fault: str, engine: str, model_root: Path, dst: Path) -> Path:
    """A model root like `model_root` with `fault` in the files `engine` reads."""
    mirror(model_root, dst)
    if engine == "llama.cpp":
        gguf = dst / "SmolLM2-135M-Instruct.Q4_1.gguf"
        if fault == "template":
            jinja = dst / "smollm2-135m-tools.jinja"
            jinja.unlink()
            jinja.write_text(WRONG_TEMPLATE)
        elif fault == "rope":
            gguf_set_f32(own_copy(gguf), "llama.rope.freq_base", WRONG_ROPE_BASE)
        elif fault == "weights":
            gguf_flip_q4_1(own_copy(gguf), FLIPPED)
        elif fault == "tokenizer":
            gguf_swap_tokens(own_copy(gguf))
        return dst
    hf = dst / "SmolLM2-135M-Instruct-bf16"
    if fault == "template":  # vLLM's recipe names the tools template, SGLang reads the checkpoint's
        (dst / "smollm2-135m-tools.jinja").unlink()
        (dst / "smollm2-135m-tools.jinja").write_text(WRONG_TEMPLATE)
        (hf / "chat_template.jinja").unlink()
        (hf / "chat_template.jinja").write_text(WRONG_TEMPLATE)
        config = own_copy(hf / "tokenizer_config.json")
        doc = json.loads(config.read_text())
        doc.pop("chat_template", None)
        config.write_text(json.dumps(doc))
    elif fault == "rope":
        config = own_copy(hf / "config.json")
        doc = json.loads(config.read_text())
        doc["rope_parameters"]["rope_theta"] = WRONG_ROPE_BASE
        config.write_text(json.dumps(doc, indent=2))
    elif fault == "weights":
        safetensors_flip(own_copy(hf / "model.safetensors"), FLIPPED_HF)
    elif fault == "tokenizer":
        tokenizer = own_copy(hf / "tokenizer.json")
        doc = json.loads(tokenizer.read_text())
        permute_vocab(doc)
        tokenizer.write_text(json.dumps(doc))
    return dst


# --- the bf16 checkpoint ------------------------------------------------------------------------


def safetensors_flip(path: Path, tensor: str) -> None:
    """Flip the sign of every bf16 value of `tensor`, in place."""
    with path.open("r+b") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        info = header[tensor]
        assert info["dtype"] == "BF16", info
        start, end = info["data_offsets"]
        f.seek(8 + n + start)
        data = bytearray(f.read(end - start))
        for i in range(1, len(data), 2):  # little endian: the sign bit is in the second byte
            data[i] ^= 0x80
        f.seek(8 + n + start)
        f.write(data)


def permute_vocab(doc: dict, seed: int = 0) -> None:
    """Another model's vocabulary: the ids of every ordinary token shuffled among themselves
    (special tokens keep theirs, so the chat template still frames the prompt)."""
    special = {t["content"] for t in doc.get("added_tokens") or ()}
    vocab = doc["model"]["vocab"]
    ordinary = sorted(t for t in vocab if t not in special)
    ids = [vocab[t] for t in ordinary]
    random.Random(seed).shuffle(ids)
    vocab.update(zip(ordinary, ids, strict=True))


# --- the GGUF -----------------------------------------------------------------------------------

_SCALAR = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
Q4_1, Q4_1_BLOCK, Q4_1_WEIGHTS = 3, 20, 32


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str):
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return value

    def string(self) -> tuple[int, str]:
        n = self.take("<Q")
        start = self.at
        self.at += n
        return start, self.data[start : self.at].decode("utf-8", "replace")

    def value(self, kind: int):
        """(offset, value) of one value; an array's value is a list of (offset, item)."""
        if kind == 8:
            return self.string()
        if kind == 9:
            item, n = self.take("<I"), self.take("<Q")
            start = self.at
            return start, [self.value(item) for _ in range(n)]
        start = self.at
        return start, self.take(_SCALAR[kind])


def gguf_layout(path: Path) -> tuple[dict, dict]:
    """(kv: key -> (type, offset, value), tensors: name -> (type, dims, absolute data offset))."""
    data = path.read_bytes()
    r = _Reader(data)
    assert data[:4] == b"GGUF", f"{path}: not a GGUF"
    r.at = 4
    r.take("<I")  # version
    n_tensors, n_kv = r.take("<Q"), r.take("<Q")
    kv = {}
    for _ in range(n_kv):
        _, key = r.string()
        kind = r.take("<I")
        offset, value = r.value(kind)
        kv[key] = (kind, offset, value)
    infos = []
    for _ in range(n_tensors):
        _, name = r.string()
        dims = [r.take("<Q") for _ in range(r.take("<I"))]
        kind, offset = r.take("<I"), r.take("<Q")
        infos.append((name, kind, dims, offset))
    align = kv.get("general.alignment", (0, 0, 32))[2]
    base = (r.at + align - 1) // align * align
    return kv, {name: (kind, dims, base + offset) for name, kind, dims, offset in infos}


def gguf_set_f32(path: Path, key: str, value: float) -> None:
    kv, _ = gguf_layout(path)
    kind, offset, _ = kv[key]
    assert kind == 6, f"{key} is not an f32"
    with path.open("r+b") as f:
        f.seek(offset)
        f.write(struct.pack("<f", value))


def gguf_flip_q4_1(path: Path, tensor: str) -> None:
    """Negate every weight of a Q4_1 tensor (w = d*q + m): the sign of each block's d and m."""
    _, tensors = gguf_layout(path)
    kind, dims, offset = tensors[tensor]
    assert kind == Q4_1, f"{tensor} is type {kind}, not Q4_1"
    count = 1
    for d in dims:
        count *= d
    size = count // Q4_1_WEIGHTS * Q4_1_BLOCK
    with path.open("r+b") as f:
        f.seek(offset)
        data = bytearray(f.read(size))
        for block in range(0, size, Q4_1_BLOCK):
            data[block + 1] ^= 0x80  # d, f16 little endian
            data[block + 3] ^= 0x80  # m
        f.seek(offset)
        f.write(data)


def gguf_swap_tokens(path: Path, seed: int = 0) -> None:
    """Another vocabulary in place: ordinary tokens of equal byte length swapped among themselves
    (the file keeps its size and layout; `<|...|>` tokens keep their ids)."""
    kv, _ = gguf_layout(path)
    _, _, tokens = kv["tokenizer.ggml.tokens"]
    by_length: dict[int, list[tuple[int, bytes]]] = {}
    raw = path.read_bytes()
    for offset, text in tokens:
        if text.startswith("<|") or text.startswith("<"):
            continue
        n = len(text.encode("utf-8"))
        by_length.setdefault(n, []).append((offset, raw[offset : offset + n]))
    data = bytearray(raw)
    rng = random.Random(seed)
    for group in by_length.values():
        words = [w for _, w in group]
        rng.shuffle(words)
        for (offset, _), word in zip(group, words, strict=True):
            data[offset : offset + len(word)] = word
    path.write_bytes(bytes(data))
