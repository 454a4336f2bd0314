"""The explorer shows Dynamo's generated names the same way in every run (course_lib.explore.stable).

Dynamo names what it installs from process-wide counters, uuids and ``id()``s, so without the
renaming the same function printed ``__compiled_fn_8_<uuid>`` once and ``__compiled_fn_22_<uuid>``
after other compiles. Here: the same function explored twice in one process, with an unrelated
compile in between, gives the same page; two compiled graphs keep two names; one global keeps one
name across panes; the table's rules on text written by hand.
"""

from __future__ import annotations

import dis
import re

import torch
import torch.nn.functional as F

from course_lib.explore import explore
from course_lib.explore.stable import RULES, Renamer, stable_text

UUID = "2df1f039_dafd_4c19_8cf7_7844ffa1c7be"


def scaled_loss(logits, target):
    """A graph break (``float`` of a tensor) and a builtin the transformed bytecode loads itself."""
    loss = F.cross_entropy(logits, target)
    if float(loss) > 100.0:
        loss = loss / 100.0
    return loss * 2.0


def unrelated(x):
    y = x.cos()
    if float(y.sum()) > 0:  # another break: Dynamo's counters move on by several names
        y = y * 2
    return [y + i for i in range(2)]


def _inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(8, 5, generator=g), torch.randint(0, 5, (8,), generator=g)


def _texts(ex) -> dict[str, str]:
    return {p.key: "\n".join([p.title, p.note, *(ln.text for ln in p.lines)]) for p in ex.panes}


def test_same_function_twice_gives_the_same_page():
    first = explore(scaled_loss, *_inputs(), backend="real")
    torch.compile(unrelated)(torch.randn(4))
    second = explore(scaled_loss, *_inputs(), backend="real")
    a, b = _texts(first), _texts(second)
    assert a.keys() == b.keys()
    for key in a:
        assert a[key] == b[key], key
    assert first.html() == second.html() and str(first) == str(second)

    text = "\n".join(a.values())
    assert not re.search(r"[0-9a-f]{8}_[0-9a-f]{4}_|0x[0-9a-f]{6,}|_\d{8,}_c\d+", text)  # no uuid, address, id
    # two graphs, two names; the resume function called at the break is the frame of the second pane
    frame0, frame1 = a["real.bytecode"], a["real.bytecode1"]
    assert "LOAD_GLOBAL NULL + __compiled_fn_1\n" in frame0 + "\n" and "__compiled_fn_2" not in frame0
    assert "LOAD_GLOBAL NULL + __compiled_fn_2\n" in frame1 + "\n"
    assert re.search(r"LOAD_GLOBAL __resume_at_\d+_1\b", frame0)
    # the builtins dict the guards check is the one the bytecode loads (two recordings, one name)
    assert "LOAD_GLOBAL __builtins_dict___1\n" in frame0
    assert "G['__builtins_dict___1']['float']" in a["real.guards"]


def test_ranks_follow_dynamos_counters_not_print_order():
    text = (f"call __compiled_fn_22_{UUID.replace('2d', '9e')} then __compiled_fn_8_{UUID}\n"
            f"again __compiled_fn_8_{UUID} G['__builtins_dict___21'] __resume_at_76_23 __resume_at_76_9")  # fmt: skip
    out = stable_text(text)
    assert out == ("call __compiled_fn_2 then __compiled_fn_1\n"
                   "again __compiled_fn_1 G['__builtins_dict___1'] __resume_at_76_2 __resume_at_76_1")  # fmt: skip
    # one renamer per recording: a name it never learnt gets the next rank of its stem
    rename = Renamer.of([text])
    assert rename("__resume_at_76_40") == "__resume_at_76_3" and rename("__resume_at_76_9") == "__resume_at_76_1"


def test_ids_addresses_and_paths_go_names_the_course_makes_stay():
    text = ("G['___module_nn_140234234234_c3'] G['___unnamed_scope_140234111111_c4'] "
            "<function f at 0x7f00aa12> tmp_1 graph_out_0 primals_12 __import_torch_dot__dynamo_dot_utils "
            "___check_obj_id(L['self']._modules['lin'], 140234234234) ___check_type_id(L['x'], 94834)")  # fmt: skip
    assert stable_text(text) == ("G['___module_nn_id1'] G['___unnamed_scope_id1'] <function f> tmp_1 graph_out_0 "
                                 "primals_12 __import_torch_dot__dynamo_dot_utils "
                                 "___check_obj_id(L['self']._modules['lin'], <id>) ___check_type_id(L['x'], <id>)")  # fmt: skip
    assert all(rule.what and rule.pattern.groupindex.get("stem") for rule in RULES)


def _outer_code(filename: str):
    space: dict = {}
    source = "def outer(x):\n    def inner(t):\n        return t * 2\n    return inner(x)\n"
    exec(compile(source, filename, "exec"), space)
    return space["outer"].__code__


def test_nested_code_objects_print_without_address_or_path():
    raw = ["\n".join(f"{i.opname} {i.argrepr}" for i in dis.get_instructions(_outer_code(f)))
           for f in ("/tmp/one/a.py", "/home/someone/b.py")]  # fmt: skip
    assert raw[0] != raw[1] and " at 0x" in raw[0]
    assert stable_text(raw[0]) == stable_text(raw[1])
    assert "LOAD_CONST <code object inner, line 2>" in stable_text(raw[0])


def test_torch_logs_and_depyf_read_through_the_same_table():
    from course_lib import debugtools

    prefix = "V1203 13:35:33.295000 10394 torch/_dynamo/convert_frame.py:1234]"
    text = (f"{prefix} [0/0] [__bytecode]   2 LOAD_GLOBAL NULL + __compiled_fn_31_{UUID}\n"
            f"{prefix} [0/0] [__bytecode] 350 LOAD_GLOBAL __resume_at_76_33\n"
            f"{prefix} [1/0] [__bytecode]   2 LOAD_GLOBAL NULL + __compiled_fn_35_{UUID.replace('2d', '77')}\n")  # fmt: skip
    logs = debugtools.parse_logs(text)
    assert logs.of("bytecode") == ["  2 LOAD_GLOBAL NULL + __compiled_fn_1", "350 LOAD_GLOBAL __resume_at_76_1",
                                   "  2 LOAD_GLOBAL NULL + __compiled_fn_2"]  # fmt: skip
    assert logs.raw == text  # torch's own text stays available
