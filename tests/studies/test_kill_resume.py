"""KILL TEST: `isocompute sweep` killed with SIGKILL at several moments, then rerun,
equals an uninterrupted sweep with the same seeds: no duplicate, partial or orphaned files or processes."""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from studies_fakes import register

from isocompute.cli import main
from studies.io import load_table

register()
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# The child registers the fake backend, then runs the real console entry point.
BOOT = f"import sys; sys.path.insert(0, {str(HERE)!r}); import studies_fakes; " \
       "studies_fakes.register(slow_sim=True); from isocompute.cli import main; main()"
# 8 runs each, every run delayed by FAKE_SLEEP in the killed processes so that the kills land part-way.
# fake: a process pool (--jobs 2; workers must die with the parent); sim: the real simulator in-process
# (--jobs 1; the parent is killed while computing or writing), bit-identical to the reference.
GRIDS = {
    "fake": ["--backend", "fake", "--n", "2^1..2^4", "--bp", "4", "--budget", "2^11", "--seeds", "2",
             "--n-evals", "8", "--jobs", "2"],
    "sim": ["--backend", "sim", "--model", "interference", "--n", "2^1..2^4", "--bp", "8", "--budget", "2^12",
            "--seeds", "2", "--n-evals", "8", "--d", "64", "--d-val", "32", "--jobs", "1"],
}
RUNS = 8


def _records(out):
    return list((Path(out) / "runs").glob("*.json"))


def _processes_with(marker):
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if marker.encode() in (p / "environ").read_bytes():
                    found.append(int(p.name))
            except OSError:
                continue
    return found


def _check_consistent(out):
    """Every status record has complete, readable tables; nothing but tables, records and temporaries."""
    runs = Path(out) / "runs"
    for rec in runs.glob("*.json"):
        r = json.loads(rec.read_text())
        t = pd.read_parquet(runs / f"{r['run_id']}.parquet")
        assert len(t) == r["rows"] and (t.run_id == r["run_id"]).all()
        pd.read_parquet(runs / f"{r['run_id']}.pass1.parquet")
    for f in runs.iterdir():
        assert f.name.endswith((".json", ".parquet", ".tmp")), f.name


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and PR_SET_PDEATHSIG")
@pytest.mark.slow  # starts and kills 4 sweeps per backend
@pytest.mark.parametrize("backend", ["fake", "sim"])
def test_sigkilled_sweep_resumes_to_identical_results(tmp_path, backend):
    def _sweep_args(out):
        return ["sweep", "n-vs-m", "--out", str(out), *GRIDS[backend]]

    # Uninterrupted reference, in process.
    ref = tmp_path / "ref"
    r = CliRunner().invoke(main, [*_sweep_args(ref), "--no-progress"])
    assert r.exit_code == 0, r.output
    out = tmp_path / "killed"
    marker = f"ISOCOMPUTE_KILL_TEST={uuid.uuid4().hex}"
    env = {**os.environ, "ISOCOMPUTE_KILL_TEST": marker.split("=")[1], "FAKE_SLEEP": "0.15"}
    kills = 0
    try:
        # Kill when 1, 3 and 5 of the 8 runs are recorded: at a write, between writes, or mid-run.
        for target in (1, 3, 5):
            proc = subprocess.Popen([sys.executable, "-c", BOOT, *_sweep_args(out), "--no-progress"],
                                    cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 60
            while len(_records(out)) < target and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                kills += 1
            proc.wait(timeout=30)
            _check_consistent(out)
            # The pool workers die with their parent (PR_SET_PDEATHSIG): nothing keeps running.
            t0 = time.monotonic()
            while _processes_with(marker) and time.monotonic() - t0 < 10:
                time.sleep(0.05)
            assert _processes_with(marker) == [], "pool workers outlived the killed sweep"
    finally:
        for pid in _processes_with(marker):  # never leave our own orphans behind, even on failure
            os.kill(pid, signal.SIGKILL)
    assert kills >= 2, "the sweep finished before it could be killed; slow the fake runs down"
    done_before = len(_records(out))
    assert 0 < done_before < RUNS
    final = subprocess.run([sys.executable, "-c", BOOT, *_sweep_args(out), "--no-progress"],
                           cwd=ROOT, env={**env, "FAKE_SLEEP": "0"}, capture_output=True, text=True,
                           timeout=120)
    assert final.returncode == 0, final.stderr
    assert f"{done_before} already finished" in final.stdout
    pd.testing.assert_frame_equal(load_table(out), load_table(ref))
    pd.testing.assert_frame_equal(load_table(out, kind="pass1"), load_table(ref, kind="pass1"))
    files = sorted(f.name for f in (out / "runs").iterdir())
    ids = sorted({f.split(".")[0] for f in files})
    suffixes = (".json", ".parquet", ".pass1.parquet")
    assert len(ids) == RUNS and files == sorted(f"{i}{s}" for i in ids for s in suffixes)
    manifest = json.loads((out / "manifest.json").read_text())
    assert sorted(manifest["runs"]) == ids and {e["status"] for e in manifest["runs"].values()} == {"done"}
