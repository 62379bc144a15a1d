"""`pip install ./python` after building dsim in the tree: the wheel carries a
copy of the built libdsim.so (or the one named by DSIM_LIBRARY) inside the
package, so the installed package works outside the tree. Without one it
installs the pure-Python package, which then finds an installed libdsim
(pkg-config, the linker's path) or DSIM_LIBRARY at run time."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithLib(build_py):
    def run(self):
        super().run()
        here = os.path.dirname(os.path.abspath(__file__))
        src = os.environ.get("DSIM_LIBRARY") or os.path.join(os.path.dirname(here), ".libs", "libdsim.so")
        if os.path.exists(src):
            dst = os.path.join(self.build_lib, "dsim", "libdsim.so")
            shutil.copy2(os.path.realpath(src), dst)


setup(cmdclass={"build_py": BuildPyWithLib})
