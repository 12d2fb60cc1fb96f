"""A Python process that marks itself non-dumpable: ptrace then needs CAP_SYS_PTRACE, even for its owner."""

import ctypes
import sys
import time

from _ready import ready

PR_SET_DUMPABLE = 4
ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
ready(sys.argv[1])
time.sleep(600)
