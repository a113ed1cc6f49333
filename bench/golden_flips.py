#!/usr/bin/env python3
"""How much does the near-tie tolerance let through? Over the shipped goldens (issue 39).

For every golden probe recorded with log-probabilities and every position in it, a single-token
flip: the output takes the golden's runner-up at that position (the most likely other token), and
the forged output claims the flip is an exact tie (its own log-probabilities say so, as a bundle
could). The comparison (`dayzero.checks.near_tie.compare_steps`) passes such a flip only where the
golden itself, the maintainers' recording, holds the two within the policy's `near_tie_nats`.

Prints, per engine and in all: positions, near-ties among them (flips that pass), and the flips at
non-ties that pass (must be 0); and how many golden probes (and cells) hold at least one near-tie,
i.e. how many a flip at a random position could pass through at all.

    .venv/bin/python bench/golden_flips.py [--goldens suites/goldens] [--near-tie-nats 0.5]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dayzero.checks.near_tie import Step, compare_steps, steps  # noqa: E402
from dayzero.spec.card import NEAR_TIE_NATS  # noqa: E402
from dayzero.spec.goldens import load_golden  # noqa: E402


def flips(golden: tuple[Step, ...], bound: float) -> Counter:
    out: Counter = Counter()
    for i, step in enumerate(golden):
        others = [(t, lp) for t, lp in step.top if t != step.token]
        if not others:
            continue
        alt, alt_lp = max(others, key=lambda x: x[1])
        forged = Step(alt, step.logprob, ((alt, step.logprob), (step.token, step.logprob)))
        output = (*golden[:i], forged, *golden[i + 1 :])
        tie = step.logprob - alt_lp <= bound
        passed = compare_steps(golden, output, near_tie_nats=bound).ok
        out["positions"] += 1
        out["near_ties"] += tie
        out["passed_at_tie"] += passed and tie
        out["passed_at_non_tie"] += passed and not tie
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--goldens", default="suites/goldens")
    p.add_argument("--near-tie-nats", type=float, default=NEAR_TIE_NATS)
    args = p.parse_args(argv)
    root = Path(args.goldens)
    per_engine: dict[str, Counter] = {}
    probes_with_tie = probes = cells_with_tie = cells = 0
    for path in sorted(root.rglob("*.json")):
        cell = str(path.relative_to(root).with_suffix(""))
        golden = load_golden(root, cell)
        engine = cell.split("/")[1].split("+")[-1]
        any_tie = False
        for raw in golden.tokens.values():
            recorded = steps(raw)
            if not recorded:
                continue
            c = flips(recorded, args.near_tie_nats)
            per_engine.setdefault(engine, Counter()).update(c)
            probes += 1
            probes_with_tie += c["near_ties"] > 0
            any_tie |= c["near_ties"] > 0
        if golden.tokens:
            cells += 1
            cells_with_tie += any_tie
    total: Counter = sum(per_engine.values(), Counter())
    print(f"near-tie bound {args.near_tie_nats} nats; a flip = the golden's runner-up at one position")
    print(f"{'engine':<12}{'positions':>10}{'near-ties':>11}{'share':>8}{'passed at non-tie':>19}")
    for name, c in [*sorted(per_engine.items()), ("all", total)]:
        share = c["near_ties"] / c["positions"] if c["positions"] else 0.0
        print(f"{name:<12}{c['positions']:>10}{c['near_ties']:>11}{share:>8.1%}{c['passed_at_non_tie']:>19}")
    print(f"golden probes with a near-tie: {probes_with_tie}/{probes}; cells {cells_with_tie}/{cells}")
    return 1 if total["passed_at_non_tie"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
