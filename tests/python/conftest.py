"""Makes the built package importable: $PS_BUILD_DIR/python, by default
<repo>/build/python (where python/CMakeLists.txt assembles it)."""

import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(
    os.environ.get("PS_BUILD_DIR", os.path.join(_REPO, "build")), "python"))
