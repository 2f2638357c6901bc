"""The tiny LMs (`--lm tiny`, `small`): Llama-architecture causal LMs of 0.2M / 1M parameters trained from
scratch on digit arithmetic, with everything that exists only for them.

- `model`: the torch module (transformers' LlamaForCausalLM names and maths) and its saved folders;
- `tokenizer`: the character tokenizer (one token per symbol), saved as a Hugging Face tokenizer.json;
- `tasks`: their task family (operation x digits of each operand) and its calibration pool;
- `pretrain`: pretraining from scratch (`isocompute llm pretrain`);
- `sampler`: the `kv` rollout engine, batched KV-cache sampling;
- `kernel`: the sampler's draws (prefill, decoding steps, Gumbel-max draws) as one Numba-compiled call.
- `train_kernel`: a packed training microbatch's forward and backward as two Numba-compiled calls;
- `weights`: the weights as both kernels read them (stacked per layer) and the rotary tables, cached once.

The rest of llm_backend (trainer, loop, evaluation, allocators) is shared with the Hugging Face LMs; where the
two families differ, it reads `llm_backend.family.ModelFamily`, decided once per config. Importing this
package imports nothing (no torch): its modules are imported where they are used.
"""
