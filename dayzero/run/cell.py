"""One cell run, end to end: lease -> render -> deploy -> checks -> evidence -> release.

The pytest plugin calls `run_cell` once per test item; `dayzero golden record` calls it too.
Whatever happens, the evidence written at the end keeps every check already measured, the raw
records and the server logs, and the leases are released.
"""

from __future__ import annotations

import datetime as dt
import getpass
import json
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import allure

from dayzero import __version__, evidence
from dayzero.checks import CheckResult
from dayzero.checks.correctness import check_golden, check_probe
from dayzero.checks.performance import INVALID
from dayzero.errors import DeploymentError, InfrastructureError
from dayzero.lab.deploy import Deployment, run_client
from dayzero.lab.lease import Lease, LeaseKeeper, acquire_all, release
from dayzero.lab.preflight import HostFacts, gather
from dayzero.lab.transport import Transport, open_transport
from dayzero.redact import redact, redact_env, redact_tree
from dayzero.report.allure_cell import attach_story, redact_file
from dayzero.run import plan, records
from dayzero.run.phases import Endpoint, run_all
from dayzero.spec.goldens import Golden, load_golden, save_golden
from dayzero.spec.inventory import Host, Inventory
from dayzero.spec.matrix import Cell, Matrix
from dayzero.spec.recipe import Recipe, hosts_needed, render
from dayzero.spec.workloads import suites_dir


def now_iso(timespec: str = "seconds") -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec=timespec)


class NoHost(Exception):  # noqa: N818 - a reason to skip, not an error
    """No host of the inventory has the cell's hardware: the cell is skipped, not failed."""


@dataclass
class RunContext:
    matrix: Matrix
    inventory: Inventory
    reports_dir: Path
    goldens_dir: Path
    run_id: str
    worker: str = "master"
    ready_deadline: float = 600.0
    lease_wait: float = 1800.0
    heartbeat_timeout: float = 120.0
    say: Callable[[str], None] = print
    transports: dict[str, Transport] = field(default_factory=dict)
    facts: dict[str, HostFacts] = field(default_factory=dict)

    @property
    def quarantine_dir(self) -> Path:
        """Shared by every xdist worker of the run (same reports dir), so a bad host is skipped by all."""
        return self.reports_dir / "runs" / self.run_id / "quarantine"

    def quarantine(self, host: Host, reason: str) -> None:
        self.quarantine_dir.mkdir(parents=True, exist_ok=True)
        (self.quarantine_dir / f"{host.name}.txt").write_text(reason + "\n")
        self.say(f"quarantined {host.name} for the rest of run {self.run_id}: {reason}")

    def quarantined(self) -> dict[str, str]:
        if not self.quarantine_dir.is_dir():
            return {}
        return {p.stem: p.read_text().strip() for p in self.quarantine_dir.glob("*.txt")}

    def transport(self, host: Host) -> Transport:
        if host.name not in self.transports:
            self.transports[host.name] = open_transport(host, self.inventory)
        return self.transports[host.name]

    def close(self) -> None:
        for t in self.transports.values():
            t.close()
        self.transports.clear()


@dataclass
class CellOutcome:
    cell: Cell
    checks: list[CheckResult]
    verdict: str
    evidence_path: Path | None
    error: str = ""

    @property
    def failed_checks(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.passed]


def candidate_hosts(ctx: RunContext, cell: Cell) -> tuple[Host, ...]:
    hosts = ctx.inventory.for_hardware(cell.hardware)
    if not hosts:
        raise NoHost(f"no host with hardware {cell.hardware!r} in inventory {ctx.inventory.path}")
    return hosts


def preflight(ctx: RunContext, cell: Cell, host: Host) -> HostFacts:
    """Facts of a host for this cell's engine, gathered before every use: the previous cell may
    not have released its accelerator memory, a disk may have filled up."""
    engine = ctx.matrix.card(cell).engine
    engines = {engine.name: engine.version_command} if engine.version_command else {}
    facts = gather(ctx.transport(host), ctx.matrix.hardware[cell.hardware], engines, ctx.inventory.secrets)
    ctx.facts[f"{host.name}:{engine.name}"] = facts
    return facts


def host_record(ctx: RunContext, cell: Cell, lease: Lease, held: dict[str, str]) -> dict:
    """What evidence keeps of a host: its inventory claims, the facts preflight saw and when the
    cell held it (an audit of who had the host when, across workers and separate runs)."""
    host = lease.host
    facts = ctx.facts.get(f"{host.name}:{ctx.matrix.card(cell).engine.name}")
    seen = {k: v for k, v in facts.__dict__.items() if k not in ("host", "problems")} if facts else {}
    return {
        "name": host.name,
        "hardware": host.hardware,
        "accelerators": host.accelerators,
        "facts": seen,
        "lease": {"slot": lease.slot, **held},
    }


def lease_healthy_hosts(ctx: RunContext, cell: Cell, needed: int) -> tuple[list[Lease], LeaseKeeper]:
    """Lease hosts, preflight them, and swap out any that fail (quarantined) until none are left.

    The returned keeper is already touching the leases; the caller stops it after releasing.
    """
    candidates = candidate_hosts(ctx, cell)
    while True:
        leases = acquire_all(
            candidates,
            needed,
            ctx.transport,
            run_id=ctx.run_id,
            cell_id=cell.id,
            worker=ctx.worker,
            wait=ctx.lease_wait,
            on_wait=ctx.say,
            skip=lambda h: h.name in ctx.quarantined(),
            ttl=int(ctx.heartbeat_timeout),
        )
        keeper = LeaseKeeper(leases, ctx.transport).__enter__()
        try:
            bad = [(lease.host, f) for lease in leases if not (f := preflight(ctx, cell, lease.host)).healthy]
        except BaseException:
            keeper.stop()
            for lease in leases:
                release(ctx.transport(lease.host), lease)
            raise
        if not bad:
            return leases, keeper
        keeper.stop()
        for lease in leases:
            release(ctx.transport(lease.host), lease)
        for host, facts in bad:
            ctx.quarantine(host, "; ".join(facts.problems))
        left = [h for h in candidates if h.name not in ctx.quarantined()]
        if len(left) < needed:
            details = " | ".join(f"{name}: {why}" for name, why in ctx.quarantined().items())
            raise InfrastructureError(
                f"{cell.id}: needs {needed} healthy {cell.hardware} host(s), {len(left)} left after "
                f"preflight; quarantined: {details}"
            )


def _attach_json(name: str, data) -> None:
    allure.attach(json.dumps(data, indent=2, default=str), name, allure.attachment_type.JSON)


def run_probes(ctx: RunContext, cell: Cell, dep: Deployment, record_goldens: bool) -> list[CheckResult]:
    probe_plan = plan.probes(ctx.matrix.card(cell), cell)
    if not probe_plan.probes:
        return []
    spec = {
        "action": "requests",
        "url": dep.url,
        "concurrency": probe_plan.concurrency,
        "requests": probe_plan.requests(),
    }
    answer = run_client(dep.endpoint_transport(), spec, timeout=600)
    got = answer["records"]
    dep.check_alive()
    save_records(ctx, cell, probe_plan.phase, answer)
    texts = {r["id"]: r["text"] for r in got}
    checks = [check_probe(p, r["text"], r["error"]) for p, r in zip(probe_plan.probes, got, strict=True)]
    golden = load_golden(ctx.goldens_dir, cell.id)
    if record_goldens:
        return checks
    for p in probe_plan.probes:
        expected = golden.outputs.get(p.id) if golden else None
        checks.append(check_golden(probe_plan.policy, p.id, expected, texts[p.id]))
    return checks


def measure(
    ctx: RunContext, cell: Cell, dep: Deployment, accelerators: int, checks: list[CheckResult]
) -> list[CheckResult]:
    """Performance floors, accuracy gate and speculative acceptance (`dayzero.run.phases`), appended
    to `checks` as they are made; raw client answers are kept under records/<phase>.json."""
    endpoint = Endpoint(
        url=dep.url,
        client=lambda spec, timeout: run_client(dep.endpoint_transport(), spec, timeout=timeout),
        keep=lambda phase, answer: str(save_records(ctx, cell, phase, answer).relative_to(ctx.reports_dir)),
        alive=dep.check_alive,
        say=ctx.say,
        attach=_attach_json,
        step=allure.step,
    )
    suites = suites_dir(ctx.goldens_dir, ctx.matrix.root)
    return run_all(ctx.matrix.card(cell), cell, endpoint, accelerators, suites, into=checks)


def records_dir(ctx: RunContext, cell: Cell) -> Path:
    """The cell run's raw records folder (`dayzero.run.records`)."""
    return ctx.reports_dir / records.folder(ctx.run_id, cell.id)


def save_records(ctx: RunContext, cell: Cell, phase: str, answer: dict) -> Path:
    path = ctx.reports_dir / records.path(ctx.run_id, cell.id, phase)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(answer))
    return path


def launches_json(recipe: Recipe, secrets) -> list[dict]:
    return [
        {
            "role": lc.role,
            "rank": lc.rank,
            "host": lc.host,
            "port": lc.port,
            "command": redact(lc.command, secrets),
            "env": redact_env(lc.env),
        }
        for lc in recipe.launches
    ]


def run_cell(ctx: RunContext, cell: Cell, record_goldens: bool = False) -> CellOutcome:
    card = ctx.matrix.card(cell)
    needed = hosts_needed(card, cell)
    started = now_iso()
    checks: list[CheckResult] = []
    verdict, error = "passed", ""
    version, recipe, hosts, logs = "unknown", None, [], []
    leases: list[Lease] = []
    keeper: LeaseKeeper | None = None
    held: dict[str, str] = {}
    try:
        with allure.step(f"lease and preflight {needed} {cell.hardware} host(s)"):
            leases, keeper = lease_healthy_hosts(ctx, cell, needed)
            held = {"acquired": now_iso("milliseconds")}
            ctx.say(f"{cell.id}: leased {', '.join(f'{x.host.name} slot {x.slot}' for x in leases)}")
        hosts = [lease.host for lease in leases]
        recipe = render(ctx.matrix, cell, hosts, port_offset=10 * max(lease.slot for lease in leases))
        allure.attach(
            "\n".join(
                f"# {lc.role}[{lc.rank}] on {lc.host}\n{redact(lc.shell, ctx.inventory.secrets)}"
                for lc in recipe.launches
            ),
            "rendered commands",
            allure.attachment_type.TEXT,
        )
        version = ctx.facts[f"{hosts[0].name}:{card.engine.name}"].engine_versions.get(
            card.engine.name, "unknown"
        )
        dep = Deployment(
            recipe,
            {h.name: ctx.transport(h) for h in hosts},
            records.cell_folder(ctx.run_id, cell.id),
            health_path=card.engine.health_path,
            ready_deadline=ctx.ready_deadline,
            heartbeats={lease.host.name: lease.heartbeat for lease in leases},
            heartbeat_timeout=ctx.heartbeat_timeout,
            on_event=ctx.say,
        )
        try:
            with allure.step("launch and wait for readiness"):
                dep.start()
                dep.wait_ready()
            with allure.step("correctness: probes and goldens"):
                checks += run_probes(ctx, cell, dep, record_goldens)
            if record_goldens:
                policy = card.mode(cell.mode).golden.to_json()
                outputs = json.loads(
                    (ctx.reports_dir / records.path(ctx.run_id, cell.id, records.PROBES)).read_text()
                )
                save_golden(
                    ctx.goldens_dir,
                    Golden(
                        cell.id,
                        policy,
                        {
                            "engine_version": version,
                            "recorded_at": now_iso(),
                            "recipe_digest": recipe.digest,
                            "host": hosts[0].name,
                            "by": "dayzero golden record",
                        },
                        {r["id"]: r["text"] for r in outputs["records"]},
                    ),
                )
            else:
                accelerators = sum(h.accelerators for h in hosts)
                measure(ctx, cell, dep, accelerators, checks)
                invalid = [c for c in checks if c.verdict == INVALID]
                if invalid:  # the client, not the server, was the bottleneck: a lab fault
                    raise InfrastructureError(f"{invalid[0].name}: {invalid[0].message}")
        finally:
            dep.stop()
            logs = dep.collect_logs(ctx.reports_dir / records.logs_folder(ctx.run_id, cell.id))
            for path in logs:
                redact_file(path, ctx.inventory.secrets)  # a server may echo its environment
                tail = redact(
                    "".join(path.read_text(errors="replace").splitlines(True)[-80:]), ctx.inventory.secrets
                )
                allure.attach(tail, f"server log tail: {path.name}", allure.attachment_type.TEXT)
        if any(not c.passed for c in checks):
            verdict = "failed"
    except DeploymentError as exc:
        verdict, error = "failed", redact(str(exc), ctx.inventory.secrets)
    except InfrastructureError as exc:
        verdict, error = "broken", redact(str(exc), ctx.inventory.secrets)
        raise
    except BaseException as exc:  # Ctrl-C, SIGTERM, bugs: keep what was measured, then re-raise
        verdict, error = "broken", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        if keeper:
            keeper.stop()
        if held:
            held["released"] = now_iso("milliseconds")  # a moment before the leases are let go
        for lease in leases:
            try:
                release(ctx.transport(lease.host), lease)
            except InfrastructureError as exc:
                ctx.say(f"could not release lease on {lease.host.name}: {exc}")
        doc = {
            "schema_version": 1,
            "cell": cell.id,
            "model": cell.model,
            "hardware": cell.hardware,
            "mode": cell.mode,
            "strategy": cell.strategy,
            "options": list(cell.options),
            "source": "dayzero",
            "run": {
                "id": ctx.run_id,
                "started": started,
                "finished": now_iso(),
                "by": getpass.getuser(),
                "controller": socket.gethostname(),
                "worker": ctx.worker,
                "harness_version": __version__,
            },
            "recipe": {
                "digest": recipe.digest if recipe else "",
                "launches": launches_json(recipe, ctx.inventory.secrets) if recipe else [],
            },
            "engine": {"name": card.engine.name, "version": version},
            "hosts": [host_record(ctx, cell, lease, held) for lease in leases],
            "checks": [c.to_json() for c in checks],
            "records": sorted(
                str(p.relative_to(ctx.reports_dir)) for p in records_dir(ctx, cell).glob("*.json")
            ),
            "logs": [str(p.relative_to(ctx.reports_dir)) for p in logs],
            "verdict": verdict,
        }
        if error:
            doc["error"] = error
        doc = redact_tree(doc, ctx.inventory.secrets)  # an error text may quote a secret
        path = None if record_goldens else evidence.write(ctx.reports_dir, doc)
        if path:
            allure.attach.file(str(path), "evidence", allure.attachment_type.JSON)
            attach_story(ctx, doc, path)
    return CellOutcome(cell, checks, verdict, path, error)


def new_run_id() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ") + f"-{int(time.time() * 1000) % 100000:05d}"
