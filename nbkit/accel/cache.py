"""JAX's persistent compilation cache, for the notebooks that keep one (02, 05, 08): a folder a later session
gets back, so a resumed run loads its compiled step. `cache.use(folder, acc)` right after `accel.setup()`,
before anything compiles. One subfolder per runtime (`jax-<version>-<device kind>-x<devices>`): another
runtime's entries are only reported; a damaged entry is JAX's warning and a fresh compile, never a wrong result."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbkit.errors import ParameterError

# JAX's events (jax._src.compiler, the same names in JAX 0.5-0.10) that say what the cache did.
_HIT = "/jax/compilation_cache/cache_hits"
_SAVED = "/jax/compilation_cache/compile_time_saved_sec"
# Store every compiled program, not only those over JAX's default 1 s: the ~200 small programs Keras runs
# to build and initialise EfficientNetB0 cost 15 s cold and 3.6 s loaded (bench/compile_cache.py), in 3 MB.
_MIN_COMPILE_SECONDS = 0.0


@dataclass
class _CompileCache:
    """The cache folder this process uses (None: none, `off_reason` says why), what it held, what it served."""

    folder: Path | None = None  # the subfolder for this runtime
    off_reason: str = ""
    entries_found: int = 0
    other_runtimes: list[str] = field(default_factory=list)
    hits: int = 0
    seconds_saved: float = 0.0

    def describe(self) -> str:
        """What the cache holds, in one line ("" where none was asked about)."""
        if self.folder is None:
            return f"compile cache: off ({self.off_reason})" if self.off_reason else ""
        held = "empty, so this run compiles and stores its programs there"
        held = f"{self.entries_found} compiled program(s) from earlier runs" if self.entries_found else held
        text = f"compile cache {self.folder}: {held}"
        if self.other_runtimes:
            text += f"; ignored: the entries of {', '.join(self.other_runtimes)}, which this runtime cannot use"
        return text

    def report(self) -> str:
        if self.folder is None:
            return self.describe()
        if not self.hits:
            return f"compile cache: nothing loaded; what this run compiled is stored in {self.folder}"
        return f"compile cache: {self.hits} compiled program(s) loaded, {self.seconds_saved:.0f} s of compiling saved"

    def _on_event(self, event: str, *args: Any, **kwargs: Any) -> None:
        if event == _HIT:
            self.hits += 1

    def _on_duration(self, event: str, seconds: float, *args: Any, **kwargs: Any) -> None:
        if event == _SAVED:
            self.seconds_saved += max(seconds, 0.0)


def use(folder: str | Path | None, acc: Any) -> _CompileCache:
    """The cache for COMPILE_CACHE=`folder` ("none": none) on the devices `accel.setup()` found (`acc`): JAX's
    persistent cache pointed at `folder`'s subfolder for this runtime. Call it before anything compiles."""
    if folder in (None, "none"):
        return _CompileCache(off_reason="none was asked for" if folder else "")
    if acc.backend != "jax":
        return _CompileCache(off_reason="JAX's; the TensorFlow backend compiles again in every session")
    import jax
    from jax import monitoring

    root, devices = Path(folder).expanduser(), acc.jax_devices
    name = _runtime_name(jax.__version__, devices[0].device_kind, len(devices))
    # JAX makes the folder when it first compiles (after the data checks); whether it can is checked now.
    existing = next(p for p in (root, *root.parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise ParameterError(
            f"COMPILE_CACHE={str(folder)!r} cannot be written ({existing} is not a writable folder): give a "
            "writable folder, or 'none' to compile without a cache."
        )
    cache = _CompileCache(
        folder=root / name,
        entries_found=sum(1 for _ in (root / name).glob("*-cache")),  # JAX's files: <key>-cache, <key>-atime
        other_runtimes=sorted(p.name for p in root.glob("jax-*") if p.is_dir() and p.name != name),
    )
    jax.config.update("jax_compilation_cache_dir", str(cache.folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", _MIN_COMPILE_SECONDS)
    # Workaround, JAX 0.5-0.10: its GPU autotuning subcache puts the folder's path into every entry's key, so a copy
    # elsewhere (RESUME_FROM) loaded nothing (docs/limits.md; tests/test_compile_cache.py moves a cache).
    jax.config.update("jax_persistent_cache_enable_xla_caches", "none")
    monitoring.register_event_listener(cache._on_event)
    monitoring.register_event_duration_secs_listener(cache._on_duration)
    return cache


def _runtime_name(jax_version: str, device_kind: str, device_count: int) -> str:
    kind = re.sub(r"[^a-z0-9.]+", "-", device_kind.lower()).strip("-") or "unknown"
    return f"jax-{jax_version}-{kind}-x{device_count}"
