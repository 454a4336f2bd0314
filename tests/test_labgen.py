"""The solutions -> labs generator: stubs, ids, outputs, refusal to overwrite, in-sync check."""

import json

import nbformat
import pytest

from course_lib import labgen

SOLUTION = '''def count_graphs(fn) -> int:
    """Return how many graphs Dynamo makes."""
    ### BEGIN SOLUTION
    n = 1
    return n + 1
    ### END SOLUTION


x = 3
'''


def _nb(cells):
    return {"cells": cells, "metadata": {"kernelspec": {"name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}


def _code(cid, source, outputs=None):
    return {
        "cell_type": "code",
        "id": cid,
        "source": source,
        "metadata": {},
        "outputs": outputs or [],
        "execution_count": 3 if outputs else None,
    }


def test_stub_replaces_region_at_its_indentation_and_names_the_exercise():
    out = labgen.strip_solutions(SOLUTION)
    assert "n = 1" not in out and "### BEGIN" not in out
    assert "    raise NotImplementedError(\"exercise 'count_graphs': replace this line with your code\")" in out
    assert out.endswith("x = 3\n") and '"""Return how many graphs Dynamo makes."""' in out
    compile(out, "<lab>", "exec")


def test_nested_function_gets_its_own_name():
    src = "class A:\n    def meth(self):\n        ### BEGIN SOLUTION\n        return 1\n        ### END SOLUTION\n"
    assert "exercise 'meth'" in labgen.strip_solutions(src)


@pytest.mark.parametrize(
    ("src", "message"),
    [
        ("### BEGIN SOLUTION\nx = 1\n### END SOLUTION\n", "inside a function body"),
        ("def f():\n    ### BEGIN SOLUTION\n    return 1\n", "has no"),
        ("def f():\n    return 1\n    ### END SOLUTION\n", "without"),
    ],
)
def test_malformed_markers_are_errors_with_line(src, message):
    with pytest.raises(labgen.LabGenError, match=message) as info:
        labgen.strip_solutions(src, "solutions/x.ipynb, cell c1")
    assert "line" in str(info.value) and "cell c1" in str(info.value)


def test_lab_keeps_ids_clears_outputs():
    nb = _nb(
        [
            _code("ex-1", SOLUTION, outputs=[{"output_type": "stream", "name": "stdout", "text": "2"}]),
            {"cell_type": "markdown", "id": "md-1", "source": "# Title", "metadata": {}},
        ]
    )
    lab = labgen.lab_from_solution(nb)
    assert [c["id"] for c in lab["cells"]] == ["ex-1", "md-1"]
    assert lab["cells"][0]["outputs"] == [] and lab["cells"][0]["execution_count"] is None
    assert nb["cells"][0]["outputs"], "the solution notebook itself is not modified"


@pytest.fixture
def tree(tmp_path):
    sol, labs = tmp_path / "solutions", tmp_path / "labs"
    (sol / "01_mod").mkdir(parents=True)
    (sol / "01_mod" / "01a.ipynb").write_text(json.dumps(_nb([_code("c1", SOLUTION)])))
    return sol, labs


def test_generate_then_in_sync(tree):
    sol, labs = tree
    report = labgen.generate(sol, labs)
    assert report.written == ["01_mod/01a.ipynb"]
    assert labgen.check_in_sync(sol, labs) == []
    assert labgen.generate(sol, labs).unchanged == ["01_mod/01a.ipynb"]


def test_refuses_to_overwrite_an_edited_lab_without_force(tree):
    sol, labs = tree
    labgen.generate(sol, labs)
    lab = labs / "01_mod" / "01a.ipynb"
    edited = json.loads(lab.read_text())
    edited["cells"][0]["source"] = "def count_graphs(fn):\n    return 2  # my answer\n"
    lab.write_text(json.dumps(edited))
    # the solution changes, so regenerating would normally rewrite the lab
    nb = json.loads((sol / "01_mod" / "01a.ipynb").read_text())
    nb["cells"].append(_code("c2", "y = 4\n"))
    (sol / "01_mod" / "01a.ipynb").write_text(json.dumps(nb))

    report = labgen.generate(sol, labs)
    assert report.kept == ["01_mod/01a.ipynb"] and "--force" in str(report)
    assert "my answer" in lab.read_text()
    report = labgen.generate(sol, labs, force=True)
    assert report.written == ["01_mod/01a.ipynb"] and "my answer" not in lab.read_text()


def test_a_lab_of_unknown_origin_is_kept(tree):
    sol, labs = tree
    (labs / "01_mod").mkdir(parents=True)
    (labs / "01_mod" / "01a.ipynb").write_text("{}")
    assert labgen.generate(sol, labs).kept == ["01_mod/01a.ipynb"]


def test_check_in_sync_finds_stale_missing_and_orphan_labs(tree):
    sol, labs = tree
    assert labgen.check_in_sync(sol, labs) == ["labs/01_mod/01a.ipynb is missing"]
    labgen.generate(sol, labs)
    (labs / "01_mod" / "01a.ipynb").write_text("{}")
    (labs / "old.ipynb").write_text("{}")
    problems = labgen.check_in_sync(sol, labs)
    assert any("differs" in p for p in problems) and any("old.ipynb has no solution" in p for p in problems)


def test_cli_check_exit_codes(tree, capsys):
    sol, labs = tree
    assert labgen.main(["--solutions", str(sol), "--labs", str(labs), "--check"]) == 1
    assert labgen.main(["--solutions", str(sol), "--labs", str(labs)]) == 0
    assert labgen.main(["--solutions", str(sol), "--labs", str(labs), "--check"]) == 0
    assert "in sync" in capsys.readouterr().out


def test_repository_labs_are_in_sync_and_every_exercise_is_stubbed():
    from course_lib import env

    root = env.repo_root()
    assert labgen.check_in_sync(root / "solutions", root / "labs") == []
    for lab in (root / "labs").rglob("*.ipynb"):
        text = lab.read_text()
        assert labgen.BEGIN not in text and labgen.END not in text, lab


def test_notebooks_go_through_nbformat(tree):
    sol, labs = tree
    labgen.generate(sol, labs)
    text = (labs / "01_mod" / "01a.ipynb").read_text()
    nb = nbformat.reads(text, as_version=4)
    assert nb.nbformat == 4 and text == nbformat.writes(nb) + "\n"  # nbformat's own layout
    assert isinstance(json.loads(text)["cells"][0]["source"], list)  # lines, as JupyterLab saves them
    (sol / "01_mod" / "01a.ipynb").write_text("not a notebook")
    with pytest.raises(labgen.LabGenError, match="solutions/01_mod/01a.ipynb is not a Jupyter notebook"):
        labgen.generate(sol, labs)
