"""choices.Choice and step.Infeasible carry ndarray's own __array_ufunc__ (speed18, b705695) so numpy's per-operand
lookup does not miss through EnumType.__getattr__. The attribute must not become a member, members must pickle to
themselves, and comparisons with arrays of codes and with Python / numpy scalars must read the member's integer code
(the codes by hand from the class definitions)."""
from __future__ import annotations

import pickle

import numpy as np

from scalemodel.choices import Choice, ScheduleKind, Zero
from scalemodel.engine.step import Infeasible


def test_attribute_is_ndarrays_and_no_member() -> None:
    for enum in (Zero, ScheduleKind, Infeasible):
        assert enum.__array_ufunc__ is np.ndarray.__array_ufunc__
        assert "__array_ufunc__" not in enum.__members__
    assert Choice.__array_ufunc__ is np.ndarray.__array_ufunc__
    assert [m.name for m in ScheduleKind] == ["ONE_F_ONE_B", "INTERLEAVED", "GPIPE", "ZERO_BUBBLE"]
    # host_out_of_memory (22): tests/test_hostmem36.py; state_offload_invalid (21): tests/test_offload35.py
    assert len(Infeasible) == 22  # topk_sharded_gradients (20)


def test_members_pickle_to_themselves() -> None:
    for m in (Zero.PARAMETERS, ScheduleKind.ZERO_BUBBLE, Infeasible.OUT_OF_MEMORY):
        assert pickle.loads(pickle.dumps(m)) is m


def test_comparisons_read_the_code() -> None:
    codes = np.array([0, 1, 2, 3])  # 1f1b, interleaved, gpipe, zb
    assert (codes == ScheduleKind.GPIPE).tolist() == [False, False, True, False]
    assert (ScheduleKind.GPIPE == codes).tolist() == [False, False, True, False]
    assert (codes >= ScheduleKind.GPIPE).tolist() == [False, False, True, True]
    assert (ScheduleKind.INTERLEAVED < codes).tolist() == [False, False, True, True]
    assert np.where(codes == ScheduleKind.ZERO_BUBBLE, 7, 0).tolist() == [0, 0, 0, 7]
    assert np.isin(codes, [ScheduleKind.GPIPE, ScheduleKind.ZERO_BUBBLE]).tolist() == [False, False, True, True]
    assert ScheduleKind.GPIPE == 2 and 2 == ScheduleKind.GPIPE and np.int64(2) == ScheduleKind.GPIPE
    assert ScheduleKind.GPIPE >= 2 and not ScheduleKind.GPIPE > np.float64(2.0)
    assert int(Infeasible.OUT_OF_MEMORY) == 10
    assert (np.array([0, 10]) == Infeasible.OUT_OF_MEMORY).tolist() == [False, True]
    assert np.asarray(ScheduleKind.ZERO_BUBBLE).dtype.kind == "i" and int(np.asarray(ScheduleKind.ZERO_BUBBLE)) == 3
