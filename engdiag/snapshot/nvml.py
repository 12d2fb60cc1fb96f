"""The only module that imports pynvml (nvidia-ml-py): GPU state for the snapshot.

No GPU, no driver or no library is a record (``available: false`` with the
reason), not an error: ``snapshot`` must work on any machine.  A field a GPU
does not support is None with NVML's reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engdiag.snapshot.model import GpuInfo, NvmlState

try:
    import pynvml
except ImportError:  # pragma: no cover - nvidia-ml-py is a dependency
    pynvml = None

_THROTTLE_NAMES = {
    "GpuIdle": 0x1, "ApplicationsClocksSetting": 0x2, "SwPowerCap": 0x4, "HwSlowdown": 0x8,
    "SyncBoost": 0x10, "SwThermalSlowdown": 0x20, "HwThermalSlowdown": 0x40, "HwPowerBrakeSlowdown": 0x80,
    "DisplayClockSetting": 0x100,
}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _reason(error: BaseException) -> str:
    name = type(error).__name__
    return name.replace("NVMLError_", "") if name.startswith("NVMLError_") else f"{name}: {error}"


class _Reader:
    """Reads fields of one GPU, recording unsupported ones with their reason."""

    def __init__(self, gpu: GpuInfo) -> None:
        self.gpu = gpu

    def get(self, name: str, call: Callable[[], Any]) -> Any:
        try:
            value = call()
        except Exception as error:  # noqa: BLE001 - NVMLError family and NVMLLibraryMismatchError
            self.gpu.fields[name] = None
            self.gpu.unsupported[name] = _reason(error)
            return None
        self.gpu.fields[name] = value
        return value


def _memory(handle: Any) -> dict[str, int]:
    try:
        info = pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
        return {"total": info.total, "used": info.used, "free": info.free, "reserved": info.reserved}
    except Exception:  # noqa: BLE001 - fall back to the v1 API on older drivers
        info = pynvml.nvmlDeviceGetMemoryInfo(handle)
        return {"total": info.total, "used": info.used, "free": info.free, "reserved": None}


def _throttle(handle: Any) -> list[str]:
    getter = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
    mask = getter(handle)
    return [name for name, bit in _THROTTLE_NAMES.items() if mask & bit]


def _processes(handle: Any) -> list[dict[str, Any]]:
    found = []
    for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
        used = getattr(proc, "usedGpuMemory", None)
        found.append({"pid": proc.pid, "used_bytes": used if isinstance(used, int) else None})
    return found


def _gpu(index: int) -> GpuInfo:
    gpu = GpuInfo()
    read = _Reader(gpu)
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    gpu.fields["index"] = index
    read.get("name", lambda: _text(pynvml.nvmlDeviceGetName(handle)))
    read.get("uuid", lambda: _text(pynvml.nvmlDeviceGetUUID(handle)))
    read.get("memory", lambda: _memory(handle))
    read.get("utilization_pct", lambda: _util(handle))
    read.get("temperature_c", lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU))
    read.get("power_w", lambda: pynvml.nvmlDeviceGetPowerUsage(handle) / 1000)
    read.get("power_limit_w", lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000)
    read.get("sm_clock_mhz", lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
    read.get("memory_clock_mhz", lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM))
    read.get("throttle_reasons", lambda: _throttle(handle))
    read.get("performance_state", lambda: f"P{pynvml.nvmlDeviceGetPerformanceState(handle)}")
    read.get("ecc_volatile_uncorrected", lambda: pynvml.nvmlDeviceGetTotalEccErrors(
        handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC))
    read.get("ecc_volatile_corrected", lambda: pynvml.nvmlDeviceGetTotalEccErrors(
        handle, pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_VOLATILE_ECC))
    read.get("remapped_rows", lambda: dict(zip(("corrected", "uncorrected", "pending", "failure"),
                                              pynvml.nvmlDeviceGetRemappedRows(handle), strict=False)))
    read.get("mig_mode", lambda: dict(zip(("current", "pending"), pynvml.nvmlDeviceGetMigMode(handle), strict=False)))
    read.get("pcie_link", lambda: {"gen": pynvml.nvmlDeviceGetCurrPcieLinkGeneration(handle),
                                   "width": pynvml.nvmlDeviceGetCurrPcieLinkWidth(handle)})
    try:
        gpu.processes = _processes(handle)
    except Exception as error:  # noqa: BLE001
        gpu.unsupported["processes"] = _reason(error)
    return gpu


def _util(handle: Any) -> dict[str, int]:
    rates = pynvml.nvmlDeviceGetUtilizationRates(handle)
    return {"gpu": rates.gpu, "memory": rates.memory}


def query(tree_pids: set[int]) -> NvmlState:
    """Everything NVML tells about the GPUs, and which of the tree's processes use them."""
    if pynvml is None:
        return NvmlState(available=False, reason="the pynvml module (nvidia-ml-py) is not installed")
    try:
        pynvml.nvmlInit()
    except Exception as error:  # noqa: BLE001
        return NvmlState(available=False, reason=_unavailable(error))
    try:
        state = NvmlState(available=True)
        for name, call in (
            ("driver", pynvml.nvmlSystemGetDriverVersion),
            ("nvml_version", pynvml.nvmlSystemGetNVMLVersion),
        ):
            try:
                setattr(state, name, _text(call()))
            except Exception:  # noqa: BLE001
                setattr(state, name, None)
        try:
            cuda = pynvml.nvmlSystemGetCudaDriverVersion()
            state.cuda_version = f"{cuda // 1000}.{cuda % 1000 // 10}"
        except Exception:  # noqa: BLE001
            state.cuda_version = None
        state.gpus = [_gpu(i) for i in range(pynvml.nvmlDeviceGetCount())]
        _map_pids(state, tree_pids)
        return state
    except Exception as error:  # noqa: BLE001
        return NvmlState(available=False, reason=_unavailable(error))
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def _unavailable(error: BaseException) -> str:
    name = type(error).__name__
    if "LibraryNotFound" in name:
        return "NVML library not found: no NVIDIA driver on this machine (or not mounted into the container)"
    if "DriverNotLoaded" in name:
        return "NVIDIA driver not loaded (nvidia kernel module missing)"
    if "LibRmVersionMismatch" in name:
        return "driver/library version mismatch: the driver was upgraded without reloading the kernel module"
    if "NoPermission" in name:
        return "no permission to query NVML"
    return _reason(error)


def _map_pids(state: NvmlState, tree_pids: set[int]) -> None:
    gpu_pids = {p["pid"] for gpu in state.gpus for p in gpu.processes}
    for gpu in state.gpus:
        for proc in gpu.processes:
            proc["in_tree"] = proc["pid"] in tree_pids
    if gpu_pids and not gpu_pids & tree_pids:
        state.pid_note = (
            "no GPU process pid matches the captured tree: inside a container NVML reports host pids "
            "(run with --pid=host, or compare memory use instead)"
        )
