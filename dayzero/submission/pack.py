"""`dayzero submission pack`: a closed, signed set of files from a reports directory.

Evidence (the latest run per cell), the raw records and server logs it names, a system
description, the harness version with proof of a clean tree, the matrix digest, a manifest with
the sha256 of every file, and an SSH signature of the manifest. The checker trusts none of the
summaries in it; they are packed so that it can show what the raw records do not support.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import platform
import shutil
import socket
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

import jsonschema

from dayzero import __version__, engines, evidence
from dayzero.clock import moment
from dayzero.errors import DayzeroError
from dayzero.spec import yamlfile
from dayzero.spec.matrix import Matrix
from dayzero.spec.recipe import digest
from dayzero.submission.bundle import (
    MANIFEST,
    SCHEMA_VERSION,
    SUBMISSION,
    VENDOR,
    in_layout,
    sha256_file,
)
from dayzero.submission.configuration import collected_images, image_problem
from dayzero.submission.provenance import matrix_digest
from dayzero.submission.signature import sign


class PackError(DayzeroError):
    """The reports cannot be packed as asked (dirty tree, nothing to pack, incomplete description)."""


@dataclass(frozen=True)
class Harness:
    version: str
    commit: str
    status: str  # git status --porcelain

    @property
    def clean(self) -> bool:
        return bool(self.commit) and not self.status


def _git(root: Path, *args: str) -> tuple[bool, str]:
    try:
        result = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return result.returncode == 0, result.stdout


def harness_state(root: Path) -> Harness:
    """HEAD and `git status --porcelain` of the harness checkout (untracked files count as dirty)."""
    ok, head = _git(root, "rev-parse", "HEAD")
    if not ok:
        return Harness(__version__, "", f"?? {root} is not a git checkout\n")
    ok, status = _git(root, "status", "--porcelain")
    return Harness(__version__, head.strip(), status if ok else "?? git status failed\n")


def select_evidence(reports_dir: Path, cells: list[str] | None = None) -> list[tuple[Path, dict]]:
    """The latest run of each cell that this harness produced (never evidence accepted from others)."""
    latest: dict[str, tuple[Path, dict]] = {}
    for path, doc in evidence.iter_evidence(reports_dir):
        if doc.get("submission") or (cells and doc["cell"] not in cells):
            continue
        seen = latest.get(doc["cell"])
        if seen is None or moment(doc["run"]["finished"]) > moment(seen[1]["run"]["finished"]):
            latest[doc["cell"]] = (path, doc)
    missing = sorted(set(cells or ()) - set(latest))
    if missing:
        raise PackError(f"no evidence in {reports_dir} for {', '.join(missing)}")
    if not latest:
        raise PackError(f"no evidence in {reports_dir}/evidence to pack")
    return [latest[c] for c in sorted(latest)]


def _memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def controller_facts() -> dict:
    return {
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "memory_gb": _memory_gb(),
    }


def local_engine_image(name: str) -> dict:
    """The embedded default's engines are local installs: what identifies the install (the
    llama-server binary, an engine venv's RECORD of every installed file's hash) stands in for an
    image digest (`Engine.local_image`)."""
    engine = engines.find(name)
    return engine.local_image() if engine is not None else {}


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        out[key] = (
            _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
        )
    return out


def describe_system(matrix: Matrix, docs: list[dict], vendor: str, overrides: dict | None = None) -> dict:
    """Hardware, driver, engines (version, image, digest) and host facts; the vendor's file fills gaps."""
    overrides = dict(overrides or {})
    hardware = {}
    for name in sorted({d["hardware"] for d in docs}):
        hw = matrix.hardware[name]
        hardware[name] = {
            "accelerator": hw.display_name or hw.name,
            "vendor": hw.vendor,
            "accelerators_per_node": hw.accelerators_per_node,
            "memory_gb": hw.memory_gb,
            "device_query": hw.device_query,
            **({"driver": hw.device.no_driver} if hw.device.is_host else {}),
        }
    engine_overrides = {e.get("name"): e for e in overrides.pop("engines", []) if isinstance(e, dict)}
    engines = []
    for name, version in sorted({(d["engine"]["name"], d["engine"]["version"]) for d in docs}):
        engines.append(
            {"name": name, "version": version, **local_engine_image(name), **engine_overrides.get(name, {})}
        )
    hosts = {}
    for d in docs:
        for h in d["hosts"]:
            hosts.setdefault(
                h["name"], {k: h[k] for k in ("name", "hardware", "accelerators", "facts") if k in h}
            )
    if problems := _unused(hardware, docs, overrides, engine_overrides):
        raise PackError(
            "--system FILE describes what no run packed used: "
            + "; ".join(problems)
            + " (remove it there, or pack evidence of it)"
        )
    if problems := _replaced(hardware, docs, overrides, engine_overrides):
        raise PackError(
            "--system FILE contradicts what the harness collected: "
            + "; ".join(problems)
            + " (a description fills what cannot be collected; it never replaces it)"
        )
    system = {
        "system_name": f"{vendor} {socket.gethostname()}",
        "hardware": hardware,
        "engines": engines,
        "hosts": [hosts[n] for n in sorted(hosts)],
        "controller": controller_facts(),
    }
    return _merge(system, overrides)


def _refusal(exc: jsonschema.ValidationError, submission: dict, given: dict) -> str:
    """Why submission.json is refused, blaming its real source: a value of `--system FILE`, or
    one pack collected (the evidence, this machine), which the file can only fill where absent."""
    path = list(exc.absolute_path)
    where = "/".join(str(p) for p in path)
    what = exc.message
    if exc.validator == "pattern" and "sha256" in str(exc.validator_value):
        what = f"expected 'sha256:' and 64 hex digits (an image's digest), got {exc.instance!r}"
    if path[:1] == ["system"] and _given(given, submission["system"], path[1:]):
        return f"submission.json {where}: {what} (as --system FILE gives it: correct it there)"
    if path[:1] == ["system"]:
        return (
            f"submission.json {where}: {what} (collected from the evidence packed and this machine, not "
            "from --system; a field missing here can be given in --system FILE)"
        )
    return f"submission.json {where}: {what}"


def _given(given, collected, path: list) -> bool:
    """Does `--system`'s data name the field at `path`? Its `engines` entries go by name."""
    if not path:
        return True
    head, rest = path[0], path[1:]
    if isinstance(given, dict) and head == "engines" and isinstance(given.get("engines"), list) and rest:
        name = collected["engines"][rest[0]].get("name") if isinstance(rest[0], int) else None
        entry = next((e for e in given["engines"] if isinstance(e, dict) and e.get("name") == name), None)
        return entry is not None and _given(entry, collected["engines"][rest[0]], rest[1:])
    if isinstance(given, dict) and head in given:
        return _given(given[head], collected.get(head) if isinstance(collected, dict) else None, rest)
    return False


def _unused(hardware: dict, docs: list[dict], overrides: dict, engine_overrides: dict) -> list[str]:
    """Each kind and engine `--system` describes that no packed run used: its description would
    stand alone in the bundle (a kind's catalogue fields missing, refused as if the file lacked
    them)."""
    ran = sorted({d["engine"]["name"] for d in docs})
    kinds = [k for k in overrides.get("hardware") or {} if k not in hardware]
    names = [n for n in engine_overrides if n not in ran]
    used, engines = ", ".join(sorted(hardware)), ", ".join(ran)
    return [f"hardware {k!r} (the runs packed used {used})" for k in kinds] + [
        f"engine {n!r} (the runs packed ran {engines})" for n in names
    ]


def _all_broken(selected: list[tuple[Path, dict]]) -> str:
    """Why a bundle of only broken runs is refused, each cell with its error; "" otherwise."""
    if any(doc.get("verdict") != "broken" for _, doc in selected):
        return ""
    why = "; ".join(f"{doc['cell']}: {doc.get('error') or 'broken'}" for _, doc in selected[:5])
    more = f" (and {len(selected) - 5} more)" if len(selected) > 5 else ""
    return (
        f"nothing to submit: the latest run of every cell packed is broken (a lab fault: nothing was "
        f"measured): {why}{more}. Run the cells again until they end passed, failed or inconclusive"
    )


def _replaced(hardware: dict, docs: list[dict], overrides: dict, engine_overrides: dict) -> list[str]:
    """Each collected fact `--system` says otherwise: a kind's catalogue fields and cpu driver,
    an engine's version as its runs recorded it, its image digest where they recorded one (never
    zeros: an image or a local build it may fill, not a placeholder)."""
    problems = []
    for kind, fields in (overrides.get("hardware") or {}).items():
        for key, said in fields.items() if isinstance(fields, dict) else ():
            seen = hardware.get(kind, {}).get(key)
            if seen is not None and said != seen:
                problems.append(f"hardware.{kind}.{key} {said!r}, collected {seen!r}")
    images = collected_images(docs)
    for name, entry in sorted(engine_overrides.items(), key=lambda kv: str(kv[0])):
        seen = sorted({d["engine"]["version"] for d in docs if d["engine"]["name"] == name})
        if "version" in entry and seen and entry["version"] not in seen:
            recorded = ", ".join(seen)
            problems.append(f"engines {name} version {entry['version']!r}, its runs recorded {recorded}")
        if "image_digest" in entry and (
            want := image_problem(entry["image_digest"], images.get(name, set()))
        ):
            problems.append(f"engines {name} image_digest {entry['image_digest']!r}: give {want}")
    return problems


def _tar(staging: Path, names: list[str], out: Path, mtime: int) -> None:
    """Deterministic .tar.gz: sorted names, fixed owner and times, gzip header without a date."""
    with (
        out.open("wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for name in sorted(names):
            info = tarfile.TarInfo(name)
            info.size = (staging / name).stat().st_size
            info.mtime, info.mode, info.uid, info.gid, info.uname, info.gname = mtime, 0o644, 0, 0, "", ""
            with (staging / name).open("rb") as f:
                tar.addfile(info, f)


def _copy_run_files(reports_dir: Path, staging: Path, doc: dict) -> list[str]:
    root = reports_dir.resolve()
    names = []
    for rel in doc.get("records", []) + doc.get("logs", []):
        source = (reports_dir / rel).resolve()
        if not in_layout(rel) or not source.is_relative_to(root) or not source.is_file():
            raise PackError(f"{doc['cell']}: evidence names {rel!r}, not a file of {reports_dir}/runs")
        (staging / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, staging / rel)
        names.append(rel)
    return names


def pack(
    reports_dir: Path,
    out: Path,
    vendor: str,
    key: Path,
    matrix: Matrix,
    *,
    cells: list[str] | None = None,
    system: dict | None = None,
    harness: Harness | None = None,
    harness_root: Path | None = None,
    allow_dirty: bool = False,
) -> Path:
    """Write a signed bundle of the latest evidence per cell; refuse a dirty harness unless allowed."""
    if not VENDOR.fullmatch(vendor):
        raise PackError(
            f"vendor {vendor!r} must match {VENDOR.pattern} (it names files and the signing identity)"
        )
    reports_dir, out = Path(reports_dir), Path(out)
    if harness is None:
        from dayzero.submission.check import harness_root as default_root

        harness = harness_state(harness_root or default_root(matrix.root))
    if not harness.clean and not allow_dirty:
        changes = harness.status.strip().splitlines()
        raise PackError(
            f"the harness checkout is not clean ({len(changes)} change(s): {'; '.join(changes[:5])}); "
            "commit or stash them, or pack with --allow-dirty (the checker will report it)"
        )
    selected = select_evidence(reports_dir, cells)
    if why := _all_broken(selected):
        raise PackError(why)
    docs = [doc for _, doc in selected]
    unknown = [d["cell"] for d in docs if d["cell"] not in {c.id for c in matrix.cells}]
    if unknown:
        raise PackError(f"cells not in the matrix: {', '.join(unknown)}")
    created = dt.datetime.now(dt.UTC).replace(microsecond=0)
    claimed = [d["cell"] for d in docs]
    submission = {
        "schema_version": SCHEMA_VERSION,
        "vendor": vendor,
        "created": created.isoformat(),
        "cells": claimed,
        "harness": {
            "version": harness.version,
            "commit": harness.commit,
            "status": harness.status,
            "clean": harness.clean,
            "allow_dirty": allow_dirty and not harness.clean,
        },
        "matrix": {
            "digest": matrix_digest(matrix, claimed),
            "cells": {c: digest(matrix.card(matrix.cell(c)), matrix.cell(c)) for c in claimed},
        },
        "system": describe_system(matrix, docs, vendor, system),
    }
    try:
        jsonschema.Draft202012Validator(yamlfile.schema("submission")).validate(submission)
    except jsonschema.ValidationError as exc:
        raise PackError(_refusal(exc, submission, system or {})) from None
    with tempfile.TemporaryDirectory(prefix="dayzero-pack-") as tmp:
        staging = Path(tmp)
        names = [SUBMISSION]
        (staging / SUBMISSION).write_text(json.dumps(submission, indent=2, sort_keys=True) + "\n")
        (staging / "evidence").mkdir()
        for path, doc in selected:
            name = f"evidence/{path.name}"
            shutil.copyfile(path, staging / name)
            names.append(name)
            names += _copy_run_files(reports_dir, staging, doc)
        manifest = {
            "schema_version": SCHEMA_VERSION,
            "vendor": vendor,
            "files": {
                n: {"sha256": sha256_file(staging / n), "size": (staging / n).stat().st_size}
                for n in sorted(names)
            },
        }
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        sig = sign(staging / MANIFEST, Path(key))
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".partial")
        _tar(staging, [*names, MANIFEST, sig.name], partial, int(created.timestamp()))
        partial.replace(out)
    return out
