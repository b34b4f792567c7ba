"""Builds the Python package ``ps`` from a clone, and installs it with pip:

    /usr/bin/python3 -m venv --system-site-packages .venv
    .venv/bin/pip install --no-build-isolation --no-index ./python

The build runs CMake in the clone's build folder (``build/``, or
$PS_BUILD_DIR; one configured before is reused as it is, else
scripts/build.sh configures it) for what the package needs: the extension
ps._native and the programs (ps_server, ps_datagen, ps_serve, ps_ckpt).
The programs go inside the package (``ps/bin/``), and the venv's ``bin/``
gets a command of each that runs it. A build
folder that cannot build the extension (no pybind11 or Python headers, a
sanitizer build, -DPS_BUILD_PYTHON=OFF) is refused with what to do: a
package without its native module cannot be imported.
"""

import os
import runpy
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# What the package carries beside its Python files: CMake target -> path
# of its output under the build folder.
PROGRAMS = runpy.run_path(str(HERE / "ps" / "_program_paths.py"))[
    "BUILD_TREE"]
NATIVE_TARGET = "ps_python_native"


def build_folder():
    return Path(os.environ.get("PS_BUILD_DIR") or REPO / "build").resolve()


def refuse(why):
    sys.exit(f"ps: cannot build the Python package: {why}")


def refuse_if_not_built(build):
    not_built = build / "python" / "NOT_BUILT"
    if not_built.is_file():
        refuse(f"{build} does not build the native module ps._native: "
               f"{not_built.read_text().strip()}")


def build_native(build):
    """Builds the extension and the programs in ``build``; returns the
    extension's path."""
    targets = [NATIVE_TARGET, *PROGRAMS]
    if (build / "CMakeCache.txt").is_file():
        # Reuse the folder as configured (its generator, compiler, type).
        refuse_if_not_built(build)
        command = ["cmake", "--build", str(build), "-j", str(os.cpu_count())]
        for t in targets:
            command += ["--target", t]
    else:
        command = [str(REPO / "scripts" / "build.sh"), f"--build-dir={build}"]
        command += [f"--target={t}" for t in targets]
    print("ps: building", " ".join(targets), "in", build, flush=True)
    try:
        # The build's own output goes to stderr, where pip shows it with -v
        # and on failure.
        subprocess.run(command, check=True, stdout=sys.stderr)
    except FileNotFoundError as e:
        refuse(f"{e.filename} not found: run scripts/setup.sh (as root) "
               "to install the compilers, CMake and the libraries")
    except subprocess.CalledProcessError as e:
        refuse(f"the build in {build} failed (exit {e.returncode}; its "
               "output is above). On a fresh machine run scripts/setup.sh "
               "(as root) first")
    refuse_if_not_built(build)
    # The extension this interpreter imports (a folder configured for
    # another Python builds one it cannot).
    native = build / "python" / "ps" / ("_native" +
                                        sysconfig.get_config_var("EXT_SUFFIX"))
    if not native.is_file():
        refuse(f"no {native.name} in {native.parent} after building "
               f"{NATIVE_TARGET}: {build} builds for another Python "
               f"(its CMakeCache.txt names Python_EXECUTABLE); install with "
               f"that interpreter's pip, or set PS_BUILD_DIR to a new folder")
    return native


class BuildWithNative(build_py):
    """build_py that also builds and copies the compiled parts."""

    def run(self):
        build = build_folder()
        native = build_native(build)
        super().run()
        package = Path(self.build_lib) / "ps"
        shutil.copy2(native, package / native.name)
        (package / "bin").mkdir(exist_ok=True)
        for name, path in PROGRAMS.items():
            shutil.copy2(build / path, package / "bin" / name)


class BinaryDistribution(Distribution):
    """The wheel holds a compiled module: tag it for this platform."""

    def has_ext_modules(self):
        return True


setup(
    name="ps",
    version="0.1.0",
    description="Parameter server client, one-sided transfer core and torch "
    "embedding module",
    packages=["ps"],
    cmdclass={"build_py": BuildWithNative},
    distclass=BinaryDistribution,
    entry_points={"console_scripts": [
        f"{name} = ps.programs:{name}" for name in PROGRAMS]},
    # setuptools' own build folder and metadata go under the CMake build
    # folder, not into the source tree.
    options={"build": {"build_base": str(build_folder() / "python-setup")},
             "egg_info": {"egg_base": str(build_folder() / "python-setup")}},
    python_requires=">=3.9",
    install_requires=["numpy"],
    zip_safe=False,
)
