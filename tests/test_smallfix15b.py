"""Small fixes left by the review-15 rounds (one section per fix)."""

from __future__ import annotations

import pytest

from scalemodel.errors import InputError
from scalemodel.specs.frameworks import read_strategy_file

# ---------------------------------------------------------------------------------------------------------------
# 1. a value given to a Megatron-LM switch: the message named argparse store_true and "turn it on" also for the
#    store_false switches (--no-*, --disable-*), which turn their feature off


@pytest.mark.parametrize("flag", ["--no-rope-fusion", "--disable-align-grad-reduce", "--no-bias-dropout-fusion"])
def test_a_store_false_switch_with_a_value_is_worded_as_one(tmp_path, flag: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text(f"torchrun pretrain_gpt.py --tensor-model-parallel-size 2 {flag}=false\n")
    with pytest.raises(InputError) as e:
        read_strategy_file(str(f))
    msg = str(e.value)
    assert "takes no value" in msg and "store_false" in msg and "turn off" in msg, msg
    assert "store_true" not in msg and "turn it on" not in msg, msg


def test_a_store_true_switch_with_a_value_keeps_its_wording(tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --sequence-parallel=false\n")
    with pytest.raises(InputError, match="alone to turn it on, or leave it out to keep it off \\(argparse store_true\\)"):
        read_strategy_file(str(f))


# ---------------------------------------------------------------------------------------------------------------
# 2. `calibrate runs`: a warning raised while pricing one run of the file (training.cudnn_release on a release the
#    accelerator holds no curve of) did not say which run it was about


def test_a_runs_warning_names_its_run(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    f = tmp_path / "runs.yaml"
    f.write_text("- {cluster: dgx-b200, model: gpt-1.7b, gpus: 8, step_time: 1.0 s}\n"
                 "- {cluster: dgx-b200, model: gpt-1.7b, gpus: 8, cudnn_release: '9.21.1', flash_attention: true,"
                 " step_time: 1.1 s}\n"
                 "- {cluster: dgx-b200, model: gpt-1.7b, gpus: 16, step_time: 1.0 s}\n"
                 "- {cluster: dgx-b200, model: gpt-1.7b, gpus: 8, cudnn_release: '9.21.1', flash_attention: true,"
                 " step_time: 1.2 s}\n")
    r = cli("calibrate", "runs", str(f), "--json")
    assert r.code == 0, r.err
    got = [w for w in json.loads(r.out)["warnings"] if "cudnn_release = 9.21.1" in w]
    # run 2, and run 4, the same configuration (priced once), each under its own name; run 1 and 3 say nothing
    assert [w.split(": training.")[0] for w in got] == [f"{f}: run 2 (line 2)", f"{f}: run 4 (line 4)"], got
