"""isocompute.contract.cache.invalidate_stale_numba: the guard both engines' Numba caches share (sandbox and
the tiny LM's kernels) deletes a package's cached kernels when any of its sources changed, and only then."""

from __future__ import annotations

from isocompute.contract.cache import invalidate_stale_numba


def test_stale_cache_is_cleared_only_after_an_edit(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    pkg = tmp_path / "pkg"
    (pkg / "__pycache__").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    invalidate_stale_numba(pkg, "s.sha1")
    kept = pkg / "__pycache__" / "a.f-1.py312.nbi"
    kept.write_text("")
    invalidate_stale_numba(pkg, "s.sha1")
    assert kept.exists()  # nothing changed: the compiled kernels stay
    (pkg / "a.py").write_text("x = 2\n")
    invalidate_stale_numba(pkg, "s.sha1")
    assert not kept.exists()
