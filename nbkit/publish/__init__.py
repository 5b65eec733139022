"""From a notebook to a Kaggle kernel: `bundle` (nbkit inside the notebook), `kernel_metadata`,
`push` (the kaggle CLI), `scan` (no secrets in what is published), `cli` (`python -m nbkit`).
Runs on the user's machine; never bundled into a notebook."""
