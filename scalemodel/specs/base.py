"""Common base for every spec (a :class:`msgspec.Struct`): unknown keys are errors, values are always validated.

Numbers are checked alike in every spec: a boolean is not a number, NaN and infinities are refused,
and no integer field exceeds :data:`MAX_SPEC_INT` (no count of layers, widths, heads, vocabulary,
sequence length, batch or GPUs in a spec comes near a billion; beyond it the value is a typo, and
products of such values overflow int64 in the cost models). GPU counts have the tighter :data:`MAX_GPUS`.

Validation is two passes. :func:`convert` first walks the raw data along the spec's field types
(:func:`_prepare`): it refuses unknown and missing keys, booleans, non-finite and oversized numbers and
values outside a ``Literal``, and runs the :class:`Before` hooks (units, labels, built-in names) that
turn text into values; :func:`msgspec.convert` then checks the types and the ``msgspec.Meta``
constraints, and each spec's :meth:`Spec._check` (its cross-field rules) runs in ``__post_init__``.
A spec built directly in Python (``StrategySpec(tp=8)``) goes through the same two passes, so it is
normalised and refused exactly as the same values in a YAML file; so is an assignment to a field (the
whole spec is validated again, as pydantic's ``validate_assignment`` did), and a changed copy,
``spec.model_copy(update={...})``; these Python routes refuse with the loader's one-line :class:`InputError`
(:func:`_python_checked`), as the Python API does, not with the :class:`SpecError` the loader words.

The modules defining specs do not use ``from __future__ import annotations``: their field types are
evaluated once at import, and msgspec reads them without compiling strings on first use. This module
neither: :class:`Spec`'s and :class:`Sourced`'s own annotations are in the MRO of every spec, and as
strings they were compiled again for each spec class, twice (msgspec's type information and
:func:`_plan`): ~110 ``typing.ForwardRef`` compiles on a ``predict``.

The pydantic-style methods the engine, reports and commands use (``model_dump``, ``model_copy``,
``model_validate``, ``model_fields``) keep their names and meaning.
"""


import contextvars
import math
import re
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Literal

import msgspec

from scalemodel.errors import InputError
from scalemodel.specs.plain import plain

MAX_SPEC_INT = 10**9
#: The most GPUs any spec or command accepts (the CLI's limit as well): beyond any machine.
MAX_GPUS = 10**8

_NO_VALUE: Any = object()


class SpecError(ValueError):
    """A value a spec refuses: ``loc`` is its path (keys and list indices), ``kind`` one of
    ``unknown`` (a key the spec has not), ``missing`` (a required key), ``type`` (a wrong type or a
    value outside a constraint: ``value`` holds it) or ``value`` (a rule's own message)."""

    def __init__(self, what: str, loc: Sequence[Any] = (), *, kind: str = "value", allowed: str = "",
                 value: Any = _NO_VALUE, also: Sequence[Any] = (), needs_zero: bool = False,
                 needs_recompute: str = "") -> None:
        self.what, self.loc, self.kind, self.allowed, self.value = what, tuple(loc), kind, allowed, value
        self.needs_zero = needs_zero  # errors.InputError.needs_zero, carried to it by the loader
        self.needs_recompute = needs_recompute  # errors.InputError.needs_recompute, likewise
        self.also = tuple(also)  # the other field of a cross-field rule: its --set item is named when loc's is not
        text = f"{loc_text(self.loc)}: {what}" if self.loc else what
        super().__init__(f"{text}; {allowed}" if allowed else text)

    def located(self, outer: Sequence[Any]) -> "SpecError":
        return SpecError(self.what, (*outer, *self.loc), kind=self.kind, allowed=self.allowed, value=self.value,
                         also=(*outer, *self.also) if self.also else (), needs_zero=self.needs_zero,
                         needs_recompute=self.needs_recompute)


class KeyNotText(str):
    """A mapping key that is not text (YAML ``~:``, ``5:``, ``true:``, ``1.5:``) in a refusal's path: spelled as the
    YAML core schema writes its value (``null``, ``5``, ``true``) until the loader spells it as the file wrote it
    (:func:`scalemodel.specs.loader.validation_error`), and shown as a key: an integer key was ``[5]``, a list
    index, and a null one ``None`` (ux34). ``value``: the key as read."""

    value: Any

    def __new__(cls, value: Any, spelled: str = "") -> "KeyNotText":
        text = spelled or ("null" if value is None else str(value).lower() if isinstance(value, bool) else str(value))
        key = super().__new__(cls, text)
        key.value = value
        return key

    def refusal(self) -> str:
        """What is wrong with it, in a refusal's words."""
        v = self.value
        what = ("the null value" if v is None else "a boolean" if isinstance(v, bool) else
                "a number" if isinstance(v, int | float) else f"a {type(v).__name__}")
        return f"key {self} is {what}, not text"


def loc_text(loc: Sequence[Any]) -> str:
    """A refusal's path: keys joined by dots, list indices in brackets (``strategies[0].label``)."""
    text = ""
    for part in loc:
        if isinstance(part, int) and not isinstance(part, bool):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + str(part)
    return text or "(top level)"


def _as_is(v: Any) -> Any:
    return v


class Before:
    """``Annotated`` marker: ``fn`` turns the raw value into what the field's type accepts (a unit-bearing
    string into a float, a label into its canonical spelling, a built-in name into its fields; left out, the
    value as it is). ``allowed``: what the field takes, in words (its ``str``, read when a refusal is worded),
    for :func:`allowed_for`; empty: the field's type and range say it."""

    __slots__ = ("allowed", "fn")

    def __init__(self, fn: Callable[[Any], Any] = _as_is, allowed: object = "") -> None:
        self.fn, self.allowed = fn, allowed


class Discriminator:
    """``Annotated`` marker on a union of tagged specs: ``fn`` names the tag of a raw mapping (which
    may leave its ``kind`` out)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any], str]) -> None:
        self.fn = fn


#: The end of a refusal of a ZeRO-dependent switch where zero was not given. It names the field alone, as every file
#: writes it (a scenario's strategy: section, a runs file's run, a --strategy file's own name beside the location);
#: the command line's route (commands.common.validate_written) names its options after it: --zero only where the
#: command has it (fix29: "--zero or strategy.zero" was said inside scenario and runs files, and by plan). Here (not in
#: specs.training, which re-exports it) so that :func:`written_zero_refusal` reads the same words.
ZERO_UNSET_HINT = "zero is 0 unless given: give zero too"
#: What such a refusal says of zero 0 in its "(got zero '0', the default)": taken back by
#: :func:`written_zero_refusal` where the mapping wrote zero.
ZERO_DEFAULT = ", the default"


def written_zero_refusal(what: str, allowed: str, data: Any, loc: Sequence[Any]) -> tuple[str, str, bool] | None:
    """A refusal at zero 0 that some ZeRO stage lifts (errors.InputError.needs_zero) whose mapping (``data`` along
    ``loc``, the refused field's path) writes zero itself: (what, allowed, needs_zero) without the "the default" and
    :data:`ZERO_UNSET_HINT` (which the spec's _zero_refusal appends to ``allowed`` after "; "). fuzz40:
    ``--zero 0``, ``--set strategy.zero=0``, a strategy file's or a scenario's ``zero: 0`` beside fsdp_per_param were
    refused "(got zero '0', the default) ...; zero is 0 unless given: give zero too", which told the user zero was not
    given. None where the mapping does not write zero (the refusal stands as it is)."""
    node = data
    for key in loc[:-1]:
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
            node = node[key]
        else:
            return None
    if not isinstance(node, dict) or node.get("zero") is None:
        return None
    return what.replace(f"{ZERO_DEFAULT})", ")", 1), allowed.removesuffix(f"; {ZERO_UNSET_HINT}"), False


def field_error(name: str, what: str, allowed: str = "", also: str = "", needs_zero: bool = False,
                needs_recompute: bool = False) -> ValueError:
    """An error of one field, raised from a spec's :meth:`Spec._check` (reported at that field, with what is
    allowed there); ``name`` may be dotted (``hybrid.mamba.groups``) for a field of a nested spec. ``also``: the
    other field of a rule across two, whose ``--set`` item is named when it, not ``name``'s, made the conflict
    (review21i: ``--set model.hybrid.pattern`` without M was refused at the built-in file's mamba line).
    ``needs_zero``: errors.InputError.needs_zero (a refusal at zero 0 that some ZeRO stage lifts), sent as a last
    ``\x1d`` part; ``needs_recompute``: errors.InputError.needs_recompute (``name`` refused for the recompute mode it
    runs under), sent as one more."""
    return ValueError(f"\x1f{name}{chr(0x1e) + also if also else ''}\x1f{what}\x1f{allowed}"
                      + ("\x1dzero" if needs_zero else "") + ("\x1drecompute" if needs_recompute else ""))


# --- the first pass: raw data along the field types -----------------------------------------------

class _Plan(typing.NamedTuple):
    hints: dict[str, Any]
    required: frozenset[str]
    defaults: dict[str, Any]
    tag_field: str | None


_PLANS: dict[type, _Plan] = {}


def _plan(cls: type) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        infos = msgspec.structs.fields(cls)  # type: ignore[arg-type]
        required = frozenset(f.name for f in infos if f.required)
        defaults = {f.name: f.default for f in infos if f.default is not msgspec.NODEFAULT}
        defaults.update({f.name: f.default_factory() for f in infos if f.default_factory is not msgspec.NODEFAULT})
        config = cls.__struct_config__  # type: ignore[attr-defined]
        plan = _PLANS[cls] = _Plan({f.name: f.type for f in infos}, required, defaults, config.tag_field)
    return plan


def built(cls: type) -> bool:
    """Whether ``cls`` has validated anything yet (its field plan is built on first use, not at import)."""
    return cls in _PLANS


def _is_spec(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, msgspec.Struct)


_TRUE = {"1", "on", "t", "true", "y", "yes"}
_FALSE = {"0", "off", "f", "false", "n", "no"}
# pattern texts here and below: re compiles each where first used (scalemodel.errors says why)
_INT_TEXT = r"^\s*[+-]?[0-9]{1,30}\s*$"
#: Digits grouped by thousands with '_' (``1_000``, ``32_768``, ``-1_000_000``, ``1_000.5``): YAML 1.1 (PyYAML, which
#: frameworks' YAML configs are written for), TOML and Python read them as the number without the '_'.
_NUMBER_TEXT = r"\s*[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*"
_THOUSANDS = r"\s*[+-]?[0-9]{1,3}(?:_[0-9]{3})+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?\s*"


def digit_grouping(text: str, noun: str) -> str | None:
    """Why ``text`` is refused as ``noun`` when it groups digits with '_' other than by thousands (Python's int() and
    float() read ``8_0`` as 80, a typo more often than a separator), else None: no '_', or digits grouped by thousands
    (``1_000``, :data:`_THOUSANDS`), which the caller reads without the '_'."""
    if "_" not in text or re.fullmatch(_THOUSANDS, text) or not re.fullmatch(_NUMBER_TEXT, text.replace("_", "")):
        return None  # no '_', thousands, or no number at all (refused as such by the caller: 'auto_x')
    return (f"{text[:40]!r} is not {noun}: '_' groups digits only by thousands, as in 1_000 (write "
            f"{text.replace('_', '')[:40]})")


def _choices(args: Sequence[Any]) -> str:
    shown = [repr(a) for a in args]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


def _past_bound(v: float, bounds: tuple[float, float] | None = None) -> str:
    """Why an integer field refuses ``v`` past :data:`MAX_SPEC_INT` in magnitude: a negative one is below the
    smallest integer (fuzz38: "-1e+308 is beyond the largest integer a spec accepts" named the wrong end). ``bounds``:
    the field's own (lo, hi) where it has them (:func:`_int_bounds`), the one named when tighter than the spec's:
    ux38b, a scenario's ``gpus: [2**70]`` was "beyond the largest integer a spec accepts (1e+09); an integer from 1 to
    1e+08", two bounds of which the second applies."""
    lo, hi = bounds if bounds is not None else (-MAX_SPEC_INT, MAX_SPEC_INT)
    if v < 0:
        return (f"is beyond the smallest integer a spec accepts ({-MAX_SPEC_INT:.0e})" if lo <= -MAX_SPEC_INT
                else f"is below the smallest integer this field accepts ({_bound(lo)})")
    return (f"is beyond the largest integer a spec accepts ({MAX_SPEC_INT:.0e})" if hi >= MAX_SPEC_INT
            else f"is beyond the largest integer this field accepts ({_bound(hi)})")


def _leaf(t: Any, v: Any, loc: tuple[Any, ...], bounds: tuple[float, float] | None = None) -> Any:
    if t is int or t is float:
        if isinstance(v, bool):
            raise SpecError(f"{v!r} is a boolean, not a number", loc)
        if isinstance(v, str):  # as pydantic did: "8" is 8 (ASCII digits only: float() reads "\u0663" as 3)
            # float() reads "8_0" as 80 (--set training.micro_batch=1_0 was 10); "1_000" (YAML 1.1's int) is 1000
            if (why := digit_grouping(v, "an integer" if t is int else "a number")) is not None:
                raise SpecError(why, loc, kind="type")
            if re.fullmatch(_THOUSANDS, v):
                v = v.replace("_", "")
            try:
                if not v.isascii():
                    raise ValueError(v)
                v = int(v) if t is int and re.match(_INT_TEXT, v) else float(v)
            except ValueError:
                noun = "an integer" if t is int else "a number"
                raise SpecError(f"Input should be a valid {noun.split()[-1]}, unable to parse string as {noun}", loc,
                                kind="type", value=v) from None
        if t is int and isinstance(v, float) and math.isfinite(v):
            if abs(v) > MAX_SPEC_INT:  # as written: int(1e308) printed 309 digits, cut before the reason (round 15)
                raise SpecError(f"{v:g} {_past_bound(v, bounds)}", loc)
            if v != int(v):
                raise SpecError("Input should be a valid integer, got a number with a fractional part", loc,
                                kind="type", value=v)
            v = int(v)
        if isinstance(v, float) and not math.isfinite(v):
            raise SpecError("Input should be a finite number", loc, kind="type", value=v)
        if isinstance(v, int) and abs(v) > MAX_SPEC_INT and t is int:
            raise SpecError(f"{v} {_past_bound(v, bounds)}", loc)
    elif t is bool:
        if isinstance(v, int) and not isinstance(v, bool) and v in (0, 1):
            return bool(v)
        if isinstance(v, str) and v.lower() in _TRUE | _FALSE:
            return v.lower() in _TRUE
    return v


def _prepare(t: Any, v: Any, loc: tuple[Any, ...]) -> Any:
    """``v`` made ready for :func:`msgspec.convert` to type ``t`` (see the module docstring)."""
    origin = typing.get_origin(t)
    if origin is typing.Annotated:
        inner, *meta = typing.get_args(t)
        for m in meta:
            if isinstance(m, Before):
                try:
                    v = m.fn(v)
                except SpecError as exc:
                    raise exc.located(loc) from None
                except InputError as exc:  # a unit or label reader: its what and allowed stay apart
                    raise SpecError(exc.what, loc, allowed=exc.allowed) from None
                except (ValueError, TypeError) as exc:
                    raise SpecError(str(exc), loc) from None
        for m in meta:
            if isinstance(m, Discriminator) and isinstance(v, dict):
                return _tagged(inner, m.fn(v), v, loc)
        if inner is int:  # the field's own bounds, for a value past the spec's (_past_bound)
            return _leaf(int, v, loc, _int_bounds([m for m in meta if isinstance(m, msgspec.Meta)]))
        return _prepare(inner, v, loc)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(t) if a is not type(None)]
        if v is None and len(args) < len(typing.get_args(t)):
            return v
        if isinstance(v, dict):
            specs = [a for a in args if _is_spec(a)]
            if len(specs) == 1:
                return _prepare_spec(specs[0], v, loc)
        plain = [a for a in args if not _is_spec(a)]
        return _prepare(plain[0], v, loc) if len(plain) == 1 else v
    if origin is Literal:
        values = typing.get_args(t)
        if not any(v == a and type(v) is type(a) for a in values):
            raise SpecError("not one of the known values", loc, kind="type", value=v,
                            allowed=f"one of {_choices(values)}")
        return v
    if origin is list:
        if isinstance(v, list):
            (item,) = typing.get_args(t)
            return [_prepare(item, x, (*loc, i)) for i, x in enumerate(v)]
        return v
    if origin is dict:
        if isinstance(v, dict):
            key, value = typing.get_args(t)
            out = {}
            for k, x in v.items():
                if not isinstance(k, str):  # every spec mapping is keyed by text (a name, a release, a module)
                    raise SpecError(KeyNotText(k).refusal(), (*loc, KeyNotText(k)), allowed=_key_allowed(key))
                if typing.get_origin(key) is Literal:
                    _prepare(key, k, (*loc, k))
                _check_text_key(key, k, (*loc, k))
                out[k] = _prepare(value, x, (*loc, k))
            return out
        return v
    if _is_spec(t):
        return _prepare_spec(t, v, loc) if isinstance(v, dict) else v
    return _leaf(t, v, loc)


def _key_pattern(t: Any) -> tuple[str, str] | None:
    """(pattern, what it allows) of a patterned text key type (``Annotated[str, Meta(pattern=...)]``), or None."""
    if typing.get_origin(t) is not typing.Annotated:
        return None
    meta = [m for m in typing.get_args(t)[1:] if isinstance(m, msgspec.Meta)]
    pattern = next((m.pattern for m in meta if m.pattern), None)
    if pattern is None:
        return None
    return pattern, next((m.description for m in meta if m.description), f"text matching {pattern}")


def _key_allowed(t: Any) -> str:
    """What a mapping's keys may be, in words, for a key that is not text."""
    form = _key_pattern(t)
    if form is not None:
        return form[1]
    if typing.get_origin(t) is Literal:
        return f"keys are text: one of {_choices(typing.get_args(t))}"
    return "keys are text (quote one YAML reads as a number, a boolean or null: '5')"


def _check_text_key(t: Any, k: str, loc: tuple[Any, ...]) -> None:
    """A mapping key of a patterned text type (``Annotated[str, Meta(pattern=...)]``, e.g. a cuDNN release of
    ``attention_releases``) refused at that key: msgspec's refusal named the whole mapping as the value ("got
    {'9.10': {'cudnn': ...") and not the key. (A key that is not text, a bare YAML number 9.30 read as 9.3, is
    refused before, by :func:`_prepare`.)"""
    form = _key_pattern(t)
    if form is not None and not re.search(form[0], k):
        raise SpecError(f"key {k!r} is not of the allowed form", loc, allowed=form[1])


def _tagged(union: Any, tag: str, v: dict[str, Any], loc: tuple[Any, ...]) -> Any:
    members = {m.__struct_config__.tag: m for m in typing.get_args(union)}
    if tag not in members:
        raise SpecError(f"unknown kind {tag!r}", (*loc, "kind"), allowed=f"kind: {' or '.join(members)}")
    return _prepare_spec(members[tag], v if "kind" in v else {"kind": tag, **v}, loc)


def _prepare_spec(cls: type, data: dict[str, Any], loc: tuple[Any, ...]) -> dict[str, Any]:
    plan = _plan(cls)
    for key in data:
        if not isinstance(key, str):  # a field's name is text: `~: 1`, `5: 1` (the loader adds the known keys)
            raise SpecError(KeyNotText(key).refusal(), (*loc, KeyNotText(key)), kind="unknown")
        # a spec without a tag field has tag_field None: a YAML key `null` (or `~`) compared equal to it and was
        # dropped without a word (``strategy: {null: 2}``; plan then failed on the None it listed as not pinned)
        if key not in plan.hints and (plan.tag_field is None or key != plan.tag_field):
            raise SpecError(f"unknown key {key!r}", (*loc, key), kind="unknown")
    out: dict[str, Any] = {}
    if plan.tag_field is not None and plan.tag_field in data:
        out[plan.tag_field] = data[plan.tag_field]
    for name, t in plan.hints.items():
        if name in data:
            out[name] = _prepare(t, data[name], (*loc, name))
        elif name in plan.required:
            raise SpecError("missing required field", (*loc, name), kind="missing")
    return out


# --- the second pass: msgspec ----------------------------------------------------------------------

_validating: contextvars.ContextVar[bool] = contextvars.ContextVar("_validating", default=False)
_MESSAGE = r"(?s)^(.*?)(?: - at `(?:key` in `)?(\$[^`]*)`)?$"
_PATH_PART = r"\.([^.\[]+)|\[(\d+)\]|\[\.\.\.\]"
_BOUND = r"^Expected `(\w+)` (>=|>|<=|<) (\S+)$"
_LENGTH = r"^Expected `(\w+)` of length (>=|<=) (\d+)$"
_TYPE = r"^Expected `([^`]*)`, got `[^`]*`$"
_BOUND_WORDS = {">": "greater than", ">=": "greater than or equal to", "<": "less than",
                "<=": "less than or equal to"}
_TYPE_WORDS = {"int": "a valid integer", "float": "a valid number", "str": "a valid string", "bool": "a valid boolean",
               "object": "a valid mapping", "array": "a valid list", "null": "null"}


def _number(text: str) -> str:
    try:
        return f"{float(text):g}"
    except ValueError:
        return text


def _message(what: str) -> str:
    """msgspec's wording of a type or constraint error in pydantic's (which the error lines always used)."""
    bound = re.match(_BOUND, what)
    if bound:
        if bound.group(1) == "int" and bound.group(2) == ">=" and int(bound.group(3)) > 0:  # an int's gt=0 is >= 1
            return f"Input should be greater than {int(bound.group(3)) - 1}"
        return f"Input should be {_BOUND_WORDS[bound.group(2)]} {_number(bound.group(3))}"
    length = re.match(_LENGTH, what)
    if length:
        n = int(length.group(3))
        # a mapping's (msgspec's `object`) was "List should have at least 1 item (got {})" (round 15)
        kind, noun = {"str": ("String", "character"), "object": ("Mapping", "entry")}.get(length.group(1),
                                                                                           ("List", "item"))
        noun = (noun[:-1] + "ies" if noun.endswith("y") else noun + "s") if n != 1 else noun
        most = "at least" if length.group(2) == ">=" else "at most"
        return f"{kind} should have {most} {n} {noun}"
    wanted = re.match(_TYPE, what)
    if wanted:
        return "Input should be " + " or ".join(_TYPE_WORDS.get(t, t) for t in wanted.group(1).split(" | "))
    if what.startswith("Expected `str` matching regex "):  # the regular expression is the allowed part's, in words
        return "String is not of the allowed form"
    return what


def _value_at(data: Any, loc: Sequence[Any]) -> Any:
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return _NO_VALUE
    return data


def _from_msgspec(exc: msgspec.ValidationError, data: Any) -> SpecError:
    m = re.match(_MESSAGE, str(exc))
    what, path = (m.group(1), m.group(2) or "$") if m else (str(exc), "$")
    loc: list[Any] = []
    for part in re.finditer(_PATH_PART, path[1:]):
        if part.group(0) == "[...]":
            break
        loc.append(part.group(1) if part.group(1) is not None else int(part.group(2)))
    if what.startswith("\x1f"):
        _, name, what = what.split("\x1f", 2)
        what, _, allowed = what.partition("\x1f")
        name, _, also = name.partition("\x1e")
        needs_recompute = allowed.endswith("\x1drecompute")  # field_error's last parts, never a value's text
        allowed = allowed[:-len("\x1drecompute")] if needs_recompute else allowed
        needs_zero = allowed.endswith("\x1dzero")
        allowed = allowed[:-len("\x1dzero")] if needs_zero else allowed
        return SpecError(what, (*loc, *name.split(".")), allowed=allowed,  # "hybrid.mamba.groups": a nested field
                         also=(*loc, *also.split(".")) if also else (), needs_zero=needs_zero,
                         needs_recompute=name.split(".")[-1] if needs_recompute else "")
    unknown = re.match(r"^Object contains unknown field `(.*)`$", what)
    if unknown:
        return SpecError(f"unknown key {unknown.group(1)!r}", (*loc, unknown.group(1)), kind="unknown")
    missing = re.match(r"^Object missing required field `(.*)`$", what)
    if missing:
        return SpecError("missing required field", (*loc, missing.group(1)), kind="missing")
    if what.startswith("Expected ") or what.startswith("Invalid "):
        return SpecError(_message(what), loc, kind="type", value=_value_at(data, loc))
    return SpecError(what, loc)


# --- what a field accepts, in words (an error's <what is allowed>) ----------------------------------

def _bound(v: float) -> str:
    return f"{v:g}" if isinstance(v, float) else (f"{v:.0e}" if abs(v) >= 10**6 else str(v))


def _int_bounds(meta: list[msgspec.Meta]) -> tuple[float, float]:
    """(lo, hi) an integer field of these Meta accepts, within :data:`MAX_SPEC_INT` (as :func:`_range` says them)."""
    gt = next((m.gt for m in meta if m.gt is not None), None)
    ge = next((m.ge for m in meta if m.ge is not None), None)
    lt = next((m.lt for m in meta if m.lt is not None), None)
    le = next((m.le for m in meta if m.le is not None), None)
    lo = ge if ge is not None else (gt + 1 if gt is not None else -MAX_SPEC_INT)
    hi = min(le if le is not None else (lt - 1 if lt is not None else MAX_SPEC_INT), MAX_SPEC_INT)
    return lo, hi


def _range(meta: list[msgspec.Meta], integer: bool) -> str:
    gt = next((m.gt for m in meta if m.gt is not None), None)
    ge = next((m.ge for m in meta if m.ge is not None), None)
    lt = next((m.lt for m in meta if m.lt is not None), None)
    le = next((m.le for m in meta if m.le is not None), None)
    if integer:  # whole bounds, and no integer beyond MAX_SPEC_INT
        lo, hi = _int_bounds(meta)
        return f" from {_bound(lo)} to {_bound(hi)}"
    parts = [f"{op} {_bound(x)}" for op, x in ((">", gt), (">=", ge), ("<", lt), ("<=", le)) if x is not None]
    return (" " + " and ".join(parts)) if parts else ""


def allowed_for(t: Any) -> str:
    """What a field of type ``t`` accepts, with its range, in words: ``an integer from 1 to 1e+09``."""
    origin = typing.get_origin(t)
    if origin is typing.Annotated:
        inner, *extra = typing.get_args(t)
        for m in extra:
            if isinstance(m, Before) and m.allowed:  # a quantity says its units and range
                return str(m.allowed)
        meta = [m for m in extra if isinstance(m, msgspec.Meta)]
        labels = next((m.extra_json_schema["x-schema"].get("enum") for m in meta
                       if m.extra_json_schema and "x-schema" in m.extra_json_schema), None)
        if labels:
            return f"one of {_choices(labels)}"
        if inner is int or inner is float:
            return ("an integer" if inner is int else "a number") + _range(meta, inner is int)
        if typing.get_origin(inner) is list:
            lo = next((m.min_length for m in meta if m.min_length is not None), None)
            hi = next((m.max_length for m in meta if m.max_length is not None), None)
            count = f" of {lo} to {hi} items" if lo and hi else (f" of at least {lo} item{'s' if lo > 1 else ''}"
                                                                 if lo else "")
            return allowed_for(inner).replace("a list", f"a list{count}", 1)
        if inner is str:
            pattern = next((m.pattern for m in meta if m.pattern is not None), None)
            return f"a string matching {pattern}" if pattern else "a string"
        if any(isinstance(m, Discriminator) for m in extra):
            kinds = [a.__struct_config__.tag for a in typing.get_args(inner)]
            return f"a mapping of fields (kind: {' or '.join(kinds)}; see `scalemodel schema`)"
        return allowed_for(inner)
    if origin is typing.Union or origin is types.UnionType:
        args = typing.get_args(t)
        shown = [allowed_for(a) for a in args if a is not type(None)]
        text = " or ".join(shown)
        return f"{text}, or null (not set)" if len(shown) < len(args) else text
    if origin is Literal:
        return f"one of {_choices(typing.get_args(t))}"
    if origin is list:
        return f"a list, each item {allowed_for(typing.get_args(t)[0])}"
    if origin is dict:
        key, value = typing.get_args(t)
        keys = f"keys {_choices(typing.get_args(key))}" if typing.get_origin(key) is Literal else "string keys"
        return f"a mapping of {keys}, each value {allowed_for(value)}"
    if _is_spec(t):
        return f"a mapping of {t.__name__} fields ({', '.join(_plan(t).hints)[:200]})"
    return {int: f"an integer from {-MAX_SPEC_INT:.0e} to {MAX_SPEC_INT:.0e}", float: "a finite number",
            str: "a string", bool: "true or false"}.get(t, "a value of the documented type (see `scalemodel schema`)")


def type_at(model: Any, loc: Sequence[Any], data: Any = None) -> Any:
    """The declared type of the value at ``loc`` inside ``model`` (``data``, the raw fields, picks the member of a
    union of tagged specs by its ``kind``), or None when ``loc`` leads outside the spec."""
    t = model
    for part in loc:
        while True:  # down to a list, a mapping or a spec
            origin = typing.get_origin(t)
            if origin is typing.Annotated:
                inner, *extra = typing.get_args(t)
                disc = next((m for m in extra if isinstance(m, Discriminator)), None)
                if disc is not None and isinstance(data, dict):
                    try:
                        tag = disc.fn(data)
                    except (ValueError, TypeError):
                        return None
                    t = next((a for a in typing.get_args(inner) if a.__struct_config__.tag == tag), None)
                    if t is None:
                        return None
                else:
                    t = inner
            elif origin is typing.Union or origin is types.UnionType:
                members = [a for a in typing.get_args(t) if a is not type(None)]
                bare = [typing.get_args(a)[0] if typing.get_origin(a) is typing.Annotated else a for a in members]
                fits = [a for a, b in zip(members, bare, strict=True)
                        if (typing.get_origin(b) is list if isinstance(part, int)
                            else _is_spec(b) or typing.get_origin(b) is dict or typing.get_origin(b) is typing.Union
                            or typing.get_origin(b) is types.UnionType)]
                t = (fits or members)[0]
            else:
                break
        origin = typing.get_origin(t)
        if origin is list and isinstance(part, int):
            t = typing.get_args(t)[0]
        elif origin is dict:
            t = typing.get_args(t)[1]
        elif _is_spec(t) and isinstance(part, str):
            t = _plan(t).hints.get(part)
            if t is None:
                return None
        else:
            return None
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
        else:
            data = None
    return t


def convert(model: Any, data: Any) -> Any:
    """``data`` (raw fields) as an instance of ``model`` (a spec class or a union), or a :class:`SpecError`."""
    ready = _prepare(model, data, ())
    token = _validating.set(True)
    try:
        return msgspec.convert(ready, model, strict=True)
    except msgspec.ValidationError as exc:
        raise _in_mapping(model, exc, ready) or _from_msgspec(exc, ready) from None
    finally:
        _validating.reset(token)


def _in_mapping(model: Any, exc: msgspec.ValidationError, ready: Any) -> SpecError | None:
    """The error inside a mapping's value, located at its key: msgspec names every key ``[...]``, so a bad
    ``attention_efficiency.cudnn.fwd.attn_max`` was reported at ``attention_efficiency`` with the whole mapping
    echoed (and cut before what is allowed). Each entry is converted alone (within the ongoing validation) to
    find the one that fails; None when the error is not inside a mapping."""
    m = re.match(_MESSAGE, str(exc))
    path = (m.group(2) or "") if m else ""
    if "[...]" not in path:
        return None
    loc = [p.group(1) if p.group(1) is not None else int(p.group(2))
           for p in re.finditer(_PATH_PART, path[1:path.index("[...]")])]
    mapping, t = _value_at(ready, loc), type_at(model, loc, ready)
    while typing.get_origin(t) in (typing.Annotated, typing.Union, types.UnionType):
        args = typing.get_args(t)
        t = args[0] if typing.get_origin(t) is typing.Annotated else next(
            (a for a in args if typing.get_origin(typing.get_args(a)[0] if typing.get_origin(a) is typing.Annotated
                                                 else a) is dict), None)
    if typing.get_origin(t) is not dict or not isinstance(mapping, dict):
        return None
    value_t = typing.get_args(t)[1]
    for key, value in mapping.items():
        try:
            msgspec.convert(value, value_t, strict=True)
        except msgspec.ValidationError as inner:
            return (_in_mapping(value_t, inner, value) or _from_msgspec(inner, value)).located((*loc, key))
    return None


class _FieldsView:
    """``Spec.model_fields``: the field names of a spec class (in order; callers ask only for the names)."""

    def __get__(self, obj: Any, cls: type) -> dict[str, None]:
        return dict.fromkeys(cls.__struct_fields__)  # type: ignore[attr-defined]


def _dump(v: Any, exclude_none: bool, exclude_unset: bool) -> Any:
    if isinstance(v, Spec):
        return v.model_dump(exclude_none=exclude_none, exclude_unset=exclude_unset)
    if isinstance(v, (list, tuple)):
        return [_dump(x, exclude_none, exclude_unset) for x in v]
    if isinstance(v, dict):
        return {k: _dump(x, exclude_none, exclude_unset) for k, x in v.items()}
    return v


class PositionalError(InputError, TypeError):
    """A spec class called with positional arguments: the API's one-line InputError, and still the TypeError Python
    raises for a call its signature does not take (``except TypeError`` around a construction keeps catching it)."""


class _SpecMeta(msgspec.StructMeta):
    """A spec class built in Python with a keyword it has not (``StrategySpec(tpp=8)``) refuses with the one-line
    :class:`InputError` a file's unknown key gets (its name, the closest field, the known ones), not msgspec's
    TypeError "Unexpected keyword argument" (tidy25). The loader's specs are built by :func:`convert`, which
    never calls the class: the check sits on the error path of a construction in Python alone."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if args:  # fuzz26: StrategySpec(8) raised msgspec's TypeError "Extra positional arguments provided"
            n = len(args)
            first = next(iter(cls.__struct_fields__), "field")  # type: ignore[attr-defined]
            shown = ", ".join(repr(a)[:40] for a in args[:3]) + (", ..." if n > 3 else "")
            raise PositionalError(f"{n} positional argument{'s' if n > 1 else ''} ({shown}): a spec's fields are "
                                  "named", where=cls.__name__,
                                  allowed=f"keyword arguments, e.g. {cls.__name__}({first}=...)")
        try:
            return super().__call__(*args, **kwargs)
        except TypeError:
            unknown = [k for k in kwargs if k not in cls.__struct_fields__]  # type: ignore[attr-defined]
            if not unknown or _refusal is None:
                raise
            raise _refusal(SpecError(f"unknown key {unknown[0]!r}", (unknown[0],), kind="unknown"), cls,
                           kwargs) from None


class Spec(msgspec.Struct, metaclass=_SpecMeta, kw_only=True, forbid_unknown_fields=True):
    model_fields: ClassVar[_FieldsView] = _FieldsView()

    def __setattr__(self, name: str, value: Any) -> None:
        """An assignment is validated with the whole spec, as pydantic's validate_assignment did."""
        fields = self.__struct_fields__
        checked = _python_checked(type(self), {**{f: getattr(self, f) for f in fields}, name: value})
        for f in fields:
            msgspec.structs.force_setattr(self, f, getattr(checked, f))

    def __post_init__(self) -> None:
        if _validating.get():
            self._check()
            return
        # Built directly in Python (or copied, or unpickled): validate as the same fields in a file would be.
        fields = self.__struct_fields__
        checked = _python_checked(type(self), {name: getattr(self, name) for name in fields})
        for name in fields:
            msgspec.structs.force_setattr(self, name, getattr(checked, name))

    def _check(self) -> None:
        """Cross-field rules (raise ValueError, or :func:`field_error` for one field's)."""

    # --- the pydantic-style API the rest of the package uses ---

    @classmethod
    def model_validate(cls, data: Any) -> Any:
        """Validate raw fields into this spec (raises :class:`SpecError`, a ValueError)."""
        return convert(cls, data)

    def model_dump(self, *, mode: str = "python", exclude: set[str] | None = None, exclude_none: bool = False,
                   exclude_unset: bool = False) -> dict[str, Any]:
        """The fields as plain data (nested specs as dicts). ``exclude_unset`` leaves out the fields that
        hold their default (a spec does not remember which keys its source named; a default given
        explicitly is left out too, which no caller can tell apart). ``mode`` is accepted for pydantic's
        signature: the values are JSON-ready in either mode."""
        del mode
        plan = _plan(type(self))
        out: dict[str, Any] = {}
        if plan.tag_field is not None:
            out[plan.tag_field] = self.__struct_config__.tag
        for name in self.__struct_fields__:
            if exclude and name in exclude:
                continue
            v = getattr(self, name)
            if exclude_none and v is None:
                continue
            if exclude_unset and name in plan.defaults and v == plan.defaults[name]:
                continue
            out[name] = _dump(v, exclude_none, exclude_unset)
        return out

    def model_copy(self, *, update: dict[str, Any] | None = None) -> Any:
        """A copy with ``update`` applied, validated as a new spec would be. A key the spec has not is refused as
        the constructor refuses it (fuzz26: ``model_copy(update={'tpp': 2})`` raised msgspec's TypeError "has no
        field 'tpp'", ``{3: 2}`` "keywords must be strings")."""
        update = update or {}
        unknown = [k for k in update if k not in self.__struct_fields__]
        if unknown and _refusal is not None:
            key = str(unknown[0])
            raise _refusal(SpecError(f"unknown key {unknown[0]!r}", (key,), kind="unknown"), type(self), update)
        return msgspec.structs.replace(self, **update)


class Sourced(Spec, kw_only=True):
    """A spec whose values carry their provenance: field name (or dotted path) -> citation."""

    sources: typing.Annotated[dict[str, str], msgspec.Meta(description="field -> citation for its value")] = \
        msgspec.field(default_factory=dict)


#: Loads a named spec (a built-in name or a file) as raw fields: ``(kind, ref) -> dict``. The loader
#: registers itself here when it is imported (scalemodel.specs imports it), so the spec classes below it
#: need not import the loader above them.
_reference_loader: Callable[[str, str], Any] | None = None


def set_reference_loader(load: Callable[[str, str], Any]) -> None:
    """Register the function that loads a spec named inside another spec (see :func:`builtin_ref`)."""
    global _reference_loader
    _reference_loader = load


#: Words a spec's refusal as the one-line :class:`InputError` (``(exc, model, data) -> InputError``): the loader's
#: ``validation_error`` (the field's path, what, "(got ...)", what the field takes), registered as the reference
#: loader is.
_refusal: Callable[[SpecError, Any, Any], InputError] | None = None


def set_refusal(word: Callable[[SpecError, Any, Any], InputError]) -> None:
    """Register the function that words a spec's refusal for :func:`_python_checked`."""
    global _refusal
    _refusal = word


def _python_checked(cls: type, data: dict[str, Any]) -> Any:
    """:func:`convert` of a spec built, copied (``model_copy``, ``msgspec.structs.replace``), assigned or unpickled
    in Python: a refusal is the :class:`InputError` the Python API promises (docs/api.md), not the SpecError the
    loader words with a file's line (review25d: ``StrategySpec(tp=-1)`` raised a ValueError that is no InputError,
    "tp: Input should be greater than 0", without the value or what is allowed)."""
    # NumPy values as the Python ones they hold, as the API's arguments are (fuzz26: StrategySpec(tp=np.int64(8)) was
    # "Input should be a valid integer (got np.int64(8))", eager_rope=np.True_ "a valid boolean", where
    # np.float64(8.0) was taken and scalemodel.predict(..., tp=np.int64(8)) runs)
    data = {name: plain(value, name) for name, value in data.items()}
    try:
        return convert(cls, data)
    except SpecError as exc:
        if _refusal is None:
            raise
        raise _refusal(exc, cls, data) from None


def builtin_ref(kind: str) -> Before:
    """A :class:`Before` hook: a string names a built-in spec (or a file) of ``kind``, loaded as raw fields."""

    def resolve(v: Any) -> Any:
        if isinstance(v, str) and _reference_loader is not None:
            try:
                return _reference_loader(kind, v)
            except InputError as exc:  # keep where it went wrong: the field's location alone said "--set
                # cluster.accelerator: is a directory, not a regular file" of a file the named one extends
                shown = f"{exc.where}: {exc.what}" if exc.where and exc.where != kind else exc.what
                raise InputError(shown, allowed=exc.allowed) from None
        return v

    return Before(resolve)


__all__ = ["MAX_GPUS", "MAX_SPEC_INT", "Before", "Discriminator", "PositionalError", "Sourced", "Spec", "SpecError",
           "allowed_for", "builtin_ref", "convert", "field_error", "type_at"]
