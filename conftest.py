"""Thin on purpose: the dayzero plugin does the work (options, markers, cells, reports)."""

pytest_plugins = ["dayzero.plugin"]
