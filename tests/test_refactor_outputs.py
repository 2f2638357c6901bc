"""The house refactor moved code, not results: `isocompute demo` and the claims report run what the
pre-refactor commit runs on this machine (tests/pre_refactor.py runs it), table for table, bit for bit (the
claims report, whose comparison lives beside the quick report it reuses in
tests/science/test_claims_report.py: every run both declare).

The analysis printed from those runs is compared no more: n*(C) is read as the set of n the seeds cannot
tell apart (studies/fit/nstar.py), so the demo's n* tables and the report's n* cells and growth differ from
the old arg-max by design. Every stored run is compared exactly."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from pre_refactor import run_old

from isocompute.cli import main

pytestmark = pytest.mark.slow


def _old_cli(args: list[str]) -> str:
    return run_old(f"import sys\nfrom isocompute.cli import main\nsys.exit(main({args!r}))")


def _new_cli(args: list[str]) -> str:
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


def _tables(root: Path) -> dict[str, pd.DataFrame]:
    return {str(f.relative_to(root)): pd.read_parquet(f) for f in sorted(root.rglob("*.parquet"))}


def test_demo_stores_what_the_old_code_did(tmp_path):
    args = ["demo", "--seeds", "2", "--budget", "2^14", "--no-progress"]
    _old_cli([*args, "--out", str(tmp_path / "old")])
    new_out = _new_cli([*args, "--out", str(tmp_path / "new")])
    assert new_out.count("compute-optimal n*(C)") == 2
    old, new = _tables(tmp_path / "old"), _tables(tmp_path / "new")
    assert old.keys() == new.keys() and len(old) >= 2 * 2 * 8  # two presets, 2 seeds, n = 2..256
    for name, table in old.items():
        pd.testing.assert_frame_equal(new[name], table, check_exact=True, obj=name)
