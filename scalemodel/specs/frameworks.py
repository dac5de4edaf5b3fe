"""``--strategy FILE``: the parallel strategy and training settings of a job from the file that launches it.

Four formats, told apart by content (then by name):

* a scalemodel strategy YAML: ``strategy:`` and/or ``training:`` mappings (or their fields at the top);
* a DeepSpeed config JSON (https://www.deepspeed.ai/docs/config-json/): ``train_batch_size``,
  ``train_micro_batch_size_per_gpu``, ``gradient_accumulation_steps``, ``bf16``/``fp16``,
  ``zero_optimization.stage``, ``reduce_bucket_size`` (elements), ``overlap_comm``, CPU offload
  (``offload_optimizer`` / ``offload_param``: strategy offload_states);
* a Megatron-LM argument list (the flags of a launch script, ``megatron/training/arguments.py``):
  ``--tensor-model-parallel-size``, ``--pipeline-model-parallel-size``, ``--context-parallel-size``,
  ``--expert-model-parallel-size``, ``--micro-batch-size``, ``--global-batch-size``, ``--seq-length``,
  ``--sequence-parallel``, ``--recompute-granularity``/``--recompute-activations``/``--recompute-modules``,
  ``--num-layers-per-virtual-pipeline-stage``/``--virtual-pipeline-model-parallel-size``,
  ``--use-distributed-optimizer`` (ZeRO-1), ``--decoder-first/last-pipeline-num-layers``,
  ``--use-tp-pp-dp-mapping`` (rank order tp-cp-pp-dp), precision;
* a torchtitan job TOML (``torchtitan/config/job_config.py``): ``[training]``, ``[parallelism]``,
  ``[activation_checkpoint]``. TOML is read with :mod:`tomllib` (Python 3.11+) or, on 3.10, the
  ``tomli`` package (a dependency there, see pyproject.toml).

Every setting that is read is returned as StrategySpec / TrainingSpec fields; every setting that
could matter but is not modelled (NVMe offload, ZeRO-3 prefetch knobs, partial recompute, an
unresolved ``auto`` or ``$VAR``) is named in :attr:`StrategyFile.unused` and warned about. The
file is read through :mod:`scalemodel.specs.files` (regular files only, bounded in size).

Here: the scalemodel YAML reader and :func:`read_strategy_file`, which tells the formats apart and validates what a
reader returns. Each other format has its own reader module: :mod:`scalemodel.specs.deepspeed_config`,
:mod:`scalemodel.specs.megatron_args` (on :mod:`scalemodel.specs.shell_words`, a launch script read as bash reads it,
and :mod:`scalemodel.specs.stage_layers`, the pipeline layouts), :mod:`scalemodel.specs.torchtitan_config`; what
they all fill is a :class:`~scalemodel.specs.strategy_file.StrategyFile`. A nanotron config has no reader: it is
refused with the way to give its settings (``_scalemodel``).
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any

from scalemodel.errors import InputError, first_of
from scalemodel.specs import files, notices
from scalemodel.specs.deepspeed_config import _DS_HARMLESS, _deepspeed
from scalemodel.specs.loader import load_json, validate
from scalemodel.specs.megatron_args import _megatron
from scalemodel.specs.strategy_file import JSON_FIELD_TWINS, StrategyFile
from scalemodel.specs.torchtitan_config import _toml, _torchtitan
from scalemodel.specs.training import StrategySpec, TrainingSpec

#: The fields a scalemodel strategy YAML may also give at its top level: every TrainingSpec and StrategySpec field.
#: Written out by hand, the lists had fallen behind the specs (fp8_attention, fp8_recipe, optimizer,
#: sequence_lengths, shard_group, ep_dispatch_sms, moe_layer_host_s, recompute_modules): such a field at the top level
#: was dropped as "not used" and the run priced without it.
TRAINING_FIELDS = tuple(TrainingSpec.model_fields)
STRATEGY_FIELDS = tuple(StrategySpec.model_fields)


# --- scalemodel YAML ----------------------------------------------------------------------------------

def _scalemodel(data: dict[str, Any], out: StrategyFile) -> None:
    kind = data.get("kind")
    if kind is not None and kind != "strategy":  # a cluster (or any other spec) given as --strategy: its kind and name
        # were skipped and nothing else read, without a word
        raise InputError(f"kind {str(kind)[:40]!r} is not a strategy file", where="kind",
                         allowed="a strategy YAML (kind: strategy, or no kind) with strategy: and training: mappings "
                                 "or their fields at the top")
    par = data.get("parallelism")
    if isinstance(par, dict) and {"dp", "pp", "tp"} & set(par) and "strategy" not in data:
        # round 18: a nanotron config (huggingface/nanotron src/nanotron/config/parallelism_config.py ParallelismArgs:
        # dp / pp / tp; optimizer.zero_stage, tokens) was read as a strategy YAML: its optimizer section refused as
        # "unknown optimizer {'zero_stage': 1}", or, without one, every key "not used" and the defaults priced
        raise InputError("a nanotron config (parallelism: dp / pp / tp) is not one of the strategy formats read here",
                         where="parallelism", allowed="a scalemodel strategy YAML, a DeepSpeed JSON, Megatron-LM flags "
                         "or a torchtitan TOML; for a nanotron run: --tp/--pp/--zero with --set "
                         "strategy.nanotron_trainer=true")
    for key, value in data.items():
        if key in ("strategy", "training") and not isinstance(value, (dict, type(None))):  # was warned as unused
            raise InputError(f"expected a mapping, got {str(value)[:40]!r}", where=key,
                             allowed=f"{key}: {{field: value, ...}}")
    for key in data:  # a field at the top and in its section: the later one in the file won without a word
        section = "strategy" if key in STRATEGY_FIELDS else "training" if key in TRAINING_FIELDS else None
        if section is not None and key in (data.get(section) or {}):
            raise InputError(f"given at the top level and under {section}:", where=key,
                             allowed=f"one of them: {key}: ... or {section}: {{{key}: ...}}")
    for key, value in data.items():
        if key in ("strategy", "training"):
            getattr(out, key).update(value or {})  # validated with the specs, errors naming strategy.<field>
        elif key in STRATEGY_FIELDS:
            out.strategy[key] = value
            out.fields[key] = key
        elif key in TRAINING_FIELDS:
            out.training[key] = value
        elif key in JSON_FIELD_TWINS and JSON_FIELD_TWINS[key] not in data and JSON_FIELD_TWINS[key] not in (
                data.get("strategy") or {}):
            # predict's, scale's and check's JSON strategy give only this name (planner._readable adds the twin to
            # plan's): it was 'not used' and the step priced at the default bucket (3.300 s for predict's 3.276 s).
            # Under static assignment the JSON's dispatch_overhead_s echoes the unpriced default (plan's rows write 0
            # there): read, it was warned 'not priced'
            if key != "dispatch_overhead_s" or str(data.get("assignment", "static")) == "dynamic":
                out.strategy[JSON_FIELD_TWINS[key]] = value
                out.fields[JSON_FIELD_TWINS[key]] = key
        elif key in JSON_FIELD_TWINS and (data.get(JSON_FIELD_TWINS[key]) == value or (
                key == "dispatch_overhead_s" and str(data.get("assignment", "static")) != "dynamic")):
            # (plan's JSON under static assignment: dispatch_overhead null beside the unpriced default, consist38)
            continue  # plan's JSON strategy names a field twice (README: written as a strategy YAML, it prices the
            # same step): bucket_bytes beside bucket_size, dispatch_overhead_s beside dispatch_overhead; a value that
            # differs from its twin's is reported unused below (the twin, the strategy file's field, is priced)
        elif key == "gpus":
            out.unused.append("gpus (the command's --gpus is the GPU count)")
        elif key not in ("kind", "name", "description", "sources"):
            out.unused.append(str(key)[:60])  # a YAML key may be null, a number or a boolean (join needs text)
    if out.unused and not out.strategy and not out.training and not {"strategy", "training"} & set(data):
        # fuzz29: a mapping none of whose keys is read (`stratgy: {tp: 8}`, a stray YAML file) warned "settings not
        # used" and priced the default strategy with exit 0, where an empty file is "not a strategy file"
        raise InputError("not a strategy file: none of its keys is a strategy or training setting "
                         f"({first_of(out.unused, 6)})",
                         allowed="strategy: and training: mappings, or their fields at the top (tp, pp, zero, "
                                 "micro_batch, ...; `scalemodel schema scenario` lists them)")


# --- entry point --------------------------------------------------------------------------------------------

MEGATRON_MARK = re.compile(r"--(tensor|pipeline)-model-parallel-size|--micro-batch-size|--global-batch-size")


def _validate_as_written(model: Any, data: dict[str, Any], path: Path, root: str, names: dict[str, str]) -> None:
    """Validate a file's TrainingSpec or StrategySpec fields; a refusal names the file's own field where the file
    spells it otherwise: ``--pipeline-model-parallel-size 0`` was refused as "strategy.pp: Input should be greater
    than 0", a name the launch script does not have."""
    try:
        validate(model, dict(data), path=path, prefix=[root])
    except InputError as exc:
        head = f"{path}: {root}."
        key = exc.where[len(head):] if exc.where.startswith(head) else ""
        own = names.get(key)
        if own is None or own == key:  # a scalemodel file's top-level field keeps the spec's name
            raise
        raise InputError(exc.what, where=f"{path}: {own}", allowed=exc.allowed, needs_zero=exc.needs_zero,
                         needs_recompute=exc.needs_recompute) from None


def _deepspeed_keys_only(text: str) -> bool:
    """Whether a .yaml / .yml file opening with '{' is a DeepSpeed config: strict JSON (DeepSpeedConfig.__init__,
    deepspeed/runtime/config.py, reads any existing path with ``hjson.load(open(config, "r"), ...)`` whatever its
    suffix, so a ds_config.yaml in JSON is one DeepSpeed runs) whose top-level keys
    include one DeepSpeed reads (:data:`_DS_HARMLESS`) and none of a scalemodel strategy file's (strategy:,
    training:, kind, their fields; ``optimizer`` is both). Anything else is read as a scalemodel strategy in YAML
    flow style."""
    try:
        data = load_json(text, "")
    except InputError:  # not strict JSON (YAML flow style), or JSON the YAML reader refuses with its own words
        return False
    return _keys_read_by(data) == "deepspeed"


def _keys_read_by(data: Any) -> str | None:
    """Whose keys a JSON object's top level holds: "deepspeed" (one DeepSpeed reads, :data:`_DS_HARMLESS`, and none of
    a scalemodel strategy file's: strategy:, training:, kind, their fields; ``optimizer`` is both), "scalemodel" (the
    other way round), else None (both, neither, or not an object)."""
    if not isinstance(data, dict):
        return None
    ours = set(STRATEGY_FIELDS) | set(TRAINING_FIELDS) | {"strategy", "training", "kind"}
    keys = set(map(str, data))
    deepspeed, scalemodel = bool(keys & (_DS_HARMLESS - ours)), bool(keys & (ours - _DS_HARMLESS))
    return "deepspeed" if deepspeed and not scalemodel else "scalemodel" if scalemodel and not deepspeed else None


def _other_formats_key(key: str, read_as: str) -> str:
    """An unused key of a file read as a DeepSpeed config (``read_as``) that is a scalemodel strategy file's, or of one
    read as a scalemodel strategy that is a DeepSpeed config's, said to be so, with why it was not read and how to give
    it (review22g: a file of both formats' keys warned "deepspeed settings not used: tp" and priced tp 1, or
    "scalemodel settings not used: train_batch_size", not saying what the key was taken for)."""
    if read_as == "scalemodel":
        if key not in _DS_HARMLESS or key in STRATEGY_FIELDS or key in TRAINING_FIELDS:
            return key
        return (f"{key} (a DeepSpeed config's key: a file with scalemodel strategy keys is read as a scalemodel "
                "strategy; give the strategy file's field instead, e.g. global_batch, micro_batch, zero)")
    why = "a file with DeepSpeed keys is read as a DeepSpeed config"
    if key in ("strategy", "training"):
        return f"{key} (a scalemodel strategy file's section: {why}; give its fields as --set {key}.FIELD=...)"
    section = "strategy" if key in STRATEGY_FIELDS else "training" if key in TRAINING_FIELDS else None
    if section is None or key in _DS_HARMLESS:
        return key
    return f"{key} (a scalemodel strategy file's field: {why}; give it as --set {section}.{key}=...)"


def read_strategy_file(ref: str | Path) -> StrategyFile:
    """Read a strategy file of any of the four formats (module docstring); warn about what is not used."""
    path = Path(files.expand_user(ref))
    if isinstance(ref, str) and ref.endswith("/"):
        files.refuse_trailing_slash(f"{path}/", "strategy file")
    text = files.read_text(path, limit=files.MAX_SPEC_BYTES, what="strategy file")
    where = str(path)
    stripped = text.lstrip()
    # a .json file is JSON whatever it starts with ("[[[..." was read as YAML and refused as "malformed YAML"); a
    # .yaml / .yml file is a scalemodel strategy whatever it starts with unless it is a DeepSpeed config in JSON
    # (_deepspeed_keys_only: DeepSpeed hjson-loads its config whatever the suffix): a strategy in YAML flow style
    # ({strategy: {tp: 2}}) was refused as malformed JSON, one in JSON syntax read as a DeepSpeed config whose every
    # key was "not used" (tp stayed 1)
    suffix = path.suffix.lower()
    if (stripped.startswith("{") and (suffix not in (".yaml", ".yml") or _deepspeed_keys_only(text))) \
            or suffix == ".json":
        data = load_json(text, where)
        # round 22: a scalemodel strategy written as JSON (tp, pp, schedule: the fields of a strategy YAML, of which
        # JSON is a subset, and no DeepSpeed key) was read as a DeepSpeed config whose every key was "not used", and
        # the default strategy priced (tp 1, pp 1) with exit 0
        out = StrategyFile(where, "scalemodel" if _keys_read_by(data) == "scalemodel" else "deepspeed")
        if not isinstance(data, dict):
            raise InputError("expected a JSON object", where=where, allowed="a DeepSpeed config, or a scalemodel "
                             'strategy\'s fields as a JSON object (e.g. {"tp": 2, "pp": 4})')
        fill = partial(_scalemodel if out.format == "scalemodel" else _deepspeed, data)
    # [ \t]*, not \s*: with re.M, \s* crossed newlines from every line start (a file of blank lines was quadratic)
    elif path.suffix == ".toml" or (re.search(r"^[ \t]*\[(training|parallelism|job|model)\]", text, re.M)
                                    and not MEGATRON_MARK.search(text)):
        out = StrategyFile(where, "torchtitan")
        fill = partial(_torchtitan, _toml(text, where))  # its errors name the file once
    elif MEGATRON_MARK.search(text) or path.suffix in (".sh", ".args", ".txt"):
        out = StrategyFile(where, "megatron")
        fill = partial(_megatron, text)
    else:
        import scalemodel.specs.yamlread as yamlread  # strategy YAML files only (PyYAML, ~10 ms)
        data, _ = yamlread.load(text, where)
        if not isinstance(data, dict):
            raise InputError("not a strategy file", where=where,
                             allowed="a scalemodel strategy YAML, a DeepSpeed JSON, Megatron-LM flags or a torchtitan "
                                     "TOML")
        out = StrategyFile(where, "scalemodel")
        fill = partial(_scalemodel, data)
    try:  # the format's reader fills ``out``; its errors name the file
        fill(out)
    except InputError as exc:
        raise exc.at(where) from None
    if out.format in ("deepspeed", "scalemodel"):  # a key of the other format said to be one, with why
        out.unused = [_other_formats_key(u, out.format) for u in out.unused]
    _validate_as_written(TrainingSpec, out.training, path, "training", out.training_fields)  # errors name the file
    try:
        _validate_as_written(StrategySpec, out.strategy, path, "strategy", out.fields)
    except InputError as exc:
        # a rule at zero 0 where the file has a ZeRO setting that is not read (--use-torch-fsdp2): the command line's
        # --zero decides it, so the command's own validation of the file with its options refuses it, naming the
        # setting (commands.common.validate_written); here --zero fsdp, the warning's advice, was refused too (ux36)
        # fuzz37: the same where a scalemodel strategy file does not write zero (fp8_param_gather: true and no zero):
        # "give zero too" was the advice, and --zero 1 / --set strategy.zero=1 beside the file was refused by this
        # read of the file alone. A framework's file gives its stage by what it writes (no Megatron-LM
        # --use-distributed-optimizer is Megatron-Core DDP at zero 0; its reader refuses what Megatron refuses)
        unset = out.format == "scalemodel" and "zero" not in out.strategy
        # interidle39: likewise a recompute sub-field (recompute_layers, _method, _modules) refused for the recompute
        # mode of a scalemodel file that does not write recompute (InputError.needs_recompute): the command's own
        # validation judges it with its options (--set strategy.recompute; predict refuses it there in the same
        # words), and plan validates the pin at the mode it needs and searches that mode, as for --set strategy.X.
        # It was refused here, before plan's _build_specs could read the marker
        recompute_unset = out.format == "scalemodel" and "recompute" not in out.strategy and bool(exc.needs_recompute)
        if not (((out.zero_not_read() or unset) and exc.needs_zero) or recompute_unset):
            raise
    # a 100,000-character flag or key was echoed whole, in the warning and twice in the JSON (unused, warnings)
    out.unused = [u if len(u) <= 300 else f"{u[:240]}... ({len(u):,} characters)" for u in out.unused]
    if out.unused:
        shown = "; ".join(out.unused[:12]) + (f"; and {len(out.unused) - 12} more" if len(out.unused) > 12 else "")
        notices.warn(f"{where}: {out.format} settings not used: {shown}")
    return out
