"""course_lib.gpu.flash: the online softmax equals attention; the byte counts match the recording."""

import numpy as np
import pytest
import torch

from course_lib import recorded
from course_lib.gpu import flash, hierarchy


@pytest.mark.parametrize("n,m,d,block", [(1, 1, 1, 1), (100, 37, 64, 16), (64, 300, 32, 64), (50, 50, 8, 1000)])
def test_online_softmax_attention_matches_sdpa(n, m, d, block):
    g = np.random.default_rng(n + m)
    q, k, v = g.standard_normal((n, d)) * 3, g.standard_normal((m, d)) * 3, g.standard_normal((m, d))
    ref = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(a)[None] for a in (q, k, v)))[0]
    np.testing.assert_allclose(flash.online_softmax_attention(q, k, v, block), ref.numpy(), rtol=1e-10, atol=1e-12)


def test_byte_counts_and_bad_input():
    assert flash.naive_attention_bytes(1, 1, 4, 2, 1) == 4 * 4 * 2 + 4 * 16
    assert flash.flash_attention_bytes(2, 3, 4, 2, 2) == 2 * 3 * 4 * 4 * 2 * 2
    with pytest.raises(ValueError, match="seq_len"):
        flash.naive_attention_bytes(1, 1, 0, 64)
    with pytest.raises(ValueError, match="expected q"):
        flash.online_softmax_attention(np.zeros((3, 4)), np.zeros((5, 4)), np.zeros((5, 3)))


def test_recorded_attention_beats_the_naive_byte_bound():
    """The IO argument, checked on the H200 recording: both kernels beat the time naive bytes need."""
    rec = recorded.load("triton/perf.json")
    if not rec:
        pytest.skip(str(rec))
    gpu = hierarchy.hierarchy()["gpus"]["H200"]
    b, h, n, d = rec.value["attention"]["shape"]
    naive_us = flash.naive_attention_bytes(b, h, n, d, 2) / (gpu["hbm_bandwidth_gbs"] * 1e3)
    flash_us = flash.attention_flops(b, h, n, d) / (gpu["peak_bf16_tensor_tflops"] * 1e6)
    for key in ("sdpa_us", "triton_us"):
        assert flash_us < rec.value["attention"][key] < naive_us
