"""Bundles for the submission checker's tests, built in code: valid ones and hostile ones.

Nothing here is a fixture file on disk: keys are generated per test session (never committed),
bundles are packed from synthetic or real runs, and hostile bundles are made by rewriting a
valid bundle's members at the tar level (links, devices, traversal, bombs) or its documents
(with or without re-signing, as a vendor holding its own key could).
"""
