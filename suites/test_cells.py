"""The conformance suite: one test item per cell of the matrix.

Each item leases its host(s), launches the cell's recipe, checks the answers against probes and
goldens, measures against the model card's floors, tears down and writes evidence.
Select with markers: `pytest -m b300`, `pytest -m "cpu and high_throughput"`, or `-k`.
"""


def test_cell(cell, run_cell_checked):
    run_cell_checked(cell)
