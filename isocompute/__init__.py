"""isocompute: the facade above the packages (docs/DESIGN.md): the CLI (`isocompute.cli`) and integrations
with
the frameworks practitioners run (`isocompute.integrations`). Nothing below imports it."""
