"""Tool-call and reasoning conformance: a shipped suite of tool-use prompts, checked per answer.

A suite (`suites/tools/<name>.yaml`) lists tools with their JSON Schemas and cases that offer
some of them (OpenAI `tools`, tool_choice auto) and say whether a call is expected. The phase's
raw records carry each answer's streamed `tool_calls`, `finish_reason` and `reasoning`; from them:

- `tools:finish_reason@<suite>`: answers to cases expecting a call that end with finish_reason
  "tool_calls" (a call returned under "stop" is a client-breaking answer too);
- `tools:arguments@<suite>`: calls that name an offered tool and whose arguments parse as JSON and
  validate against its schema (jsonschema);
- `tools:trigger@<suite>`: whether each case called a tool, against the reference cell's recorded
  answers (`dayzero golden record`): precision, recall and F1 with the reference's calls as the
  positives, as MoonshotAI's K2-Vendor-Verifier reports a vendor against the official API. A case
  that disagrees on its first token at a near-tie (the reference's recording and this answer both
  hold the two tokens within the bound: `dayzero.checks.near_tie`) is left out and named: to call
  or not is then numeric noise, as a near-tie in a golden is (SmolLM2 on vLLM: `<` -2.484 against
  `B` -2.609 for "the weather in Berlin and in Madrid");
- `tools:reasoning@<suite>` (only where the card says a reasoning parser is set): the reasoning
  comes back in its own field, and no reasoning marker is left in the content.

Pure apart from `load_suite`; the thresholds are the card's (`ToolCallRule`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from dayzero.checks import FAILED, NOT_MEASURED, PASSED, CheckResult
from dayzero.checks.near_tie import compare_steps, steps
from dayzero.errors import ConfigError
from dayzero.spec.card import ToolCallRule

CALL, NONE = "call", "none"
KINDS = ("single", "parallel", "none", "nested")


@dataclass(frozen=True)
class ToolCase:
    id: str
    kind: str
    prompt: str
    tools: tuple[str, ...]
    expect: str  # call | none


@dataclass(frozen=True)
class ToolSuite:
    name: str
    tools: Mapping[str, Mapping[str, Any]]  # name -> {description, parameters (JSON Schema)}
    cases: tuple[ToolCase, ...]

    def offered(self, case: ToolCase) -> list[dict]:
        """The case's tools as an OpenAI `tools` list."""
        return [
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": self.tools[name].get("description", ""),
                    "parameters": self.tools[name]["parameters"],
                },
            }
            for name in case.tools
        ]


def load_suite(directory: Path, name: str) -> ToolSuite:
    """A suite file, its cases' tools checked against its tools and each schema checked as one."""
    path = Path(directory) / f"{name}.yaml"
    if not path.exists():
        raise ConfigError(path, "", f"no tool-use suite {name!r} (expected {path})")
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(path, "", f"cannot read tool-use suite: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("tools"), dict):
        raise ConfigError(path, "tools", "expected a mapping of tool name -> {description, parameters}")
    tools = data["tools"]
    for tool, spec in tools.items():
        try:
            jsonschema.validators.validator_for(spec["parameters"]).check_schema(spec["parameters"])
        except (KeyError, TypeError, jsonschema.SchemaError) as exc:
            raise ConfigError(path, f"tools.{tool}.parameters", f"expected a JSON Schema: {exc}") from None
    cases = []
    for i, c in enumerate(data.get("cases") or ()):
        unknown = [t for t in c.get("tools", ()) if t not in tools]
        if unknown or c.get("expect") not in (CALL, NONE) or c.get("kind") not in KINDS:
            raise ConfigError(
                path,
                f"cases[{i}]",
                f"expected tools among {sorted(tools)}, expect call|none and kind one of {KINDS}; "
                f"got tools {c.get('tools')}, expect {c.get('expect')!r}, kind {c.get('kind')!r}",
            )
        cases.append(ToolCase(c["id"], c["kind"], c["prompt"], tuple(c["tools"]), c["expect"]))
    if not cases:
        raise ConfigError(path, "cases", "expected at least one case")
    return ToolSuite(name, tools, tuple(cases))


def request_for(suite: ToolSuite, case: ToolCase, rule: ToolCallRule) -> dict:
    return {
        "id": case.id,
        "kind": "chat",
        "tag": f"tools-{case.kind}",
        "prompt": case.prompt,
        "max_tokens": rule.max_tokens,
        "extra": {"tools": suite.offered(case), "tool_choice": "auto"},
    }


def answers(records: Sequence[Mapping]) -> dict[str, list[str]]:
    """What each case answered, as a reference keeps it: the names of the tools it called."""
    return {r["id"]: [c.get("name", "") for c in r.get("tool_calls") or ()] for r in records}


def _ratio(good: int, total: int) -> float | None:
    return round(good / total, 4) if total else None


def _verdict(value: float | None, bound: float, problems: list[str]) -> str:
    return FAILED if problems or value is None or value < bound else PASSED


def check_finish_reason(suite: ToolSuite, records: Sequence[Mapping], bound: float) -> CheckResult:
    expected = {c.id for c in suite.cases if c.expect == CALL}
    got = [r for r in records if r["id"] in expected]
    wrong = {
        r["id"]: r.get("error") or f"finish_reason {r.get('finish_reason')!r}"
        for r in got
        if r.get("error") or r.get("finish_reason") != "tool_calls"
    }
    share = _ratio(len(got) - len(wrong), len(expected))
    problems = [f"{len(expected) - len(got)} expected answer(s) missing"] if len(got) < len(expected) else []
    shown = "-" if share is None else f"{share:.2f}"
    return CheckResult(
        f"tools:finish_reason@{suite.name}",
        "correctness",
        _verdict(share, bound, problems),
        f"{len(got) - len(wrong)}/{len(expected)} answers expected to call a tool ended with "
        f"finish_reason tool_calls ({shown}, bound {bound:g})" + "".join(f"; {p}" for p in problems),
        measured=share,
        bound=bound,
        details={"wrong": wrong},
    )


def call_problem(suite: ToolSuite, case: ToolCase, call: Mapping) -> str | None:
    """Why one returned call is unusable by a client, or None."""
    name = call.get("name")
    if name not in case.tools:
        return f"calls {name!r}, not one of the offered tools {list(case.tools)}"
    try:
        arguments = json.loads(call.get("arguments") or "")
    except ValueError as exc:
        return (
            f"{name}: arguments are not JSON ({exc.msg} at {exc.pos}): {str(call.get('arguments'))[:120]!r}"
        )
    schema = suite.tools[name]["parameters"]
    error = jsonschema.exceptions.best_match(
        jsonschema.validators.validator_for(schema)(schema).iter_errors(arguments)
    )
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top)"
        return f"{name}: arguments break its schema at {where}: {error.message}"
    return None


def check_arguments(suite: ToolSuite, records: Sequence[Mapping], bound: float) -> CheckResult:
    cases = {c.id: c for c in suite.cases}
    calls = [(r["id"], call) for r in records if r["id"] in cases for call in r.get("tool_calls") or ()]
    problems = {}
    for i, (case_id, call) in enumerate(calls):
        if (why := call_problem(suite, cases[case_id], call)) is not None:
            problems[f"{case_id}#{i}"] = why
    share = _ratio(len(calls) - len(problems), len(calls))
    first = next(iter(problems.items()), None)
    message = (
        f"{len(calls) - len(problems)}/{len(calls)} tool calls named an offered tool with arguments "
        f"valid against its schema (bound {bound:g})"
        if calls
        else "no tool call was returned: nothing to validate"
    )
    if first:
        message += f"; {first[0]}: {first[1]}"
    return CheckResult(
        f"tools:arguments@{suite.name}",
        "correctness",
        NOT_MEASURED if not calls else _verdict(share, bound, []),
        message,
        measured=share,
        bound=bound,
        details={"calls": len(calls), "invalid": problems},
    )


def agreement(reference: Mapping[str, Sequence[str]], got: Mapping[str, Sequence[str]]) -> dict:
    """Tool-call trigger agreement with the reference (its calls are the positives)."""
    tp = sum(1 for k in reference if reference[k] and got.get(k))
    fp = sum(1 for k in reference if not reference[k] and got.get(k))
    fn = sum(1 for k in reference if reference[k] and not got.get(k))
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": len(reference) - tp - fp - fn,
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "f1": round(f1, 4),
        "disagree": sorted(k for k in reference if bool(reference[k]) != bool(got.get(k))),
    }


def first_token_ties(
    reference: Mapping[str, Sequence[str]],
    records: Sequence[Mapping],
    reference_steps: Mapping[str, list] | None,
) -> dict[str, dict]:
    """Cases that disagree with the reference on calling at all, where the two answers part at
    their first token at a near-tie under both recordings: case -> the divergence. Only the first
    token: beyond it an answer could be made to part from the reference at any near-tie of the
    reference's own answer, which says nothing about the decision to call."""
    out = {}
    for r in records:
        case = r.get("id")
        if case not in reference or bool(reference[case]) == bool(r.get("tool_calls")):
            continue
        want, got = steps((reference_steps or {}).get(case)), steps(r.get("logprobs"))
        if not want or not got:
            continue
        c = compare_steps(want[:1], got[:1])
        if c.tolerated:
            out[case] = dict(c.details["divergence"])
    return out


def check_trigger(
    suite: ToolSuite,
    records: Sequence[Mapping],
    reference: Mapping[str, Sequence[str]] | None,
    reference_cell: str,
    bound: float,
    reference_steps: Mapping[str, list] | None = None,
) -> CheckResult:
    name = f"tools:trigger@{suite.name}"
    wanted = {c.id for c in suite.cases}
    if not reference or not wanted <= set(reference):
        return CheckResult(
            name,
            "correctness",
            NOT_MEASURED,
            f"tool-call answers not recorded on the reference cell {reference_cell} (dayzero golden record)",
            bound=bound,
            details={"reference_cell": reference_cell},
        )
    ties = first_token_ties({k: reference[k] for k in wanted}, records, reference_steps)
    got = {k: v for k, v in answers(records).items() if k in wanted and k not in ties}
    stats = agreement({k: reference[k] for k in sorted(wanted - set(ties))}, got)
    errors = [r["id"] for r in records if r.get("error")]
    problems = [f"{len(errors)} request error(s)"] if errors else []
    return CheckResult(
        name,
        "correctness",
        _verdict(stats["f1"], bound, problems),
        f"tool-call trigger F1 {stats['f1']:.2f} against {reference_cell} (precision "
        f"{stats['precision']:.2f}, recall {stats['recall']:.2f}; bound {bound:g})"
        + (f"; disagree on {', '.join(stats['disagree'])}" if stats["disagree"] else "")
        + (f"; left out at a first-token near-tie: {', '.join(sorted(ties))}" if ties else "")
        + "".join(f"; {p}" for p in problems),
        measured=stats["f1"],
        bound=bound,
        details={**stats, "reference_cell": reference_cell, **({"near_ties": ties} if ties else {})},
    )


def check_reasoning(
    suite: ToolSuite, records: Sequence[Mapping], bound: float, markers: Sequence[str]
) -> CheckResult:
    """With a reasoning parser set, every answer's thinking is in `reasoning`, none in the content."""
    answered = [r for r in records if not r.get("error")]
    leaked = [r["id"] for r in answered if any(m in (r.get("text") or "") for m in markers)]
    missing = [r["id"] for r in answered if not (r.get("reasoning") or "").strip()]
    bad = set(leaked) | set(missing)
    share = _ratio(len(answered) - len(bad), len(records))
    parts = []
    if missing:
        parts.append(f"no reasoning field: {', '.join(missing[:5])}")
    if leaked:
        parts.append(f"reasoning markers in the content: {', '.join(leaked[:5])}")
    return CheckResult(
        f"tools:reasoning@{suite.name}",
        "correctness",
        _verdict(share, bound, []),
        f"{len(answered) - len(bad)}/{len(records)} answers returned their reasoning in its own field "
        f"(bound {bound:g})" + "".join(f"; {p}" for p in parts),
        measured=share,
        bound=bound,
        details={"missing": missing, "leaked": leaked, "markers": list(markers)},
    )


def check_names(rule: ToolCallRule, suite: ToolSuite) -> list[str]:
    """The checks `check_tool_calls` makes of one suite, in its order (the checker expects them)."""
    kinds = ["finish_reason", "arguments", "trigger"] + (["reasoning"] if rule.reasoning else [])
    return [f"tools:{kind}@{suite.name}" for kind in kinds]


def check_tool_calls(
    rule: ToolCallRule,
    suite: ToolSuite,
    records: Sequence[Mapping],
    reference: Mapping[str, Sequence[str]] | None,
    reference_cell: str,
    reference_steps: Mapping[str, list] | None = None,
) -> list[CheckResult]:
    """Every check of one suite's answers, with the card's thresholds; `reference_steps`: the
    reference answers' first-token log-probabilities (case -> steps), where recorded."""
    out = [
        check_finish_reason(suite, records, rule.min_finish_reason),
        check_arguments(suite, records, rule.min_valid_arguments),
        check_trigger(suite, records, reference, reference_cell, rule.min_trigger_f1, reference_steps),
    ]
    if rule.reasoning:
        out.append(check_reasoning(suite, records, rule.min_reasoning, rule.reasoning_markers))
    return out
