"""``python -m streamcov``: the ``streamcov`` command (:func:`streamcov.cli.main`)."""
import sys

from .cli import main

sys.exit(main())
