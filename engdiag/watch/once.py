"""``engdiag watch --once``: judge from one look, for scripts and Kubernetes liveness probes.

From metrics, two scrapes a few seconds apart (or one scrape and the previous
probe's, kept in ``--state`` FILE) tell whether the counters move; from a log, the
last progress line's time against the clock.  Without history, quiet work in
flight can only be called SLOW: DEAD needs the quiet to have outlasted the
adaptive timeout, which the state file or the log's times prove.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from engdiag.errors import InputError
from engdiag.logs.events import SECONDS_PER_YEAR, Stamp, Stats
from engdiag.timeouts.model import Policy
from engdiag.timeouts.sources import MetricsSample, fetch_metrics, parse_sample
from engdiag.watch.judge import LivenessTracker, Verdict
from engdiag.watch.watcher import DEATH

TAIL_BYTES = 4 << 20
_COUNTERS = ("prompt_tokens", "generation_tokens", "finished")


@dataclass(frozen=True)
class Look:
    """What one source says: how long since progress, what is in flight, whether it died."""

    since_progress_s: float | None
    """Seconds since progress was proved; None when nothing has proved any."""
    in_flight: float | None
    prompt_len: int | None = None
    tokens_per_sec: float | None = None
    death: str | None = None
    watched_s: float = 0.0
    """How long this source has been watched without proof of progress (for ``since_progress_s`` None)."""


def _counters(sample: MetricsSample) -> dict[str, float | None]:
    return {name: getattr(sample, name) for name in _COUNTERS}


def look_at_metrics(url: str, gap_s: float, state_file: Path | None,
                    sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.time) -> Look:
    """Do the counters move?  Compared with the previous probe's scrape if there is one."""
    first = parse_sample(fetch_metrics(url), url)
    now = clock()
    previous = _load_state(state_file)
    if previous is None:
        sleep(gap_s)
        second = parse_sample(fetch_metrics(url), url)
        now = clock()
        moved = _moved(_counters(first), _counters(second))
        last_progress = now if moved else None
        current = second
    else:
        moved = _moved(previous["counters"], _counters(first))
        last_progress = now if moved else previous.get("last_progress")
        current = first
    first_seen = previous.get("first_seen", previous["at"]) if previous is not None else now - gap_s
    quiet = None if last_progress is None else max(0.0, now - last_progress)
    _save_state(state_file, {"at": now, "first_seen": first_seen, "counters": _counters(current),
                             "last_progress": last_progress})
    in_flight = None if current.running is None else current.running + (current.waiting or 0)
    return Look(quiet, in_flight, current.prompt_p99, watched_s=max(0.0, now - first_seen))


def _moved(before: dict[str, float | None], after: dict[str, float | None]) -> bool:
    return any(after.get(k) is not None and before.get(k) is not None and after[k] > before[k] for k in _COUNTERS)


def _load_state(path: Path | None) -> dict | None:
    if path is None or not path.exists():
        return None
    try:
        state = json.loads(path.read_text())
        return state if isinstance(state, dict) and "counters" in state else None
    except (OSError, ValueError):
        return None


def _save_state(path: Path | None, state: dict) -> None:
    if path is None:
        return
    from engdiag.snapshot.bundle import write_atomically

    write_atomically(path, json.dumps(state).encode())


def look_at_log(path: Path, now: datetime) -> Look:
    """The last progress line's time against ``now`` (local time, as vLLM prints it)."""
    from engdiag.analysis.analyze import analyze
    from engdiag.analysis.timeline import is_progress
    from engdiag.logs.window import Window

    timeline = analyze([str(path)], window=Window(tail_bytes=TAIL_BYTES), jobs=1).timeline
    events = list(timeline.events)
    progress = next((e for e in reversed(events) if is_progress(e) and e.stamp is not None), None)
    death = next((e for e in reversed(events) if e.signal in DEATH), None)
    if death is not None and progress is not None and timeline.events.index(death) < timeline.events.index(progress):
        death = None
    stats = timeline.stats
    in_flight = stats[-1][1].running + stats[-1][1].waiting if stats else None
    prompts = timeline.prompt_lengths
    rates = [s.prompt_tps for _, s in stats if isinstance(s, Stats) and s.prompt_tps > 0]
    since = None
    if progress is not None and progress.stamp is not None:
        current = Stamp(now.month, now.day, now.hour * 3600 + now.minute * 60 + now.second)
        since = float((current.key - progress.stamp.key) % SECONDS_PER_YEAR)
    return Look(since, in_flight, prompts.max, min(rates) if rates else None,
                death.text[:160] if death is not None else None)


def judge_once(looks: list[Look], policy: Policy, tokens_per_sec: float | None, prompt_len: int | None) -> Verdict:
    """One verdict from every source's look (the most recent progress wins; a reported death decides)."""
    if not looks:
        raise InputError("nothing to look at", hint="give --metrics-url URL and/or --log PATH")
    tracker = LivenessTracker(policy, tokens_per_sec, prompt_len)
    quiet = [look.since_progress_s for look in looks if look.since_progress_s is not None]
    flights = [look.in_flight for look in looks if look.in_flight is not None]
    for look in looks:
        if look.prompt_len:
            tracker.prompt(look.prompt_len)
        if look.tokens_per_sec:
            tracker.rate(look.tokens_per_sec)
    watched = max([look.watched_s for look in looks] + quiet, default=0.0)
    now = watched + 1.0
    tracker.load(1.0 if not quiet else 0.0, max(flights) if flights else None)
    if quiet:  # only a counter that moved or a progress line proves progress
        tracker.progress(now - min(quiet))
    deaths = [look.death for look in looks if look.death]
    if deaths and (not quiet or min(quiet) > policy.heartbeat_s):
        tracker.died(deaths[0])
    return tracker.verdict(now)
