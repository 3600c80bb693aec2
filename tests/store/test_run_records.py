"""summary.json as one record (records.RunSummary): what the parser writes is what every reader reads back, field by
field, and a field that is not what the record holds is named (issue 39 item 3)."""

from __future__ import annotations

import json

import pytest

from graphsweep.records import RunSummary
from tests.support import ROOT

SUMMARIES = sorted((ROOT / "results" / "examples").glob("*/runs/*/summary.json"))


def test_every_committed_summary_reads_back_as_the_record_it_was_written_from() -> None:
    assert len(SUMMARIES) > 50  # the six example sweeps' real runs
    for path in SUMMARIES:
        d = json.loads(path.read_text())
        for record in d["arms"].values() if "arms" in d else [d]:  # a pair job: one record per arm
            again = RunSummary.from_dict(record).to_dict()
            assert again == {k: v for k, v in record.items() if k in again}, path
            assert set(again) <= set(record) | {"seed"}, (path, set(again) - set(record))


@pytest.mark.parametrize("field, value, says", [
    ("steady_n", "26", "steady_n = '26' is not a whole number"),
    ("measurement_usable", 1, "measurement_usable = 1 is not true or false"),
    ("step_ms_median", True, "step_ms_median = True is not a number"),
    ("notes", "one note", "notes = 'one note' is not a list"),
    ("outcome", "fine", "outcome = 'fine' is not one of completed"),
    ("host_attn_ms", "12.0", "host_attn_ms = '12.0' is not a number"),
])  # fmt: skip
def test_a_field_that_is_not_what_the_record_holds_is_named(field, value, says) -> None:
    d = json.loads(next(p for p in SUMMARIES if "arms" not in p.read_text()).read_text())
    with pytest.raises(ValueError, match=r"^" + says.replace("(", r"\(").replace(")", r"\)")):
        RunSummary.from_dict({**d, field: value})
