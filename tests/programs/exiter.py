"""Exits after the given number of seconds: a process that ends during a capture."""

import sys
import time

from _ready import ready

ready(sys.argv[1])
time.sleep(float(sys.argv[2]))
