"""Runs against the package in this tree (python/dsim) and the library named
by DSIM_LIBRARY or built in the tree (tests/test_python.sh sets it)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pytest  # noqa: E402

# Short episodes and small renders: every test runs in well under a second or two.
SMALL = {
    "walker": dict(substeps=96, control_interval=32, render_interval=32, width=24, height=24, supersample=1),
    "control-fem": dict(substeps=16, control_interval=8, render_interval=8, width=24, height=24, supersample=1),
    "control-cloth": dict(substeps=40, control_interval=20, render_interval=20, width=48, height=48, supersample=1,
                          size_min=8, size_max=8),
    "walker-springs": dict(substeps=96, control_interval=32, render_interval=32, width=24, height=24,
                           supersample=1),
    "rigid-toss": dict(substeps=96, control_interval=32, render_interval=32, width=24, height=24, supersample=1),
}


def need(module: str):
    """Import module, or skip the test file without it; under
    DSIM_REQUIRE_PYTHON=1 (CI) a missing module is an error."""
    if os.environ.get("DSIM_REQUIRE_PYTHON") == "1":
        return __import__(module)
    return pytest.importorskip(module)


@pytest.fixture(scope="session")
def small():
    return SMALL
