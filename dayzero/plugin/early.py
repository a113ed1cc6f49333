"""`--hosts PATH` in pytest's space form: the rootdir and ini file decided again, once our options are known.

pytest picks the rootdir and the ini file (testpaths, addopts, markers) before it loads plugins
from entry points, so in `pytest -m cpu --hosts /srv/lab/inventory.yaml` it takes the unknown
option's value for a test path: the rootdir moves to /srv/lab, the ini is lost and no cell is
collected. By `pytest_load_initial_conftests` our options are known and parsed; if the decision
made without them differs, it is made again with the real test paths, and the ini's `addopts` are
applied as pytest applies them (`--strict-markers` is an ini override: without it a misspelt
`-m` marker would read as an empty lab). pytest offers no public way to do this, so this module
leans on three of its attributes and is tested for it.
"""

from __future__ import annotations

import copy

import pytest
from _pytest.config.findpaths import determine_setup, parse_override_ini


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> None:
    ns = early_config.known_args_namespace
    rootpath, inipath, inicfg, _ = determine_setup(
        inifile=ns.inifilename,
        override_ini=ns.override_ini,
        args=ns.file_or_dir,
        rootdir_cmd_arg=ns.rootdir or None,
        invocation_dir=early_config.invocation_params.dir,
    )
    if (rootpath, inipath) == (early_config.rootpath, early_config.inipath):
        return
    early_config._rootpath, early_config._inipath, early_config._inicfg = rootpath, inipath, inicfg
    early_config._inicache.clear()
    if inipath is not None:
        args[:] = [*early_config.getini("addopts"), *args]
        early_config.known_args_namespace = parser.parse_known_args(
            args, namespace=copy.copy(early_config.option)
        )
        early_config.known_args_namespace.confcutdir = str(inipath.parent)
        early_config._inicfg.update(parse_override_ini(early_config.known_args_namespace.override_ini))
        early_config._inicache.clear()
