"""course_lib.gpu.tensor_core fragments: every element has one owner; the fragment-level
instruction equals the tile; the real PTX's register lists have the sizes the layout says."""

import numpy as np
import pytest

from course_lib.gpu import reference
from course_lib.gpu import tensor_core as tc


@pytest.mark.parametrize("op,shape,per_lane", [("A", (16, 16), 8), ("B", (16, 8), 4), ("C", (16, 8), 4)])
def test_each_element_has_exactly_one_lane(op, shape, per_lane):
    lane, index = tc.fragment_owner(op)
    assert lane.shape == shape and (lane >= 0).all()
    assert (np.bincount(lane.ravel(), minlength=32) == per_lane).all()
    pairs = {(int(ln), int(i)) for ln, i in zip(lane.ravel(), index.ravel())}
    assert len(pairs) == lane.size  # no two elements at the same (lane, index)


def test_known_positions_from_the_ptx_isa():
    lane_c, idx_c = tc.fragment_owner("C")
    assert (lane_c[0, 0], idx_c[0, 0]) == (0, 0) and (lane_c[8, 7], idx_c[8, 7]) == (3, 3)
    lane_a, idx_a = tc.fragment_owner("A")
    assert (lane_a[9, 10], idx_a[9, 10]) == (5, 6)  # group 1 (row 9 = 1 + 8), tig 1 (col 10 = 2 + 8)
    with pytest.raises(ValueError, match="operand"):
        tc.fragment_owner("D")


def test_fragment_instruction_equals_the_tile():
    g = np.random.default_rng(0)
    for _ in range(5):
        a, b = g.standard_normal((16, 16)), g.standard_normal((16, 8))
        c = g.standard_normal((16, 8)).astype(np.float32)
        d = tc.mma_m16n8k16_fragments(tc.to_fragments("A", a), tc.to_fragments("B", b), tc.to_fragments("C", c))
        np.testing.assert_array_equal(tc.from_fragments("C", d), tc.mma_tile(a, b, c))


def test_real_ptx_register_lists_match_the_layout():
    ops = tc.ptx_mma_operands(reference.ptx("matmul_bf16_sm80"))
    assert ops
    for op in ops:
        assert len(op["a"]) * tc.ELEMENTS_PER_REGISTER["A"] == tc.FRAGMENT_RULES["A"][2]
        assert len(op["b"]) * tc.ELEMENTS_PER_REGISTER["B"] == tc.FRAGMENT_RULES["B"][2]
        assert len(op["c"]) == len(op["d"]) == tc.FRAGMENT_RULES["C"][2]
