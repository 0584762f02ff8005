"""`bench/report_format.carry_over`: a full `bench/report.py` run keeps the sections it did not measure.

The page holds sections measured by hand (the same-run A/Bs 5c and 5d, section 8) and sections that need
an option (6b, `--episode`); a full run used to rewrite the page from its own results alone and erase them.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from report_format import _sections, carry_over  # noqa: E402 - bench/ is not a package

PAGE = (REPO / "docs" / "benchmarks.md").read_text()


def _without(doc: str, keys: set[str], target_prefix: str) -> str:
    head = doc.split("\n## ", 1)[0]
    kept = [text for key, text in _sections(doc) if key not in keys]
    new = head.rstrip() + "\n\n" + "\n".join(kept)
    lines = [line for line in new.split("\n") if not line.startswith(target_prefix)]
    return "\n".join(lines)


def test_sections_a_run_did_not_measure_come_back_in_place_with_their_targets() -> None:
    keys = [key for key, _ in _sections(PAGE)]
    assert {"5c.", "5d.", "6b.", "8."} <= set(keys)  # the page this test is about
    episode_target = next(line for line in PAGE.splitlines() if line.startswith("- CPU per real episode"))
    fresh = _without(PAGE, {"5c.", "5d.", "6b.", "8."}, "- CPU per real episode")
    assert "## 5d." not in fresh and episode_target not in fresh

    page = carry_over(PAGE, fresh)
    assert [key for key, _ in _sections(page)] == keys  # same order as before
    assert dict(_sections(page)) == dict(_sections(PAGE))  # each section verbatim
    assert episode_target in page.split("## 1.")[0]  # in the Targets list, before section 1
    assert "Sections 5c, 5d, 6b, 8 were not measured by this run" in page


def test_a_page_with_nothing_to_carry_is_unchanged() -> None:
    assert carry_over(PAGE, PAGE) == PAGE
