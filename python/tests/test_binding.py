"""The package's shape: one binding module (dsim/_lib.py) makes every call
into the library, and the dsim.* modules import each other without a
circle, each importable first in a fresh interpreter."""
import ast
import importlib.util
import os
import re
import subprocess
import sys

import pytest

PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dsim")
BINDING = "_lib.py"
# Modules that need an optional package (skipped when it is missing).
OPTIONAL = {"dsim.torch": "torch", "dsim.sb3": "stable_baselines3"}


def modules() -> dict[str, str]:
    """dotted name -> file, for every module of the package."""
    out = {}
    for f in sorted(os.listdir(PKG)):
        if f.endswith(".py"):
            out["dsim" if f == "__init__.py" else "dsim." + f[:-3]] = os.path.join(PKG, f)
    return out


def test_library_calls_only_in_the_binding_module():
    # what a raw call or a declaration of one looks like: lib.ds_x, _dll.x, ctypes
    # itself (CDLL, POINTER, byref, argtypes are the binding's business)
    raw = re.compile(r"\blib\.ds_|_dll\.|^\s*(import ctypes|from ctypes)|\.argtypes\b|\.restype\b", re.M)
    found = []
    for name, path in modules().items():
        if os.path.basename(path) == BINDING:
            continue
        with open(path) as f:
            for no, line in enumerate(f, 1):
                if raw.search(line):
                    found.append(f"{name} line {no}: {line.strip()}")
    assert found == [], "raw library calls outside dsim/_lib.py:\n" + "\n".join(found)


def import_graph() -> dict[str, set[str]]:
    """module -> the dsim modules it imports (at any depth of its code: an
    import inside a function is a dependency too). `from . import x` is an
    edge to dsim.x when x is a module, else to the package (dsim) itself;
    importing a submodule's parent package is not counted (Python does it
    before any submodule runs)."""
    mods = modules()
    graph = {}
    for name, path in mods.items():
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name == "dsim" or a.name.startswith("dsim."))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = "dsim" + ("." + node.module if node.module else "")  # the package is one level deep
                elif node.module and (node.module == "dsim" or node.module.startswith("dsim.")):
                    base = node.module
                else:
                    continue
                if base == "dsim":
                    for a in node.names:
                        deps.add("dsim." + a.name if "dsim." + a.name in mods else "dsim")
                else:
                    deps.add(base)
        deps.discard(name)
        graph[name] = {d for d in deps if d in mods}
    return graph


def find_cycle(graph):
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if not state.get(m):
                c = visit(m)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if not state.get(n):
            c = visit(n)
            if c:
                return c
    return None


def test_no_import_cycle():
    graph = import_graph()
    assert {"dsim.gym", "dsim.vector", "dsim._lib"} <= set(graph)
    assert "dsim._lib" in graph["dsim.env"]
    assert graph["dsim._lib"] == set(), "the binding module imports nothing of the package"
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)
    # the checker sees a cycle when there is one
    assert find_cycle(dict(graph, **{"dsim.vector": graph["dsim.vector"] | {"dsim.gym"}})) is not None


@pytest.mark.parametrize("name", sorted(modules()))
def test_imports_first_in_a_fresh_interpreter(name):
    need = OPTIONAL.get(name)
    if need and importlib.util.find_spec(need) is None and os.environ.get("DSIM_REQUIRE_PYTHON") != "1":
        pytest.skip(f"{name} needs {need}")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(PKG)] + sys.path))
    r = subprocess.run([sys.executable, "-c", f"import {name}"], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, f"import {name} in a fresh interpreter failed:\n{r.stderr[-3000:]}"
