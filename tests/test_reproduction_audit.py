"""`submission audit` picks each vendor cell's latest run by instant, as the acceptance table does
(issue 42, item 3): a date's text order is not its time order once offsets differ."""

from __future__ import annotations

from dayzero.clock import parse_iso
from dayzero.report.reproduction import audit

CELL = "smollm2-135m/cpu+llama.cpp/low_latency/baseline"


def vendor_doc(run_id: str, finished: str) -> dict:
    return {"cell": CELL, "source": "acme", "verdict": "passed", "run": {"id": run_id, "finished": finished}}


def test_the_latest_run_is_the_latest_instant_not_the_greatest_text():
    later = vendor_doc("later", "2026-12-05T23:30:00-05:00")  # 04:30 UTC on the 6th
    earlier = vendor_doc("earlier", "2026-12-06T01:00:00+00:00")
    assert earlier["run"]["finished"] > later["run"]["finished"]  # as text, the other way round
    assert parse_iso(later["run"]["finished"]) > parse_iso(earlier["run"]["finished"])
    for docs in ([later, earlier], [earlier, later]):
        (item,) = audit(docs, sample=5, seed=1)
        assert item.doc["run"]["id"] == "later"
