"""Integrations with TRL and verl (issue 14): readers of their logs, registered into `studies.io` so that
`fit`, `plot`, `plan` and `predict` read them (`--format trl|verl|csv|auto`), and a TRL callback
(`isocompute.integrations.trl.IsoComputeCallback`). Importing this needs neither TRL nor verl."""

from isocompute.integrations import exports, trl, verl
from studies.io import register_reader

register_reader("trl", trl.sniff, trl.read)
register_reader("verl", verl.sniff, verl.read)
register_reader("wandb", exports.sniff_wandb, exports.read_wandb, family="csv")
register_reader("tensorboard", exports.sniff_tensorboard, exports.read_tensorboard, family="csv")
