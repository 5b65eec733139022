"""papermill's engine `socket-files`: the kernel on socket files, not TCP ports, which jupyter_client picks
by binding port 0 and letting go, so on a busy machine another process can take one ("ZMQError: Address
already in use"). `python -m nbkit.publish.engine` is papermill's command line with it (what `nbkit launch`
runs); it imports nothing of nbkit."""

from __future__ import annotations

import tempfile
from typing import Any

from papermill.cli import papermill as papermill_command
from papermill.engines import NBClientEngine, papermill_engines
from traitlets.config import Config

_ENGINE_NAME = "socket-files"


class _SocketFilesEngine(NBClientEngine):
    @classmethod
    def execute_managed_notebook(cls, nb_man: Any, kernel_name: str, **kwargs: Any) -> Any:
        with tempfile.TemporaryDirectory(prefix="nbkit-kernel-") as folder:
            config = Config({"KernelManager": {"transport": "ipc", "ip": f"{folder}/kernel"}})
            return super().execute_managed_notebook(nb_man, kernel_name, config=config, **kwargs)


papermill_engines.register(_ENGINE_NAME, _SocketFilesEngine)

if __name__ == "__main__":
    papermill_command.main(default_map={"engine": _ENGINE_NAME})  # click's defaults for papermill's options
