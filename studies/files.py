"""File utilities every command's writes use: atomic writes (bytes, text, JSON, Parquet, tables, figures),
the one conversion to JSON values, marked blocks of generated Markdown, and the checks that an output file or
directory can be written before any work starts.

Atomic: a file is written to a temporary name beside it (`.<name>.<pid>.tmp`), fsync'ed and renamed with
os.replace, so a reader (or a crash) sees the old file or the whole new one, never half of it; a killed
writer leaves only a temporary, which the result store removes when it next opens (studies.store)."""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from studies.config import StudiesError

TMP_SUFFIX = ".tmp"
"""Suffix of the temporary name of an atomic write (`.<name>.<pid>.tmp`)."""
TABLE_SUFFIXES = (".csv", ".parquet", ".pq", ".jsonl", ".json")
"""The file formats of a learning-curve table that `atomic_write_table` writes (by suffix)."""
FIGURE_SUFFIXES = (".png", ".pdf", ".svg")
"""The file formats of a figure that `atomic_save_figure` writes (by suffix)."""


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers (and a crash) see either the old file or the whole new one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}{TMP_SUFFIX}")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(d: Path) -> None:
    """Make a rename or an unlink in directory `d` durable."""
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def jsonable(obj: Any, strict: bool = True, digits: int | None = None) -> Any:
    """`obj` as plain JSON values: the one conversion every JSON writer and `--json` command uses. Mappings
    (keys as str), lists and tuples (as lists), numpy scalars and arrays (as Python numbers and lists);
    None, str, int and bool as they are; anything else (a Path) as its str. `digits`: finite floats rounded to
    that many significant digits, so text built from them is the same on every rebuild.

    Non-finite floats (NaN, +-inf): `strict` (the default) makes them None, because strict JSON has no NaN and
    `--json` output must parse in any language; strict=False keeps them, for what only Python reads back
    (json writes NaN / Infinity and reads the same floats): the store's records and extras (a gradient noise
    scale of inf round-trips) and the figures' summaries (whose gallery text formats NaN as "nan")."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v, strict, digits) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v, strict, digits) for v in obj]
    if hasattr(obj, "tolist"):  # numpy scalars and arrays
        return jsonable(obj.tolist(), strict, digits)
    if isinstance(obj, float):
        if not math.isfinite(obj):
            return None if strict else obj
        return float(f"{obj:.{digits}g}") if digits else obj
    if obj is None or isinstance(obj, str | int):
        return obj
    return str(obj)


def atomic_write_json(path: Path, obj: Any) -> None:
    """`obj` as indented JSON with sorted keys (jsonable, non-strict: a stored NaN reads back as NaN)."""
    text = json.dumps(jsonable(obj, strict=False), indent=1, sort_keys=True)
    atomic_write_bytes(path, (text + "\n").encode())


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def write_marked_block(path: Path, begin: str, end: str, text: str) -> None:
    """Replace what lies between the first `begin` and the next `end` marker of the file with `text` (the
    markers appended at the end if absent), atomically: generated paragraphs of README.md and docs."""
    s = path.read_text()
    if begin in s and end in s.split(begin, 1)[1]:
        head, rest = s.split(begin, 1)
        tail = rest.split(end, 1)[1]
        atomic_write_text(path, f"{head}{begin}\n{text}\n{end}{tail}")
    else:
        atomic_write_text(path, s.rstrip("\n") + f"\n\n{begin}\n{text}\n{end}\n")


def atomic_write_parquet(path: Path, df: pd.DataFrame) -> dict[str, Any]:
    """Write `df` atomically; returns the file's digest ({"bytes", "sha256"}) for the run's record."""
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    data = buf.getvalue()
    atomic_write_bytes(path, data)
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def atomic_write_table(path: Path, df: pd.DataFrame) -> None:
    """Write a learning-curve table by extension (.csv, .parquet / .pq, .jsonl / .json), atomically."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        atomic_write_parquet(path, df)
    elif suffix == ".csv":
        atomic_write_text(path, df.to_csv(index=False))
    elif suffix in (".jsonl", ".json"):
        atomic_write_text(path, df.to_json(orient="records", lines=True))
    else:
        raise StudiesError(f"unknown table format {suffix or '(none)'} of {path}; use .csv, .parquet or "
                           ".jsonl")


def atomic_save_figure(fig: Any, path: Path, **savefig_kw: Any) -> None:
    """fig.savefig into memory (format from the suffix), then one atomic write: a killed plot leaves no
    truncated image behind."""
    path = Path(path)
    buf = io.BytesIO()
    fig.savefig(buf, format=path.suffix.lstrip(".").lower() or "png", **savefig_kw)
    atomic_write_bytes(path, buf.getvalue())


def file_digest(path: Path) -> dict[str, Any]:
    """{"bytes", "sha256"} of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return {"bytes": path.stat().st_size, "sha256": h.hexdigest()}


# ------------------------------------------------------------------------------------------- output checks
def os_reason(e: OSError) -> str:
    """An OSError's reason in a few words (its strerror), for one-line messages."""
    return e.strerror or type(e).__name__


def check_output_dir(path: str | os.PathLike | None, what: str = "--out") -> Path:
    """Create the output directory `path` (and its parents) and prove it writable with a probe file, before
    any work, so an unwritable destination fails in a second instead of after the runs."""
    if path is None or str(path).strip() == "":
        raise StudiesError(f"{what} needs a directory name, got an empty path")
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise StudiesError(f"{what} {p} exists and is not a directory")
    try:
        p.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=p):
            pass
    except OSError as e:
        raise StudiesError(f"cannot write into {what} {p}: {os_reason(e)}") from None
    return p


def check_output_file(path: str | os.PathLike | None, what: str = "--out",
                      suffixes: tuple[str, ...] | None = None, kind: str = "file",
                      create: bool = True) -> Path:
    """Check that the file `path` can be written (an existing file must be a writable regular file) and,
    with `suffixes`, that its format is known. `create`: its directory is created and probed; otherwise the
    nearest existing ancestor is probed and nothing is created (a command that may still fail on its input
    leaves nothing behind; the writer creates the directory)."""
    if path is None or str(path).strip() == "":
        raise StudiesError(f"{what} needs a file name, got an empty path")
    p = Path(path)
    if suffixes is not None and p.suffix.lower() not in suffixes:
        raise StudiesError(f"unknown {kind} format {p.suffix or '(none)'} of {what} {p}; use "
                           f"{', '.join(suffixes)}")
    if p.is_dir() or str(path).endswith(os.sep):
        raise StudiesError(f"{what} {p} is a directory; give a file name")
    if p.exists() and not p.is_file():
        raise StudiesError(f"{what} {p} exists and is not a regular file")
    parent = p.parent
    probe = parent
    while not create and not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise StudiesError(f"cannot write {what} {p}: {probe} is not a directory")
    try:
        if create:
            parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as e:
        raise StudiesError(f"cannot write {what} {p}: no file can be created in {probe} "
                           f"({os_reason(e)})") from None
    if p.exists() and not os.access(p, os.W_OK):
        raise StudiesError(f"cannot write {what} {p}: permission denied")
    return p
