"""SGLang, with its router (`sglang_router.launch_router`, which fronts any engine's workers).

Its /metrics (`--enable-metrics`; names from sglang 0.5.23, sglang/srt/observability/
metrics_collector.py, `TokenizerMetricsCollector.observe_one_finished_request`, incremented once
per finished request):
    sglang:prompt_tokens_total              prompt tokens, cached ones included
    sglang:cached_tokens_total              cached prompt tokens
    sglang:generation_tokens_total          generated tokens
    sglang:num_requests_total               finished requests
    sglang:e2e_request_latency_seconds_sum  its own end-to-end time, summed over requests
    sglang:spec_verify_calls_total          speculative verification calls (accept length =
                                            generated tokens / verify calls, as SGLang computes it)
    sglang:spec_num_draft_tokens            a gauge: tokens per verification step
    sglang:time_to_first_token_seconds      histogram (_sum, _count): its own TTFT per request,
                                            from arrival to first token (`checks.server_latency`)
Lint reads commands with `ServerArgs` and the router's `RouterArgs` in the engines virtualenv
(tools/build-sglang; `argv_script.py`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from dayzero import cache
from dayzero.engines import launch_args
from dayzero.engines.account import ServerAccount
from dayzero.engines.base import DISAGGREGATED, RANK, ArgvParser, Engine, venv_python
from dayzero.engines.memory import EngineMemory
from dayzero.engines.prometheus import SpecCounters, Totals, parse_prometheus
from dayzero.engines.sglang import log, router_log, score
from dayzero.engines.template import CardTemplate


def engines_python() -> Path:
    """The engines virtualenv's interpreter (tools/build-sglang)."""
    return venv_python("DAYZERO_ENGINES_PYTHON", cache.engines_venv())


SERVER_PARSER = ArgvParser(
    "sglang",
    pin=("package", "sglang"),
    launchers=(("sglang", "serve"), ("-m", "sglang.launch_server")),
    python=engines_python,
    setup_hint="tools/build-sglang",
)
ROUTER_PARSER = ArgvParser(
    "sglang_router",
    pin=("router_package", "sglang-router"),
    launchers=(("-m", "sglang_router.launch_router"),),
    fronts_any_engine=True,
    python=engines_python,
    setup_hint="tools/build-sglang",
)


# Launch arguments SGLang rewrites in its own setup, before it prints server_args: (argument,
# recipe value) -> the value its log shows. sglang 0.5.23 arg_groups/pd_disaggregation_hook.py:
# "mooncake_tcp" is mooncake with the TCP transport forced (MC_FORCE_TCP), printed as "mooncake".
SETUP_REWRITES = {("disaggregation_transfer_backend", "mooncake_tcp"): "mooncake"}


def _flag(argv: Sequence[str], name: str) -> str | None:
    values = [v for f, v in zip(argv, argv[1:], strict=False) if f == name]
    return values[-1] if values else None


class SGLang(Engine):
    name = "sglang"
    display = "SGLang"
    metrics_prefix = "sglang:"
    parsers = (SERVER_PARSER, ROUTER_PARSER)
    ttft_histogram = True
    bench_tool = "sglang.bench_serving"
    accounted = True
    top_logprobs = 20  # streamed with each token of a chat completion (measured on the pinned build)
    counts_requests = True
    streams_whole_steps = True
    logs_every_arg = True
    rank_label = "a non-endpoint sglang rank"
    card_template = CardTemplate(
        engine={
            "name": "sglang",
            "package": "sglang==0.5.23",
            "router_package": "sglang-router==0.3.2",
            "health_path": "/health",
            "multinode_args": [
                "--nnodes",
                "{nnodes}",
                "--node-rank",
                "{rank}",
                "--dist-init-addr",
                "{dist_init_addr}",
            ],
        },
        recipe={
            "port": 30000,
            "command": [
                "sglang",
                "serve",
                "--model-path",
                "{weights}",
                "--tp",
                "{tp}",
                "--enable-metrics",
                "--host",
                "{bind}",
                "--port",
                "{port}",
            ],
        },
        vendors=("NVIDIA", "AMD", "any"),
        source="the SGLang cookbook's launch (sglang serve --model-path --tp), 0.5.23 (tools/build-sglang)",
    )
    memory = EngineMemory(
        k=("--kv-cache-dtype",),
        conv_default="bfloat16",  # SGLANG_MAMBA_CONV_DTYPE's default
        ssm=("--mamba-ssm-dtype",),
        ssm_default="float32",
        share=("--mem-fraction-static",),
        reserve_mib=lambda tp: max(512 + 1.5 * 8192 + tp / 8 * 1024, 10 * 1024),
        source="sglang 0.5.23 configs/mamba_utils.py (conv bfloat16, SSM float32) and "
        "arg_groups/memory_hook.py (mem_fraction_static left unset: 512 MiB + 1.5 x the 8192-token "
        "chunked prefill + TP/8 GiB reserved, at least 10 GiB on a GPU over 60 GiB; CUDA graphs not counted)",
    )

    cannot_score = ""  # it can: engines/sglang/score.py

    def score_calls(self, prompt: str, continuation: str, top: int) -> list[dict]:
        return score.calls(prompt, continuation, top)

    def scored(self, responses: Sequence[Mapping]) -> list[list] | None:
        return score.scored(responses)

    def serves_metrics(self, argv: Sequence[str]) -> bool:
        return "--enable-metrics" in argv

    def totals(self, text: str) -> Totals | None:
        if not isinstance(text, str) or self.metrics_prefix not in text:
            return None
        v = parse_prometheus(text)
        return Totals(
            prompt=v.get("sglang:prompt_tokens_total", 0.0),
            cached=v.get("sglang:cached_tokens_total", 0.0),
            generated=v.get("sglang:generation_tokens_total", 0.0),
            requests=v.get("sglang:num_requests_total", 0.0),
            server_s=v.get("sglang:e2e_request_latency_seconds_sum", 0.0),
            verify_calls=v.get("sglang:spec_verify_calls_total", 0.0),
            ttft_s=v.get("sglang:time_to_first_token_seconds_sum", 0.0),
            first_tokens=v.get("sglang:time_to_first_token_seconds_count", 0.0),
        )

    def launch_args(self, command: str) -> dict[str, str] | None:
        args = launch_args.command_args(command, SERVER_PARSER.start)
        if args is None:
            return None
        # as SGLang's own setup rewrites them before it prints its server_args
        return {k: SETUP_REWRITES.get((k, v), v) for k, v in args.items()}

    def spec_counters(self, text: str) -> SpecCounters | None:
        """Verification calls are the drafts; generated tokens less one bonus token per call are
        the accepted ones, so 1 + accepted / drafts is SGLang's generated / verify calls."""
        t = self.totals(text)
        if t is None:
            return None
        steps = parse_prometheus(text).get("sglang:spec_num_draft_tokens")  # a gauge: tokens per step
        calls = t.verify_calls or 0.0
        return SpecCounters(calls, calls * (steps - 1) if steps else 0.0, t.generated - calls)

    def parse_log(self, text: str) -> ServerAccount:
        return log.parse(text)

    def parse_rank_log(self, text: str) -> ServerAccount:
        return log.parse_rank(text)

    def parse_router_log(self, text: str) -> ServerAccount:
        return router_log.parse(text)

    def launch_part(self, argv: Sequence[str]) -> str | None:
        if _flag(argv, "--node-rank") not in (None, "0"):
            return RANK
        if _flag(argv, "--disaggregation-mode") not in (None, "null"):
            return DISAGGREGATED
        return None

    def local_image(self) -> dict:
        return self.venv_image(cache.engines_venv(), "sglang", "tools/build-sglang")


ENGINE = SGLang()
