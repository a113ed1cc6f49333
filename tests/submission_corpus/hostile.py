"""The corpus of broken and hostile bundles: each case says which finding must reject it.

Every case starts from the lab's valid bundle. Cases marked `resign` rewrite documents and then
re-sign them with the vendor's own key, as a vendor could: the signature is valid, so only the
checker's own recomputation and comparisons can catch them.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from dayzero.run.records import is_records_file
from dayzero.submission.bundle import MANIFEST, SIGNATURE, SUBMISSION
from dayzero.submission.extract import Limits

from .lab import VENDOR, Lab
from .tarkit import Member, edit_json, manifest_for, resign, sign_bytes, write_members

Members = dict[str, bytes]
# Whose cells a case forges by default: the llama.cpp cells, or (the real bundle's second pass)
# another engine's (`targeting`).
TARGET_ENGINE: ContextVar[str] = ContextVar("TARGET_ENGINE", default="llama.cpp")


# Cases whose edit is one engine's own (`Case.engines`): the benchmark card's sweeps (llama.cpp's
# cells only); a log with one line per request, which the "engine.records" cases forge around
# (llama.cpp's slot lines, SGLang's Finish lines; vLLM's log counts requests only, and the same
# forgeries are caught by its /metrics: the "...-against-metrics" cases); llama-server's own log
# lines (its slots, its devices).
SWEPT = LLAMA_LOG = ("llama.cpp",)
PER_REQUEST_LOG = ("llama.cpp", "sglang")


@contextmanager
def targeting(engine: str) -> Iterator[None]:
    """Build the cases against this engine's cells of the bundle."""
    token = TARGET_ENGINE.set(engine)
    try:
        yield
    finally:
        TARGET_ENGINE.reset(token)


@dataclass(frozen=True)
class Case:
    id: str
    requirement: str  # the finding that must reject it (exit 1), or "unusable" (exit 2)
    build: Callable[[Lab, Path], Path]
    limits: Limits = Limits()
    synthetic_only: bool = False  # relies on the synthetic run's speed against the repository's floors
    engines: tuple[str, ...] = ()  # the engines whose cells it can forge (its edit is theirs); () any


def first(members: Members, prefix: str, suffix: str = "") -> str:
    return next(n for n in sorted(members) if n.startswith(prefix) and n.endswith(suffix))


def evidence_name(
    members: Members, mode: str = "low_latency", strategy: str = "baseline", engine: str | None = None
) -> str:
    engine = engine or TARGET_ENGINE.get()
    return first(members, f"evidence/smollm2-135m__cpu+{engine}__{mode}__{strategy}__")


def run_file(members: Members, evidence: str, suffix: str) -> str:
    doc = json.loads(members[evidence])
    return next(r for r in doc["records"] + doc["logs"] if r.endswith(suffix))


def perf_file(members: Members, evidence: str) -> str:
    return run_file(members, evidence, "-r0.json")


def out(tmp: Path, name: str) -> Path:
    return tmp / f"{name}.tar.gz"


def with_members(extra: list[Member]) -> Callable[[Lab, Path], Path]:
    """The valid bundle plus raw tar members (links, devices, traversal) after its own."""

    def build(lab: Lab, tmp: Path) -> Path:
        members = [Member(n, d) for n, d in sorted(lab.members().items())]
        return write_members(out(tmp, "extra"), members + extra)

    return build


def edited(change: Callable[[Members], Members], sign: bool) -> Callable[[Lab, Path], Path]:
    def build(lab: Lab, tmp: Path) -> Path:
        members = change(lab.members())
        if sign:
            members = resign(members, lab.key, VENDOR, tmp)
        return write_members(out(tmp, "edited"), members)

    return build


def bomb(lab: Lab, tmp: Path) -> Path:
    """Zeros, about 1000:1 at gzip's level 9: 64 MiB, or more for a large bundle (200 times its
    compressed size), so that the whole bundle's ratio passes 100:1 however large the honest
    part is (the real run's bundle grew past the point where 64 MiB did)."""
    members = [Member(n, d) for n, d in sorted(lab.members().items())]
    zeros = Member("runs/x/y/logs/zeros.log", bytes(max(64 << 20, 200 * lab.bundle.stat().st_size)))
    return write_members(out(tmp, "bomb"), [*members, zeros], level=9)


def many_files(lab: Lab, tmp: Path) -> Path:
    members = [Member(n, d) for n, d in sorted(lab.members().items())]
    return write_members(
        out(tmp, "many"), members + [Member(f"runs/x/y/logs/{i}.log", b"x") for i in range(50)]
    )


def duplicate(lab: Lab, tmp: Path) -> Path:
    members = lab.members()
    ev = evidence_name(members)
    listed = [Member(n, d) for n, d in sorted(members.items())]
    return write_members(out(tmp, "dup"), [*listed, Member(ev, b'{"cell": "forged"}')])


def wrong_signer(lab: Lab, tmp: Path) -> Path:
    """Mallory signs acme's bundle: her key is allowed, but not for acme."""
    members = lab.members()
    members[SIGNATURE] = sign_bytes(members[MANIFEST], lab.other_key, tmp)
    return write_members(out(tmp, "signer"), members)


def unknown_key(lab: Lab, tmp: Path) -> Path:
    from .tarkit import make_key

    members = lab.members()
    members[SIGNATURE] = sign_bytes(members[MANIFEST], make_key(tmp, "stranger"), tmp)
    return write_members(out(tmp, "stranger"), members)


def impersonation(lab: Lab, tmp: Path) -> Path:
    """Mallory packs acme's evidence as her own bundle but leaves submission.json saying acme."""
    members = {n: d for n, d in lab.members().items() if n not in (MANIFEST, SIGNATURE)}
    members[MANIFEST] = manifest_for(members, "mallory")
    members[SIGNATURE] = sign_bytes(members[MANIFEST], lab.other_key, tmp)
    return write_members(out(tmp, "mallory"), members)


def no_signature(lab: Lab, tmp: Path) -> Path:
    members = lab.members()
    del members[SIGNATURE]
    return write_members(out(tmp, "nosig"), members)


def flip_log_byte(members: Members) -> Members:
    log = first(members, "runs/", ".log")
    data = bytearray(members[log])
    data[0] ^= 0x01
    return {**members, log: bytes(data)}


def add_file(members: Members) -> Members:
    log = first(members, "runs/", ".log")
    return {**members, log.replace("local-server-0.log", "extra.log"): b"not in the manifest\n"}


def drop_records(members: Members) -> Members:
    ev = evidence_name(members)
    return {n: d for n, d in members.items() if n != perf_file(members, ev)}


def inflate_throughput(members: Members) -> Members:
    """The evidence claims twice the throughput its raw records support."""
    ev = evidence_name(members)

    def change(doc):
        for check in doc["checks"]:
            if check["name"].startswith("floor:output_throughput"):
                check["measured"] *= 2
                for summary in check["details"]["summaries"]:
                    summary["output_throughput"] *= 2

    return edit_json(members, ev, change)


def forged_goodput(members: Members) -> Members:
    """A sweep claims more goodput (and attainment) at its busiest point than its records hold."""
    ev = evidence_name(members, "high_throughput")

    def change(doc):
        for check in doc["checks"]:
            if check["name"].startswith("sweep:rate@"):
                top = check["details"]["points"][-1]
                top["goodput_tok_s"] *= 2
                top["attainment"] = 1.0

    return edit_json(members, ev, change)


def dropped_sweep_point(members: Members) -> Members:
    """A sweep's slowest context point is left out of the claim (its records stay in the bundle)."""
    ev = evidence_name(members)

    def change(doc):
        for check in doc["checks"]:
            if check["name"].startswith("sweep:ctx@"):
                check["details"]["points"].pop()

    return edit_json(members, ev, change)


def slow_records_claimed_fast(members: Members) -> Members:
    """Raw records stretched a hundredfold (the server was slow); the evidence still says passed."""
    ev = evidence_name(members)
    for rel in json.loads(members[ev])["records"]:
        if "/perf-" not in rel or not is_records_file(rel):
            continue

        members = edit_json(members, rel, lambda doc: scale_times(doc["records"], 100))
    return members


def scale_times(records: list[dict], factor: float) -> None:
    """Every time of a phase scaled toward its first send: a faster or slower server than measured."""
    t0 = min(r["send"] for r in records)
    for r in records:
        for key in ("send", "first", "end"):
            r[key] = t0 + (r[key] - t0) * factor
        r["chunks"] = [c * factor for c in r["chunks"]]


def drop_check(prefix: str) -> Callable[[Members], Members]:
    """Leave out the first check whose name starts with `prefix` (e.g. a probe, a floor)."""

    def change(members: Members) -> Members:
        ev = evidence_name(members)

        def drop(doc):
            name = next(c["name"] for c in doc["checks"] if c["name"].startswith(prefix))
            doc["checks"] = [c for c in doc["checks"] if c["name"] != name]

        return edit_json(members, ev, drop)

    return change


def set_in_evidence(path: tuple, value) -> Callable[[Members], Members]:
    def change(members: Members) -> Members:
        def apply(doc):
            target = doc
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value

        return edit_json(members, evidence_name(members), apply)

    return change


def add_launch_arg(members: Members) -> Members:
    """The vendor ran eight slots where the recipe says one, but kept the recipe's digest."""

    def change(doc):
        doc["recipe"]["launches"][0]["command"] += " --parallel 8"

    return edit_json(members, evidence_name(members), change)


def set_in_submission(path: tuple, value) -> Callable[[Members], Members]:
    def change(members: Members) -> Members:
        def apply(doc):
            target = doc
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value

        return edit_json(members, SUBMISSION, apply)

    return change


def concurrent_records(members: Members) -> Members:
    """A concurrency-1 run whose requests all overlap: run at higher concurrency, declared as 1."""
    ev = evidence_name(members)
    rel = perf_file(members, ev)

    def squash(doc):
        t0 = doc["records"][0]["send"]
        for r in doc["records"]:
            shift = r["send"] - t0
            r["send"] -= shift
            r["first"] -= shift
            r["end"] -= shift

    return edit_json(members, rel, squash)


def concurrent_probes(members: Members) -> Members:
    """Exact goldens hold only one request at a time; these probes were sent all at once."""
    ev = evidence_name(members)
    rel = run_file(members, ev, "/probes.json")

    def squash(doc):
        t0 = doc["records"][0]["send"]
        for r in doc["records"]:
            shift = r["send"] - t0
            for key in ("send", "first", "end"):
                r[key] -= shift

    return edit_json(members, rel, squash)


def fewer_requests(members: Members) -> Members:
    ev = evidence_name(members)
    rel = perf_file(members, ev)
    return edit_json(members, rel, lambda doc: doc.update(records=doc["records"][:-3]))


def nan_record(members: Members) -> Members:
    ev = evidence_name(members)
    rel = perf_file(members, ev)
    text = members[rel].decode()
    return {**members, rel: text.replace('"send": ', '"send": NaN, "x": ', 1).encode()}


def outside_layout(members: Members) -> Members:
    return {**members, "notes/readme.txt": b"hello\n"}


def foreign_reference(members: Members) -> Members:
    """Evidence of one cell pointing at another cell's records."""
    ev, other = evidence_name(members), evidence_name(members, "high_throughput")
    theirs = json.loads(members[other])["records"][0]
    return edit_json(members, ev, lambda doc: doc["records"].append(theirs))


def pre_accepted(members: Members) -> Members:
    return edit_json(
        members, evidence_name(members), lambda doc: doc.update(checked="2026-01-01T00:00:00+00:00")
    )


def engine_version(members: Members) -> Members:
    def change(doc):
        doc["engine"]["version"] = "llama.cpp another build"

    return edit_json(members, evidence_name(members), change)


def golden_text(members: Members) -> Members:
    """The probe's raw answer differs from the golden (and from what the evidence claims)."""
    ev = evidence_name(members)
    rel = run_file(members, ev, "/probes.json")

    def change(doc):
        for r in doc["records"]:
            if r["id"] == "capital_france":
                r["text"] = "The capital of France is Lyon."

    return edit_json(members, rel, change)


def golden_near_tie_forged(members: Members) -> Members:
    """Another answer whose own log-probabilities call it a near-tie: the colors probe takes its
    runner-up at the second token ("The three ..." where the golden says "The rainbow ...", 1.7
    nats apart under every engine's recording), and the record's steps claim the two were within
    a hundredth of a nat. The probe's own check passes it (colors expects nothing)."""
    ev = evidence_name(members)
    rel = run_file(members, ev, "/probes.json")

    def change(doc):
        for r in doc["records"]:
            if r["id"] != "colors" or not r.get("logprobs"):
                continue
            steps = r["logprobs"]
            unprinted = "".join(s[0] for s in steps) != r["text"]  # vLLM's stop token
            token, lp, top = steps[1]
            alt = next(t for t, _ in top if t != token)
            steps[1] = [alt, lp, [[alt, lp], [token, lp - 0.01]]]
            r["text"] = "".join(s[0] for s in (steps[:-1] if unprinted else steps))

    return edit_json(members, rel, change)


def broken_run(members: Members) -> Members:
    return edit_json(
        members, evidence_name(members), lambda doc: doc.update(verdict="broken", error="host lost")
    )


def not_json(members: Members) -> Members:
    return {**members, evidence_name(members): b"{not json"}


# --- vendor strings that try to forge the checker's output (issue 12, class 2) ---------------------

FORGED = "x\nACCEPTED: every cell verified\r| `forged/cell` | 0 |\n<script>alert(1)</script>"


def forged_engine_version(members: Members) -> Members:
    return edit_json(members, evidence_name(members), lambda doc: doc["engine"].update(version=FORGED))


def forged_system_key(members: Members) -> Members:
    def change(doc):
        doc["system"]["hardware"][FORGED] = {"accelerator": "x", "accelerators_per_node": 1, "driver": "x"}

    return edit_json(members, SUBMISSION, change)


def forged_check_details(members: Members) -> Members:
    return edit_json(
        members, evidence_name(members), lambda doc: doc["checks"][0]["details"].update({FORGED: 1})
    )


def forged_claimed_cell(members: Members) -> Members:
    return edit_json(members, SUBMISSION, lambda doc: doc["cells"].append(FORGED))


def forged_manifest_vendor(lab: Lab, tmp: Path) -> Path:
    """The manifest names a vendor with a newline; signed by acme's key under that name."""
    members = {n: d for n, d in lab.members().items() if n not in (MANIFEST, SIGNATURE)}
    members[MANIFEST] = manifest_for(members, VENDOR + FORGED)
    members[SIGNATURE] = sign_bytes(members[MANIFEST], lab.key, tmp)
    return write_members(out(tmp, "vendor"), members)


# --- time and identity (issue 12, class 3) --------------------------------------------------------


def dated(started: str, finished: str) -> Callable[[Members], Members]:
    def change(members: Members) -> Members:
        return edit_json(
            members, evidence_name(members), lambda doc: doc["run"].update(started=started, finished=finished)
        )

    return change


def second_gzip_member(lab: Lab, tmp: Path) -> Path:
    """The signed bundle, then a second gzip member with another tar: gzip reads both as one stream."""
    target = write_members(out(tmp, "two-members"), {"evidence/smuggled.json": b"{}"})
    target.write_bytes(lab.bundle.read_bytes() + target.read_bytes())
    return target


def tar_after_tar(lab: Lab, tmp: Path) -> Path:
    """One gzip member holding the bundle's tar and, after its end-of-archive, a second tar."""
    import gzip

    first_tar = gzip.decompress(lab.bundle.read_bytes())
    target = write_members(out(tmp, "tar-after-tar"), {"evidence/smuggled.json": b"{}"})
    second = gzip.decompress(target.read_bytes())
    target.write_bytes(gzip.compress(first_tar + second, mtime=0))
    return target


def unreferenced_log(members: Members) -> Members:
    log = first(members, "runs/", ".log")
    return {**members, log.replace("local-server-0.log", "other-server.log"): b"another run's log\n"}


def deeply_nested(members: Members) -> Members:
    """Valid evidence (facts are free-form) nested deeper than a recursive copy can follow."""
    nested: dict = {}
    for _ in range(400):
        nested = {"n": nested}

    def change(doc):
        doc["hosts"][0]["facts"]["deep"] = nested

    ev = evidence_name(members)
    doc = json.loads(members[ev])
    change(doc)
    return {**members, ev: json.dumps(doc).encode()}


# --- records against the engine's own account (issue 12, class 1) ---------------------------------


def server_log_name(members: Members) -> str:
    return run_file(members, evidence_name(members), ".log")


def scaled_times(members: Members) -> Members:
    """Every time of a phase scaled toward its start by 0.5: twice the throughput, on the client's word."""
    rel = perf_file(members, evidence_name(members))
    return edit_json(members, rel, lambda doc: scale_times(doc["records"], 0.5))


def prompt_tokens_times_four(members: Members) -> Members:
    rel = perf_file(members, evidence_name(members))

    def change(doc):
        for r in doc["records"]:
            r["usage"]["prompt_tokens"] *= 4

    return edit_json(members, rel, change)


def records_by_hand(members: Members) -> Members:
    """More requests than the server served: a phase's records written twice over."""
    rel = perf_file(members, evidence_name(members))

    def change(doc):
        copies = []
        for k, r in enumerate(doc["records"]):
            late = max(x["end"] for x in doc["records"]) + 0.01 * (k + 1)
            copies.append({**r, "id": r["id"] + "-again", "send": late, "first": late, "end": late + 1.0})
        doc["records"] += copies

    return edit_json(members, rel, change)


def log_of_another_cell(members: Members) -> Members:
    """The server log of a four-slot launch under a one-slot recipe."""
    log = server_log_name(members)
    text = members[log].decode()
    assert "n_slots = 1," in text
    return {**members, log: text.replace("n_slots = 1,", "n_slots = 4,", 1).encode()}


def not_a_server_log(members: Members) -> Members:
    return {**members, server_log_name(members): b"started, all fine\n"}


def gpu_device_on_cpu(members: Members) -> Members:
    """A log that says the engine ran on a GPU, for a cell of cpu hardware."""
    log = server_log_name(members)
    line = "0.00.100.000 I srv    load_model: using device CUDA0 (NVIDIA H200) - 140000 MiB free\n"
    return {**members, log: line.encode() + members[log]}


def accuracy_rewritten(members: Members) -> Members:
    """Every accuracy answer replaced by the right one (" The answer is 18."), its usage and chunks
    made to fit the new text (4 tokens), as a vendor would: the gate recomputes to 1.0, the server
    counted other token counts. (Rewriting only the text, token counts kept, is an audit limit.)"""
    from dayzero.checks.accuracy import load_eval

    from .lab import REPO

    answers = {item.id: item.answer for item in load_eval(REPO / "suites" / "evals", "gsm8k-mini").items}
    rel = run_file(members, evidence_name(members), "/accuracy-gsm8k-mini.json")

    def change(doc):
        for r in doc["records"]:
            r["text"] = f" The answer is {answers[r['id']]}."
            n = len(r["text"].split())
            r["usage"]["completion_tokens"] = n
            r["usage"]["total_tokens"] = r["usage"]["prompt_tokens"] + n
            step = (r["chunks"][-1] - r["chunks"][0]) / max(len(r["chunks"]) - 1, 1) or 0.01
            r["chunks"] = [r["chunks"][0] + k * step for k in range(n)]
            r["end"] = r["send"] + r["chunks"][-1] + 0.001
            r["finish_reason"] = "stop"

    return edit_json(members, rel, change)


def metrics_dropped(members: Members) -> Members:
    """A phase's /metrics snapshots left out (and out of the evidence): no server-side total."""
    ev = evidence_name(members)
    rel = run_file(members, ev, "-r0.metrics.json")
    members = {n: d for n, d in members.items() if n != rel}
    return edit_json(members, ev, lambda doc: doc["records"].remove(rel))


def acceptance_counters_forged(members: Members) -> Members:
    """A speculative phase's kept counters say twice the accepted tokens its own /metrics
    snapshots show: the acceptance recomputes higher from the records, the snapshots disagree."""
    rel = run_file(members, evidence_name(members, strategy="ngram_spec"), "/spec-chat-code.json")

    def change(doc):
        after = doc["counters"]["after"]
        after["accepted"] += 2 * max(after["accepted"] - doc["counters"]["before"]["accepted"], 1)

    return edit_json(members, rel, change)


def second_launch(members: Members) -> Members:
    """A second server launch claimed, with the first one's log as its own: each request of the
    records is then in two servers' logs."""
    ev = evidence_name(members)
    log = server_log_name(members)
    twin = log.replace("-server-0.log", "-server-1.log")

    def change(doc):
        doc["recipe"]["launches"].append({**doc["recipe"]["launches"][0], "rank": 1})
        doc["logs"].append(twin)

    return edit_json({**members, twin: members[log]}, ev, change)


def truncated(lab: Lab, tmp: Path) -> Path:
    data = lab.bundle.read_bytes()
    target = out(tmp, "truncated")
    target.write_bytes(data[: len(data) // 2])
    return target


def not_gzip(lab: Lab, tmp: Path) -> Path:
    target = out(tmp, "plain")
    target.write_bytes(b"PK\x03\x04 this is a zip, not a tar.gz")
    return target


def dirty_tree(lab: Lab, tmp: Path) -> Path:
    from dataclasses import replace

    return lab.pack(
        lab.reports,
        out(tmp, "dirty"),
        harness=replace(lab.harness, status=" M dayzero/checks/performance.py\n"),
        allow_dirty=True,
    )


def unknown_commit(lab: Lab, tmp: Path) -> Path:
    from dataclasses import replace

    return lab.pack(lab.reports, out(tmp, "commit"), harness=replace(lab.harness, commit="f" * 40))


def floor_not_met(lab: Lab, tmp: Path) -> Path:
    """An honest run on a slow server: every claim matches its records, the floors are not met."""
    from .lab import make_lab

    return make_lab(tmp / "slow-lab", itl_s=0.2).bundle


CASES = [
    Case("path-traversal", "extract.path", with_members([Member("../escaped.txt", b"x")])),
    Case("absolute-path", "extract.path", with_members([Member("/tmp/dayzero-absolute.txt", b"x")])),
    Case("nested-traversal", "extract.path", with_members([Member("runs/a/../../../escaped", b"x")])),
    Case(
        "symlink",
        "extract.type",
        with_members([Member("runs/x/y/logs/link", type=tarfile.SYMTYPE, linkname="/etc/passwd")]),
    ),
    Case(
        "hardlink",
        "extract.type",
        with_members([Member("runs/x/y/logs/hard", type=tarfile.LNKTYPE, linkname="submission.json")]),
    ),
    Case("device", "extract.type", with_members([Member("runs/x/y/logs/dev", type=tarfile.CHRTYPE)])),
    Case("fifo", "extract.type", with_members([Member("runs/x/y/logs/fifo", type=tarfile.FIFOTYPE)])),
    Case("decompression-bomb", "extract.ratio", bomb),
    Case("too-many-files", "extract.count", many_files, Limits(max_files=40)),
    Case(
        "oversized-file",
        "extract.size",
        with_members([Member("runs/x/y/logs/big.log", bytes(4096))]),
        Limits(max_file_bytes=4000),
    ),
    Case("duplicate-member", "extract.duplicate", duplicate),
    Case("truncated-archive", "unusable", truncated),
    Case("not-a-tar-gz", "unusable", not_gzip),
    Case("bad-hash", "manifest.hash", edited(flip_log_byte, sign=False)),
    Case("unlisted-file", "manifest.unlisted", edited(add_file, sign=False)),
    Case("listed-file-absent", "manifest.absent", edited(drop_records, sign=False)),
    Case("wrong-signer", "signature.verify", wrong_signer),
    Case("unknown-key", "signature.verify", unknown_key),
    Case("no-signature", "signature.missing", no_signature),
    Case("vendor-impersonation", "provenance.vendor", impersonation),
    Case("summary-contradicted", "recompute.claim", edited(inflate_throughput, sign=True)),
    # the real bundle is the main job's, against the repository's matrix: it has the sweeps too
    Case("sweep-goodput-forged", "recompute.claim", edited(forged_goodput, sign=True), engines=SWEPT),
    Case("sweep-point-dropped", "recompute.claim", edited(dropped_sweep_point, sign=True), engines=SWEPT),
    Case("slow-records-claimed-passed", "recompute.verdict", edited(slow_records_claimed_fast, sign=True)),
    Case("missing-test", "completeness.test", edited(drop_check("probe:"), sign=True)),
    Case(
        "missing-floor",
        "completeness.test",
        edited(drop_check("floor:"), sign=True),
    ),
    Case("missing-records", "recompute.records", edited(drop_records, sign=True)),
    Case("floor-not-met", "recompute.floor", floor_not_met, synthetic_only=True),
    Case("golden-differs", "recompute.golden", edited(golden_text, sign=True)),
    Case("golden-near-tie-forged", "recompute.golden", edited(golden_near_tie_forged, sign=True)),
    Case(
        "recipe-digest-differs",
        "provenance.recipe-digest",
        edited(set_in_evidence(("recipe", "digest"), "0123456789abcdef"), sign=True),
    ),
    Case("recipe-command-differs", "provenance.recipe-command", edited(add_launch_arg, sign=True)),
    Case(
        "matrix-digest-differs",
        "provenance.matrix-digest",
        edited(set_in_submission(("matrix", "digest"), "0" * 64), sign=True),
    ),
    Case(
        "cell-not-in-matrix",
        "completeness.cell",
        edited(
            set_in_submission(("cells",), ["smollm2-135m/cpu+llama.cpp/low_latency/warp_drive"]), sign=True
        ),
    ),
    Case("dirty-tree", "provenance.clean-tree", dirty_tree),
    Case("unknown-harness-commit", "provenance.harness-commit", unknown_commit),
    Case("engine-not-described", "provenance.engine", edited(engine_version, sign=True)),
    Case("concurrency-above-declared", "antigaming.concurrency", edited(concurrent_records, sign=True)),
    Case("probes-sent-together", "antigaming.concurrency", edited(concurrent_probes, sign=True)),
    Case("fewer-requests", "antigaming.workload", edited(fewer_requests, sign=True)),
    Case("nan-in-records", "schema.json", edited(nan_record, sign=True)),
    Case("evidence-not-json", "schema.json", edited(not_json, sign=True)),
    Case("file-outside-layout", "schema.layout", edited(outside_layout, sign=True)),
    Case("foreign-records", "schema.reference", edited(foreign_reference, sign=True)),
    Case("pre-accepted-evidence", "schema.evidence", edited(pre_accepted, sign=True)),
    Case("broken-run", "completeness.run", edited(broken_run, sign=True)),
    Case("newline-in-engine-version", "schema.evidence", edited(forged_engine_version, sign=True)),
    Case("newline-in-system-key", "schema.submission", edited(forged_system_key, sign=True)),
    Case("newline-in-check-details", "recompute.claim", edited(forged_check_details, sign=True)),
    Case("newline-in-claimed-cell", "schema.submission", edited(forged_claimed_cell, sign=True)),
    Case("newline-in-manifest-vendor", "schema.manifest", forged_manifest_vendor),
    Case(
        "run-dated-in-future",
        "timeline.future",
        edited(dated("2030-01-01T00:00:00+00:00", "2030-01-01T01:00:00+00:00"), sign=True),
    ),
    Case(
        "run-before-harness-commit",
        "timeline.before-commit",
        edited(dated("2001-01-01T00:00:00+00:00", "2001-01-01T01:00:00+00:00"), sign=True),
    ),
    Case("second-gzip-member", "extract.gzip", second_gzip_member),
    Case("tar-after-end-of-archive", "extract.trailing", tar_after_tar),
    Case("unreferenced-file", "schema.unreferenced", edited(unreferenced_log, sign=True)),
    Case("deeply-nested-evidence", "schema.depth", edited(deeply_nested, sign=True)),
    Case("times-scaled-by-half", "engine.records", edited(scaled_times, sign=True), engines=PER_REQUEST_LOG),
    Case(
        "prompt-tokens-times-four",
        "engine.records",
        edited(prompt_tokens_times_four, sign=True),
        engines=PER_REQUEST_LOG,
    ),
    Case("records-written-by-hand", "engine.requests", edited(records_by_hand, sign=True)),
    Case("log-of-another-cell", "engine.launch", edited(log_of_another_cell, sign=True), engines=LLAMA_LOG),
    Case("not-a-server-log", "engine.log", edited(not_a_server_log, sign=True)),
    Case(
        "gpu-device-on-a-cpu-cell", "engine.device", edited(gpu_device_on_cpu, sign=True), engines=LLAMA_LOG
    ),
]

FORGING = {
    "newline-in-engine-version",
    "newline-in-system-key",
    "newline-in-check-details",
    "newline-in-claimed-cell",
    "newline-in-manifest-vendor",
}


def recomputed(members: Members, lab: Lab, tmp: Path) -> Members:
    """Evidence rewritten to say exactly what the checker recomputes from the (edited) raw records,
    as a vendor who runs the checker before submitting would: only cross-checks can then object."""
    from dayzero.submission.extract import extract
    from dayzero.submission.recompute import recompute_all
    from dayzero.submission.schema import load_subject

    staged = write_members(tmp / "to-recompute.tar.gz", members)
    bundle, _ = extract(staged, tmp / "to-recompute")
    subject, _ = load_subject(bundle)
    for name, r in recompute_all(subject, lab.ref).items():

        def change(doc, r=r):
            doc["checks"] = [
                r.checks[c["name"]].to_json() if c["name"] in r.checks else c for c in doc["checks"]
            ]
            doc["verdict"] = "passed" if all(c.passed for c in r.checks.values()) else "failed"

        members = edit_json(members, name, change)
    staged.unlink()
    return members


def consistent(change: Callable[[Members], Members]) -> Callable[[Lab, Path], Path]:
    """A records edit with the evidence recomputed to match, then re-signed."""

    def build(lab: Lab, tmp: Path) -> Path:
        members = recomputed(change(lab.members()), lab, tmp)
        return write_members(out(tmp, "consistent"), resign(members, lab.key, VENDOR, tmp))

    return build


CASES += [
    Case("times-scaled-recomputed", "engine.records", consistent(scaled_times), engines=PER_REQUEST_LOG),
    Case(
        "prompt-tokens-recomputed",
        "engine.records",
        consistent(prompt_tokens_times_four),
        engines=PER_REQUEST_LOG,
    ),
    # the server's own /metrics around each phase (issue 12 item 1), answers bound to the log
    Case("times-scaled-against-metrics", "engine.metrics", consistent(scaled_times)),
    Case("prompt-tokens-against-metrics", "engine.metrics", consistent(prompt_tokens_times_four)),
    Case("records-by-hand-against-metrics", "engine.metrics", edited(records_by_hand, sign=True)),
    Case(
        "accuracy-answers-rewritten",
        "engine.records",
        consistent(accuracy_rewritten),
        engines=PER_REQUEST_LOG,
    ),
    Case("accuracy-answers-rewritten-metrics", "engine.metrics", consistent(accuracy_rewritten)),
    Case("metrics-snapshots-dropped", "engine.metrics", edited(metrics_dropped, sign=True)),
    Case("second-launch-same-log", "engine.requests", edited(second_launch, sign=True)),
    Case("acceptance-counters-forged", "engine.metrics", consistent(acceptance_counters_forged)),
]


# -- issue 42 item 1: an engine's own counters held against each other and against physics ----------

SERVER_TIME_SERIES = {  # the counters each engine's server time is read from (`Engine.totals`)
    "llama.cpp": ("llamacpp:prompt_seconds_total", "llamacpp:tokens_predicted_seconds_total"),
    "vllm": ("vllm:e2e_request_latency_seconds_sum", "vllm:time_to_first_token_seconds_sum"),
    "sglang": ("sglang:e2e_request_latency_seconds_sum", "sglang:time_to_first_token_seconds_sum"),
}
SPEC_SERIES = {  # accepted and proposed draft tokens (llama.cpp's and vLLM's own counters)
    "llama.cpp": (
        "llamacpp:spec_decode_num_accepted_tokens_total",
        "llamacpp:spec_decode_num_draft_tokens_total",
    ),
    "vllm": ("vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_draft_tokens_total"),
}


def _series(body: str, name: str) -> list[tuple[str, float]]:
    """(the whole line, its value) of every sample of `name` (any labels) in a /metrics body."""
    out = []
    for line in body.splitlines():
        head, _, value = line.rpartition(" ")
        if head == name or head.startswith(name + "{"):
            out.append((line, float(value)))
    return out


def _rewritten(snaps: dict, name: str, new_delta: Callable[[float], float]) -> None:
    """Each target's after-snapshot sample of `name` set so that its difference over the phase is
    `new_delta(old difference)` (the before-snapshot kept: the counters still run forward)."""
    for before, after in zip(snaps["before"], snaps["after"], strict=True):
        for (line, was), (_, then) in zip(
            _series(after["body"], name), _series(before["body"], name), strict=False
        ):
            head = line.rpartition(" ")[0]
            after["body"] = after["body"].replace(line, f"{head} {then + new_delta(was - then):.6f}")


def _with_kept_counters(members: Members, rel: str, snaps: dict, kind: str) -> Members:
    """The snapshots written back, and the records' kept speculative counters made theirs."""
    from dayzero.checks.speculative import from_snapshots

    mrel = rel.replace(".json", ".metrics.json")
    members = {**members, mrel: (json.dumps(snaps, indent=2) + "\n").encode()}

    def change(doc):
        if isinstance(doc.get("counters"), dict):
            for when in ("before", "after"):
                doc["counters"][when] = from_snapshots(kind, snaps[when]).__dict__

    return edit_json(members, rel, change)


def accepted_above_generated(members: Members) -> Members:
    """A speculative phase's accepted draft tokens (and the drafts proposed, so that the rate
    stays under 1) raised above the tokens its generated counter says the phase produced; the
    records' kept counters rewritten to match, the acceptance recomputed into the evidence."""
    kind = TARGET_ENGINE.get()
    rel = run_file(members, evidence_name(members, strategy="ngram_spec"), "/spec-chat-code.json")
    snaps = json.loads(members[rel.replace(".json", ".metrics.json")])
    from dayzero.checks.server_metrics import phase_totals

    generated = phase_totals(kind, snaps).generated
    accepted, proposed = SPEC_SERIES[kind]
    _rewritten(snaps, accepted, lambda _: generated + 5)
    _rewritten(snaps, proposed, lambda was: max(was, 2 * (generated + 5)))
    return _with_kept_counters(members, rel, snaps, kind)


def server_time_below_physics(members: Members) -> Members:
    """The perf phase's server time (every counter it is read from) cut to a thousandth: the
    server then says it decoded faster than the hardware's roofline allows, while still never
    more than the client's time (the upper bound it always had)."""
    kind = TARGET_ENGINE.get()
    rel = perf_file(members, evidence_name(members))
    snaps = json.loads(members[rel.replace(".json", ".metrics.json")])
    for name in SERVER_TIME_SERIES[kind]:
        _rewritten(snaps, name, lambda was: was / 1000)
    return _with_kept_counters(members, rel, snaps, kind)


CASES += [
    Case(
        "accepted-above-generated",
        "engine.speculative",
        consistent(accepted_above_generated),
        engines=("llama.cpp", "vllm"),
    ),
    Case("server-time-below-physics", "physics.server-time", consistent(server_time_below_physics)),
]

# -- issue 42 item 4: every physical figure a vendor states is bounded, the bound named -------------
CASES += [
    Case(
        "host-bandwidth-absurd",
        "physics.figure",
        edited(set_in_evidence(("hosts", 0, "facts", "memory_bandwidth_gbs"), 50_000.0), sign=True),
    ),
    Case(
        "host-memory-absurd",
        "physics.figure",
        edited(set_in_evidence(("hosts", 0, "facts", "memory_total_gb"), 1e9), sign=True),
    ),
    Case(
        "phase-longer-than-its-run", "physics.figure", edited(lambda m: phase_started_earlier(m), sign=True)
    ),
]


def phase_started_earlier(members: Members) -> Members:
    """The perf phase said to have started ten days before its run did (its span, a duration
    the vendor states, far beyond the run's window)."""

    def change(doc):
        doc["start"] -= 10 * 86_400

    return edit_json(members, perf_file(members, evidence_name(members)), change)


def log_times_cut(members: Members) -> Members:
    """llama-server's own per-request times in the cell's log cut to a thousandth (prompt, eval
    and total alike), every count kept: each request then decoded faster than the roofline."""
    import re

    log = server_log_name(members)

    def cut(m: re.Match) -> str:
        return f"{m.group(1)}{float(m.group(2)) / 1000:10.2f} ms"

    text = re.sub(r"((?:prompt eval|eval|total) time = *)([\d.]+) ms", cut, members[log].decode())
    return {**members, log: text.encode()}


CASES += [
    Case(
        "log-request-times-below-physics",
        "physics.server-time",
        edited(log_times_cut, sign=True),
        engines=LLAMA_LOG,
    ),
]


# -- nothing shown that was not recomputed (issue 42, item 2) ----------------------------------------


def sweep_part_left_out(prefix: str, drop: Callable[[dict], None]) -> Callable[[Members], Members]:
    """A number the recomputation produces, left out of a sweep's claim (the card then shows "-")."""

    def edit(members: Members) -> Members:
        ev = evidence_name(members, mode="low_latency" if prefix == "sweep:ctx@" else "high_throughput")

        def change(doc):
            for check in doc["checks"]:
                if check["name"].startswith(prefix):
                    drop(check["details"])

        return edit_json(members, ev, change)

    return edit


def _busiest_attainment(details: dict) -> None:
    details["points"][-1].pop("attainment")


def _growth_fit(details: dict) -> None:
    details.pop("fit")


UNPUBLISHED_CLAIM = {  # a vendor's own claim, answered "reproduced": no card publishes it
    "claim": "vendor-fastest",
    "status": "reproduced",
    "published": 100.0,
    "unit": "per_user",
    "workload": "random-64-32",
    "concurrency": 1,
    "source": "https://vendor.example/blog",
    "measured": 120.0,
    "ratio": 1.2,
    "reason": "median 120 over 3 run(s) >= 90 (100 - 10%)",
}


def claim_answered_unpublished(members: Members) -> Members:
    """A `claims` answer ("reproduced") for a card that publishes no claims for the cell."""
    return edit_json(
        members, evidence_name(members), lambda doc: doc.setdefault("claims", []).append(UNPUBLISHED_CLAIM)
    )


CASES += [
    Case(
        "sweep-attainment-left-out",
        "recompute.claim",
        edited(sweep_part_left_out("sweep:rate@", _busiest_attainment), sign=True),
        engines=SWEPT,
    ),
    Case(
        "sweep-growth-fit-left-out",
        "recompute.claim",
        edited(sweep_part_left_out("sweep:ctx@", _growth_fit), sign=True),
        engines=SWEPT,
    ),
    Case(
        "claim-answered-for-a-card-without-claims",
        "claims.answer",
        edited(claim_answered_unpublished, sign=True),
    ),
]
