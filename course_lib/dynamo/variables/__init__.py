"""What sits on the symbolic stack: variable trackers (teaches torch/_dynamo/variables/).

Position: Python values of a frame --> ``Var`` objects the translator pushes and pops.

One module per family, as in torch: base.py (``Var``, constants), tensor.py, lists.py (lists,
tuples, sets, iterators), dicts.py, functions.py (user functions, torch functions, bound methods,
nn.Modules), builtin.py (the builtins' rule table), ctx_manager.py
(``with torch.no_grad()``), builder.py (``wrap``: value -> Var). Each class
carries the rules for its values (``call_method``, ``var_getattr``, ``getitem``, ``unpack``...);
sources are in source.py and guards in guards.py, one level up.

Simplification: real Dynamo's trackers do not hold concrete tensors (they hold fake tensors,
see course_lib.fake); ours hold the real example value, computed eagerly while capturing.
"""

from course_lib.dynamo.guards import Guard, guard_for
from course_lib.dynamo.source import Source
from course_lib.dynamo.variables.base import CellVar, ConstVar, NullVar, PyObjVar, Var, any_tensor, python_call
from course_lib.dynamo.variables.builder import (
    CONSTANT_TYPES,
    SKIP_MODULES,
    is_callable_var,
    is_torch_callable,
    is_user_function,
    plain_dict_type,
    wrap,
)
from course_lib.dynamo.variables.builtin import BUILTIN_RULES, FOLDABLE, BuiltinVar, call_builtin
from course_lib.dynamo.variables.ctx_manager import GradModeClassVar, GradModeExitVar, GradModeVar
from course_lib.dynamo.variables.dicts import DICT_METHODS, DictVar, DictViewVar
from course_lib.dynamo.variables.functions import (
    FunctionVar,
    MethodVar,
    ModuleVar,
    NestedFunctionVar,
    TorchFnVar,
    is_leaf_module,
)
from course_lib.dynamo.variables.lists import LIST_METHODS, IteratorVar, ListVar, SetVar
from course_lib.dynamo.variables.tensor import (
    TENSOR_DATA_METHODS,
    TENSOR_STATIC_ATTRS,
    TENSOR_STATIC_METHODS,
    TensorVar,
)

__all__ = [
    "BUILTIN_RULES", "CONSTANT_TYPES", "DICT_METHODS", "FOLDABLE", "LIST_METHODS", "SKIP_MODULES",
    "TENSOR_DATA_METHODS", "TENSOR_STATIC_ATTRS", "TENSOR_STATIC_METHODS", "BuiltinVar", "CellVar", "ConstVar",
    "DictVar", "DictViewVar", "FunctionVar", "GradModeClassVar", "GradModeExitVar", "GradModeVar", "Guard", "IteratorVar", "ListVar", "MethodVar", "ModuleVar",
    "NestedFunctionVar", "NullVar", "PyObjVar", "SetVar", "Source", "TensorVar", "TorchFnVar", "Var", "any_tensor",
    "call_builtin", "guard_for", "is_callable_var", "is_leaf_module", "is_torch_callable", "is_user_function",
    "plain_dict_type", "python_call", "wrap",
]  # fmt: skip
