"""The one build step pyproject.toml cannot declare: copy conf/ and assets/ into the wheel.

The commands read the presets (conf/) and the embedded model, adapter and draft model (assets/) at
run time (vidcap_ko/files.py). Both folders sit beside the packages in a checkout, not inside one,
so a wheel would carry neither; this copies them into the built package vidcap_ko/.
An editable install (`make setup`) reads the checkout's own folders and copies nothing.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SHIPPED = ("conf", "assets")  # folders at the top of the checkout the installed commands read
TARGET = Path("vidcap_ko")


class BuildWithShippedFiles(build_py):
    def run(self):
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib) / TARGET
        for folder in SHIPPED:  # a build folder left from an earlier build: start afresh
            shutil.rmtree(target / folder, ignore_errors=True)
            shutil.copytree(folder, target / folder,
                            ignore=shutil.ignore_patterns(".*", "__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildWithShippedFiles})
