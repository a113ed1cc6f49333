"""The README a newcomer reads, held to the repository: every relative link and `#anchor` of
README.md, CONTRIBUTING.md and docs/*.md resolves, the table of contents lists every section,
the example inventory loads, the quick start is what CI runs, and the exit-status tables name
every status the code can return (`dayzero/exitcodes.py`, and the `dayzero` verbs' own returns,
read from their source so that a new `return 3` shows up here rather than in a lab's script).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from dayzero import exitcodes
from dayzero.exitcodes import CLI_EXIT_STATUSES, EXIT_STATUSES
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix
from dayzero.submission.check import EXIT as SUBMISSION_EXIT

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


# --- Markdown, as GitHub reads it ----------------------------------------------------------------


def prose(text: str) -> str:
    """The text outside fenced code blocks (where a `#` line is a comment, not a heading)."""
    out, fenced = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return "\n".join(out)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = text.replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def headings(path: Path) -> list[tuple[int, str]]:
    return [(len(m[1]), m[2].strip()) for m in re.finditer(r"^(#{1,6}) (.+)$", prose(path.read_text()), re.M)]


def anchors(path: Path) -> set[str]:
    """Every heading's anchor; a repeated heading gets `-1`, `-2`... as on GitHub."""
    seen: dict[str, int] = {}
    out = set()
    for _, text in headings(path):
        base = slug(text)
        n = seen.get(base, 0)
        out.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return out


def links(path: Path) -> list[str]:
    """Link targets in prose, inline code left out (`[user@]alias[:port]` is not a link)."""
    text = re.sub(r"`[^`\n]*`", "", prose(path.read_text()))
    return LINK.findall(text)


def section(path: Path, title: str) -> str:
    """The body of the `##` section `title`, up to the next `##`."""
    text = prose(path.read_text())
    found = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert found, f"{path.name}: no section '## {title}'"
    return found[1]


def tables(text: str) -> list[list[list[str]]]:
    """Each Markdown table of `text`: its body rows, each a list of cells (header and rule left out)."""
    out, rows = [], []
    for line in [*text.split("\n"), ""]:
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif rows:
            out.append([r for r in rows[2:]])
            rows = []
    return out


def test_the_pages_are_found():
    names = {p.relative_to(REPO).as_posix() for p in PAGES}
    assert {"README.md", "CONTRIBUTING.md", "docs/lab.md", "docs/submissions.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_and_anchor_resolves(page: Path):
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            broken.append(
                f"{target}: no such file {dest.relative_to(REPO) if dest.is_relative_to(REPO) else dest}"
            )
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with anchor #{anchor} in {dest.relative_to(REPO)}")
        elif anchor and dest.suffix != ".md":
            broken.append(f"{target}: an anchor into {dest.name}, which is not Markdown")
    assert not broken, f"{page.relative_to(REPO)}: broken links:\n" + "\n".join(broken)


def test_the_link_checker_sees_a_broken_anchor(tmp_path):
    """The checker itself: a wrong anchor and a missing file are found, a right one is not."""
    page = tmp_path / "page.md"
    page.write_text(
        "# Top\n\n## Exit statuses\n\n```sh\n# not a heading\n```\n\n"
        "[ok](#exit-statuses) [bad](#not-a-heading) [gone](missing.md) `[code](#not-a-link)`\n"
    )
    assert anchors(page) == {"top", "exit-statuses"}
    assert links(page) == ["#exit-statuses", "#not-a-heading", "missing.md"]
    assert slug("Kimi K3.1 Pro cells") == "kimi-k31-pro-cells"
    assert slug("1. A lab controller") == "1-a-lab-controller"
    assert slug("Reports: Allure, acceptance, nightly") == "reports-allure-acceptance-nightly"


def test_the_table_of_contents_lists_every_section():
    contents = section(README, "Contents")
    listed = set(re.findall(r"\]\(#([^)]+)\)", contents))
    sections = {slug(t) for level, t in headings(README) if level == 2 and t != "Contents"}
    assert sections - listed == set(), "sections missing from the README's Contents"
    assert listed - anchors(README) == set(), "Contents entries with no heading"


def test_the_quick_start_is_what_ci_runs():
    """The README's two commands, the second exactly what `.ci/run` runs (after setting up its
    shell and environment: `set`, `cd`, `export`)."""
    quick = re.findall(r"```sh\n(.*?)\n```", section_raw("Quick start"), re.S)
    assert quick[0] == "tools/setup && .venv/bin/pytest -m cpu"
    ci = [
        line
        for line in (REPO / ".ci/run").read_text().splitlines()
        if line and not line.startswith(("#", "set ", "cd ", "export "))  # the environment, no command
    ]
    assert ci == [quick[1]], f".ci/run runs {ci}; the README's test command is {quick[1]!r}"


def test_the_example_inventory_loads(tmp_path):
    """The inventory the README shows is one dayzero loads, its hardware the matrix's."""
    blocks = re.findall(r"```yaml\n(.*?)```", section_raw("Your lab in six steps"), re.S)
    inventories = [b for b in blocks if "hosts:" in b]
    assert inventories, "the README's lab steps show no inventory"
    for i, block in enumerate(inventories):
        path = tmp_path / f"lab{i}.yaml"
        path.write_text(block)
        inventory = load_inventory(path, set(load_matrix(REPO / "matrix").hardware))
        assert [h.name for h in inventory.hosts] == list(yaml.safe_load(block)["hosts"])


def section_raw(title: str) -> str:
    """A `##` section of the README with its code blocks (its end found outside them)."""
    raw, text = README.read_text(), prose(README.read_text())
    start = text.index(f"\n## {title}\n")
    nxt = text.find("\n## ", start + 1)
    return raw[start : nxt if nxt >= 0 else len(raw)]


# --- the exit statuses ---------------------------------------------------------------------------


def status_tables() -> tuple[list[list[str]], list[list[str]]]:
    run, verbs = tables(section(README, "Exit statuses"))
    return run, verbs


def test_the_run_table_is_exitcodes_own():
    """Every status of a run (exitcodes.EXIT_STATUSES) has its row, and no row names another."""
    run, _ = status_tables()
    in_readme = {int(row[0]) for row in run}
    assert in_readme == {code for code, _ in EXIT_STATUSES.values()}


def test_every_status_the_plugin_sets_is_in_the_run_table():
    """A run's status as dayzero's code names it (`pytest.ExitCode.X`, `exitcodes.X`), anywhere
    in the package: each is a row of the run table (every pytest status is possible anyway)."""
    named = {code.value for code in pytest.ExitCode}
    for path in (REPO / "dayzero").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute | ast.Name):
                owner = ast.unparse(node.value).rsplit(".", 1)[-1]
                if owner == "ExitCode":
                    named.add(pytest.ExitCode[node.attr].value)
                elif owner == "exitcodes" and type(getattr(exitcodes, node.attr, None)) is int:
                    named.add(getattr(exitcodes, node.attr))
    run, _ = status_tables()
    assert named - {int(row[0]) for row in run} == set()


CLI = REPO / "dayzero" / "cli"
PASS = "the status of a process it ran"
# How a verb's `return <call>` is resolved: the function that decides, or the statuses it gives.
DELEGATES: dict[str, tuple[str, str] | set[int]] = {
    "args.func": set(),  # __init__.main: the verb's own function, read below per verb
    "func": set(),  # submission.crash_guard: the wrapped verb, read below
    "lint.main": ("dayzero/spec/lint.py", "main"),
    "cache.main": ("dayzero/cache.py", "main"),
    "run_nightly": ("dayzero/report/nightly.py", "run_nightly"),
    "report.exit_code": set(SUBMISSION_EXIT.values()),
}
# What a verb's row says where it passes on another process's status.
PASSES_ON = {"nightly": "the run's status", "engine": "the build's own status"}


def _constants(tree: ast.Module) -> dict[str, int]:
    return {
        t.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        if type(node.value.value) is int
        for t in node.targets
        if isinstance(t, ast.Name)
    }


class Returns:
    """The exit statuses one module's `-> int` functions can return, read from the source."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tree = ast.parse(path.read_text())
        self.consts = _constants(self.tree)

    def function(self, name: str) -> set[int | str]:
        func = next(
            n
            for n in ast.walk(self.tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name
        )
        return self._function(func)

    def all(self) -> set[int | str]:
        out: set[int | str] = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.FunctionDef) and ast.unparse(node.returns or ast.Constant(None)) == "int":
                out |= self._function(node)
            elif isinstance(node, ast.Return) and self._int(node.value) is not None:
                out.add(self._int(node.value))  # a literal status outside an `-> int` function
            elif isinstance(node, ast.Call) and ast.unparse(node.func) in ("SystemExit", "sys.exit"):
                arg = node.args[0] if node.args else None
                code = self._int(arg)
                out.add(code if code is not None else 1 if arg is not None else 0)  # a message: 1
        return out

    def _int(self, node) -> int | None:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Attribute) and ast.unparse(node.value) == "exitcodes":
            return getattr(exitcodes, node.attr)  # exitcodes.TESTS_FAILED
        if isinstance(node, ast.Name) and node.id in self.consts:
            return self.consts[node.id]
        return None

    def _function(self, func) -> set[int | str]:
        local = {n.name for n in ast.walk(func) if isinstance(n, ast.FunctionDef) and n is not func}
        assigned: dict[str, list] = {}
        for node in ast.walk(func):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        assigned.setdefault(t.id, []).append(node.value)
        out: set[int | str] = set()
        for node in ast.walk(func):
            if isinstance(node, ast.Return) and node.value is not None:
                if isinstance(node.value, ast.Name) and node.value.id in local:
                    continue  # a decorator's wrapper, not a status
                out |= self._value(node.value, assigned, set())
        return out

    def _value(self, node, assigned: dict, seen: set) -> set[int | str]:
        code = self._int(node)
        if code is not None:
            return {code}
        if isinstance(node, ast.IfExp):
            return self._value(node.body, assigned, seen) | self._value(node.orelse, assigned, seen)
        if isinstance(node, ast.BoolOp):
            return set().union(*(self._value(v, assigned, seen) for v in node.values))
        if isinstance(node, ast.Name) and node.id in assigned:
            if node.id in seen:
                return set()
            return set().union(*(self._value(v, assigned, seen | {node.id}) for v in assigned[node.id]))
        if isinstance(node, ast.Attribute) and node.attr == "returncode":
            return {PASS}  # subprocess.run(...).returncode
        key = ast.unparse(node.func if isinstance(node, ast.Call) else node)
        assert key in DELEGATES, (
            f"{self.path.relative_to(REPO)}: `return {ast.unparse(node)}`: a status this test cannot read; "
            "add the function that decides it to DELEGATES"
        )
        target = DELEGATES[key]
        if isinstance(target, set):
            return set(target)
        file, name = target
        return Returns(REPO / file).function(name)


def verb_rows() -> dict[str, tuple[str, set[int]]]:
    """The verbs' table: the first cell's command(s) -> (the row's text, the statuses it names)."""
    _, verbs = status_tables()
    return {
        row[0]: (row[1], {int(n) for n in re.findall(r"(?<![\w.-])(\d+)(?![\w.-])", row[1])}) for row in verbs
    }


def test_every_status_a_verb_can_return_is_in_the_table():
    """Each `dayzero` verb's statuses, read from dayzero/cli/*.py, are on its row or on the row
    of what every verb returns (`__init__.main`'s error mapping, argparse's 2)."""
    rows = verb_rows()
    every = rows["every verb"][1]
    assert {0, 1, 2} <= every  # argparse exits 2 on an unknown argument
    assert Returns(CLI / "__init__.py").all() <= every
    assert {code for code, _ in CLI_EXIT_STATUSES.values()} <= every
    run_statuses = {code for code, _ in EXIT_STATUSES.values()}
    missing = []
    for path in sorted(CLI.glob("*.py")):
        if path.name in ("__init__.py", "__main__.py"):
            continue
        verb = path.stem.rstrip("_")
        found = Returns(path).all()
        text, codes = next(
            (row for command, row in rows.items() if f"`dayzero {verb}" in command), ("", set())
        )
        named = every | codes
        if PASS in found:
            says = PASSES_ON.get(verb, "(add the verb to PASSES_ON)")
            assert says in text, f"dayzero {verb} passes on a process's status: its row should say {says!r}"
            found.discard(PASS)
            if verb == "nightly":  # the run's status: the run table's, every one of them
                found |= run_statuses
                named |= run_statuses
        if found - named:
            missing.append(f"dayzero {verb} ({path.name}) can return {sorted(found - named)}")
    assert not missing, "exit statuses missing from the README's table:\n" + "\n".join(missing)


def test_the_source_reader_finds_the_statuses_it_should():
    """The reader itself, on verbs whose statuses are known: a literal in an `-> int` function,
    a module constant, a conditional, a delegate, a subprocess's status passed on."""
    assert Returns(CLI / "lint.py").all() == {0, 1, 2}
    assert Returns(CLI / "hosts.py").all() == {0, 1}
    assert Returns(CLI / "submission.py").all() == {0, 1, 2, 3}
    assert Returns(CLI / "nightly.py").all() == {PASS, 1, 3}
    assert Returns(CLI / "recipe.py").all() == {0, 1}  # SystemExit with a message: 1
