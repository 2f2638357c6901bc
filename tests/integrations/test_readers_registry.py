"""The log readers are reachable from `studies.io` alone: a fresh interpreter that imports nothing but
studies.io reads a TRL trainer_state.json, whatever else was (not) imported before."""

import json
import subprocess
import sys
from pathlib import Path

from studies.io import formats
from studies.readers import READERS

ROOT = Path(__file__).resolve().parents[2]


def test_every_reader_is_registered_without_importing_the_integrations():
    assert list(READERS) == ["trl", "verl", "wandb", "tensorboard"]
    assert {"trl", "verl", "wandb", "tensorboard", "csv"} <= set(formats())


def test_a_fresh_interpreter_importing_only_studies_io_reads_a_trl_state(tmp_path):
    state = {"global_step": 2, "log_history": [
        {"step": 1, "reward": 0.25, "learning_rate": 1e-6, "epoch": 0.5},
        {"step": 2, "reward": 0.5, "learning_rate": 1e-6, "epoch": 1.0}]}
    path = tmp_path / "run1" / "trainer_state.json"
    path.parent.mkdir()
    path.write_text(json.dumps(state))
    code = ("import json, sys\n"
            "from studies.io import load_table\n"
            f"t = load_table({str(path)!r}, n=4, bp=2)\n"
            "ours = any(m.startswith('isocompute.integrations') for m in sys.modules)\n"
            "print(json.dumps({'backend': sorted(set(t['backend'])), 'compute': t['compute'].tolist(),\n"
            "                  'integrations': ours}))\n")
    env = {"PYTHONPATH": str(ROOT), "PATH": ""}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got == {"backend": ["trl"], "compute": [8, 16], "integrations": False}
