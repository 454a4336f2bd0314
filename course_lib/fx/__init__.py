"""course_lib.fx: a small, working torch.fx (teaches torch/fx/graph.py, node.py, proxy.py,
_symbolic_trace.py, interpreter.py, subgraph_rewriter.py, passes/shape_prop.py).

Position in the pipeline: Python function --(course_lib.dynamo or symbolic_trace)--> **Graph**
--> passes --> course_lib.aot / decomp / inductor.

API (names mirror torch.fx, so code written against one reads like the other)::

    Graph(owning_module=None)
        .nodes                        ordered list of Node (a copy; safe to edit while iterating)
        .placeholder(name, default=...) .get_attr(qualname) .call_function(fn, args, kwargs)
        .call_method(name, args, kwargs) .call_module(qualname, args, kwargs) .output(value)
        .create_node(op, target, args, kwargs, name=None)
        .erase_node(node)  .node_copy(node, arg_transform)  .graph_copy(other, env)
        .inserting_before(node) / .inserting_after(node)   (context managers)
        .eliminate_dead_code() -> bool   .lint()   .find_nodes(op=, target=)   .output_node()
        str(graph)                    torch.fx's readable form ("%add : [num_users=1] = call_function[...]")
        .print_tabular()  .python_code() / .code  .to_dot()
        graph(*inputs)                run with the Interpreter (uses owning_module for get_attr/call_module)
        .owning_module                the nn.Module get_attr/call_module refer to (the GraphModule's role)
    Node: .op .target .args .kwargs .name .meta .users .all_input_nodes
          .replace_all_uses_with(new) .replace_input_with(old, new) .format_node() .prev .next
    map_arg(value, fn)
    symbolic_trace(fn_or_module) -> Graph          Proxy / Attribute / Tracer / TraceError
    Interpreter(graph, module=None).run(*args)      dispatches getattr(self, node.op)(target, args, kwargs)
    ShapeProp(graph).propagate(*args)               fills node.meta["tensor_meta"], node.meta["val"]
    passes: dce(graph) -> erased names; cse(graph) -> {removed: kept};
            replace_pattern(graph, pattern_fn, replacement_fn) -> [Match]; find_matches(graph, pattern_graph)
    python_code(graph) -> str; compile_graph(graph, module=None) -> callable (exec of the generated code)
    to_torch_fx(graph) -> torch.fx.GraphModule;  from_torch_fx(graph_module_or_graph) -> Graph
    to_dot(graph) -> DOT text;  draw(graph) -> course_lib.viz.graph view (SVG)

There is no separate GraphModule class: a Graph carries its ``owning_module`` and is callable,
and :func:`to_torch_fx` gives the real GraphModule when one is needed.
"""

from course_lib.fx.codegen import compile_graph, python_code
from course_lib.fx.convert import from_torch_fx, to_torch_fx
from course_lib.fx.draw import draw, to_dot
from course_lib.fx.graph import OPCODES, Graph, Node, fetch_attr, format_arg, map_arg, target_name
from course_lib.fx.interpreter import Interpreter, ShapeProp, TensorMeta
from course_lib.fx.passes import Match, cse, dce, find_matches, replace_pattern
from course_lib.fx.proxy import Attribute, Proxy, TraceError, Tracer, symbolic_trace

__all__ = [
    "OPCODES", "Attribute", "Graph", "Interpreter", "Match", "Node", "Proxy", "ShapeProp", "TensorMeta",
    "TraceError", "Tracer", "compile_graph", "cse", "dce", "draw", "fetch_attr", "find_matches",
    "format_arg", "from_torch_fx", "map_arg", "python_code", "replace_pattern", "symbolic_trace",
    "target_name", "to_dot", "to_torch_fx",
]  # fmt: skip
