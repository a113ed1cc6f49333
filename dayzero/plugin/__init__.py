"""The pytest plugin (entry point `pytest11: dayzero = "dayzero.plugin"`): cells become test items.

Thin on purpose (labgrid's rule): `hooks` holds options, markers, parametrization and end-of-run
glue, `fixtures` the run's context and the cell run, `crash` the controller's answer to a worker
that died mid-cell, `labfault` a cell the lab broke reported as such, `tally` the run's count of
its cells and the exit status of a run that tested nothing or met only lab faults; everything
they do is a library call.
"""

from dayzero.plugin.early import pytest_load_initial_conftests
from dayzero.plugin.fixtures import dayzero_baseline, dayzero_context, run_cell_checked
from dayzero.plugin.hooks import (
    pytest_addoption,
    pytest_collection,
    pytest_collection_finish,
    pytest_configure,
    pytest_configure_node,
    pytest_generate_tests,
    pytest_report_header,
    pytest_runtestloop,
    pytest_sessionfinish,
    pytest_xdist_auto_num_workers,
)
from dayzero.plugin.labfault import pytest_report_teststatus, pytest_runtest_makereport
from dayzero.plugin.signals import pytest_keyboard_interrupt

__all__ = [
    "dayzero_baseline",
    "dayzero_context",
    "pytest_addoption",
    "pytest_collection",
    "pytest_collection_finish",
    "pytest_configure",
    "pytest_configure_node",
    "pytest_generate_tests",
    "pytest_keyboard_interrupt",
    "pytest_load_initial_conftests",
    "pytest_report_header",
    "pytest_report_teststatus",
    "pytest_runtest_makereport",
    "pytest_runtestloop",
    "pytest_sessionfinish",
    "pytest_xdist_auto_num_workers",
    "run_cell_checked",
]
