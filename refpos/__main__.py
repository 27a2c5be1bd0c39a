"""``python -m refpos`` is the ``refpos`` command."""

import sys

from refpos.cli import main

if __name__ == "__main__":
    sys.exit(main())
