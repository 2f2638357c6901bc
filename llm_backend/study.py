"""A small n-vs-m study on the real model in one process (one vLLM engine shared by all runs).

Why not one process per run: vLLM start-up and two model loads cost ~30 s per run on a loaded 2-core
CPU, a large share of a run of a few minutes. `studies` sweeps (`isocompute sweep n-vs-m --backend llm`)
do the same through the adapter; this driver is for one-machine studies like docs/llm_study/.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path


def run_id(cfg) -> str:
    """Readable prefix + short hash of the config (same idea as studies.RunConfig.run_id)."""
    h = hashlib.sha1(json.dumps(cfg.to_dict(), sort_keys=True).encode()).hexdigest()[:8]
    return f"llm-{cfg.dataset}-n{cfg.n}-bp{cfg.bp}-s{cfg.seed}-{h}"


def adapter_table(result, rid: str):
    """(table, pass1) DataFrames of one LLMResult in the studies contract (docs/CONTRACTS.md)."""
    import pandas as pd

    table = pd.DataFrame(result.table)
    table.insert(0, "run_id", rid)
    rows = [
        (rid, int(c), "val", j, float(p))
        for c, vec in zip(result.pass1["compute"], result.pass1["val"], strict=True)
        for j, p in enumerate(vec)
    ]
    pass1 = pd.DataFrame(rows, columns=["run_id", "compute", "split", "problem", "pass1"])
    return table, pass1


def n_vs_m(base, ns: list[int], seeds: list[int], out_dir: str | Path, progress: bool = True):
    """Runs of `base` (an LLMConfig) for each n and seed at one budget; resumes by skipping finished runs.

    Writes `<out>/runs/<run_id>.{csv,pass1.csv,steps.csv}` per run and `<out>/table.csv` (all runs).
    """
    import pandas as pd

    from llm_backend.engines import make_engine
    from llm_backend.model import load_model, load_tokenizer, resolve_model
    from llm_backend.runner import engine_options, run

    out = Path(out_dir)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    engine = None
    try:
        for seed in seeds:
            for n in ns:
                cfg = dataclasses.replace(base, n=n, seed=seed)
                rid = run_id(cfg)
                if (out / "runs" / f"{rid}.csv").exists():
                    continue
                if engine is None:
                    path = resolve_model(base.model, base.cache_dir)
                    tok = load_tokenizer(path)
                    model = load_model(path, base.device)
                    engine = make_engine(base.engine, model, tok, str(path), seed=0, **engine_options(base))
                res = run(cfg, progress=progress, engine=engine if base.engine == "vllm" else None)
                table, pass1 = adapter_table(res, rid)
                pd.DataFrame(res.steps).assign(run_id=rid).to_csv(
                    out / "runs" / f"{rid}.steps.csv", index=False
                )
                pass1.to_csv(out / "runs" / f"{rid}.pass1.csv", index=False)
                table.to_csv(out / "runs" / f"{rid}.csv", index=False)  # written last: marks the run done
                (out / "runs" / f"{rid}.json").write_text(
                    json.dumps({"config": cfg.to_dict(), "status": res.status, "reason": res.reason})
                )
    finally:
        if engine is not None:
            engine.close()
    tables = [
        pd.read_csv(p)
        for p in sorted((out / "runs").glob("llm-*.csv"))
        if not p.name.endswith((".steps.csv", ".pass1.csv"))
    ]
    table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()
    table.to_csv(out / "table.csv", index=False)
    return table


def main(argv: list[str] | None = None) -> None:
    """`python -m llm_backend.study --n 2,4,8 --out DIR [KEY=VALUE ...]` with KEY an LLMConfig field."""
    import argparse

    from llm_backend.config import LLMConfig

    ap = argparse.ArgumentParser(description="n-vs-m study on the real model (one shared engine)")
    ap.add_argument("--n", default="2,4,8")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--out", required=True)
    ap.add_argument("fields", nargs="*", help="LLMConfig overrides KEY=VALUE (e.g. bp=4 budget=64 lr=3e-5)")
    a = ap.parse_args(argv)
    kw = {}
    types = {k: type(v) for k, v in LLMConfig().to_dict().items()}
    for item in a.fields:
        key, _, value = item.partition("=")
        kind = types.get(key)
        if kind is None:
            ap.error(f"unknown LLMConfig field {key!r}")
        if kind is bool:
            kw[key] = value.lower() in ("1", "true", "yes")
        elif kind is int:
            kw[key] = int(float(value))
        else:
            kw[key] = value if kind in (str, type(None)) else kind(value)
    base = LLMConfig(**{**kw, "n": 2})
    table = n_vs_m(base, [int(x) for x in a.n.split(",")], list(range(a.seeds)), a.out)
    print(table[["run_id", "n", "m", "compute", "val_mean", "train_mean"]].to_string())


if __name__ == "__main__":
    main()
