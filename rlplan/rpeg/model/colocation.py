"""What training and generation pay for sharing GPUs (docs/cost-model.md#colocation).

Three costs, each its own event in a trace:

* **offload and onload** of a train or infer vertex with the ``offload``
  flag: its states come from host memory before each run (``onload``) and a
  train vertex's go back after it (``offload``); an infer vertex's weights are
  dropped (a copy stays on the host). The vertex's run time includes both.
* **sleep and wake** of a *colocated* rollout engine (its block shares a GPU
  with another vertex's): vLLM sleep mode. At level 1 the engine's weight
  shard is copied to pinned host memory after each rollout (``sleep``) and
  back before the next (``wake``), and the KV pool is freed and re-allocated;
  at level 2 the weights are dropped and the refit brings them back, so
  neither copy is paid.
* **refit over CUDA IPC** when the trained weights reach a rollout engine on
  the same block: the engine's shard is copied on the device (read and
  write), after the reshard a layout change needs.

Every rate is a ``hardware`` field and every constant names its source here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlplan.rpeg.templates import Kind

if TYPE_CHECKING:
    from rlplan.rpeg.model.cost import CostModel, Strategy

#: Seconds to re-allocate the KV pool on wake, beside the weight copy. vLLM's
#: ``CuMemAllocator.wake_up`` re-maps the discarded pool without copying
#: (vllm-project/vllm vllm/device_allocator/cumem.py); no source times it, so
#: it is 0.
KV_REALLOCATION_S = 0.0
#: Fixed seconds per weight bucket of a CUDA IPC refit. verl sends the weights
#: in 2048 MB buckets (volcengine/verl verl/trainer/config/rollout/rollout.yaml,
#: ``update_weights_bucket_megabytes``) and NeMo RL in buffers of 30 % of free
#: memory (NVIDIA-NeMo/RL nemo_rl/algorithms/grpo.py); no source times a
#: bucket alone, so it is 0 and a refit costs its copy only.
IPC_BUCKET_LATENCY_S = 0.0
#: A CUDA IPC refit reads and writes every byte of the engine's shard in device
#: memory: it moves at half the memory bandwidth (the copy of verl
#: verl/workers/rollout/vllm_rollout/vllm_rollout.py ``update_weights`` and of
#: NeMo RL ``stream_weights_via_ipc_zmq`` is device to device).
IPC_COPY_PASSES = 2


def host_rates(hardware, pinned: bool) -> tuple[float, float]:
    """(host-to-device, device-to-host) bytes/s per GPU from pinned or pageable memory."""
    if pinned:
        return hardware.host_to_device_pinned, hardware.device_to_host_pinned
    return hardware.host_to_device_pageable, hardware.device_to_host_pageable


class ColocationCosts:
    """The colocation costs of one instance, read from its cost model.

    Parameters
    ----------
    cost
        The instance's cost model (weights, states and hardware).
    """

    def __init__(self, cost: CostModel) -> None:
        self.cost = cost
        self.hardware = cost.hardware
        self.engine = cost.engine

    # -- offload of train and infer vertices -------------------------------------------

    def _offload_rates(self, kind: Kind) -> tuple[float, float]:
        """Host rates of an offloaded vertex's states.

        Training states live where ``engine.offload_memory`` says. Offloaded
        inference weights are pinned in every framework: NeMo RL copies the
        reference weights with ``get_cpu_state_dict(..., pin_memory=True)``
        (NVIDIA-NeMo/RL nemo_rl/models/policy/dtensor_policy_worker_v2.py),
        verl's ``offload_fsdp_model_to_cpu`` with ``non_blocking=True``, which
        PyTorch gives a pinned destination (pytorch/pytorch
        aten/src/ATen/native/TensorConversions.cpp ``_to_copy``).
        """
        pinned = kind is not Kind.TRAIN or self.engine.offload_memory == "pinned"
        return host_rates(self.hardware, pinned)

    def held_bytes(self, kind: Kind, model: str, strategy: Strategy) -> float:
        """Bytes per GPU an offloaded vertex keeps in host memory (0 without offload).

        A train vertex's training states, an infer vertex's weight shard.
        """
        if not strategy.offload or kind is Kind.GENERATE:
            return 0.0
        if kind is Kind.TRAIN:
            return self.cost.train_states(model, strategy)
        return self.cost.weight_shard(model, strategy)

    def onload(self, kind: Kind, model: str, strategy: Strategy) -> float:
        """Seconds to bring an offloaded vertex's states onto its GPUs before a run."""
        return self.held_bytes(kind, model, strategy) / self._offload_rates(kind)[0]

    def offload(self, kind: Kind, model: str, strategy: Strategy) -> float:
        """Seconds to put a train vertex's states back in host memory after a run.

        An infer vertex's weights are dropped (the host keeps its copy): 0.
        """
        if kind is not Kind.TRAIN:
            return 0.0
        return self.held_bytes(kind, model, strategy) / self._offload_rates(kind)[1]

    # -- sleep and wake of a colocated rollout engine ----------------------------------

    def engine_host_bytes(self, model: str, strategy: Strategy) -> float:
        """Bytes per GPU a sleeping engine keeps in host memory: its weight shard at level 1.

        vLLM docs, "Sleep Mode": "Level 1 sleep will offload the model weights
        and discard the KV cache"; level 2 "will discard both the model
        weights and the KV cache".
        """
        if self.engine.sleep_level != 1:
            return 0.0
        return self.cost.weight_shard(model, strategy)

    def wake(self, model: str, strategy: Strategy) -> float:
        """Seconds of a wake-up: the weight shard from pinned host memory, then the KV pool.

        vLLM's ``CuMemAllocator`` backs the weights up in pinned memory
        (``torch.empty(..., pin_memory=is_pin_memory_available())``,
        vllm/device_allocator/cumem.py) and copies them back on
        ``wake_up``, one copy per allocation, at ``engine.wake_link_fraction``
        of the pinned link (measured: 0.43 on an A100); NeMo RL wakes with
        ``prepare_for_generation(tags=["weights"])`` then ``["kv_cache"]``
        (nemo_rl/algorithms/grpo.py).
        """
        rate = self.hardware.host_to_device_pinned * self.engine.wake_link_fraction
        return self.engine_host_bytes(model, strategy) / rate + KV_REALLOCATION_S

    def sleep(self, model: str, strategy: Strategy) -> float:
        """Seconds of a level-1 sleep: the weight shard to pinned host memory (KV pool freed).

        NeMo RL calls ``self.llm.sleep(level=1)``
        (nemo_rl/models/generation/vllm/vllm_worker.py). The backup goes to a
        freshly pinned host buffer, so it runs at the slower of
        ``engine.sleep_backup_rate`` (measured: 22 GiB in 10.57 s on an A100,
        vllm-project/vllm PR 48337) and the device-to-host link
        (docs/cost-model.md#colocation).
        """
        rate = min(self.hardware.device_to_host_pinned, self.engine.sleep_backup_rate)
        return self.engine_host_bytes(model, strategy) / rate

    # -- refit ----------------------------------------------------------------------

    def refit_ipc(self, model: str, destination: Strategy) -> float:
        """Seconds of a CUDA IPC weight update of an engine on the trainer's own block.

        The engine's shard (:meth:`~rlplan.rpeg.model.memory_terms.MemoryTerms.weight_shard`,
        ``2P/(tp*pp)`` for a dense model) read and written in device memory,
        plus the bucket latency: ``shard / (memory_bandwidth / 2)``.
        """
        shard = self.cost.weight_shard(model, destination)
        rate = self.hardware.memory_bandwidth / IPC_COPY_PASSES
        return shard / rate + IPC_BUCKET_LATENCY_S

    def refit_lag(
        self, model: str, same_block: bool, same_layout: bool, level: str, destination: Strategy
    ) -> float:
        """Lag of a pub edge from a train vertex to a rollout engine (a refit).

        On the same block: the reshard a layout change needs (as any pub
        edge) plus the CUDA IPC copy; on another block: the NCCL p2p at the
        spanning level (:meth:`CostModel.pub_lag`).
        """
        lag = self.cost.pub_lag(model, same_block, same_layout, level, destination)
        if same_block:
            lag += self.refit_ipc(model, destination)
        return lag
