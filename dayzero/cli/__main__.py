"""`python -m dayzero.cli`."""

import sys

from dayzero.cli import main

sys.exit(main())
