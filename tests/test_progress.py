"""Progress without a terminal (isocompute.contract.progress): a long run says where it is on stderr at least
every 15 s, at most one line every ~10 s (never a line per step), with step, rollouts, rollouts/s and the last
evaluation, an ETA only once measured; stdout keeps only the result; --quiet silences it; a terminal gets a
bar rewritten in place."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner

from isocompute.cli import main
from isocompute.contract.progress import EVERY, Progress

LINE = re.compile(r"^llm n=8 bp=32: step (\d+)/(\d+), ([\d,]+) rollouts, .*"
                  r"\((\d+ s|\d+ min \d+ s)(, ETA .*)?\)$")


class Clockless(io.StringIO):
    """A log stream (not a terminal)."""

    def isatty(self) -> bool:
        return False


def test_a_line_says_step_count_rate_notes_and_an_eta_only_once_measured():
    out = Clockless()
    p = Progress("job", 100, "step", "rollouts", stream=out, period=3600)
    assert p.line() == "job: step 0/100, 0 rollouts (0 s)"  # nothing measured: no rate, no ETA
    p.update(10, 2560, evaluation="val_mean 0.500 at step 10")
    assert "ETA" not in p.line() and "rollouts/s" not in p.line()  # one measurement is not a pace
    time.sleep(0.3)
    p.update(20, 5120)
    line = p.line()
    assert re.fullmatch(r"job: step 20/100, 5,120 rollouts, [\d,]+ rollouts/s, val_mean 0.500 at step 10 "
                        r"\(0 s, ETA \d+ s\)", line), line
    p.update(evaluation=None)
    assert "val_mean" not in p.line()
    p.close()
    assert out.getvalue() == ""  # the heartbeat had nothing to say within its period


def test_the_heartbeat_prints_lines_without_updates_and_stops_at_close():
    out = Clockless()
    polled = []
    p = Progress("sim", 8, "step", "rollouts", stream=out, period=0.2,
                 poll=lambda: polled.append(1) or {"done": len(polled), "amount": 100 * len(polled)})
    time.sleep(1.3)
    p.close()
    lines = out.getvalue().splitlines()
    assert 3 <= len(lines) <= 8 and polled, lines
    assert all(line.startswith("sim: step ") for line in lines)
    time.sleep(0.5)
    assert out.getvalue().splitlines() == lines  # nothing after close


def test_disabled_progress_prints_nothing_and_starts_no_thread():
    out = Clockless()
    before = threading.active_count()
    p = Progress("x", 3, stream=out, enabled=False, period=0.01)
    p.update(1, evaluation="e")
    p.say("a phase")
    time.sleep(0.1)
    p.close()
    assert out.getvalue() == "" and threading.active_count() == before


def test_a_terminal_gets_a_bar_rewritten_in_place_and_lines_above_it():
    out = io.StringIO()
    p = Progress("run", 4, "step", stream=out, tty=True, period=3600)
    p.update(2)
    p.say("phase line")
    p.close()
    text = out.getvalue()
    assert "\r\x1b[K[##########..........] run: step 2/4" in text
    assert "\r\x1b[Kphase line\n" in text and text.endswith("\n")
    assert text.count("\n") == 2  # the phase line and the bar left on its line at the end


def test_quiet_silences_a_run_and_json_keeps_one_object_on_stdout(monkeypatch):
    monkeypatch.setenv("ISOCOMPUTE_PROGRESS_EVERY", "0.01")
    loud = CliRunner().invoke(main, ["run", "--budget", "2^21", "--json"])  # ~1 s: many heartbeats
    assert loud.exit_code == 0 and loud.stdout.count("\n") == 1 and loud.stdout.startswith("{")
    lines = [s for s in loud.stderr.splitlines() if not s.startswith("compiling simulator kernels")]
    assert lines and all(s.startswith("sim tabular/easy n=8: step ") for s in lines), loud.stderr
    quiet = CliRunner().invoke(main, ["run", "--budget", "2^16", "--quiet"])
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_a_tiny_lm_run_of_30_s_without_a_terminal_says_where_it_is_every_15_s():
    """The acceptance case: a line at least every 15 s on stderr (from the start to the end), each with
    step, rollouts and their rate, and the last evaluation; at most one every ~10 s; none on stdout. The run
    is long on any CPU (2^20 rollouts) and is stopped by Ctrl-C after 32 s, so the test lasts the same on a
    fast machine and a slow one."""
    import signal

    pytest.importorskip("torch")
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "isocompute", "run", "--backend", "llm", "--lm", "tiny",
                             "--budget", "2^20"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    stop = threading.Timer(32.0, proc.send_signal, [signal.SIGINT])
    stop.start()
    stamps = []
    try:
        for line in proc.stderr:
            stamps.append((time.monotonic() - t0, line.rstrip("\n")))
        out = proc.stdout.read()
        proc.wait()
    finally:
        stop.cancel()
    assert proc.returncode == 130, "\n".join(s for _, s in stamps)
    took = 32.0
    stamps = [(t, s) for t, s in stamps if t < took]  # the interrupt's own line comes after
    lines = [s for _, s in stamps]
    assert lines and all(LINE.match(s) for s in lines), lines
    times = [0.0] + [t for t, _ in stamps] + [took]
    gaps = [b - a for a, b in zip(times[:-1], times[1:], strict=True)]
    assert max(gaps) <= 15, (gaps, lines)
    assert min(gaps[1:-1], default=EVERY) >= EVERY - 1.5, gaps  # never more than one every ~10 s
    steps = int(LINE.match(lines[-1]).group(2))
    assert len(lines) <= took / (EVERY - 1.5) + 1 < steps / 10
    full = [s for s in lines if "rollouts/s" in s and re.search(r"val_mean [\d.]+ at step \d+", s)]
    assert full and "ETA" in full[-1], lines
    assert out == ""  # stdout holds only a finished run's result
