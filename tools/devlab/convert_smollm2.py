"""Convert the cached SmolLM2-135M-Instruct GGUF into a bf16 safetensors folder SGLang can serve.

Run with the engines venv's Python (it has torch, transformers and gguf); `tools/build-sglang`
does. transformers keeps GGUF weights quantized and refuses to `save_pretrained` them (and its GGUF
loading wants accelerate), so the state dict is dequantized by transformers' GGUF reader (Q4_1 ->
float), loaded into a fresh LlamaForCausalLM in bf16 and saved with the GGUF's own tokenizer.
The weights are the Q4_1 model's, dequantized: SGLang and llama.cpp then serve the same numbers,
not the hub's original bf16 checkpoint.

    python convert_smollm2.py GGUF DEST
DEST is written through a staging folder, so a half-written model is never found.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def convert(gguf: Path, dest: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoTokenizer, LlamaForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    folder, name = str(gguf.parent), gguf.name
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    config.torch_dtype = torch.bfloat16
    model = LlamaForCausalLM(config)
    # Dequantized with GGUF names mapped to the model's (no accelerate needed, unlike from_pretrained).
    state = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=model)["tensors"]
    missing, unexpected = model.load_state_dict(
        {k: torch.as_tensor(v) for k, v in state.items()}, strict=False
    )
    tied = {"lm_head.weight"} if config.tie_word_embeddings else set()
    if unexpected or set(missing) - tied:
        raise SystemExit(f"convert: state dict mismatch: missing {missing}, unexpected {unexpected}")
    model = model.to(torch.bfloat16)
    staging = dest.with_name(dest.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(staging, safe_serialization=True)
    AutoTokenizer.from_pretrained(folder, gguf_file=name).save_pretrained(staging)
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    convert(Path(sys.argv[1]), Path(sys.argv[2]))
