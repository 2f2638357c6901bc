"""`isocompute figs`: rebuild the paper's figures from cached or new runs (attached by isocompute/cli.py)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from studies.cli_kit.params import dir_option, file_option
from studies.config import StudiesError


def _ids(value: tuple[str, ...]) -> list[str]:
    """--only takes repeated or comma-separated ids."""
    return [v.strip() for item in value for v in item.split(",") if v.strip()]


@click.command(
    help="Rebuild the paper's figures (PNG + PDF) from cached or new runs; see paper_figs/README.md."
)
@click.option(
    "--only",
    "only",
    multiple=True,
    metavar="ID",
    help="Figure id(s) to build (repeat or comma list); default: every gallery figure (all but the demo's "
    "`headline`). `--list` shows the ids.",
)
@click.option(
    "--backend",
    type=click.Choice(["sim", "llm"]),
    default="sim",
    show_default=True,
    help="Engine that runs the studies.",
)
@click.option(
    "--lm",
    type=click.Choice(["smollm2", "tiny"]),
    default=None,
    help="Model of --backend llm: smollm2 (default; bp 4, n 2..8 to 256 rollouts) or tiny (the shipped "
    "0.2M-parameter LM; bp 16, n 2..32 to 2^14: paper_figs.specs.TINY_GRID).",
)
@dir_option("--out", default=Path("results/figs/img"), show_default=True, help="Where PNG and PDF files go.")
@dir_option("--results", default=Path("results/figs/runs"), show_default=True,
            help="Results directory of the studies (finished runs are reused, never rerun).")
@click.option("--jobs", type=int, default=None, help="Parallel runs (default: the number of cores).")
@click.option(
    "--size",
    type=click.Choice(["quick", "full"]),
    default="quick",
    show_default=True,
    help="quick: the declared small studies; full: 8 seeds and 4x the budget.",
)
@file_option("--gallery", "gallery_path",
             help="Also write the gallery Markdown here (e.g. paper_figs/README.md).")
@click.option(
    "--reuse",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Other results directories whose finished runs are copied in instead of rerun "
    "(repeatable), e.g. those of `isocompute demo`.",
)
@click.option("--list", "list_only", is_flag=True, help="List the figure ids and exit.")
@click.option("--quiet", is_flag=True, help="No progress bars and no per-figure log: only the files written.")
def figs(only, backend, lm, out, results, jobs, size, gallery_path, reuse, list_only, quiet) -> None:
    from paper_figs import build
    from paper_figs.registry import figures

    reg = figures()
    if list_only:
        for fid, spec in reg.items():
            click.echo(f"{fid:10s} {build.heading(spec)}")
        return
    if lm is not None and backend != "llm":
        raise click.UsageError("--lm takes --backend llm")
    if only and not _ids(only):  # `--only ''` must not silently mean every figure (hundreds of runs)
        raise click.UsageError("--only names no figure id; drop it to build all (`--list` shows the ids)")
    listed = [i for i, spec in reg.items() if spec.gallery]
    ids = _ids(only) or listed
    unknown = [i for i in ids if i not in reg]
    if unknown:
        raise click.UsageError(f"unknown figure id(s) {', '.join(unknown)}; choose from {', '.join(reg)}")
    if gallery_path is not None and set(ids) != set(listed):
        raise click.UsageError("--gallery lists every gallery figure: build all of them (drop --only)")
    from studies.cli_kit.checks import check_jobs
    from studies.files import check_output_dir, check_output_file

    jobs = check_jobs(jobs)
    for r in reuse:  # a mistyped --reuse must not be silently ignored
        if not Path(r).is_dir():
            raise click.UsageError(f"--reuse {r} is not a directory")
    check_output_dir(out)  # before any run: an unwritable destination must not cost the studies
    check_output_dir(results, what="--results")
    if gallery_path is not None:
        check_output_file(gallery_path, what="--gallery", suffixes=(".md",), kind="gallery")
    try:
        build.build(
            [reg[i] for i in ids],
            out,
            results,
            backend=backend,
            jobs=jobs or os.cpu_count(),
            size=size,
            gallery_path=gallery_path,
            progress=not quiet,
            log=(lambda _msg: None) if quiet else click.echo,
            reuse=reuse,
            lm=None if lm == "smollm2" else lm,
        )
    except StudiesError as e:
        raise click.UsageError(str(e)) from None
    if quiet:
        click.echo("wrote " + ", ".join(str(out / f"{i}.png") for i in ids))
