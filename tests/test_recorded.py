"""course_lib.recorded: load with a banner, a clear sentence when absent, and save."""

import json

from course_lib import env, recorded


def test_missing_recording_is_falsy_and_says_so():
    r = recorded.load("no_such_module/none.json")
    assert not r and r.value is None
    assert "No recording at data/no_such_module/none.json" in str(r)


def test_save_then_load_round_trip(tmp_path, monkeypatch):
    monkeypatch.setattr(env, "data_dir", lambda: tmp_path)
    recorded.save(tmp_path / "m" / "x.json", {"gbps": 4100.0}, meta={"device": "NVIDIA H200", "date": "2026-12-02"})
    r = recorded.load("m/x.json")
    assert r and r.value == {"gbps": 4100.0}
    assert str(r).startswith("Recorded on NVIDIA H200 on 2026-12-02")
    assert "data/m/x.json" in r._repr_html_()
    doc = json.loads((tmp_path / "m" / "x.json").read_text())
    assert set(doc) == {"meta", "value"} and "torch" in doc["meta"]


def test_malformed_recording_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(env, "data_dir", lambda: tmp_path)
    (tmp_path / "bad.json").write_text("[1, 2]")
    try:
        recorded.load("bad.json")
    except ValueError as exc:
        assert "not a recording" in str(exc)
    else:
        raise AssertionError("expected ValueError")


def test_live_measurements_and_device_scripts():
    r = recorded.live({"gbs": 1.0}, "gpu/copy_bandwidth.json")
    assert r and str(r).startswith("Measured just now on")
    module = recorded.device_script("record_gpu")
    assert callable(module.copy_bandwidth) and callable(module.occupancy_effects)
