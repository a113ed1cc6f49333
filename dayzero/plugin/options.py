"""The plugin's command-line options, and the paths they name resolved as a user expects."""

from __future__ import annotations

from pathlib import Path

import pytest

from dayzero.lab.transport import CONNECT_TIMEOUT_S, CONNECT_TRIES
from dayzero.report import nightly
from dayzero.report.acceptance import DEFAULT_MAX_AGE_DAYS

DEFAULTS = {
    "dayzero_hosts": "hosts/local.yaml",
    "dayzero_matrix": "matrix",
    "dayzero_reports": "reports",
    "dayzero_goldens": "suites/goldens",
}
OPTIONS: tuple[tuple[str, str, dict], ...] = (
    (
        "--hosts",
        "dayzero_hosts",
        {"help": "inventory of lab hosts (default: hosts/local.yaml, the embedded CPU host)"},
    ),
    (
        "--matrix",
        "dayzero_matrix",
        {"help": "matrix directory: hardware.yaml and models/*.yaml (default: matrix)"},
    ),
    (
        "--dry-run",
        "dayzero_dry_run",
        {
            "action": "store_true",
            "help": "print, per selected cell, the host(s) it would use and the exact commands; run nothing",
        },
    ),
    (
        "--allow-empty",
        "dayzero_allow_empty",
        {
            "action": "store_true",
            "help": "exit 0 even when no selected cell ran (no host of its hardware in the inventory, "
            "unsupported); without it such a run exits 5 with one line saying why",
        },
    ),
    (
        "--lint",
        "dayzero_lint",
        {
            "action": "store_true",
            "help": "parse every selected cell's commands with its engine's own parser first (dayzero lint); "
            "a cell whose command does not parse is not launched",
        },
    ),
    (
        "--reports",
        "dayzero_reports",
        {"help": "where evidence, raw records, logs and acceptance.md go (default: reports)"},
    ),
    ("--goldens", "dayzero_goldens", {"help": "golden outputs directory (default: suites/goldens)"}),
    (
        "--ready-deadline",
        "dayzero_ready_deadline",
        {
            "type": float,
            "default": None,
            "help": "seconds a recipe may take to become ready, for every card "
            "(default: each card's ready_deadline, else 600)",
        },
    ),
    (
        "--heartbeat-timeout",
        "dayzero_heartbeat_timeout",
        {
            "type": float,
            "default": 120.0,
            "help": "seconds without a heartbeat from this controller after which a host kills the cell's "
            "servers by itself (controller killed, connection lost; default: 120)",
        },
    ),
    (
        "--lease-wait",
        "dayzero_lease_wait",
        {
            "type": float,
            "default": 1800.0,
            "help": "seconds a cell waits for a matching host that another run or worker holds (the wait "
            "names the holder); a host that does not answer is quarantined, never waited for (default: 1800)",
        },
    ),
    (
        "--connect-timeout",
        "dayzero_connect_timeout",
        {
            "type": float,
            "default": CONNECT_TIMEOUT_S,
            "help": "seconds a host has to answer SSH (a refused or unresolved host is tried up to "
            f"{CONNECT_TRIES} times within them); a host that does not is quarantined for the run and "
            f"its cells are broken as a lab fault (default: {CONNECT_TIMEOUT_S:g})",
        },
    ),
    (
        "--baseline",
        "dayzero_baseline",
        {
            "default": None,
            "help": "reports dir of a previous run (the previous night): a cell whose metrics got worse "
            "beyond the noise band fails as a regression",
        },
    ),
    (
        "--regression-band",
        "dayzero_regression_band",
        {
            "type": float,
            "default": nightly.DEFAULT_BAND_PCT,
            "help": "default noise band in %% when a metric has no recorded spread "
            f"(default: {nightly.DEFAULT_BAND_PCT:g}; see dayzero.report.nightly)",
        },
    ),
    (
        "--stale-after",
        "dayzero_stale_after",
        {
            "type": float,
            "default": DEFAULT_MAX_AGE_DAYS,
            "help": "days after which evidence is Stale in the acceptance table "
            f"(default: {DEFAULT_MAX_AGE_DAYS:g})",
        },
    ),
)


def option_path(config: pytest.Config, option: str) -> Path:
    """Defaults are relative to the rootdir (the repository); given paths to where pytest ran."""
    given = config.getoption(option)
    value = Path(given)
    if value.is_absolute():
        return value
    base = config.rootpath if given == DEFAULTS[option] else Path(config.invocation_params.dir)
    return base / value
