"""Vendor submissions: pack a closed set of files, check it without trusting its summaries, accept it.

Shaped like MLPerf's submission checker after its refactor: one module per family of checks
(extract, manifest, signature, schema, completeness, recompute, antigaming, provenance), each
check a named function returning `Finding`s; `check` runs them all, `pack` builds a bundle and
`accept` adds a checked bundle's evidence to the reports.
"""

from dayzero.submission.findings import Finding

__all__ = ["Finding"]
