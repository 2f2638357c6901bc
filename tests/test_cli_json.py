"""CLI contract (docs/DESIGN.md): `--json` prints exactly one JSON object on stdout on both
backends;
third-party logs (vLLM's handler writes to stdout by default) go to stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def isocompute(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "isocompute", *args], capture_output=True, text=True,
                          env=ENV, timeout=timeout)


def one_json_object(stdout: str) -> dict:
    obj = json.loads(stdout)  # fails on any extra line before or after the object
    assert isinstance(obj, dict) and stdout.strip().count("\n") == 0
    return obj


def test_sim_run_json_is_one_object():
    r = isocompute("run", "--model", "tabular", "--n", "4", "--bp", "8", "--budget", "2^10", "--d", "32",
                   "--d-val", "16", "--n-evals", "4", "--json")
    assert r.returncode == 0, r.stderr
    obj = one_json_object(r.stdout)
    assert obj["status"] == "done" and obj["steps"] == 32 and obj["config"]["d_val"] == 16


def test_a_print_to_stdout_during_a_json_command_goes_to_stderr(monkeypatch):
    from click.testing import CliRunner

    import studies.backends as backends
    from isocompute.cli import main

    real = backends.SimAdapter.run

    def noisy(self, cfg, progress=False):
        print("INFO some library chatter")
        return real(self, cfg, progress)

    monkeypatch.setattr(backends.SimAdapter, "run", noisy)
    r = CliRunner().invoke(main, ["run", "--n", "4", "--bp", "8", "--budget", "2^10", "--d", "32",
                                  "--d-val", "16", "--n-evals", "4", "--json"])
    assert r.exit_code == 0, r.output
    assert "chatter" in r.stderr and "chatter" not in r.stdout
    one_json_object(r.stdout)
