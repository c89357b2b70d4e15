"""python3 -m rtomo.view: the same as the rtomo-view command."""
import sys

from .server import main

sys.exit(main())
