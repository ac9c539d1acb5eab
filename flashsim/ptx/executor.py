"""The cluster engine a distributed launch runs on, behind a small interface (``Executor``), and its one
implementation on Dask.distributed (``DaskExecutor``).

Why Dask.distributed: it is pure Python with a small download (about 5 MB with its dependencies), and a
``LocalCluster`` of worker processes starts inside a test or a CI job in a second or two; its ``scatter(...,
broadcast=True)`` puts an object on every worker once, its scheduler re-runs the tasks of a worker that dies
(``distributed.scheduler.allowed-failures`` times) and raises ``KilledWorker`` past that. Ray would do the same
through its object store, but its wheel is large and a local Ray start is heavy for a 2-core CI machine. The launch
code (flashsim.ptx.distributed) sees only ``Executor``: a Ray backend is one more subclass.

``resolve(spec)``: "local:N" (a LocalCluster of N worker processes with one thread each, started once per process
and N, closed at exit), an address ("tcp://host:8786", a running Dask scheduler's), a connected
``dask.distributed.Client``, or an Executor.
"""

from __future__ import annotations

import atexit
import re

from .errors import LaunchError, WorkerError

__all__ = ["Executor", "DaskExecutor", "resolve", "close_local", "Died", "CONNECT_TIMEOUT"]

CONNECT_TIMEOUT = 10  # seconds to reach a scheduler given by address
_LOCAL: dict = {}  # N -> (LocalCluster, Client) of "local:N", kept for the process's later launches


class Died(Exception):
    """A task whose worker died more often than the engine retries (carries the engine's message); ``dropped``: it
    died with others, its input lost with the workers that held it."""

    def __init__(self, message: str, dropped: bool = False):
        super().__init__(message)
        self.dropped = dropped


class Executor:
    """What a distributed launch needs of a cluster engine.

    - ``workers()``: the worker identifiers (addresses);
    - ``run_everywhere(source)``: evaluate the Python expression ``source`` on every worker, {worker: value or the
      exception it raised} (the identity probe: a builtin, so a worker without flashsim answers with its error);
    - ``memory_limits()``: {worker: bytes it may hold, 0 for no limit};
    - ``broadcast(obj)``: put ``obj`` on every worker once; a handle tasks take in its place;
    - ``submit(fn, *args, worker=None)``: run ``fn(*args)`` (handles replaced by their objects) on ``worker`` where it
      can, else on some worker: a task;
    - ``completed(tasks)``: yields (task, result) as tasks finish; a task whose worker died past the engine's
      retries yields (task, Died(...)); ``cancel(tasks)``; ``release(handle)``; ``close()`` after the launch.
    """

    name = "executor"

    def workers(self) -> list:
        raise NotImplementedError

    def run_everywhere(self, source: str) -> dict:
        raise NotImplementedError

    def memory_limits(self) -> dict:
        raise NotImplementedError

    def broadcast(self, obj):
        raise NotImplementedError

    def submit(self, fn, *args, worker=None):
        raise NotImplementedError

    def completed(self, tasks):
        raise NotImplementedError

    def cancel(self, tasks) -> None:
        raise NotImplementedError

    def release(self, handle) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """After the launch: let go of what ``resolve`` opened for it alone (a connection to an address)."""


class DaskExecutor(Executor):
    """An Executor on a connected ``dask.distributed.Client``; ``owned``: the client was opened for one launch (an
    address) and ``close`` closes it."""

    name = "dask"

    def __init__(self, client, owned: bool = False):
        self.client = client
        self.owned = owned

    def close(self) -> None:
        if self.owned:
            self.client.close()

    def workers(self) -> list:
        return sorted(self.client.nthreads())  # asks the scheduler (its cached info may predate the workers)

    def run_everywhere(self, source: str) -> dict:
        return self.client.run(eval, source, on_error="return")

    def memory_limits(self) -> dict:
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        return {w: int(v.get("memory_limit") or 0) for w, v in info.items()}

    def broadcast(self, obj):
        return self.client.scatter(obj, broadcast=True, hash=False)

    def submit(self, fn, *args, worker=None):
        # a worker named is a preference: if it dies, the scheduler runs the task elsewhere
        if worker is None:
            return self.client.submit(fn, *args, pure=False)
        return self.client.submit(fn, *args, pure=False, workers=[worker], allow_other_workers=True)

    def completed(self, tasks):
        from distributed import as_completed
        from distributed.client import FutureCancelledError
        from distributed.scheduler import KilledWorker

        for task in as_completed(tasks, loop=self.client.loop):
            try:
                yield task, task.result()
            except KilledWorker as exc:
                yield task, Died(str(exc))
            except FutureCancelledError as exc:  # its input died with every worker that held it
                yield task, Died(f"the task was dropped: {exc}", dropped=True)

    def cancel(self, tasks) -> None:
        self.client.cancel(list(tasks))

    def release(self, handle) -> None:
        handle.release()


def _dask():
    try:
        import distributed
    except ImportError:
        raise LaunchError(
            "a distributed launch runs on Dask.distributed, which is not installed: pip install 'flashsim[cluster]'"
        ) from None
    return distributed


def _local(n: int) -> DaskExecutor:
    got = _LOCAL.get(n)
    if got is None or got[1].status != "running":
        distributed = _dask()
        cluster = distributed.LocalCluster(
            n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
        )
        client = distributed.Client(cluster, set_as_default=False)
        client.wait_for_workers(n, timeout=120)
        got = _LOCAL[n] = (cluster, client)
    return DaskExecutor(got[1])


def close_local(n: int) -> None:
    """Stop the LocalCluster of "local:N" if this process started one (a later "local:N" starts a new one)."""
    got = _LOCAL.pop(n, None)
    if got is not None:
        got[1].close()
        got[0].close()


@atexit.register
def _close_local() -> None:
    import logging

    # the scheduler logs the data of the last launch as lost when its workers stop at exit: nothing is lost then
    logging.getLogger("distributed.scheduler").setLevel(logging.CRITICAL)
    for cluster, client in _LOCAL.values():
        try:
            client.close()
            cluster.close()
        except Exception:  # noqa: BLE001 - the interpreter is going down; nothing left to report to
            pass
    _LOCAL.clear()


def resolve(spec) -> Executor:
    """The Executor of ``launch(executor=spec)`` (the module docstring); LaunchError for a spec of no known kind,
    WorkerError for a scheduler that cannot be reached."""
    if isinstance(spec, Executor):
        return spec
    if isinstance(spec, str):
        local = re.fullmatch(r"local:(\d+)", spec.strip())
        if local:
            n = int(local.group(1))
            if not 1 <= n <= 1024:
                raise LaunchError(f"executor 'local:N' takes 1 to 1024 workers, got {spec!r}")
            return _local(n)
        if spec.strip().startswith("local"):
            raise LaunchError(f"executor {spec!r}: expected 'local:N' with N the number of worker processes")
        distributed = _dask()
        try:
            client = distributed.Client(spec, timeout=CONNECT_TIMEOUT, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            raise WorkerError(
                f"cannot reach a Dask scheduler at {spec!r} within {CONNECT_TIMEOUT} s ({type(exc).__name__}: {exc})"
            ) from None
        return DaskExecutor(client, owned=True)
    try:
        from distributed import Client
    except ImportError:
        Client = None
    if Client is not None and isinstance(spec, Client):
        if spec.status != "running":
            raise WorkerError(f"the Dask client {spec!r} is not connected (status {spec.status!r})")
        return DaskExecutor(spec)
    raise LaunchError(
        "executor must be None, 'local:N', a scheduler address ('tcp://host:8786'), a dask.distributed.Client or a "
        f"flashsim.ptx.executor.Executor, got {type(spec).__name__}"
    )
