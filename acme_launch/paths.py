"""Where this package is: the folder that holds it (ROOT) goes first on
every node process's PYTHONPATH and is its working directory."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
