"""course_lib.check: every outcome, the comparators' messages, strict mode, and the summary."""

import html

import numpy as np
import pytest
import torch

from course_lib import check


@pytest.fixture(autouse=True)
def _not_strict(monkeypatch):
    monkeypatch.delenv("COURSE_CHECK_STRICT", raising=False)


def test_right_answer_passes():
    lab = check.Lab("t")
    r = lab.run("add", lambda: 1 + 1, expected=2)
    assert r.status == check.PASSED and r.passed


def test_wrong_answer_fails_with_expected_got_and_hint():
    lab = check.Lab("t")
    r = lab.run("add", lambda: 3, expected=2, hint="one plus one")
    assert r.status == check.FAILED
    assert r.expected == "2" and r.got == "3"
    text = str(r)
    assert "expected: 2" in text and "got: 3" in text and "hint 1: one plus one" in text
    assert "FAIL</span>" in r._repr_html_()


def test_no_hint_before_an_attempt_and_hints_grow_with_failures():
    lab = check.Lab("t")
    hints = ["nudge", "stronger", "strongest"]

    def stub():
        raise NotImplementedError

    r = lab.run("x", stub, expected=1, hint=hints)
    assert (
        r.status == check.NOT_ATTEMPTED and r.hints == () and "nudge" not in str(r) and "nudge" not in r._repr_html_()
    )
    assert lab.run("x", lambda: 2, expected=1, hint=hints).hints == ("nudge",)
    r = lab.run("x", lambda: 3, expected=1, hint=hints)
    assert r.hints == ("nudge", "stronger") and r.attempt == 2 and "1 left" in str(r)
    assert lab.run("x", lambda: [][0], expected=1, hint=hints).hints == tuple(hints)  # raising counts too
    r = lab.run("x", lambda: 1, expected=1, hint=hints)
    assert r.passed and r.hints == () and r.attempt == 4


def test_failed_prediction_never_shows_the_expected_value():
    lab = check.Lab("t")
    kw = dict(expected=48, predict=True, explanation="48 = 2 x 24", hint=["count the loads"])
    r = lab.run("p", lambda: 12, **kw)
    text = str(r) + r._repr_html_()
    assert r.status == check.FAILED and "48" not in text and "too low" in r.message and "factor of 2" in r.message
    assert r.explanation == ""  # offered only after two misses
    r = lab.run("p", lambda: 50, **kw)
    assert "too high, but within 10%" in r.message and "48" not in r.message
    assert r.explanation == "48 = 2 x 24" and r.expected == ""


@pytest.mark.parametrize(
    ("expected", "got", "words"),
    [
        ([1, 2, 3], [1, 5, 3], ["1 of your 3 entries is wrong", "entry 1 too high"]),
        ([1, 2], [1, 2, 3], ["too many entries"]),
        ({"a", "b"}, {"a", "c", "d"}, ["some of your items do not belong", "some that belong are missing"]),
        ({"k": 4}, {"k": 1}, ["'k' too low"]),
        ("LoopVectorizePass", "SLPVectorizerPass", ["not the answer"]),
        (2, -2, ["sign"]),
        (256, 0, ["too low, by a factor of 2 or more"]),  # zero is not a wrong sign
    ],
)
def test_prediction_feedback_gives_direction_not_value(expected, got, words):
    msg = check.feedback.describe(expected, got)
    assert all(w in msg for w in words), msg
    assert "LoopVectorizePass" not in msg and "'b'" not in msg


def test_instructor_mode_shows_everything(monkeypatch):
    monkeypatch.setenv("COURSE_INSTRUCTOR", "1")
    lab = check.Lab("t")
    r = lab.run("p", lambda: 3, expected=5, predict=True, hint=["a", "b"], explanation="why")
    assert r.expected == "5" and r.hints == ("a", "b") and r.explanation == "why"


def test_the_reference_is_guarded_while_the_check_runs():
    from course_lib.ir import cfg

    def cheat(fn):
        return cfg.idoms(fn)

    from course_lib import ir

    def loop(n: int) -> int:
        s = 0
        for i in range(n):
            s += i
        return s

    g = ir.from_python(loop)
    r = check.Lab("t").run("idoms", lambda: cheat(g), expected=lambda: cfg.idoms(g), guard=["course_lib.ir.cfg:idoms"])
    assert r.status == check.FAILED and "reference implementation (ir.cfg.idoms)" in r.message
    assert not hasattr(cfg.idoms, "__course_guard__")  # put back afterwards
    # a name imported into the caller's namespace is guarded too, and course_lib's own calls still work
    globals()["idoms_alias"] = cfg.idoms
    try:
        r = check.Lab("t").run("alias", lambda: idoms_alias(g), expected=1, guard=["course_lib.ir.cfg:idoms"])  # noqa: F821
        assert r.status == check.FAILED and "reference" in r.message
        r = check.Lab("t").run("inner", lambda: cfg.dominance_frontiers(g), expected=lambda: cfg.dominance_frontiers(g),
                               guard=["course_lib.ir.cfg:idoms"])  # fmt: skip
        assert r.passed
    finally:
        del globals()["idoms_alias"]


def test_status_marks_need_no_emoji_font():
    lab = check.Lab("t")
    lab.run("a", lambda: 1, expected=1)
    lab.run("b", lambda: 1, expected=2)
    for text in (str(lab.summary()), lab.summary()._repr_html_(), lab.results["b"]._repr_html_()):
        assert all(ord(ch) < 0x2000 for ch in text), text


def test_unfinished_answer_is_not_attempted():
    def stub():
        raise NotImplementedError("exercise 'stub': replace this line with your code")

    r = check.Lab("t").run("stub", stub, expected=1)
    assert r.status == check.NOT_ATTEMPTED


def test_crashing_answer_is_reported_with_the_learners_line_not_a_traceback():
    def crash():
        return [][1]

    r = check.Lab("t").run("crash", crash, expected=1)
    assert r.status == check.RAISED
    assert "IndexError" in r.message and "crash" in r.message
    assert "course_lib" not in r.message


def test_comparator_errors_and_assertions_do_not_escape():
    r = check.Lab("t").run("x", lambda: object(), expected=None, compare=lambda e, g: 1 / 0)
    assert r.status == check.FAILED and "ZeroDivisionError" in r.message

    def strict(e, g):
        raise AssertionError("phi for x missing in block b3")

    r = check.Lab("t").run("y", lambda: 1, expected=1, compare=strict)
    assert r.status == check.FAILED and r.message == "phi for x missing in block b3"


def test_expected_may_be_lazy_and_verify_checks_properties():
    calls = []
    r = check.Lab("t").run("lazy", lambda: 5, expected=lambda: calls.append(1) or 5)
    assert r.passed and calls == [1]
    r = check.Lab("t").run("even", lambda: 3, verify=check.predicate(lambda g: g % 2 == 0, "an even number"))
    assert r.status == check.FAILED and "even" in r.message


def test_same_set_names_missing_and_extra():
    v = check.same_set({"a", "b"}, {"b", "c"})
    assert not v.ok and "missing {'a'}" in v.message and "unexpected {'c'}" in v.message


def test_same_text_gives_line_and_diff():
    v = check.same_text("%1 = add i32 %a, %b\nret i32 %1", "%1 = sub i32 %a, %b\nret i32 %1")
    assert not v.ok and "line 1" in v.message
    assert "-%1 = add i32 %a, %b" in v.diff and "+%1 = sub i32 %a, %b" in v.diff
    assert check.same_text("x \n", "x").ok


def test_close_reports_max_error_and_location():
    exp = torch.zeros(4, 5)
    got = exp.clone()
    got[2, 3] = 0.5
    v = check.close(atol=1e-3, rtol=0)(exp, got)
    assert not v.ok and "(2, 3)" in v.message and "1 of 20" in v.message
    assert check.close()(exp, exp.clone()).ok
    assert "shape" in check.close()(exp, torch.zeros(5, 4)).message
    assert not check.close()(np.array([np.nan]), np.array([1.0])).ok
    assert check.close()(torch.ones(3, dtype=torch.bfloat16), torch.ones(3)).ok


def test_summary_counts_each_outcome():
    lab = check.Lab("Module X")
    lab.run("a", lambda: 1, expected=1)
    lab.run("b", lambda: 2, expected=1)

    def todo():
        raise NotImplementedError

    lab.run("c", todo)
    lab.run("d", lambda: {}["k"])
    s = lab.summary()
    assert s.counts() == {"passed": 1, "failed": 1, "not attempted": 1, "raised": 1}
    assert str(s).startswith("Module X: 1/4 passed")
    assert "1 attempt " in str(s) and "0 attempts" in str(s)
    assert "width:25.0%" in s._repr_html_()


def test_rerunning_an_exercise_replaces_its_result():
    lab = check.Lab("t")
    lab.run("a", lambda: 1, expected=2)
    lab.run("a", lambda: 2, expected=2)
    assert lab.summary().counts()["passed"] == 1 and len(lab.summary().results) == 1


@pytest.mark.parametrize(
    ("mode", "value", "raises"),
    [("solutions", 1, False), ("solutions", 2, True), ("labs", 2, True), ("labs", None, False)],
)
def test_strict_mode_turns_outcomes_into_errors(monkeypatch, mode, value, raises):
    monkeypatch.setenv("COURSE_CHECK_STRICT", mode)

    def attempt():
        if value is None:
            raise NotImplementedError
        return value

    if raises:
        with pytest.raises(check.CheckFailed):
            check.Lab("t").run("x", attempt, expected=1)
    else:
        check.Lab("t").run("x", attempt, expected=1)


def test_module_level_run_uses_the_latest_lab():
    lab = check.Lab("latest")
    check.run("q", lambda: 1, expected=1)
    assert "q" in lab.results


def test_equal_handles_arrays_and_tensors():
    assert check.equal(np.arange(3), np.arange(3)).ok
    assert not check.equal(np.arange(3), np.array([0, 1, 5])).ok
    assert "shape" in check.equal(np.zeros(3), np.zeros(4)).message
    assert check.equal(torch.ones(2, 2), torch.ones(2, 2)).ok
    assert check.equal([1, 2], [1, 2]).ok and not check.equal({"a"}, {"b"}).ok


def test_a_guard_on_a_renamed_reference_says_so_and_the_check_still_runs(capsys):
    r = check.Lab("t").run("x", lambda: 1, expected=1, guard=["course_lib.ir.cfg:no_such_function"])
    assert r.passed and "cannot guard ir.cfg.no_such_function" in capsys.readouterr().err
    with pytest.raises(ValueError, match="package.module:attribute"):
        check.Lab("t").run("y", lambda: 1, expected=1, guard=["course_lib.ir.cfg.idoms"])


# ----------------------------------------------------------------------------- leaks (issue 19)
# Each case is a prediction and a wrong answer; the message must name nothing of the answer that
# the learner did not write: no key, no item, no length, no type, no two-valued entry by position.
LEAKS = [
    # a dict of booleans: naming the wrong key is the answer (flip it)
    (
        {"restrict": True, "expf": False, "early exit": False},
        {"restrict": True, "expf": True, "early exit": False},
        ["expf", "False"],
    ),
    # a key left out must not be named, nor how many keys there are
    (
        {"restrict": True, "expf": False, "early exit": False},
        {"restrict": True, "expf": False},
        ["early exit", "3 keys", "3 entries"],
    ),
    ({"mm": 2, "add": 1}, {"mm": 2, "sub": 1}, ["'add'", "2 keys"]),
    # lengths of lists and sizes of sets
    ([4, 8, 16], [4, 8], ["3 entries", "has 3", "16"]),
    ({"b1", "b2", "b3"}, {"b1", "b4"}, ["b2", "b3", "3 items", "1 of your"]),
    # a bool list named by position is the answer
    ([True, False, True], [True, True, True], ["entry 1"]),
    # types: "the answer is a NoneType" is the answer
    (None, 3, ["NoneType"]),
    (False, 0.5, ["bool"]),
    ("triton_per_fused", "triton_red_fused", ["per_"]),
]


@pytest.mark.parametrize(("expected", "got", "secrets"), LEAKS)
def test_prediction_feedback_names_nothing_of_the_answer(expected, got, secrets):
    msg = check.feedback.describe(expected, got)
    assert msg.startswith("not right") and not any(s in msg for s in secrets), msg
    r = check.Lab("t").run("p", lambda: got, expected=expected, predict=True)
    text = (str(r) + r._repr_html_()).replace(repr(got), "").replace(html.escape(repr(got)), "")  # theirs may show
    assert r.status == check.FAILED and not any(s in text for s in secrets), text


def test_prediction_hides_comparator_words_and_exception_texts():
    def strict_keys(exp, got):  # a comparator that indexes the answer's keys: KeyError names one
        return all(got[k] == v for k, v in exp.items())

    exp = {"copy": True, "secret key": False}
    r = check.Lab("t").run("p", lambda: {"copy": True}, expected=exp, compare=strict_keys, predict=True)
    assert r.status == check.FAILED and "secret key" not in str(r) + r._repr_html_()

    def verify(got):  # verify has no expected value: an exception's text must still not show
        return {"copy": True, "secret key": False}["secret key"] == got["secret key"]

    r = check.Lab("t").run("p", lambda: {"copy": True}, verify=verify, predict=True)
    assert r.status == check.FAILED and "secret key" not in str(r) and "could not check" in r.message
    r = check.Lab("t").run("p", lambda: 12, expected=48, compare=check.close(), predict=True)
    assert "48" not in str(r) + r._repr_html_() and "too low" in r.message
    r = check.Lab("t").run("p", lambda: {"a"}, expected={"a", "zz"}, compare=check.same_set, predict=True)
    assert "zz" not in str(r) + r._repr_html_() and "missing" in r.message


def test_prediction_of_a_tensor_fails_without_a_traceback():
    import torch

    r = check.Lab("t").run("p", lambda: torch.ones(3), expected=torch.zeros(3), predict=True)
    assert r.status == check.FAILED and "not right" in r.message
