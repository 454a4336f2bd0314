"""Old name of :mod:`course_lib.inductor.codegen.triton` (the code generators now live in ``codegen/``,
as in ``torch/_inductor/codegen/``). The very same module object is returned.
"""

import sys

from course_lib.inductor.codegen import triton as _module

sys.modules[__name__] = _module
