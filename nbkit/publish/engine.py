"""papermill's engine with the kernel reached through socket files instead of TCP ports.

jupyter_client gives a kernel five TCP ports by binding port 0 and letting go, and the kernel binds them
a second later; on a busy machine (processes started together, JAX's Gloo opening sockets) another
process can take one in between, and the kernel dies with "ZMQError: Address already in use". Socket
files in a folder of the run's own cannot be taken.

Importing this module registers the engine as `socket-files` (`papermill.execute_notebook(...,
engine_name="socket-files")`); `python -m nbkit.publish.engine` is papermill's command line with it
as the default engine, what `python -m nbkit launch` runs. It imports nothing of nbkit, so it runs
as a plain script where nbkit is not installed.
"""

from __future__ import annotations

import tempfile
from typing import Any

from papermill.cli import papermill as papermill_command
from papermill.engines import NBClientEngine, papermill_engines
from traitlets.config import Config

_ENGINE_NAME = "socket-files"


class _SocketFilesEngine(NBClientEngine):
    """papermill's nbclient engine, its kernel on socket files in a temporary folder of the run's own."""

    @classmethod
    def execute_managed_notebook(cls, nb_man: Any, kernel_name: str, **kwargs: Any) -> Any:
        with tempfile.TemporaryDirectory(prefix="nbkit-kernel-") as folder:
            config = Config({"KernelManager": {"transport": "ipc", "ip": f"{folder}/kernel"}})
            return super().execute_managed_notebook(nb_man, kernel_name, config=config, **kwargs)


papermill_engines.register(_ENGINE_NAME, _SocketFilesEngine)

if __name__ == "__main__":
    papermill_command.main(default_map={"engine": _ENGINE_NAME})  # click's defaults for papermill's options
