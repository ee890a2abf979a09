"""`python -m cogfeed ...`: the same as the `cogfeed` command (cogfeed.cli),
for an environment whose scripts folder is not on PATH."""

import sys

from cogfeed.cli import main

if __name__ == "__main__":
    sys.exit(main())
