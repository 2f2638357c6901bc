"""load_table on results directories and on users' own CSV / Parquet / JSONL logs."""

import pandas as pd
import pytest

from studies.config import StudiesError
from studies.io import load_table, require_columns, save_table

TABLE = pd.DataFrame({"run_id": ["a", "a", "b"], "compute": [0, 100, 100], "n": [2, 2, 4], "bp": [8, 8, 8],
                      "val_mean": [0.1, 0.25, 0.3]})


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".jsonl"])
def test_table_files_round_trip(tmp_path, suffix):
    path = tmp_path / f"t{suffix}"
    save_table(TABLE, path)
    pd.testing.assert_frame_equal(load_table(path), TABLE, check_dtype=False)


def test_errors_are_one_line(tmp_path):
    with pytest.raises(StudiesError, match="no such file or directory"):
        load_table(tmp_path / "missing.csv")
    (tmp_path / "t.txt").write_text("x")
    with pytest.raises(StudiesError, match="t.txt: not a table .* verl console log"):
        load_table(tmp_path / "t.txt")
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(StudiesError, match="cannot read"):
        load_table(tmp_path / "bad.parquet")
    with pytest.raises(StudiesError, match="not a results directory"):
        load_table(tmp_path)
    (tmp_path / "empty" / "runs").mkdir(parents=True)
    with pytest.raises(StudiesError, match="no finished runs"):
        load_table(tmp_path / "empty")
    with pytest.raises(StudiesError, match="lacks column\\(s\\) val_best_k, tokens"):
        require_columns(TABLE, ["run_id", "val_best_k", "tokens"])
