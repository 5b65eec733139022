"""`import nbkit` must stay light: it loads nothing outside nbkit and the standard library, and no
module of any sub-package pulls in a heavy framework at import (the Keras backend is chosen later).
How fast that is is measured by bench/bench_setup.py, not here."""

import json

HEAVY = ("tensorflow", "jax", "torch", "torch_xla", "kaggle", "keras", "PIL", "matplotlib")

CODE = """
import json, sys
before = set(sys.modules)
import nbkit
package_loads = sorted(m for m in set(sys.modules) - before
                       if m.split(".")[0] not in sys.stdlib_module_names and m.split(".")[0] != "nbkit")
import importlib, pkgutil
for module in pkgutil.walk_packages(nbkit.__path__, "nbkit."):
    importlib.import_module(module.name)
print(json.dumps({"package": package_loads, "heavy": [m for m in HEAVY if m in sys.modules]}))
"""


def test_import_loads_only_the_standard_library_and_no_module_loads_a_framework(run_python):
    result = run_python(f"HEAVY = {HEAVY!r}\n" + CODE)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["package"] == []
    assert report["heavy"] == []
