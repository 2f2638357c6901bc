"""`isocompute figs` (placeholder until the figures issue lands)."""

import click


@click.command(help="Rebuild the paper's figures from our runs (not available yet).")
def figs() -> None:
    raise click.UsageError("paper figures are not available yet")
