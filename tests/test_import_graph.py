"""No import cycle among adatune's modules, counting late (function-level) and type-checking imports too: the
layer contract (``lint-imports``) checks the top-level packages, this checks every module inside them, where a late
import would otherwise hide a cycle that ties two modules together."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import grimp


def import_cycles(modules: Iterable[str], imported_by: Callable[[str], Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(modules):
        if root in index:
            continue
        work = [(root, iter(sorted(imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for child in edges:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(imported_by(child)))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
    return cycles


def test_adatune_has_no_import_cycle() -> None:
    graph = grimp.build_graph("adatune", cache_dir=None)  # grimp reads every import statement, late ones too
    assert import_cycles(graph.modules, graph.find_modules_directly_imported_by) == []


def test_the_scan_finds_cycles_through_late_imports() -> None:
    graph = grimp.ImportGraph()
    for module in ("pkg", "pkg.a", "pkg.b", "pkg.c", "pkg.d"):
        graph.add_module(module)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.c")
    graph.add_import(importer="pkg.c", imported="pkg.a", line_number=9, line_contents="    from . import a")
    graph.add_import(importer="pkg.d", imported="pkg.a")
    assert import_cycles(graph.modules, graph.find_modules_directly_imported_by) == [["pkg.a", "pkg.b", "pkg.c"]]
    found = grimp.build_graph("adatune", cache_dir=None)  # and the real graph holds a late import
    assert "adatune.tuners._registry" in found.find_modules_directly_imported_by("adatune.cli")
