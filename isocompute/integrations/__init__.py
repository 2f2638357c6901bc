"""Integrations with TRL and verl: log readers and a TRL callback (issue 14)."""
