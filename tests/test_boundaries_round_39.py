"""Readings added after blind round 39 (tests/corpus/HELDOUT.md), each on both sides of its line."""

from __future__ import annotations

from tests.conftest import verdict_of

_TMA = """\
TMA Desc Addr:   0x7ffdd05d0040
format         9
dim            4
globalDim      (128,457,1,1,1)
Error: Failed to initialize the TMA descriptor {code}
"""


def test_a_cutlass_tma_descriptor_that_failed_to_encode_is_a_crash(tmp_path):
    """cute's copy_traits_sm90_tma.hpp prints the descriptor and its CUresult, then asserts."""
    for code in ("700", "1", "999"):
        verdict = verdict_of(tmp_path, _TMA.format(code=code))
        assert verdict.kind.value == "crashed", code
    # the descriptor's dump alone (cut before the error) names no failure
    assert verdict_of(tmp_path, _TMA.format(code="").rsplit("Error:", 1)[0]).kind.value != "crashed"


def test_a_cuda_driver_error_is_a_crash_unless_it_is_memory(tmp_path):
    deepgemm = ("RuntimeError: CUDA driver error\n(/workspace/.deps/deepgemm-src/csrc/jit/handle.hpp:154):\n"
                "800 (CUDA_ERROR_NOT_PERMITTED, operation not permitted)\n")
    assert verdict_of(tmp_path, deepgemm).kind.value == "crashed"
    assert verdict_of(tmp_path, "RuntimeError: CUDA driver error: device not ready\n").kind.value == "crashed"
    # the driver's out-of-memory is memory, not a device fault
    assert verdict_of(tmp_path, "RuntimeError: CUDA driver error: out of memory\n").kind.value == "fragmented"
