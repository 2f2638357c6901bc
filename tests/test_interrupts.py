"""Ctrl-C and SIGTERM on every kind of long command, as a user's shell delivers them to a process without a
terminal: the command ends within 2 s with exit 130 (SIGINT) or 143 (SIGTERM) and says so in exactly one line
on stderr (no traceback, whatever was running: compiled Numba code, torch, a sweep's threads), and a sweep
keeps the runs that had finished before the signal and says how many.

Each test starts the command in a subprocess, waits until it shows that its work started (a progress line,
forced every 0.25 s by ISOCOMPUTE_PROGRESS_EVERY, past its first step; a run's record in a sweep's store; a
report's store), sends the signal and times the exit. Progress lines the command had written before it
handled the signal are not the interrupt's line; every other line after the signal is.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX signals")

EXIT_S = 2.0
"""Longest time from the signal to the process's exit."""
PROGRESS = re.compile(r"\((\d+ s|\d+ min \d+ s|\d+ h \d+ min)(, ETA [^)]*)?\)$")
"""The end of a progress line (isocompute.contract.progress): its elapsed time and ETA."""


class Command:
    """`isocompute ARGS` in a subprocess without a terminal, its stderr lines read as they come (with the
    time each was read)."""

    def __init__(self, args: list[str], cwd: Path, every: float = 0.25):
        env = {**os.environ, "ISOCOMPUTE_PROGRESS_EVERY": str(every)}
        # SIGINT back to its default: a suite started in the background inherits it ignored
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "isocompute", *map(str, args)], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        self.lines: list[tuple[float, str]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def wait_until(self, cond, timeout: float = 240.0) -> None:
        """Until `cond()` holds; fails if the command ends or the time runs out first."""
        deadline = time.monotonic() + timeout
        while not cond():
            if self.proc.poll() is not None:
                self._reader.join(5)
                pytest.fail(f"ended (rc {self.proc.returncode}) before its work showed:\n{self.stderr()}")
            if time.monotonic() > deadline:
                self.proc.kill()
                pytest.fail(f"no sign of work in {timeout} s:\n{self.stderr()}")
            time.sleep(0.05)

    def progressed(self, at_least: int = 1) -> bool:
        """A progress line past `at_least` steps (`step K/M` with K >= at_least)."""
        return any(int(m.group(1)) >= at_least for _, line in self.lines
                   if (m := re.search(r"\bstep (\d+)/\d+", line)) and PROGRESS.search(line))

    def stderr(self) -> str:
        return "\n".join(line for _, line in self.lines)

    def interrupt(self, sig: int = signal.SIGINT) -> tuple[int, float, list[str], str]:
        """Send `sig`: (exit code, seconds to exit, the lines after the signal that are not progress lines,
        stdout)."""
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail(f"still running 60 s after {signal.Signals(sig).name}:\n{self.stderr()}")
        took = time.monotonic() - t0
        self._reader.join(10)
        out = self.proc.stdout.read()
        after = [line for t, line in self.lines if t >= t0 and not PROGRESS.search(line)]
        return self.proc.returncode, took, after, out


def assert_one_line(cmd: Command, sig: int, rc: int, took: float, after: list[str]) -> None:
    want = 130 if sig == signal.SIGINT else 143
    assert rc == want, (rc, cmd.stderr())
    assert took < EXIT_S, f"{took:.2f} s to exit\n{cmd.stderr()}"
    assert len(after) == 1 and after[0].startswith("interrupted"), cmd.stderr()
    assert "Traceback" not in cmd.stderr() and "Error" not in cmd.stderr(), cmd.stderr()


def finished_runs(out: Path) -> int:
    return len(list((out / "runs").glob("*.json"))) if (out / "runs").is_dir() else 0


# --------------------------------------------------------------------------------------------- simulator
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_simulator_run_stops_at_once(tmp_path, sig):
    """A run of ~10 s on the simulator: its main thread waits while the compiled kernels run on another."""
    cmd = Command(["run", "--budget", "2^26"], tmp_path)
    cmd.wait_until(lambda: cmd.progressed(1))
    rc, took, after, out = cmd.interrupt(sig)
    assert_one_line(cmd, sig, rc, took, after)
    assert out == "" and "nothing was saved" in after[0]


def test_a_simulator_sweep_keeps_the_runs_finished_before_the_signal(tmp_path):
    """Runs are handed out one at a time, so those that finished are stored however early the signal comes;
    the interrupt's line counts them, and is the only line on stderr (--quiet)."""
    out = tmp_path / "res"
    cmd = Command(["sweep", "n-vs-m", "--out", out, "--n", "2,4,8,16", "--seeds", "3", "--budget", "2^22",
                   "--jobs", "2", "--quiet"], tmp_path)
    cmd.wait_until(lambda: finished_runs(out) >= 1)
    before = finished_runs(out)
    rc, took, after, _ = cmd.interrupt()
    assert_one_line(cmd, signal.SIGINT, rc, took, after)
    assert len(cmd.lines) == 1, cmd.stderr()
    kept = finished_runs(out)
    assert kept >= before >= 1 and kept < 12
    assert after[0] == (f"interrupted: {kept} of 12 runs finished and kept in {out} ({kept} of them now); "
                        "rerun to resume")
    assert not (out / ".lock").exists()


# ------------------------------------------------------------------------------------------------ tiny LM
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_tiny_lm_run_stops_at_once_without_a_traceback(tmp_path, sig):
    """The signal lands while the compiled decoder or trainer runs (most of a step's time): it is held until
    that call returns, never raised inside it (Numba's "returned a result with an exception set")."""
    pytest.importorskip("torch")
    cmd = Command(["run", "--backend", "llm", "--lm", "tiny", "--budget", "2^17"], tmp_path)
    cmd.wait_until(lambda: cmd.progressed(3))
    rc, took, after, out = cmd.interrupt(sig)
    assert_one_line(cmd, sig, rc, took, after)
    assert out == ""


def test_a_tiny_lm_sweep_keeps_its_finished_runs(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "res"
    cmd = Command(["sweep", "n-vs-m", "--backend", "llm", "--lm", "tiny", "--n", "2,4,8", "--budget", "2^13",
                   "--seeds", "2", "--jobs", "1", "--out", out], tmp_path)
    cmd.wait_until(lambda: finished_runs(out) >= 1)
    before = finished_runs(out)
    rc, took, after, _ = cmd.interrupt()
    assert_one_line(cmd, signal.SIGINT, rc, took, after)
    kept = finished_runs(out)
    assert kept >= before and f"interrupted: {kept} of 6 runs finished and kept" in after[0]


# ---------------------------------------------------------------------------------------------- SmolLM2
@pytest.mark.llm
def test_a_smollm2_run_on_the_hf_engine_stops_at_once(tmp_path):
    """Interrupted at its first progress line: the model loaded, its first evaluation or step under way."""
    pytest.importorskip("transformers")
    cmd = Command(["run", "--backend", "llm", "--n", "2", "--bp", "2", "--budget", "2^10", "--option",
                   "engine=hf", "--option", "max_new_tokens=16", "--d-val", "2", "--k", "1"], tmp_path)
    cmd.wait_until(lambda: cmd.progressed(0), timeout=400)
    rc, took, after, _ = cmd.interrupt()
    assert_one_line(cmd, signal.SIGINT, rc, took, after)


# ------------------------------------------------------------------------------------------ report, fit
def test_a_report_stops_at_once_and_keeps_what_it_stored(tmp_path):
    """`report predict` on one simulator case: interrupted once its pilots' store exists."""
    results = tmp_path / "predict"
    cmd = Command(["report", "predict", "--cases", "interference-easy", "--results", results, "--out",
                   tmp_path / "p.md", "--jobs", "1"], tmp_path)
    cmd.wait_until(lambda: any(results.rglob("manifest.json")))
    time.sleep(1.0)  # into the runs
    rc, took, after, _ = cmd.interrupt()
    assert_one_line(cmd, signal.SIGINT, rc, took, after)
    assert not (tmp_path / "p.md").exists()


def test_fit_stops_at_once(tmp_path):
    """fit of 960 runs of 1,000 evaluations each (seconds of work: the resampled records of 16 curves),
    interrupted after its imports."""
    rng = np.random.default_rng(0)
    c = np.geomspace(1e3, 1e8, 1000)
    rows = [pd.DataFrame({"run_id": f"n{n}-s{s}", "compute": c, "n": n, "bp": 32,
                          "val_mean": 0.2 + 0.5 / (1 + (1e5 * n / c) ** 0.8) + rng.normal(0, 0.01, c.size)})
            for n in (2**k for k in range(1, 17)) for s in range(60)]
    path = tmp_path / "big.parquet"
    pd.concat(rows).to_parquet(path, index=False)
    cmd = Command(["fit", path], tmp_path)
    time.sleep(4.0)
    assert cmd.proc.poll() is None, "fit ended before the signal: make its table larger"
    rc, took, after, out = cmd.interrupt()
    assert_one_line(cmd, signal.SIGINT, rc, took, after)
    assert after[0] == "interrupted (nothing was written)" and out == ""
