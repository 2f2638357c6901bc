"""Resumable results directory (layout in docs/CONTRACTS.md): manifest, one Parquet per run, status records.

Crash safety: every file is written to a temporary name, fsync'ed and renamed with os.replace, and a run's
JSON status record is written last, so its presence means the run's tables are complete. The manifest is a
summary rebuilt from the status records on every open, so a sweep killed with SIGKILL at any moment resumes
by skipping finished runs and loses nothing but the runs in flight. Only the parent process writes here.

Integrity: a run's record carries the row counts and the size and SHA-256 of its two Parquet files;
a run whose files do not match (truncated, emptied, deleted, swapped, garbage) is not finished: resume reruns
it and readers leave it out, both saying which and why. A damaged manifest is rebuilt from the records.
Because the records are the truth, a finished run rewrites the manifest at most every MANIFEST_EVERY_S
seconds (and always on close): one rewrite of a 5,000-run manifest costs ~0.36 s, which made the parent the
bottleneck of a sweep of many short runs (`isocompute report claims` from scratch).
The file utilities it writes with (atomic writes, output checks) are studies.files; the directory's layout
and the readers that verify it without opening a store are studies.results_dir; the versions and git revision
it records are studies.provenance.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from isocompute.contract.status import DIVERGED, DONE, FAILED, FINISHED, PENDING
from studies.config import RunConfig, StudiesError
from studies.files import TMP_SUFFIX, atomic_write_bytes, atomic_write_json, atomic_write_parquet, fsync_dir
from studies.provenance import git_revision, versions
from studies.results_dir import (
    DAMAGED,
    MANIFEST,
    RUN_FILES,
    RUNS,
    DamagedRunWarning,
    load_record,
    names_text,
    read_manifest,
    run_damage,
    run_file,
)

if TYPE_CHECKING:
    from studies.backends import RunOutput

MANIFEST_EVERY_S = 2.0
"""Least seconds between two manifest rewrites after finished runs (failures and registration: at once)."""


LOCK = ".lock"
"""The lock file a ResultStore holds (flock) while it is open; removed when it closes."""


class ResultStore:
    """A results directory. `open()` takes an exclusive lock so two sweeps never write the same directory;
    closing removes the lock file, and closing after an interrupt (Ctrl-C, SIGTERM) before any run finished
    removes the empty store it made, so an interrupted command leaves nothing behind."""

    def __init__(self, root: str | os.PathLike, study: str | None = None):
        self.root = Path(root)
        self.runs_dir = self.root / RUNS
        self.manifest_path = self.root / MANIFEST
        self.study = study
        self._lock_fh = None
        self.manifest: dict[str, Any] = {}
        self.damaged: dict[str, str] = {}
        """{run_id: reason} of the finished runs whose files failed verification when the store opened."""
        self._checked: dict[str, str | None] = {}
        self._manifest_dirty = False
        self._manifest_at = -float("inf")

    # -- lifecycle ------------------------------------------------------------------------------------------
    def open(self) -> ResultStore:
        if self.root.exists() and not self.root.is_dir():
            raise StudiesError(f"{self.root} exists and is not a directory")
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        lock = self.root / LOCK
        self._lock_fh = open(lock, "w")  # noqa: SIM115 - held until close()
        try:
            fcntl.flock(self._lock_fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # the holder before us removes the file as it closes: a lock on that removed file locks nothing
            if not lock.exists() or os.stat(lock).st_ino != os.fstat(self._lock_fh.fileno()).st_ino:
                raise BlockingIOError
        except BlockingIOError:
            self._lock_fh.close()
            self._lock_fh = None
            raise StudiesError(f"another sweep is writing {self.root}; wait or use another --out") from None
        self._remove_temporaries()
        self.manifest = self._read_manifest()
        self._reconcile()
        self.write_manifest()
        return self

    def close(self, interrupted: bool = False) -> None:
        """Write the manifest if it changed and release the lock (its file removed). `interrupted`: the
        command was stopped; a store that holds no run yet is removed instead (see `_remove_if_empty`)."""
        if self._lock_fh is None:
            return
        if interrupted:
            self._remove_if_empty()
        elif self._manifest_dirty:
            self.write_manifest()
        (self.root / LOCK).unlink(missing_ok=True)
        self._lock_fh.close()
        self._lock_fh = None

    def __enter__(self) -> ResultStore:
        try:
            return self.open()
        except BaseException as e:  # an interrupt while opening cleans up as one inside the block does
            self.close(interrupted=not isinstance(e, Exception))
            raise

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        # KeyboardInterrupt, SIGTERM (isocompute.cli.Terminated) and exits are BaseExceptions, not Exceptions
        self.close(interrupted=exc_type is not None and not issubclass(exc_type, Exception))

    def _remove_if_empty(self) -> None:
        """Remove what the store wrote (manifest, runs/, extra/, and the directory itself when nothing else is
        in it) if no run has any file yet; a store with runs is kept whole for the next sweep to resume."""
        self._remove_temporaries()
        extra = self.root / "extra"
        if any(self.runs_dir.iterdir()) or (extra.is_dir() and any(extra.iterdir())):
            if self._manifest_dirty:
                self.write_manifest()
            return
        self.manifest_path.unlink(missing_ok=True)
        for d in (self.runs_dir, extra):
            with contextlib.suppress(OSError):
                d.rmdir()
        (self.root / LOCK).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.root.rmdir()  # only when empty: a folder the user keeps other files in stays

    def _remove_temporaries(self) -> None:
        # Left by a killed writer (we hold the lock, so no live writer owns them).
        for d in (self.root, self.runs_dir):
            for p in d.glob(f".*{TMP_SUFFIX}"):
                p.unlink(missing_ok=True)

    def _read_manifest(self) -> dict[str, Any]:
        m = read_manifest(self.root)
        if m is None:  # impossible with atomic writes, but the status records rebuild it
            warnings.warn(f"{self.manifest_path} was damaged; rebuilt from the run records",
                          DamagedRunWarning, stacklevel=3)
            m = {}
        m.setdefault("study", self.study)
        m.setdefault("created", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        m.setdefault("runs", {})
        m["git"] = git_revision()
        m["versions"] = versions()
        return m

    def _reconcile(self) -> None:
        """Make the manifest agree with the status records (the source of truth for finished runs)."""
        runs = self.manifest["runs"]
        self.damaged = {}
        for rec_path in sorted(self.runs_dir.glob("*" + RUN_FILES["record"])):
            rec = self._load_record(rec_path)
            if rec is None:
                continue
            entry = runs.setdefault(rec["run_id"], {"config": rec.get("config")})
            if not isinstance(entry, dict):
                entry = runs[rec["run_id"]] = {"config": rec.get("config")}
            entry.update({k: rec.get(k) for k in ("status", "diverged_step", "reason", "rows")})
            why = self.damage(rec["run_id"], rec)
            if why is not None:
                self.damaged[rec["run_id"]] = why
                entry.update(status=DAMAGED, damage=why)
            else:
                entry.pop("damage", None)
        for run_id, entry in runs.items():
            if entry.get("status") in FINISHED and not self.record_path(run_id).exists():
                entry["status"] = PENDING  # its record vanished (deleted by hand or --force interrupted)
        if self.damaged:
            shown = [f"{r} ({why})" for r, why in self.damaged.items()]
            warnings.warn(f"{len(self.damaged)} damaged run(s) in {self.root} are treated as unfinished "
                          f"(rerun by a sweep that includes them): {names_text(shown)}", DamagedRunWarning,
                          stacklevel=3)

    # -- paths and queries ----------------------------------------------------------------------------------
    def table_path(self, run_id: str) -> Path:
        return run_file(self.runs_dir, run_id, "table")

    def pass1_path(self, run_id: str) -> Path:
        return run_file(self.runs_dir, run_id, "pass1")

    def record_path(self, run_id: str) -> Path:
        return run_file(self.runs_dir, run_id, "record")

    @staticmethod
    def _load_record(path: Path) -> dict[str, Any] | None:
        return load_record(path)

    def record(self, run_id: str) -> dict[str, Any] | None:
        """The status record of a finished run whose files match it, else None (see `damage`)."""
        p = self.record_path(run_id)
        rec = self._load_record(p) if p.exists() else None
        if rec is None or self.damage(run_id, rec) is not None:
            return None
        return rec

    def damage(self, run_id: str, rec: dict[str, Any] | None = None) -> str | None:
        """Why the finished run `run_id` cannot be used (missing, truncated or foreign files), or None.
        Checked once per store object (the lock keeps writers out while it is open)."""
        if run_id not in self._checked:
            if rec is None:
                p = self.record_path(run_id)
                rec = self._load_record(p) if p.exists() else None
            self._checked[run_id] = None if rec is None else run_damage(self.runs_dir, rec)
        return self._checked[run_id]

    def is_finished(self, run_id: str) -> bool:
        return self.record(run_id) is not None

    def finished_runs(self) -> dict[str, str]:
        """{run_id: status} of every run with a status record ("done" or "diverged") that its files match,
        in run_id order."""
        recs = (self._load_record(p) for p in sorted(self.runs_dir.glob("*" + RUN_FILES["record"])))
        return {r["run_id"]: r["status"] for r in recs
                if r is not None and self.damage(r["run_id"], r) is None}

    def read_run(self, run_id: str, kind: str = "table") -> pd.DataFrame:
        """The learning-curve table (kind "table") or pass@1 snapshots (kind "pass1") of a finished run."""
        if kind not in ("table", "pass1"):
            raise ValueError(f"kind must be table or pass1, got {kind!r}")
        if not self.is_finished(run_id):
            raise StudiesError(f"run {run_id} is not finished in {self.root}")
        return pd.read_parquet(self.table_path(run_id) if kind == "table" else self.pass1_path(run_id))

    def final_dir(self, run_id: str) -> Path:
        """Where a run's kept final state lives (RunOutput.final): DIR/final/RUN_ID/, one file per name, with
        sizes and sha256 digests in the run's record under "final"."""
        return self.root / "final" / run_id

    def extra_path(self, run_id: str, name: str) -> Path:
        """A measurement recorded beside a run's table (e.g. name "gns": gradient noise scale), in DIR/extra/
        so that the status-record glob of runs/ never sees it."""
        return self.root / "extra" / f"{run_id}.{name}.json"

    def write_extra(self, run_id: str, name: str, obj: Any) -> None:
        """Record a JSON-able measurement of a finished run beside its table (atomic)."""
        path = self.extra_path(run_id, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, obj)

    def read_extra(self, run_id: str, name: str) -> Any | None:
        """A measurement written by `write_extra`, or None if there is none."""
        p = self.extra_path(run_id, name)
        try:
            return json.loads(p.read_text()) if p.exists() else None
        except json.JSONDecodeError:
            return None

    # -- writes ---------------------------------------------------------------------------------------------
    def write_manifest(self) -> None:
        atomic_write_json(self.manifest_path, self.manifest)
        self._manifest_dirty = False
        self._manifest_at = time.monotonic()

    def register(self, configs: list[RunConfig]) -> None:
        """Add the sweep's runs to the manifest (status pending unless already finished)."""
        runs = self.manifest["runs"]
        for cfg in configs:
            entry = runs.setdefault(cfg.run_id, {})
            entry["config"] = cfg.to_dict()
            if entry.get("status") not in FINISHED:
                entry["status"] = PENDING
        self.write_manifest()

    def invalidate(self, run_id: str) -> None:
        """Forget a finished run before rerunning it (--force): the record goes first, so a crash never
        leaves old tables marked as new."""
        self.record_path(run_id).unlink(missing_ok=True)
        fsync_dir(self.runs_dir)
        self._checked.pop(run_id, None)
        if run_id in self.manifest["runs"]:
            self.manifest["runs"][run_id]["status"] = PENDING

    def write_run(self, cfg: RunConfig, out: RunOutput, wall_s: float | None = None) -> dict[str, Any]:
        """Store one finished run: tables first, the status record last; then update the manifest."""
        run_id = cfg.run_id
        status = DIVERGED if out.status == DIVERGED else DONE
        if "run_id" not in out.table.columns or (out.table["run_id"] != run_id).any():
            raise RuntimeError(f"adapter returned a table whose run_id is not {run_id}")
        # A rerun of a damaged run: its old record goes first, so a crash never pairs it with new tables.
        self.record_path(run_id).unlink(missing_ok=True)
        files = {
            "table": atomic_write_parquet(self.table_path(run_id), out.table),
            "pass1": atomic_write_parquet(self.pass1_path(run_id), out.pass1),
        }
        final = {}
        for name, data in (out.final or {}).items():
            self.final_dir(run_id).mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(self.final_dir(run_id) / name, data)
            final[name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        rec = {
            "run_id": run_id,
            "status": status,
            "diverged_step": out.info.get("diverged_step"),
            "reason": out.info.get("reason"),
            "rows": len(out.table),
            "pass1_rows": len(out.pass1),
            "files": files,
            "wall_s": wall_s,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "config": cfg.to_dict(),
            "info": {k: v for k, v in out.info.items() if k not in ("diverged_step", "reason")},
            **({"final": final} if final else {}),
            "git": self.manifest.get("git"),
            "versions": self.manifest.get("versions"),
        }
        atomic_write_json(self.record_path(run_id), rec)
        self._checked[run_id] = None
        self.damaged.pop(run_id, None)
        entry = self.manifest["runs"].setdefault(run_id, {"config": cfg.to_dict()})
        entry.update({k: rec[k] for k in ("status", "diverged_step", "reason", "rows")})
        entry.pop("error", None)
        entry.pop("damage", None)
        self._manifest_dirty = True
        if time.monotonic() - self._manifest_at >= MANIFEST_EVERY_S:
            self.write_manifest()
        return rec

    def mark_failed(self, cfg: RunConfig, error: str) -> None:
        """A run that raised: noted in the manifest (not finished, so a rerun retries it)."""
        entry = self.manifest["runs"].setdefault(cfg.run_id, {"config": cfg.to_dict()})
        entry["status"] = FAILED
        entry["error"] = error.strip().splitlines()[-1][:500] if error.strip() else "unknown error"
        self.write_manifest()
