"""Every old import path in ``adatune._moved``'s tables still works: importing it, or reading it as an attribute,
gives the very object at the new path (a module keeps its own name and spec) and warns with the new path.

Each check runs in a fresh interpreter, where nothing has imported the old path yet."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from adatune import _moved

# Checks the rows given as JSON ({"modules": {old: new}, "names": {old: new}}) after adding them to the tables.
CHECK = textwrap.dedent("""
    import importlib, json, sys, warnings

    rows = json.loads(sys.argv[1])
    import adatune
    from adatune import _moved

    _moved.MODULES.update(rows["modules"])
    _moved.NAMES.update(rows["names"])
    _moved.install()
    problems = []

    def warned(old, new, get):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = get()
        hits = [w for w in caught if w.category is DeprecationWarning and old in str(w.message)]
        if not hits or new not in str(hits[0].message):
            problems.append(f"{old}: no DeprecationWarning naming {new}")
        elif hits[0].filename != "<string>":
            problems.append(f"{old}: the warning points at {hits[0].filename}, not the importing code")
        return got

    for old, new in rows["modules"].items():
        if old in sys.modules:
            problems.append(f"{old}: imported before the check")
            continue
        module = importlib.import_module(new)
        parent, _, last = old.rpartition(".")
        # a submodule of a moved package is already its new package's attribute, so only its import can warn
        attribute = lambda: getattr(importlib.import_module(parent), last)
        if not _moved.is_moved(parent) and warned(old, new, attribute) is not module:
            problems.append(f"{old}: the attribute is not {new}")
        if warned(old, new, lambda: importlib.__import__(old, fromlist=["_"])) is not module:
            problems.append(f"{old}: importing it does not give {new}")
        if sys.modules.get(old) is not module:
            problems.append(f"{old}: sys.modules holds another module")
        if module.__name__ != new or module.__spec__.name != new:
            problems.append(f"{old}: the module lost its own name or spec")
    for old, new in rows["names"].items():
        host, _, name = old.rpartition(".")
        owner, _, attr = new.rpartition(".")
        expected = getattr(importlib.import_module(owner), attr)
        if warned(old, new, lambda: getattr(importlib.import_module(host), name)) is not expected:
            problems.append(f"{old}: is not {new}")
    print(json.dumps(problems))
""")


def _problems(modules: dict[str, str], names: dict[str, str]) -> list[str]:
    rows = json.dumps({"modules": modules, "names": names})
    out = subprocess.run([sys.executable, "-c", CHECK, rows], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_moved_module_and_name_resolves_to_its_new_path_with_a_warning() -> None:
    assert _problems(_moved.MODULES, _moved.NAMES) == []


def test_the_check_resolves_old_paths_and_catches_a_wrong_row() -> None:
    """The mechanism on rows made up here (whatever the real tables hold), and the check failing a bad row."""
    made_up = {
        "adatune.old_target": "adatune.target",  # a module
        "adatune.old_cost_models": "adatune.cost_models",  # a package: its submodules follow
        "adatune.old_cost_models.rfei": "adatune.cost_models.rfei",
        "adatune.tuners.old_callback": "adatune.tuners.callback",  # under a package that stays
    }
    names = {"adatune.tuner.old_host": "adatune.target.host", "adatune.space.old_host": "adatune.target.host"}
    assert _problems(made_up, names) == []
    wrong = _problems(
        {}, {"adatune.tuner.old_host": "adatune.target.host", "adatune.tuner.XGBTuner": "adatune.target.host"}
    )
    assert wrong and all("adatune.tuner.XGBTuner" in p for p in wrong)


def test_a_module_keeps_its_own_getattr_and_other_imports_pass_through() -> None:
    code = textwrap.dedent("""
        import importlib.util, json, sys
        import adatune.space
        from adatune import _moved

        adatune.space.__getattr__ = lambda name: "own " + name
        _moved.NAMES["adatune.space.old_host"] = "adatune.target.host"
        _moved.install()
        finder = sys.meta_path[0]
        print(json.dumps([
            adatune.space.anything,
            adatune.space.old_host is adatune.target.host,
            finder.find_spec("json.decoder", None) is None,
            finder.find_spec("adatune.space._knobs", None) is None,
        ]))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == ["own anything", True, True, True]
