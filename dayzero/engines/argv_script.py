"""Engine side of `dayzero lint`: parse argv lists with the installed engines' own parsers.

Run by an engine virtualenv's interpreter (tools/build-sglang's, tools/build-vllm's), never
imported by dayzero: it imports nothing from dayzero. Protocol: JSON on stdin
``{"commands": [{"parser": "sglang" | "sglang_router" | "vllm", "argv": [...]}, ...],
"packages": [distribution, ...]}``; JSON on stdout ``{"versions": {distribution: version, ...},
"results": [[finding, ...], ...]}`` with one list per command, a finding being ``{"flag", "kind",
"message"}``; a package not installed has no version. Importing an engine takes seconds, so a
caller sends every command of a run in one call.

The parsers are built exactly as the engines build them for their launchers:
`prepare_server_args` (``sglang serve``, ``python -m sglang.launch_server``),
`parse_router_args` (``python -m sglang_router.launch_router``) and vLLM's `make_arg_parser` on
its `FlexibleArgumentParser` (``vllm serve``). argparse stops at the first error; the flag it
names is dropped and the rest parsed again, so one pass reports every problem.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys


class Refused(Exception):
    pass


def _raise(message: str):
    raise Refused(message)


def sglang_parser() -> argparse.ArgumentParser:
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser


def router_parser() -> argparse.ArgumentParser:
    from sglang_router.router_args import RouterArgs

    parser = argparse.ArgumentParser(prog="sglang_router.launch_router")
    RouterArgs.add_cli_args(parser, use_router_prefix=False)
    return parser


def vllm_parser() -> argparse.ArgumentParser:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))


def _serve_argv(argv: list[str]) -> list[str]:
    """What `sglang serve` hands its parser: `--model-type` taken out, a positional model path named."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] == "--model-type":
            i += 2
            continue
        if not argv[i].startswith("--model-type="):
            out.append(argv[i])
        i += 1
    if out and not out[0].startswith("-"):
        out = ["--model-path", *out]
    return out


KINDS = (
    (re.compile(r"^ambiguous option: (\S+?)(=\S*)? could match (.*)$"), "ambiguous"),
    (re.compile(r"^argument (\S+): invalid choice: (.*)$"), "bad choice"),
    (re.compile(r"^argument (\S+): expected .*argument"), "missing value"),
    (re.compile(r"^argument (\S+): invalid \S+ value: (.*)$"), "bad value"),
    (re.compile(r"^argument (\S+): ignored explicit argument (.*)$"), "bad value"),
    (re.compile(r"^argument (\S+): not allowed with argument (.*)$"), "conflict"),
    (re.compile(r"^the following arguments are required: (.*)$"), "missing required"),
)


def _where(names: str, argv: list[str]) -> int | None:
    """Index of the token that named one of `names` ('--a/--b'), as written or abbreviated."""
    options = names.split("/")
    for i, token in enumerate(argv):
        flag = token.split("=", 1)[0]
        if token.startswith("-") and any(o == flag or o.startswith(flag) and len(flag) > 2 for o in options):
            return i
    return None


def _drop(argv: list[str], i: int) -> list[str]:
    j = i + 1
    while j < len(argv) and not argv[j].startswith("-"):
        j += 1
    return argv[:i] + argv[j:]


REPEATABLE = (
    argparse._AppendAction,
    argparse._AppendConstAction,
    argparse._CountAction,
    argparse._ExtendAction,
)


def given_twice(parser: argparse.ArgumentParser, argv: list[str]) -> list[dict]:
    """A flag (or two of its names) given twice where argparse keeps only the last value: a mode
    adding `--tp 2` to a recipe's `--tp 8` would launch one of them silently."""
    seen: dict[str, str] = {}
    findings = []
    for token in argv:
        flag = token.split("=", 1)[0]
        action = parser._option_string_actions.get(flag) if token.startswith("-") else None
        if action is None or isinstance(action, REPEATABLE):
            continue
        if action.dest in seen:
            message = f"also given as {seen[action.dest]}: argparse keeps the last value"
            findings.append({"flag": flag, "kind": "given twice", "message": message})
        seen.setdefault(action.dest, flag)
    return findings


def check(parser: argparse.ArgumentParser, argv: list[str]) -> list[dict]:
    parser.error = _raise  # argparse calls self.error for every refusal; it exits otherwise
    findings = given_twice(parser, argv)
    for _ in range(len(argv) + 1):
        try:
            _, extra = parser.parse_known_args(argv)
        except Refused as exc:
            message = str(exc)
            kind, index = "refused", None
            for pattern, name in KINDS:
                m = pattern.match(message)
                if m:
                    kind = name
                    index = (
                        argv.index(m.group(1) + (m.group(2) or ""))
                        if name == "ambiguous"
                        else _where(m.group(1), argv)
                    )
                    break
            flag = argv[index].split("=", 1)[0] if index is not None else (m.group(1) if m else "")
            findings.append({"flag": flag, "kind": kind, "message": message})
            if index is None:
                break
            argv = _drop(argv, index)
            continue
        stray_ok = False
        for token in extra:
            if token.startswith("-"):
                findings.append(
                    {"flag": token.split("=", 1)[0], "kind": "unknown", "message": "not an argument"}
                )
                stray_ok = True
            elif not stray_ok:
                findings.append({"flag": token, "kind": "unexpected value", "message": "no flag takes it"})
        break
    return findings


def versions(packages: list[str]) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in packages:
        with contextlib.suppress(PackageNotFoundError):
            out[name] = version(name)
    return out


def main() -> int:
    request = json.load(sys.stdin)
    builders = {"sglang": sglang_parser, "sglang_router": router_parser, "vllm": vllm_parser}
    parsers: dict[str, argparse.ArgumentParser] = {}
    results = []
    for command in request["commands"]:
        kind = command["parser"]
        if kind not in parsers:
            parsers[kind] = builders[kind]()
        argv = _serve_argv(command["argv"]) if kind == "sglang" else list(command["argv"])
        results.append(check(parsers[kind], argv))
    json.dump({"versions": versions(request.get("packages", [])), "results": results}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
