"""Configuration held to what it must be, not to what the vendor calls it.

The weights by the checksum (or, where the card knows none, the size) preflight read on every
host, never by the file name a command gives; the harness version by what its commit says in the
maintainers' checkout; the hosts' leases around every record; and the host facts preflight saw
against the hardware kind the cell claims (an accelerator driver on a cpu cell, or none on a GPU
cell, eight devices where the catalogue has four, memory a kind does not have).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from dayzero.lab.preflight import NO_DRIVER
from dayzero.spec.matrix import Cell, Hardware
from dayzero.submission.bundle import SUBMISSION, Reference, Subject
from dayzero.submission.cellview import known_cell
from dayzero.submission.findings import Finding, short
from dayzero.submission.timeline import when

PLACEHOLDER_DIGEST = "sha256:" + "0" * 64  # what a description gives where it knows no digest
LEASE_SLACK_S = 5.0  # lease times are ISO seconds
MEMORY_SLACK = 0.15  # device tools report GiB of a kind sold in GB, less what firmware keeps


def _hosts(s: Subject, ref: Reference) -> Iterator[tuple[str, dict, Cell, dict]]:
    for name, doc in sorted(s.evidence.items()):
        if (cell := known_cell(ref.matrix, doc["cell"])) is not None:
            for host in doc["hosts"]:
                yield name, doc, cell, host


def _facts(host: dict) -> dict:
    return host.get("facts") if isinstance(host.get("facts"), dict) else {}


def _label(host: dict) -> str:
    return short(host.get("name"), 40)


def model_file_problem(want, seen: list) -> str:
    """Why the files a host held are not the card's file `want` ('' when one is)."""
    same = [f for f in seen if isinstance(f, dict) and f.get("path") == want.path]
    if not same:
        return f"no {want.role} file {want.path} recorded"
    got = same[0]
    if want.sha256 and got.get("sha256") != want.sha256:
        return f"{want.role} file {want.path} has sha256 {short(got.get('sha256'), 70)}"
    if want.size is not None and got.get("size") != want.size:
        return f"{want.role} file {want.path} has {short(got.get('size'))} bytes"
    shards = got.get("shards") if isinstance(got.get("shards"), dict) else {}
    if want.shards and shards != dict(want.shards):  # a checkpoint's pinned shards (lab/weights.py)
        other = sorted(set(shards.items()) ^ set(want.shards.items()))
        return f"{want.role} checkpoint {want.path}: shard {short(other[0][0], 70)} is not the card's pin"
    return ""


def check_model_files(s: Subject, ref: Reference) -> list[Finding]:
    """Every host held the card's weights and draft models, by checksum where the card has one."""
    out = []
    for name, _, cell, host in _hosts(s, ref):
        seen = _facts(host).get("model_files")
        for want in ref.matrix.card(cell).model_files:
            problem = model_file_problem(want, seen if isinstance(seen, list) else [])
            if problem:
                expected = f"sha256 {want.sha256}" if want.sha256 else f"{want.size} bytes"
                out.append(
                    Finding(
                        name,
                        "configuration.model-files",
                        f"{_label(host)}: {problem}",
                        f"{expected} (model card), as preflight read it",
                    )
                )
    return out


def check_harness_version(s: Subject, ref: Reference) -> list[Finding]:
    """The harness version is the one its commit carries in the maintainers' checkout."""
    harness = (s.submission or {}).get("harness") or {}
    commit = harness.get("commit")
    if not commit or ref.version_at is None or (want := ref.version_at(commit)) is None:
        return []  # no commit, or not one of ours: provenance.harness-commit says so
    if harness.get("version") == want:
        return []
    return [
        Finding(
            SUBMISSION,
            "configuration.harness-version",
            f"version {short(harness.get('version'))}",
            f"{want} (dayzero/__init__.py at {commit[:12]})",
        )
    ]


def _record_times(s: Subject, doc: dict) -> list[float]:
    return [
        t
        for rel in doc.get("records", [])
        for r in (s.records.get(rel) or {}).get("records", [])
        for t in (r.get("send"), r.get("end"))
        if isinstance(t, int | float) and not isinstance(t, bool)
    ]


def check_leases(s: Subject, ref: Reference) -> list[Finding]:
    """Every host was leased to the cell while any of its records was taken."""
    out = []
    for name, doc in sorted(s.evidence.items()):
        times = _record_times(s, doc)
        for host in doc["hosts"]:
            lease = host.get("lease") if isinstance(host.get("lease"), dict) else {}
            start, end = when(lease.get("acquired")), when(lease.get("released"))
            if start is None or end is None:
                out.append(
                    Finding(
                        name,
                        "configuration.lease",
                        f"{_label(host)}: lease {short(lease.get('acquired'))} .. "
                        f"{short(lease.get('released'))}",
                        "ISO 8601 acquired and released times",
                    )
                )
                continue
            outside = [t for t in times if not start - LEASE_SLACK_S <= t <= end + LEASE_SLACK_S]
            if outside:
                out.append(
                    Finding(
                        name,
                        "configuration.lease",
                        f"{_label(host)}: {len(outside)} record time(s) outside its lease",
                        f"within {lease['acquired']} .. {lease['released']}",
                    )
                )
    return out


def facts_problem(facts: dict, hw: Hardware, accelerators) -> str:
    """Why preflight's facts are not those of a host of kind `hw` ('' when they fit)."""
    seen, memory, driver = (
        facts.get("accelerators_seen"),
        facts.get("memory_total_gb"),
        facts.get("driver_version"),
    )
    if not isinstance(seen, int) or isinstance(seen, bool):
        return f"accelerators_seen {short(seen)}"
    if hw.device.is_host:  # the host is its one device (a CPU, a Mac): no accelerator driver
        if seen != 1 or driver != hw.device.no_driver:
            return f"{seen} device(s), driver {short(driver)}: an accelerator host's"
        return ""
    if driver in (None, NO_DRIVER):
        return f"driver {short(driver)}: no accelerator driver"
    if seen != accelerators:
        return f"{seen} accelerators seen"
    budget = seen * (hw.memory_gb or 0)
    if budget and not (isinstance(memory, int | float) and abs(memory - budget) <= MEMORY_SLACK * budget):
        return f"{short(memory)} GB of accelerator memory"
    return ""


def check_facts(s: Subject, ref: Reference) -> list[Finding]:
    """What preflight saw on each host is what a host of the claimed kind shows."""
    out = []
    for name, _, cell, host in _hosts(s, ref):
        hw = ref.matrix.hardware[cell.hardware]
        if problem := facts_problem(_facts(host), hw, host.get("accelerators")):
            per = f"{hw.accelerators_per_node or '?'} x {hw.memory_gb or '?'} GB"
            device = hw.device
            kind = (
                f"1 device ({device.name}), driver {device.no_driver}"
                if device.is_host
                else f"{per}, a driver"
            )
            out.append(
                Finding(
                    name,
                    "configuration.facts",
                    f"{_label(host)}: {problem}",
                    f"the facts of a {cell.hardware} host: {kind}",
                )
            )
    return out


def collected_images(docs) -> dict[str, set[str]]:
    """Each engine's container images as its runs recorded them (the runtime's resolved name,
    digest included; a run outside a container records none). Pure."""
    images: dict[str, set[str]] = {}
    for doc in docs:
        engine = doc.get("engine") if isinstance(doc.get("engine"), dict) else {}
        if isinstance(engine.get("name"), str) and isinstance(engine.get("image"), str):
            images.setdefault(engine["name"], set()).add(engine["image"])
    return images


def image_problem(said, images: set[str]) -> str:
    """Why a described engine's `image_digest` is not one its runs had ("" where it may be): an
    all-zero placeholder, or a digest none of the images its runs recorded carries. Pure."""
    if said == PLACEHOLDER_DIGEST:
        seen = f"its runs used {short(', '.join(sorted(images)))}" if images else "its runs recorded no image"
        return f"a digest of what ran, not a placeholder of zeros ({seen})"
    digests = {d for image in images for d in re.findall(r"sha256:[0-9a-f]{64}", image)}
    if digests and said not in digests:
        return f"the digest of the image its runs used: {short(', '.join(sorted(digests)))}"
    return ""


def _collected(s: Subject, ref: Reference) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """What the harness collected: each kind's drivers (its hosts' facts), each engine's versions."""
    drivers: dict[str, set[str]] = {}
    for _, _, cell, host in _hosts(s, ref):
        if isinstance(driver := _facts(host).get("driver_version"), str):
            drivers.setdefault(cell.hardware, set()).add(driver)
    versions: dict[str, set[str]] = {}
    for doc in s.evidence.values():
        engine = doc.get("engine") if isinstance(doc.get("engine"), dict) else {}
        if isinstance(engine.get("name"), str) and isinstance(engine.get("version"), str):
            versions.setdefault(engine["name"], set()).add(engine["version"])
    return drivers, versions


def check_system(s: Subject, ref: Reference) -> list[Finding]:
    """The system description agrees with what the harness collected: a kind's driver is the one
    preflight read on its hosts (none on a cpu host), an engine's version the one its runs
    recorded, its image digest one of the images they ran in (never a placeholder of zeros). A
    description fills what cannot be collected; it never says otherwise."""
    system = (s.submission or {}).get("system")
    if not isinstance(system, dict):
        return []
    drivers, versions = _collected(s, ref)
    out = []
    for kind, fields in sorted((system.get("hardware") or {}).items()):
        said = fields.get("driver") if isinstance(fields, dict) else None
        for seen in sorted(drivers.get(kind, ())) if isinstance(said, str) else ():
            if (said == NO_DRIVER) != (seen == NO_DRIVER) or (seen != NO_DRIVER and seen not in said):
                found = f"system.hardware.{short(kind, 40)}.driver {short(said)}"
                out.append(
                    Finding(
                        SUBMISSION, "configuration.system", found, f"the driver its hosts had: {short(seen)}"
                    )
                )
    images = collected_images(s.evidence.values())
    for i, engine in enumerate(system.get("engines") or []):
        name, said = (engine.get("name"), engine.get("version")) if isinstance(engine, dict) else (None, None)
        if (seen := versions.get(name)) and said not in seen:
            found = f"system.engines[{i}].version {short(said)} ({short(name, 40)})"
            expected = f"the version its runs recorded: {short(', '.join(sorted(seen)))}"
            out.append(Finding(SUBMISSION, "configuration.system", found, expected))
        digest = engine.get("image_digest") if isinstance(engine, dict) and name in versions else None
        if digest is not None and (expected := image_problem(digest, images.get(name, set()))):
            found = f"system.engines[{i}].image_digest {short(digest)} ({short(name, 40)})"
            out.append(Finding(SUBMISSION, "configuration.system", found, expected))
    return out


CHECKS = (check_model_files, check_harness_version, check_leases, check_facts, check_system)
