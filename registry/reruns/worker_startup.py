"""What a Celery worker checks before it takes a job (a bootstep, added in kernelindex/celery.py).

A worker that serves a GPU queue signs every claim, heartbeat and result with its own key. Without
a usable one it would still take jobs off its queue, have each claim refused by the central worker
and leave them queued, so that a sweep waited for them to its deadline. Such a worker refuses to
start instead: one line naming what is missing, and a non-zero exit (Celery's own handling of a
SecurityError raised while the worker is built). Workers that serve no GPU queue (the web tier's
recorder on `default`) sign nothing and start as before.
"""

from celery import bootsteps
from celery.exceptions import SecurityError
from django.conf import settings

from registry.reruns.services.signing import worker_key_problem

GPU_QUEUE_PREFIX = "gpu."


def gpu_queues(worker) -> list[str]:
    """The GPU queues (`gpu.<model>`) among those the worker consumes."""
    queues = worker.app.amqp.queues
    names = queues.consume_from if queues.consume_from is not None else queues
    return sorted(name for name in names if name.startswith(GPU_QUEUE_PREFIX))


class WorkerKeyCheck(bootsteps.Step):
    """Refuse to start a GPU worker (one serving a `gpu.*` queue, or started in the gpu-worker
    role) that has no usable worker key. Checked while the worker is built, before any pool or
    connection exists."""

    name = "kernelindex.WorkerKeyCheck"

    def __init__(self, worker, **kwargs):
        super().__init__(worker, **kwargs)
        queues = gpu_queues(worker)
        if not queues and not settings.GPU_WORKER:
            return
        problem = worker_key_problem()
        if problem:
            serving = ", ".join(queues) or "the gpu-worker role"
            raise SecurityError(f"This GPU worker ({serving}) cannot sign its reports: {problem}.")
