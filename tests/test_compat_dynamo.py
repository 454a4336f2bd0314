"""One test per compat function that course_lib.dynamo uses; each failure names the torch API."""

from course_lib import compat


def test_dynamo_set_eval_frame_installs_and_uninstalls():
    seen = []
    normal = compat.dynamo_run_frame_normally()

    def callback(frame, cache_entry, frame_state):
        seen.append(frame.f_code.co_name)
        return normal

    def probe():
        return 1

    prior = compat.dynamo_set_eval_frame(callback)
    try:
        probe()
    finally:
        back = compat.dynamo_set_eval_frame(prior)
    assert "probe" in seen, "torch._C._dynamo.eval_frame.set_eval_frame no longer calls the callback per frame"
    assert back is callback, "set_eval_frame no longer returns the previous callback"


def test_dynamo_run_frame_normally_has_the_expected_shape():
    value = compat.dynamo_run_frame_normally()
    assert value is None or hasattr(value, "frame_exec_strategy"), (
        "torch._dynamo.types.ConvertFrameReturn changed; update compat.dynamo_run_frame_normally"
    )
