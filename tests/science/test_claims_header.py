"""The claims report header names the command that regenerates it (--results when not the default, the seed
offset and replication where they differ from the mode's defaults)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from isocompute.reports.claims.common import MODES
from isocompute.reports.claims.report import command_line, render


def _cmd(plan, results):
    line = render(plan, [], 1.0, results).splitlines()[2]
    return line.split("`")[1]


def test_header_names_a_non_default_results_dir():
    # a full report rendered from one seed set says so: the full report replicates by default
    cmd = _cmd(MODES[("sim", False)], Path("results/mech12"))
    assert cmd == "isocompute report claims --no-replicate --results results/mech12"
    assert command_line(MODES[("sim", False)], Path("results/claims/sim"), replicate_on=True) == (
        "isocompute report claims")
    assert command_line(MODES[("sim", False)], Path("results/claims/sim"), docs=True) == (
        "isocompute report claims --docs")


def test_header_omits_the_default_results_dir():
    assert _cmd(MODES[("sim", True)], Path("results/claims/sim")) == "isocompute report claims --quick"
    cmd = _cmd(MODES[("llm", True)], Path("results/claims/llm"))
    assert cmd == "isocompute report claims --backend llm --quick"


def test_header_names_the_seed_offset_and_replication():
    plan = replace(MODES[("sim", True)], seed_offset=3)
    assert command_line(plan, Path("results/claims/sim"), replicate_on=True) == (
        "isocompute report claims --quick --seed-offset 3 --replicate")


def test_a_bad_seed_offset_is_one_line_and_exit_2(tmp_path):
    from click.testing import CliRunner

    from isocompute.cli import main

    r = CliRunner().invoke(main, ["report", "claims", "--quick", "--seed-offset", "-1", "--results",
                                  str(tmp_path / "r")])
    assert r.exit_code == 2 and "--seed-offset" in r.output and not (tmp_path / "r").exists()


def test_header_says_how_many_runs_it_computed_and_what_running_all_took(tmp_path):
    """A report regenerated from stored runs quotes its own time: the header says how many runs that
    invocation computed (finished after it started) and the worker time of all of them."""
    import datetime as dt
    import json

    from isocompute.reports.claims.report import computed_runs, runs_text

    runs = tmp_path / "runs"
    runs.mkdir()
    recs = [("a", "2026-12-03T10:00:00+0000", 2.0, "done"), ("b", "2026-12-03T12:00:00+0000", 3.5, "done"),
            ("c", "2026-12-03T12:30:00+0000", 9.0, "failed")]
    for rid, fin, wall, status in recs:
        (runs / f"{rid}.json").write_text(json.dumps({"run_id": rid, "finished": fin, "wall_s": wall,
                                                      "status": status}))
    got = computed_runs(tmp_path, dt.datetime(2026, 12, 3, 11, tzinfo=dt.UTC))
    assert got == (1, 2, 5.5)
    assert runs_text(got) == (" (1 of 2 runs computed now, the rest reused from its results directory; "
                              "running all of them took 6 s of worker time)")
    assert runs_text(None) == ""
