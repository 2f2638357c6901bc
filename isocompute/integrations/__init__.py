"""Integrations with the frameworks practitioners train with: a TRL TrainerCallback
(`isocompute.integrations.trl.IsoComputeCallback`) that writes a GRPO run's learning-curve table while it
trains. The readers of TRL / verl / wandb / TensorBoard logs live in `studies.readers`, where
`studies.io.load_table` finds them without any import of this package. Importing this needs neither TRL nor
transformers."""
