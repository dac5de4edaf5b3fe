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
    with pytest.raises(InputError, match=r"alone to turn it on, or leave it out to keep it off \(argparse store_true"):
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
                 "- {cluster: dgx-b200, model: gpt-1.7b, gpus: 16, cudnn_release: '9.21.1', flash_attention: true,"
                 " step_time: 0.6 s}\n")
    r = cli("calibrate", "runs", str(f), "--json")
    assert r.code == 0, r.err
    got = [w for w in json.loads(r.out)["warnings"] if "cudnn_release = 9.21.1" in w]
    # run 2, and run 4 (on 16 GPUs: a repeated configuration is refused since round 20), each under its own name;
    # run 1 and 3 say nothing
    # (the field named as the runs file writes it, flat under the run: cudnn_release, not training.cudnn_release)
    assert [w.split(": cudnn_release")[0] for w in got] == [f"{f}: run 2 (line 2)", f"{f}: run 4 (line 4)"], got


# ---------------------------------------------------------------------------------------------------------------
# 3. the flex dispatcher with expert TP > 1 (docs/model.md#ep-hierarchical): Megatron-Core's MoEFlexTokenDispatcher
#    (token_dispatcher.py @d98e8a64dd) runs on the etp x ep ranks of tp_ep_group and gives DeepEP top-k etp k of
#    etp E experts (each expert's column repeated for its etp slices); the model priced an ep group at stride etp
#    with k of E

from itertools import combinations  # noqa: E402
from math import comb  # noqa: E402

import numpy as np  # noqa: E402

from scalemodel.cost import collectives as coll  # noqa: E402
from scalemodel.cost import ep_dispatch  # noqa: E402
from scalemodel.cost.placement import place  # noqa: E402
from scalemodel.engine.job import build_job, grid_from_strategy  # noqa: E402
from scalemodel.engine.network import build_network  # noqa: E402
from scalemodel.engine.step import evaluate  # noqa: E402
from scalemodel.specs import TransformerWorkload, load_cluster  # noqa: E402
from scalemodel.specs.training import StrategySpec, TrainingSpec  # noqa: E402


def _replay_etp(experts: int, top_k: int, ep: int, etp: int, per_domain: int) -> tuple[float, float]:
    """Per-token RDMA and NVLink copies from rank 0 of an etp x ep group, over every routing of k of E experts:
    expert e is on EP index e // (E / ep), whose etp slices are ranks etp (e // (E / ep)) + j (_initialize_metadata's
    expand, etp innermost); the kernels send once per other domain holding a target rank, then the domain's rank of
    the source's local index copies to each other target rank of its domain."""
    per_ep = experts // ep
    ranks = ep * etp
    rdma = nvl = 0.0
    routings = list(combinations(range(experts), top_k))
    for src in range(ranks):
        dom, local = divmod(src, per_domain)
        for chosen in routings:
            targets = {(e // per_ep) * etp + j for e in chosen for j in range(etp)}
            for d in {t // per_domain for t in targets}:
                forwarder = d * per_domain + local
                rdma += d != dom
                nvl += sum(1 for t in targets if t // per_domain == d and t != forwarder)
    n = ranks * len(routings)
    return rdma / n, nvl / n


def test_flex_bytes_at_etp_2_by_hand() -> None:
    # 8 experts, top-2, ep 4, etp 2: 8 ranks, 4 per domain (D = 2). A domain holds 2 EP indices = 4 of the 8 experts:
    # hit with q(2) = 1 - C(4,2)/C(8,2) = 22/28; a rank holds its EP index's 2 experts: q(4) = 1 - C(6,2)/C(8,2)
    # = 13/28. inter = (D - 1) 22/28, intra = (p - D) 13/28 = 6 x 13/28 (a uniform etp k = 4 of etp E = 16 would
    # give a domain 1 - C(8,4)/C(16,4) = 0.96, and q(8) of the real routing a rank 7/28: neither is the kernel's)
    inter, intra = ep_dispatch.hierarchical_bytes(1.0, 8, 2, 8, 4, etp=2)
    assert float(inter) == pytest.approx(22 / 28, rel=1e-12)
    assert float(intra) == pytest.approx(6 * 13 / 28, rel=1e-12)
    assert (float(inter), float(intra)) == pytest.approx(_replay_etp(8, 2, 4, 2, 4), rel=1e-12)
    # etp 1 is the formula as it was: intra 6 q(8) = 6 x 7/28
    assert float(ep_dispatch.hierarchical_bytes(1.0, 8, 2, 8, 4)[1]) == pytest.approx(6 * 7 / 28, rel=1e-12)


@pytest.mark.parametrize("experts,top_k,ep,etp,per_domain", [(8, 2, 4, 2, 2), (12, 3, 3, 2, 2), (8, 3, 2, 4, 4),
                                                               (16, 2, 4, 2, 4)])
def test_flex_bytes_at_etp_match_every_routing_replayed(experts, top_k, ep, etp, per_domain) -> None:  # type: ignore[no-untyped-def]
    got = ep_dispatch.hierarchical_bytes(1.0, experts, top_k, ep * etp, per_domain, etp=etp)
    assert (float(got[0]), float(got[1])) == pytest.approx(_replay_etp(experts, top_k, ep, etp, per_domain),
                                                           rel=1e-12, abs=1e-12)


_QWEN3_30B = TransformerWorkload(name="qwen3-30b", layers=48, hidden=2048, heads=32, kv_heads=4, head_dim=128,
                                 ffn_hidden=6144, gated_mlp=True, vocab=151936, seq_len=4096, tied_embeddings=False,
                                 moe={"experts": 128, "top_k": 8, "ffn_hidden": 768})


def _ep_comm(backend: str, ep: int, etp: int) -> float:
    cl = load_cluster("dgx-h100")
    tr = TrainingSpec(global_batch=256, micro_batch=1, precision="bf16", seq_len=4096,
                      moe_rank_imbalance=1.0)  # the mean rank, as priced by hand (busiest: test_moe_routing_imbalance)
    job = build_job(cl, _QWEN3_30B, tr)
    st = StrategySpec(tp=1, pp=1, ep=ep, etp=etp, dp=16, moe_flex_dispatcher=True, moe_flex_backend=backend)
    return float(evaluate(job, grid_from_strategy(st, tr, 16, job)).breakdown["ep_comm"][0])


@pytest.mark.parametrize("backend", ["deepep", "hybridep"])
def test_flex_step_at_etp_2_prices_the_tp_ep_group(backend: str) -> None:
    """ep 8 x etp 2 on two DGX-H100 nodes against ep 16 x etp 1: both dispatch over 16 ranks, 8 a node, 4096 tokens
    of hidden 2048 a rank, 128 experts, top-8. At etp 2 a rank is hit with q(8) (its EP index: 16 of the 128 experts)
    instead of q(16), DeepEP's slot carries 16 top-k fields (4096 + 8 + 4 x 16 x {2, 0, 1, 0} = 4232, 4104, 4168,
    4104, aligned to 16: 4240, 4112, 4176, 4112), HybridEP's copies 4 B x etp E / D = 4 x 128 probabilities (not
    4 x 64)."""
    pl = place(16, 1, build_network(load_cluster("dgx-h100")))
    T, E, k = 4096, 128, 8

    def t(x: float, etp: int, probs: float = 0.0) -> float:
        return float(ep_dispatch.hierarchical_alltoall_time(x, E, k, pl, prob_tokens=probs, etp=etp))

    if backend == "deepep":
        want2 = t(T * (4240 + 4112 + 4176 + 4112) / 4, 2)
        want1 = t(T * (4176 + 4112 + 4144 + 4112) / 4, 1)
    else:
        want2 = 0.5 * (t(T * 4096.0, 2) + t(T * (4096.0 + 4.0 * 128), 2))
        want1 = 0.5 * (t(T * 4096.0, 1) + t(T * (4096.0 + 4.0 * 64), 1))
        # the routing map's all-gather before each forward dispatch, a quarter on each call
        # (docs/model.md#hybridep-preprocess): 16 ranks x 4096 rows x etp E one-byte flags
        want2 += 0.25 * float(coll.group_time("allgather", np.asarray(16 * T * 2 * E * 1.0), pl))
        want1 += 0.25 * float(coll.group_time("allgather", np.asarray(16 * T * E * 1.0), pl))
    # the step's ep_comm stands in the ratio of the per-layer times (same layers, tokens and exposure)
    assert _ep_comm(backend, 8, 2) / _ep_comm(backend, 16, 1) == pytest.approx(want2 / want1, rel=1e-9)
    # and the rank hit probability the etp 2 prices is its EP index's: q(8) > q(16)
    q8, q16 = 1 - comb(112, 8) / comb(128, 8), 1 - comb(120, 8) / comb(128, 8)
    inter, intra = ep_dispatch.hierarchical_bytes(1.0, E, k, 16, 8, etp=2)
    assert float(intra) == pytest.approx(14 * q8, rel=1e-12) and q8 > q16
    assert np.isfinite(want2)


# ---------------------------------------------------------------------------------------------------------------
# 4. HybridEP asserts its group (the flex dispatcher's etp x ep ranks) is whole NVLink domains (DeepEP hybrid-ep
#    @7febc6e2 deep_ep/hybrid_ep_buffer.py L74-77: group_size % ranks per domain == 0); the model priced such groups

from scalemodel.choices import FlexBackend  # noqa: E402
from scalemodel.engine.job import hybridep_group_refused  # noqa: E402

_HYB = ["-c", "dgx-h100", "-m", "deepseek-v3", "-n", "96", "--set", "strategy.ep=4", "--set", "strategy.etp=3",
        "--set", "strategy.moe_flex_dispatcher=true"]


def test_hybridep_groups_that_are_not_whole_domains_by_hand() -> None:
    job = build_job(load_cluster("dgx-h100"), _QWEN3_30B,
                    TrainingSpec(global_batch=256, micro_batch=1, precision="bf16", seq_len=4096))
    ep, etp = np.array([8, 4, 16, 4, 2, 12]), np.array([1, 3, 1, 1, 1, 2])
    # 8 GPUs a node: 8 | 8, 12 = 8 + 4, 16 = 2 x 8, 4 inside one node, 2 inside one node, 24 = 3 x 8
    want = [False, True, False, False, False, False]
    hyb = int(FlexBackend.HYBRIDEP)
    assert list(hybridep_group_refused(job, ep, etp, True, hyb)) == want
    assert not np.any(hybridep_group_refused(job, ep, etp, True, int(FlexBackend.DEEPEP)))  # DeepEP: not its assert
    assert not np.any(hybridep_group_refused(job, ep, etp, False, hyb))  # NCCL's all-to-all


def test_predict_refuses_a_hybridep_group_across_part_of_a_domain(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("predict", *_HYB, "--set", "strategy.moe_flex_backend=hybridep")
    assert r.code == 2 and "strategy.ep" in r.err and "HybridEP refuses" in r.err and "12 ranks" in r.err, r.err
    assert "Traceback" not in r.err
    assert cli("predict", *_HYB, "--set", "strategy.moe_flex_backend=deepep").code == 0


def test_plan_marks_hybridep_groups_across_part_of_a_domain_infeasible(cli) -> None:  # type: ignore[no-untyped-def]
    import json

    r = cli("plan", *_HYB, "--set", "strategy.moe_flex_backend=hybridep", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["infeasible_by_reason"].get("hybridep_group_invalid", 0) > 0, r.out[-400:]
    r = cli("plan", *_HYB, "--set", "strategy.moe_flex_backend=deepep", "--json")
    assert "hybridep_group_invalid" not in json.loads(r.out)["infeasible_by_reason"]


# ---------------------------------------------------------------------------------------------------------------
# 5. a file name that is not UTF-8: Python keeps its byte 0xff as the lone surrogate U+DCFF (os.fsdecode), which
#    --json wrote as "\udcff", invalid Unicode to a strict JSON reader; errors and warnings showed "\udcff" too

import os  # noqa: E402
from pathlib import Path  # noqa: E402

from scalemodel.errors import shown  # noqa: E402
from scalemodel.report.output import to_json  # noqa: E402


def _strings(obj: object) -> list[str]:
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in (_strings(k) + _strings(v))]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return [obj] if isinstance(obj, str) else []


def _bad_name(text: str) -> str:
    root = Path("/tmp/smallfix15b")
    root.mkdir(parents=True, exist_ok=True)
    name = os.fsdecode(os.fsencode(str(root)) + b"/bad\xff.yaml")
    Path(name).write_text(text)
    return name


def test_a_non_utf8_file_name_in_json_is_valid_unicode(cli) -> None:  # type: ignore[no-untyped-def]
    import json

    name = _bad_name("strategy:\n  tp: 2\n")
    r = cli("predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--strategy", name, "--json")
    assert r.code == 0, r.err
    assert "\\udcff" not in r.out  # the escape of a lone surrogate
    doc = json.loads(r.out)
    for s in _strings(doc):
        s.encode("utf-8")  # strict: a lone surrogate raises
    assert "/tmp/smallfix15b/bad\\xff.yaml" in _strings(doc)  # the byte, backslash-escaped as Python writes bytes


def test_a_non_utf8_file_name_in_an_error_is_its_byte(cli) -> None:  # type: ignore[no-untyped-def]
    name = _bad_name("strategy:\n  tpx: 2\n")
    r = cli("predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--strategy", name, "--json")
    assert r.code == 2 and "/tmp/smallfix15b/bad\\xff.yaml: strategy.tpx" in r.err, r.err
    r.err.encode("utf-8")


def test_shown_by_hand() -> None:
    assert shown("a\udcffb\udc80") == "a\\xffb\\x80"
    assert shown("x\ud800") == "x\\ud800"  # a surrogate no file name decodes to: its code point
    assert shown("é ünïcode") == "é ünïcode"
    # warnings and every --json string go through it
    assert "\\udcff" not in to_json({"p": "q\udcff"}, "t") and '"q\\\\xff"' in to_json({"p": "q\udcff"}, "t")


# ---------------------------------------------------------------------------------------------------------------
# 6. torchtitan's default etp is 1 (specs.torchtitan_config._titan_etp); its reader set it only where the TOML gives ep,
#    so a TOML without expert_parallel_degree plus --ep 8 was priced at Megatron's etp = tp


@pytest.mark.parametrize("ep_from", ["cli", "set"])
def test_titan_ep_from_the_command_line_gets_etp_1(cli, tmp_path, ep_from: str) -> None:  # type: ignore[no-untyped-def]
    import json

    f = tmp_path / "job.toml"
    f.write_text("[parallelism]\ntensor_parallel_degree = 2\n")
    moe = ["-c", "dgx-h100", "-m", "nemotron-3-nano", "-n", "64"]
    ep = ["--ep", "8"] if ep_from == "cli" else ["--set", "strategy.ep=8"]
    r = cli("predict", *moe, "--strategy", str(f), *ep, "--json")
    assert r.code == 0, r.err
    got = json.loads(r.out)
    assert got["strategy"]["etp"] == 1, got["strategy"]
    # the same step as etp 1 written out, not as etp = tp = 2
    one = json.loads(cli("predict", *moe, "--strategy", str(f), *ep, "--set", "strategy.etp=1", "--json").out)
    two = json.loads(cli("predict", *moe, "--strategy", str(f), *ep, "--set", "strategy.etp=2", "--json").out)
    assert got["step_time_s"] == one["step_time_s"] != two["step_time_s"]
    # a Megatron-Core layer (the default layer_impl) keeps Megatron's default, etp = tp (with SP, which Megatron-Core
    # needs for MoE at tp > 1: tests/test_moe_sp_required.py)
    meg = json.loads(cli("predict", *moe, "--tp", "2", "--sequence-parallel", *ep, "--json").out)
    meg2 = json.loads(cli("predict", *moe, "--tp", "2", "--sequence-parallel", *ep, "--set", "strategy.etp=2",
                          "--json").out)
    assert meg["strategy"]["etp"] is None and meg["step_time_s"] == meg2["step_time_s"]
