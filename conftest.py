"""Thin on purpose: the dayzero plugin (package entry point `pytest11`) does the work.

It adds the options (--hosts, --matrix, --dry-run, ...), registers a marker for every name in
`matrix/`, and turns `suites/test_cells.py::test_cell` into one test item per cell.
"""
