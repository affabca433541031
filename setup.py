"""The compiled part of `sps` for pip: the project's CMake builds it (release preset, for the
Python running pip), and it is installed as sps/_sps*.so beside the package's files."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        # The interpreter itself, not a virtual environment's link to it (which may go away).
        python = os.path.realpath(sys.executable)
        subprocess.check_call(["cmake", "--preset", "release", "-DSPS_PYTHON=ON",
                               f"-DSPS_PYTHON_EXECUTABLE={python}"], cwd=ROOT)
        subprocess.check_call(["cmake", "--build", "--preset", "release", "--target", "sps_python"],
                              cwd=ROOT)
        name = Path(self.get_ext_filename(ext.name)).name
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / "build" / "release" / "python" / "sps" / name, target)


setup(ext_modules=[Extension("sps._sps", sources=[])], cmdclass={"build_ext": CMakeBuild})
