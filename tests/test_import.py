"""`import nbkit` must be fast and must not pull in a heavy framework (the Keras backend is chosen later)."""

import json

HEAVY = ("tensorflow", "jax", "torch", "torch_xla", "kaggle", "keras", "PIL")


def test_import_is_fast_and_light(run_python):
    result = run_python(
        """
        import json, sys, time
        start = time.perf_counter()
        import nbkit
        seconds = time.perf_counter() - start
        import importlib, pkgutil  # every module must stay light too, not only the package
        for module in pkgutil.iter_modules(nbkit.__path__):
            importlib.import_module("nbkit." + module.name)
        print(json.dumps({"seconds": seconds, "loaded": [m for m in %r if m in sys.modules]}))
        """ % (HEAVY,)
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["loaded"] == []
    assert report["seconds"] < 0.2, report
