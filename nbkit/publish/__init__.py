"""From a notebook to a Kaggle kernel: `bundle` (nbkit inside the notebook, the kernel metadata), `push`
(the kaggle CLI: push, status, follow, fetch), `scan` (no secrets in what is published), `launch` (local
processes joined like a pod slice's hosts) and `engine` (papermill, its kernels on socket files), `cli`
(`python -m nbkit`). Runs on the user's machine; never bundled into a notebook."""
