"""Code generators, laid out like ``torch/_inductor/codegen/``.

``common.py`` (scopes, CSE, argument names shared by the kernel generators), ``cpp.py``
(C++/OpenMP kernels, gcc), ``triton.py`` (Triton kernels), ``wrapper.py`` (the Python
``call(args)`` that allocates buffers and launches kernels). Each kernel backend exposes
``build(kernels, graph)``; ``compile_fx.BACKENDS`` is the table of them.
"""
