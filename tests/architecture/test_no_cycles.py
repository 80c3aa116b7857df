"""No import cycles among the app modules (registry/, attestations/, kernelindex/), counting
late imports inside functions too: a cycle broken only by importing late is still a cycle."""

from tests.architecture.imports import app_modules, cycles, graph, imports_of


def test_the_app_modules_import_no_cycle():
    found = cycles(graph(imports_of(app_modules()), top_level_only=False))
    assert found == [], f"import cycles: {found}"


def test_a_planted_cycle_is_found(tmp_path):
    package = tmp_path / "planted"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from planted import b\n")
    (package / "b.py").write_text("def late():\n    from planted.c import x\n")
    (package / "c.py").write_text("import planted.a\nx = 1\n")
    (package / "d.py").write_text("from planted import a\n")  # imports the cycle, not in it
    modules = app_modules(tmp_path, packages=("planted",))

    found = imports_of(modules)

    assert cycles(graph(found, top_level_only=False)) == [["planted.a", "planted.b", "planted.c"]]
    assert cycles(graph(found, top_level_only=True)) == []  # only the late import closes it
