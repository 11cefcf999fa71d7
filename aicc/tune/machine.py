"""Which machine took a measurement: the host name and its CPU model (the tuning log's
``machine``), so a log merged from several machines says where each cost came from."""
from __future__ import annotations

import platform
import socket


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "Model", "CPU part")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_id() -> str:
    return f"{socket.gethostname()} ({cpu_model()})"
