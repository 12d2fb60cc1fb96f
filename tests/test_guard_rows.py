"""docs/timeouts.md's table of guards says what ``analyze`` says of each: a guard added without a row there, or a
default changed in one place only, fails here."""

from __future__ import annotations

import re

from engdiag.analysis.guard_rows import ROWS
from tests.conftest import ROOT


def _documented() -> dict[str, list[str]]:
    text = (ROOT / "docs" / "timeouts.md").read_text()
    section = text.split("## Every guard `analyze` names", 1)[1].split("\n## ", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith(("| guard ", "| ---"))]
    return {cells[0]: cells for cells in rows}


def test_every_guard_is_documented_with_its_owner_knob_and_default():
    documented = _documented()
    for row in ROWS.values():
        name = row.name.format(call=row.call_default)
        assert name in documented, f"{name!r} is missing from docs/timeouts.md's guard table"
        _, owner, _, limit, knob = documented[name]
        assert owner == row.owner, name
        assert (row.knob or "—").split(" (")[0] in knob.replace("`", ""), (name, row.knob, knob)
        if row.default_s is not None:
            assert re.search(rf"\b{row.default_s:g} s\b", limit), (name, row.default_s, limit)


def test_the_table_lists_no_guard_analyze_does_not_name():
    names = {row.name.format(call=row.call_default) for row in ROWS.values()}
    assert set(_documented()) <= names
