"""A log pasted with every line indented (a markdown code block, an indented quote), or with a blank line
after every line (a web page copied), reads as the log itself.

The cases are real incidents whose verdict an indentation of four spaces, or doubled line breaks, used to
change (hard-wrapped stats lines whose tails looked like continuations, a quote's ``>`` before NCCL lines,
kubectl stamps, tracebacks cut into pieces), and the corpus cases that come indented already (frames cut
from inside a traceback, a command block).
"""

from __future__ import annotations

import gzip
import io
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engdiag.analysis.analyze import analyze
from engdiag.logs import paste, unzip
from engdiag.logs.paste import Paste, paste_of, skip_doubled, unpasted
from tests.conftest import CORPUS

INDENT_CHANGED_THESE = [
    "v0-single-request-decoding-5min-then-aborted-outside-engine",  # hard-wrapped V0 stats lines: slow
    "tp2-nccl-allreduce-hang-p2p-cumem-sanity-check",  # "> host:pid:tid [0] NCCL INFO …": deadlocked
    "kv-usage-creeps-to-100pct-k8s-timestamps",  # kubectl stamps, wrapped stats: KV pressure
    "ray-multinode-v0-cudagraph-capture-oom-gpu-util-098-lost-first-char",
    "habana-v0-warmup-pt-compile-only-mode-keyerror-old-synapse",
    "eks-lws-ep16-decode-gpu-util-098-unreachable",  # a bare ValueError and its frames
    "gb10-flashinfer-radix-topk-multicta-wedge-pyspy-quoted",  # a quoted py-spy dump
]
INDENTED_ALREADY = [
    "verl-fsdp-rollout-wake-up-oom-after-empty-cache-removed",  # frames only, two spaces
    "cudagraph-capture-oom-at-0.98-gpu-util-5090-laptop",
    "mrv2-dp8-async-spec-dummy-run-allreduce-deadlock",
]


def _indent(text: str, by: str) -> str:
    return "\n".join(by + line if line.strip() else line for line in text.split("\n"))


def _judged(document: dict) -> tuple:
    verdict = document["verdict"]
    return verdict["kind"], verdict["sub_kind"], verdict["confidence"], [
        (item["line"], item["text"]) for item in verdict["evidence"]
    ]


def _read_alike(cli, tmp_path, pasted: str, exit_code: int, expected: tuple) -> None:
    """The paste as a file, as a gzip file and on stdin: each judged as ``expected``."""
    path = tmp_path / "pasted.log"
    path.write_text(pasted, encoding="utf-8")
    packed = tmp_path / "pasted.log.gz"
    packed.write_bytes(gzip.compress(pasted.encode()))
    for args, stdin in (((str(path),), None), ((str(packed),), None), (("-",), pasted.encode())):
        result = cli("analyze", "--json", *args, input=stdin)
        assert result.exit_code in (0, exit_code), result.stderr
        assert _judged(json.loads(result.stdout)) == expected, (pasted[:40], args)


@pytest.mark.parametrize("name", INDENT_CHANGED_THESE + INDENTED_ALREADY)
def test_an_indented_paste_gets_the_verdict_and_line_numbers_of_the_log_itself(cli, tmp_path, name):
    """As a file, a gzip file and on stdin; evidence cites the same lines (line numbers are kept)."""
    text = (CORPUS / name / "log.txt").read_text(encoding="utf-8", errors="replace")
    original = cli("analyze", "--json", str(CORPUS / name / "log.txt"))
    expected = _judged(json.loads(original.stdout))
    for by in ("    ", "\t"):
        _read_alike(cli, tmp_path, _indent(text, by), original.exit_code, expected)


@pytest.mark.parametrize("shape", ["indented", "double-spaced"])
def test_a_pasted_file_is_not_cut_into_byte_ranges(tmp_path, monkeypatch, shape):
    """A worker reading a byte range sees no head to learn the paste's shape from: the file is read whole."""
    monkeypatch.setattr("engdiag.logs.source.PARALLEL_MIN_BYTES", 0)
    name = "v0-single-request-decoding-5min-then-aborted-outside-engine"  # stamped lines: it can be cut
    original = analyze([str(CORPUS / name / "log.txt")], jobs=1).verdict
    path = tmp_path / "pasted.log"
    text = (CORPUS / name / "log.txt").read_text(encoding="utf-8")
    path.write_text(_indent(text, "    ") if shape == "indented" else "\n\n".join(text.split("\n")), encoding="utf-8")
    judged = analyze([str(path)], jobs=2).verdict
    lines = [e.line if shape == "indented" else 2 * e.line - 1 for e in original.evidence]
    assert original.kind.value == "slow"
    assert (judged.kind, [e.line for e in judged.evidence]) == (original.kind, lines)


def test_a_traceback_or_a_log_with_one_unindented_line_shares_no_indentation():
    pasted = b'Traceback (most recent call last):\n  File "x.py", line 1, in f\n    f()\nValueError: x\n'
    assert paste_of(pasted, whole=True) == Paste()
    assert paste_of(b"    INFO 12-13 a\n\tb\n", whole=True).indent == b""
    assert paste_of(b"    INFO 12-13 a\n  \tb\n", whole=True).indent == b"  "
    assert paste_of(b"\n    INFO 12-13 a\n\n      b\n    c", whole=True).indent == b"    "
    # the head's last line may be cut: it does not decide
    assert paste_of(b"    INFO 12-13 a\n    b\nc", whole=False).indent == b"    "
    assert paste_of(b"    INFO 12-13 a\n    b\nc", whole=True).indent == b""


def test_only_a_blank_line_after_every_line_of_the_head_is_a_double_spaced_paste():
    assert paste_of(b"a\n\nb\n\nc\n\n", whole=True).double_spaced
    assert paste_of(b"a\r\n\r\nb\r\n\r\n\r\n\r\nc", whole=True).double_spaced  # CRLF, a blank line of its own
    assert not paste_of(b"a\n\nb\nc\n\nd\n\n", whole=True).double_spaced  # two lines together
    assert not paste_of(b"a\n\nb\n\n", whole=True).double_spaced  # too few lines to tell
    assert not paste_of(b"Traceback\n  x\nError\n\nINFO next\n", whole=True).double_spaced


def test_one_blank_line_after_each_line_is_skipped_and_a_blank_line_of_the_log_still_ends_a_record():
    lines = list(enumerate(["a", "", "b", "", "", "", "c", ""], start=1))
    assert list(skip_doubled(iter(lines))) == [(1, "a"), (3, "b"), (5, ""), (7, "c")]
    # a line that lost its doubled blank is kept with the next one
    assert list(skip_doubled(iter(enumerate(["a", "b", "", "c"], start=1)))) == [(1, "a"), (2, "b"), (4, "c")]


DOUBLING_CHANGED_THESE = [
    "ampere-fp8-kv-chunked-prefill-triton-crash-rpc-unhealthy",  # a traceback cut into one-line records
    "dgx-spark-2node-tp2-allgather-hang-pip-nccl",
    "eks-lws-ep16-decode-gpu-util-098-unreachable",
    "kimi-k25-nvfp4-cudagraph-capture-oom-tp4-tp8",
    "kv-usage-creeps-to-100pct-k8s-timestamps",
    "mllama-11b-profile-run-oom-default-max-num-seqs",
    "omni-qwen3-omni-perf-ci-orchestrator-startup-timeout",
    "v0-single-request-decoding-5min-then-aborted-outside-engine",
    "pascal-p40-gptq-long-prompt-engine-loop-timeout",  # a chained traceback's own blank line, doubled
]


@pytest.mark.parametrize("name", DOUBLING_CHANGED_THESE)
def test_a_double_spaced_paste_gets_the_verdict_of_the_log_itself_citing_the_same_lines(cli, tmp_path, name):
    """Line n of the log is line 2n - 1 of the paste: evidence cites it there (file, gzip, stdin)."""
    text = (CORPUS / name / "log.txt").read_text(encoding="utf-8", errors="replace")
    original = cli("analyze", "--json", str(CORPUS / name / "log.txt"))
    kind, sub, confidence, evidence = _judged(json.loads(original.stdout))
    expected = (kind, sub, confidence, [(2 * line - 1, quoted) for line, quoted in evidence])
    _read_alike(cli, tmp_path, "\n\n".join(text.split("\n")), original.exit_code, expected)


def test_tail_reads_an_indented_paste_as_the_log_itself(cli, tmp_path):
    name = "v0-single-request-decoding-5min-then-aborted-outside-engine"
    original = cli("analyze", "--json", "--tail", "6", str(CORPUS / name / "log.txt"))
    path = tmp_path / "pasted.log"
    path.write_text(_indent((CORPUS / name / "log.txt").read_text(encoding="utf-8"), "    "), encoding="utf-8")
    pasted = cli("analyze", "--json", "--tail", "6", str(path))
    assert pasted.exit_code == original.exit_code
    assert _judged(json.loads(pasted.stdout)) == _judged(json.loads(original.stdout))


def _reference(data: bytes, indent: bytes) -> bytes:
    return b"\n".join(line.removeprefix(indent) for line in data.split(b"\n"))


@given(
    lines=st.lists(st.tuples(st.sampled_from(["", "  ", "    ", "        ", "\t"]),
                             st.text(alphabet="ab \n\r", max_size=12)), max_size=30),
    chunk=st.integers(min_value=1, max_value=9),
    indent=st.sampled_from([b"  ", b"    ", b"\t"]),
)
def test_dedenting_as_it_streams_equals_dedenting_line_by_line(lines, chunk, indent):
    """Lines cut anywhere by the reads, longer than a read, CR, blank lines: the same bytes as a line loop."""
    data = "".join(lead + body for lead, body in lines).encode()
    saved, paste.CHUNK, unzip.CHUNK = paste.CHUNK, chunk, chunk  # the reads and the long-line bound
    try:
        stream = unpasted(io.BytesIO(data), Paste(indent=indent))
        assert stream.read() == _reference(data, indent)
    finally:
        paste.CHUNK = unzip.CHUNK = saved


def _wrapped(text: str, width: int) -> str:
    """The log as a terminal or paste box cuts it: every line longer than ``width`` in pieces that wide."""
    out = []
    for line in text.split("\n"):
        while len(line) > width:
            out.append(line[:width])
            line = line[width:]
        out.append(line)
    return "\n".join(out)


WRAPPING_CHANGED_THESE = [
    "llama405b-fp8-gather-watchdog",  # "OpType=_ALLGATHER_BA" | "SE, NumelIn=…": an upper-case tail
    "ray-placement-group-short-of-gpus-waiting-multinode",  # a rule literal cut in two ("the to" | "tal")
    "lmcache-pd-ucx-tcp-endpoint-timeout",
    "driver-545-tp2-first-allreduce-seq1-hang-30min",  # two cut lines in a short paste
    "llama32-vision-tp4-first-allreduce-seq1-never-completes",
    "naive-all2all-multinode-broadcast-seq-skew",
    "medusa-tp2-gather-watchdog-seq11",
    "xinference-tp2-ada-iommu-p2p-hang-after-nccl-init",
    # a cut traceback line, its rest, then the traceback's next line (the same header): joined to the
    # whole line again, not to its rest
    "kimi-k25-nvfp4-cudagraph-capture-oom-tp4-tp8",
    "gaudi-hpu-graph-nonsfg-collective-warmup",
    "v0-single-request-decoding-5min-then-aborted-outside-engine",
    # 80 columns cut a vLLM header in two (behind a compose or kubectl prefix, or glued after a tqdm bar:
    # ``…17.39it/s]INFO 08-09 0`` | ``3:02:26 metrics.py:406]``): the rows are one line again before either is
    # read, so the header is found
    "qwen3-moe-fused-experts-oom",
    "kv-usage-creeps-to-100pct-k8s-timestamps",
    "outlines-fsm-index-compile-15min-engine-idle",
    "kimi-k3-flashinfer-autotune-reruns-shm-broadcast-wait",
    "ray-multinode-v0-cudagraph-capture-oom-gpu-util-098-lost-first-char",
    "dp-ep-ray-multinode-rendezvous-loopback-hang",
]
CUT_AT_120_ONLY = [
    # the two clocks of one line fall on two rows: the wrapper's clock is learnt from the line (the start-up read
    # 421 minutes long from the rows' mixed clocks).  At 80 the cut falls inside a process's prefix (``(APIServ``
    # | ``er pid=7958) DEBUG …``), whose rest reads as a line of its own.
    "ci-llava-image-embeds-slow-shard-load-timeout",
]


CUT_ONCE_AT_120 = [
    # pastes of a few lines with one line longer than 120 columns: at 120 one row is cut, its rest below it.  ROCm's
    # "…MEMORY_APERTURE_" | "VIOLATION" lost the fault; a frame's "line 410, i" | "n _allocate_buffers" the allocation
    "aiter-vskip-aperture-violation-deepseek-r1-mi300x",
    "b12x-moe-static-workspace-oom",
]


@pytest.mark.parametrize(("name", "width"), [(name, width) for name in WRAPPING_CHANGED_THESE for width in (80, 120)]
                         + [(name, 120) for name in CUT_AT_120_ONLY + CUT_ONCE_AT_120])
def test_a_paste_cut_at_a_fixed_width_gets_the_verdict_and_evidence_of_the_log_itself(cli, name, width):
    """Each cut line and the lines below it are one line again: the same verdict, citing the same text."""
    original = cli("analyze", "--json", str(CORPUS / name / "log.txt"))
    text = (CORPUS / name / "log.txt").read_text(encoding="utf-8", errors="replace")
    pasted = cli("analyze", "--json", "-", input=_wrapped(text, width).encode())
    expected, got = json.loads(original.stdout)["verdict"], json.loads(pasted.stdout)["verdict"]
    assert [got[k] for k in ("kind", "sub_kind", "confidence")] == [expected[k] for k in ("kind", "sub_kind", "confidence")]
    assert [e["text"] for e in got["evidence"]] == [e["text"] for e in expected["evidence"]]


@pytest.mark.parametrize("name", ["kv-usage-creeps-to-100pct-k8s-timestamps", "ray-oom-killer-logits-export"])
def test_a_cut_paste_quoted_in_a_reply_is_joined_without_the_quote_marks(cli, name):
    """A reply quoting a cut paste puts ``> `` before every row, the rests too: a rest joins its line without
    them (left in, ``> `` inside the line hid the stats fields and the OOM killer's line)."""
    original = cli("analyze", "--json", str(CORPUS / name / "log.txt"))
    text = (CORPUS / name / "log.txt").read_text(encoding="utf-8", errors="replace")
    quoted = "\n".join("> " + row for row in text.split("\n"))
    pasted = cli("analyze", "--json", "-", input=quoted.encode())
    expected, got = json.loads(original.stdout)["verdict"], json.loads(pasted.stdout)["verdict"]
    assert (got["kind"], got["sub_kind"]) == (expected["kind"], expected["sub_kind"])


def test_only_lines_cut_at_the_widest_width_with_their_rest_below_make_a_wrapped_paste():
    one, two = "x" * 70, "w" * 70
    assert paste_of(f"{one}\nrest one\n{two}\nrest two\nshort\n".encode(), whole=True).wrap == 70
    assert paste_of(f"{one}\n rest after a space\n{two}\nrest two\n".encode(), whole=True).wrap == 70
    # equally long lines that each start a record, or are followed by a traceback or its frames
    header = "INFO 12-13 10:31:12 engine.py:280] Waiting for {} local, 0 remote core engine proc(s) to start."
    assert paste_of("\n".join(header.format(n) for n in range(3, 6)).encode(), whole=True).wrap is None
    assert paste_of(f"{one}\nTraceback (most recent call last):\n{two}\n  File \"x\"\n".encode(), whole=True).wrap is None
    assert paste_of(b"y" * 50 + b"\nrest\n" + b"v" * 50 + b"\nrest\n", whole=True).wrap is None  # too narrow
    assert paste_of(f"{one}\nrest one\n{two[:-1]}\nrest two\n".encode(), whole=True).wrap is None  # one at the widest


def test_one_row_cut_at_a_terminals_width_is_a_wrap_only_in_a_whole_paste():
    """A paste of a few lines cut at 120 columns may have one long line; in a longer log one row exactly 120 wide
    above a bare line is no evidence, and taking it for a cut would give up the log's bulk scan."""
    row = ":0:rocdevice.cpp :3675: 21394900 us:  Callback: Queue 0x7ee7b420 aborting with error : " \
          "HSA_STATUS_ERROR_MEMORY_APERTURE_"
    rest = "VIOLATION: The agent attempted to access memory beyond the largest legal address. code: 0x29"
    assert len(row) == 120
    assert paste_of(f"short\n{row}\n{rest}\nshort again\n".encode(), whole=True).wrap == 120
    assert paste_of(f"short\n{row}\n{rest}\nshort again\n".encode(), whole=False).wrap is None
    # joining must make what neither half is: a natural 80-column line above the shell's "Killed" makes nothing
    natural = "INFO 01-23 07:34:26 gpu_executor.py:122] # GPU blocks: 11836, # CPU blocks: 4681"
    assert len(natural) == 80 and paste_of(f"{natural}\nKilled\n".encode(), whole=True).wrap is None


def test_a_long_line_printed_twice_or_lines_wider_than_any_terminal_are_no_wrap():
    """Seen in an unlabelled vLLM issue body: lscpu's ``Flags:`` line printed twice, each time before a bare line."""
    flags = "Flags:" + " fpu vme de pse tsc msr" * 10
    assert paste_of(f"{flags}\nHypervisor vendor: KVM\n{flags}\nHypervisor vendor: KVM\n".encode(), whole=True).wrap is None
    wide = "z" * 500
    assert paste_of(f"{wide}\nrest one\n{wide[:-1]}y\nrest two\n".encode(), whole=True).wrap is None


def test_lines_that_open_with_their_own_date_or_carry_a_vllm_header_are_never_the_tails_of_a_cut():
    """Two client lines of equal width, each followed by a harness-prefixed vLLM line, are no paste cut at
    that width, and a line opening with a full date and time never continues the wide line above it
    (tt-tensor-cache-generation-exceeds-1200s-health-wait)."""
    from engdiag.logs.lines import pieces
    from engdiag.logs.records import joins

    client = "2026-03-18 17:57:{s},051 - utils.prompt_client - INFO - Service not ready after 1181.1s, waiting 10.0s before polling"
    server = "[SERVER] (APIServer pid=1) DEBUG 03-18 17:57:{s} utils.py:1031] Waiting for 1 local, 0 remote core engine proc(s) to start."
    head = "\n".join([client.format(s=23), server.format(s=27), client.format(s=33), server.format(s=37)]) + "\n"
    assert paste_of(head.encode(), True).wrap is None
    wide, dated = pieces(server.format(s=27), 1)[-1], pieces(client.format(s=33), 2)[0]
    assert joins(wide, dated) is None
    assert joins(wide, pieces("2026 tokens were scheduled in the last step", 2)[0]) is not None  # a tail still joins


def test_a_progress_bar_cut_at_the_pastes_width_keeps_its_count_and_its_time(tmp_path):
    # outlines-fsm-index-compile-15min-engine-idle cut at 120 columns: the bar's "15831/15" + "831 [15:10<…]"
    bar = "Compiling FSM index for all state transitions: 100%|" + "█" * 58 + "| 15831/15831 [15:10<00:00, 17.39it/s]"
    stats = ("INFO 08-09 03:02:36 metrics.py:406] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
             "0.0 tokens/s, Running: 0 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.0%.")
    lines = []
    for line in (bar, stats, stats.replace("03:02:36", "03:02:46")):
        while len(line) > 120:
            lines.append(line[:120])
            line = line[120:]
        lines.append(line)
    path = tmp_path / "cut.log"
    path.write_text("\n".join(lines) + "\n")
    assert paste_of(path.read_bytes(), True).wrap == 120
    compile_step = next(a for a in analyze([str(path)]).model.activities if a.name == "guided-decoding compile")
    assert compile_step.seconds == 910 and "15831/15831" in compile_step.detail


KUBECTL_PREFIXED = [  # 68 of 743 corpus logs changed verdict behind kubectl's source prefix before it was read
    "163-shard-weight-load-exceeds-engine-ready-timeout",
    "a6000-tp2-iommu-acs-stall",
    "ascend-dsv4-prefill-hccl-notify-wait-timeout",
    "ascend-310p-qwen3-moe-unsupported",
]


@pytest.mark.parametrize("name", KUBECTL_PREFIXED)
def test_kubectl_logs_with_its_source_prefix_get_the_verdict_of_the_log_itself(cli, name):
    """``kubectl logs -l app=vllm --prefix`` puts ``[pod/NAME/CONTAINER] `` before every line."""
    original = cli("analyze", "--json", str(CORPUS / name / "log.txt"))
    text = (CORPUS / name / "log.txt").read_text(encoding="utf-8", errors="replace")
    prefixed = "\n".join(f"[pod/vllm-7d9f8-abcde/vllm] {line}" for line in text.split("\n"))
    got = json.loads(cli("analyze", "--json", "-", input=prefixed.encode()).stdout)["verdict"]
    expected = json.loads(original.stdout)["verdict"]
    assert [got[k] for k in ("kind", "sub_kind", "confidence")] == [expected[k] for k in ("kind", "sub_kind", "confidence")]


GREPPED = [
    "v0-single-request-decoding-5min-then-aborted-outside-engine",
    "tp2-nccl-allreduce-hang-p2p-cumem-sanity-check",
    "omni-qwen3-omni-perf-ci-orchestrator-startup-timeout",
    "pascal-p40-gptq-long-prompt-engine-loop-timeout",
]


def _grepped(text: str, name: str) -> str:
    """The log as ``grep -n`` over several files prints it: each line behind its file's name and line number."""
    return "\n".join(f"{name}:{n}:{line}" if line else line for n, line in enumerate(text.split("\n"), 1))


@pytest.mark.parametrize("name", GREPPED)
def test_grep_output_over_several_files_gets_the_verdict_of_the_log_itself(cli, tmp_path, name):
    """As a file, a gzip file and on stdin; evidence cites the same lines, their text without the file's name."""
    text = (CORPUS / name / "log.txt").read_text(encoding="utf-8", errors="replace")
    original = cli("analyze", "--json", str(CORPUS / name / "log.txt"))
    kind, sub, confidence, evidence = _judged(json.loads(original.stdout))
    pasted = _grepped(text, "logs/vllm-0.log")
    lines = pasted.split("\n")
    expected = (kind, sub, confidence, [(line, lines[line - 1].split(":", 2)[2][:len(quoted)] and quoted)
                                        for line, quoted in evidence])
    _read_alike(cli, tmp_path, pasted, original.exit_code, expected)


LABELLED = [  # 95 of 743 corpus logs changed verdict behind srun's task label before it was read
    "163-shard-weight-load-exceeds-engine-ready-timeout",
    "vllm-2731-stuck-in-allreduce-running-pending",  # grep -n's "6:  File …": the frame keeps its two spaces
    "a2-2node-glm53-profile-allgather-ranks-diverge",
    "ascend-310p-qwen3-moe-unsupported",
    "kv-usage-creeps-to-100pct-k8s-timestamps",  # cut at 159 columns too: the label goes before the width is read
]


@pytest.mark.parametrize("name", LABELLED)
@pytest.mark.parametrize("label", ["srun", "grep -n"])
def test_a_log_behind_a_number_label_gets_the_verdict_of_the_log_itself(cli, tmp_path, name, label):
    """Slurm's ``srun --label`` (``0: INFO 05-14 23:13:00 …``) and ``grep -n`` over one file (``988:INFO …``)."""
    text = (CORPUS / name / "log.txt").read_text(encoding="utf-8", errors="replace")
    original = cli("analyze", "--json", str(CORPUS / name / "log.txt"))
    kind, sub, confidence, evidence = _judged(json.loads(original.stdout))
    rows = text.split("\n")
    pasted = "\n".join(f"0: {row}" if label == "srun" else f"{n}:{row}" for n, row in enumerate(rows, 1))
    _read_alike(cli, tmp_path, pasted, original.exit_code, (kind, sub, confidence, evidence))


def test_times_at_line_starts_are_no_labels():
    """``12:34:56 …`` and ``34:56.120 …`` (a bare time) are no labels: such a log keeps its lines whole."""
    for form in (b"12:34:%02d worker ready", b"34:%02d.120 worker ready"):
        timed = b"\n".join(form % s for s in range(6)) + b"\n"
        assert not paste_of(timed, whole=True).label, form


def test_a_record_behind_greps_file_name_keeps_its_time_and_process(tmp_path):
    """mooncake-kv-lease-force-free-dirty-kv's shape: most lines behind the name, one line of the reporter's."""
    path = tmp_path / "pasted.log"
    path.write_text(
        "vllm_p3.log:(EngineCore_DP3 pid=546) INFO 08-29 09:12:36 [mooncake_connector.py:1910] Delaying free of 6 "
        "blocks for request r-1\n\nP node: kv freed on timeout\n"
        "vllm_p3.log:(Worker_DP3_TP1_EP25 pid=649) ERROR 08-29 09:12:47 [mooncake_connector.py:233] Force freed "
        "expired request: r-1. Reason: Request exceeded timeout threshold (10 seconds). Action: released.\n"
        "vllm_p3.log:(Worker_DP3_TP0_EP24 pid=603) ERROR 08-29 09:12:47 [mooncake_connector.py:233] Force freed "
        "expired request: r-1. Reason: Request exceeded timeout threshold (10 seconds). Action: released.\n")
    result = analyze([str(path)])
    assert result.timeline.first_stamp is not None and result.timeline.last_stamp is not None
    assert result.timeline.last_stamp.key - result.timeline.first_stamp.key == 11
    assert result.verdict.evidence[0].text.startswith("Force freed")


def test_only_a_head_mostly_behind_file_names_is_greps_output():
    lines = [b"INFO 08-29 09:12:36 [core.py:1] a", b"INFO 08-29 09:12:37 [core.py:1] b", b"run.log:INFO 08-29 [x]"]
    assert not paste_of(b"\n".join(lines) + b"\n", whole=True).label
    assert paste_of(b"\n".join([b"a.log:" + line for line in lines[:2]] + [b"--", b"b.out-x"]) + b"\n",
                    whole=True).label == "grep"
    assert not paste_of(b"a.log:x\nb.log:y\n", whole=True).label  # two lines are too few to tell


@given(
    lines=st.lists(st.tuples(st.sampled_from(["", "x.log:", "./d/y.txt:12:", "z.out-", "notes: ", "0: ", "  12: ",
                                              "988:", "12:3"]),
                             st.text(alphabet="ab .:\n\r", max_size=12)), max_size=30),
    chunk=st.integers(min_value=1, max_value=9),
    label=st.sampled_from(sorted(paste._LABELS)),
)
def test_removing_labels_as_it_streams_equals_removing_them_line_by_line(lines, chunk, label):
    data = "".join(lead + body for lead, body in lines).encode()
    saved, paste.CHUNK, unzip.CHUNK = paste.CHUNK, chunk, chunk
    at = paste._LABEL_AT[label]
    try:
        stream = unpasted(io.BytesIO(data), Paste(label=label))
        assert stream.read() == b"\n".join(at.sub(b"", line, count=1) if at.match(line) else line
                                           for line in data.split(b"\n"))
    finally:
        paste.CHUNK = unzip.CHUNK = saved


_POLLS = "".join(f"DEBUG 06-12 01:{29 + m // 6}:{m % 6}7 [utils.py:485] Waiting for 1 local, 0 remote core engine proc(s) "
                 "to start.\n" for m in range(11))


def test_polls_with_nothing_between_them_read_alike_double_spaced_or_wrapped(tmp_path):
    """The API server's start-up polls with no line of the engine core between them (pr19316-…-waiting-local-proc)
    are an engine core blocked before its first step, however the paste spaced or cut them."""
    for shape, text in (("as printed", _POLLS), ("double-spaced", _POLLS.replace("\n", "\n\n")),
                        ("wrapped at 80", "".join(line[:80] + "\n" + line[80:] + "\n" for line in _POLLS.splitlines()))):
        path = tmp_path / "polls.log"
        path.write_text(text)
        verdict = analyze([str(path)]).verdict
        assert verdict.kind.value == "deadlocked", shape
    # the engine core's own start-up lines between the polls (unevenly: one, then three) decide otherwise
    lines = _POLLS.splitlines()
    noisy = "\n".join(lines[:3] + ["(EngineCore_0 pid=9) some start-up print"] + lines[3:6]
                      + ["(EngineCore_0 pid=9) more", "(EngineCore_0 pid=9) and more", "(EngineCore_0 pid=9) still"]
                      + lines[6:]) + "\n"
    path = tmp_path / "noisy.log"
    path.write_text(noisy)
    assert analyze([str(path)]).verdict.kind.value != "deadlocked"


def test_a_wrapped_nccl_line_still_shows_two_gpus_talking(cli):
    """a6000-tp2-iommu-acs-stall at 120 columns: the cut falls before "COMPLETE"; the ranks are read from the words
    before it (' nranks 2'), so the multi-GPU stall keeps its reading."""
    text = (CORPUS / "a6000-tp2-iommu-acs-stall" / "log.txt").read_text(encoding="utf-8")
    pasted = cli("analyze", "--json", "-", input=_wrapped(text, 120).encode())
    assert json.loads(pasted.stdout)["verdict"]["kind"] == "deadlocked"


def test_a_natural_row_that_wide_above_a_tracebacks_last_line_is_no_cut():
    code = "    raise RuntimeError(" + "x" * 96 + ")"
    assert len(code) == 120
    assert paste_of(f"Traceback (most recent call last):\n{code}\nRuntimeError: boom\n".encode(), whole=True).wrap is None
    flat = "w" * 120
    assert paste_of(f"{flat}\nRuntimeError: boom\n".encode(), whole=True).wrap is None
