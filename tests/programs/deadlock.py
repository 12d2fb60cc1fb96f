"""Two threads deadlocked on two locks (lock order inversion); the main thread joins them."""

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


threads = [threading.Thread(target=f, name=f.__name__) for f in (take_first_then_second, take_second_then_first)]
for thread in threads:
    thread.start()
time.sleep(0.2)
ready(sys.argv[1])
for thread in threads:
    thread.join()
