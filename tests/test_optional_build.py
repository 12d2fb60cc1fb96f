"""The C scanner is optional: engdiag installs and works without a compiler, and is built where one is.

``setup.py`` builds ``engdiag.logs._scan`` with a build_ext that leaves it out, with a
note, when compiling fails.  These tests build a real wheel from a copy of the
source with ``CC=false`` (a compiler that always fails), install it into a fresh
folder and run it: it must import, fall back to another backend and analyse a log.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from engdiag.logs.hotscan import native
from tests.conftest import ROOT

_SKIP = shutil.ignore_patterns(".venv", ".git", "build", "dist", "*.so", "*.pyd", "__pycache__", "*.egg-info",
                               ".hypothesis", ".pytest_cache", "corpus", "bench-out")


@pytest.mark.timeout(600)
def test_a_wheel_built_without_a_compiler_installs_and_falls_back(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=_SKIP)
    env = {**os.environ, "CC": "false", "CXX": "false", "LDSHARED": "false"}
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"),
                            str(source)], env=env, capture_output=True, timeout=540, check=False)
    assert built.returncode == 0, built.stderr.decode()[-2000:]
    wheel = next((tmp_path / "dist").glob("engdiag-*.whl"))
    assert not [name for name in zipfile.ZipFile(wheel).namelist() if name.endswith((".so", ".pyd"))]
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    run_env = {**os.environ, "PYTHONPATH": str(site)}
    run_env.pop("ENGDIAG_SCANNER", None)
    probe = subprocess.run([sys.executable, "-c", "import engdiag, engdiag.logs.hotscan as h; "
                            "print(engdiag.__file__); print(h.native())"],
                           env=run_env, capture_output=True, text=True, check=True, cwd=tmp_path)
    where, found = probe.stdout.split()
    assert Path(where).is_relative_to(site) and found == "None"
    version = subprocess.run([sys.executable, "-m", "engdiag", "--version"], env=run_env, capture_output=True,
                             text=True, check=True, cwd=tmp_path)
    assert "log scanner: hyperscan)" in version.stdout or "log scanner: python)" in version.stdout
    log = tmp_path / "x.log"
    log.write_text("(APIServer pid=7) INFO 10-22 09:30:00 [logger.py:41] Received request r1: prompt: 'hi', "
                   "params: SamplingParams(n=1), prompt_token_ids: [1, 2], lora_request: None.\n" * 3)
    forced = subprocess.run([sys.executable, "-m", "engdiag", "analyze", "--json", str(log)],
                            env={**run_env, "ENGDIAG_SCANNER": "native"}, capture_output=True, text=True, cwd=tmp_path)
    assert forced.returncode == 2 and "C scanner was not built" in forced.stderr
    fallback = subprocess.run([sys.executable, "-m", "engdiag", "analyze", "--json", str(log)], env=run_env,
                              capture_output=True, text=True, cwd=tmp_path)
    assert json.loads(fallback.stdout)["signals"] == {"prompt_length": 3, "request_received": 3}


def _can_compile() -> bool:
    include = Path(sysconfig.get_paths()["include"]) / "Python.h"
    return include.exists() and any(shutil.which(cc) for cc in ("cc", "gcc", "clang"))


@pytest.mark.skipif(not _can_compile(), reason="no C compiler or no Python.h here: the C scanner cannot be built")
def test_the_c_scanner_is_built_where_a_compiler_is():
    assert native() is not None, "pip install (-e) . should have built engdiag.logs._scan with the compiler present"
