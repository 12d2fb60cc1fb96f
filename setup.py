"""Builds the optional C hot path (``engdiag.logs._scan``); everything else is in pyproject.toml.

The extension is never required: without a compiler (or Python headers) the
build says so on stderr and installs engdiag without it, and the bulk scanner
uses hyperscan or pure Python instead (``engdiag --version`` names the backend).
"""

from __future__ import annotations

import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """build_ext that leaves the extension out, with a note, when it cannot be compiled."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as error:  # noqa: BLE001 - no compiler, no headers: the package works without it
            self._skip(error)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as error:  # noqa: BLE001 - see run()
            self._skip(error)

    @staticmethod
    def _skip(error: BaseException) -> None:
        print(f"engdiag: the optional C scanner was not built ({error}); using the Python scanner", file=sys.stderr)


setup(
    ext_modules=[Extension("engdiag.logs._scan", ["engdiag/logs/_scan.c", "engdiag/logs/_hotlines.c", "engdiag/logs/_cues.c", "engdiag/logs/_header.c"], depends=["engdiag/logs/_scan.h"], extra_compile_args=["-O3"], optional=True)],
    cmdclass={"build_ext": OptionalBuildExt},
)
