"""``python -m kb_ray.cli``: the same as the ``kb-ray`` command."""

import sys

from kb_ray.cli import main

sys.exit(main())
