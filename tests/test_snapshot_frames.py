"""Frame rules on stacks shaped as py-spy prints real vLLM processes (file:line read in the released wheels).

Line numbers and source lines below are those of vLLM 0.34.0 unless a test says otherwise; the
standard-library and pyzmq frames are as py-spy shows them on CPython 3.11.  These are the shapes
the rules must get right per version (docs/snapshot.md lists which rule covers which version).
"""

from __future__ import annotations

import pytest

from engdiag.analysis.verdict import Kind
from engdiag.roles import Ranks, Role
from engdiag.snapshot.assess import ProcessSamples, assess
from engdiag.snapshot.frames import categorize, collective_op, waits_for_work, waits_on_workers
from engdiag.snapshot.model import Category, CpuTimes, DumpResult, Frame, ProcessInfo, ThreadSample

SITE = "/usr/lib/python3/site-packages/"
STDLIB = "/usr/lib/python3.11/"


def f(name: str, path: str, line: int, code: str | None = None) -> Frame:
    root = STDLIB if not path.startswith(("vllm/", "torch/", "zmq/")) else SITE
    return Frame(name=name, filename=root + path, line=line, code=code)


SHM = "vllm/distributed/device_communicators/shm_broadcast.py"
ZMQ_POLL = f("Poller.poll", "zmq/sugar/poll.py", 106, "return zmq_poll(self.sockets, timeout=timeout)")
READER_034 = (
    ZMQ_POLL,
    f("SpinCondition.wait", SHM, 224, "events = dict(self.poller.poll(timeout=timeout_ms))"),
    f("MessageQueue._wait_until_readable", SHM, 871, "self._spin_condition.wait(timeout_ms=read_timeout.timeout_ms())"),
    f("MessageQueue.acquire_read", SHM, 931, "if not self._wait_until_readable(metadata_buffer, read_timeout):"),
    f("contextmanager.__enter__", "contextlib.py", 137, "return next(self.gen)"),
    f("MessageQueue.dequeue", SHM, 1028, "with self.acquire_read(timeout, indefinite) as buf:"),
)
WORKER_LOOP = f("WorkerProc.worker_busy_loop", "vllm/v1/executor/multiproc_executor.py", 1193,
                "rpc_request = self.rpc_broadcast_mq.dequeue(indefinite=True)")
CORE_WAIT = (
    f("MultiprocExecutor.collective_rpc.<locals>.get_response", "vllm/v1/executor/multiproc_executor.py", 531,
      "status, result = mq.dequeue(timeout=dequeue_timeout)"),
    f("FutureWrapper._wait_for_response", "vllm/v1/executor/multiproc_executor.py", 141,
      "response = self.aggregate(self.get_response())"),
    f("FutureWrapper.result", "vllm/v1/executor/multiproc_executor.py", 120, "future._wait_for_response()"),
)


def test_a_034_shm_reader_in_zmq_poll_is_a_shm_wait_not_idle_zmq():
    category, why = categorize(READER_034 + (WORKER_LOOP,))
    assert category is Category.SHM_WAIT, why
    assert "SpinCondition.wait" in why  # the most specific frame, not the innermost zmq one


def test_an_034_engine_core_waiting_on_a_hung_worker_is_not_hidden_as_zmq():
    stack = READER_034 + CORE_WAIT
    assert categorize(stack)[0] is Category.SHM_WAIT
    assert waits_on_workers(stack)


def test_the_old_readers_sched_yield_sleep_is_a_shm_wait():
    # Python < 3.11.1: vllm.distributed.utils.sched_yield falls back to time.sleep(0)
    stack = (
        f("sched_yield", "vllm/distributed/utils.py", 49, "time.sleep(0)"),
        f("SpinTimer.spin", SHM, 37, "sched_yield()"),
        f("MessageQueue.acquire_read", SHM, 440, "self._read_spin_timer.spin()"),
    )
    assert categorize(stack)[0] is Category.SHM_WAIT


def test_a_bare_pyzmq_recv_is_known_from_its_caller():
    # Socket.recv is Cython: py-spy shows the caller's line and nothing inside pyzmq
    stack = (f("EngineCoreProc.startup_handshake", "vllm/v1/engine/core.py", 1599, "init_bytes = handshake_socket.recv()"),)
    category, why = categorize(stack)
    assert category is Category.IO_POLL and "socket receive" in why


@pytest.mark.parametrize(
    ("stack", "category", "why"),
    [
        ((f("Condition.wait", "threading.py", 327, "waiter.acquire()"),
          f("Queue.get", "queue.py", 171, "self.not_empty.wait()"),
          f("EngineCoreProc._process_input_queue", "vllm/v1/engine/core.py", 1840, "req = self.input_queue.get(block=block)")),
         Category.IDLE, "engine core waiting for requests"),
        ((f("Event.wait", "threading.py", 629, "signaled = self._cond.wait(timeout)"),
          f("ThreadedWatchDog._check_loop", "vllm/utils/watch_dog.py", 109, "while not self.stop_event.wait(self.check_interval):")),
         Category.IDLE, "watchdog"),
        ((f("main", "multiprocessing/resource_tracker.py", 227, "for line in f:"), f("<module>", "<string>", 1)),
         Category.IDLE, "resource tracker"),
        ((f("Queue.get", "multiprocessing/queues.py", 102, "with self._rlock:"),),  # SemLock.__enter__ has no frame
         Category.IDLE, "multiprocessing queue get"),
        ((f("all_reduce", "torch/distributed/distributed_c10d.py", 3252, "work.wait()"),
          f("_exception_logger.<locals>.wrapper", "torch/distributed/c10d_logger.py", 83),
          f("_run_ar", "vllm/v1/worker/dp_utils.py", 75, "dist.all_reduce(tensor, group=group)")),
         Category.COLLECTIVE, "torch.distributed collective"),
        ((f("StatelessProcessGroup.barrier", "vllm/distributed/utils.py", 477, "self.store.get(key)"),),
         Category.COLLECTIVE, "StatelessProcessGroup"),
        ((f("GPUModelRunner.execute_model", "vllm/v1/worker/gpu/model_runner.py", 1826),),
         Category.COMPUTE, "model runner step"),
        ((f("Thread.join", "threading.py", 1119, "self._wait_for_tstate_lock()"),),
         Category.LOCK_WAIT, "join"),
    ],
)
def test_known_waits(stack, category, why):
    got, reason = categorize(stack)
    assert got is category and why in reason, reason


def test_collective_ops_and_groups_read_from_frames():
    dp = (f("all_reduce", "torch/distributed/distributed_c10d.py", 3252),
          f("_run_ar", "vllm/v1/worker/dp_utils.py", 75))
    assert collective_op(dp) == ("all_reduce", "DP")
    assert collective_op((f("recv", "torch/distributed/distributed_c10d.py", 2799),)) == ("recv", None)
    assert collective_op((f("StatelessProcessGroup.barrier", "vllm/distributed/utils.py", 477),)) == (
        "barrier", "StatelessProcessGroup")


def _rank(pid: int, tp: int, node: str, stack: tuple[Frame, ...], cpu: float = 0.0) -> ProcessSamples:
    info = ProcessInfo(pid=pid, ppid=None, name="python", cmdline=(f"ray::RayWorkerWrapper rank {tp}",), state="S",
                       started=None, python=True, node=node)
    dumps = tuple(
        DumpResult(threads=(ThreadSample(1, 100 + pid, "MainThread", False, False, stack),),
                   cpu=CpuTimes(at=float(i), process=cpu * i, threads=((100 + pid, cpu * i),)))
        for i in range(3)
    )
    return ProcessSamples(info, dumps, role=Role.WORKER, ranks=Ranks(tp=tp))


def test_assess_judges_a_capture_built_without_py_spy_across_nodes():
    """The entry point a remote capture (Ray's dashboard) uses: plain data in, the same verdict out."""
    waiting = (f("all_reduce", "torch/distributed/distributed_c10d.py", 3252, "work.wait()"),)
    asleep = (f("execute_model", "worker.py", 10, "time.sleep(600)"),)
    reports, verdict = assess([_rank(11, 0, "node-a", waiting), _rank(12, 1, "node-b", asleep)])
    assert verdict.kind is Kind.DEADLOCKED
    assert "TP1 (pid 12 on node-b) never joined the all_reduce that TP0 waits in" in verdict.headline
    assert [r.info.node for r in reports] == ["node-a", "node-b"]


def test_cpu_advancing_under_an_unchanged_frame_is_busy_not_stuck():
    spinning = (f("spin", "worker.py", 3, "while True: pass"),)
    reports, verdict = assess([_rank(21, 0, "n", spinning, cpu=0.9)])
    thread, = reports[0].threads
    assert thread.motion.value == "moving" and "CPU" in thread.progress
    assert verdict.kind is Kind.SLOW


def test_older_waits_from_the_source_notes():
    # 0.33+: the DP wave sync is a gloo CPU all-reduce in vllm/distributed/utils.py under sync_dp_state
    dp = (f("cpu_all_reduce_", "vllm/distributed/utils.py", 900, "recv_work.wait(timeout)"),
          f("ParallelConfig.sync_dp_state", "vllm/config/parallel.py", 700),
          f("DPEngineCoreProc._has_global_unfinished_reqs", "vllm/v1/engine/core.py", 2760))
    assert categorize(dp)[0] is Category.COLLECTIVE and collective_op(dp) == ("all_reduce", "DP")
    # 0.6.3 V0 TP worker idle: broadcast_object → dequeue → acquire_read spinning in time.sleep
    v0 = (f("acquire_read", SHM, 380, "time.sleep(RINGBUFFER_SLEEP_INTERVAL)"),
          f("dequeue", SHM, 420), f("broadcast_object", SHM, 450),
          f("GroupCoordinator.broadcast_object", "vllm/distributed/parallel_state.py", 420),
          f("_run_worker_process", "vllm/executor/multiproc_worker_utils.py", 230))
    category, _ = categorize(v0)
    assert category is Category.SHM_WAIT and waits_for_work(category, v0)
    # V0 MQLLMEngine idle: a bare Cython poll on its input socket
    assert categorize((f("MQLLMEngine.run_engine_loop", "vllm/engine/multiprocessing/engine.py", 250,
                         "while self.input_socket.poll(timeout=POLLING_TIMEOUT_MS) == 0:"),))[0] is Category.IO_POLL


def test_a_spin_loop_inside_a_wait_is_not_progress():
    # 0.34's executor spinning in spin_until_readable: the line changes, the wait does not end
    def sample(line: int) -> ThreadSample:
        stack = (f("MessageQueue.spin_until_readable", SHM, line, "sched_yield()"),) + CORE_WAIT
        return ThreadSample(1, 7, "MainThread", True, True, stack)

    dumps = tuple(DumpResult(threads=(sample(line),)) for line in (913, 917, 915))
    info = ProcessInfo(pid=5, ppid=None, name="python", cmdline=("VLLM::EngineCore",), state="R", started=None,
                       python=True, title_role=Role.ENGINE_CORE)
    reports, _ = assess([ProcessSamples(info, dumps)])
    assert reports[0].threads[0].motion.value == "stuck"


def test_a_forward_sampled_once_between_layers_is_still_compute():
    # the Ray test's model loop (tests/programs/ray_job.py): py-spy caught the last sample on the loop's own
    # line between two layer calls, a frame no rule knows; the thread was computing all along
    def sample(inner: tuple[Frame, ...]) -> ThreadSample:
        return ThreadSample(1, 7, "MainThread", True, True, inner + (f("execute_model", "ray_job.py", 61, "model(batch)"),))

    layer = (f("forward", "torch/nn/modules/linear.py", 125, "return F.linear(input, self.weight, self.bias)"),)
    call = (f("_call_impl", "torch/nn/modules/module.py", 1750),)
    dumps = tuple(DumpResult(threads=(sample(inner),)) for inner in (layer, call, ()))
    info = ProcessInfo(pid=5, ppid=None, name="python", cmdline=("ray::RayWorkerWrapper",), state="R", started=None,
                       python=True)
    reports, _ = assess([ProcessSamples(info, dumps)])
    thread = reports[0].threads[0]
    assert (thread.category, thread.motion.value) == (Category.COMPUTE, "moving"), thread
    assert "sample 2 of 3" in thread.reason and thread.frames[0].filename.endswith("/ray_job.py")


def test_a_helper_thread_moving_beside_a_stuck_collective_does_not_hide_the_hang():
    waiting = (f("all_reduce", "torch/distributed/distributed_c10d.py", 3252, "work.wait()"),)
    rank0 = _rank(31, 0, "n", waiting)
    helper = tuple(  # a background thread of rank 0 whose stack changes every sample
        ThreadSample(2, 900, "metrics", True, False, (f("report", "metrics.py", 10 + i),)) for i in range(3))
    rank0 = ProcessSamples(rank0.info, tuple(
        DumpResult(threads=dump.threads + (helper[i],), cpu=dump.cpu) for i, dump in enumerate(rank0.results)),
        role=rank0.role, ranks=rank0.ranks)
    asleep = (f("execute_model", "worker.py", 10, "time.sleep(600)"),)
    _, verdict = assess([rank0, _rank(32, 1, "n", asleep)])
    assert verdict.kind is Kind.DEADLOCKED and "TP1 (pid 32 on n) never joined" in verdict.headline


def _core(pid: int, dp: int, stack: tuple[Frame, ...]) -> ProcessSamples:
    info = ProcessInfo(pid=pid, ppid=1, name="python", cmdline=(f"VLLM::EngineCore_DP{dp}",), state="S",
                       started=None, python=True, title_role=Role.ENGINE_CORE)
    dumps = tuple(DumpResult(threads=(ThreadSample(1, pid, "MainThread", False, False, stack),)) for _ in range(3))
    return ProcessSamples(info, dumps)


def test_a_dp_engine_core_that_never_joins_the_wave_sync_is_named():
    syncing = (f("all_reduce", "torch/distributed/distributed_c10d.py", 3252, "work.wait()"),
               f("ParallelConfig.has_unfinished_dp", "vllm/config/parallel.py", 400),
               f("DPEngineCoreProc._has_global_unfinished_reqs", "vllm/v1/engine/core.py", 1100))
    idle = (f("Condition.wait", "threading.py", 327, "waiter.acquire()"),
            f("Queue.get", "queue.py", 171, "self.not_empty.wait()"),
            f("EngineCoreProc._process_input_queue", "vllm/v1/engine/core.py", 739, "req = self.input_queue.get()"))
    _, verdict = assess([_core(41, 0, syncing), _core(42, 1, idle)])
    assert verdict.kind is Kind.DEADLOCKED
    assert "DP1 (pid 42) never joined the all_reduce (DP group) that DP0 waits in" in verdict.headline


def test_help_warns_that_native_is_slow_on_torch_processes():
    from tests.conftest import run_engdiag

    result = run_engdiag("snapshot", "--help", env={"COLUMNS": "200"})
    text = " ".join(result.stdout.decode().split())
    assert result.returncode == 0
    assert "Slow on torch processes" in text and "0.35-1.45 s" in text
    assert "1-100" in text  # the sample bound
