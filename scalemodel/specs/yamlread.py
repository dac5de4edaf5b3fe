"""Strict, bounded YAML: the YAML 1.2 core schema, no duplicate keys, and limits on size and shape.

PyYAML implements YAML 1.1, whose implicit types surprise: ``12:30`` is the sexagesimal integer 750,
``yes``/``on`` are booleans, ``010`` is octal 8, dates become ``datetime`` objects. Every YAML input
of scalemodel (spec files, ``--set`` values, ``--samples`` lists) is read here instead, with

- the YAML 1.2 core schema: ``true``/``false``, ``null``/``~``, decimal, ``0o`` octal and ``0x``
  hex integers, decimal floats, ``.inf``/``.nan``; anything else plain is a string;
- integers of at most :data:`MAX_INT_DIGITS` digits (Python refuses to convert over 4300 digits; no
  physical count needs more than 30);
- decimal floats that a 64-bit float holds (:data:`FLOAT_RANGE`): ``1e400`` is not read as inf, nor a nonzero
  ``1e-400`` as 0 (``.inf`` and ``.nan`` are written as such);
- an error naming both lines for a key given twice in one mapping (PyYAML keeps the last silently);
- at most :data:`MAX_NODES` nodes composed and at most :data:`MAX_NODES` after expanding aliases
  (an alias bomb has billions), and at most :data:`MAX_DEPTH` levels of nesting;
- events from libyaml when it is installed and composition in Python, so the bounds are checked
  as the document is built and parsing stops at the first one broken.

With the file-size limits of :mod:`scalemodel.specs.files` this keeps any input under a second.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import BaseResolver

from scalemodel.errors import InputError, folded
from scalemodel.specs.files import FLOAT_MAGNITUDES, character_refusal, float_range_refusal, refused_character
from scalemodel.specs.files import MAX_DEPTH as MAX_DEPTH  # bounds shared with JSON and --set (files.py)
from scalemodel.specs.files import MAX_INT_DIGITS as MAX_INT_DIGITS

MAX_NODES = 20_000  # a spec has hundreds of nodes

_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")
#: what a refused decimal may be instead (float64: the largest finite value, the smallest subnormal)
FLOAT_RANGE = f"{FLOAT_MAGNITUDES} (.inf / .nan where a field takes them)"


class Refused(yaml.MarkedYAMLError):
    """A well-formed document that breaks one of the bounds above (reported as such, not as malformed)."""

    def __init__(self, problem: str, mark: Any, allowed: str = "") -> None:
        super().__init__(problem=problem, problem_mark=mark)
        self.allowed = allowed


class MalformedYAML(InputError):
    """Text that is not YAML at all (as opposed to YAML that breaks a bound)."""


class CoreResolver(BaseResolver):
    """Implicit tags of the YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution)."""


CoreResolver.add_implicit_resolver("tag:yaml.org,2002:bool", _BOOL, list("tTfF"))
CoreResolver.add_implicit_resolver("tag:yaml.org,2002:null", _NULL, ["~", "n", "N", ""])
CoreResolver.add_implicit_resolver("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
CoreResolver.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+.0123456789"))


#: What a spec file may write instead of a YAML merge key (:meth:`StrictConstructor.construct_mapping`); a file kind
#: without ``extends:`` (a runs file) says its own (:func:`load`'s ``merge_allowed``).
MERGE_ALLOWED = ("the keys written out in the mapping (an alias *anchor may stand for a whole value); a cluster, "
                 "accelerator or workload spec can start from another with extends: BASE")


class StrictConstructor(SafeConstructor):
    source = ""  # the text composed (construct's ``source``), or "" where not known
    merge_allowed = MERGE_ALLOWED  # what the merge key's refusal allows (construct's ``merge_allowed``)

    def construct_core_int(self, node: yaml.ScalarNode) -> int:
        text = str(self.construct_scalar(node))
        digits = text.lstrip("+-")
        if len(digits) > MAX_INT_DIGITS:
            raise Refused(f"integer with {len(digits)} digits", node.start_mark,
                          f"integers of at most {MAX_INT_DIGITS} digits (write 1.5e40 for a large quantity)")
        if digits.startswith(("0o", "0x")):
            return int(digits[2:], 8 if digits[1] == "o" else 16)
        return int(text)

    def construct_core_float(self, node: yaml.ScalarNode) -> float:
        text = str(self.construct_scalar(node))
        low = text.lower()
        if low.endswith(".inf"):
            return float("-inf") if low.startswith("-") else float("inf")
        if low == ".nan":
            return float("nan")
        value = float(text)
        # fuzz34: a decimal beyond a 64-bit float (1e400) was read as inf, and a nonzero one below it (1e-400) as 0,
        # so the refusal quoted a value the user did not write ("layers: ... (got inf)", "latency: should be
        # greater than 0 (got 0.0)"); .inf and .nan stay what they say
        refusal = float_range_refusal(text, value)
        if refusal:
            raise Refused(refusal, node.start_mark, FLOAT_RANGE)
        return value

    def construct_core_bool(self, node: yaml.ScalarNode) -> bool:
        return str(self.construct_scalar(node)).lower() == "true"

    def construct_core_str(self, node: yaml.ScalarNode) -> str:
        """A string, refused where it holds a character the YAML reader refuses written raw (NUL, ESC, the other
        controls but tab and line breaks): ``"\\x1b[31m"`` escaped in double quotes reached a sweep label, and
        so the user's terminal, as an escape sequence. The same for a bidirectional control or invisible format
        character (files.refused_character), which the reader passes written raw too: ``name: "\\u202e..."``
        showed a reversed name in the table (ux34)."""
        text = str(self.construct_scalar(node))
        bad = refused_character(text)
        if bad is not None:
            start, end = node.start_mark, node.end_mark
            escaped = bool(self.source) and bad not in self.source[start.index:end.index]
            refusal = character_refusal(bad, escaped)
            raise Refused(refusal.what, start, refusal.allowed)
        return text

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == "<<" and not key_node.style:
                # YAML 1.1's merge key (<<: *base): not in the 1.2 core schema read here, so it was a key named "<<",
                # refused as "unknown key '<<'"
                raise Refused("YAML merge keys ('<<: *anchor') are not supported", key_node.start_mark,
                              self.merge_allowed)
            if isinstance(key_node, yaml.ScalarNode):
                key = self.construct_object(key_node, deep=deep)
                try:
                    first = seen.get(key)
                except TypeError:
                    continue  # unhashable: SafeConstructor reports it
                line = key_node.start_mark.line + 1
                if first is not None:
                    raise Refused(f"duplicate key {key!r} (first on line {first}, again on line {line})",
                                  key_node.start_mark, "each key once per mapping")
                seen[key] = line
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


StrictConstructor.add_constructor("tag:yaml.org,2002:int", StrictConstructor.construct_core_int)  # type: ignore[type-var]
StrictConstructor.add_constructor("tag:yaml.org,2002:float", StrictConstructor.construct_core_float)  # type: ignore[type-var]
StrictConstructor.add_constructor("tag:yaml.org,2002:bool", StrictConstructor.construct_core_bool)  # type: ignore[type-var]
StrictConstructor.add_constructor("tag:yaml.org,2002:str", StrictConstructor.construct_core_str)  # type: ignore[type-var]


class BoundedComposer(Composer):
    """PyYAML's composer, counting nodes and depth as it goes."""

    max_nodes = MAX_NODES

    def compose_document(self) -> Any:
        self._count = 0
        self._depth = 0
        return super().compose_document()

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._count += 1
        if self._count > self.max_nodes:
            event = self.peek_event()  # type: ignore[attr-defined]
            raise Refused(f"more than {self.max_nodes} YAML nodes", event.start_mark,
                          f"a document of at most {self.max_nodes} values")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[attr-defined]
                raise Refused(f"YAML nesting is deeper than {MAX_DEPTH} levels", mark,
                              f"a spec nested less than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


try:
    from yaml.cyaml import CParser as _EventSource  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - libyaml not installed: the pure-Python parser
    from yaml.parser import Parser as _PyParser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    class _EventSource(Reader, Scanner, _PyParser):  # type: ignore[no-redef]
        def __init__(self, stream: str) -> None:
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            _PyParser.__init__(self)


#: libyaml's emitter and plain safe loader (PyYAML built with it: ``yaml.__with_libyaml__``), for YAML that scalemodel
#: writes itself and reads back (report.hardware), never for a user's input (:func:`load`); PyYAML's pure-Python
#: classes where a wheel lacks libyaml (the 94 built-in specs: 7x the CPU time to write, 15x to read)
FastDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
FastLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class StrictLoader(BoundedComposer, _EventSource, StrictConstructor, CoreResolver):  # type: ignore[misc]
    def __init__(self, stream: str, max_nodes: int = MAX_NODES) -> None:
        _EventSource.__init__(self, stream)
        BoundedComposer.__init__(self)
        StrictConstructor.__init__(self)
        CoreResolver.__init__(self)
        self.max_nodes = max_nodes

    # the composer's methods must win over libyaml's own (C) composer
    get_single_node = BoundedComposer.get_single_node
    check_node = BoundedComposer.check_node
    get_node = BoundedComposer.get_node


def _expanded_size(node: yaml.Node, memo: dict[int, int], limit: int) -> int:
    key = id(node)
    if key in memo:
        if memo[key] < 0:
            raise Refused("an alias refers to the collection that contains it", node.start_mark,
                          "aliases to finished values only (no recursive structures)")
        return memo[key]
    memo[key] = -1  # in progress
    if isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, memo, limit) + _expanded_size(v, memo, limit) for k, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(v, memo, limit) for v in node.value)
    else:
        size = 1
    memo[key] = size
    if size > limit:
        raise Refused(f"YAML expands to more than {limit} nodes (aliases repeated)", node.start_mark,
                      "a plain spec without repeated aliases")
    return size


def _where(name: str, mark: Any, multiline: bool) -> str:
    """``name:LINE``; a one-line text (a --set value) is named without a line number."""
    return f"{name}:{mark.line + 1}" if mark is not None and (multiline or mark.line) else name


def compose(text: str, name: str, *, max_nodes: int = MAX_NODES) -> yaml.Node | None:
    """The node tree of a single YAML document, within the bounds; errors are :class:`InputError`."""
    loader = StrictLoader(text, max_nodes)
    multiline = "\n" in text.strip()
    try:
        node = loader.get_single_node()
        if node is not None:
            _expanded_size(node, {}, max_nodes)
        return node  # type: ignore[no-any-return]
    except Refused as exc:
        raise InputError(str(exc.problem), where=_where(name, exc.problem_mark, multiline),
                         allowed=exc.allowed) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise MalformedYAML(f"malformed YAML: {exc.problem or exc.context}", where=_where(name, mark, multiline),
                            allowed="valid YAML (check indentation and quoting)") from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1 if isinstance(exc.position, int) else None
        char = f"U+{exc.character:04X}" if isinstance(exc.character, int) else repr(exc.character)
        raise InputError(f"character {char} is not allowed in YAML ({exc.reason})",
                         where=f"{name}:{line}" if line and multiline else name,
                         allowed="printable UTF-8 text (no NUL or control characters)") from None
    except yaml.YAMLError as exc:
        raise InputError(f"malformed YAML: {folded(exc)}", where=name,
                         allowed="a YAML mapping of key: value lines (see `scalemodel schema`)") from None
    except RecursionError:
        raise InputError("YAML nesting is too deep", where=name,
                         allowed=f"a spec nested less than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()


def _value_path(root: yaml.Node, mark: Any) -> str:
    """The key path (``strategy.tp``, ``strategies[0].label``) of the scalar value at ``mark``, or "" (the root, or
    not a value): a refused scalar was named by its line alone, "s.yaml:2: integer with 31 digits", which in a
    one-line flow mapping does not say which field."""
    if mark is None:
        return ""
    stack: list[tuple[yaml.Node, str]] = [(root, "")]
    seen: set[int] = set()
    while stack:
        node, path = stack.pop()
        if id(node) in seen:  # an alias repeats a node: one visit
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            if path and node.start_mark.index == mark.index:
                return path
        elif isinstance(node, yaml.MappingNode):
            stack.extend((v, f"{path}.{k.value}" if path else str(k.value)) for k, v in node.value
                         if isinstance(k, yaml.ScalarNode))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(node.value))
    return ""


def construct(node: yaml.Node, name: str, *, multiline: bool = True, source: str = "",
              merge_allowed: str = MERGE_ALLOWED) -> Any:
    """The Python value of a node from :func:`compose` (core-schema types, duplicate keys refused); ``source``: the
    text it was composed from, where a refused character is told written raw from written as an escape;
    ``merge_allowed``: what a merge key's refusal allows (:data:`MERGE_ALLOWED`)."""
    loader = StrictLoader("")
    loader.source = source
    loader.merge_allowed = merge_allowed
    try:
        return loader.construct_document(node)
    except Refused as exc:
        path = _value_path(node, exc.problem_mark)
        raise InputError(f"{path}: {exc.problem}" if path else str(exc.problem),
                         where=_where(name, exc.problem_mark, multiline), allowed=exc.allowed) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise InputError(f"malformed YAML: {exc.problem or exc.context}", where=_where(name, mark, multiline),
                         allowed="valid YAML (check indentation and quoting)") from None
    except RecursionError:
        raise InputError("YAML nesting is too deep", where=name,
                         allowed=f"a spec nested less than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()


def load(text: str, name: str, *, max_nodes: int = MAX_NODES,
         merge_allowed: str = MERGE_ALLOWED) -> tuple[Any, yaml.Node | None]:
    """Parse one YAML document strictly: (value, node tree for line numbers)."""
    node = compose(text, name, max_nodes=max_nodes)
    if node is None:
        return None, None
    return construct(node, name, multiline="\n" in text.strip(), source=text, merge_allowed=merge_allowed), node
