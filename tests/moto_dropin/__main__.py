"""`python -m tests.moto_dropin [--bare] [--keep] [-- PYTEST ARGS]`."""

import sys

from .run import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
