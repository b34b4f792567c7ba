# Packs the package CMake assembled in build/python (the extension is built
# already) so that pip installs it offline:
#   /usr/bin/python3 -m venv --system-site-packages .venv
#   .venv/bin/pip install --no-build-isolation --no-index build/python
from setuptools import setup
from setuptools.dist import Distribution


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
    package_data={"ps": ["_native*.so"]},
    distclass=BinaryDistribution,
    python_requires=">=3.9",
    install_requires=["numpy"],
    zip_safe=False,
)
