"""Every line shape of docs/log-formats.md is cleaned into the right piece."""

from __future__ import annotations

import pytest

from engdiag.logs.events import Stamp
from engdiag.logs.lines import Shape, pieces
from engdiag.roles import Role

STATS = (
    "Engine 000: Avg prompt throughput: 4210.7 tokens/s, Avg generation throughput: 388.5 tokens/s, "
    "Running: 31 reqs, Waiting: 4 reqs, GPU KV cache usage: 91.6%, Prefix cache hit rate: 12.3%"
)


def one(line: str):
    found = pieces(line, 7)
    assert len(found) == 1, found
    return found[0]


def test_v0_old_style_header_without_bracket():
    piece = one("INFO 02-03 13:14:04 llm_engine.py:706] Avg prompt throughput: 0.0 tokens/s")
    assert piece.shape is Shape.VLLM
    assert piece.level == "INFO"
    assert piece.stamp == Stamp(2, 3, 13 * 3600 + 14 * 60 + 4)
    assert piece.fileinfo == "llm_engine.py:706"
    assert piece.msg.startswith("Avg prompt throughput")


def test_bracketed_header_with_relative_debug_path():
    piece = one("DEBUG 10-22 09:33:49 [v1/engine/core.py:710] EngineCore encountered a fatal error.")
    assert piece.shape is Shape.VLLM and piece.fileinfo == "v1/engine/core.py:710"


@pytest.mark.parametrize(
    ("tag", "name", "pid", "role"),
    [
        ("(EngineCore_0 pid=2211)", "EngineCore_0", 2211, Role.ENGINE_CORE),
        ("(EngineCore_DP0 pid=77352)", "EngineCore_DP0", 77352, Role.ENGINE_CORE),
        ("(EngineCore pid=2025)", "EngineCore", 2025, Role.ENGINE_CORE),
        ("(APIServer pid=41)", "APIServer", 41, Role.API_SERVER),
        ("(ApiServer_2 pid=9)", "ApiServer_2", 9, Role.API_SERVER),
        ("(VllmWorker TP0 pid=5)", "VllmWorker TP0", 5, Role.WORKER),
        ("(VllmWorker rank=0 pid=5)", "VllmWorker rank=0", 5, Role.WORKER),
        ("(Worker_DP0_TP1_EP1 pid=1682938)", "Worker_DP0_TP1_EP1", 1682938, Role.WORKER),
        ("(VllmWorkerProcess pid=312)", "VllmWorkerProcess", 312, Role.WORKER),
        ("(RayWorkerWrapper pid=8081, ip=10.0.0.12)", "RayWorkerWrapper", 8081, Role.WORKER),
    ],
)
def test_every_process_prefix(tag, name, pid, role):
    piece = one(f"{tag} INFO 10-22 09:33:49 [kv_cache_utils.py:1087] GPU KV cache size: 162,704 tokens")
    assert piece.proc is not None
    assert (piece.proc.name, piece.proc.pid, piece.proc.role) == (name, pid, role)
    assert piece.shape is Shape.VLLM and piece.msg == "GPU KV cache size: 162,704 tokens"


def test_worker_ranks_are_read_from_the_tag():
    piece = one("(Worker_DP0_TP1_EP1 pid=3) INFO 09-25 19:55:44 [x.py:1] hi")
    assert piece.proc.ranks.label() == "DP0 TP1 EP1"


def test_ray_prefix_with_ip_and_repeated_suffix():
    piece = one(
        "\x1b[36m(RayWorkerWrapper pid=5310, ip=10.1.2.3)\x1b[0m INFO 02-03 13:18:39 [x.py:1] "
        "Waiting for pending NCCL work \x1b[32m [repeated 6x across cluster]\x1b[0m"
    )
    assert piece.proc.host == "10.1.2.3"
    assert piece.repeat == 6
    assert piece.msg == "Waiting for pending NCCL work"


@pytest.mark.parametrize(
    "coloured",
    [
        "\x1b[1;36m(EngineCore_0 pid=1)\x1b[0;0m \x1b[32mINFO\x1b[0m \x1b[90m05-02 09:14:10 [core.py:58]\x1b[0m msg",
        "[1;36m(EngineCore_0 pid=1)[0;0m INFO 05-02 09:14:10 [core.py:58] msg",
        "^[[1;36m(EngineCore_0 pid=1)^[[0;0m INFO 05-02 09:14:10 [core.py:58] msg",
        " [36m(EngineCore_0 pid=1) [0m INFO 05-02 09:14:10 [core.py:58] msg",
    ],
    ids=["esc", "lost-esc", "caret", "lost-esc-with-spaces"],
)
def test_colour_codes_in_every_spelling(coloured):
    piece = one(coloured)
    assert piece.proc is not None and piece.proc.name == "EngineCore_0"
    assert piece.shape is Shape.VLLM and piece.msg == "msg"


def test_kubectl_timestamp_prefix_is_kept_apart():
    piece = one("2025-10-15T00:02:38.756689123Z (APIServer pid=1) INFO 10-14 17:02:38 [loggers.py:123] " + STATS)
    assert piece.kube_ts == "2025-10-15T00:02:38.756689123Z"
    assert piece.stamp == Stamp(10, 14, 17 * 3600 + 2 * 60 + 38)
    assert piece.msg == STATS


def test_kubectl_source_prefix_before_its_stamp_is_kept_apart():
    """``kubectl logs -l app=vllm --prefix --timestamps``: the pod, then the stamp, then vLLM's line."""
    piece = one("[pod/vllm-7d9f8-abcde/vllm] 2025-10-15T00:02:38.756689123Z (APIServer pid=1) INFO 10-14 17:02:38 "
                "[loggers.py:123] " + STATS)
    assert piece.proc is not None and piece.proc.name == "APIServer" and piece.msg == STATS
    assert piece.kube_ts == "2025-10-15T00:02:38.756689123Z"
    bare = one("[pod/vllm-0/vllm] (EngineCore_DP0 pid=7) INFO 10-22 09:33:49 [core.py:1] hello")
    assert bare.proc is not None and bare.proc.name == "EngineCore_DP0" and bare.msg == "hello"
    # the pod is the process's host: two replicas' engine cores, both pid 7, stay two processes
    other = one("[pod/vllm-1/vllm] (EngineCore_DP0 pid=7) INFO 10-22 09:33:49 [core.py:1] hello")
    assert (bare.proc.host, other.proc.host) == ("pod/vllm-0", "pod/vllm-1") and bare.proc != other.proc
    # a bracketed word that is no pod source stays part of the line
    assert one("[podcast/a/b] hello").msg == "[podcast/a/b] hello"


def test_docker_compose_prefix():
    piece = one("vllm-1  | (EngineCore_DP0 pid=7) INFO 10-22 09:33:49 [core.py:1] hello")
    assert piece.proc.name == "EngineCore_DP0" and piece.msg == "hello"


def test_tqdm_bar_glued_to_the_next_record_is_split():
    found = pieces(
        "Processed prompts:   0%|          | 0/4 [00:00<?, ?it/s, est. speed input: 0.00 toks/s, "
        "output: 0.00 toks/s](EngineCore_DP0 pid=4086108) INFO 01-07 20:00:58 [acl_graph.py:184] Replaying aclgraph",
        3,
    )
    assert [p.shape for p in found] == [Shape.BAR, Shape.VLLM]
    assert found[1].proc.pid == 4086108 and found[1].msg == "Replaying aclgraph"
    assert all(p.lineno == 3 for p in found)


def test_tqdm_redraws_with_carriage_returns_become_pieces():
    line = "Loading safetensors checkpoint shards:  10% Completed | 1/10\rLoading safetensors checkpoint shards:  20% Completed | 2/10\r"
    found = pieces(line, 1)
    assert [p.shape for p in found] == [Shape.BAR, Shape.BAR]


def test_crlf_line_ending_is_dropped():
    piece = one("ERROR 06-15 13:57:57 [core.py:517] Traceback (most recent call last):\r")
    assert piece.msg == "Traceback (most recent call last):"


def test_pytorch_glog_with_rank_prefix():
    piece = one(
        "[rank1]:[E1112 09:49:50.022718554 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600015 milliseconds"
    )
    assert piece.shape is Shape.GLOG and piece.level == "ERROR"
    assert piece.stamp == Stamp(11, 12, 9 * 3600 + 49 * 60 + 50)
    assert piece.proc.name == "rank1" and piece.proc.role is Role.WORKER
    assert piece.msg.startswith("[Rank 1] Watchdog caught")


def test_old_pytorch_glog_without_time():
    piece = one(" [36m(RayWorkerVllm pid=5085) [0m [E ProcessGroupNCCL.cpp:475] [Rank 4] Watchdog caught x")
    assert piece.shape is Shape.GLOG and piece.stamp is None and piece.proc.pid == 5085


def test_nccl_debug_line():
    piece = one("host-1:23458:23665 [0] NCCL INFO comm 0x23ba7ea0 rank 0 nranks 2 cudaDev 0 - Init COMPLETE")
    assert piece.shape is Shape.NCCL and piece.proc.pid == 23458 and piece.msg.endswith("Init COMPLETE")


def test_uvicorn_access_line():
    piece = one('(APIServer pid=1) INFO:     10.250.5.33:50840 - "GET /metrics HTTP/1.1" 200 OK')
    assert piece.shape is Shape.ACCESS and piece.proc.name == "APIServer"


def test_uvicorn_own_line_is_not_an_access_line():
    assert one("INFO:     Application startup complete.").shape is Shape.LEVEL


def test_tagged_print_and_bare_lines():
    assert one("(ApiServer_5 pid=463645) Process ApiServer_5:").shape is Shape.TAGGED
    assert one("Prompt: 'Hello', Generated text: ' world'").shape is Shape.BARE


def test_parenthesised_text_is_not_a_process_tag():
    piece = one("(most of this line is prose) and not a tag")
    assert piece.proc is None and piece.shape is Shape.BARE


def test_invalid_dates_are_not_timestamps():
    piece = one("INFO 13-45 99:99:99 [x.py:1] not a date")
    assert piece.stamp is None


def test_ray_nests_the_vllm_process_tag_inside_its_actor_tag():
    piece = one("(RayWorkerProc pid=22, ip=192.168.10.216) (Worker_DP2_TP0_EP4 pid=22) INFO 06-10 11:03:33 [x.py:1] hi")
    assert piece.proc is not None and piece.proc.name == "Worker_DP2_TP0_EP4" and piece.proc.host == "192.168.10.216"
    assert piece.stamp == Stamp(6, 10, 11 * 3600 + 3 * 60 + 33)


def test_ray_data_nanosecond_prefix_and_actor_with_parentheses():
    piece = one(
        "1739372436123456789 (MapWorker(MapBatches(vLLMEngineStageUDF)) pid=4385, ip=10.0.0.1) "
        "(EngineCore_DP0 pid=6448) INFO 02-12 15:00:36 [monitor.py:34] torch.compile takes 2222.52 s in total"
    )
    assert piece.proc is not None and piece.proc.name == "EngineCore_DP0" and piece.proc.role is Role.ENGINE_CORE
    assert piece.msg.startswith("torch.compile takes")


def test_colour_codes_spelled_as_text():
    piece = one("ESC[36m(EngineCore_DP0 pid=7)ESC[0m INFO 05-01 14:38:18 [core.py:1] hello")
    assert piece.shape is Shape.VLLM and piece.proc is not None and piece.msg == "hello"


def test_platform_console_prefix_with_escaped_bar():
    piece = one("May 01  14:38:18.434 \\| (APIServer pid=1) INFO 05-01 14:38:18 [api_server.py:1] started")
    assert piece.shape is Shape.VLLM and piece.msg == "started"
    bare = one("May 01  14:38:18.434 | RuntimeError: boom")
    assert bare.msg == "RuntimeError: boom"


def test_flattened_nccl_paragraph_is_split_into_its_lines():
    found = pieces("gx10:158:158 [0] NCCL INFO Channel 00/02 : 0 1 gx10:158:190 [0] NCCL INFO Connected all rings", 3)
    assert [p.msg for p in found] == ["Channel 00/02 : 0 1", "Connected all rings"]
    assert all(p.shape is Shape.NCCL for p in found)


def test_nccl_warn_with_its_source_location_and_a_bracketed_time():
    piece = one("[2026-04-06 23:02:12] gx10:158:188 [0] transport/net_ib/p2p.cc:651 NCCL WARN NET/IB: error")
    assert piece.shape is Shape.NCCL and piece.level == "WARNING" and piece.msg == "NET/IB: error"
    assert piece.stamp == Stamp(4, 6, 23 * 3600 + 2 * 60 + 12)


def test_vllm_json_log_formatter_keeps_a_traceback_in_one_record():
    line = (
        '{"asctime": "2025-11-02 10:00:01,123", "levelname": "ERROR", "name": "vllm.v1.engine.core", '
        '"processName": "EngineCore_DP0", "process": 77, "message": "EngineCore encountered a fatal error.", '
        '"exc_info": "Traceback (most recent call last):\\nTimeoutError: RPC call to execute_model timed out."}'
    )
    found = pieces(line, 1)
    assert found[0].msg == "EngineCore encountered a fatal error."
    assert len({p.header for p in found}) == 1 and found[0].proc.name == "EngineCore_DP0"
    assert found[0].stamp == Stamp(11, 2, 10 * 3600 + 1)


def test_a_log_quoted_in_a_markdown_reply():
    piece = one("> (EngineCore_DP0 pid=7) ERROR 05-16 03:38:10 [core.py:398] EngineCore encountered a fatal error.")
    assert piece.shape is Shape.VLLM and piece.proc is not None and piece.stamp == Stamp(5, 16, 3 * 3600 + 38 * 60 + 10)


def test_vllm_omni_stage_prefix_names_the_stage_and_keeps_the_header():
    # omni-qwen-image-stage-init-timeout-during-hf-download-issue535: a stage worker's own lines
    piece = one("[Stage-0] INFO 12-30 03:34:39 [omni_stage.py:412] Starting stage worker with model: Qwen/Qwen-Image")
    assert piece.shape is Shape.VLLM and piece.proc.name == "Stage-0"
    assert piece.stamp == Stamp(12, 30, 3 * 3600 + 34 * 60 + 39)
    assert piece.msg == "Starting stage worker with model: Qwen/Qwen-Image"


def test_a_bracketed_utc_stamp_before_a_vllm_record_is_the_wrappers_clock():
    # vLLM issue 18417's paste: a launcher's "[2025-05-20T05:24:28Z] " before each of vLLM's own lines
    piece = one("[2025-05-20T05:24:28Z] (VllmWorker rank=0 pid=10229) ERROR 05-19 22:24:28 "
                "[multiproc_executor.py:522] RuntimeError: CUDA error")
    assert piece.shape is Shape.VLLM and piece.proc.name == "VllmWorker rank=0" and piece.proc.pid == 10229
    assert piece.stamp == Stamp(5, 20, 5 * 3600 + 24 * 60 + 28)  # one clock wins: the wrapper's
    assert piece.msg == "RuntimeError: CUDA error"


def test_python_loggings_asctime_before_the_level_is_the_lines_time():
    # Ray's driver and autoscaler log through Python's logging with its default asctime
    piece = one("2023-03-03 05:15:30,774\tWARNING worker.py:1866 -- The node with node id: 94 has been marked dead")
    assert piece.stamp == Stamp(3, 3, 5 * 3600 + 15 * 60 + 30) and piece.stamp.calendar == 2023
    assert piece.level == "WARNING" and piece.msg.startswith("worker.py:1866 -- The node")


def test_a_date_without_milliseconds_or_level_is_not_taken_for_asctime():
    assert one("2023-03-03 05:15:30 the run started").stamp is None


def test_another_programs_asctime_is_not_rays():
    assert one("2026-12-02 10:00:02,123 INFO django.request GET /api/items 200").stamp is None
