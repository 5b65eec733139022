"""`python -m nbkit ...`: see nbkit.cli."""

import sys

from nbkit.cli import main

if __name__ == "__main__":
    sys.exit(main())
