"""The staged build (tuning seeds on the whole lr grid, then the reported seeds at the chosen lrs only) gives
the readout of the unstaged one: same choices, contrasts and n*(C), from fewer runs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from studies.claims.groupstd import SIZES, build


@pytest.mark.slow
def test_staged_build_reads_out_as_the_full_grid(tmp_path):
    size = replace(SIZES["quick"], batch=None)  # the n-vs-m part (the staged LM size has no fixed batch)
    full, _, _ = build(size, tmp_path / "full", jobs=1)
    staged, t, _ = build(replace(size, staged=True), tmp_path / "staged", jobs=1)
    for key in full["arms"]:
        a, b = full["arms"][key], staged["arms"][key]
        assert [r["lr"] for r in a["rows"]] == [r["lr"] for r in b["rows"]]
        assert [r["extreme"] for r in a["rows"]] == [r["extreme"] for r in b["rows"]]
        assert [r["per_n"] for r in a["rows"]] == [r["per_n"] for r in b["rows"]]
        assert a["stars"] == b["stars"] and a["stars_ci"] == b["stars_ci"]
    assert full["verdict"] == staged["verdict"]
    runs = sum(len(v) for v in t.plan.values())
    assert runs < full["wall"]["runs"]  # the reported seeds ran at the chosen lrs only
