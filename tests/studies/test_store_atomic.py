"""Result store: atomic writes, status record last, manifest rebuilt from records, lock, diverged runs."""

import json
import os
import warnings

import pandas as pd
import pytest
from studies_fakes import FakeAdapter, register

from studies.config import RunConfig, StudiesError
from studies.executors import run_sweep
from studies.files import atomic_write_bytes
from studies.io import LeftOutRunsWarning, load_table
from studies.store import ResultStore
from studies.sweeps import n_vs_m

register()
BASE = RunConfig(backend="fake", bp=4, budget=2**10, n_evals=8)


def _files(root):
    return sorted(p.name for p in (root / "runs").iterdir())


def test_atomic_write_leaves_the_old_file_when_the_rename_never_happens(tmp_path, monkeypatch):
    target = tmp_path / "x.json"
    atomic_write_bytes(target, b"old")

    def crash(*a, **k):
        raise OSError("simulated crash before rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        atomic_write_bytes(target, b"new")
    assert target.read_bytes() == b"old"
    monkeypatch.undo()
    leftovers = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(leftovers) == 1  # the killed writer's temporary: removed by the next store.open()
    (tmp_path / "runs").mkdir()
    os.replace(leftovers[0], tmp_path / "runs" / leftovers[0].name)
    with ResultStore(tmp_path):
        pass
    assert not [p for p in (tmp_path / "runs").iterdir() if p.name.endswith(".tmp")]


def test_record_is_written_last_so_a_crash_mid_run_means_not_finished(tmp_path, monkeypatch):
    cfg = BASE.replace(n=2)
    out = FakeAdapter().run(cfg)
    import studies.store as store_mod

    real = store_mod.atomic_write_parquet
    calls = []

    def flaky(path, df):
        calls.append(path.name)
        if path.name.endswith(".pass1.parquet"):
            raise OSError("disk full")
        real(path, df)

    monkeypatch.setattr(store_mod, "atomic_write_parquet", flaky)
    with ResultStore(tmp_path) as st, pytest.raises(OSError):
        st.write_run(cfg, out)
    assert not (tmp_path / "runs" / f"{cfg.run_id}.json").exists()
    monkeypatch.undo()
    with ResultStore(tmp_path) as st:
        assert not st.is_finished(cfg.run_id)
        st.write_run(cfg, out)
        assert st.is_finished(cfg.run_id)
    assert _files(tmp_path) == sorted(f"{cfg.run_id}{s}" for s in (".json", ".parquet", ".pass1.parquet"))


def test_manifest_records_versions_git_and_status_and_is_rebuilt_from_records(tmp_path):
    cfgs = n_vs_m(BASE, [2, 4], seeds=2)
    with ResultStore(tmp_path, study="n-vs-m") as st:
        s = run_sweep(cfgs, st, jobs=1, progress=False)
    assert (s.total, s.done, s.skipped) == (4, 4, 0)
    m = json.loads((tmp_path / "manifest.json").read_text())
    assert m["study"] == "n-vs-m" and "numpy" in m["versions"] and "python" in m["versions"]
    assert "git" in m
    assert {r: e["status"] for r, e in m["runs"].items()} == {c.run_id: "done" for c in cfgs}
    assert RunConfig.from_dict(m["runs"][cfgs[0].run_id]["config"]) == cfgs[0]
    (tmp_path / "manifest.json").unlink()  # lost (e.g. killed between record and manifest): rebuilt
    with ResultStore(tmp_path) as st:
        assert {r: e["status"] for r, e in st.manifest["runs"].items()} == {c.run_id: "done" for c in cfgs}


def test_rerun_skips_finished_runs_and_force_reruns_them(tmp_path):
    cfgs = n_vs_m(BASE, [2, 4], seeds=1)
    FakeAdapter.calls = 0
    with ResultStore(tmp_path) as st:
        run_sweep(cfgs, st, jobs=1, progress=False)
    first = load_table(tmp_path)
    with ResultStore(tmp_path) as st:
        s = run_sweep(cfgs, st, jobs=1, progress=False)
    assert (s.skipped, s.done, FakeAdapter.calls) == (2, 0, 2)
    with ResultStore(tmp_path) as st:
        s = run_sweep(cfgs, st, jobs=1, progress=False, force=True)
    assert (s.skipped, s.done, FakeAdapter.calls) == (0, 2, 4)
    pd.testing.assert_frame_equal(load_table(tmp_path), first)
    assert len(_files(tmp_path)) == 6


def test_lock_keeps_a_second_writer_out(tmp_path):
    with ResultStore(tmp_path), pytest.raises(StudiesError, match="another sweep is writing"):
        ResultStore(tmp_path).open()
    with ResultStore(tmp_path):  # released on close
        pass


def test_diverged_and_failed_runs_are_data_and_left_out_with_a_warning_naming_them(tmp_path):
    ok = BASE.replace(n=2)
    div = BASE.replace(n=4, options=(("diverge_at", 20),))
    bad = BASE.replace(n=8, options=(("fail", True),))
    with ResultStore(tmp_path) as st:
        s = run_sweep([ok, div, bad], st, jobs=1, progress=False)
    assert s.diverged == [div.run_id] and list(s.failed) == [bad.run_id]
    assert "fake failure" in s.failed[bad.run_id]
    m = json.loads((tmp_path / "manifest.json").read_text())["runs"]
    assert (m[div.run_id]["status"], m[div.run_id]["diverged_step"], m[div.run_id]["reason"]) == (
        "diverged", 20, "nan in logits")
    assert m[bad.run_id]["status"] == "failed" and "fake failure" in m[bad.run_id]["error"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = load_table(tmp_path)
    msgs = [str(w.message) for w in caught if issubclass(w.category, LeftOutRunsWarning)]
    assert any(div.run_id in x and "diverged" in x and "step 20" in x for x in msgs)
    assert any(bad.run_id in x and "unfinished" in x for x in msgs)
    assert set(t.run_id) == {ok.run_id}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        both = load_table(tmp_path, include_diverged=True)
    assert set(both.run_id) == {ok.run_id, div.run_id}
    assert both[both.run_id == div.run_id].m.max() < 20
    # the failed run is retried by the next sweep; the diverged one is finished and is not
    with ResultStore(tmp_path) as st:
        s = run_sweep([ok, div, bad.replace(options=())], st, jobs=1, progress=False)
    assert (s.skipped, s.done) == (2, 1)


def test_a_table_with_the_wrong_run_id_is_a_failed_run_not_a_crash(tmp_path, monkeypatch):
    cfg = BASE.replace(n=2)
    real_run = FakeAdapter.run

    def wrong_id(self, c, progress=False):
        out = real_run(self, c, progress)
        out.table["run_id"] = "someone-else"
        return out

    monkeypatch.setattr(FakeAdapter, "run", wrong_id)
    with ResultStore(tmp_path) as st:
        s = run_sweep([cfg], st, jobs=1, progress=False)
    assert s.done == 0 and "RuntimeError" in s.failed[cfg.run_id] and "run_id" in s.failed[cfg.run_id]
    assert not (tmp_path / "runs" / f"{cfg.run_id}.json").exists()


def test_finished_runs_rewrite_the_manifest_at_most_every_few_seconds_and_always_on_close(tmp_path,
                                                                                           monkeypatch):
    """A 5,000-run manifest costs ~0.36 s to rewrite, once per finished run it starved the workers; the
    records are the truth, so write_run rewrites it at most every MANIFEST_EVERY_S (failures at once) and
    close() writes the last state."""
    import studies.store as store_mod

    cfgs = n_vs_m(BASE, [2, 4, 8, 16], seeds=3)
    writes = []
    real = store_mod.atomic_write_json
    monkeypatch.setattr(store_mod, "atomic_write_json",
                        lambda p, obj: (writes.append(p.name) if p.name == "manifest.json" else None,
                                        real(p, obj))[1])
    monkeypatch.setattr(store_mod, "MANIFEST_EVERY_S", 3600.0)
    with ResultStore(tmp_path) as st:
        run_sweep(cfgs, st, jobs=1, progress=False)
        during = writes.count("manifest.json")
    assert during <= 3  # open + register (+ the first finished run), not one per run
    assert writes.count("manifest.json") == during + 1  # close wrote the final state
    m = json.loads((tmp_path / "manifest.json").read_text())["runs"]
    assert {r: e["status"] for r, e in m.items()} == {c.run_id: "done" for c in cfgs}
    writes.clear()
    monkeypatch.setattr(store_mod, "MANIFEST_EVERY_S", 0.0)  # the old behaviour: once per run
    with ResultStore(tmp_path / "b") as st:
        run_sweep(cfgs, st, jobs=1, progress=False)
    assert writes.count("manifest.json") >= len(cfgs)
