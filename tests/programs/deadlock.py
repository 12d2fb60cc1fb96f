"""Two threads deadlocked on two locks (lock order inversion); the main thread joins them.

argv: READY_FILE [spin].  With "spin" a child process spins at 100 % CPU on one line (busy, not stuck).
"""

import os
import sys
import threading
import time

from _ready import ready

first, second = threading.Lock(), threading.Lock()
both_hold = threading.Barrier(2)


def take_first_then_second() -> None:
    with first:
        both_hold.wait()
        with second:
            pass


def take_second_then_first() -> None:
    with second:
        both_hold.wait()
        with first:
            pass


if "spin" in sys.argv[2:] and os.fork() == 0:
    while True: pass  # one line: the frame never changes while the CPU time does
threads = [threading.Thread(target=f, name=f.__name__) for f in (take_first_then_second, take_second_then_first)]
for thread in threads:
    thread.start()
time.sleep(0.2)
ready(sys.argv[1])
for thread in threads:
    thread.join()
