"""What a ``--strategy FILE`` reader returns (:class:`StrategyFile`) and the value checks its readers share.

The readers fill a StrategyFile: the scalemodel YAML one and the entry point (:mod:`scalemodel.specs.frameworks`),
DeepSpeed's JSON (:mod:`scalemodel.specs.deepspeed_config`), Megatron-LM's flags
(:mod:`scalemodel.specs.megatron_args`) and torchtitan's TOML (:mod:`scalemodel.specs.torchtitan_config`). Here:
counts and booleans checked as the frameworks read them, DeepSpeed's ``auto``, and a bucket given in gradient
elements turned into bytes (DeepSpeed's reduce_bucket_size, Megatron-LM's --ddp-bucket-size).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scalemodel.choices import Precision
from scalemodel.errors import InputError
from scalemodel.specs.training import MIN_BUCKET_BYTES, ZERO_NOT_READ, TrainingSpec

#: The keys of plan's and predict's JSON strategy (engine.job StrategyGrid.describe) whose strategy-file field has
#: another name: plan's JSON gives both (engine.planner._readable), predict's only the key; a strategy file reads the
#: key as that field where the file does not give the field, as an echo where it gives the field the same value
#: (specs.frameworks._scalemodel; README: written as a strategy YAML, a plan's strategy prices the same step)
JSON_FIELD_TWINS = {"bucket_bytes": "bucket_size", "dispatch_overhead_s": "dispatch_overhead"}




@dataclass
class StrategyFile:
    """What a strategy file sets: TrainingSpec and StrategySpec fields, and what it could not use."""

    path: str
    format: str  # scalemodel | deepspeed | megatron | torchtitan
    training: dict[str, Any] = field(default_factory=dict)
    strategy: dict[str, Any] = field(default_factory=dict)
    gradient_accumulation: int | None = None  # DeepSpeed steps: global batch = micro x steps x dp
    unused: list[str] = field(default_factory=list)
    fields: dict[str, str] = field(default_factory=dict)  # the file's own name of a strategy key, where not strategy.K
    #: the file's own name of a training key, where not training.K: an fp4 run refused on a Hopper cluster was named
    #: "training.precision" to a user whose launch script said --fp4-format e2m1
    training_fields: dict[str, str] = field(default_factory=dict)
    #: the fields this reader filled with the framework's own default, the file not writing them: "strategy.K" or
    #: "training.K" -> the framework source that sets that default. Set only through :meth:`default`; the engine
    #: reads them from errors.Origin.defaults (commands.common.strategy_origin), not from the fields' names
    defaults: dict[str, str] = field(default_factory=dict)

    def default(self, section: str, key: str, value: Any, source: str) -> None:
        """Set ``section``.``key`` (strategy or training) to ``value``, the framework's default for a setting the
        file did not write, ``source`` the framework code at a commit that sets it."""
        getattr(self, section)[key] = value
        self.defaults[f"{section}.{key}"] = source

    def is_default(self, section: str, key: str) -> bool:
        """True where ``section``.``key`` holds a framework default this reader filled in (:meth:`default`)."""
        return f"{section}.{key}" in self.defaults

    def field_name(self, key: str) -> str:
        """The file's field that set strategy ``key`` (for an error naming what the user wrote)."""
        return self.fields.get(key, f"strategy.{key}")

    def zero_not_read(self) -> list[str]:
        """The file's settings that decide the ZeRO stage and are not read (:data:`ZERO_NOT_READ`), as
        :attr:`unused` names them: a refusal of a field at zero 0 "the default" names them (ux36: a launch with
        --use-torch-fsdp2 and --fp8-param-gather was refused "got zero 0, the default", the FSDP flag unsaid)."""
        return [u for u in self.unused if ZERO_NOT_READ in u]

    def echo(self) -> dict[str, Any]:
        """The JSON echo: where the values came from and what they were."""
        return {"path": self.path, "format": self.format, "training": self.training, "strategy": self.strategy,
                "gradient_accumulation": self.gradient_accumulation, "unused": self.unused}

    def global_batch_at(self, dp: int) -> int | None:
        """DeepSpeed's train_batch_size = micro x gradient_accumulation_steps x dp, when only the last two are given."""
        if self.gradient_accumulation is None or "global_batch" in self.training:
            return None
        return int(self.training.get("micro_batch", 1)) * self.gradient_accumulation * dp


def _int(value: Any, where: str, least: int = 0) -> int:
    """A count from a framework file, ``least`` to 1e8. A degree or batch of 0 (TOML ``-0`` too) was refused by the
    spec as ``strategy.tp`` / ``training.micro_batch``, a field the file does not have: ``least=1`` names its own."""
    allowed = f"an integer from {least} to 1e8"
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < least:
        raise InputError(f"expected at least {least}, got {value}", where=where, allowed=allowed)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10**8:
        raise InputError(f"expected a count, got {str(value)[:40]!r}", where=where, allowed=allowed)
    return value


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"expected true or false, got {str(value)[:40]!r}", where=where,
                         allowed="true or false (a JSON boolean)")
    return value


def _auto(value: Any) -> bool:
    return isinstance(value, str) and value.strip().lower() == "auto"


def _grad_bytes(out: StrategyFile) -> float:
    """The gradient element a framework's bucket of N elements is priced in: the bytes the engine divides the bucket
    by to count its elements again (engine.job: training.grad_bytes_per_param, else the precision's gradient bytes,
    the precision defaulting to TrainingSpec's). A file that set no precision was converted at 4 B and read back at
    bf16's 2 B: DeepSpeed's own default reduce_bucket_size 5e8 was priced as 1e9 elements, and Megatron's
    --ddp-bucket-size read before --fp8-format the same."""
    given = out.training.get("grad_bytes_per_param")
    if given:
        return float(given)
    return Precision.parse(out.training.get("precision") or TrainingSpec().precision).gradient_bytes


def _bucket_bytes(elements: float, grad_bytes: float, where: str) -> float:
    """A framework's bucket of ``elements`` gradients in bytes, refused below the smallest bucket priced
    (:data:`~scalemodel.specs.training.MIN_BUCKET_BYTES`) in the framework's own unit, elements."""
    size = float(elements) * grad_bytes
    if size < MIN_BUCKET_BYTES:
        least = int(-(-MIN_BUCKET_BYTES // grad_bytes))
        raise InputError(f"{elements:g} elements of {grad_bytes:g} B is {size:g} B, below the smallest bucket priced, "
                         "1 KiB", where=where, allowed=f"at least {least} elements ({grad_bytes:g}-byte gradients)")
    return size
