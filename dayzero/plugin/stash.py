"""What the hooks keep in pytest's stash for the fixtures and the reports: the matrix and the
inventory once loaded, the run's id and start, what the engines' parsers refuse per cell (`spec.lint`)."""

from __future__ import annotations

import pytest

from dayzero.spec.inventory import Inventory
from dayzero.spec.matrix import Matrix

MATRIX_KEY = pytest.StashKey[Matrix]()
INVENTORY_KEY = pytest.StashKey[Inventory]()
RUN_ID_KEY = pytest.StashKey[str]()
STARTED_KEY = pytest.StashKey[str]()
LINT_KEY = pytest.StashKey[dict[str, list[str]]]()
