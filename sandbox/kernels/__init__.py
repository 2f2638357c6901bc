"""The simulator's Numba kernels (docs/DESIGN.md "Simulator"), private kernels under one loop.

- `layout`: the argument layout the kernels share (hyperparameter / state / accumulator indices, codes).
- `softmax`: softmax of logit rows; `objective`: GRPO advantages and the surrogate's logit gradient;
  `rollouts`: problem order and the draws of a group's answer counts.
- `optimizer`: SGD / Adam(W), dense and lazy per row, with the flush of tiny values (subnormals are slow).
- `allocate`: the rollout allocators' rules (sandbox/allocators.py parses their specs).
- `evaluate`: pass@1 and the metric aggregates of every problem.
- `train`: the one train kernel, a step loop over the kernels above; fixed n is the allocator `A_FIXED`.

sandbox/grpo.py is the public layer over them (constants, the GRPO math, the run loop `_run_full`).
"""
