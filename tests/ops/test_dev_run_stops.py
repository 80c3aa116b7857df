"""`scripts/dev.py run` stops its children's whole process groups: a grandchild holding a port
(as runserver's autoreloader child holds 8000) is gone after the stop, even one that ignores
SIGTERM. tests/docs/test_commands.py sends SIGTERM to the real command as well."""

import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
PORT = 8242

GRANDPARENT = f"""
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", '''
import signal, socket, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
sock = socket.socket(); sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind(("127.0.0.1", {PORT})); sock.listen()
time.sleep(600)
'''])
time.sleep(600)
"""


def dev_module():
    return load_script("dev")


def port_held() -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", PORT)) == 0


def test_a_grandchild_holding_a_port_is_stopped_with_its_group():
    child = subprocess.Popen([sys.executable, "-c", GRANDPARENT], start_new_session=True)
    deadline = time.monotonic() + 30
    while not port_held() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert port_held()
    dev_module().children_stop([child], grace=2)
    time.sleep(0.5)
    assert child.poll() is not None
    assert not port_held()
