"""On PYTHONPATH, makes `import torch_xla` fail as if it were not installed, so the plain-torch
fallback of nbkit.pytorch.runtime runs for real in the environment that has torch_xla (tests and notebook kernels)."""

import importlib.abc
import sys


class _BlockTorchXla(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch_xla" or name.startswith("torch_xla."):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by tests/xla/without_torch_xla)", name=name)
        return None


sys.meta_path.insert(0, _BlockTorchXla())
