"""Old name of :mod:`course_lib.inductor.compile_fx` (renamed like torch's ``compile_fx.py``).

``import course_lib.inductor.backend`` gives the very same module object, so a monkeypatch on
either name affects both.
"""

import sys

from course_lib.inductor import compile_fx as _module

sys.modules[__name__] = _module
