"""LLMResult.save writes each file through a temporary name (a crash leaves the old file or the new one)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from llm_backend.config import LLMConfig
from llm_backend.results import LLMResult


def test_save_writes_whole_files_and_no_temporaries(tmp_path):
    table = {"compute": np.array([0, 8]), "val_mean": np.array([0.1, 0.2])}
    pass1 = {"compute": np.array([0, 8]), "val": np.array([[0.5, 0.25], [0.75, 1.0]])}
    res = LLMResult(LLMConfig(), table, pass1, [{"step": 1, "loss": 0.5}])
    (tmp_path / "table.csv").write_text("stale\n")
    res.save(tmp_path)
    res.save(tmp_path)  # again over its own output
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["config.json", "pass1.csv", "steps.csv", "table.csv"]
    assert pd.read_csv(tmp_path / "table.csv")["val_mean"].tolist() == [0.1, 0.2]
    p1 = pd.read_csv(tmp_path / "pass1.csv")
    assert len(p1) == 4 and p1["pass1"].tolist() == [0.5, 0.25, 0.75, 1.0]
    assert json.loads((tmp_path / "config.json").read_text())["status"] == "done"
