"""tidy39: structural fixes of round 38's code that change no output, and a reference for hybrid deferred wgrad.

(1) A pinned recompute sub-field refused for the recompute mode it runs under carries that field on the refusal
(errors.InputError.needs_recompute, set by specs.training's rule through specs.base.field_error), which plan's
_build_specs keys on; it compared the refusal's ``where`` with the two places it expected the field written.
(6) The deferred output-layer wgrad's flush idle of a hybrid (Mamba) pattern whose ranks hold different kinds: each
rank's own backward (its own layers, Megatron's split of the pattern), computed rank by rank here.
"""

from __future__ import annotations

import json

import pytest

from scalemodel.api import strategy_spec
from scalemodel.errors import InputError
from scalemodel.specs.base import SpecError

# --- (1) the refusal's marker ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("fields", "marked"), [
    # StrategySpec's rules that name recompute (specs.training): the field refused for the mode it runs under
    ({"recompute_layers": 2}, "recompute_layers"),
    ({"recompute_layers": 2, "recompute": "selective"}, "recompute_layers"),
    ({"recompute_method": "uniform"}, "recompute_method"),
    ({"recompute_method": "uniform", "recompute": "selective"}, "recompute_method"),
    ({"recompute_modules": "core_attn"}, "recompute_modules"),
    ({"recompute_modules": "core_attn", "recompute": "full"}, "recompute_modules"),
    # refusals of other rules carry no marker: a chunk of 0 layers under uniform is refused at recompute full too
    ({"recompute": "full", "recompute_layers": 0, "recompute_method": "uniform"}, ""),
    ({"tp": 0}, ""),
    ({"recompute": "bogus"}, "")])
def test_a_refusal_for_the_recompute_mode_names_its_field(fields: dict, marked: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(InputError) as err:
        strategy_spec(**fields)
    assert err.value.needs_recompute == marked, err.value
    # located further (InputError.at, SpecError.located) it keeps the marker, and the text does not show it
    assert err.value.at("here").needs_recompute == marked
    assert "\x1d" not in str(err.value) and "recompute\x1d" not in err.value.allowed
    assert SpecError("x", ("a",), needs_recompute=marked).located(("b",)).needs_recompute == marked


def _refusal(cli, *args: str) -> str:  # type: ignore[no-untyped-def]
    r = cli(*args)
    assert r.code == 2 and r.err.count("\n") == 1, (r.code, r.err)
    return r.err.strip()


_PLAN = ("plan", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "16", "--global-batch", "32", "--top", "2", "--json")


@pytest.mark.parametrize(("item", "mode"), [("recompute_layers=2", "full"), ("recompute_method=uniform", "full"),
                                            ("recompute_modules=core_attn", "selective")])
def test_plan_keys_the_pinned_field_on_the_marker(cli, item: str, mode: str) -> None:  # type: ignore[no-untyped-def]
    """The route the marker serves: plan validates the pin at the mode it needs and searches that mode only; where
    recompute is pinned too (the refusal names both places) the spec's refusal stands, as predict's."""
    r = cli(*_PLAN, "--set", f"strategy.{item}")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert all(p["strategy"]["recompute"] == mode for p in doc["ranked"]) and doc["ranked"]
    other = "none"
    line = _refusal(cli, *_PLAN, "--set", f"strategy.{item}", "--set", f"strategy.recompute={other}")
    assert line.startswith(f"error: --set strategy.{item.split('=')[0]}: "), line
    assert f"needs recompute: {mode} (got '{other}')" in line, line
