"""Bad input: every case below gives one line and exit 2 before any work (or a named warning where the
input is usable), bounds quote their limit, and users' tables are cleaned with every dropped row counted."""

import warnings

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from isocompute.cli import main
from studies.config import MAX_BUDGET, RunConfig, StudiesError, parse_count, parse_count_list
from studies.io import DroppedRowsWarning, LeftOutRunsWarning, clean_external, load_table

TINY = ["--budget", "2^8", "--bp", "4", "--n", "2", "--d", "8", "--d-val", "8", "--n-evals", "3"]


def _invoke(args):
    return CliRunner().invoke(main, args)


def _one_line_exit_2(res, match):
    assert res.exit_code == 2, (res.exit_code, res.output)
    assert "Traceback" not in res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert match in lines[0], lines[0]


@pytest.mark.parametrize("text", ["2^63", "2^200", "1e19", "10^100000000", "9" * 5000,
                                  "18446744073709551616"])
def test_counts_beyond_int64_are_refused_quickly(text):
    with pytest.raises(StudiesError, match="2\\^62"):
        parse_count(text)


def test_ranges_are_bounded_before_they_expand():
    with pytest.raises(StudiesError, match="2\\^62"):
        parse_count_list("2^1..2^100000000")
    with pytest.raises(StudiesError, match="base >= 2"):
        parse_count_list("1^1..1^100000000")
    assert parse_count_list("2^60..2^62")[-1] == 2**62


@pytest.mark.parametrize("kw, match", [
    ({"budget": MAX_BUDGET + 1}, "2^53"),
    ({"budget": 2**40}, "2^30 steps"),
    ({"seed": 2**64}, "2^63 - 1"),
    ({"problem_seed": 2**63}, "2^63 - 1"),
    ({"d": 2**40}, "2^31 - 1"),
    ({"n_evals": 10**9}, "4096"),
    ({"k": 2**20}, "2^16"),
])
def test_runconfig_bounds_name_their_limit(kw, match):
    with pytest.raises(StudiesError, match=match.replace("^", "\\^")):
        RunConfig(**kw)


def test_simulator_memory_and_finite_checks():
    from sandbox.config import ConfigError, SimConfig, memory_estimate

    assert memory_estimate(SimConfig()) < 2**26  # the default run: tens of MB at most
    with pytest.raises(ConfigError, match="GiB RAM"):
        SimConfig(K=2**40)
    with pytest.raises(ConfigError, match="GiB RAM"):
        SimConfig(model="linear", dim=2**31)
    with pytest.raises(ConfigError, match="response_len must be a finite number"):
        SimConfig(response_len=float("inf"))
    with pytest.raises(ConfigError, match="finite"):
        SimConfig(weight_decay=float("nan"), optimizer="adamw")


# The bad inputs, case by case: each fails in one line, before any run (all of these return in well under
# a second; none of them may reach an engine).
ISSUE_CASES = [
    (["run", *TINY, "--out", "/proc/x.csv"], "cannot write --out /proc/x.csv"),
    (["run", *TINY, "--out", "x.xlsx"], "unknown table format .xlsx"),
    (["run", *TINY, "--out", ""], "empty path"),
    (["run", "--budget", "2^63"], "2^62"),
    (["run", "--budget", "1e19"], "2^62"),
    (["run", "--budget", "2^200"], "2^62"),
    (["run", "--budget", "2^40", "--bp", "1", "--n", "2"], "2^30 steps"),
    (["run", *TINY, "--seed", "18446744073709551616"], "2^63 - 1"),
    (["run", *TINY, "--d", "2^40"], "2^31 - 1"),
    (["run", *TINY, "--option", "K=2^40"], "GiB RAM"),
    (["run", *TINY, "--model", "linear", "--option", "dim=2^31"], "GiB RAM"),
    (["run", *TINY, "--n-evals", "1000000000"], "4096"),
    (["run", *TINY, "--device", "cuda"], "cpu only"),
    (["run", *TINY, "--option", "response_len=inf"], "response_len must be a finite number"),
    (["sweep", "n-vs-m", "--out", "{FILE}/sub", *TINY], "Not a directory"),
    (["sweep", "n-vs-m", "--out", "", *TINY], "empty path"),
    (["sweep", "n-vs-m", "--out", "{tmp}/s", "--n", "2^1..2^100000000"], "2^62"),
    (["sweep", "n-vs-m", "--out", "{tmp}/s", "--n", "2", "--seeds", "100000000"], "at most 100000"),
    (["sweep", "n-vs-m", "--out", "{tmp}/s", "--n", "2", "--seeds", "0"], "--seeds must be >= 1"),
    (["plot", "{tmp}/t.csv", "--out", "/proc/x.png"], "cannot write --out /proc/x.png"),
    (["plot", "{tmp}/t.csv", "--out", "{FILE}/x.png"], "not a directory"),
    (["demo", "--out", "{FILE}/demo"], "Not a directory"),
    (["figs", "--only", ""], "--only names no figure"),
    (["figs", "--only", "headline", "--out", "{FILE}/img"], "Not a directory"),
    (["figs", "--only", "headline", "--results", "{FILE}"], "is a file"),
    (["figs", "--only", "headline", "--reuse", "/nonexistent"], "--reuse /nonexistent"),
    (["fit", "{tmp}/conflict.csv"], "run_id a of"),
]


@pytest.fixture
def where(tmp_path):
    (tmp_path / "FILE").write_text("x")
    rows = [{"run_id": r, "compute": c, "n": n, "bp": 4, "val_mean": 0.1 + c / 1e4}
            for r, n in (("a", 2), ("b", 4)) for c in (0, 64, 128, 256, 512)]
    pd.DataFrame(rows).to_csv(tmp_path / "t.csv", index=False)
    rows[1]["n"] = 8
    pd.DataFrame(rows).to_csv(tmp_path / "conflict.csv", index=False)
    return tmp_path


@pytest.mark.parametrize("args, match", ISSUE_CASES, ids=[" ".join(a)[:60] for a, _ in ISSUE_CASES])
def test_issue_cases_fail_in_one_line_before_work(where, args, match):
    args = [a.replace("{FILE}", str(where / "FILE")).replace("{tmp}", str(where)) for a in args]
    _one_line_exit_2(_invoke(args), match)


def test_run_out_into_a_new_directory_is_created_and_written_atomically(tmp_path):
    out = tmp_path / "new" / "deeper" / "x.parquet"
    res = _invoke(["run", *TINY, "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert len(pd.read_parquet(out)) >= 2
    assert not [p for p in out.parent.iterdir() if p.name.endswith(".tmp")]


def test_jobs_above_four_per_core_are_capped_with_a_warning(tmp_path):
    import os

    res = _invoke(["sweep", "n-vs-m", "--out", str(tmp_path / "s"), *TINY, "--jobs", "999", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert f"capped at {4 * (os.cpu_count() or 1)}" in res.stderr


# ----------------------------------------------------------------------------------------- external tables
def _table():
    rows = [{"run_id": r, "compute": c, "n": n, "bp": 4, "val_mean": 0.1 + c / 1e4}
            for r, n in (("a", 2), ("b", 4), ("c", 8)) for c in (0, 64, 128, 256)]
    return pd.DataFrame(rows).astype(object)


def test_every_dropped_row_is_counted_by_cause():
    t = _table()
    t.loc[0, "run_id"] = None
    t.loc[5, "compute"] = "later"
    t.loc[6, "compute"] = -3
    t.loc[9, "n"] = 2.5
    t.loc[10, "val_mean"] = "n/a"
    out, notes = clean_external(t, metric="val_mean", where="t.csv")
    assert len(out) == 12 - 5
    assert notes == [(DroppedRowsWarning, "dropped 5 of 12 row(s) of t.csv: 1 with no run_id, 1 with "
                      "non-numeric compute, 1 with negative compute, 1 with n not a positive integer, 1 with "
                      "non-numeric val_mean")]
    assert out["compute"].dtype == np.int64 and out["n"].dtype == np.int64


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_run_with_a_non_finite_metric_is_left_out_whole(bad):
    t = _table()
    t.loc[5, "val_mean"] = bad  # run b
    out, notes = clean_external(t, metric="val_mean", where="t.csv")
    assert set(out["run_id"]) == {"a", "c"} and len(out) == 8
    assert notes[0][0] is LeftOutRunsWarning and "b (1 row(s))" in notes[0][1]


def test_a_run_id_with_two_configurations_is_an_error_naming_it():
    t = _table()
    t.loc[2, "bp"] = 8
    with pytest.raises(StudiesError, match="run_id a of t.csv has 2 values of bp \\(4, 8\\)"):
        clean_external(t, where="t.csv")


def test_fit_and_plot_print_the_same_data_warnings(tmp_path):
    t = _table()
    t.loc[5, "val_mean"] = np.inf
    t.loc[0, "compute"] = "x"
    t.to_csv(tmp_path / "t.csv", index=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_table(tmp_path / "t.csv", metric="val_mean")
    assert {w.category for w in caught} == {LeftOutRunsWarning, DroppedRowsWarning}
    fit = _invoke(["fit", str(tmp_path / "t.csv")])
    plot = _invoke(["plot", str(tmp_path / "t.csv"), "--out", str(tmp_path / "f.png")])
    assert fit.exit_code == 0 and plot.exit_code == 0, (fit.output, plot.output)
    data_lines = [ln for ln in fit.stderr.splitlines() if "dropped" in ln or "left out" in ln]
    assert len(data_lines) == 2
    assert all(ln in plot.stderr.splitlines() for ln in fit.stderr.splitlines())


# ---------------------------------------------------------------------------------------------- interrupts
@pytest.mark.parametrize("sig, code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_interrupts_print_the_resume_message_and_leave_nothing_partial(tmp_path, sig, code):
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "s"
    cmd = [sys.executable, "-m", "isocompute", "sweep", "n-vs-m", "--out", str(out), "--n", "2,4,8",
           "--bp", "1", "--budget", "2^24", "--d", "8", "--d-val", "8", "--jobs", "1", "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not (out / "manifest.json").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    proc.send_signal(getattr(signal, sig))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    kept = len(list((out / "runs").glob("*.json"))) if out.exists() else 0  # what the line must count
    said = (f"{kept} of 3 runs finished and kept in {out} ({kept} of them now); rerun to resume" if kept else
            "no run had finished, nothing was kept")
    assert err.strip().splitlines() == [f"interrupted: {said}"]
    assert "Traceback" not in err
    assert not [p for p in out.rglob("*.tmp")]


@pytest.mark.parametrize("raised, code", [("KeyboardInterrupt", 130), ("icli.Terminated", 143)])
def test_an_interrupt_inside_a_half_built_object_still_ends_on_the_one_line(raised, code):
    """The signal can land inside Numba's compiler, in llvmlite's OutputString.__init__ before it sets _ptr:
    its destructor then fails as the interrupt's frames are freed, after the message is printed."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import sys, click
        import isocompute.cli as icli

        class HalfBuilt:
            def __init__(self):
                raise {raised}()
                self._ptr = None

            def __del__(self):
                self._ptr

        @icli.main.command("boom")
        def boom():
            HalfBuilt()

        sys.argv = ["isocompute", "boom"]
        icli.main()
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == code, proc.stderr
    assert proc.stderr.strip().splitlines() == ["interrupted (finished runs are kept; rerun to resume)"]
