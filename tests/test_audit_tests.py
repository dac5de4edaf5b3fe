"""scripts/audit_tests.py (testaudit31, testaudit37): each kind of the house rule's defects, written by hand into a
test file here, is listed on the line where it is, and the legitimate look-alikes beside them are not."""

from __future__ import annotations

from pathlib import Path

from conftest import script_module

SOURCE = '''
import contextlib
import math
import sys

import numpy as np
import pytest
from hypothesis import given, strategies as st
from helpers import checks_for_me


def f(x):
    return x


def _local_check(v):
    assert v == 1


def test_runs_only():
    f(1)


def test_calls_a_name_it_never_imported():
    refused(1)


def test_calls_an_imported_checker():
    checks_for_me(f(1))


def test_takes_a_checking_fixture(refused):
    refused(f(1))


def test_calls_a_local_checker():
    _local_check(f(1))


def test_tautologies():
    assert True
    assert (f(1) == 2, "message")
    assert f(1) or not f(1)
    assert len([f(1)]) >= 0
    assert 1 == 1
    x = f(2)
    assert x == x


def test_same_oracle():
    expected = f(3)
    assert f(3) == expected


def test_swallowed():
    try:
        assert f(1) == 2
    except ValueError:
        pass
    with contextlib.suppress(AssertionError):
        assert f(1) == 3


@pytest.mark.skip
def test_skipped():
    assert f(1) == 1


@pytest.mark.skipif(f(1) == 1)
def test_skipif():
    assert f(1) == 1


@pytest.mark.skipif(f(1) == 1, reason="f is the identity")
def test_skipif_with_reason():
    assert f(1) == 1


def test_skip_call():
    if f(1):
        pytest.skip()
    assert f(2) == 2


def test_snapshot():
    assert f("scalemodel/data/validation_residuals.json")


def test_independent():
    assert f(3) == 3  # the identity, by hand
    assert f(2) != f(3)


def test_loops_over_what_the_code_returned():
    for row in f([]):
        assert row == 1
    assert all(r > 0 for r in f([]))


def test_only_runs_the_command():
    assert f(1).code == 0


def test_loops_over_a_literal():
    want = {1: 1, 2: 2}
    for k, v in want.items():
        assert f(k) == v
    for k in (1, 2):
        assert f(k) == k


ONE = [7]
NONE = []


def test_loose_tolerances():
    assert f(3.0) == pytest.approx(3.0, 0.5)
    assert f(3.0) == pytest.approx(3.0, abs=5)
    assert math.isclose(f(-2.0), -2.0, abs_tol=2.0)
    np.testing.assert_allclose(f(4.0), 4.0, atol=4.0)


def test_tight_tolerances():
    assert f(3.0) == pytest.approx(3.0, 0.01)  # the identity
    assert f(3.0) == pytest.approx(3.0, abs=0.5)
    assert f(0.0) == pytest.approx(0.0, abs=1e-9)


def test_compares_without_assert():
    assert f(1) == 1
    f(2) == 2
    np.isclose(f(2.0), 2.0)


def test_approx_object_asserted():
    assert pytest.approx(f(1.0))


def test_weak_new_forms():
    assert f(1) != 0
    assert type(f(1.0)) is float
    assert len([f(1)]) >= 1
    assert not math.isnan(f(1.0))


@given(st.just(3), st.sampled_from(ONE))
def test_one_draw(a, b):
    assert f(a) + f(b) == a + b


@given(st.integers(2, 2), st.floats(min_value=1.0, max_value=1.0))
def test_equal_bounds(a, b):
    assert f(a) * b == a * b


@given(st.just(3), st.integers(1, 9))
def test_one_value_among_others(a, b):
    assert f(a) + f(b) == a + b


@pytest.mark.parametrize("x", [])
def test_over_nothing(x):
    assert f(x) == x


@pytest.mark.parametrize("x", NONE)
def test_over_an_empty_name(x):
    assert f(x) == x


def test_replaces_what_it_checks(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "f", lambda x: 2 * x)
    assert f(2) == 4
    got = f(3)
    assert got == 6


def test_replaces_a_dependency(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "_local_check", lambda v: None)
    assert f(2) == 2  # the identity


def test_any_crash_passes():
    with pytest.raises(Exception):
        f(None) + 1
    with pytest.raises((ValueError, Exception), match="unsupported"):
        f(None) + 1


def test_pinned_output():
    assert f(123456789) == 987654321
    assert f(0.1) == pytest.approx(0.1234567)


def test_hand_product_beside_its_arithmetic():
    by_hand = 96 * (12 * 12288 * 12288 + 13 * 12288)
    assert f(by_hand) == by_hand == 173_961_510_912
    assert f(1 << 30) == 1_073_741_824
    assert f(1.0) == pytest.approx(1.234567)  # published figure, cited here
'''


def _findings(tmp_path: Path) -> set[tuple[str, int, str]]:
    audit = script_module("audit_tests")
    path = tmp_path / "test_sample.py"
    path.write_text(SOURCE)
    shared = frozenset({"checks_for_me", "refused"})  # checking helpers of other test files (conftest: refused)
    return {(kind, line, name) for kind, line, name, _ in audit.audit_file(path, shared)}


def _line(text: str) -> int:
    return SOURCE.splitlines().index(text) + 1


def test_each_kind_is_found_on_its_line(tmp_path: Path) -> None:
    got = _findings(tmp_path)
    want = {
        ("no-assert", _line("def test_runs_only():"), "test_runs_only"),
        ("no-assert", _line("def test_calls_a_name_it_never_imported():"), "test_calls_a_name_it_never_imported"),
        ("tautology", _line("    assert True"), "test_tautologies"),
        ("tautology", _line('    assert (f(1) == 2, "message")'), "test_tautologies"),
        ("tautology", _line("    assert f(1) or not f(1)"), "test_tautologies"),
        ("tautology", _line("    assert len([f(1)]) >= 0"), "test_tautologies"),
        ("tautology", _line("    assert 1 == 1"), "test_tautologies"),
        ("tautology", _line("    assert x == x"), "test_tautologies"),
        ("same-oracle", _line("    assert f(3) == expected"), "test_same_oracle"),
        ("swallow", _line("    except ValueError:"), "test_swallowed"),
        ("swallow", _line("    with contextlib.suppress(AssertionError):"), "test_swallowed"),
        ("skip-no-reason", _line("def test_skipped():"), "test_skipped"),
        ("skip-no-reason", _line("def test_skipif():"), "test_skipif"),
        ("skip-no-reason", _line("        pytest.skip()"), "test_skip_call"),
        ("snapshot", _line("def test_snapshot():"), "test_snapshot"),
        ("exit-only", _line("def test_only_runs_the_command():"), "test_only_runs_the_command"),
        ("vacuous-loop", _line("def test_loops_over_what_the_code_returned():"),
         "test_loops_over_what_the_code_returned"),
    }
    assert want <= got, sorted(want - got)


def test_the_testaudit38_kinds_are_found_on_their_lines(tmp_path: Path) -> None:
    """A positional rel of 0.5, absolute tolerances as large as the expected value, comparisons thrown away, an
    approx object asserted, the new weak forms, hypothesis strategies of one value, parametrize over nothing, a
    replaced function asserted on, integers pinned on the expected side with nothing that derives them, and
    pytest.raises(Exception) with no match."""
    got = _findings(tmp_path)
    loose = "test_loose_tolerances"
    want = {
        ("loose-approx", _line("    assert f(3.0) == pytest.approx(3.0, 0.5)"), loose),
        ("loose-approx", _line("    assert f(3.0) == pytest.approx(3.0, abs=5)"), loose),
        ("loose-approx", _line("    assert math.isclose(f(-2.0), -2.0, abs_tol=2.0)"), loose),
        ("loose-approx", _line("    np.testing.assert_allclose(f(4.0), 4.0, atol=4.0)"), loose),
        ("bare-compare", _line("    f(2) == 2"), "test_compares_without_assert"),
        ("bare-compare", _line("    np.isclose(f(2.0), 2.0)"), "test_compares_without_assert"),
        ("tautology", _line("    assert pytest.approx(f(1.0))"), "test_approx_object_asserted"),
        ("sanity-only", _line("def test_weak_new_forms():"), "test_weak_new_forms"),
        ("single-draw", _line("def test_one_draw(a, b):"), "test_one_draw"),
        ("single-draw", _line("def test_equal_bounds(a, b):"), "test_equal_bounds"),
        ("empty-parametrize", _line("def test_over_nothing(x):"), "test_over_nothing"),
        ("empty-parametrize", _line("def test_over_an_empty_name(x):"), "test_over_an_empty_name"),
        ("mock-under-test", _line("    assert f(2) == 4"), "test_replaces_what_it_checks"),
        ("mock-under-test", _line("    assert got == 6"), "test_replaces_what_it_checks"),
        ("long-literal", _line("    assert f(123456789) == 987654321"), "test_pinned_output"),
        ("long-literal", _line("    assert f(0.1) == pytest.approx(0.1234567)"), "test_pinned_output"),
        ("broad-raises", _line("    with pytest.raises(Exception):"), "test_any_crash_passes"),
    }
    assert want <= got, sorted(want - got)
    # tight tolerances, a strategy of one value beside a wide one, a patched dependency, hand arithmetic beside its
    # product, a power of two and a commented figure are not listed
    clean = {"test_tight_tolerances", "test_one_value_among_others", "test_replaces_a_dependency",
             "test_hand_product_beside_its_arithmetic"}
    assert not {f for f in got if f[2] in clean}, sorted(f for f in got if f[2] in clean)
    # a broad class with match= names the error it expects: listed once, not twice
    assert sum(1 for f in got if f[0] == "broad-raises") == 1
    # the integer 123456789 is an input (an argument of the code under test), not listed: the expected 987654321 is
    audit = script_module("audit_tests")
    details = {d for k, _, n, d in audit.audit_file(tmp_path / "test_sample.py") if n == "test_pinned_output"}
    assert details == {"987654321", "0.1234567"}, details


def test_the_look_alikes_are_not_listed(tmp_path: Path) -> None:
    """A checking helper imported by name, a checking fixture, a local checker, a skip with its reason, an
    independent expected value and a loop over a literal are not defects."""
    clean = {"test_calls_an_imported_checker", "test_takes_a_checking_fixture", "test_calls_a_local_checker",
             "test_skipif_with_reason", "test_independent", "test_loops_over_a_literal"}
    assert not {f for f in _findings(tmp_path) if f[2] in clean}
