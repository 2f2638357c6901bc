"""Small synthetic result tables with known structure, for fast figure tests (no simulator needed).

Curves follow R(C) = R0 + (A(n) - R0) / (1 + (C_mid(n) / C)^b) with A rising in n and C_mid proportional to n,
so the frontier-attaining n grows with compute, as in paper Fig 6; pass@1 snapshots are Beta-distributed
around the reward, more polarised for small n (Fig 11).
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

NS = (2, 8, 32, 128)


def _reward(C, n, base=0.4, top=0.75, b=1.5):
    A = base + (top - base) * (1 - 1 / (1 + np.log2(n) / 3))
    cmid = 4000.0 * n**0.8
    return base + (A - base) / (1 + (cmid / np.maximum(C, 1e-9)) ** b)


def curves(
    ns=NS,
    bps=(32,),
    seeds=2,
    budget=2**20,
    n_evals=12,
    dataset="easy",
    model="interference",
    variant=None,
    d=256,
    rng_seed=0,
    pass1=True,
    batch=None,
    extra=None,
):
    """Learning-curve table (docs/DESIGN.md columns) and tidy pass@1 snapshots for a grid of (bp, n) x
    seeds."""
    rng = np.random.default_rng(rng_seed)
    rows, snaps = [], []
    pairs = [(batch // n, n) for n in ns if batch % n == 0] if batch else list(itertools.product(bps, ns))
    for (bp, n), s in itertools.product(pairs, range(seeds)):
        steps = max(budget // (bp * n), 1)
        ms = np.unique(np.concatenate([[0], np.geomspace(1, steps, n_evals).astype(int)]))
        C = ms * bp * n
        shift = 0.02 * np.log2(bp / 32) if bp else 0.0
        R = _reward(C, n) + shift + rng.normal(0, 0.004, C.size)
        R[0] = 0.4
        run_id = f"syn-{dataset}-{variant or 'v'}-bp{bp}-n{n}-s{s}"
        for j, (m, c, r) in enumerate(zip(ms, C, R, strict=True)):
            row = dict(
                run_id=run_id,
                backend="sim",
                model=model,
                dataset=dataset,
                seed=s,
                n=n,
                bp=bp,
                batch=bp * n,
                m=int(m),
                compute=int(c),
                tokens=float(c) * (300 + 2 * j),
                epoch=m * bp / d,
                lr=0.1,
                k=4,
                train_mean=r + 0.03 * j / n_evals,
                val_mean=r,
                val_best_k=1 - (1 - r) ** 4 * (1 - 0.1 * np.log2(n) / 8),
                val_worst_k=r**4 * (1 + 0.1 * np.log2(n) / 8),
                val_zero_frac=max(0.0, 0.3 - r / 3),
            )
            if variant is not None:
                row["variant"] = variant
            if extra:
                row.update(extra)
            rows.append(row)
        if pass1:
            for c, r in zip(C, R, strict=True):
                conc = 1.0 + np.log2(n)  # small n: low concentration = polarised
                for split in ("train", "val"):
                    p = rng.beta(r * conc, (1 - r) * conc, size=64)
                    p[rng.random(64) < 0.15 / np.log2(2 * n)] = 0.0
                    if c == 0:
                        p = rng.uniform(
                            *{"hard": (0, 0.06), "veasy": (0.6, 0.9)}.get(dataset, (0.3, 0.6)), 64
                        )
                    snaps.append(
                        pd.DataFrame(
                            dict(
                                run_id=run_id,
                                compute=int(c),
                                split=split,
                                problem=np.arange(64),
                                pass1=p.astype(np.float32),
                            )
                        )
                    )
    table = pd.DataFrame(rows)
    p1 = (
        pd.concat(snaps, ignore_index=True)
        if snaps
        else pd.DataFrame(columns=["run_id", "compute", "split", "problem", "pass1"])
    )
    return table, p1


def tables_for(spec) -> dict[str, pd.DataFrame]:
    """Synthetic tables for every study a figure spec declares (same keys the CLI's loader produces)."""
    out = {}
    for i, st in enumerate(spec.studies):
        parts, p1s = [], []
        variants = st.variants or ((None, ()),)
        for j, (label, overrides) in enumerate(variants):
            ov = dict(st.base) | dict(overrides)
            ds = ov.get("dataset", st.dataset)
            kw = dict(
                dataset=ds, variant=label, rng_seed=100 * i + j, seeds=2, model=ov.get("model", st.preset)
            )
            ns = tuple(st.n)[:4] if len(st.n) > 4 else tuple(st.n)
            if st.kind == "fixed-batch":
                for B in st.batch:
                    t, p = curves(ns=tuple(v for v in st.n if B % v == 0)[:4], batch=B, **kw)
                    parts.append(t)
                    p1s.append(p)
                continue
            bps = tuple(st.bp)
            if "n_est" in ov:
                kw["extra"] = {"n_est": ov["n_est"]}
            if "n" in ov:
                ns = (ov["n"],)
            t, p = curves(ns=ns, bps=bps, **kw)
            parts.append(t)
            p1s.append(p)
        out[st.name] = pd.concat(parts, ignore_index=True)
        out[st.name + ".pass1"] = pd.concat(p1s, ignore_index=True)
    return out
