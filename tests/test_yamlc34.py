"""yamlc34: ``hardware show`` writes and reads back its YAML with libyaml's C classes, byte for byte as before.

report.hardware.yaml_within dumped each spec and loaded it back with PyYAML's pure-Python classes (~40 ms a spec,
three quarters of test_fix29's CPU time). It now uses yamlread.FastDumper / FastLoader (libyaml's CSafeDumper /
CSafeLoader where PyYAML was built with it) where ``libyaml_agrees`` says libyaml writes the same text, and PyYAML's
classes elsewhere. Checked here against PyYAML's pure-Python classes, forced in place of the fast ones (the
fallback a wheel without libyaml takes): the same text for every built-in, and for data outside the guard.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import yaml

from scalemodel.engine.hardware import show_spec
from scalemodel.report.hardware import _sources_last, libyaml_agrees, yaml_within
from scalemodel.specs import yamlread
from scalemodel.specs.loader import builtin_names

LIBYAML = pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without libyaml: nothing to compare")
BUILTINS = [n for kind in ("accelerator", "cluster", "workload", "scenario") for n in builtin_names(kind)]


def _pure_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yamlread, "FastDumper", yaml.SafeDumper)
    monkeypatch.setattr(yamlread, "FastLoader", yaml.SafeLoader)


def _dumps(data: Any, unicode: bool) -> tuple[str, str]:
    """(libyaml's text, PyYAML's pure-Python text) unfolded, as yaml_within writes before its own wrap."""
    return tuple(yaml.dump(data, Dumper=d, sort_keys=False, width=10**6, allow_unicode=unicode)  # type: ignore[return-value]
                 for d in (yamlread.FastDumper, yaml.SafeDumper))


def test_the_fast_classes_are_libyamls_where_installed() -> None:
    expected = (yaml.CSafeDumper, yaml.CSafeLoader) if yaml.__with_libyaml__ else (yaml.SafeDumper, yaml.SafeLoader)
    assert (yamlread.FastDumper, yamlread.FastLoader) == expected


@LIBYAML
def test_every_builtin_is_written_the_same_by_libyaml() -> None:
    assert len(BUILTINS) > 80
    for name in BUILTINS:
        data = _sources_last(show_spec(name).spec.model_dump(mode="json"))
        assert libyaml_agrees(data), name  # every built-in takes the fast path
        for unicode in (True, False):
            fast, pure = _dumps(data, unicode)
            assert fast == pure, (name, unicode)


@pytest.mark.parametrize("name", ["dgx-1-p100", "llama3-405b", "default"])
@pytest.mark.parametrize("width", [1, 25, 80])
def test_hardware_show_text_is_the_same_without_libyaml(name: str, width: int,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """dgx-1-p100 has a '§' (escaped when allow_unicode is off); width 1 takes the folding fallback."""
    data = _sources_last(show_spec(name).spec.model_dump(mode="json"))
    fast = [yaml_within(data, width, allow_unicode=u) for u in (True, False)]
    _pure_python(monkeypatch)
    assert [yaml_within(data, width, allow_unicode=u) for u in (True, False)] == fast


#: each written otherwise by libyaml, found by comparing the two emitters on random strings
OUTSIDE = {
    "beyond U+FFFF": {"description": "fast \U0001F680 cluster"},  # libyaml: "\U0001F680" even with allow_unicode
    "empty key": {"sources": {"": "x"}},  # PyYAML: "? ''"
    "key of 128 characters": {"k" * 128: 1},  # PyYAML's simple-key limit is < 128, libyaml's <= 128
    "non-ASCII key": {"é" * 70: 1},  # libyaml counts its 140 bytes against the limit, PyYAML its 70 characters
    "control character in a key": {"a\rb": 1},
}


@pytest.mark.parametrize("case", list(OUTSIDE))
def test_keys_and_strings_libyaml_writes_otherwise_take_pure_python(case: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    data = {"name": "x", "spec": OUTSIDE[case]}
    assert not libyaml_agrees(data)
    if yaml.__with_libyaml__:  # the reason for the guard: the two emitters differ here
        assert any(fast != pure for fast, pure in (_dumps(data, u) for u in (True, False)))
    texts = [yaml_within(data, w, allow_unicode=u) for w in (12, 80) for u in (True, False)]
    _pure_python(monkeypatch)
    assert [yaml_within(data, w, allow_unicode=u) for w in (12, 80) for u in (True, False)] == texts


_CHARS = [*"ab :-#'\"\\{}[],&*!|>%@`?~=.", "\xa7", "é", "\u2013", "\xa0", "\ufffd", "\u2028", "yes", "null", "1e3",
          "- ", ": ", " #", "http://x.y/z?a=b&c", "x" * 40, "y" * 95]


def _tree(rng: random.Random, depth: int) -> Any:
    def text() -> str:
        return "".join(rng.choice(_CHARS) for _ in range(rng.choice([0, 1, 3, 8, 30])))
    r = rng.random()
    if depth > 3 or r < 0.4:
        return rng.choice([text(), text(), rng.randint(-10**20, 10**20), rng.random() * 10.0 ** rng.randint(-30, 30),
                           None, True, float("inf"), -0.0])
    if r < 0.7:
        return [_tree(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {(text() or "k"): _tree(rng, depth + 1) for _ in range(rng.randint(0, 4))}


@LIBYAML
def test_libyaml_writes_as_pyyaml_wherever_the_guard_lets_it() -> None:
    """The guard's claim on random trees of tricky characters (quotes, indicators, ' #', non-ASCII, U+2028)."""
    rng = random.Random(34)
    checked = 0
    for _ in range(600):
        data = {"top": _tree(rng, 0), "k2": _tree(rng, 1)}
        if not libyaml_agrees(data):
            continue
        checked += 1
        for unicode in (True, False):
            fast, pure = _dumps(data, unicode)
            assert fast == pure, data
    assert checked > 150

