"""The vocabulary both engines share: names and option values, the learning-curve columns and eval
schedule, the allocator spec grammar, budget -> steps, lr rules, run statuses, labels, progress lines.

Pure Python (no numpy, no torch) and a leaf of the arrows: it imports nothing of ours, and everything may
import it. It lives inside `isocompute` (whose `__init__` imports nothing) rather than as a top-level package,
so its import name cannot collide with a package on PyPI.

Modules: `options` (option value tuples, ZERO_PASS1), `budget` (STEPS_RULE, steps, the RunShape mixin),
`lr` (effective_lr), `config` (ConfigError, the EngineConfig mixin, checks of the shared fields), `columns`
(CURVE_COLUMNS), `schedule` (eval_steps), `allocspec` (parse -> AllocSpec, split_specs, label), `allocrules`
(the allocators' per-problem rules, which the simulator compiles with numba), `status` (OK, DIVERGED, DONE,
FAILED, PENDING), `progress` (Progress: how a long job says where it is on stderr)."""
