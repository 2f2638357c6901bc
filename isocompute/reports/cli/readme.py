"""`isocompute report readme`: the click command over isocompute.reports.readme (rewrite README.md's
generated blocks)."""

from __future__ import annotations

import click

from isocompute.reports.readme import update


@click.command("readme")
def readme() -> None:
    """Regenerate README.md's claims-summary paragraph, headline caption and llm-rollout paragraph from
    docs/CLAIMS.json and the rollout benchmark JSONs."""
    update()
    click.echo("README.md: claims-summary, headline-caption and llm-rollout blocks regenerated")
