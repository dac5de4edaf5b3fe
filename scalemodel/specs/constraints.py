"""Planner constraints: ``KEY OP VALUE`` texts (``tp<=8``, ``memory<=60GB``, ``schedule=1f1b``) parsed
and validated into {key: [(op, value), ...]} with values in the engine's codes (choices.py)."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from scalemodel.choices import (
    Algorithm,
    Assignment,
    CpCommType,
    FlexBackend,
    Layout,
    Recompute,
    Schedule,
    ScheduleKind,
    Zero,
    parse_compression,
    parse_dp_comm,
    parse_schedule,
    parse_sync,
)
from scalemodel.errors import InputError
from scalemodel.specs.base import MAX_SPEC_INT, digit_grouping
from scalemodel.specs.training import MIN_BUCKET_BYTES
from scalemodel.units import parse_quantity

OPS: dict[str, Callable[[Any, Any], Any]] = {
    "<=": operator.le, ">=": operator.ge, "!=": operator.ne, "==": operator.eq, "=": operator.eq,
    "<": operator.lt, ">": operator.gt}
_NUMERIC_KEYS = ("dp", "tp", "pp", "cp", "ep", "micro_batch", "virtual_stages", "cp_a2a_size")
#: Flag keys (true / false; = or != only).
_FLAG_KEYS = ("sequence_parallel", "overlap", "moe_flex_dispatcher", "moe_a2a_overlap")
_ALIASES = {"mb": "micro_batch", "micro-batch": "micro_batch", "microbatch": "micro_batch",
            "sp": "sequence_parallel", "sequence-parallel": "sequence_parallel", "algo": "algorithm",
            "v": "virtual_stages", "virtual-stages": "virtual_stages", "mem": "memory",
            "memory_per_gpu": "memory", "bucket_size": "bucket", "bucket_bytes": "bucket", "dp-comm": "dp_comm",
            "rank_order": "layout", "rank-order": "layout", "cp_comm": "cp_comm_type",
            "moe_flex": "moe_flex_dispatcher", "moe_flex_dispatcher_backend": "moe_flex_backend",
            "flex_backend": "moe_flex_backend"}
CONSTRAINT_KEYS = (*_NUMERIC_KEYS, "zero", "recompute", "schedule", "sequence_parallel", "algorithm", "sync", "memory",
                   "overlap", "compression", "dp_comm", "assignment", "bucket", "layout", "cp_comm_type",
                   "moe_flex_dispatcher", "moe_a2a_overlap", "moe_flex_backend")
#: The operators a constraint is written with, as --help and the errors list them (== reads as =).
OPERATORS = "<=, >=, <, >, =, !="
_CONSTRAINT_ALLOWED = (f"KEY OP VALUE with KEY one of {', '.join(CONSTRAINT_KEYS)} and OP one of "
                       f"{OPERATORS} (e.g. tp<=8, pp=1, zero<=1, memory<=60GB, schedule=1f1b, "
                       "recompute=none, compression=int8, dp_comm=ps:8, overlap=false, assignment=dynamic, "
                       "bucket<=100MB, zero=fsdp, layout=tp-cp-pp-dp, cp_comm_type=a2a, cp_a2a_size=2, "
                       "moe_flex_dispatcher=true, moe_a2a_overlap=false, moe_flex_backend=hybridep)")
#: What a constraint's text must look like, for the errors on its syntax (a mistyped operator, two in one item).
_FORMS = (f"KEY OP VALUE with OP one of {OPERATORS} (e.g. tp<=8, pp=1, memory<=60GB, schedule=1f1b), several "
          "separated by commas (tp<=8,pp=1)")
#: Characters of an operator, as written or mistyped (the typographic ones too): the whole run after the key is the
#: operator written, so tp=>8 is the operator '=>' (it was '=' and the value '>8': "needs an integer").
_OP_CHARS = "<>=!\u2264\u2265\u2260"
#: What a mistyped operator most likely meant.
_MEANT = {"=>": ">=", "=<": "<=", "=!": "!=", "<>": "!=", "!": "!=", ">>": ">", "<<": "<", "===": "==",
          "\u2264": "<=", "\u2265": ">=", "\u2260": "!="}
# matched against the stripped text: "(\S.*?)\s*$" made a long run of blanks inside the value quadratic. A key
# holds digits after its first letter: "[A-Za-z_\-]+" could not read cp_a2a_size or moe_a2a_overlap, two of
# CONSTRAINT_KEYS (round 15: "cannot read constraint 'cp_a2a_size=2'", with that very example in the allowed list)
_CONSTRAINT_RE = rf"(?s)([A-Za-z_\-][A-Za-z0-9_\-]*)\s*([{_OP_CHARS}][{_OP_CHARS}\s]*)(.*)"

Constraints = dict[str, list[tuple[str, Any]]]


class _Parsed(dict):  # type: ignore[type-arg]
    """Marks a constraint dict whose values are already parsed (normalising it again is a no-op)."""


# --------------------------------------------------------------------------------------------
# constraints


def parse_constraints(texts: Sequence[str] | None, where: str = "--constraint") -> Constraints:
    """Parse ``KEY OP VALUE`` strings (``tp<=8``, ``memory<=60GB``, ``schedule=1f1b``) into a dict
    {key: [(op, value), ...]}; raise InputError naming the bad one."""
    out: Constraints = {}
    for text in texts or []:
        if not str(text).replace(",", "").strip():  # "--constraint ,,," restricted nothing without a word
            raise InputError(f"no constraint in {str(text)[:40]!r}", where=where, allowed=_CONSTRAINT_ALLOWED)
        for part in str(text).split(","):
            if not part.strip():
                continue
            key, op, value = _split_constraint(part.strip(), where)
            out.setdefault(constraint_key(key), []).append((op, value))
    return normalize_constraints(out, where=where)


def _split_constraint(text: str, where: str) -> tuple[str, str, str]:
    """One ``KEY OP VALUE`` text as its key, operator and value, or an InputError that says what is wrong with it as
    written (no key, no operator, a mistyped one and what it likely meant, no value, a second operator)."""
    mt = re.fullmatch(_CONSTRAINT_RE, text)
    if not mt:
        head = _split_at_operator(text)
        if len(head) == 1:
            raise InputError(f"constraint {text!r} has no operator", where=where, allowed=_FORMS)
        if not head[0].strip():
            raise InputError(f"constraint {text!r} names no key", where=where, allowed=_FORMS)
        # an operator after a key it cannot read (micro batch=2, tp.x<=8, tpé=8): review27b, "has no operator" was false
        raise InputError(f"{head[0].strip()!r} in {text!r} is not a constraint key (a key is ASCII letters, digits, "
                         "'_' and '-')", where=where, allowed=_CONSTRAINT_ALLOWED)
    key, written, value = mt.group(1), mt.group(2).strip(), mt.group(3)
    op = re.sub(r"\s+", "", written)
    if op not in OPS:
        meant = f" (did you mean {key}{_MEANT[op]}{value}?)" if op in _MEANT else ""
        raise InputError(f"{written!r} in {text!r} is not an operator{meant}", where=where, allowed=_FORMS)
    if not value:
        raise InputError(f"constraint {text!r} has no value", where=where, allowed=_FORMS)
    if any(c in _OP_CHARS for c in value):  # tp=8;pp=1, tp<=8 pp=1: no value holds an operator's character
        raise InputError(f"constraint {text!r} holds more than one operator", where=where, allowed=_FORMS)
    return key, op, value


def constraint_key(raw: str) -> str:
    """The constraint key ``raw`` names, as :func:`parse_constraints` reads it: lower case, '-' as '_', an alias
    (``mb``, ``sp``, ``flex_backend``, ``moe_flex``, ...) as its key."""
    key = str(raw).strip().lower()
    return _ALIASES.get(key, key.replace("-", "_"))


def named_key(text: str) -> str:
    """The constraint key a ``--constraint`` item (``tp<=8``, ``flex_backend=deepep``) or a bare field name (``tp``)
    names: the text before its operator, as :func:`constraint_key` reads it (commands.common.strategy_constraints:
    which of a --strategy file's axes the command line already restricts)."""
    return constraint_key(_split_at_operator(str(text).strip())[0])


def _split_at_operator(text: str) -> list[str]:
    """``text`` split at its first operator character (:data:`_OP_CHARS`): [before, after], or [text] without one."""
    return re.split(f"[{_OP_CHARS}]", text, maxsplit=1)


def merge_constraints(into: dict[str, Any], texts: list[str], where: str) -> None:
    """Add the parsed ``texts`` (``micro_batch=4``, :func:`parse_constraints`) to the constraint dict ``into``,
    after what it holds for the same key."""
    for key, pairs in parse_constraints(texts, where=where).items():
        into[key] = [*into.get(key, []), *pairs]


def constraint_pairs(spec: Any) -> list[Any]:
    """One constraint's value as its list of (op, value) pairs: a list as it is, an (op, value) tuple (a string
    first) as the one pair, a bare value as equality."""
    if isinstance(spec, list):
        return spec
    if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str):
        return [spec]  # an operator it does not know refused as such (fuzz26: ('~', 2) "needs an integer")
    return [("=", spec)]


#: Strategy fields plan searches that no constraint key restricts (a key, or its short name, -> the field): what
#: the error says instead of "unknown constraint key"
_PINNED_BY_SET = {"offload_states": "offload_states", "offload": "offload_states"}
_PINNED_WHY = {"offload_states": ("plan --allow offload searches none, optimizer and optimizer+params where the "
                                  "cluster gives host_bandwidth",
                                  " (with --set strategy.zero: 1, 2 or 3 for optimizer; 3, fsdp or hsdp for "
                                  "optimizer+params)")}


def normalize_constraints(constraints: dict[str, Any] | None, where: str = "--constraint") -> Constraints:
    """Validate a constraint dict. Values may be a bare value (equality), an (op, value) pair or a
    list of pairs; string values are parsed (names, integers, byte quantities)."""
    if isinstance(constraints, _Parsed):
        return constraints
    out: Constraints = _Parsed()
    if constraints is not None and not isinstance(constraints, dict):  # the Python API's: .items() AttributeError
        raise InputError(f"{str(constraints)[:60]} is not a dict of constraints", where=where,
                         allowed="{key: value | (op, value) | [(op, value), ...]}, e.g. {'tp': ('<=', 8)}")
    for raw_key, spec in (constraints or {}).items():
        key = constraint_key(raw_key)
        if key not in CONSTRAINT_KEYS:
            if key in _PINNED_BY_SET:  # fuzz36: said only "unknown constraint key", though plan searches it
                field = _PINNED_BY_SET[key]
                why, pin = _PINNED_WHY[field]
                raise InputError(f"{raw_key} is not a constraint key: {why}", where=where,
                                 allowed=f"--set strategy.{field}=VALUE pins it{pin}; constraint keys: "
                                         f"{', '.join(CONSTRAINT_KEYS)}")
            raise InputError(f"unknown constraint key {raw_key!r}", where=where, allowed=_CONSTRAINT_ALLOWED)
        for pair in constraint_pairs(spec):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:  # {"tp": [2, 4]}: "cannot unpack non-iterable"
                raise InputError(f"{repr(pair)[:40]} in the constraints on {key} is not an (op, value) pair",
                                 where=where, allowed="a value, an (op, value) pair or a list of pairs, e.g. "
                                                      "[('>=', 2), ('<=', 8)]")
            op, value = pair
            if not isinstance(op, str) or op not in OPS:  # ([1], 2): "unhashable type: 'list'" from `in OPS`
                raise InputError(f"unknown operator {op!r} in constraint on {key}", where=where,
                                 allowed=_CONSTRAINT_ALLOWED)
            out.setdefault(key, []).append((op, _constraint_value(key, op, value, where)))
    for key in _NUMERIC_KEYS:
        _check_satisfiable(key, out.get(key, []), where)
    _check_schedule_satisfiable(out.get("schedule", []), where)
    for key, domain in _DOMAINS.items():
        pairs = out.get(key, [])
        if pairs and not any(all(OPS[op](v, value) for op, value in pairs) for v in domain()):
            said = ", ".join(f"{key}{op}{_label(key, value)}" for op, value in pairs)
            raise InputError(f"no {key} meets {said}{' together' if len(pairs) > 1 else ''}", where=where,
                             allowed=f"constraints on {key} that one of its values meets")
    return out


#: The values of the coded constraint keys (a constraint they all fail leaves the planner nothing to search).
_DOMAINS: dict[str, Callable[[], list[Any]]] = {
    "zero": lambda: [int(z) for z in Zero], "recompute": lambda: [int(r) for r in Recompute],
    "algorithm": lambda: [int(a) for a in Algorithm], "assignment": lambda: [int(a) for a in Assignment],
    "layout": lambda: [int(x) for x in Layout], "sequence_parallel": lambda: [False, True],
    "overlap": lambda: [False, True], "cp_comm_type": lambda: [int(x) for x in CpCommType],
    "moe_flex_dispatcher": lambda: [False, True], "moe_a2a_overlap": lambda: [False, True],
    "moe_flex_backend": lambda: [int(x) for x in FlexBackend]}


def _label(key: str, value: Any) -> str:
    members: list[Any] = list({"zero": Zero, "recompute": Recompute, "algorithm": Algorithm, "assignment": Assignment,
                               "layout": Layout, "cp_comm_type": CpCommType,
                               "moe_flex_backend": FlexBackend}.get(key, []))
    return next((m.label for m in members if int(m) == value), str(value).lower())


def _schedule_label(value: tuple[int, int | None]) -> str:
    code, v = value
    kind = next(k for k in ScheduleKind if int(k) == code)
    return kind.label + (f":{v}" if v is not None else "")


def _check_schedule_satisfiable(pairs: list[tuple[str, Any]], where: str) -> None:
    """Refuse schedule constraints that no schedule meets together (schedule=1f1b with schedule=interleaved:2, the
    one as a --set strategy.schedule pin): the planner's match (configurations: the kind, and the virtual stages
    where one is given) leaves nothing, and plan said only "no split of the GPUs meets what was asked", exit 0,
    where tp=2 with tp=4 is refused (fuzzpin38). The candidates: each flat kind, and interleaved at every V named
    and at one V none names."""
    if not pairs:
        return
    named = {int(v) for _, (_, v) in pairs if v is not None}
    cands = [(int(k), None) for k in ScheduleKind if k != ScheduleKind.INTERLEAVED] + [
        (int(ScheduleKind.INTERLEAVED), v) for v in sorted(named | {max(named | {1}) + 1})]

    def meets(cand: tuple[int, int | None], op: str, value: tuple[int, int | None]) -> bool:
        match = cand[0] == value[0] and (value[1] is None or cand[1] == value[1])
        return match if op in ("=", "==") else not match

    if not any(all(meets(c, op, value) for op, value in pairs) for c in cands):
        said = ", ".join(f"schedule{op}{_schedule_label(value)}" for op, value in pairs)
        raise InputError(f"no schedule meets {said}{' together' if len(pairs) > 1 else ''}", where=where,
                         allowed="constraints on schedule that one schedule meets")


def _check_satisfiable(key: str, pairs: list[tuple[str, Any]], where: str) -> None:
    """Refuse constraints on a degree or count that no value >= 1 meets (tp<=2 with tp>=4, tp=8 with tp=4,
    tp<1): the search would enumerate nothing and say only that."""
    lo, hi = 1, None
    for op, v in pairs:
        v = int(v)
        if op in (">=", ">", "=", "=="):
            lo = max(lo, v + 1 if op == ">" else v)
        if op in ("<=", "<", "=", "=="):
            hi = min(hi, v - 1 if op == "<" else v) if hi is not None else (v - 1 if op == "<" else v)
    if hi is not None and lo > hi:
        said = ", ".join(f"{key}{op}{v}" for op, v in pairs)
        raise InputError(f"no {key} meets {said}{' together' if len(pairs) > 1 else ''}", where=where,
                         allowed=f"constraints on {key} that some integer >= 1 meets, e.g. {key}<=8")


def _constraint_value(key: str, op: str, value: Any, where: str) -> Any:
    # already-parsed values (codes, byte counts, schedule pairs) pass through unchanged
    if key == "schedule" and isinstance(value, tuple) and len(value) == 2 and value[0] in list(ScheduleKind):
        return value
    if key in ("recompute", "algorithm") and isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        if int(value) in list(Recompute if key == "recompute" else Algorithm):
            return int(value)
    if key == "memory" and isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    if key in _FLAG_KEYS and isinstance(value, bool):
        return value
    if key in ("compression", "dp_comm") and isinstance(value, tuple):
        return value
    if key == "zero" and not isinstance(value, str):
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and int(value) in list(Zero):
            return int(value)
        try:
            return int(Zero.parse(value))
        except InputError:
            raise InputError(f"unknown ZeRO stage {value!r} in constraint on zero", where=where,
                             allowed=" | ".join(Zero.labels())) from None
    if key == "assignment" and isinstance(value, (int, np.integer)) and int(value) in list(Assignment):
        return int(value)
    if key == "layout" and isinstance(value, (int, np.integer)) and int(value) in list(Layout):
        return int(value)
    if (key == "cp_comm_type" and isinstance(value, (int, np.integer)) and not isinstance(value, bool)
            and int(value) in list(CpCommType)):
        return int(value)
    if (key == "moe_flex_backend" and isinstance(value, (int, np.integer)) and not isinstance(value, bool)
            and int(value) in list(FlexBackend)):
        return int(value)
    if key == "bucket" and isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    text = str(value).strip().lower()
    label = f"{key}{op}{value}"
    if key in _NUMERIC_KEYS:
        # ASCII digits only: int() reads "8_0" as 80 (tp=8_0 searched tp 80), and other scripts' digits; digits
        # grouped by thousands (memory<=80_000) are read without the '_'
        grouped = digit_grouping(text, "an integer")
        if grouped is not None or not re.fullmatch(r"[+-]?[0-9]{1,30}", text.replace("_", "")):
            why = " ('_' groups digits only by thousands, as in 1_000)" if grouped else ""
            raise InputError(f"constraint {label!r} needs an integer{why}", where=where, allowed=_CONSTRAINT_ALLOWED)
        number = int(text.replace("_", ""))
        # a value pinned with = is a plan candidate whatever it is (consist38), so it reaches the search's int64
        # columns: micro_batch=2**63 was "input out of range: Python int too large to convert to C long", naming
        # neither the option nor the key (fuzzpin38). No spec holds such a count (MAX_SPEC_INT, the --strategy door's
        # own bound): refused here, as a strategy file's micro_batch: 2**63 is
        if op in ("=", "==") and abs(number) > MAX_SPEC_INT:
            bound = f"{MAX_SPEC_INT:.0e}"
            raise InputError(f"constraint {label!r} pins {key} beyond the counts a spec holds (1 to {bound})",
                             where=where, allowed=f"{key}=N with N an integer from 1 to {bound}")
        return number
    if key in _ORDERED_CHOICES:
        return _choice(key, _ORDERED_CHOICES[key], text, value, label, where)
    if key in ("bucket", "memory"):
        if key == "bucket" and text in ("0", "default"):
            return 0.0
        what, allowed = ("bucket size", "a size, e.g. 25MB, or default") if key == "bucket" else (
            "memory", "a size > 0, e.g. 60GB")
        try:
            raw = str(value).strip()
            size = float(parse_quantity(raw if not raw.replace(".", "").isdigit() else f"{raw} B", "bytes"))
        except InputError as exc:
            raise InputError(f"bad {what} in {label!r}: {exc.what}", where=where, allowed=allowed) from None
        # memory<=-5GB was searched: every plan "exceeds the --constraint memory limit", and exit 0
        if not (size > 0 or (key == "bucket" and size == 0)):
            raise InputError(f"bad {what} in {label!r}: {size:g} B is not a size", where=where, allowed=allowed)
        if key == "memory" and op in ("=", "==", "!="):
            # fuzz39: memory=60GB searched for plans of exactly 60 GB a GPU, none, "No feasible strategy", exit 0
            raise InputError(f"memory is a bound on each GPU's memory, got {label!r}", where=where,
                             allowed="memory<=SIZE or memory<SIZE (or >=, >), e.g. memory<=60GB")
        if key == "bucket" and op in ("=", "==") and 0 < size < MIN_BUCKET_BYTES:
            # fuzz39: bucket=1.5 (and bucket=1KB, 1000 B) ranked plans predict refuses: the bucket_size field's bound
            raise InputError(f"constraint {label!r} pins a bucket of {size:g} B, below the smallest bucket priced, "
                             "1 KiB", where=where, allowed="bucket=SIZE from 1 KiB (1024 B), e.g. bucket=25MiB, or "
                                                           "bucket=default")
        return size
    if op not in ("=", "==", "!="):
        raise InputError(f"{key} takes = or != only, got {label!r}", where=where, allowed=_CONSTRAINT_ALLOWED)
    if key in _FLAG_KEYS:
        truth = {"true": True, "on": True, "yes": True, "1": True,
                 "false": False, "off": False, "no": False, "0": False}
        if text not in truth:
            raise InputError(f"bad value in {label!r}", where=where, allowed="true | false")
        return truth[text]
    if key == "schedule":
        allowed = "1f1b | interleaved | interleaved:V | gpipe | zb"
        if text == ScheduleKind.INTERLEAVED.label:  # any number of virtual stages
            return (int(ScheduleKind.INTERLEAVED), None)
        try:
            sched: Schedule = parse_schedule(text)
        except InputError:
            raise InputError(f"unknown schedule {value!r} in {label!r}", where=where, allowed=allowed) from None
        return (int(sched.kind), sched.virtual_stages if sched.kind == ScheduleKind.INTERLEAVED else None)
    if key in _CHOICES:
        return _choice(key, _CHOICES[key], text, value, label, where)
    if key == "compression":
        if text == "topk":  # any kept fraction
            return (int(parse_compression("topk:1").kind), None)
        try:
            comp = parse_compression(text)
        except InputError as exc:
            raise InputError(exc.what, where=where, allowed=exc.allowed) from None
        return (int(comp.kind), comp.topk_ratio)
    if key == "dp_comm":
        if text == "ps":  # any number of servers, either placement
            return (-1, None)
        try:
            dc = parse_dp_comm(text)
        except InputError as exc:
            raise InputError(exc.what, where=where, allowed=exc.allowed) from None
        return (dc.servers, dc.colocated)
    # sync
    try:
        return parse_sync(text).label()
    except InputError as exc:
        raise InputError(exc.what, where=where, allowed=exc.allowed) from None


#: The choice keys a constraint reads by their enum's own labels, with the word an unknown value is called:
#: ordered ones (a constraint may compare them, recompute<=selective) and the others (= or != only).
_ORDERED_CHOICES: dict[str, tuple[Any, str]] = {"recompute": (Recompute, "recompute"), "zero": (Zero, "ZeRO stage")}
_CHOICES: dict[str, tuple[Any, str]] = {
    "algorithm": (Algorithm, "algorithm"), "assignment": (Assignment, "assignment"), "layout": (Layout, "layout"),
    "moe_flex_backend": (FlexBackend, "flex dispatcher backend"), "cp_comm_type": (CpCommType, "cp_comm_type")}


def _choice(key: str, how: tuple[Any, str], text: str, value: Any, label: str, where: str) -> int:
    """A choice's enum value from its label, or an InputError naming the key's allowed labels."""
    enum, what = how
    try:
        return int(enum.parse(text))
    except InputError:
        raise InputError(f"unknown {what} {value!r} in {label!r}", where=where,
                         allowed=" | ".join(enum.labels())) from None


def keep(values: np.ndarray, pairs: list[tuple[str, Any]]) -> np.ndarray:
    ok = np.ones(np.shape(values), dtype=bool)
    for op, v in pairs:
        ok &= OPS[op](values, v)
    return ok
