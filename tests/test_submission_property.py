"""Property: mutate a valid bundle any way at all; the checker never crashes and never accepts it.

Two kinds of mutation. Unsigned ones (bytes of the archive, bytes, names, types and presence of
its members) must fail on extraction, the manifest or the signature. Re-signed ones are what a
vendor holding its own key can do: change a claim in the evidence or a material fact of the raw
records, then write a matching manifest and signature; only the recomputation and the
cross-checks can catch them. A mutation that leaves the bundle's content as it was (a gzip header
date, tar padding) is not a mutation of the bundle and is discarded.
"""

from __future__ import annotations

import io
import json
import tarfile
import tempfile
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dayzero.run.records import is_records_file

from .submission_corpus.lab import VENDOR, Lab, make_lab
from .submission_corpus.tarkit import Member, edit_json, read_members, resign, write_members

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NAMES = st.sampled_from(
    [
        "evidence/x.json",
        "runs/r/c/records/probes.json",
        "runs/r/c/logs/x.log",
        "notes.txt",
        "../up",
        "/abs",
        "a//b",
    ]
)


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Lab:
    return make_lab(tmp_path_factory.mktemp("vendor-lab"))


def content(data: bytes) -> object:
    """What a bundle holds, read leniently: (name, type, link, bytes) per member, or why it is unreadable."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            out = []
            for m in tar.getmembers():
                body = tar.extractfile(m).read() if m.isfile() else b""
                out.append((m.name, m.type, m.linkname, body))
            return sorted(out)
    except (tarfile.TarError, OSError, EOFError, ValueError, zlib.error) as exc:
        return f"unreadable: {type(exc).__name__}"


def assert_rejected(lab: Lab, bundle: Path) -> None:
    report = lab.check(bundle)
    internal = [f.line() for f in report.findings if f.requirement == "checker.internal"]
    assert not internal, internal
    assert not report.accepted, f"mutated bundle accepted: {bundle}"
    assert report.exit_code in (1, 2)


member_op = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10_000), st.floats(0, 1), st.integers(0, 7)),
    st.tuples(st.just("truncate"), st.integers(0, 10_000), st.floats(0, 0.99)),
    st.tuples(st.just("append"), st.integers(0, 10_000), st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("drop"), st.integers(0, 10_000)),
    st.tuples(st.just("rename"), st.integers(0, 10_000), NAMES),
    st.tuples(st.just("add"), NAMES, st.binary(max_size=32)),
    st.tuples(
        st.just("symlink"),
        st.integers(0, 10_000),
        st.sampled_from(["/etc/passwd", "../x", "submission.json"]),
    ),
)


def apply(members: list[Member], op: tuple) -> list[Member]:
    kind = op[0]
    if kind == "add":
        return [*members, Member(op[1], op[2])]
    i = op[1] % len(members)
    m = members[i]
    if kind == "flip":
        data = bytearray(m.data)
        if not data:
            return members
        pos = min(int(op[2] * len(data)), len(data) - 1)
        data[pos] ^= 1 << op[3]
        new = Member(m.name, bytes(data))
    elif kind == "truncate":
        new = Member(m.name, m.data[: int(op[2] * len(m.data))])
    elif kind == "append":
        new = Member(m.name, m.data + op[2])
    elif kind == "drop":
        return members[:i] + members[i + 1 :]
    elif kind == "rename":
        new = Member(op[2], m.data)
    else:  # symlink
        new = Member(m.name, type=tarfile.SYMTYPE, linkname=op[2])
    return [*members[:i], new, *members[i + 1 :]]


@SETTINGS
@given(ops=st.lists(member_op, min_size=1, max_size=3))
def test_unsigned_member_mutations_are_never_accepted(lab, ops):
    original = [Member(n, d) for n, d in sorted(read_members(lab.bundle).items())]
    members = original
    for op in ops:
        members = apply(members, op)
    with tempfile.TemporaryDirectory() as tmp:
        bundle = write_members(Path(tmp) / "m.tar.gz", members)
        assume(
            content(bundle.read_bytes())
            != content(write_members(Path(tmp) / "o.tar.gz", original).read_bytes())
        )
        assert_rejected(lab, bundle)


@SETTINGS
@given(
    edits=st.lists(
        st.one_of(
            st.tuples(st.just("flip"), st.floats(0, 1), st.integers(0, 7)),
            st.tuples(st.just("truncate"), st.floats(0, 0.999)),
            st.tuples(st.just("insert"), st.floats(0, 1), st.binary(min_size=1, max_size=4)),
        ),
        min_size=1,
        max_size=2,
    )
)
def test_archive_byte_mutations_are_never_accepted(lab, edits):
    original = lab.bundle.read_bytes()
    data = bytearray(original)
    for edit in edits:
        if not data:
            break
        pos = min(int(edit[1] * len(data)), len(data) - 1)
        if edit[0] == "flip":
            data[pos] ^= 1 << edit[2]
        elif edit[0] == "truncate":
            del data[pos:]
        else:
            data[pos:pos] = edit[2]
    assume(content(bytes(data)) != content(original))
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp) / "b.tar.gz"
        bundle.write_bytes(bytes(data))
        assert_rejected(lab, bundle)


# --- re-signed mutations: a vendor with a valid key --------------------------------------------------


def claim_targets(members: dict[str, bytes]) -> list[tuple[str, tuple]]:
    """Every leaf of every check's claim, and the evidence fields the checker can hold to account."""
    out = []

    def leaves(value, path):
        if isinstance(value, dict):
            for k, v in value.items():
                yield from leaves(v, (*path, k))
        elif isinstance(value, list) and value:
            for i, v in enumerate(value):
                yield from leaves(v, (*path, i))
        else:
            yield path

    for name in sorted(n for n in members if n.startswith("evidence/")):
        doc = json.loads(members[name])
        for i, check in enumerate(doc["checks"]):
            out += [(name, ("checks", i, *p)) for p in leaves(check, ()) if p and p[0] != "name"]
        for path in (
            ("verdict",),
            ("cell",),
            ("mode",),
            ("recipe", "digest"),
            ("recipe", "launches", 0, "command"),
            ("engine", "version"),
            ("hosts", 0, "accelerators"),
            ("run", "harness_version"),
            ("options",),
        ):
            out.append((name, path))
    return out


def replacement(old, draw):
    if isinstance(old, bool):
        return not old
    if isinstance(old, int | float):
        new = draw(st.one_of(st.floats(-1e6, 1e6, allow_nan=False), st.integers(-(10**6), 10**6)))
        assume(not (isinstance(new, int | float) and abs(new - old) <= 1e-6 * max(1.0, abs(old))))
        return new
    if isinstance(old, str):
        new = draw(st.text(max_size=20))
        assume(new != old)
        return new
    if old is None:
        return draw(st.one_of(st.integers(), st.text(max_size=5)))
    if isinstance(old, list):
        return [*old, "extra"]
    return None


def set_path(doc, path, value):
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


@SETTINGS
@given(data=st.data())
def test_resigned_claim_mutations_are_never_accepted(lab, data):
    members = read_members(lab.bundle)
    name, path = data.draw(st.sampled_from(claim_targets(members)))
    doc = json.loads(members[name])
    old = doc
    for key in path:
        old = old[key]
    new = replacement(old, data.draw)
    members = edit_json(members, name, lambda d: set_path(d, path, new))
    with tempfile.TemporaryDirectory() as tmp:
        bundle = write_members(Path(tmp) / "b.tar.gz", resign(members, lab.key, VENDOR, Path(tmp)))
        assert_rejected(lab, bundle)


MATERIAL = {
    # per kind of raw records, the edits that change something a claim or a cross-check rests on
    "load": ("drop", "tokens", "shift", "stretch"),
    "probes": ("drop", "fewer-tokens", "shift", "text"),
    "accuracy": ("drop", "shift", "text"),
    "spec": ("drop", "shift"),
    # the tool-call phase claims no speed: its answers (recomputed checks) and the log's counts
    # are what it rests on; a slower-looking stretch of its times changes no claim (the CI run of
    # stop 27 drew a x2 stretch of it, accepted, rightly)
    "tools": ("drop", "tokens"),
}


def record_kind(name: str) -> str:
    if name.endswith("/probes.json"):
        return "probes"
    return next((k for k in ("accuracy", "spec", "tools") if f"/{k}-" in name), "load")


def material_record_edits(members: dict[str, bytes]) -> list[tuple[str, str]]:
    names = sorted(n for n in members if is_records_file(n))
    return [(name, op) for name in names for op in MATERIAL[record_kind(name)]]


@SETTINGS
@given(data=st.data())
def test_resigned_raw_record_mutations_are_never_accepted(lab, data):
    members = read_members(lab.bundle)
    name, op = data.draw(st.sampled_from(material_record_edits(members)))
    doc = json.loads(members[name])
    i = data.draw(st.integers(0, len(doc["records"]) - 1))
    r = doc["records"][i]
    if op == "drop":
        del doc["records"][i]
    elif op in ("tokens", "fewer-tokens"):
        r["usage"]["completion_tokens"] += data.draw(
            st.sampled_from([-2, -1] if op == "fewer-tokens" else [-2, -1, 1, 5])
        )
        assume(r["usage"]["completion_tokens"] >= 0)
    elif op == "shift":  # one request sent earlier or later than it was
        delta = data.draw(st.floats(0.5, 30)) * data.draw(st.sampled_from([-1, 1]))
        r["send"] += delta
    elif op == "stretch":  # every time of the run scaled: a faster or slower server than measured
        factor = data.draw(st.sampled_from([0.25, 0.5, 2.0, 4.0]))
        t0 = min(x["send"] for x in doc["records"])
        for x in doc["records"]:
            for key in ("send", "first", "end"):
                x[key] = t0 + (x[key] - t0) * factor
            x["chunks"] = [c * factor for c in x["chunks"]]
    else:  # a different answer
        r["text"] = "-1 is the answer" if "/accuracy-" in name else "Nothing to see here."
    members = {**members, name: json.dumps(doc).encode()}
    with tempfile.TemporaryDirectory() as tmp:
        bundle = write_members(Path(tmp) / "b.tar.gz", resign(members, lab.key, VENDOR, Path(tmp)))
        assert_rejected(lab, bundle)


CONSISTENT_EDITS = ("scale", "prompt", "generated", "drop", "duplicate")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_consistent_record_mutations_are_never_accepted(lab, data):
    """A vendor edits raw records, reruns the checker's own recomputation into its evidence and
    re-signs: every claim then matches the records, so only the engine's account can object."""
    from .submission_corpus.hostile import recomputed, scale_times

    members = read_members(lab.bundle)
    name = data.draw(st.sampled_from(sorted(n for n in members if is_records_file(n))))
    op = data.draw(st.sampled_from(CONSISTENT_EDITS))
    doc = json.loads(members[name])
    records = doc["records"]
    i = data.draw(st.integers(0, len(records) - 1))
    if op == "scale":
        scale_times(records, data.draw(st.sampled_from([0.25, 0.5, 0.9])))
    elif op == "prompt":
        records[i]["usage"]["prompt_tokens"] *= data.draw(st.sampled_from([2, 4]))
    elif op == "generated":
        records[i]["usage"]["completion_tokens"] += data.draw(st.sampled_from([-1, 1, 3]))
        assume(records[i]["usage"]["completion_tokens"] >= len(records[i]["chunks"]))
    elif op == "drop":
        del records[i]
    else:  # one more request than the server served, after the last one
        late = max(r["end"] for r in records) + 0.5
        records.append(
            {**records[i], "id": records[i]["id"] + "-x", "send": late, "first": late, "end": late + 1}
        )
    members = {**members, name: json.dumps(doc).encode()}
    with tempfile.TemporaryDirectory() as tmp:
        members = recomputed(members, lab, Path(tmp))
        bundle = write_members(Path(tmp) / "b.tar.gz", resign(members, lab.key, VENDOR, Path(tmp)))
        assert_rejected(lab, bundle)
