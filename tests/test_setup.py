"""The platform's own promises: pins agree everywhere, CI runs `make test`, the README starts with the two commands."""

import re
import tomllib

from course_lib import env

ROOT = env.repo_root()


def _pyproject_pins():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    reqs = data["project"]["dependencies"] + data["project"]["optional-dependencies"]["dev"]
    return dict(r.split("==") for r in reqs)


def test_every_dependency_is_pinned_exactly():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for req in data["project"]["dependencies"] + data["project"]["optional-dependencies"]["dev"]:
        assert re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][\w.]*", req), f"{req} is not an exact pin"
    pins = _pyproject_pins()
    assert pins["torch"] == "2.13.0" and pins["triton"].startswith("3.9.")
    assert pins["jupyterlab"].startswith("4.") and pins["ipywidgets"].startswith("8.")


def test_environment_yml_matches_pyproject():
    text = (ROOT / "environment.yml").read_text()
    assert "conda-forge" in text and re.search(r"^\s*- python=3\.11$", text, re.M)
    assert re.search(r"^\s*- graphviz$", text, re.M), "dot must come from conda-forge's graphviz"
    pins = dict(re.findall(r"^\s*- ([A-Za-z0-9_.-]+)==([\w.]+)$", text, re.M))
    assert pins == _pyproject_pins()


def test_ci_runs_make_test_and_nothing_else():
    lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert lines[-1] == "make test"
    assert all(line.startswith(("set ", "cd ")) for line in lines[:-1])


def test_readme_starts_with_the_two_commands():
    head = (ROOT / "README.md").read_text().split("\n## ")[0]
    assert "make lab" in head and "make test" in head


def test_makefile_has_the_stable_targets():
    text = (ROOT / "Makefile").read_text()
    for target in ("lab", "test", "labs", "bench", "clean", "install"):
        assert re.search(rf"^{target}:", text, re.M), target


def test_dynamo_finds_the_course_backend_by_name():
    from importlib.metadata import entry_points

    names = {ep.name: ep.value for ep in entry_points(group="torch_dynamo_backends")}
    assert names.get("course_lib") == "course_lib.inductor:compile_fx"


def test_lab_settings_turn_jupyterlab_news_off():
    import json

    overrides = json.loads((ROOT / "jupyter-settings" / "overrides.json").read_text())
    notification = overrides["@jupyterlab/apputils-extension:notification"]
    assert notification == {"fetchNews": "false", "checkForUpdates": False}
    schema = ROOT / ".venv" / "share" / "jupyter" / "lab" / "schemas" / "@jupyterlab" / "apputils-extension"
    if (schema / "notification.json").exists():  # the keys are JupyterLab's own, not typos
        props = json.loads((schema / "notification.json").read_text())["properties"]
        assert set(notification) <= set(props) and {"const": "false", "title": "Never"} in props["fetchNews"]["oneOf"]
    text = (ROOT / "Makefile").read_text()
    assert (
        "jupyter-settings/overrides.json" in text
        and "cp jupyter-settings/overrides.json" in (ROOT / "postBuild").read_text()
    )


def test_make_lab_does_not_force_a_headless_matplotlib_backend():
    # ipykernel installs its inline backend only when MPLBACKEND is unset: Agg there means no figures.
    text = (ROOT / "Makefile").read_text()
    assert not re.search(r"^export MPLBACKEND", text, re.M)
    lab_recipe = re.search(r"^lab:.*\n((?:\t.*\n)+)", text, re.M).group(1)
    assert "env -u MPLBACKEND" in lab_recipe


def test_postbuild_in_a_fresh_venv(tmp_path):
    import json
    import subprocess
    import sys

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env_vars = {**__import__("os").environ, "PATH": f"{venv / 'bin'}:{__import__('os').environ['PATH']}"}
    env_vars.pop("PYTHONPATH", None)
    proc = subprocess.run(["bash", str(ROOT / "postBuild")], capture_output=True, text=True, env=env_vars, timeout=600)
    if proc.returncode != 0 and "No matching distribution found for setuptools" in proc.stderr:
        import pytest

        pytest.skip("no package index reachable to build course_lib (postBuild needs setuptools from PyPI)")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    probe = (
        "import importlib.util, importlib.metadata as md, json;"
        "spec = importlib.util.find_spec('course_lib');"
        "eps = {e.name: e.value for e in md.entry_points(group='torch_dynamo_backends')};"
        "print(json.dumps([list(spec.submodule_search_locations), eps]))"
    )
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    locations, eps = json.loads(out.stdout)
    assert locations == [str(ROOT / "course_lib")]
    assert eps == {"course_lib": "course_lib.inductor:compile_fx"}
    settings = venv / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    assert settings.read_text() == (ROOT / "jupyter-settings" / "overrides.json").read_text()
