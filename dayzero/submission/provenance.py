"""Provenance: the bundle ran the maintainers' recipes, on the system it describes, with a clean harness.

Recipe digests and launch commands are compared with the matrix (a digest alone is only a claim:
each launched argv must fit the cell's template, placeholders aside); engines and images with the
system description and the model card; the harness with a clean checkout of a known commit.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator

from dayzero.redact import MASK, is_secret_name
from dayzero.spec.matrix import Cell, Matrix
from dayzero.spec.recipe import PLACEHOLDER, digest, hosts_needed, templates
from dayzero.submission.bundle import MANIFEST, Reference, Subject
from dayzero.submission.cellview import known_cell
from dayzero.submission.completeness import claimed_cells
from dayzero.submission.findings import Finding, short
from dayzero.submission.identity import LAB

SUBMISSION_FILE = "submission.json"


def matrix_digest(matrix: Matrix, cell_ids) -> str:
    """Hash of the model cards and hardware entries the claimed cells come from (floors, probes,
    goldens policies included: a card changed since the run is a different rulebook)."""
    return matrix.digest(c for c in (known_cell(matrix, i) for i in cell_ids) if c is not None)


def _cells(s: Subject, ref: Reference) -> Iterator[tuple[str, dict, Cell]]:
    for name, doc in sorted(s.evidence.items()):
        if (cell := known_cell(ref.matrix, doc["cell"])) is not None:
            yield name, doc, cell


def check_cell_fields(s: Subject, ref: Reference) -> list[Finding]:
    out = []
    for name, doc, cell in _cells(s, ref):
        for key in ("model", "hardware", "mode", "strategy"):
            if doc[key] != getattr(cell, key):
                out.append(
                    Finding(
                        name,
                        "provenance.cell",
                        f"{key} {short(doc[key])}",
                        f"{getattr(cell, key)} ({cell.id})",
                    )
                )
        if tuple(doc["options"]) != cell.options:
            out.append(
                Finding(name, "provenance.cell", f"options {short(doc['options'])}", f"{list(cell.options)}")
            )
    return out


def check_recipe_digest(s: Subject, ref: Reference) -> list[Finding]:
    out = []
    declared = ((s.submission or {}).get("matrix") or {}).get("cells", {})
    for name, doc, cell in _cells(s, ref):
        want = digest(ref.matrix.card(cell), cell)
        if doc["recipe"]["digest"] != want:
            out.append(
                Finding(
                    name,
                    "provenance.recipe-digest",
                    f"recipe {short(doc['recipe']['digest'])}",
                    f"{want} (matrix)",
                )
            )
        if s.submission is not None and declared.get(cell.id) != want:
            out.append(
                Finding(
                    SUBMISSION_FILE,
                    "provenance.recipe-digest",
                    f"{cell.id}: {short(declared.get(cell.id))}",
                    f"{want} (matrix)",
                )
            )
    return out


def template_pattern(arg: str) -> re.Pattern:
    """A template argument as a regex: literal text exact, each placeholder any text."""
    pieces, last = [], 0
    for m in PLACEHOLDER.finditer(arg):
        pieces += [re.escape(arg[last : m.start()]), ".*"]
        last = m.end()
    pieces.append(re.escape(arg[last:]))
    return re.compile("".join(pieces), re.S)


def launch_problem(template_argv, template_env, launch: dict, image: str | None = None) -> str:
    """Why a launched command is not the template's ('' when every argument fits); a container
    prefix, or a Slurm step's pyxis image, must run the card's image for the hardware."""
    command, env = launch.get("command"), launch.get("env") or {}
    if not isinstance(command, str) or not isinstance(env, dict):
        return "no command"
    if wrapper := launch.get("container"):  # the docker run prefix; the engine argv follows it
        if not isinstance(wrapper, str) or not command.startswith(f"{wrapper} "):
            return f"the command does not start with its container prefix: {short(command, 200)}"
        command = command[len(wrapper) + 1 :]
        try:
            ran = (shlex.split(wrapper) or [""])[-1]
        except ValueError as exc:
            return f"unparsable container prefix: {exc}"
        if ran != image:
            return f"the container runs image {short(ran, 80)}, the card has {image}"
    if step := launch.get("srun"):  # a Slurm step's flags: pyxis runs --container-image
        try:
            flags = shlex.split(step) if isinstance(step, str) else [""]
        except ValueError as exc:
            return f"unparsable srun flags: {exc}"
        ran = next((f.split("=", 1)[1] for f in flags if f.startswith("--container-image=")), "")
        if ran != image:
            return f"the container runs image {short(ran, 80)}, the card has {image}"
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        return f"unparsable command: {exc}"
    if len(argv) != len(template_argv):
        return f"{len(argv)} arguments, the recipe has {len(template_argv)}: {short(command, 200)}"
    for i, (arg, want) in enumerate(zip(argv, template_argv, strict=True)):
        if not template_pattern(want).fullmatch(arg) and not (MASK in arg and PLACEHOLDER.search(want)):
            return f"argument {i} is {short(arg, 60)}, the recipe has {short(want, 60)}"
    want_env = dict(template_env)
    if set(env) != set(want_env):
        return f"env {sorted(env)}, the recipe has {sorted(want_env)}"
    for key, value in env.items():
        if not (value == MASK and is_secret_name(key)) and not template_pattern(want_env[key]).fullmatch(
            str(value)
        ):
            return f"env {key}={short(value, 60)}, the recipe has {short(want_env[key], 60)}"
    return ""


def check_recipe_commands(s: Subject, ref: Reference) -> list[Finding]:
    """What was launched is the matrix's recipe: same roles and ranks, same arguments, same env."""
    out = []
    for name, doc, cell in _cells(s, ref):
        temps = {t.role: t for t in templates(ref.matrix.card(cell), cell)}
        want = sorted((t.role, rank) for t in temps.values() for rank in range(t.nodes))
        launches = doc["recipe"]["launches"]
        got = sorted(
            (str(lc.get("role")), lc.get("rank")) for lc in launches if isinstance(lc.get("rank"), int)
        )
        if got != want or len(launches) != len(want):
            out.append(
                Finding(name, "provenance.recipe-command", f"launches {short(got)}", f"{want} (matrix)")
            )
            continue
        for lc in launches:
            t = temps[lc["role"]]
            image = ref.matrix.card(cell).hardware[cell.hardware].image
            argv = t.worker_argv if lc["rank"] and t.worker_argv else t.argv  # rpc-server on 1..N-1
            if problem := launch_problem(argv, t.env, lc, image):
                out.append(
                    Finding(
                        name,
                        "provenance.recipe-command",
                        f"{t.role}[{lc['rank']}]: {problem}",
                        "the matrix's recipe",
                    )
                )
    return out


def check_hosts(s: Subject, ref: Reference) -> list[Finding]:
    """As many hosts as the recipe needs, of the cell's hardware, with the catalogue's accelerators."""
    out = []
    system_hosts = {h["name"]: h for h in ((s.submission or {}).get("system") or {}).get("hosts", [])}
    for name, doc, cell in _cells(s, ref):
        need = hosts_needed(ref.matrix.card(cell), cell)
        hosts = doc["hosts"]
        if len(hosts) != need:
            out.append(Finding(name, "provenance.hosts", f"{len(hosts)} host(s)", f"{need} (recipe)"))
        per_node = ref.matrix.hardware[cell.hardware].accelerators_per_node
        for h in hosts:
            host_name = h.get("name") if isinstance(h.get("name"), str) else None
            label = short(host_name, 40)
            if h.get("hardware") != cell.hardware:
                out.append(
                    Finding(
                        name,
                        "provenance.hosts",
                        f"{label}: hardware {short(h.get('hardware'))}",
                        cell.hardware,
                    )
                )
            if per_node is not None and h.get("accelerators") != per_node:
                out.append(
                    Finding(
                        name,
                        "provenance.hosts",
                        f"{label}: {short(h.get('accelerators'))} accelerators",
                        f"{per_node} per node",
                    )
                )
            seen = (
                (h.get("facts") or {}).get("accelerators_seen") if isinstance(h.get("facts"), dict) else None
            )
            if seen is not None and cell.hardware != "cpu" and seen != h.get("accelerators"):
                out.append(
                    Finding(
                        name,
                        "provenance.hosts",
                        f"{label}: device tool saw {short(seen)}",
                        f"{short(h.get('accelerators'))}",
                    )
                )
            if s.submission is not None:
                described = system_hosts.get(host_name)
                if described is None or (described["hardware"], described["accelerators"]) != (
                    h.get("hardware"),
                    h.get("accelerators"),
                ):
                    out.append(
                        Finding(
                            SUBMISSION_FILE,
                            "provenance.system",
                            f"host {label}: {short(described)}",
                            "described as in the evidence",
                        )
                    )
    return out


def check_system(s: Subject, ref: Reference) -> list[Finding]:
    """The system description covers every claimed cell's hardware."""
    if s.submission is None:
        return []
    hardware = s.submission["system"]["hardware"]
    return [
        Finding(
            SUBMISSION_FILE,
            "provenance.system",
            f"no description of hardware {cell.hardware}",
            "hardware, driver",
        )
        for cell in {c for c in (known_cell(ref.matrix, i) for i in claimed_cells(s)) if c is not None}
        if cell.hardware not in hardware
    ]


def _image_parts(image: str) -> tuple[str, str]:
    name, _, pinned = image.partition("@")
    return name, pinned


def check_engine(s: Subject, ref: Reference) -> list[Finding]:
    """The card's engine, at a version the system describes, from the card's image when it names one."""
    out = []
    engines = ((s.submission or {}).get("system") or {}).get("engines", [])
    for name, doc, cell in _cells(s, ref):
        card = ref.matrix.card(cell)
        engine = doc["engine"]
        if engine["name"] != card.engine.name:
            out.append(
                Finding(
                    name,
                    "provenance.engine",
                    f"engine {short(engine['name'])}",
                    f"{card.engine.name} (model card)",
                )
            )
        for h in doc["hosts"]:
            facts = h.get("facts") if isinstance(h.get("facts"), dict) else {}
            seen = (
                (facts.get("engine_versions") or {}).get(engine["name"])
                if isinstance(facts.get("engine_versions"), dict)
                else None
            )
            if seen is not None and seen != engine["version"]:
                out.append(
                    Finding(
                        name,
                        "provenance.engine",
                        f"preflight saw {short(seen)}",
                        f"{short(engine['version'])}",
                    )
                )
        if s.submission is None:
            continue
        described = [e for e in engines if (e["name"], e["version"]) == (engine["name"], engine["version"])]
        if not described:
            out.append(
                Finding(
                    SUBMISSION_FILE,
                    "provenance.engine",
                    f"no engine {short(engine['name'])} {short(engine['version'])}",
                    "the evidence's engine described",
                )
            )
            continue
        image = card.hardware[cell.hardware].image
        if image:
            want_name, want_pin = _image_parts(image)
            got_name, got_pin = _image_parts(described[0]["image"])
            if got_name != want_name:
                out.append(
                    Finding(
                        SUBMISSION_FILE,
                        "provenance.image",
                        f"image {short(described[0]['image'])}",
                        f"{image} (model card, {cell.hardware})",
                    )
                )
            if want_pin and want_pin != described[0]["image_digest"]:
                out.append(
                    Finding(
                        SUBMISSION_FILE,
                        "provenance.image",
                        f"digest {described[0]['image_digest']}",
                        f"{want_pin} (model card)",
                    )
                )
            elif got_pin and got_pin != described[0]["image_digest"]:
                out.append(
                    Finding(
                        SUBMISSION_FILE,
                        "provenance.image",
                        f"digest {described[0]['image_digest']}",
                        f"{got_pin} (image reference)",
                    )
                )
    return out


def check_harness(s: Subject, ref: Reference) -> list[Finding]:
    """Clean-tree proof: a known commit, nothing modified, the version every run reports."""
    if s.submission is None:
        return []
    harness = s.submission["harness"]
    out = []
    if not harness["clean"] or harness["status"] or harness.get("allow_dirty"):
        changed = harness["status"].splitlines()
        out.append(
            Finding(
                SUBMISSION_FILE,
                "provenance.clean-tree",
                f"dirty tree ({len(changed)} change(s): {short(changed[:3])})",
                "git status --porcelain empty",
            )
        )
    if not harness["commit"]:
        out.append(
            Finding(
                SUBMISSION_FILE, "provenance.harness-commit", "no commit", "the git commit of the harness"
            )
        )
    elif ref.known_commit is not None and not ref.known_commit(harness["commit"]):
        out.append(
            Finding(
                SUBMISSION_FILE,
                "provenance.harness-commit",
                f"commit {harness['commit']}",
                "a commit of the dayzero repository",
            )
        )
    for name, doc in sorted(s.evidence.items()):
        if doc["run"]["harness_version"] != harness["version"]:
            out.append(
                Finding(
                    name,
                    "provenance.harness-version",
                    f"harness {short(doc['run']['harness_version'])}",
                    f"{short(harness['version'])} (submission)",
                )
            )
    return out


def check_matrix_digest(s: Subject, ref: Reference) -> list[Finding]:
    if s.submission is None:
        return []
    want = matrix_digest(ref.matrix, claimed_cells(s))
    got = s.submission["matrix"]["digest"]
    if got != want:
        return [
            Finding(
                SUBMISSION_FILE,
                "provenance.matrix-digest",
                f"matrix {short(got)}",
                f"{want} (the matrix the checker holds)",
            )
        ]
    return []


def check_vendor(s: Subject, ref: Reference) -> list[Finding]:
    """The vendor the signature speaks for is the vendor the submission names, and it is not the
    lab: the lab's own origin (`identity.LAB`) would make a vendor's runs read as the lab's."""
    if s.submission is None or s.manifest is None:
        return []
    if s.manifest["vendor"] == LAB:
        return [Finding(MANIFEST, "provenance.vendor", f"vendor {LAB}", "a vendor other than the lab itself")]
    if s.submission["vendor"] != s.manifest["vendor"]:
        return [
            Finding(
                SUBMISSION_FILE,
                "provenance.vendor",
                f"vendor {s.submission['vendor']}",
                f"{short(s.manifest['vendor'])} (signed manifest)",
            )
        ]
    return []


CHECKS = (
    check_vendor,
    check_cell_fields,
    check_recipe_digest,
    check_recipe_commands,
    check_hosts,
    check_system,
    check_engine,
    check_harness,
    check_matrix_digest,
)
