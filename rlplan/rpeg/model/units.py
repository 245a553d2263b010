"""Units and per-parameter byte counts of the cost model (docs/cost-model.md)."""

from __future__ import annotations

BF16 = 2
FP32 = 4
#: Activation bytes per token and hidden unit of one layer (Korthikanti et
#: al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
#: eq. 1: ``s*b*h*(34 + 5*a*s/h)``); the second term is the attention scores,
#: which flash attention never materialises.
ACTIVATION_CONSTANT = 34.0
ACTIVATION_ATTENTION = 5.0
#: The attention's part of the 34 (Korthikanti et al. 2022, section 4.1: "11sbh"
#: for the QKV input, Q and K, V, the output projection's input and its dropout
#: mask, beside the MLP's 19 and the layer norms' 4).
ACTIVATION_DENSE_ATTENTION = 11.0
#: Bytes per token and hidden unit kept per layer under full recompute (the
#: layer's bf16 input).
CHECKPOINT_BYTES = 2.0
#: Bytes of a data transfer per token of a sequence (token ids, log-probs,
#: values, rewards, advantages, masks).
DATA_BYTES_PER_TOKEN = 8
#: Bytes per parameter of ZeRO-1 training states beside the bf16 weights and
#: gradients: fp32 master weights and Adam's two moments (Rajbhandari et al.
#: 2020, ZeRO, section 3.1: "12 bytes").
ADAM_BYTES = 12
#: Bytes per parameter of all training states (2 + 2 + 12), ZeRO-3 shards them all.
STATE_BYTES = 16
