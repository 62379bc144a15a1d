"""`pip install ./python` after building dsim in the tree: the wheel carries a
copy of the built libdsim.so (or the one named by DSIM_LIBRARY) inside the
package, so the installed package works outside the tree. Without one it
installs the pure-Python package, which then finds an installed libdsim
(pkg-config, the linker's path) or DSIM_LIBRARY at run time.

A wheel that carries the library is a platform wheel: tagged
py3-none-<platform> (e.g. py3-none-linux_x86_64): the package reaches the
library through ctypes, so any Python 3 will do, but only on the platform
the library was built for. The pure one stays py3-none-any."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:  # setuptools >= 70.1 has bdist_wheel; older ones take it from wheel
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # pragma: no cover
    try:
        from wheel.bdist_wheel import bdist_wheel
    except ImportError:
        bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))


def _library():
    """The libdsim.so the wheel carries, or None."""
    src = os.environ.get("DSIM_LIBRARY") or os.path.join(os.path.dirname(HERE), ".libs", "libdsim.so")
    return src if os.path.exists(src) else None


class BuildPyWithLib(build_py):
    def run(self):
        super().run()
        src = _library()
        if src:
            dst = os.path.join(self.build_lib, "dsim", "libdsim.so")
            shutil.copy2(os.path.realpath(src), dst)


class NativeDistribution(Distribution):
    def has_ext_modules(self):  # a native library inside: platform-specific
        return _library() is not None


cmdclass = {"build_py": BuildPyWithLib}
if bdist_wheel is not None:
    class PlatformWheel(bdist_wheel):
        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = _library() is None

        def get_tag(self):
            python, abi, plat = super().get_tag()
            if not self.root_is_pure:  # ctypes, no extension module: any CPython 3 ABI
                python, abi = "py3", "none"
            return python, abi, plat

    cmdclass["bdist_wheel"] = PlatformWheel

setup(cmdclass=cmdclass, distclass=NativeDistribution)
