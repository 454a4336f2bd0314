"""torch.compile(backend="course_lib") in a fresh interpreter, whatever is imported first.

torch finds the name through the ``torch_dynamo_backends`` entry point, imports course_lib.inductor
(whose import registers the backend) and then registers what it loaded: the first call in a new
process used to raise ``AssertionError: duplicate name: course_lib``. Only a new process shows it.
"""

import subprocess
import sys

import pytest

PRELUDES = {
    "nothing": "",
    "course_lib": "import course_lib",
    "course_lib.inductor": "import course_lib.inductor",
    "list_backends first": "import torch._dynamo.backends.registry as r; assert 'course_lib' in r.list_backends()",
    "the function": "import course_lib.inductor as ci; BACKEND = ci.compile_fx",
}

SCRIPT = """
import torch
BACKEND = "course_lib"
{prelude}
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
x = torch.randn(3, 4)
out = torch.compile(m, backend=BACKEND)(x)
torch.testing.assert_close(out, m(x))
print("ok")
"""


@pytest.mark.parametrize("prelude", list(PRELUDES), ids=list(PRELUDES))
def test_first_call_in_a_fresh_process(prelude):
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(prelude=PRELUDES[prelude])],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")
