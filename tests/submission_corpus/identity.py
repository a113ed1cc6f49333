"""Forgeries of inputs and identity (issue 23 items 4 and 5): each is what a vendor holding its own
key could build from an honest bundle, re-signed, with the evidence recomputed where it matters."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .hostile import Members, consistent, edited, evidence_name, perf_file
from .lab import Lab
from .tarkit import edit_json


@dataclass(frozen=True)
class IdentityCase:
    id: str
    requirement: str
    build: Callable[[Lab, Path], Path]
    file_suffix: str = ""  # the finding names a file ending so


def _perf(members: Members) -> str:
    return perf_file(members, evidence_name(members))


def digest_of_another_prompt(members: Members) -> Members:
    """One record says it asked for a prompt the workload never generated."""

    def change(doc):
        doc["records"][0]["prompt_digest"] = hashlib.sha256(b"a shorter prompt").hexdigest()

    return edit_json(members, _perf(members), change)


def shorter_prompts(members: Members) -> Members:
    """Every prompt half as long as the workload's, and the records saying so consistently."""

    def change(doc):
        for r in doc["records"]:
            r["input_len"] //= 2
            r["usage"]["prompt_tokens"] //= 2

    return edit_json(members, _perf(members), change)


def prompts_counted_short(members: Members) -> Members:
    """The workload's lengths kept, the server's count halved (prefill work the run never did)."""

    def change(doc):
        for r in doc["records"]:
            r["usage"]["prompt_tokens"] //= 2

    return edit_json(members, _perf(members), change)


def client_without_digests(members: Members) -> Members:
    """Records of a host client older than version 4: nothing ties them to the prompts sent."""

    def change(doc):
        doc["client"]["version"] = 3
        for r in doc["records"]:
            r.pop("prompt_digest", None)

    return edit_json(members, _perf(members), change)


def one_run_two_cells(members: Members) -> Members:
    """One cell's measured phase claimed again as another cell's (the plan asks both the same
    requests): the records are the first cell's, byte for byte."""
    import json

    named = {}
    for name in sorted(n for n in members if n.startswith("evidence/")):
        for rel in json.loads(members[name])["records"]:
            if rel.endswith("-c1-r0.json") and "/records/perf-" in rel:
                named.setdefault(rel.rsplit("/", 1)[1], []).append(rel)
    source, target = next(rels for rels in named.values() if len(rels) > 1)[:2]
    return {**members, target: members[source]}


def reserialised(members: Members) -> Members:
    """Every records file re-encoded (indented, keys sorted): new bytes, the same run."""
    import json

    out = dict(members)
    for name, data in members.items():
        if "/records/" in name and not name.endswith(".metrics.json"):
            out[name] = json.dumps(json.loads(data), indent=1, sort_keys=True).encode()
    return out


def _each_evidence(change) -> Callable[[Members], Members]:
    def edit(members: Members) -> Members:
        for name in sorted(n for n in members if n.startswith("evidence/")):
            members = edit_json(members, name, change)
        return members

    return edit


def _facts(change) -> Callable[[Members], Members]:
    def each(doc):
        for host in doc["hosts"]:
            change(host["facts"])

    return _each_evidence(each)


def _other_weights(facts):
    facts["model_files"][0]["sha256"] = hashlib.sha256(b"another model").hexdigest()


def _gpu_facts(facts):
    facts.update(driver_version="570.86.15", accelerators_seen=8, memory_total_gb=1128.0)


def _no_facts(facts):
    facts.pop("accelerators_seen", None)


def _lease_short(doc):
    for host in doc["hosts"]:
        host["lease"]["released"] = doc["run"]["started"]


def harness_version(members: Members) -> Members:
    """A version the harness commit never had, said alike by the submission and every run."""
    members = _each_evidence(lambda doc: doc["run"].update(harness_version="9.9.9"))(members)
    return edit_json(members, "submission.json", lambda doc: doc["harness"].update(version="9.9.9"))


def _system(change: Callable[[dict], None]) -> Callable[[Members], Members]:
    return lambda members: edit_json(members, "submission.json", lambda doc: change(doc["system"]))


def _gpu_driver(system: dict) -> None:
    """Issue 45: a cpu run's description said "NVIDIA driver, CUDA 13.0" and was accepted."""
    system["hardware"]["cpu"]["driver"] = "NVIDIA 580.65.06, CUDA 13.0"


def _other_engine_version(system: dict) -> None:
    system["engines"][0]["version"] = "b9999 (described, not run)"


def _placeholder_digest(system: dict) -> None:
    """Issue 45: a cpu run (no image collected) described with an all-zero image digest."""
    system["engines"][0]["image_digest"] = "sha256:" + "0" * 64


CASES = [
    IdentityCase("prompt-digest-of-another-prompt", "inputs.digest", edited(digest_of_another_prompt, True)),
    IdentityCase("prompts-shortened-recomputed", "inputs.length", consistent(shorter_prompts), "-r0.json"),
    IdentityCase("prompt-tokens-halved-recomputed", "inputs.length", consistent(prompts_counted_short)),
    IdentityCase("client-without-digests", "inputs.client-version", edited(client_without_digests, True)),
    IdentityCase(
        "weights-of-another-checksum", "configuration.model-files", edited(_facts(_other_weights), True)
    ),
    IdentityCase(
        "weights-not-recorded",
        "configuration.model-files",
        edited(_facts(lambda f: f.pop("model_files")), True),
    ),
    IdentityCase(
        "harness-version-not-its-commits", "configuration.harness-version", edited(harness_version, True)
    ),
    IdentityCase(
        "lease-released-before-the-records", "configuration.lease", edited(_each_evidence(_lease_short), True)
    ),
    IdentityCase("gpu-facts-for-a-cpu-cell", "configuration.facts", edited(_facts(_gpu_facts), True)),
    IdentityCase("facts-missing", "configuration.facts", edited(_facts(_no_facts), True)),
    IdentityCase("system-driver-not-its-hosts", "configuration.system", edited(_system(_gpu_driver), True)),
    IdentityCase(
        "system-engine-version-not-its-runs",
        "configuration.system",
        edited(_system(_other_engine_version), True),
    ),
    IdentityCase(
        "system-image-digest-placeholder", "configuration.system", edited(_system(_placeholder_digest), True)
    ),
    IdentityCase("one-run-backs-two-cells", "identity.one-run", consistent(one_run_two_cells), "-c1-r0.json"),
]
