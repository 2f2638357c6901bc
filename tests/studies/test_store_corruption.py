"""Damaged results: truncated, emptied, deleted, swapped or garbage files are never used; resume
reruns exactly the damaged runs and gives back the tables of an undamaged sweep; readers name what they leave
out; a damaged manifest is rebuilt from the run records."""

import json
import warnings

import pandas as pd
import pytest
from studies_fakes import FakeAdapter, register

from studies.config import RunConfig, StudiesError
from studies.executors import run_sweep
from studies.io import LeftOutRunsWarning, load_table
from studies.results_dir import DamagedRunWarning, run_damage
from studies.store import ResultStore
from studies.sweeps import n_vs_m

register()
BASE = RunConfig(backend="fake", bp=4, budget=2**10, n_evals=8)
CONFIGS = n_vs_m(BASE, [2, 4, 8], seeds=1)
IDS = sorted(c.run_id for c in CONFIGS)


def _sweep(root):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ResultStore(root, study="n-vs-m") as store:
            summary = run_sweep(CONFIGS, store, jobs=1, progress=False)
    return summary, [str(w.message) for w in caught if issubclass(w.category, DamagedRunWarning)]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    root = tmp_path_factory.mktemp("ref")
    _sweep(root)
    return load_table(root), load_table(root, kind="pass1")


def _truncate(p):
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _empty(p):
    p.write_bytes(b"")


def _garbage(p):
    p.write_bytes(b"\x00\xffnot parquet at all" * 10)


def _delete(p):
    p.unlink()


def _short(p):  # a valid Parquet file with 3 of the run's rows
    pd.read_parquet(p).head(3).to_parquet(p, index=False)


DAMAGE = {"truncate": _truncate, "empty": _empty, "garbage": _garbage, "delete": _delete, "short": _short}


@pytest.mark.parametrize("kind", ["table", "pass1"])
@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_damaged_file_is_left_out_named_then_repaired_by_resume(tmp_path, reference, kind, how):
    _sweep(tmp_path)
    victim = IDS[1]
    suffix = ".parquet" if kind == "table" else ".pass1.parquet"
    DAMAGE[how](tmp_path / "runs" / f"{victim}{suffix}")

    with pytest.warns(LeftOutRunsWarning, match=victim):
        table = load_table(tmp_path)
    assert set(table["run_id"]) == set(IDS) - {victim}

    before = FakeAdapter.calls
    summary, damaged = _sweep(tmp_path)
    assert FakeAdapter.calls - before == 1 and summary.done == 1 and summary.skipped == 2
    assert len(damaged) == 1 and victim in damaged[0] and kind in damaged[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing left out any more
        pd.testing.assert_frame_equal(load_table(tmp_path), reference[0])
        pd.testing.assert_frame_equal(load_table(tmp_path, kind="pass1"), reference[1])


def test_a_table_swapped_in_from_another_run_is_caught(tmp_path, reference):
    _sweep(tmp_path)
    a, b = (tmp_path / "runs" / f"{r}.parquet" for r in IDS[:2])
    a.write_bytes(b.read_bytes())
    rec = json.loads((tmp_path / "runs" / f"{IDS[0]}.json").read_text())
    assert run_damage(tmp_path / "runs", rec) is not None  # size or checksum differs from its record
    with pytest.warns(LeftOutRunsWarning, match=IDS[0]):
        assert IDS[0] not in set(load_table(tmp_path)["run_id"])
    _sweep(tmp_path)
    pd.testing.assert_frame_equal(load_table(tmp_path), reference[0])


def test_a_record_copied_over_from_another_run_is_not_a_finished_run(tmp_path, reference):
    _sweep(tmp_path)
    runs = tmp_path / "runs"
    (runs / f"{IDS[0]}.json").write_text((runs / f"{IDS[1]}.json").read_text())
    with pytest.warns(LeftOutRunsWarning, match="unfinished"):
        assert IDS[0] not in set(load_table(tmp_path)["run_id"])
    before = FakeAdapter.calls
    _sweep(tmp_path)
    assert FakeAdapter.calls - before == 1
    pd.testing.assert_frame_equal(load_table(tmp_path), reference[0])


@pytest.mark.parametrize("garbage", [b"", b"\x89PNG\x00\xff\xfe", b"[1, 2, 3]", b'{"runs": [1]}',
                                     b'{"runs": {"x": 5}}', b"{not json"])
def test_damaged_manifest_is_rebuilt_from_the_records(tmp_path, reference, garbage):
    _sweep(tmp_path)
    (tmp_path / "manifest.json").write_bytes(garbage)
    with pytest.warns(LeftOutRunsWarning, match="manifest.json is damaged"):
        pd.testing.assert_frame_equal(load_table(tmp_path), reference[0])
    before = FakeAdapter.calls
    with pytest.warns(DamagedRunWarning, match="rebuilt from the run records"):
        with ResultStore(tmp_path) as store:
            assert all(store.is_finished(r) for r in IDS)
    assert FakeAdapter.calls == before
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert {r: manifest["runs"][r]["status"] for r in IDS} == dict.fromkeys(IDS, "done")


def test_garbage_record_is_an_unfinished_run_and_is_rerun(tmp_path, reference):
    _sweep(tmp_path)
    (tmp_path / "runs" / f"{IDS[2]}.json").write_bytes(b"\x00\x01garbage")
    before = FakeAdapter.calls
    _sweep(tmp_path)
    assert FakeAdapter.calls - before == 1
    pd.testing.assert_frame_equal(load_table(tmp_path), reference[0])


def test_records_carry_row_counts_and_checksums(tmp_path):
    _sweep(tmp_path)
    rec = json.loads((tmp_path / "runs" / f"{IDS[0]}.json").read_text())
    table = pd.read_parquet(tmp_path / "runs" / f"{IDS[0]}.parquet")
    assert rec["rows"] == len(table) and rec["pass1_rows"] > 0
    assert set(rec["files"]) == {"table", "pass1"}
    assert all(len(f["sha256"]) == 64 and f["bytes"] > 0 for f in rec["files"].values())
    assert run_damage(tmp_path / "runs", rec) is None


def test_legacy_record_without_checksums_is_checked_by_row_count(tmp_path, reference):
    _sweep(tmp_path)
    p = tmp_path / "runs" / f"{IDS[0]}.json"
    rec = json.loads(p.read_text())
    rec.pop("files")
    p.write_text(json.dumps(rec))
    assert run_damage(tmp_path / "runs", rec) is None
    _short(tmp_path / "runs" / f"{IDS[0]}.parquet")
    assert "rows" in run_damage(tmp_path / "runs", rec)


def test_every_run_damaged_is_one_line_error(tmp_path):
    _sweep(tmp_path)
    for r in IDS:
        _empty(tmp_path / "runs" / f"{r}.parquet")
    with pytest.warns(LeftOutRunsWarning), pytest.raises(StudiesError, match="no finished runs"):
        load_table(tmp_path)


def test_cli_fit_and_plot_name_the_damaged_run(tmp_path):
    from click.testing import CliRunner

    from isocompute.cli import main

    _sweep(tmp_path)
    _truncate(tmp_path / "runs" / f"{IDS[0]}.parquet")
    for args in (["fit", str(tmp_path)], ["plot", str(tmp_path), "--out", str(tmp_path / "f.png")]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 0, res.output
        assert f"damaged run(s) (rerun the sweep to repair them): {IDS[0]}" in res.stderr
        assert "Traceback" not in res.output


def test_cli_resume_names_the_damaged_run_it_reruns(tmp_path):
    from click.testing import CliRunner

    from isocompute.cli import main

    args = ["sweep", "n-vs-m", "--backend", "fake", "--out", str(tmp_path), "--n", "2,4,8", "--bp", "4",
            "--budget", "2^10", "--n-evals", "8", "--jobs", "1", "--no-progress"]
    assert CliRunner().invoke(main, args).exit_code == 0
    _garbage(tmp_path / "runs" / f"{IDS[0]}.pass1.parquet")
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "(1 run now, 2 already finished" in res.stdout
    warning = [ln for ln in res.stderr.splitlines() if "damaged" in ln]
    assert len(warning) == 1 and warning[0].startswith("warning: 1 damaged run(s)") and IDS[0] in warning[0]
