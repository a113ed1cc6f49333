"""Weights as a lab has them: the card's model files, checked on a host before a cell uses it.

A card names each file of its weights and draft models under `{model_root}` (the host's var) with
a revision and, once known, a size and sha256 (`ModelFile`). Preflight runs `check_command` on
every host of the cell and `problems` judges what it printed: a file that is missing, of another
size or another checksum is a lab fault naming the host's path (the host is quarantined, the cell
broken), never a launch that downloads 1.5 TB against a readiness deadline.

A checkpoint's index file names its shards. Their identity is trust on first use: the first
preflight on a host hashes every shard the index names (`shard_command`, once: the hashes are
kept beside the shards in `.dayzero-sha256.json`, keyed by size and mtime) and reads the revision
the hub download recorded; evidence keeps them and `dayzero hosts check` prints them as the card's
`revision:` and `shards:` for its maintainers to pin (`pin_lines`). Once pinned, they are enforced:
a shard missing, added or of another checksum, or another revision, is a lab fault like the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dayzero.spec.card import ModelFile
from dayzero.spec.shell import quote

MARK = "DAYZERO-FILE"
SHARD, REVISION = "DAYZERO-SHARD", "DAYZERO-REV"
INDEX_SUFFIX = ".index.json"
SIDECAR = ".dayzero-sha256.json"
# Hashing 1.5 TB of shards the first time takes ~20 min at 1.5 GB/s; after it, the sidecar answers.
SHARD_TIMEOUT_S = 7200
# Run on the host with its python: the index's shards, each with size and sha256 (the sidecar's
# where size and mtime still match, else hashed and kept), and the revision that huggingface_hub's
# download into a local dir recorded (`.cache/huggingface/download/<file>.metadata`, first line).
SHARD_SCRIPT = r"""
import hashlib, json, os, sys
index, i = sys.argv[1], sys.argv[2]
folder = os.path.dirname(index)
try:
    names = sorted(set(json.load(open(index))["weight_map"].values()))
except Exception:
    print("DAYZERO-REV", i, "unreadable"); sys.exit(0)
meta = os.path.join(folder, ".cache", "huggingface", "download", os.path.basename(index) + ".metadata")
rev = open(meta).readline().strip() if os.path.isfile(meta) else ""
print("DAYZERO-REV", i, rev or "-")
side = os.path.join(folder, ".dayzero-sha256.json")
try:
    known = json.load(open(side))
except Exception:
    known = {}
changed = False
for n in names:
    p = os.path.join(folder, n)
    if not os.path.isfile(p):
        print("DAYZERO-SHARD", i, "missing", "-", n); continue
    st = os.stat(p)
    key = [st.st_size, st.st_mtime_ns]
    if known.get(n, [])[:2] != key:
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 24), b""):
                h.update(block)
        known[n] = key + [h.hexdigest()]
        changed = True
    print("DAYZERO-SHARD", i, st.st_size, known[n][2], n)
if changed:
    try:
        with open(side + ".tmp", "w") as f:
            json.dump(known, f)
        os.replace(side + ".tmp", side)
    except OSError:
        pass
"""


@dataclass(frozen=True)
class Wanted:
    """One model file as one host should hold it: the card's entry with its path resolved."""

    file: ModelFile
    path: str


def resolve(files: Sequence[ModelFile], host_vars: Mapping[str, str]) -> list[Wanted]:
    """The card's files on a host: `{model_root}` from the host's vars (a host without one cannot
    hold them: its path stays `{model_root}/...` and the check reports it missing)."""
    root = host_vars.get("model_root")
    return [Wanted(f, f.path.replace("{model_root}", root) if root else f.path) for f in files]


def check_command(wanted: Sequence[Wanted]) -> str:
    """Shell printing `MARK <index> <size|missing> <sha256|->` per file; the checksum is read only
    where the card knows one (an index file, or the GGUF of a small model)."""
    lines = []
    for i, w in enumerate(wanted):
        p = quote(w.path)
        digest = f"$(sha256sum < {p} | cut -d' ' -f1)" if w.file.sha256 else "-"
        lines.append(
            f'if [ -f {p} ]; then echo "{MARK} {i} $(stat -L -c %s {p}) {digest}"; '
            f'else echo "{MARK} {i} missing -"; fi'
        )
    return "; ".join(lines)


def _read(output: str) -> dict[int, tuple[str, str]]:
    seen: dict[int, tuple[str, str]] = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == MARK and parts[1].isdigit():
            seen[int(parts[1])] = (parts[2], parts[3])
    return seen


def facts(wanted: Sequence[Wanted], output: str) -> tuple[dict, ...]:
    """Each file as the host holds it (the card's path, size, sha256 where read), kept in the
    evidence: a vendor's weights are then known by checksum, not by the name a command gives."""
    seen = _read(output)
    out = []
    for i, w in enumerate(wanted):
        size, digest = seen.get(i, ("unread", "-"))
        out.append(
            {
                "role": w.file.role,
                "path": w.file.path,
                "size": int(size) if size.isdigit() else None,
                "sha256": digest if digest != "-" else None,
            }
        )
    return tuple(out)


def problems(wanted: Sequence[Wanted], output: str) -> list[str]:
    """What is wrong with the host's files, from `check_command`'s output; one line each."""
    seen = _read(output)
    out = []
    for i, w in enumerate(wanted):
        f, what = w.file, f"{w.file.role} file {w.path}"
        what += f" (revision {f.revision})" if f.revision else ""
        size, digest = seen.get(i, ("unread", "-"))
        if size == "missing":
            out.append(f"{what} is missing")
        elif size == "unread":
            out.append(f"{what} could not be checked")
        elif f.size is not None and int(size) != f.size:
            out.append(f"{what} has {size} bytes, the card says {f.size}")
        elif f.sha256 and digest != f.sha256:
            out.append(f"{what} has sha256 {digest}, the card says {f.sha256}")
    return out


def indexes(wanted: Sequence[Wanted]) -> list[int]:
    """The wanted files that are a checkpoint's index (their shards are checked too)."""
    return [i for i, w in enumerate(wanted) if w.path.endswith(INDEX_SUFFIX)]


def shard_command(wanted: Sequence[Wanted], python: str = "python3") -> str:
    """Shell printing each index's revision and shards (`SHARD_SCRIPT`); "" where there is none."""
    script = quote(SHARD_SCRIPT)
    return "; ".join(
        f"if [ -f {(p := quote(wanted[i].path))} ]; then {python} -c {script} {p} {i}; fi"
        for i in indexes(wanted)
    )


@dataclass(frozen=True)
class Shards:
    """One index's shards as a host holds them."""

    revision: str | None  # as the hub download recorded it; None: not recorded
    sha256: dict[str, str]  # shard -> checksum
    missing: tuple[str, ...] = ()


def read_shards(output: str) -> dict[int, Shards]:
    revs: dict[int, str | None] = {}
    sums: dict[int, dict[str, str]] = {}
    missing: dict[int, list[str]] = {}
    for line in output.splitlines():
        parts = line.split(" ", 4)
        if parts[0] == REVISION and len(parts) == 3 and parts[1].isdigit():
            revs[int(parts[1])] = None if parts[2] in ("-", "unreadable") else parts[2]
        elif parts[0] == SHARD and len(parts) == 5 and parts[1].isdigit():
            i = int(parts[1])
            if parts[2] == "missing":
                missing.setdefault(i, []).append(parts[4])
            else:
                sums.setdefault(i, {})[parts[4]] = parts[3]
    return {i: Shards(rev, sums.get(i, {}), tuple(missing.get(i, ()))) for i, rev in revs.items()}


def shard_problems(wanted: Sequence[Wanted], output: str) -> list[str]:
    """What is wrong with the shards against what the card pins; nothing where it pins nothing yet."""
    seen = read_shards(output)
    out = []
    for i in indexes(wanted):
        f, got = wanted[i].file, seen.get(i)
        what = f"{f.role} checkpoint {wanted[i].path.rsplit('/', 1)[0]}"
        if got is None:
            continue  # the index itself is missing or unread: `problems` says so
        out += [f"{what}: shard {n} is missing" for n in got.missing]
        if f.revision and got.revision and got.revision != f.revision:
            out.append(f"{what} was downloaded at revision {got.revision}, the card says {f.revision}")
        for name, digest in sorted(f.shards.items()):
            if name not in got.sha256 and name not in got.missing:
                out.append(f"{what}: shard {name}, which the card pins, is not in its index")
            elif name in got.sha256 and got.sha256[name] != digest:
                out.append(f"{what}: shard {name} has sha256 {got.sha256[name]}, the card says {digest}")
        if f.shards:
            out += [
                f"{what}: shard {n} is not pinned by the card"
                for n in sorted(set(got.sha256) - set(f.shards))
            ]
    return out


def shard_facts(wanted: Sequence[Wanted], output: str) -> dict[int, dict]:
    """Per index: the revision and shard checksums read, for evidence and for pinning."""
    return {
        i: {"revision": s.revision, "shards": dict(sorted(s.sha256.items()))}
        for i, s in read_shards(output).items()
    }


def pin_lines(model: str, files: Sequence[ModelFile], facts: Sequence[dict]) -> list[str]:
    """What a host read that the card does not pin yet (trust on first use), as the card's YAML:
    for its maintainers to check against the release and pin under `model_files`."""
    out = []
    for i, (f, seen) in enumerate(zip(files, facts, strict=False)):
        shards, rev = seen.get("shards"), seen.get("revision")
        if not shards or (f.shards and (f.revision or not rev)):
            continue
        out.append(f"to pin in {model}'s card, model_files[{i}] ({f.path}):")
        out.append(f"  revision: {rev or 'null  # the download recorded none: pin the release commit'}")
        out.append("  shards:")
        out += [f"    {name}: {digest}" for name, digest in shards.items()]
    return out
