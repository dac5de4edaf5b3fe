"""A DeepSpeed config JSON as a ``--strategy FILE`` (https://www.deepspeed.ai/docs/config-json/).

``train_batch_size``, ``train_micro_batch_size_per_gpu``, ``gradient_accumulation_steps``, ``bf16``/``fp16``,
``communication_data_type``, ``zero_optimization`` (stage, ``reduce_bucket_size`` in elements, ``overlap_comm``,
``offload_optimizer`` / ``offload_param`` device cpu as strategy offload_states), ``tensor_parallel.autotp_size``;
what is not modelled is named in :attr:`StrategyFile.unused`. The entry point that tells the formats apart is
:func:`scalemodel.specs.frameworks.read_strategy_file`.
"""

from __future__ import annotations

import math
from typing import Any

from scalemodel.errors import InputError, first_of
from scalemodel.specs.strategy_file import StrategyFile, _auto, _bool, _bucket_bytes, _grad_bytes, _int

_DS_HARMLESS = {"steps_per_print", "wall_clock_breakdown", "dump_state", "optimizer", "scheduler", "gradient_clipping",
                "prescale_gradients", "gradient_predivide_factor", "zero_allow_untested_optimizer", "tensorboard",
                "wandb", "csv_monitor", "comet", "flops_profiler", "comms_logger", "memory_breakdown",
                "zero_force_ds_cpu_optimizer", "checkpoint", "data_efficiency", "elasticity", "amp", "monitor_config",
                "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "bf16", "fp16",
                "zero_optimization", "activation_checkpointing", "tensor_parallel", "communication_data_type"}
_ZERO_USED = {"stage", "reduce_bucket_size", "overlap_comm", "contiguous_gradients", "reduce_scatter",
              "allgather_partitions", "round_robin_gradients", "load_from_fp32_weights", "elastic_checkpoint",
              "ignore_unused_parameters", "stage3_gather_16bit_weights_on_model_save",
              "gather_16bit_weights_on_model_save"}


#: The offload sections' keys this reader does not price, with DeepSpeed's own constraint on each
#: (deepspeedai/DeepSpeed@edaa7221 deepspeed/runtime/zero/offload_config.py: DeepSpeedZeroOffloadParamConfig L33-53,
#: DeepSpeedZeroOffloadOptimizerConfig L73-107, pydantic fields read in lax mode): (kind, low, high), kind "int"
#: (Field(ge=0)), "bool" or "float" (Field(ge=0.0, le=1.0)). pin_memory true is what the engine prices (DeepSpeed's
#: default, cost.state_offload); the NVMe buffers (buffer_count, buffer_size, max_in_cpu, pipeline_read / _write,
#: fast_init) and SuperOffload's cpuadam_cores_perc are not priced.
_OFFLOAD_KEYS: dict[str, dict[str, tuple[str, float, float]]] = {
    "offload_param": {"buffer_count": ("int", 0, math.inf), "buffer_size": ("int", 0, math.inf),
                      "max_in_cpu": ("int", 0, math.inf), "pin_memory": ("bool", 0, 1)},
    "offload_optimizer": {"buffer_count": ("int", 0, math.inf), "pin_memory": ("bool", 0, 1),
                          "pipeline_read": ("bool", 0, 1), "pipeline_write": ("bool", 0, 1),
                          "fast_init": ("bool", 0, 1), "cpuadam_cores_perc": ("float", 0.0, 1.0)}}
#: Every key DeepSpeed's offload sections hold (deepspeedai/DeepSpeed@edaa7221 deepspeed/runtime/zero/offload_config.py:
#: DeepSpeedZeroOffloadParamConfig L21-45, DeepSpeedZeroOffloadOptimizerConfig L55-105); DeepSpeedConfigModel forbids
#: any other (deepspeed/runtime/config_utils.py L105-113: ``model_config = ConfigDict(..., extra="forbid")``), and a
#: nested section is validated by pydantic, not by DeepSpeedConfigModel.__init__'s "auto" filter, so an unknown key is
#: refused whatever its value. In DeepSpeed's order of declaration.
_OFFLOAD_FIELDS = {
    "offload_param": ("device", "nvme_path", "buffer_count", "buffer_size", "max_in_cpu", "pin_memory"),
    "offload_optimizer": ("device", "nvme_path", "buffer_count", "pin_memory", "pipeline_read", "pipeline_write",
                          "fast_init", "ratio", "super_offload", "cpuadam_cores_perc")}
#: the strings pydantic reads as a bool in lax mode (docs.pydantic.dev, standard library types: Booleans)
_LAX_BOOL = {"0": False, "off": False, "f": False, "false": False, "n": False, "no": False,
             "1": True, "on": True, "t": True, "true": True, "y": True, "yes": True}


def _lax(value: Any, kind: str) -> float | bool | None:
    """``value`` as pydantic's lax mode reads it into a field of ``kind`` (docs.pydantic.dev conversion table: an int
    from a bool, an integral float or a numeric string; a bool from 0 / 1 or the strings of :data:`_LAX_BOOL`; a
    float from a bool, a number or a numeric string), or None where it refuses it."""
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, float)) and value in (0, 1):
            return bool(value)
        return _LAX_BOOL.get(value.strip().lower()) if isinstance(value, str) else None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value if kind == "float" or float(value).is_integer() else None


def _offload_keys(sec: dict[str, Any], dev: str, out: StrategyFile) -> None:
    """The keys of :data:`_OFFLOAD_KEYS` in ``zero_optimization.<dev>``: a value DeepSpeed's config refuses (a
    negative buffer_count, a cpuadam_cores_perc outside [0, 1], a pin_memory that is no boolean) is refused naming
    the key and its range (fuzz36 / ux36: they passed without a word); a valid one is named as not priced, but
    pin_memory true (priced). "auto" is dropped, as DeepSpeedConfigModel drops it. A key DeepSpeed's model has not
    (:data:`_OFFLOAD_FIELDS`: a misspelt ``pin_memmory``, ``nvme_pth``, ``ratio`` under offload_param) is refused as
    DeepSpeed refuses it ("Extra inputs are not permitted"); fuzz37: it passed without a word."""
    extra = next((k for k in sec if k not in _OFFLOAD_FIELDS[dev]), None)
    if extra is not None:
        model = "DeepSpeedZeroOffload" + ("ParamConfig" if dev == "offload_param" else "OptimizerConfig")
        raise InputError(f"unknown key {str(extra)[:40]!r} (DeepSpeed's {model} forbids extra keys: pydantic "
                         "extra=\"forbid\", deepspeed/runtime/config_utils.py L110 at edaa7221)",
                         where=f"zero_optimization.{dev}", allowed=", ".join(_OFFLOAD_FIELDS[dev]))
    for key, (kind, low, high) in _OFFLOAD_KEYS[dev].items():
        value = sec.get(key)
        if key not in sec or _auto(value):
            continue
        read = _lax(value, kind)
        if read is None or not low <= read <= high:
            shown = repr(value)[:40] if isinstance(value, str) else str(value)[:40]
            allowed = {"int": "a whole number >= 0", "bool": "true or false",
                       "float": "a number from 0 to 1"}[kind]
            model = "DeepSpeedZeroOffload" + ("ParamConfig" if dev == "offload_param" else "OptimizerConfig")
            raise InputError(f"{shown} is not {allowed}", where=f"zero_optimization.{dev}.{key}",
                             allowed=f"{allowed} (DeepSpeed's {model}.{key}), or leave it out")
        if not (key == "pin_memory" and read):
            written = str(value).lower() if isinstance(value, bool) else str(value)[:40]  # as JSON writes it
            out.unused.append(f"zero_optimization.{dev}.{key} {written} ("
                              + ("pageable host memory is not modelled: priced pinned, DeepSpeed's default"
                                 if key == "pin_memory" else "not modelled") + ")")


def _offload_states(zero: dict[str, Any], out: StrategyFile) -> None:
    """``offload_optimizer`` / ``offload_param`` device cpu as strategy offload_states (docs/model.md#state-offload):
    the optimizer's alone is ``optimizer`` (ZeRO-Offload), both ``optimizer+params`` (ZeRO-Infinity's CPU offload);
    the deprecated ``cpu_offload`` / ``cpu_offload_param`` booleans are read as DeepSpeed maps them (device cpu:
    deepspeed/runtime/zero/config.py ``new_param_fn`` at deepspeedai/DeepSpeed@edaa7221). Not modelled, so listed in
    ``unused`` and not set: NVMe (its swap bandwidth is not priced), SuperOffload (``super_offload``: the CPU step
    during the backward, superoffload_stage3.py), the parameters' offload without the optimizer's
    (the fp32 states on the GPU), and a partial offload (``offload_optimizer.ratio`` < 1, ZeRO-Offload++ Twin-Flow)."""
    devices: dict[str, str] = {}
    for dev, old in (("offload_optimizer", "cpu_offload"), ("offload_param", "cpu_offload_param")):
        sec = zero.get(dev)
        if isinstance(sec, dict) and sec.get("device") is not None:
            devices[dev] = str(sec["device"])
        elif zero.get(old) is not None and not _auto(zero[old]) and _bool(zero[old], f"zero_optimization.{old}"):
            devices[dev] = "cpu"
    opt, par = devices.get("offload_optimizer", "none"), devices.get("offload_param", "none")
    ratio = (zero.get("offload_optimizer") or {}).get("ratio", 1.0) if isinstance(zero.get("offload_optimizer"),
                                                                                  dict) else 1.0
    sec = zero.get("offload_optimizer")
    superchip = isinstance(sec, dict) and sec.get("super_offload") is not None and not _auto(sec["super_offload"]) \
        and _bool(sec["super_offload"], "zero_optimization.offload_optimizer.super_offload")
    why = ("NVMe offload is not modelled" if "nvme" in (opt, par) else
           # review35c: SuperOffloadOptimizer_Stage3 steps each sub-group on the CPU during the backward
           # (superoffload_stage3.py partition_grads -> async_step at edaa7221), not after it as priced here
           "SuperOffload's CPU step during the backward (super_offload) is not modelled" if superchip else
           "the parameters' offload without the optimizer's is not modelled" if par == "cpu" and opt != "cpu" else
           "a partial optimizer offload (ratio < 1) is not modelled" if opt == "cpu" and isinstance(
               ratio, (int, float)) and not isinstance(ratio, bool) and ratio < 1 else "")
    if why:
        out.unused += [f"zero_optimization.{d}.device {v} ({why})" for d, v in devices.items() if v != "none"]
    elif opt == "cpu":
        out.strategy["offload_states"] = "optimizer+params" if par == "cpu" else "optimizer"
        out.fields["offload_states"] = "zero_optimization." + ("offload_param.device" if par == "cpu"
                                                               else "offload_optimizer.device")


#: Where DeepSpeed sets the default the reader fills (StrategyFile.default): the gradient reduction dtype without
#: fp16 / bf16 is fp32 (``communication_data_type`` unset: ``return torch.float32``)
_DS_FP32_REDUCE = ("deepspeedai/DeepSpeed@edaa7221 deepspeed/runtime/engine.py L1405-1416 "
                   "DeepSpeedEngine.communication_data_type: torch.float32 without fp16 or bf16")


def _deepspeed(data: dict[str, Any], out: StrategyFile) -> None:
    def count(key: str) -> int | None:
        v = data.get(key)
        if v is None:
            return None
        if _auto(v):
            out.unused.append(f"{key}: auto (filled in by the HF Trainer; give the value)")
            return None
        return _int(v, key, least=1)  # DeepSpeed asserts each > 0 (gradient_accumulation_steps 0 was ignored)

    if (v := count("train_batch_size")) is not None:
        out.training["global_batch"] = v
    if (v := count("train_micro_batch_size_per_gpu")) is not None:
        out.training["micro_batch"] = v
    if (v := count("gradient_accumulation_steps")) is not None:
        out.gradient_accumulation = v
    enabled = []
    for prec in ("bf16", "fp16"):
        section = data.get(prec)
        if section is not None and not isinstance(section, dict):  # "bf16": true was ignored
            raise InputError(f"expected a mapping, got {str(section)[:40]!r}", where=prec, allowed='{"enabled": true}')
        if isinstance(section, dict) and section.get("enabled") is not None:
            if _auto(section["enabled"]):
                out.unused.append(f"{prec}.enabled: auto")
            elif _bool(section["enabled"], f"{prec}.enabled"):
                out.training["precision"] = prec
                enabled.append(prec)
    if len(enabled) == 2:  # DeepSpeed asserts against it ("bfloat16 and fp16 modes cannot be simultaneously enabled")
        raise InputError("bf16 and fp16 both enabled", where="bf16.enabled", allowed="one of them")
    comm = data.get("communication_data_type")
    if comm is not None:  # the gradient reduction dtype (runtime/config.py get_communication_data_type; default: the
        # model's 16-bit dtype, runtime/engine.py communication_data_type); DeepSpeed raises on any other value
        width = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0}.get(str(comm).lower())
        if width is None:
            raise InputError(f"unknown communication data type {str(comm)[:40]!r}", where="communication_data_type",
                             allowed="fp16, bf16 or fp32")
        out.training["grad_bytes_per_param"] = width
    elif not any(k in data for k in ("bf16", "fp16", "amp")):
        # no mixed precision: DeepSpeed trains and reduces in fp32 (communication_data_type defaults to the model's
        # dtype, runtime/engine.py); the bucket's elements are 4 B (_grad_bytes)
        out.default("training", "grad_bytes_per_param", 4.0, _DS_FP32_REDUCE)
    zero = data.get("zero_optimization")
    if isinstance(zero, dict):
        if zero.get("stage") is not None:
            out.strategy["zero"] = str(_int(zero["stage"], "zero_optimization.stage"))
            out.fields["zero"] = "zero_optimization.stage"
        if zero.get("reduce_bucket_size") is not None and not _auto(zero["reduce_bucket_size"]):
            elements = zero["reduce_bucket_size"]
            if isinstance(elements, bool) or not isinstance(elements, (int, float)) or not 0 < elements <= 1e13:
                # round 18: 1e30 was "expected a positive number, got '1e+30'"; a string "5e8" the same
                what = (f"{elements:g} elements is outside 1 .. 1e13" if isinstance(elements, (int, float))
                        and not isinstance(elements, bool) and elements > 0 else
                        f"expected a positive JSON number, got {str(elements)[:40]!r}")
                raise InputError(what, where="zero_optimization.reduce_bucket_size",
                                 allowed="elements, a JSON number from 1 to 1e13, e.g. 5e8")
            # DeepSpeed counts elements; the bucket is communicated in the gradient dtype
            out.strategy["bucket_size"] = _bucket_bytes(elements, _grad_bytes(out),
                                                        "zero_optimization.reduce_bucket_size")
            out.fields["bucket_size"] = "zero_optimization.reduce_bucket_size"
        if zero.get("reduce_scatter") is not None and not _auto(zero["reduce_scatter"]) and not _bool(
                zero["reduce_scatter"], "zero_optimization.reduce_scatter"):
            out.unused.append("zero_optimization.reduce_scatter false (ZeRO-1/2 then all-reduce the gradients before "
                              "the all-gather, stage_1_and_2.py average_tensor: priced as the reduce-scatter)")
        if zero.get("overlap_comm") is not None:
            out.strategy["overlap"] = _bool(zero["overlap_comm"], "zero_optimization.overlap_comm")
            out.fields["overlap"] = "zero_optimization.overlap_comm"
        for dev in ("offload_optimizer", "offload_param"):
            sec = zero.get(dev)
            if sec is not None and not isinstance(sec, dict):  # [1] was dropped without a word
                raise InputError(f"expected a mapping, got {str(sec)[:40]!r}", where=f"zero_optimization.{dev}",
                                 allowed='{"device": "cpu" | "nvme" | "none", ...}, or leave it out')
            device = sec.get("device") if isinstance(sec, dict) else None
            if device is not None and device not in ("none", "cpu", "nvme"):
                # fuzz33: "tape", "" or 5 were said "CPU/NVMe offload is not modelled" (or, "", taken as none), where
                # DeepSpeed's config refuses them (deepspeedai/DeepSpeed@1978617c deepspeed/runtime/zero/
                # offload_config.py OffloadDeviceEnum: none, cpu, nvme)
                raise InputError(f"unknown offload device {str(device)[:40]!r}",
                                 where=f"zero_optimization.{dev}.device",
                                 allowed='"cpu", "nvme" or "none" (DeepSpeed\'s OffloadDeviceEnum), or leave it out')
            if isinstance(sec, dict):
                _offload_keys(sec, dev, out)
            ratio = sec.get("ratio") if isinstance(sec, dict) and dev == "offload_optimizer" else None
            if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, (int, float))
                                      or not 0 <= ratio <= 1):
                # fuzz36: 2, 1e999 (inf) or "0.3" were priced as the whole optimizer offloaded, without a word, where
                # DeepSpeed's config refuses what is outside [0, 1] (deepspeedai/DeepSpeed@edaa7221 deepspeed/runtime/
                # zero/offload_config.py L99: ratio: float = Field(1.0, ge=0.0, le=1.0)) and reads "0.3" as 0.3, a
                # partial offload
                shown = repr(ratio)[:40] if isinstance(ratio, str) else str(ratio)[:40]
                raise InputError(f"{shown} is not a JSON number from 0 to 1",
                                 where="zero_optimization.offload_optimizer.ratio",
                                 allowed="the fraction of the optimizer states offloaded, a JSON number from 0 to 1 "
                                         "(DeepSpeed's DeepSpeedZeroOffloadOptimizerConfig.ratio; 1, the default, "
                                         "offloads them all), or leave it out")
        _offload_states(zero, out)
        for k in zero:
            if k not in _ZERO_USED and k not in ("offload_optimizer", "offload_param", "cpu_offload",
                                                 "cpu_offload_param"):
                out.unused.append(f"zero_optimization.{k}")
    elif zero is not None:
        raise InputError("expected a mapping", where="zero_optimization", allowed='{"stage": 0..3, ...}')
    for key in ("tensor_parallel", "optimizer", "activation_checkpointing", "scheduler"):
        if data.get(key) is not None and not isinstance(data[key], dict):  # DeepSpeed reads each as a mapping
            raise InputError(f"expected a mapping, got {str(data[key])[:40]!r}", where=key,
                             allowed=f'"{key}": {{...}} (a JSON object), or leave it out')
    ac = data.get("activation_checkpointing")
    if isinstance(ac, dict) and ac:
        out.unused.append("activation_checkpointing (which layers recompute is chosen in the model code; "
                          "give --recompute full or selective)")
    tp = data.get("tensor_parallel")
    autotp = 0
    if isinstance(tp, dict) and tp.get("autotp_size") is not None:
        # DeepSpeed's TPTrainingConfig.autotp_size: int = 0, "When set to 0, indicates that it is disabled"; the engine
        # shards the model only at > 1 (deepspeedai/DeepSpeed@edaa7221 deepspeed/runtime/tensor_parallel/config.py
        # L45-49, runtime/engine.py L332; the same since f04649d27 introduced it). Round 17: 0 was refused as
        # "expected at least 1" and 1 priced as the eager layer of an AutoTP run that DeepSpeed does not shard
        autotp = _int(tp["autotp_size"], "tensor_parallel.autotp_size")
    if autotp >= 1:
        out.strategy["tp"] = autotp
        out.fields["tp"] = "tensor_parallel.autotp_size"
    if isinstance(tp, dict):
        for k in tp:  # round 17: every other key was dropped without a word (DeepSpeed's TPTrainingConfig forbids
            # unknown ones); tp_overlap_comm overlaps AutoTP's all-reduces, which is not priced
            if k == "tp_overlap_comm" and tp[k] is not None and _bool(tp[k], "tensor_parallel.tp_overlap_comm") \
                    and autotp > 1:
                out.unused.append("tensor_parallel.tp_overlap_comm (AutoTP's all-reduce overlapped with compute is "
                                  "not modelled: each row-parallel all-reduce is priced as exposed)")
            elif k not in ("autotp_size", "tp_overlap_comm"):
                out.unused.append(f"tensor_parallel.{str(k)[:40]}")
    if autotp > 1:
        # AutoTP shards a Hugging Face model's nn.Linear layers in place (deepspeed/module_inject/auto_tp.py): the
        # layer's other ops stay PyTorch eager modules and each row-parallel output is all-reduced (no sequence
        # parallelism: deepspeedai/DeepSpeed@edaa722126 deepspeed/module_inject/layers.py LinearAllreduce.forward,
        # RowParallel.apply -> dist.all_reduce, lines 752-776 and 170-182). Priced as the eager layer; under the
        # default megatron_te an MoE model at tp > 1 was priced with Megatron-Core's sequence parallelism, which
        # AutoTP does not run
        out.strategy["layer_impl"] = "eager"
        out.fields["layer_impl"] = "tensor_parallel.autotp_size"
        # round 17: and no sequence parallelism, pinned, so that plan does not rank SP plans AutoTP cannot run (plan
        # on a config with autotp_size 2 ranked tp 2 with SP second); its TP all-reduces each row-parallel output
        out.strategy["sequence_parallel"] = False
        out.fields["sequence_parallel"] = "tensor_parallel.autotp_size"
    opt = data.get("optimizer")
    if isinstance(opt, dict) and str(opt.get("type", "adamw")).lower() not in ("adam", "adamw", "fusedadam"):
        out.unused.append(f"optimizer.type {str(opt.get('type'))[:40]} (optimizer state is modelled as Adam's 12 bytes "
                          "per parameter; set training.optimizer_bytes_per_param)")
        if out.strategy.pop("offload_states", None) is not None:  # review35c: a Lion config was priced as CPU-Adam
            # DeepSpeed steps it with DeepSpeedCPULion / DeepSpeedCPUAdagrad (deepspeed/runtime/engine.py
            # _configure_basic_optimizer at edaa7221); the CPU step here is a DeepSpeedCPUAdam measurement (predict
            # refuses offload_states beside training optimizer other than adam: job._check_state_offload)
            out.unused.append(f"{out.fields.pop('offload_states')} cpu (the host optimizer step is priced from a "
                              f"CPU-Adam measurement; optimizer.type {str(opt.get('type'))[:40]} has none)")
    for k in data:
        if k not in _DS_HARMLESS:
            out.unused.append(k)
    if data and not set(map(str, data)) & _DS_HARMLESS:  # fuzz29: {"stratgy": {"tp": 2}} priced the defaults, exit 0
        raise InputError("not a strategy file: none of its keys is a DeepSpeed config's or a strategy setting "
                         f"({first_of([str(k)[:60] for k in out.unused], 6)})",
                         allowed="a DeepSpeed config (train_batch_size, zero_optimization, bf16, ...) or a scalemodel "
                                 'strategy\'s fields as a JSON object (e.g. {"tp": 2, "pp": 4})')
    if out.gradient_accumulation is not None and "global_batch" in out.training and "micro_batch" in out.training:
        # DeepSpeed asserts train_batch_size == micro x steps x data-parallel size (runtime/config.py
        # _batch_assertion): one that micro x steps does not divide runs at no GPU count
        tbs, per_step = int(out.training["global_batch"]), int(out.training["micro_batch"]) * out.gradient_accumulation
        if tbs % per_step:
            raise InputError(f"{tbs} is not train_micro_batch_size_per_gpu {out.training['micro_batch']} x "
                             f"gradient_accumulation_steps {out.gradient_accumulation} x a data-parallel size",
                             where="train_batch_size", allowed="train_batch_size = train_micro_batch_size_per_gpu x "
                             "gradient_accumulation_steps x dp (DeepSpeed's batch assertion), or one of the three left "
                             "out")
        out.gradient_accumulation = None  # train_batch_size already fixes the global batch
