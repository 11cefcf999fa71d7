"""`aicc tune --ray ADDRESS`: the jobs of a round on a Ray cluster (the optional extra
``aicc[tune]``).

Compile jobs (lowering every candidate, writing the bundle and building its library) run as
tasks on any worker. Measurements run on one actor per machine of the cluster, pinned to
its node and holding one CPU there; an actor runs one method call at a time, so two
measurements never share a machine. Job i of a round goes to machine i mod the number of
machines. Results come back as they finish and merge into the one log on this process
(search.tune keeps its records sorted by job), so the log does not depend on the order
they arrive in. ``--ray local`` starts a cluster of this machine alone.
"""
from __future__ import annotations

import socket
import tempfile
import time
from pathlib import Path

from ..errors import ConfigError

CONNECT_TIMEOUT_S = 5.0


def _compile(g1, cands, opts, known):
    from ..bundle.loader import load
    from .trial import compile_job, pack
    with tempfile.TemporaryDirectory(prefix="aicc-tune-") as tmp:
        out = Path(tmp) / "job"
        comp = compile_job(g1, cands, opts, out, known)
        if not comp["steps"]:
            return comp, None
        try:
            load(out)                    # builds the library here, so the measurer does not
        except Exception:  # noqa: BLE001 - a cross bundle builds where it is measured
            pass
        return comp, pack(out)


class _Measurer:
    def measure(self, data: bytes, steps: dict, runner):
        from .trial import measure_job, unpack
        with tempfile.TemporaryDirectory(prefix="aicc-tune-") as tmp:
            return measure_job(unpack(data, Path(tmp) / "job"), steps, runner=runner)


def _check_address(address: str) -> None:
    """A host:port that does not accept a connection is one clear line, not Ray's minute of
    retries."""
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--ray {address!r}: expected host:port (or ray://host:port, or local)")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as e:
        raise ConfigError(f"--ray {address}: no Ray cluster answers there ({e.strerror or e})") \
            from None


class RayExecutor:
    def __init__(self, address: str, opts, runner=None):
        try:
            import ray
        except ImportError:
            raise ConfigError("--ray needs Ray: pip install 'aicc[tune]'") from None
        self.ray, self.opts, self.runner = ray, opts, runner
        self.started = address == "local"
        if not self.started:
            _check_address(address)
        try:
            ray.init(address=None if self.started else address, include_dashboard=False,
                     **({"_node_ip_address": "127.0.0.1"} if self.started else {}),
                     logging_level="ERROR", log_to_driver=False,
                     **({"num_cpus": max(2, _cpus())} if self.started else {}))
        except Exception as e:  # noqa: BLE001 - Ray raises several kinds
            raise ConfigError(f"--ray {address}: cannot join the cluster "
                              f"({' '.join(str(e).split())[:200]})") from None
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        self.compile = ray.remote(num_cpus=1)(_compile)
        nodes = sorted((n for n in ray.nodes() if n.get("Alive")), key=lambda n: n["NodeID"])
        actor = ray.remote(num_cpus=1)(_Measurer)
        self.measurers = [actor.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
            n["NodeID"], soft=False)).remote() for n in nodes]
        if not self.measurers:
            raise ConfigError(f"--ray {address}: the cluster has no live node")

    def run(self, jobs: list, deadline: float, on_done) -> bool:
        ray = self.ray
        compiling = {self.compile.remote(j.problem.graph, j.cands, self.opts,
                                                j.known): j for j in jobs}
        measuring, comps = {}, {}
        while compiling or measuring:
            if time.monotonic() >= deadline:
                for ref in compiling:
                    ray.cancel(ref, force=True)
                for ref in measuring:       # actor tasks: Ray refuses force=True for them
                    ray.cancel(ref)
                return False
            done, _ = ray.wait([*compiling, *measuring], num_returns=1, timeout=1.0)
            for ref in done:
                if ref in compiling:
                    j = compiling.pop(ref)
                    comp, data = ray.get(ref)
                    if data is None:
                        on_done(j, comp, None)
                        continue
                    m = self.measurers[jobs.index(j) % len(self.measurers)]
                    measuring[m.measure.remote(data, comp["steps"], self.runner)] = j
                    comps[j.job] = comp
                else:
                    j = measuring.pop(ref)
                    on_done(j, comps.pop(j.job), ray.get(ref))
        return True

    def close(self) -> None:
        """Stops a cluster --ray local started; disconnects from one it joined."""
        self.ray.shutdown()


def _cpus() -> int:
    import os
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
