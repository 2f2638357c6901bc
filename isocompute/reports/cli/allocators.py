"""`isocompute report allocators`: the click command over isocompute.reports.allocators (run the allocators
study per preset, write docs/ALLOCATORS.md and its figure)."""

from __future__ import annotations

from pathlib import Path

import click

from isocompute.reports.allocators import PRESETS, parse_presets, write_report
from studies.cli_kit.params import COUNT, OutPath
from studies.files import FIGURE_SUFFIXES, check_output_dir, check_output_file


@click.command("allocators")
@click.option("--seeds", type=click.IntRange(1), default=8, show_default=True,
              help="Seeds per configuration.")
@click.option("--budget", type=COUNT, default=2**22, show_default="2^22",
              help="Top budget in rollouts, e.g. 4e6 or 2^22.")
@click.option("--out", type=OutPath(file_okay=False, path_type=Path), default=Path("results/allocators-v2"),
              show_default=True, help="Results directory of the runs (resumable).")
@click.option("--doc", type=OutPath(dir_okay=False, path_type=Path), default=Path("docs/ALLOCATORS.md"),
              show_default=True, help="Markdown report to write.")
@click.option("--fig", type=OutPath(dir_okay=False, path_type=Path), default=Path("docs/figs/allocators.png"),
              show_default=True, help="Figure to write.")
@click.option("--presets", default=None, metavar="LIST",
              help="Comma list of MODEL/DATASET, e.g. tabular/easy,interference/hard (default: every preset "
              "of the report).")
@click.option("--jobs", type=click.IntRange(1, 64), default=None,
              help="Worker processes (default: all cores).")
@click.option("--llm", type=click.Path(file_okay=False, path_type=Path), default=Path("results/llm-nvm"),
              show_default=True,
              help="Real-LLM store with allocator runs for the LLM section (skipped if absent).")
def allocators(seeds: int, budget: int, out: Path, doc: Path, fig: Path, presets: str | None,
               jobs: int | None, llm: Path) -> None:
    """Run the allocators study (adaptive rollout allocators against the envelope of fixed n at iso-compute)
    per preset and write docs/ALLOCATORS.md and its figure."""
    rows = parse_presets(presets) if presets else PRESETS
    check_output_dir(out)
    check_output_file(doc, what="--doc")
    check_output_file(fig, what="--fig", suffixes=FIGURE_SUFFIXES, kind="figure")
    text, seconds = write_report(rows, seeds, budget, out, doc, fig, jobs, llm)
    click.echo(text)
    click.echo(f"runs + report in {seconds:.0f} s -> {doc}, {fig}")
