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
