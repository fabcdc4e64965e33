"""Moved to capacity_launcher_cli.template (the local cloud needs it at runtime)."""

import sys

from capacity_launcher_cli import template

# One module under both names, private helpers included, so existing imports keep working.
sys.modules[__name__] = template
