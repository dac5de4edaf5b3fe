"""review26d of tidy26: the refusal of a field given both by its option and by ``--set`` (9f5ce49a)."""
from __future__ import annotations


def test_a_switch_beside_its_set_is_named_as_given(cli) -> None:  # type: ignore[no-untyped-def]
    """``--sequence-parallel`` takes no value: the refusal named it ``--sequence-parallel True`` (Python's bool), an
    option the command line cannot hold. It names the switch as written."""
    r = cli("predict", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8", "--sequence-parallel",
            "--set", "strategy.sequence_parallel=false")
    assert r.code == 2 and r.out == ""
    assert r.err.strip() == ("error: --set strategy.sequence_parallel: --sequence-parallel and --set "
                             "strategy.sequence_parallel=false both set strategy.sequence_parallel; one of them "
                             "(--sequence-parallel or --set strategy.sequence_parallel)"), r.err
