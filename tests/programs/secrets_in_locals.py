"""A process holding a prompt in a frame local, blocked so that py-spy sees the frame."""

import os
import sys

from _ready import ready


def handle_request(prompt: str, token_ids: list) -> None:
    read_fd, _write_fd = os.pipe()
    ready(sys.argv[1])
    os.read(read_fd, 1)


# the prompt arrives at run time (as a real one does), never in the source
handle_request(os.environ["PLANTED_PROMPT"], list(range(500, 900)))
