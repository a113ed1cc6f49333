"""What dayzero asks of a serving engine: the one protocol every engine module implements.

An engine is an `Engine` (subclass it; override what differs from the defaults), registered
under its card name (`engine.name` in a model card) by the `dayzero.engines` entry point group:
dayzero's own (llama.cpp, SGLang with its router, vLLM) and a vendor's package alike. Nothing
outside `dayzero.engines` compares an engine's name: it asks the engine.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from dayzero.engines.account import ServerAccount
from dayzero.engines.memory import EngineMemory
from dayzero.engines.prometheus import SpecCounters, Totals
from dayzero.engines.template import CardTemplate

# Run in an engine's virtualenv by `dayzero lint`: argparse parsers read there (SGLang's, vLLM's).
ARGV_SCRIPT = resources.files("dayzero.engines").joinpath("argv_script.py")

# What a launch of a cell is to the engine's account (`Engine.launch_part`).
SERVER, RANK, ROUTER, DISAGGREGATED = "server", "rank", "router", "prefill/decode"


def venv_python(env: str, venv: Path) -> Path:
    """An engine virtualenv's interpreter, outside dayzero's own: `$env` where set, else the
    cached venv's (tools/build-*)."""
    return Path(os.environ.get(env) or Path(venv) / "bin" / "python")


@dataclass(frozen=True)
class ArgvParser:
    """One of the engine's own argument parsers, which `dayzero lint` hands its commands to.

    Either a Python parser run by `script` in the engine's own virtualenv (`python`), all of a
    run's commands in one call (JSON in, findings out: `dayzero/engines/argv_script.py` is the
    protocol), or `read`: a program's own table read in-process (llama.cpp's `--help`).
    """

    kind: str  # its name in findings and in lint's cache of answers
    pin: tuple[str, str]  # (the card's engine field, the package) that pins the version it reads
    launchers: tuple[tuple[str, ...], ...] = ()  # argv heads that start a command it reads
    programs: tuple[str, ...] = ()  # or the program itself, argv[0]'s basename
    fronts_any_engine: bool = False  # a router: it reads its command in any engine's cells
    python: Callable[[], Path] | None = None  # the interpreter `script` runs in
    script: Traversable = ARGV_SCRIPT
    setup_hint: str = "tools/setup"  # what builds the parser's environment
    read: Callable[[str, Sequence[str], str], list[dict]] | None = None  # (version, argv, program)
    builds: tuple[str, ...] = ()  # the engine's other builds (GPU vs CPU package) its flags are the same in

    def start(self, argv: Sequence[str]) -> int | None:
        """Where its arguments start in `argv`, or None when this parser does not read it."""
        if argv and self.programs and Path(argv[0]).name in self.programs:
            return 1
        for head in self.launchers:
            for at in range(len(argv) - len(head) + 1):
                if tuple(argv[at : at + len(head)]) == head:
                    return at + len(head)
        return None


class Engine:
    """The defaults are an engine that publishes nothing dayzero can read: every check that
    needs a counter or a log then reports "not measured", never a pass."""

    name: str = ""
    display: str = ""  # how reports name it
    metrics_prefix: str = ""  # every series of its /metrics starts with this
    parsers: tuple[ArgvParser, ...] = ()
    bench_tool: str | None = None  # the benchmark client whose result files `dayzero import` reads
    # Launch facts its log states (`parse_log` reads them); a recipe flag of one it leaves out is
    # a finding. Flags are the card's names: slots, threads, model.
    logged_facts: tuple[str, ...] = ()
    logs_devices: bool = False  # its log names the accelerator devices it used
    # Its /metrics count prompt tokens less cached ones: the client's records must carry cached.
    counts_evaluated_prompt: bool = False
    counts_requests: bool = False  # its /metrics count finished requests
    # Each streamed chunk carries the tokens of one decode step or more (vLLM, SGLang), so its
    # accepted draft tokens are at most generated less chunks; llama-server streams every token
    # as its own chunk, so its chunks say nothing of its steps.
    streams_whole_steps: bool = False
    # Its log prints every launch argument (SGLang's server_args), not only those off their
    # default (vLLM's non-default args): an argument it prints and the recipe leaves out is then
    # the engine's default, not another launch's.
    logs_every_arg: bool = False
    # Its log and /metrics are read into its own account (`parse_log`, `totals`): the submission
    # checker holds a bundle's records to them; a bundle of an engine without is rejected.
    accounted: bool = False
    rank_label: str = "a non-endpoint rank"  # what a rank 1..N-1 launch is, in findings
    # Its /metrics carry a TTFT histogram (`Totals.ttft_s`, `first_tokens`): the server gap's account.
    ttft_histogram: bool = False
    # The most top log-probabilities it returns with each generated token on its OpenAI-compatible
    # API (`logprobs: true, top_logprobs: k`, streamed): probes ask for them and goldens are then
    # compared token by token with near-ties (dayzero.checks.near_tie); 0: by text alone.
    top_logprobs: int = 0
    # It returns them with tool calls too (a call / no-call near-tie is then judged by them); off
    # where asking for them changes the answer (llama-server: 0 of 6 calls with them, 3 of 6 without).
    logprobs_with_tools: bool = True
    # The flags setting its cache's element types and its share of device memory (`dayzero fit`).
    memory: EngineMemory = EngineMemory()
    # What `dayzero card new` writes for it (None: no template; the card names it for a person to fill).
    card_template: CardTemplate | None = None

    # Why it cannot score a given text (teacher forcing a golden, dayzero.checks.forced); "" where
    # it can: `score_calls` are what the loadgen client sends, `scored` reads their answers.
    cannot_score: str = "its API returns no log-probabilities of a given text"

    def score_calls(self, prompt: str, continuation: str, top: int) -> list[dict]:
        """The calls ({path, body, prompt_from}) that score `continuation` as the assistant's
        answer to the chat `prompt`, `top` alternatives a token ([] where it cannot)."""
        return []

    def scored(self, responses: Sequence[Mapping]) -> list[list] | None:
        """[token, logprob, rank] of every scored prompt token, read from the answers to
        `score_calls` (None where they do not hold them)."""
        return None

    def serves_metrics(self, argv: Sequence[str]) -> bool:
        """This launch serves /metrics (read around every phase)."""
        return False

    def totals(self, text: str) -> Totals | None:
        """One target's cumulative counters, or None when `text` is not this engine's /metrics."""
        return None

    def launch_args(self, command: str) -> dict[str, str] | None:
        """A launch command's arguments in the form its log prints them (`ServerAccount.args`),
        so that the log's launch is held to the recipe's; None where its log prints none."""
        return None

    def spec_counters(self, text: str) -> SpecCounters | None:
        """Speculative decoding's counters in one snapshot; None where it publishes none."""
        return None

    def parse_log(self, text: str) -> ServerAccount | None:
        """A server's log as the engine's own account of the requests it served."""
        return None

    def parse_rank_log(self, text: str) -> ServerAccount | None:
        """A rank 1..N-1 launch's log: `listen` where it serves, `ready` that it is such a rank."""
        return None

    def parse_router_log(self, text: str) -> ServerAccount | None:
        """A router launch's log (routers this engine ships): the requests it answered."""
        return None

    def launch_part(self, argv: Sequence[str]) -> str | None:
        """What this launch is (RANK, ROUTER, DISAGGREGATED) when it is not a plain SERVER."""
        return None

    def local_image(self) -> dict:
        """This machine's install of the engine, as a bundle records it in place of an image
        digest ({"image", "image_digest"}); {} where it is not installed here."""
        return {}

    @staticmethod
    def image_of(what: str, path: Path) -> dict:
        """A local install as an image: `what` it is, and the sha256 of the file that identifies it."""
        with Path(path).open("rb") as f:
            return {"image": what, "image_digest": "sha256:" + hashlib.file_digest(f, "sha256").hexdigest()}

    def venv_image(self, venv: Path, dist: str, built_by: str) -> dict:
        """An install in a virtualenv as an image: the RECORD of `dist` (every installed file with
        its hash) names it; {} where it is not installed."""
        found = sorted(Path(venv).glob(f"lib/python3*/site-packages/{dist}-*.dist-info/RECORD"))
        if not found:
            return {}
        release = found[0].parent.name.removesuffix(".dist-info")
        return self.image_of(f"{self.display} installed by {built_by} ({release})", found[0])

    def __repr__(self) -> str:
        return f"<engine {self.name}>"
