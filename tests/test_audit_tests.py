"""scripts/audit_tests.py (testaudit31, testaudit37): each kind of the house rule's defects, written by hand into a
test file here, is listed on the line where it is, and the legitimate look-alikes beside them are not."""

from __future__ import annotations

from pathlib import Path

from conftest import script_module

SOURCE = '''
import contextlib
import pytest
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


def test_the_look_alikes_are_not_listed(tmp_path: Path) -> None:
    """A checking helper imported by name, a checking fixture, a local checker, a skip with its reason, an
    independent expected value and a loop over a literal are not defects."""
    clean = {"test_calls_an_imported_checker", "test_takes_a_checking_fixture", "test_calls_a_local_checker",
             "test_skipif_with_reason", "test_independent", "test_loops_over_a_literal"}
    assert not {f for f in _findings(tmp_path) if f[2] in clean}
