"""The commands that run the harness in this Python need torch, which no requirements file names:
a GPU host keeps its own build (docs/gpu-hosts.md). Without it they say so in one line, before
they start anything, rather than failing every job or ending in a traceback."""

import importlib


def torch_missing(command: str) -> str | None:
    """The one-line message for `command`, or None when torch imports."""
    try:
        importlib.import_module("torch")
    except ImportError:
        return (
            f"{command} needs torch, which this Python does not have: install the host's build of "
            "torch (docs/gpu-hosts.md), then run it again."
        )
    return None
