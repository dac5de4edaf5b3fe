"""List candidate defects in tests/ against the house rule "a test checks a value computed independently".

Usage: python scripts/audit_tests.py [--glob 'tests/test_*.py'] [--kind KIND ...] [--counts]

The script only lists candidates; each must be read. Kinds (one line per finding: kind, file:line, test, detail):

* ``no-assert``: a test function (``test_*``) with no ``assert`` statement, no ``pytest.raises`` / ``pytest.warns``,
  no ``assert*`` / ``check*`` / ``expect*`` call and no call to a module-level helper or fixture-like function that
  itself asserts (one level deep). A test that only runs code passes whatever that code returns.
* ``weak-assert``: a test whose every assertion is weak: ``assert x``, ``assert x is not None``, ``assert
  isinstance(...)``, ``assert len(x)`` / ``> 0`` on a bare name. Those fail only on a crash or an empty result.
* ``long-literal``: a float literal with >= 6 significant digits inside a test function, with no comment on its
  line or the two lines above and no arithmetic beside it: the shape of an output pasted back.
* ``self-compare``: ``a == a`` / ``approx(a) == a`` / ``a <= a`` with the same expression on both sides.
* ``loose-approx``: ``pytest.approx(..., rel=r)`` with r >= 0.5, or ``math.isclose(..., rel_tol >= 0.5)``.
* ``swallow``: a ``try`` inside a test whose handler is ``pass`` / ``continue`` / ``return`` for a broad exception
  (bare, Exception, BaseException, AssertionError).
* ``always-skip``: ``pytest.skip(...)`` at the top level of a test body, or ``@pytest.mark.skip`` (unconditional).
* ``same-oracle``: ``expected = f(...)`` where ``f`` is also called, with the same arguments, in the asserted
  expression (the implementation compared with itself).
* ``sanity-only``: every assertion is a sign or finiteness check (``x > 0``, ``x >= 0``, ``np.isfinite(x).all()``)
  or weak: right for a hostile-input or property test, a defect where a value could be derived.
* ``duplicate``: two test functions (any files) whose bodies are identical after the name is removed.
* ``tautology`` (testaudit37): an assertion that holds whatever the code does: ``assert True`` / a non-empty constant,
  ``assert (x, "msg")`` (a non-empty tuple), an f-string, ``a or not a``, ``x or True``, a comparison of constants,
  ``len(x) >= 0`` / ``abs(x) >= 0`` / ``0 <= len(x)``, ``isinstance(x, object)``, and ``assert_*`` / ``isclose`` calls
  whose first two arguments are the same expression.
* ``snapshot`` (testaudit37): a test that reads a file a script or command of this repository writes from the code
  (GENERATED below: the precompiled catalog, the shipped residuals, the JSON schemas, the --json key contract): its
  expected values are the code's own output unless the test says what independent source it checks them against.
* ``vacuous-loop`` (testaudit37): every assert sits in a ``for`` loop (or ``assert all(... for ...)``) over an
  iterable not visibly non-empty (a literal, ``range`` of constants, a name bound to a literal): an empty result
  passes unchecked.
* ``exit-only`` (testaudit37): every assert is ``r.code == 0`` / ``returncode == 0``: an acceptance test (valid
  input runs), which checks no value; right for an input-range boundary, weak where a value could be derived.
* ``skip-no-reason`` (testaudit37): ``@pytest.mark.skip`` / ``skipif`` / ``xfail`` without ``reason=``, or
  ``pytest.skip()`` / ``pytest.xfail()`` with no message.

* ``bare-compare`` (testaudit38): a comparison, ``approx`` / ``isclose`` / ``allclose`` / ``array_equal`` call whose
  value is thrown away (an expression statement: ``x == approx(y)`` with no ``assert``); it checks nothing.
* ``single-draw`` (testaudit38): a hypothesis ``@given`` whose every strategy draws one value (``st.just(v)``,
  ``sampled_from`` of a one-element literal, ``integers`` / ``floats`` with equal bounds): one example run many times.
* ``empty-parametrize`` (testaudit38): ``@pytest.mark.parametrize`` over an empty literal (or a module name bound
  to one): the test is collected as skipped and checks nothing.
* ``mock-under-test`` (testaudit38): the test replaces a name (``monkeypatch.setattr(obj, "f", ...)``,
  ``monkeypatch.setattr("a.b.f", ...)``, ``mock.patch("a.b.f")``) and then asserts on the value of a call to that
  same name: the replacement, not the code, is what is checked.

* ``broad-raises`` (testaudit38): ``pytest.raises(Exception)`` / ``BaseException`` (or a tuple holding one) with no
  ``match=``: any crash, a TypeError of a bug included, passes it; the house contract is a named InputError.

Since testaudit38 ``loose-approx`` also lists a positional ``approx(v, rel)`` / ``np.isclose(a, b, rtol)`` with
rel >= 0.5, and an absolute tolerance (``abs`` / ``abs_tol`` / ``atol``) at least the size of a non-zero constant
expected value (any value within it, even 0 or one of the opposite sign, passes); ``tautology`` also lists
``assert approx(...)`` (an approx object is always true); ``weak-assert`` / ``sanity-only`` also read ``x != None``,
``type(x) is T``, ``x != 0``, ``len(x) >= 1``, ``not isnan(x)`` and ``and`` of such; ``long-literal`` also lists an
integer of >= ``--digits`` significant digits on the expected side of an assert (a comparison or an ``approx`` /
``assert_*`` argument), and a comment counts as its source only when it is not a bare pragma (``# noqa``,
``# type: ignore``, ``# pragma``).

Since testaudit37 ``swallow`` also lists any handler (whatever its type) that is only ``pass`` / ``continue`` /
``return`` around a ``try`` body that asserts, and ``with contextlib.suppress(...)`` around an assert; ``same-oracle``
also reads ``assert_*`` / ``isclose`` calls and ``approx`` on either side; and a helper counts as checking for
``no-assert`` only when it is defined in the test's own file or imported into it by name (no longer any name defined
in any tests/*.py), or is a fixture the test takes that asserts.

``--counts`` prints the number per kind only (the table tests/README.md quotes).
"""

from __future__ import annotations

import argparse
import ast
import glob
import hashlib
import re
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ASSERT_CALL = re.compile(r"^(assert|check|expect|verify|_assert|_check|_expect)", re.IGNORECASE)
BROAD = {None, "Exception", "BaseException", "AssertionError"}
KINDS = (
    "no-assert",
    "weak-assert",
    "long-literal",
    "self-compare",
    "loose-approx",
    "swallow",
    "always-skip",
    "same-oracle",
    "sanity-only",
    "duplicate",
    "tautology",
    "snapshot",
    "skip-no-reason",
    "vacuous-loop",
    "exit-only",
    "bare-compare",
    "single-draw",
    "empty-parametrize",
    "mock-under-test",
    "broad-raises",
)
# Files a script or command of this repository writes from the code (a test whose expected values come from one of
# them compares the code with itself unless it names another source): the writer of each.
GENERATED = {
    "catalog.json": "scripts/build_catalog.py (scalemodel/specs/precompiled.py DATA)",
    "validation_residuals.json": "scripts/build_residuals.py",
    ".schema.json": "python -m scalemodel schema KIND",
    "json_contract.json": "the --json key paths, written from the CLI's output (tests/test_ux31.py)",
}
GENERATED_NAMES = {"DATA": "precompiled", "OUT": "build_residuals", "RESIDUALS": "intervals"}
GENERATED_BARE = {"RESIDUALS"}  # imported by name (from scalemodel.engine.intervals import RESIDUALS)
CHECK_CALLS = {"assert_allclose", "assert_array_equal", "assert_equal", "assert_array_almost_equal",
               "assert_almost_equal", "isclose", "allclose", "array_equal", "assert_frame_equal"}


def _call_name(node: ast.AST) -> str:
    """The last dotted part of a call's function: ``np.testing.assert_allclose`` -> ``assert_allclose``."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _has_direct_check(func: ast.AST) -> bool:
    """An assert statement, a raises / warns context or an assert*-named call anywhere in ``func``."""
    for node in ast.walk(func):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call):
            name = _call_name(node)
            if name in {"raises", "warns", "fail", "deprecated_call", "validate"} or ASSERT_CALL.match(name):
                return True
            if name == "given":  # hypothesis-decorated helper bodies are walked through their own function
                continue
    return False


def _helpers_that_check(tree: ast.Module, seed: frozenset[str] = frozenset()) -> set[str]:
    """Module-level functions (and methods) that assert, found to a fixed point: a test calling one checks."""
    funcs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    checking = {name for name, f in funcs.items() if _has_direct_check(f)} | set(seed)
    changed = True
    while changed:
        changed = False
        for name, f in funcs.items():
            if name in checking:
                continue
            if any(isinstance(c, ast.Call) and _call_name(c) in checking for c in ast.walk(f)):
                checking.add(name)
                changed = True
    return checking


def _is_weak(test: ast.expr) -> bool:
    """``assert x``, ``assert x is not None``, ``assert isinstance(...)``, ``assert len(x)``, ``assert x > 0``."""
    if isinstance(test, ast.Name | ast.Attribute | ast.Subscript):
        return True
    if isinstance(test, ast.Call) and _call_name(test) in {"isinstance", "len", "callable", "hasattr", "bool"}:
        return True
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        right = test.comparators[0]
        if isinstance(test.ops[0], ast.IsNot | ast.NotEq) and isinstance(right, ast.Constant) and right.value is None:
            return True
        if isinstance(test.ops[0], ast.Is | ast.Eq) and _call_name(test.left) == "type" \
                and isinstance(test.left, ast.Call):  # type(x) is float
            return True
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return all(_is_weak(v) for v in test.values)
    return False


def _is_sanity(test: ast.expr) -> bool:
    """A sign / finiteness check: ``x > 0``, ``x >= 0``, ``0 < x``, ``np.isfinite(x).all()``, or a weak assert."""
    if _is_weak(test):
        return True
    if isinstance(test, ast.Call) and _call_name(test) == "isfinite":
        return True
    if isinstance(test, ast.Call) and _call_name(test) in {"all", "any"} and test.args:
        return _is_sanity(test.args[0])
    if isinstance(test, ast.BoolOp):
        return all(_is_sanity(v) for v in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) \
            and _call_name(test.operand) in {"isnan", "isinf"}:
        return True  # not math.isnan(x)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.NotEq):
        return _is_zero(test.comparators[0]) or _is_zero(test.left)  # x != 0
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.GtE) \
            and _call_name(test.left) == "len" and isinstance(test.comparators[0], ast.Constant) \
            and test.comparators[0].value == 1:  # len(x) >= 1
        return True
    if isinstance(test, ast.Compare) and all(isinstance(op, ast.Gt | ast.GtE | ast.Lt | ast.LtE) for op in test.ops):
        consts = [n for n in [test.left, *test.comparators] if isinstance(n, ast.Constant)]
        return bool(consts) and all(c.value in (0, 0.0) for c in consts) and len(consts) == len(test.ops)
    return False


def _significant_digits(text: str) -> int:
    """Digits that carry information: 16384.0 has 5, 0.000827 has 3, 1.0250 has 5 (a written trailing zero counts)."""
    mantissa = re.split(r"[eE]", text)[0].replace("_", "").lstrip("+-")
    if re.fullmatch(r"\d+\.0*", mantissa):  # an integer written as a float
        return len(mantissa.split(".")[0].lstrip("0").rstrip("0"))
    digits = mantissa.replace(".", "").lstrip("0")
    return len(digits.rstrip("0")) if "." not in mantissa else len(digits)


def _prose(func: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> str:
    """The test's docstring and comments, digits' grouping removed: where a derivation of a literal is written."""
    doc = ast.get_docstring(func) or ""
    body = lines[func.lineno - 1 : (func.end_lineno or func.lineno)]
    comments = " ".join(line.split("#", 1)[1] for line in body if "#" in line)
    return (doc + " " + comments).replace(",", "").replace("_", "")


def _explained(text: str, prose: str) -> bool:
    """The literal's first four significant digits appear in the test's prose (a derivation or a cited figure)."""
    mantissa = re.split(r"[eE]", text)[0].replace("_", "")
    digits = mantissa.replace(".", "").lstrip("0")[:4]
    return bool(digits) and digits in prose.replace(".", "")


def _truthy_constant(node: ast.expr) -> bool:
    """A literal that is always true: a non-empty constant, tuple, list, set, dict or f-string."""
    if isinstance(node, ast.Constant):
        return bool(node.value)
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return bool(node.elts)
    if isinstance(node, ast.Dict):
        return bool(node.keys)
    if isinstance(node, ast.JoinedStr):
        return any(isinstance(v, ast.Constant) and v.value for v in node.values)
    return False


def _never_negative(node: ast.expr) -> bool:
    """``len(...)`` or ``abs(...)``: at least zero whatever its argument."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"len", "abs"}


def _is_zero(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and not isinstance(node.value, bool) and node.value == 0


def tautology(test: ast.expr) -> str:
    """Why ``assert test`` cannot fail, or "" (see the module docstring)."""
    if _truthy_constant(test):
        return "a constant that is always true" if not isinstance(test, ast.Tuple) else "a non-empty tuple"
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Constant):
        return "" if test.operand.value else "not of a false constant"
    if isinstance(test, ast.BoolOp):
        if isinstance(test.op, ast.Or):
            if any(_truthy_constant(v) for v in test.values):
                return "an or with a true constant"
            plain = {_dump(v) for v in test.values}
            negated = {_dump(v.operand) for v in test.values
                       if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.Not)}
            if plain & negated:
                return "a or not a"
        else:
            reasons = [tautology(v) for v in test.values]
            if all(reasons):
                return reasons[0]
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if isinstance(left, ast.Constant) and isinstance(right, ast.Constant):
            return "a comparison of two constants"
        if isinstance(op, ast.GtE) and _never_negative(left) and _is_zero(right):
            return "len / abs >= 0"
        if isinstance(op, ast.LtE) and _is_zero(left) and _never_negative(right):
            return "0 <= len / abs"
        if isinstance(op, ast.Eq | ast.Is | ast.LtE | ast.GtE) and _dump(left) == _dump(right) \
                and not isinstance(left, ast.Constant):
            return "a value compared with itself"
    if isinstance(test, ast.Call) and _call_name(test) == "approx":
        return "an approx object (always true)"
    if isinstance(test, ast.Call) and _call_name(test) == "isinstance" and len(test.args) == 2:
        if isinstance(test.args[1], ast.Name) and test.args[1].id == "object":
            return "isinstance(x, object)"
    return ""


def _reads_generated(func: ast.AST, source: str, module_strings: dict[str, str]) -> str:
    """The generated file a test names (a string literal, a module constant holding one, or DATA / OUT of its
    writer), or ""."""
    for node in ast.walk(func):
        text = ""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.Name) and node.id in module_strings:
            text = module_strings[node.id]
        elif isinstance(node, ast.Attribute) and GENERATED_NAMES.get(node.attr) == _call_name(node.value):
            return f"{_call_name(node.value)}.{node.attr}"
        elif isinstance(node, ast.Name) and node.id in GENERATED_BARE:
            return node.id
        if len(text) > 200:  # a docstring or message that merely mentions the file
            continue
        for name in GENERATED:
            if text.endswith(name):
                return text
    return ""


def _module_strings(tree: ast.Module) -> dict[str, str]:
    """Module-level names bound to a path that ends in a generated file's name (``CONTRACT = ... / "x.json"``)."""
    out: dict[str, str] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            for node in ast.walk(stmt.value):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                        and any(node.value.endswith(g) for g in GENERATED):
                    out[stmt.targets[0].id] = node.value
    return out


def _skip_without_reason(node: ast.expr) -> str:
    """A skip / skipif / xfail mark or call with no reason, or ""."""
    call = node if isinstance(node, ast.Call) else None
    name = _call_name(node)
    if name not in {"skip", "skipif", "xfail"}:
        return ""
    if not any(isinstance(n, ast.Name) and n.id == "pytest" for n in ast.walk(node)):
        return ""
    if call is None:
        return f"@pytest.mark.{name} with no reason"
    if any(kw.arg in {"reason", "msg"} for kw in call.keywords):
        return ""
    if name == "skipif" and len(call.args) >= 2:
        return ""
    if name in {"skip", "xfail"} and call.args:
        return ""
    return f"{name}(...) with no reason"


def _imported_names(tree: ast.Module) -> set[str]:
    """Names a test file imports with ``from X import name`` (a helper of another test file among them)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names}
    return names


def _fixtures(tree: ast.Module) -> set[str]:
    """Functions decorated with ``pytest.fixture`` in a module."""
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
            and any("fixture" in _dump(d) for d in n.decorator_list)}


def _own_nodes(func: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` of a function that does not enter the bodies of the functions and lambdas defined in it."""
    todo = list(ast.iter_child_nodes(func))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            todo.extend(ast.iter_child_nodes(node))


def _checks_itself(test: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A check in the test's own body, or in a function defined inside it that the test names (calls or hands on):
    a nested ``def check(...): assert ...`` that is never called checks nothing."""
    own = list(_own_nodes(test))
    if any(_has_direct_check(n) for n in own if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
           and isinstance(n, ast.Assert | ast.Call)):
        return True
    named = {n.id for n in own if isinstance(n, ast.Name)}
    nested = [n for n in own if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)]
    return any(_has_direct_check(n) for n in nested if isinstance(n, ast.Lambda) or n.name in named)


def _literal_nonempty(node: ast.expr) -> bool:
    """An iterable that is visibly not empty: a literal list / tuple / set / dict / string, range() of constants
    with at least one element, or enumerate / zip / sorted / reversed of such."""
    if _truthy_constant(node):
        return True
    if not isinstance(node, ast.Call) or not node.args:
        return False
    name = _call_name(node)
    if name == "range":
        bounds = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, int)]
        return len(bounds) == len(node.args) and len(range(*bounds)) > 0
    if name in {"enumerate", "sorted", "reversed", "list", "tuple"}:
        return _literal_nonempty(node.args[0])
    if name == "zip":
        return all(_literal_nonempty(a) for a in node.args)
    return False


def _literal_names(body: list[ast.stmt]) -> set[str]:
    """Names bound, in these statements, to a visibly non-empty literal (``want = {...}``, ``CASES = [...]``,
    ``CHECKED: dict[str, bool] = {...}``)."""
    plain = {t.id for s in body if isinstance(s, ast.Assign) and _literal_nonempty(s.value)
             for t in s.targets if isinstance(t, ast.Name)}
    return plain | {s.target.id for s in body if isinstance(s, ast.AnnAssign) and s.value is not None
                    and isinstance(s.target, ast.Name) and _literal_nonempty(s.value)}


STATE_CHANGES = {"setattr", "delattr", "setitem", "delitem", "setenv", "delenv", "chdir", "write_text",
                 "write_bytes", "cache_clear", "unlink", "touch", "seed"}


def _changes_state(call: ast.Call) -> bool:
    """A call that changes what a second call of the same function returns: monkeypatch.*, a file write, a cache
    cleared, a random seed set."""
    return _call_name(call) in STATE_CHANGES


def _shown_nonempty(node: ast.expr, literal: set[str]) -> bool:
    """_literal_nonempty, or a name bound to such a literal (``.items()`` / ``.keys()`` / ``.values()`` of it)."""
    if isinstance(node, ast.Call) and _call_name(node) in {"items", "keys", "values"} \
            and isinstance(node.func, ast.Attribute):
        node = node.func.value
    if isinstance(node, ast.Call) and _call_name(node) in {"enumerate", "sorted", "list", "tuple"} and node.args:
        node = node.args[0]
    return _literal_nonempty(node) or (isinstance(node, ast.Name) and node.id in literal)


def vacuous(test: ast.FunctionDef | ast.AsyncFunctionDef, literal: set[str] = frozenset()) -> bool:  # type: ignore[assignment]
    """Every assert of the test sits in a ``for`` loop (or is ``assert all(... for ...)``) over an iterable that is
    not visibly non-empty, and nothing outside the loops asserts: an empty iterable passes the test unchecked.
    ``literal``: module-level names bound to non-empty literals."""
    literal = set(literal) | _literal_names([s for s in _own_nodes(test) if isinstance(s, ast.stmt)])
    looped: set[int] = set()
    for node in _own_nodes(test):
        if isinstance(node, ast.For | ast.AsyncFor) and not _shown_nonempty(node.iter, literal):
            looped |= {id(a) for s in node.body for a in ast.walk(s) if isinstance(a, ast.Assert)}
    asserts = [n for n in _own_nodes(test) if isinstance(n, ast.Assert)]
    others = [n for n in _own_nodes(test) if isinstance(n, ast.Call) and (
        _call_name(n) in {"raises", "warns"} or ASSERT_CALL.match(_call_name(n)))]
    if not asserts or others:
        return False

    def empty_ok(a: ast.Assert) -> bool:
        if id(a) in looped:
            return True
        t = a.test
        return isinstance(t, ast.Call) and _call_name(t) == "all" and len(t.args) == 1 \
            and isinstance(t.args[0], ast.GeneratorExp | ast.ListComp) \
            and not all(_shown_nonempty(g.iter, literal) for g in t.args[0].generators)
    return all(empty_ok(a) for a in asserts)


def _exit_zero(test: ast.expr) -> bool:
    """``r.code == 0`` / ``returncode == 0`` (and ``and`` of such): the command ran, whatever it printed."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return all(_exit_zero(v) for v in test.values)
    return isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq) \
        and _is_zero(test.comparators[0]) and _call_name(test.left) in {"code", "returncode", "exit_code"}


PRAGMA = re.compile(r"#\s*(noqa|type:\s*ignore|pragma|nosec|fmt:)[^#]*$")
TOLERANT = {"approx", "isclose", "allclose", "assert_allclose"}
COMPARE_CALLS = {"approx", "isclose", "allclose", "array_equal", "array_equiv"}


def _number(node: ast.AST | None) -> float | None:
    """A numeric constant, signed (``-0.5``), or None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _number(node.operand)
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return float(node.value)
    return None


def loose_tolerance(call: ast.Call) -> str:
    """Why a tolerant comparison (``approx``, ``isclose``, ``allclose``, ``assert_allclose``) accepts almost
    anything, or "": a relative tolerance >= 0.5 (keyword or positional), or an absolute one at least the size of a
    non-zero constant expected value."""
    name = _call_name(call)
    if name not in TOLERANT:
        return ""
    # positional tolerances: approx(expected, rel, abs); np.isclose / allclose / assert_allclose(a, b, rtol, atol)
    slots = ("expected", "rel", "abs") if name == "approx" else ("a", "b", "rel", "abs")
    tol = {slots[i]: a for i, a in enumerate(call.args) if i < len(slots)}
    for kw in call.keywords:
        key = {"rel": "rel", "rel_tol": "rel", "rtol": "rel", "abs": "abs", "abs_tol": "abs", "atol": "abs"}.get(
            kw.arg or "")
        if key:
            tol[key] = kw.value
    rel = _number(tol.get("rel"))
    if rel is not None and rel >= 0.5:
        return f"rel={rel:g}"
    absolute = _number(tol.get("abs"))
    expected = [v for v in (_number(tol.get(k)) for k in ("expected", "a", "b")) if v is not None]
    if absolute is not None and expected and expected[0] != 0 and absolute >= abs(expected[0]):
        return f"abs={absolute:g} >= |{expected[0]:g}|"
    return ""


def bare_compare(stmt: ast.stmt) -> str:
    """A comparison or a comparing call whose value an expression statement throws away, or ""."""
    if not isinstance(stmt, ast.Expr):
        return ""
    value = stmt.value
    if isinstance(value, ast.Compare):
        return "a comparison with no assert"
    if isinstance(value, ast.Call) and _call_name(value) in COMPARE_CALLS:
        return f"{_call_name(value)}(...) with no assert"
    return ""


def _one_value_strategy(node: ast.expr, literal: dict[str, ast.expr]) -> bool:
    """A hypothesis strategy that can draw only one value: just(v), sampled_from of a one-element literal (or a
    name bound to one), integers / floats / decimals with equal constant bounds."""
    if not isinstance(node, ast.Call):
        return False
    name = _call_name(node)
    if name == "just":
        return True
    if name == "sampled_from" and node.args:
        seq = node.args[0]
        if isinstance(seq, ast.Name) and seq.id in literal:
            seq = literal[seq.id]
        return isinstance(seq, ast.List | ast.Tuple | ast.Set) and len(seq.elts) == 1
    if name in {"integers", "floats", "decimals", "fractions"}:
        bounds = dict(zip(("min_value", "max_value"), node.args, strict=False))
        bounds |= {kw.arg: kw.value for kw in node.keywords if kw.arg in {"min_value", "max_value"}}
        lo, hi = _number(bounds.get("min_value")), _number(bounds.get("max_value"))
        return lo is not None and lo == hi
    return False


def single_draw(test: ast.FunctionDef | ast.AsyncFunctionDef, literal: dict[str, ast.expr]) -> str:
    """A ``@given`` whose every strategy draws one value, or ""."""
    for dec in test.decorator_list:
        if isinstance(dec, ast.Call) and _call_name(dec) == "given":
            strategies = [*dec.args, *(kw.value for kw in dec.keywords)]
            if strategies and all(_one_value_strategy(s, literal) for s in strategies):
                return f"@given with {len(strategies)} one-value strateg{'y' if len(strategies) == 1 else 'ies'}"
    return ""


def empty_parametrize(test: ast.FunctionDef | ast.AsyncFunctionDef, literal: dict[str, ast.expr]) -> str:
    """A ``parametrize`` over an empty literal (or a module name bound to one), or ""."""
    for dec in test.decorator_list:
        if not (isinstance(dec, ast.Call) and _call_name(dec) == "parametrize"):
            continue
        values = dec.args[1] if len(dec.args) > 1 else next(
            (kw.value for kw in dec.keywords if kw.arg == "argvalues"), None)
        if isinstance(values, ast.Name) and values.id in literal:
            values = literal[values.id]
        if isinstance(values, ast.List | ast.Tuple | ast.Set) and not values.elts:
            return "parametrize over an empty list"
    return ""


def _patched_names(test: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, int]:
    """Names a test replaces, with the line: monkeypatch.setattr(obj, "f", v) / ("a.b.f", v),
    mock.patch("a.b.f") / patch.object(obj, "f") in a decorator, a with or a call."""
    out: dict[str, int] = {}
    for node in [*test.decorator_list, *_own_nodes(test)]:
        if not isinstance(node, ast.Call):
            continue
        name = _call_name(node)
        owner = node.func.value if isinstance(node.func, ast.Attribute) else None
        target: ast.expr | None = None
        if name == "setattr" and owner is not None and "monkeypatch" in _dump(owner) and node.args:
            target = node.args[1] if len(node.args) >= 3 else node.args[0]
        elif name == "patch" and node.args:
            target = node.args[0]
        elif name == "object" and _call_name(owner) == "patch" and len(node.args) >= 2:
            target = node.args[1]
        if isinstance(target, ast.Constant) and isinstance(target.value, str):
            out.setdefault(target.value.rsplit(".", 1)[-1], node.lineno)
    return out


def mock_under_test(test: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[tuple[int, str]]:
    """(line, detail) for each assert on the value of a call to a name the test replaced (see _patched_names)."""
    patched = _patched_names(test)
    if not patched:
        return
    own = list(_own_nodes(test))
    from_patched: set[str] = set()  # variables bound to the value of a call to a replaced name
    for node in own:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _call_name(node.value) in patched:
            from_patched |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    for node in own:
        if not isinstance(node, ast.Assert):
            continue
        for sub in ast.walk(node.test):
            hit = ""
            if isinstance(sub, ast.Call) and _call_name(sub) in patched:
                hit = _call_name(sub)
            elif isinstance(sub, ast.Name) and sub.id in from_patched:
                hit = sub.id
            if hit:
                yield node.lineno, f"asserts on {hit}, replaced on line {patched.get(hit, 0) or min(patched.values())}"
                break


def _module_literals(tree: ast.Module) -> dict[str, ast.expr]:
    """Module-level names bound to a list / tuple / set literal (parametrize and sampled_from read them)."""
    return {t.id: s.value for s in tree.body if isinstance(s, ast.Assign)
            and isinstance(s.value, ast.List | ast.Tuple | ast.Set) for t in s.targets if isinstance(t, ast.Name)}


def _arithmetic_names(body: list[ast.stmt]) -> set[str]:
    """Names bound, in these statements, to arithmetic (``by_hand = 96 * (12 * h * h + 13 * h) + ...``)."""
    return {t.id for s in body if isinstance(s, ast.Assign) and _hand_arithmetic(s.value)
            for t in s.targets if isinstance(t, ast.Name)}


def _worked(node: ast.expr, arithmetic: set[str]) -> bool:
    """Arithmetic written in the test (a BinOp, a name bound to one, a tuple of such): a hand derivation."""
    if isinstance(node, ast.Call) and _call_name(node) in {"float", "int", "approx"} and node.args:
        node = node.args[0]
    if isinstance(node, ast.Tuple | ast.List):
        return bool(node.elts) and all(_worked(e, arithmetic) for e in node.elts)
    return _hand_arithmetic(node) or (isinstance(node, ast.Name) and node.id in arithmetic)


def _hand_arithmetic(node: ast.AST) -> bool:
    """A BinOp of constants and names only (``96 * (12 * h * h + 13 * h)``), not of outputs (``kept.weights -
    base.weights``, ``f(x) * 2``)."""
    if not isinstance(node, ast.BinOp):
        return False
    leaves = [n for n in ast.walk(node) if not isinstance(n, ast.BinOp | ast.UnaryOp | ast.operator | ast.unaryop
                                                          | ast.expr_context)]
    return all(isinstance(n, ast.Constant | ast.Name) for n in leaves)


def _expected_side(test: ast.FunctionDef | ast.AsyncFunctionDef, arithmetic: set[str] = frozenset()) -> set[int]:  # type: ignore[assignment]
    """ids of the integer constants on the expected side of a check (the operands of an assert's comparison, the
    first argument of approx, the arguments of assert_* / isclose calls), less those a hand derivation stands beside:
    an operand of the same comparison that is arithmetic (``by_hand == 174_615_846_912``, ``f == 10 * 2 * r == N``)
    and factors of arithmetic (``1357.7e12 / 259992950784``)."""
    arithmetic = set(arithmetic) | _arithmetic_names([s for s in _own_nodes(test) if isinstance(s, ast.stmt)])
    out: set[int] = set()
    beside_work: set[int] = set()  # constants of a comparison one of whose operands is arithmetic
    for node in ast.walk(test):
        if isinstance(node, ast.Assert):
            for cmp in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
                if any(_worked(side, arithmetic) for side in [cmp.left, *cmp.comparators]):
                    beside_work |= {id(sub) for sub in ast.walk(cmp) if isinstance(sub, ast.Constant)}
    for node in ast.walk(test):
        sides: list[ast.expr] = []
        if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare):
            sides = [node.test.left, *node.test.comparators]
        elif isinstance(node, ast.Call) and _call_name(node) == "approx":
            sides = node.args[:1]
        elif isinstance(node, ast.Call) and _call_name(node) in CHECK_CALLS:
            sides = node.args[:2]
        for side in sides:
            if _worked(side, arithmetic):
                continue
            out |= {id(sub) for sub in _outside_calls(side) if isinstance(sub, ast.Constant)}
    return out - beside_work


def _outside_calls(node: ast.expr) -> Iterator[ast.AST]:
    """``ast.walk`` that does not enter the arguments of a call (``f(123456789)``: an input of the code under test,
    not an expected value), except the wrappers of an expected value (approx, float, int, tuple, list)."""
    todo: list[ast.AST] = [node]
    while todo:
        sub = todo.pop()
        yield sub
        if isinstance(sub, ast.Call) and _call_name(sub) not in {"approx", "float", "int", "tuple", "list"}:
            continue
        todo.extend(ast.iter_child_nodes(sub))


def _tests(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            yield node


def _dump(node: ast.AST) -> str:
    return ast.dump(node, annotate_fields=False, include_attributes=False)


def shared_helpers() -> set[str]:
    """Checking helpers defined in any tests/*.py (conftest, hostile-input contract, simulators): a test imports them
    by name, so a name-level match is enough for this listing."""
    names: set[str] = set()
    for path in (ROOT / "tests").glob("*.py"):
        names |= _helpers_that_check(ast.parse(path.read_text()))
    return {n for n in names if not n.startswith("test")}


def audit_file(path: Path, shared: frozenset[str] = frozenset(),
               digits: int = 6) -> Iterator[tuple[str, int, str, str]]:
    """Findings in one test file: (kind, line, test name, detail)."""
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    checking = _helpers_that_check(tree, shared & _imported_names(tree))
    module_strings = _module_strings(tree)
    readers = {f.name: why for f in tree.body if isinstance(f, ast.FunctionDef) and not f.name.startswith("test")
               for why in [_reads_generated(f, source, module_strings)] if why}
    for top in tree.body:  # module-level pytestmark = pytest.mark.skip(...)
        if isinstance(top, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in top.targets):
            for mark in getattr(top.value, "elts", [top.value]):
                why = _skip_without_reason(mark)
                if why:
                    yield "skip-no-reason", top.lineno, "pytestmark", why
    literals = _module_literals(tree)
    for test in _tests(tree):
        why = single_draw(test, literals)
        if why:
            yield "single-draw", test.lineno, test.name, why
        why = empty_parametrize(test, literals)
        if why:
            yield "empty-parametrize", test.lineno, test.name, why
        for line, why in mock_under_test(test):
            yield "mock-under-test", line, test.name, why
        for c in (n for n in ast.walk(test) if isinstance(n, ast.Call) and _call_name(n) == "raises" and n.args):
            caught = getattr(c.args[0], "elts", [c.args[0]])
            if any(_call_name(e) in {"Exception", "BaseException"} for e in caught) \
                    and not any(kw.arg == "match" for kw in c.keywords):
                yield "broad-raises", c.lineno, test.name, ast.get_source_segment(source, c) or ""
        for stmt in (n for n in ast.walk(test) if isinstance(n, ast.stmt)):
            why = bare_compare(stmt)
            if why:
                yield "bare-compare", stmt.lineno, test.name, f"{why}: {ast.get_source_segment(source, stmt) or ''}"
        calls = {_call_name(c) for c in ast.walk(test) if isinstance(c, ast.Call)}
        args = {a.arg for a in [*test.args.args, *test.args.kwonlyargs]}
        direct = _checks_itself(test)
        if not direct and not (calls & checking) and not (args & shared):
            yield "no-assert", test.lineno, test.name, "no assert, raises or checking helper"
        own_asserts = [n for n in _own_nodes(test) if isinstance(n, ast.Assert)]
        if own_asserts and not (calls & checking) and not (args & shared) and not any(
                c in {"raises", "warns"} or ASSERT_CALL.match(c) for c in calls) \
                and all(_exit_zero(n.test) for n in own_asserts):
            yield "exit-only", test.lineno, test.name, "every assert is an exit status of 0"
        if direct and vacuous(test, _literal_names(tree.body)):
            yield "vacuous-loop", test.lineno, test.name, "every assert in a loop over an iterable not shown non-empty"
        for a in (n for n in ast.walk(test) if isinstance(n, ast.Assert)):
            why = tautology(a.test)
            if why:
                yield "tautology", a.lineno, test.name, f"{why}: {ast.get_source_segment(source, a.test) or ''}"
        for c in (n for n in ast.walk(test) if isinstance(n, ast.Call) and _call_name(n) in CHECK_CALLS):
            if len(c.args) >= 2 and _dump(c.args[0]) == _dump(c.args[1]) and not isinstance(c.args[0], ast.Constant):
                yield "tautology", c.lineno, test.name, f"{_call_name(c)} of a value with itself"
        generated = _reads_generated(test, source, module_strings) or next(
            (f"{why} (through {name}())" for name, why in readers.items() if name in calls), "")
        if generated:
            yield "snapshot", test.lineno, test.name, f"reads {generated}"
        for dec in test.decorator_list:
            for mark in ([dec] if not isinstance(dec, ast.Call) or _call_name(dec) != "parametrize" else []):
                why = _skip_without_reason(mark)
                if why:
                    yield "skip-no-reason", test.lineno, test.name, why
        for c in (n for n in ast.walk(test) if isinstance(n, ast.Call)):
            owner = c.func.value if isinstance(c.func, ast.Attribute) else None
            if _call_name(c) in {"skip", "xfail"} and isinstance(owner, ast.Name) and owner.id == "pytest" \
                    and not c.args and not c.keywords:
                yield "skip-no-reason", c.lineno, test.name, f"pytest.{_call_name(c)}() with no message"
        for w in (n for n in ast.walk(test) if isinstance(n, ast.With)):
            for item in w.items:
                if _call_name(item.context_expr) == "suppress" and any(
                        isinstance(n, ast.Assert) for s in w.body for n in ast.walk(s)):
                    yield "swallow", w.lineno, test.name, "contextlib.suppress around an assert"
        asserts = [n for n in ast.walk(test) if isinstance(n, ast.Assert)]
        other_checks = any(
            isinstance(c, ast.Call) and (_call_name(c) in {"raises", "warns"} or ASSERT_CALL.match(_call_name(c)))
            for c in ast.walk(test)
        )
        if asserts and not other_checks and not (calls & checking) and all(_is_weak(a.test) for a in asserts):
            yield "weak-assert", test.lineno, test.name, f"{len(asserts)} assert(s), all truthiness / None / type"
        elif asserts and not other_checks and not (calls & checking) and all(_is_sanity(a.test) for a in asserts):
            yield "sanity-only", test.lineno, test.name, f"{len(asserts)} assert(s), all sign / finiteness"
        prose = _prose(test, lines)
        expected_side = _expected_side(test, _arithmetic_names(tree.body))
        for node in ast.walk(test):
            pinned_int = isinstance(node, ast.Constant) and isinstance(node.value, int) \
                and not isinstance(node.value, bool) and id(node) in expected_side \
                and node.value & (node.value - 1) != 0  # a power of two is a size written out, not an output
            if isinstance(node, ast.Constant) and (isinstance(node.value, float) or pinned_int):
                text = ast.get_source_segment(source, node) or ""
                if _significant_digits(text) < digits:
                    continue
                window = lines[max(0, node.lineno - 3) : node.lineno]
                if any("#" in PRAGMA.sub("", line) for line in window) or _explained(text, prose):
                    continue
                yield "long-literal", node.lineno, test.name, text
            if isinstance(node, ast.Compare):
                left = _dump(node.left)
                for right in node.comparators:
                    r = right
                    lhs = node.left
                    # approx(a) == a: unwrap the approx call on either side
                    if isinstance(lhs, ast.Call) and _call_name(lhs) == "approx" and lhs.args:
                        left = _dump(lhs.args[0])
                    if isinstance(r, ast.Call) and _call_name(r) == "approx" and r.args:
                        r = r.args[0]
                    if _dump(r) == left and not isinstance(r, ast.Constant):
                        yield "self-compare", node.lineno, test.name, ast.get_source_segment(source, node) or ""
            if isinstance(node, ast.Call):
                why = loose_tolerance(node)
                if why:
                    yield "loose-approx", node.lineno, test.name, why
            if isinstance(node, ast.Try):
                for handler in node.handlers:
                    names = (
                        {None}
                        if handler.type is None
                        else {_call_name(t) for t in getattr(handler.type, "elts", [handler.type])}
                    )
                    quiet = all(isinstance(s, ast.Pass | ast.Continue | ast.Return) for s in handler.body)
                    guards = any(isinstance(n, ast.Assert) for s in node.body for n in ast.walk(s))
                    if quiet and (names & BROAD or guards):
                        yield "swallow", handler.lineno, test.name, f"except {', '.join(map(str, names))}: pass"
        for stmt in test.body:
            if (
                isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Call)
                and _call_name(stmt.value) == "skip"
            ):
                yield "always-skip", stmt.lineno, test.name, "pytest.skip at the top of the body"
        for dec in test.decorator_list:
            if _dump(dec).endswith("Attribute(Name('pytest', Load()), 'mark', Load()), 'skip', Load())"):
                yield "always-skip", test.lineno, test.name, "@pytest.mark.skip"
        assigned: dict[str, str] = {}
        assigned_line: dict[str, int] = {}
        for node in ast.walk(test):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                if isinstance(node.value, ast.Call):
                    assigned[node.targets[0].id] = _dump(node.value)
                    assigned_line[node.targets[0].id] = node.lineno
        # since testaudit38: a state change between the two calls (a monkeypatched reference path, a file written,
        # a cache cleared) makes them two different computations, not one compared with itself
        changes = [c.lineno for c in ast.walk(test) if isinstance(c, ast.Call) and _changes_state(c)]
        compared: list[tuple[ast.AST, list[ast.expr]]] = [
            (a, [a.test.left, *a.test.comparators]) for a in asserts if isinstance(a.test, ast.Compare)]
        compared += [(c, list(c.args[:2])) for c in ast.walk(test)
                     if isinstance(c, ast.Call) and _call_name(c) in CHECK_CALLS and len(c.args) >= 2]
        for where, sides in compared:
            dumps = set()
            at = [getattr(where, "lineno", 0)]
            for side in sides:
                inner = side.args[0] if isinstance(side, ast.Call) and _call_name(side) == "approx" and side.args \
                    else side
                if isinstance(inner, ast.Name) and inner.id in assigned:
                    dumps.add(assigned[inner.id])
                    at.append(assigned_line[inner.id])
                elif isinstance(inner, ast.Call):
                    dumps.add(_dump(inner))
                else:
                    dumps.add(_dump(inner) + str(id(inner)))
            if len(dumps) < len(sides) and not any(min(at) < line < max(at) for line in changes):
                seg = ast.get_source_segment(source, where) or ""  # type: ignore[arg-type]
                yield "same-oracle", getattr(where, "lineno", 0), test.name, seg


def duplicates(paths: list[Path]) -> Iterator[tuple[str, int, str, str]]:
    """Test functions whose bodies (decorators included, the name excluded) are identical."""
    seen: dict[str, list[tuple[Path, int, str]]] = defaultdict(list)
    for path in paths:
        tree = ast.parse(path.read_text())
        for test in _tests(tree):
            body = "".join(_dump(s) for s in [*test.decorator_list, test.args, *test.body])
            # a docstring alone differing does not make two tests different
            if test.body and isinstance(test.body[0], ast.Expr) and isinstance(test.body[0].value, ast.Constant):
                body = "".join(_dump(s) for s in [*test.decorator_list, test.args, *test.body[1:]])
            seen[hashlib.sha1(body.encode()).hexdigest()].append((path, test.lineno, test.name))
    for group in seen.values():
        if len(group) > 1:
            first = group[0]
            for path, line, name in group[1:]:
                rel = first[0].relative_to(ROOT)
                yield "duplicate", line, name, f"{path.relative_to(ROOT)} = {rel}:{first[1]} {first[2]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--glob", default="tests/test_*.py")
    parser.add_argument("--kind", action="append", choices=KINDS)
    parser.add_argument("--counts", action="store_true")
    parser.add_argument("--digits", type=int, default=6, help="long-literal: at least this many significant digits")
    args = parser.parse_args(argv)
    paths = sorted(Path(p) for p in glob.glob(str(ROOT / args.glob)))
    findings: list[tuple[str, str, int, str, str]] = []
    shared = frozenset(shared_helpers())
    for path in paths:
        for kind, line, name, detail in audit_file(path, shared, args.digits):
            findings.append((kind, str(path.relative_to(ROOT)), line, name, detail))
    for kind, line, name, detail in duplicates(paths):
        findings.append((kind, detail.split(" = ")[0], line, name, detail))
    kinds = set(args.kind or KINDS)
    findings = [f for f in findings if f[0] in kinds]
    if args.counts:
        tests = sum(1 for p in paths for _ in _tests(ast.parse(p.read_text())))
        print(f"files {len(paths)}  tests {tests}")
        for kind in KINDS:
            if kind in kinds:
                hit = [f for f in findings if f[0] == kind]
                print(f"{kind:17s} {len(hit):5d} findings in {len({(f[1], f[3]) for f in hit}):4d} tests")
        return 0
    for kind, file, line, name, detail in findings:
        print(f"{kind:17s} {file}:{line} {name}: {detail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
