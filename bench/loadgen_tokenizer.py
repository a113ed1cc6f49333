"""Write a Hugging Face tokenizer directory from the SmolLM2 GGUF, for peer clients that need one.

Peers (aiperf, guidellm, vllm's bench) load a Hugging Face tokenizer to build prompts and count
tokens; with no network the hub is out of reach, but the GGUF that llama-server serves carries
the model's GPT-2 style BPE vocabulary and merges. Runs in the bench venv (gguf, tokenizers,
transformers): `.venv-bench/bin/python bench/loadgen_tokenizer.py GGUF OUTDIR`.
"""

import sys

import gguf
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast


def field(reader, name):
    f = reader.fields[name]
    if len(f.data) == 1 and f.types and f.types[0] != gguf.GGUFValueType.ARRAY:
        part = f.parts[f.data[0]]
        return bytes(part).decode() if f.types[0] == gguf.GGUFValueType.STRING else part[0]
    return [bytes(f.parts[i]).decode() for i in f.data]


def main(gguf_path: str, out: str) -> None:
    reader = gguf.GGUFReader(gguf_path)
    tokens = field(reader, "tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in field(reader, "tokenizer.ggml.merges")]
    bpe = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bos, eos = (
        int(field(reader, "tokenizer.ggml.bos_token_id")),
        int(field(reader, "tokenizer.ggml.eos_token_id")),
    )
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token=tokens[bos], eos_token=tokens[eos])
    template = reader.fields.get("tokenizer.chat_template")
    if template is not None:
        tok.chat_template = field(reader, "tokenizer.chat_template")
    tok.save_pretrained(out)
    print(out, len(tokens), tok("Hello world, this is SmolLM.")["input_ids"])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
