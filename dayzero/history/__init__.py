"""History: every night's evidence in one store, its series per cell and metric, their change points.

The evidence JSON stays the source of truth: the store is an index that `rebuild` makes again
from a folder of nights. `points` reads a document (pure; a check's levels and which way is
better: `levels`, shared with the previous-night comparison), `store` keeps it (SQLite or
PostgreSQL, one schema), `changes` finds persistent shifts in a series and says what changed
with them, `trends` words them for the nightly report.
"""
