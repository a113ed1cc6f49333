"""One cell run, end to end, as small steps: lease -> render -> deploy -> probe -> measure ->
teardown -> evidence -> release.

The pytest plugin calls `run_cell` once per test item; `dayzero golden record` calls it too.
Each step is a function of its own; `run_cell` is their sequence and the verdict rules.
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
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

import allure

from dayzero import __version__, atomic, engines, evidence
from dayzero.checks import FAILED, NOT_MEASURED, CheckResult, near_tie
from dayzero.checks.calibration import hosts_cpu_kind
from dayzero.checks.performance import INVALID
from dayzero.checks.tool_calls import answers
from dayzero.clock import now_iso
from dayzero.engines.base import Engine
from dayzero.errors import DeploymentError, InfrastructureError
from dayzero.lab import devicemask, hostload, power
from dayzero.lab.deploy import Deployment, run_client
from dayzero.lab.lease import Lease
from dayzero.lab.pool import Held, HostPool, NoHost, no_host_reason
from dayzero.lab.preflight import HostFacts
from dayzero.lab.presence import role_checks
from dayzero.lab.slurm_pool import SlurmPool
from dayzero.lab.transport import CONNECT_TIMEOUT_S, Transport, network_address
from dayzero.redact import redact, redact_file
from dayzero.run import plan, records
from dayzero.run.phases import Endpoint, Live, run_all, run_stage
from dayzero.run.plans import CORRECTNESS
from dayzero.run.preview import launch_text
from dayzero.run.stall import watched
from dayzero.spec.card import ModelCard, claims_for, golden_source
from dayzero.spec.goldens import Golden, golden_path, load_golden, save_golden
from dayzero.spec.inventory import Host, Inventory
from dayzero.spec.matrix import Cell, Matrix
from dayzero.spec.recipe import Recipe, hosts_needed, parallel_accelerators, render
from dayzero.spec.workloads import suites_dir

__all__ = ["CellOutcome", "NoHost", "RunContext", "candidate_hosts", "new_run_id", "now_iso", "run_cell"]


@dataclass
class RunContext:
    """What every cell of one run shares: the matrix, the inventory and its host pool, the folders."""

    matrix: Matrix
    inventory: Inventory
    reports_dir: Path
    goldens_dir: Path
    run_id: str
    worker: str = "master"
    ready_deadline: float | None = None  # every card's; None: each card's own (`ready_deadline`)
    lease_wait: float = 1800.0
    connect_timeout: float = CONNECT_TIMEOUT_S
    heartbeat_timeout: float = 120.0
    say: Callable[[str], None] = print
    transports: dict[str, Transport] = field(default_factory=dict)
    facts: dict[str, HostFacts] = field(default_factory=dict)
    golden_alternate: str = ""  # `golden record --alternate WHY`: add, beside the golden, with why
    # What the caller does with each cell's evidence once written, on every exit path: the pytest
    # plugin attaches the Allure story (`report.allure_cell.attach_story`); the run knows no report.
    on_evidence: Callable[[RunContext, dict, Path | None], None] = lambda ctx, doc, path: None

    @property
    def quarantine_dir(self) -> Path:
        """Shared by every xdist worker of the run (same reports dir), so a bad host is skipped by all."""
        return self.reports_dir / "runs" / self.run_id / "quarantine"

    @cached_property
    def pool(self) -> HostPool | SlurmPool:
        """The host pool; with a Slurm cluster in the inventory, the pool of its jobs in front of it."""
        hosts = HostPool(
            self.inventory,
            self.quarantine_dir,
            self.run_id,
            worker=self.worker,
            lease_wait=self.lease_wait,
            ttl=int(self.heartbeat_timeout),
            connect_timeout=self.connect_timeout,
            say=self.say,
            transports=self.transports,
            facts=self.facts,
        )
        return SlurmPool(hosts) if self.inventory.slurm else hosts

    def transport(self, host: Host) -> Transport:
        return self.pool.transport(host)

    def close(self) -> None:
        self.pool.close()


@dataclass
class CellOutcome:
    cell: Cell
    checks: list[CheckResult]
    verdict: str
    evidence_path: Path | None
    error: str = ""

    @property
    def failed_checks(self) -> list[CheckResult]:
        return [c for c in self.checks if c.verdict == FAILED]


@dataclass
class CellRun:
    """What one cell run has gathered so far: the evidence is built from it on every exit path."""

    started: str
    held: Held | None = None
    recipe: Recipe | None = None
    version: str = "unknown"
    checks: list[CheckResult] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    verdict: str = "passed"
    error: str = ""
    readiness: dict = field(default_factory=dict)  # deadline_s, and ready_s once ready


@dataclass(frozen=True)
class CellTarget:
    """One cell with what its steps read of the matrix, resolved once when the run starts: its
    card, its engine and the suites its plans read."""

    cell: Cell
    card: ModelCard
    engine: Engine
    suites: Path

    @property
    def engine_name(self) -> str:
        """The card's engine name: how preflight keys a host's engine facts."""
        return self.card.engine.name


def target(ctx: RunContext, cell: Cell) -> CellTarget:
    card = ctx.matrix.card(cell)
    return CellTarget(
        cell, card, engines.find_or_plain(card.engine.name), suites_dir(ctx.goldens_dir, ctx.matrix.root)
    )


def candidate_hosts(ctx: RunContext, cell: Cell) -> tuple[Host, ...]:
    """The inventory's hosts for the cell; too few for it is a skip (never a wait for hosts that
    cannot come): a two-host cell with a one-host inventory."""
    hosts = ctx.pool.candidates(cell.hardware)
    needed = hosts_needed(ctx.matrix.card(cell), cell)
    if len(hosts) < needed:
        reason = no_host_reason(cell.hardware, ctx.inventory.path, needed, len(hosts))
        raise NoHost(f"{cell.id} {reason}", reason)
    return hosts


# -- the steps, in the order a cell runs them ---------------------------------------------------


def lease(ctx: RunContext, t: CellTarget, run: CellRun) -> Held:
    """Healthy hosts for the cell, leased and preflighted (`dayzero.lab.pool`); kept in `run`
    the moment they are held, so that an interrupt from then on still releases them."""
    cell, card = t.cell, t.card
    needed = hosts_needed(card, cell)
    with allure.step(f"lease and preflight {needed} {cell.hardware} host(s)"):
        run.held = ctx.pool.acquire(
            cell.id,
            ctx.matrix.hardware[cell.hardware],
            needed,
            card.engine.name,
            card.engine.version_command or "",
            roles=role_checks(card, cell),
            image=card.hardware[cell.hardware].image or "",
            model_files=card.model_files,
            used=parallel_accelerators(card, cell),
        )
        ctx.say(f"{cell.id}: leased {', '.join(map(leased, run.held.leases))}")
    return run.held


def leased(lease: Lease) -> str:
    devices = f" accelerators {','.join(map(str, lease.devices))}" if lease.devices else ""
    return f"{lease.host.name} slot {lease.slot}{devices}"


def recipe_for(ctx: RunContext, cell: Cell, leases: list[Lease]) -> Recipe:
    """The cell's commands on the leased hosts; a lease slot shifts the ports so cells can share a
    host, and a share of its accelerators is the engine's device mask (`devicemask.masked`)."""
    hosts = [replace(x.host, address=network_address(x.host, ctx.inventory)) for x in leases]
    recipe = render(ctx.matrix, cell, hosts, port_offset=10 * max(x.slot for x in leases))
    return devicemask.masked(recipe, leases, ctx.matrix.hardware[cell.hardware].device_query)


def render_recipe(ctx: RunContext, t: CellTarget, held: Held) -> Recipe:
    """The cell's commands for the held hosts (`recipe_for`), attached to its Allure result."""
    recipe = recipe_for(ctx, t.cell, held.leases)
    allure.attach(
        launch_text(recipe, ctx.inventory.secrets), "rendered commands", allure.attachment_type.TEXT
    )
    return recipe


def engine_version(ctx: RunContext, t: CellTarget, held: Held) -> str:
    """The engine version preflight read on the first host."""
    engine = t.engine_name
    facts = ctx.pool.facts_of(held.hosts[0], engine)
    return facts.engine_versions.get(engine, "unknown") if facts else "unknown"


def engine_image(ctx: RunContext, t: CellTarget, held: Held | None) -> dict:
    """The image the engine ran in, as preflight resolved it on the first host (container hosts)."""
    facts = ctx.pool.facts_of(held.hosts[0], t.engine_name) if held and held.hosts else None
    return {"image": facts.image} if facts and facts.image else {}


def version_check(version: str) -> CheckResult | None:
    """An engine version that could not be read is not measured: such a cell is never Verified."""
    if version and version != "unknown":
        return None
    return CheckResult(
        "engine:version",
        "health",
        NOT_MEASURED,
        "the engine's version could not be read on the host (version_command)",
        family="engine",
    )


DEFAULT_READY_DEADLINE = 600.0


def ready_deadline(ctx: RunContext, t: CellTarget) -> float:
    """Seconds the cell may take from launch to ready: the run's override, else its card's (sized
    for its weights), else DEFAULT_READY_DEADLINE."""
    return ctx.ready_deadline or t.card.ready_deadline or DEFAULT_READY_DEADLINE


def deployment(ctx: RunContext, t: CellTarget, recipe: Recipe, held: Held) -> Deployment:
    """The deployment of a rendered recipe on the held hosts (nothing started yet)."""
    return Deployment(
        recipe,
        {h.name: ctx.transport(h) for h in held.hosts},
        records.cell_folder(ctx.run_id, t.cell.id),
        health_path=t.card.engine.health_path,
        ready_deadline=ready_deadline(ctx, t),
        heartbeats={lease.host.name: lease.heartbeat for lease in held.leases},
        heartbeat_timeout=ctx.heartbeat_timeout,
        on_event=ctx.say,
    )


def deploy(dep: Deployment, run: CellRun) -> None:
    """Start every launch and wait until the server answers its health check; the time it took
    (and the deadline it had) go to the evidence."""
    run.readiness = {"deadline_s": dep.ready_deadline}
    with allure.step("launch and wait for readiness"):
        dep.start()
        run.readiness["ready_s"] = round(dep.wait_ready(), 3)


def probe(
    ctx: RunContext, t: CellTarget, ep: Endpoint, record_goldens: bool, version: str = "unknown"
) -> list[CheckResult]:
    """The correctness stage (`run.plans`): probe answers against the card's expectations and,
    unless recording, the goldens; then the card's tool-use suites, whose trigger agreement is
    with the answers recorded on the cell whose goldens this cell meets."""
    golden_cell, _ = golden_source(t.card, t.cell)
    src = Live(
        ep,
        t.card,
        t.cell,
        golden=None if record_goldens else load_golden(ctx.goldens_dir, golden_cell),
        recording=record_goldens,
        engine_version=version,
    )
    return list(run_stage(src, t.suites, CORRECTNESS))


def record_golden(ctx: RunContext, t: CellTarget, run: CellRun) -> Path:
    """`dayzero golden record`: the probe answers just recorded become the cell's golden (or,
    with `ctx.golden_alternate`, an alternate recording beside it)."""
    cell = t.cell
    policy = t.card.mode(cell.mode).golden.to_json()
    outputs = json.loads((ctx.reports_dir / records.path(ctx.run_id, cell.id, records.PROBES)).read_text())
    provenance = {
        "engine_version": run.version,
        "recorded_at": now_iso(),
        "recipe_digest": run.recipe.digest if run.recipe else "",
        "host": run.held.hosts[0].name if run.held else "",
        "by": "dayzero golden record",
        "machine": (outputs.get("client") or {}).get("machine") or {},
    }
    if ctx.golden_alternate:
        texts = {r["id"]: r["text"] for r in outputs["records"]}
        return add_alternate(ctx.goldens_dir, cell.id, texts, {**provenance, "why": ctx.golden_alternate})
    tools, tool_steps = {}, {}
    for tp in plan.tool_calls(t.card, cell, t.suites):
        answered = json.loads((ctx.reports_dir / records.path(ctx.run_id, cell.id, tp.phase)).read_text())
        tools[tp.suite.name] = answers(answered["records"])
        if firsts := {
            r["id"]: near_tie.rounded(r["logprobs"][:1]) for r in answered["records"] if r.get("logprobs")
        }:
            tool_steps[tp.suite.name] = firsts
    steps = {r["id"]: near_tie.rounded(r["logprobs"]) for r in outputs["records"] if r.get("logprobs")}
    golden = Golden(
        cell.id,
        policy,
        provenance,
        {r["id"]: r["text"] for r in outputs["records"]},
        tools,
        tokens=steps,
        tool_tokens=tool_steps,
    )
    return save_golden(ctx.goldens_dir, golden)


def add_alternate(goldens_dir: Path, cell_id: str, texts: dict[str, str], provenance: dict) -> Path:
    """This machine's probe outputs beside the cell's golden, where they differ from it and from
    every alternate already kept. Only for the golden's own recipe and engine: a changed recipe is
    re-recorded, never given an alternate."""
    golden = load_golden(goldens_dir, cell_id)
    if golden is None:
        raise DeploymentError(f"golden not recorded: {cell_id} has no golden to add an alternate to")
    for key in ("recipe_digest", "engine_version"):
        if golden.provenance.get(key) != provenance[key]:
            raise DeploymentError(
                f"golden not recorded: the golden's {key} is {golden.provenance.get(key)!r}, this run's "
                f"{provenance[key]!r}: record the golden again instead of an alternate"
            )
    known = [golden.outputs, *(a.get("outputs") for a in golden.alternates)]
    if texts in known:
        return golden_path(goldens_dir, cell_id)
    alternates = [*golden.alternates, {"outputs": texts, "provenance": provenance}]
    return save_golden(goldens_dir, replace(golden, alternates=alternates))


def cpu_kind_of(ctx: RunContext, t: CellTarget, held) -> str:
    """The CPU kind of the cell's hosts, from their preflight facts: which calibrated floor holds."""
    facts = [ctx.pool.facts_of(h, t.engine_name) for h in held.hosts]
    return hosts_cpu_kind(f.machine if f else None for f in facts)


def measure(
    ctx: RunContext,
    t: CellTarget,
    ep: Endpoint,
    accelerators: int,
    checks: list[CheckResult],
    cpu_kind: str = "unknown",
) -> list[CheckResult]:
    """Performance floors, accuracy gate and speculative acceptance (`dayzero.run.phases`), appended
    to `checks` as they are made; raw client answers are kept under records/<phase>.json.

    An invalid measurement (the client, not the server, was the bottleneck) is a lab fault:
    InfrastructureError, so the cell is broken rather than failed.
    """
    run_all(t.card, t.cell, ep, accelerators, t.suites, into=checks, cpu_kind=cpu_kind)
    invalid = [c for c in checks if c.verdict == INVALID]
    if invalid:
        raise InfrastructureError(f"{invalid[0].name}: {invalid[0].message}")
    return checks


def endpoint(ctx: RunContext, t: CellTarget, dep: Deployment) -> Endpoint:
    """How the phases reach the deployment: its client, where records and /metrics snapshots go
    (every launch's /metrics, read from the endpoint's host), liveness and reporting."""
    cell, engine = t.cell, t.engine
    folder = ctx.reports_dir

    def keep_metrics(phase: str, doc: dict) -> str:
        path = folder / records.metrics_path(ctx.run_id, cell.id, phase)
        return str(atomic.write_json(path, doc, indent=None, sort_keys=False).relative_to(folder))

    return Endpoint(
        url=dep.url,
        client=watched(
            lambda spec, timeout, silence: run_client(
                dep.endpoint_transport(), spec, timeout=timeout, silence=silence
            ),
            t.card.protocol.stall,
            dep.recipe.endpoint.host,
        ),
        keep=lambda phase, answer: str(save_records(ctx, cell, phase, answer).relative_to(folder)),
        alive=dep.check_alive,
        say=ctx.say,
        attach=_attach_json,
        step=allure.step,
        meters=tuple(
            (f"{x.role}[{x.rank}]@{x.host}", f"http://{x.address}:{x.port}/metrics")
            for x in dep.recipe.launches
            if x.rank == 0 and engine.serves_metrics(x.argv) and engines.router_of(x.argv) is None
        ),
        keep_metrics=keep_metrics,
        engine=engine.name,
        recipe_digest=dep.recipe.digest,
        watch=lambda: hostload.watching_hosts(  # only where the contention check is on
            {n: t for n, t in dep.transports.items() if t.host.max_foreign_load > 0}, cell_groups(dep)
        ),
        host=dep.recipe.endpoint.host,
        power_watch=lambda options: power.watching_hosts(
            {name: t for name, t in dep.transports.items() if name != dep.recipe.endpoint.host}, options
        ),
        max_foreign_load={h.name: h.max_foreign_load for h in (t.host for t in dep.transports.values())},
    )


def cell_groups(dep: Deployment) -> dict[str, list[int]]:
    """Each host's view of the cell's own processes: every process group the cell started, on any
    host. Hosts that share one kernel (a testbed, containers of one machine) see each other's
    ranks, which are the cell's work, not a foreign load; on separate machines another host's
    group ids name nothing here (a collision would hide one foreign group, never flag ours)."""
    every = sorted({g for groups in dep.process_groups().values() for g in groups})
    return {host: every for host in dep.transports}


def teardown(ctx: RunContext, t: CellTarget, dep: Deployment) -> list[Path]:
    """Stop every launch, then copy the server logs into the run's folder with secrets masked."""
    dep.stop()
    logs = dep.collect_logs(ctx.reports_dir / records.logs_folder(ctx.run_id, t.cell.id))
    for path in logs:
        redact_file(path, ctx.inventory.secrets)  # a server may echo its environment
        tail = redact("".join(path.read_text(errors="replace").splitlines(True)[-80:]), ctx.inventory.secrets)
        allure.attach(tail, f"server log tail: {path.name}", allure.attachment_type.TEXT)
    return logs


def write_evidence(ctx: RunContext, t: CellTarget, run: CellRun, record_goldens: bool) -> Path | None:
    """Build the evidence from what the run gathered and store it (not when recording goldens)."""
    cell, engine = t.cell, t.engine_name
    leases = run.held.leases if run.held else []
    doc = evidence.build(
        cell,
        run.checks,
        leases,
        {x.host.name: f for x in leases if (f := ctx.pool.facts_of(x.host, engine))},
        held=run.held.times if run.held else {},
        run={
            "id": ctx.run_id,
            "started": run.started,
            "finished": now_iso(),
            "by": getpass.getuser(),
            "controller": socket.gethostname(),
            "worker": ctx.worker,
            "harness_version": __version__,
            **({"lab": ctx.inventory.lab} if ctx.inventory.lab else {}),
        },
        recipe=run.recipe,
        engine={"name": engine, "version": run.version, **engine_image(ctx, t, run.held)},
        records=[str(p.relative_to(ctx.reports_dir)) for p in records_dir(ctx, cell).glob("*.json")],
        logs=[str(p.relative_to(ctx.reports_dir)) for p in run.logs],
        verdict=run.verdict,
        error=run.error,
        secrets=ctx.inventory.secrets,
        claims=claims_for(t.card, cell),
        readiness=run.readiness,
    )
    if record_goldens:
        return None
    path = evidence.write(ctx.reports_dir, doc)
    allure.attach.file(str(path), "evidence", allure.attachment_type.JSON)
    ctx.on_evidence(ctx, doc, path)
    return path


def run_cell(
    ctx: RunContext, cell: Cell, record_goldens: bool = False, correctness_only: bool = False
) -> CellOutcome:
    """The steps in order. A failed deployment fails the cell; a lab fault breaks it and is
    re-raised, as is anything else (Ctrl-C, SIGTERM, a bug), after the evidence is written.
    `correctness_only` (`dayzero golden check`): probes, goldens and tool calls, nothing measured."""
    run = CellRun(started=now_iso())
    t = target(ctx, cell)
    try:
        held = lease(ctx, t, run)
        run.recipe = render_recipe(ctx, t, held)
        run.version = engine_version(ctx, t, held)
        dep = deployment(ctx, t, run.recipe, held)
        try:
            deploy(dep, run)
            ep = endpoint(ctx, t, dep)
            run.checks += probe(ctx, t, ep, record_goldens, run.version)
            if record_goldens:
                # an answer that errored or missed its probe is never kept as the reference
                if failed := [c for c in run.checks if c.verdict == FAILED]:
                    why = "; ".join(f"{c.name}: {c.message}" for c in failed)
                    raise DeploymentError(f"golden not recorded: {why}")
                record_golden(ctx, t, run)
            elif not correctness_only:
                used = parallel_accelerators(t.card, cell)
                accelerators = used or sum(h.accelerators for h in held.hosts)
                measure(ctx, t, ep, accelerators, run.checks, cpu_kind=cpu_kind_of(ctx, t, held))
                if (unknown := version_check(run.version)) is not None:
                    run.checks.append(unknown)
        finally:
            run.logs = teardown(ctx, t, dep)
        if any(c.verdict == FAILED for c in run.checks):  # not measured keeps the cell Pending instead
            run.verdict = "failed"
    except DeploymentError as exc:
        run.verdict, run.error = "failed", redact(str(exc), ctx.inventory.secrets)
    except InfrastructureError as exc:
        run.verdict, run.error = "broken", redact(str(exc), ctx.inventory.secrets)
        raise
    except BaseException as exc:  # Ctrl-C, SIGTERM, bugs: keep what was measured, then re-raise
        run.verdict, run.error = "broken", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        try:
            ctx.pool.release(run.held)  # holds a Ctrl-C until every lease is let go, then raises it
        finally:
            # a correctness-only run is no cell verdict: nothing measured, no evidence for the table
            path = write_evidence(ctx, t, run, record_goldens or correctness_only)
    return CellOutcome(cell, run.checks, run.verdict, path, run.error)


def _attach_json(name: str, data) -> None:
    allure.attach(json.dumps(data, indent=2, default=str), name, allure.attachment_type.JSON)


def records_dir(ctx: RunContext, cell: Cell) -> Path:
    """The cell run's raw records folder (`dayzero.run.records`)."""
    return ctx.reports_dir / records.folder(ctx.run_id, cell.id)


def save_records(ctx: RunContext, cell: Cell, phase: str, answer: dict) -> Path:
    path = ctx.reports_dir / records.path(ctx.run_id, cell.id, phase)
    return atomic.write_json(path, answer, indent=None, sort_keys=False)


def new_run_id() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ") + f"-{int(time.time() * 1000) % 100000:05d}"
