"""Accuracy gate: a GSM8K-style question set shipped in the repo, a threshold per cell.

Probes catch a server that says nonsense; they miss a kernel that is subtly wrong (GSM8K once fell
from 0.925 to 0.000 while short factual prompts still looked right). The gate asks integer-answer
word problems at the mode's concurrency, grades the last number of each answer, and passes only
with accuracy >= threshold *and* zero request errors (an error is not a wrong answer: it is a
broken server).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dayzero.checks import FAILED, PASSED, CheckResult
from dayzero.checks.intervals import proportion_interval
from dayzero.errors import ConfigError
from dayzero.spec.card import AccuracyGate

NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
MARKED = re.compile(r"(?:####|answer is:?)\s*\$?\s*(-?\d[\d,]*(?:\.\d+)?)", re.IGNORECASE)


@dataclass(frozen=True)
class EvalItem:
    id: str
    question: str
    answer: int
    work: str = ""


@dataclass(frozen=True)
class EvalSet:
    name: str
    items: tuple[EvalItem, ...]
    shots: tuple[EvalItem, ...]  # worked examples put before each question, never scored


def load_eval(directory: Path, name: str) -> EvalSet:
    path = Path(directory) / f"{name}.jsonl"
    items, shots = [], []
    where = "line 0"
    try:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            where = f"line {n}"
            if not line.strip():
                continue
            row = json.loads(line)
            item = EvalItem(str(row["id"]), row["question"], int(row["answer"]), row.get("work", ""))
            (shots if row.get("shot") else items).append(item)
    except OSError as exc:
        raise ConfigError(path, "", f"cannot read eval set: {exc.strerror}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(path, where, f"not an eval item ({{id, question, answer}}): {exc}") from None
    return EvalSet(name, tuple(items), tuple(shots))


def request_for(evalset: EvalSet, item: EvalItem, gate: AccuracyGate) -> dict:
    """Temperature 0; few-shot answers show the arithmetic then the result, one line each."""
    if gate.style == "chat":
        return {
            "id": item.id,
            "kind": "chat",
            "prompt": f"{item.question} Finish with 'The answer is N.'",
            "max_tokens": gate.max_tokens,
        }
    shots = "".join(f"Question: {s.question}\nAnswer: {s.work or s.answer}\n\n" for s in evalset.shots)
    return {
        "id": item.id,
        "kind": "completion",
        "prompt": f"{shots}Question: {item.question}\nAnswer:",
        "max_tokens": gate.max_tokens,
        "extra": {"stop": ["\n"]},
    }


def extract_answer(text: str) -> int | float | None:
    """`#### N` or `answer is N` if present, else the last number in the text (GSM8K's rule)."""
    marked = MARKED.findall(text)
    found = marked[-1] if marked else (NUMBER.findall(text) or [None])[-1]
    if found is None:
        return None
    value = float(found.replace(",", ""))
    return int(value) if value.is_integer() else value


def check_accuracy(gate: AccuracyGate, items: Sequence[EvalItem], records: Sequence[Mapping]) -> CheckResult:
    by_id = {r.get("id"): r for r in records}
    errors, correct, wrong = [], 0, []
    for item in items:
        rec = by_id.get(item.id)
        if rec is None or rec.get("error"):
            errors.append(f"{item.id}: {rec.get('error') if rec else 'no record'}")
            continue
        got = extract_answer(rec.get("text") or "")
        if got == item.answer:
            correct += 1
        elif len(wrong) < 10:
            wrong.append(
                {"id": item.id, "expected": item.answer, "got": got, "text": (rec.get("text") or "")[:200]}
            )
    total = len(items)
    accuracy = round(correct / total, 4) if total else 0.0
    problems = []
    if errors:
        problems.append(f"{len(errors)} request error(s) (0 allowed): {errors[0]}")
    if accuracy < gate.threshold:
        problems.append(f"accuracy {accuracy:.3f} below threshold {gate.threshold:g}")
    op = ">=" if accuracy >= gate.threshold else "<"
    message = f"{correct}/{total} correct, accuracy {accuracy:.3f} {op} {gate.threshold:g}"
    return CheckResult(
        gate.name,
        "correctness",
        FAILED if problems else PASSED,
        "; ".join(problems) if problems else message,
        measured=accuracy,
        bound=gate.threshold,
        details={
            "correct": correct,
            "total": total,
            "errors": len(errors),
            "concurrency": gate.concurrency,
            "style": gate.style,
            "wrong_examples": wrong,
            "summary": message,
            "interval": proportion_interval(correct, total).to_json(),  # 95% Wilson, over the questions
        },
    )
