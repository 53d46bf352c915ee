"""``python -m bucketopt``: the CLI (Ctrl-C while it loads exits 130 too)."""

import sys

try:
    from .cli import main
except KeyboardInterrupt:
    print("bucketopt: interrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
