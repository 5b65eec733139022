"""`python -m nbkit ...`: see nbkit.publish.cli."""

import sys

from nbkit.publish.cli import main

if __name__ == "__main__":
    sys.exit(main())
