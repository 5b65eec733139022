"""nbval runs the notebooks here with a fresh working folder (NBKIT_WORKING_DIR), so what earlier
runs left in out/ (a finished checkpoint, an old model package) cannot change their outputs.
06 predicts with the package 05 wrote in the same session: pytest runs them in name order."""

import os
import tempfile

os.environ.setdefault("NBKIT_WORKING_DIR", tempfile.mkdtemp(prefix="nbkit-nbval-"))
