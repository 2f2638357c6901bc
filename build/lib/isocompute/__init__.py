"""isocompute: the facade above the packages (docs/DESIGN.md): the CLI (`isocompute.cli`), the report
generators (`isocompute.reports`) and integrations with the frameworks practitioners run
(`isocompute.integrations`).

This `__init__` imports nothing, so `isocompute.contract` (the shared rules both engines read, at the bottom
of the arrows) can be imported by every package without pulling in the facade."""
