"""Review of the fuzz21 merge (round 21's refusals): a rule across two fields names the ``--set`` item that made the
conflict, not the built-in file's line of the field the user never wrote."""

from __future__ import annotations

from test_hostile_inputs import no_hang, refused  # noqa: F401 (no_hang: autouse)

NANO = ["predict", "-c", "dgx-h100", "-m", "nemotron-3-nano", "-n", "16", "--ep", "8"]


def test_set_pattern_without_m_names_the_set_item(cli) -> None:  # type: ignore[no-untyped-def]
    # nemotron-3-nano's file states the Mamba widths; the --set removed every M: the error was
    # ".../nemotron-3-nano.yaml:25: hybrid.mamba: ...", a line the user did not write
    line = refused(cli, *NANO, "--set", "model.hybrid.pattern=" + "*E" * 26)
    assert line == ("error: --set model.hybrid.pattern: hybrid.mamba: set but hybrid.pattern has no M layer; M for "
                    "each Mamba-2 layer, or no mamba block")


def test_set_pattern_without_e_names_the_set_item(cli) -> None:  # type: ignore[no-untyped-def]
    # the moe / E rule is the same rule across two fields (was located at the file's moe line)
    line = refused(cli, *NANO, "--set", "model.hybrid.pattern=" + "M*" * 26)
    assert line.startswith("error: --set model.hybrid.pattern: moe: moe is set but hybrid.pattern has no E layer; ")


def test_set_of_the_named_field_itself_is_still_named(cli) -> None:  # type: ignore[no-untyped-def]
    # --set of the rule's own field: that item, as before (no second item shown)
    line = refused(cli, *NANO, "--set", "model.hybrid.pattern=" + "*-" * 26, "--set", "model.moe=null")
    assert line.startswith("error: --set model.hybrid.pattern: hybrid.mamba: set but hybrid.pattern has no M layer")
