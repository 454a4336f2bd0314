"""The stack explorer on code nobody wrote for the course, and its invariants.

Five functions: a transformers GPT-2 block (small config, random weights), torch's LayerNorm, a
small CNN block (conv, batch norm, ReLU, pooling), a loss with a graph break, and a training
step (forward and backward). For each: every kernel line traces back to at least one FX node,
every FX node to a Python line, and both the course and the real panes are filled.
The explorations are built once per module (about a minute on two cores).
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

from course_lib.explore import explore, ptx_exercise_lines
from course_lib.explore.__main__ import main as cli_main
from course_lib.explore.__main__ import parse_shape


def _gpt2_block():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_embd=32, n_head=2, n_layer=1, n_positions=16, vocab_size=64,
                                     attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0)  # fmt: skip
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    return transformers.models.gpt2.modeling_gpt2.GPT2Block(config).eval()


def loss_with_break(logits, target):
    """A user's loss: cross entropy, and a Python-side check that breaks the graph."""
    loss = F.cross_entropy(logits, target)
    if loss.item() > 100.0:  # .item() leaves the graph: Dynamo splits here
        loss = loss / 100.0
    return loss * 2.0


def _cases():
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    block = _gpt2_block()
    cnn = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                              torch.nn.MaxPool2d(2)).eval()  # fmt: skip
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))

    def attention(x):
        return block(x)[0]

    def train_step(x, y):
        return F.mse_loss(mlp(x), y)

    return {
        "gpt2_block": (attention, (torch.randn(1, 8, 32, generator=g),), False),
        "layer_norm": (torch.nn.LayerNorm(32), (torch.randn(4, 32, generator=g),), False),
        "cnn_block": (cnn, (torch.randn(2, 3, 8, 8, generator=g),), False),
        "loss_graph_break": (loss_with_break, (torch.randn(8, 5, generator=g), torch.randint(0, 5, (8,), generator=g)),
                             False),
        "train_step": (train_step, (torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)), True),
    }  # fmt: skip


class _Lazy(dict):
    """Build each exploration on first use, once per module (``-k layer_norm`` builds one)."""

    def __missing__(self, name):
        fn, args, train = _cases()[name]
        self[name] = explore(fn, *args, train=train)
        return self[name]


@pytest.fixture(scope="module")
def explored():
    return _Lazy()


CASES = ["gpt2_block", "layer_norm", "cnn_block", "loss_graph_break", "train_step"]


@pytest.mark.parametrize("name", CASES)
def test_both_sides_filled(explored, name):
    ex = explored[name]
    for side in ("course", "real"):
        for stage in ("fx", "aot", "kernels"):
            panes = ex.panes_of(side, stage)
            assert panes and all(p.lines for p in panes), f"{name}: {side} {stage} pane is empty ({ex.notes})"


@pytest.mark.parametrize("name", CASES)
def test_every_kernel_line_maps_to_an_fx_node(explored, name):
    ex = explored[name]
    kernel_panes = [p for p in ex.panes if p.stage in ("kernels", "triton", "ttir", "ttgir", "llir", "ptx", "sass")]
    assert kernel_panes
    for p in kernel_panes:
        side_fx = f"{p.side}.fx"
        for ln in p.lines:
            ups = ex.upstream(ln.id)
            assert any(u.startswith(side_fx) for u in ups), f"{name}: {ln.id} {ln.text!r} reaches no FX node"


@pytest.mark.parametrize("name", CASES)
def test_every_fx_node_maps_to_a_source_line(explored, name):
    ex = explored[name]
    for p in ex.panes:
        if p.stage in ("fx", "aot", "joint"):
            for ln in p.lines:
                assert ex.python_lines(ln.id), f"{name}: {ln.id} {ln.text!r} reaches no Python line"


def test_graph_break_gives_two_graphs_on_both_sides(explored):
    ex = explored["loss_graph_break"]
    assert len(ex.panes_of("real", "fx")) >= 2
    assert len(ex.panes_of("course", "fx")) >= 2


def test_training_step_has_backward_and_saved_tensors(explored):
    ex = explored["train_step"]
    titles = " ".join(p.title for p in ex.panes_of("real", "aot"))
    assert "backward" in titles and "forward" in titles
    assert any(ln.tag == "saved" for p in ex.panes_of("real", "aot") for ln in p.lines)
    assert any("backward" in p.title for p in ex.panes_of("course", "aot"))


def test_exact_links_are_exact_where_recorded(explored):
    """Dynamo's nodes point at the line that made them; a tl.store points at the node it writes."""
    loss = explored["loss_graph_break"]
    for side in ("real", "course"):
        calls = [ln for p in loss.panes_of(side, "fx") for ln in p.lines if "(" in ln.text]
        calls = [ln for ln in calls if not ln.text.startswith("return")]  # the output node points at its values
        assert calls and all(ln.exact and ln.sources[0].startswith("py:") for ln in calls)
    ex = explored["layer_norm"]
    stores = [ln for p in ex.panes_of("course", "triton") for ln in p.lines if "tl.store(" in ln.text]
    assert stores and all(ln.exact and len(ln.sources) == 1 for ln in stores)


def test_ptx_traces_to_the_python_line_that_made_it():
    """The tanh of the source becomes PTX that traces back to exactly the tanh line."""

    def f(x):
        y = x * 3.0
        z = torch.tanh(y)
        return z + 1.0

    ex = explore(f, torch.randn(16, 32), backend="course")
    cands = ptx_exercise_lines(ex)
    assert cands, "no PTX line traces back to exactly one Python line"
    lines = {tuple(ex.python_lines(i)) for i in cands}
    assert (3,) in lines or (2,) in lines, lines
    page = ex.html()
    assert "<script" in page and "http://" not in page and "https://" not in page  # offline, one file


def test_bad_input_gives_clear_errors():
    with pytest.raises(ValueError, match="example inputs"):
        explore(torch.tanh)
    with pytest.raises(TypeError, match="tensors or numbers"):
        explore(lambda x: x, "not a tensor")
    with pytest.raises(ValueError, match="not like 8x16"):
        parse_shape("8xfoo")


def test_cli_writes_a_page(tmp_path, capsys):
    src = tmp_path / "mine.py"
    src.write_text("import torch\n\ndef f(x):\n    return torch.relu(x) * 2\n")
    out = tmp_path / "e.html"
    assert cli_main([f"{src}:f", "--shapes", "4x8", "--out", str(out), "--backend", "course"]) == 0
    page = out.read_text()
    assert "Stack explorer: f" in page and re.search(r"data-id='course\.ptx", page)
    assert cli_main([f"{src}:nope", "--shapes", "4x8"]) == 2
    assert "has no 'nope'" in capsys.readouterr().err
