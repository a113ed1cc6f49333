"""llama.cpp: `llama-server` (the endpoint) and `rpc-server` (ranks 1..N-1 of a multi-node role).

Its /metrics (`--metrics`; names as this build prints them):
    llamacpp:prompt_tokens_total            prompt tokens evaluated (cached ones excluded)
    llamacpp:prompt_tokens_cached_total     cached prompt tokens, where the build has it
    llamacpp:tokens_predicted_total         generated tokens
    llamacpp:prompt_seconds_total           + llamacpp:tokens_predicted_seconds_total: its time
    llamacpp:spec_decode_num_{drafts,draft_tokens,accepted_tokens}_total   speculative decoding
    (no request counter: requests are counted from its log, `log.parse`)
Lint reads a command with the program's own `--help` table (`help`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dayzero import cache
from dayzero.engines.account import ServerAccount
from dayzero.engines.base import RANK, ArgvParser, Engine
from dayzero.engines.llamacpp import help, log
from dayzero.engines.memory import EngineMemory
from dayzero.engines.prometheus import SpecCounters, Totals, draft_counters, parse_prometheus
from dayzero.engines.template import CardTemplate

PROGRAMS = {"llama-server": cache.server_binary, "rpc-server": cache.rpc_server_binary}
SPEC = (
    "llamacpp:spec_decode_num_drafts_total",
    "llamacpp:spec_decode_num_draft_tokens_total",
    "llamacpp:spec_decode_num_accepted_tokens_total",
)


def _read_help(version: str, argv: Sequence[str], program: str) -> list[dict]:
    """A command checked against that program's `--help` table, at the card's llama-cpp-python pin."""
    return help.check(help.table(PROGRAMS[program](version)), argv, program)


class LlamaCpp(Engine):
    name = "llama.cpp"
    display = "llama.cpp"
    metrics_prefix = "llamacpp:"
    parsers = (
        ArgvParser(
            "llama.cpp",
            pin=("package", "llama-cpp-python"),
            programs=tuple(PROGRAMS),
            setup_hint="tools/build-engine",
            read=_read_help,
        ),
    )
    logged_facts = ("slots", "threads", "model")
    logs_devices = True
    counts_evaluated_prompt = True
    accounted = True
    top_logprobs = 20  # streamed with each token of a chat completion (measured on the pinned build)
    logprobs_with_tools = False  # asked with tools, its tool calls came back as none (0 of 6, measured)
    # a given text would take one request a token
    cannot_score = "llama-server returns log-probabilities of generated tokens only (n_probs)"
    rank_label = "an rpc-server"
    card_template = CardTemplate(
        engine={
            "name": "llama.cpp",
            "package": f"llama-cpp-python=={cache.LLAMA_CPP_PYTHON_VERSION}",
            # the build records its source beside the binary; llama-server's --version names a dev tag
            "version_command": 'cat "$(dirname "$(command -v llama-server)")/../SOURCE"; '
            "llama-server --version 2>&1 | head -1",
            "health_path": "/health",
            "multinode_args": ["--rpc", "{peers}"],  # ranks 1..N-1 hold layers as rpc-servers
            "worker": {"command": ["rpc-server", "--host", "{bind}", "--port", "{port}"], "port": 50052},
        },
        recipe={
            "port": 8080,
            "command": ["llama-server", "--model", "{weights}", "--host", "{bind}", "--port", "{port}"]
            + ["--metrics", "--no-webui", "--seed", "0"],
        },
        # one slot a request at once, each holding a whole sequence: --ctx-size is shared by the slots
        mode_args=("--parallel", "{concurrency}", "--ctx-size", "{context}"),
        weights_suffix=".gguf",  # llama.cpp's convert_hf_to_gguf.py writes it from the checkpoint
        # the CPU build dayzero makes and lints with (tools/build-engine), and a Mac's (Metal by default)
        vendors=("any", "Apple"),
        source="llama-server as the embedded default runs it (tools/build-engine, llama-cpp-python "
        f"{cache.LLAMA_CPP_PYTHON_VERSION}); multi-node by its RPC backend",
    )
    memory = EngineMemory(
        k=("-ctk", "--cache-type-k"),
        v=("-ctv", "--cache-type-v"),
        k_default="f16",
        v_default="f16",
        conv_default="f32",  # recurrent layers' r and s states: always F32
        ssm_default="f32",
        source="llama.cpp common/arg.cpp (-ctk/-ctv default f16) and src/llama-memory-recurrent.cpp "
        "(recurrent states in F32); no reserve flag: it allocates what the model and context need",
    )

    def serves_metrics(self, argv: Sequence[str]) -> bool:
        return "--metrics" in argv

    def totals(self, text: str) -> Totals | None:
        if not isinstance(text, str) or self.metrics_prefix not in text:
            return None
        v = parse_prometheus(text)
        if "llamacpp:tokens_predicted_total" not in v:
            return None
        return Totals(
            prompt_evaluated=v.get("llamacpp:prompt_tokens_total", 0.0),
            cached=v.get("llamacpp:prompt_tokens_cached_total"),
            generated=v["llamacpp:tokens_predicted_total"],
            server_s=v.get("llamacpp:prompt_seconds_total", 0.0)
            + v.get("llamacpp:tokens_predicted_seconds_total", 0.0),
        )

    def spec_counters(self, text: str) -> SpecCounters | None:
        return draft_counters(text, SPEC)

    def parse_log(self, text: str) -> ServerAccount:
        return log.parse(text)

    def parse_rank_log(self, text: str) -> ServerAccount:
        return log.parse_rpc_server(text)

    def launch_part(self, argv: Sequence[str]) -> str | None:
        return RANK if any(Path(a).name == "rpc-server" for a in argv) else None  # a container's prefix first

    def local_image(self) -> dict:
        binary = cache.server_binary()
        if not binary.exists():
            return {}
        what = (
            f"llama-server built by tools/build-engine from llama-cpp-python {cache.LLAMA_CPP_PYTHON_VERSION}"
        )
        return self.image_of(f"{what} for {cache.isa_level()}", binary)


ENGINE = LlamaCpp()
