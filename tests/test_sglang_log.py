"""SGLang's server log as the submission checker reads it, on a real SGLang 0.5.23 log.

tests/data/sglang-0.5.23-cpu.log was written by `python -m sglang.launch_server` of the engines
venv serving the bf16 SmolLM2 on this machine's CPU with the SGLang cpu recipe's logging flags
(--log-requests --log-requests-level 0), then asked one streamed /v1/completions of 8 tokens for
"Once upon a time" (4 prompt tokens); only the cache path is masked and Python warnings dropped."""

from __future__ import annotations

from pathlib import Path

from dayzero import engines
from dayzero.engines.sglang.log import parse

REAL = (Path(__file__).parent / "data" / "sglang-0.5.23-cpu.log").read_text()


def test_the_real_log_gives_listen_address_readiness_and_one_request_with_its_own_counts():
    account = parse(REAL)
    assert engines.get("sglang").parse_log(REAL) == account
    assert account.listen == "127.0.0.1:18191" and account.ready
    # SGLang's warm-up (before "fired up") and its HEALTH_CHECK probes are not requests of the run
    assert account.count == 1
    [served] = account.served
    assert (served.prompt_evaluated, served.generated) == (4, 8)
    assert 0 < served.total_s < 60 and served.start_s == 0.0


def test_health_checks_and_requests_before_readiness_are_not_served_requests():
    assert "HEALTH_CHECK" in REAL and REAL.index("fired up") > REAL.index("POST /generate")
    before_ready = REAL[: REAL.index("fired up")]
    assert parse(before_ready).count == 0 and not parse(before_ready).ready


def test_a_finish_line_without_its_counts_is_not_taken_for_a_request():
    line = [x for x in REAL.splitlines() if "] Finish: obj=" in x and "HEALTH_CHECK" not in x][-1]
    cut = line.replace("'completion_tokens'", "'completion_tokenz'")
    assert parse(REAL.replace(line, cut)).served == ()  # falls back to counting 200 OK POSTs
    assert parse(REAL.replace(line, cut)).count == 1


def test_without_request_logging_only_the_count_of_answered_generations_is_known():
    plain = "\n".join(
        x for x in REAL.splitlines() if "] Finish: obj=" not in x and "] Receive: obj=" not in x
    )
    account = parse(plain)
    assert account.served == () and account.count == 1
