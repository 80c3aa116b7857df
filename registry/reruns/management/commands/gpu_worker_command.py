from django.core.management.base import BaseCommand

from registry.reruns.services import CPU_SLUG
from registry.reruns.services.signing import worker_key_problem


class Command(BaseCommand):
    help = (
        "Print the command that starts a Celery worker for this host's GPU model: it consumes "
        "only gpu.<model> (add --with-default on a host that also records results)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--with-default", action="store_true", help="Also consume the default queue.")
        parser.add_argument("--gpu", help="The GPU model slug, instead of asking the local GPU.")

    def handle(self, *args, gpu=None, with_default=False, **options):
        if gpu is None:
            from registry.reruns.harness import local_gpu_slug

            gpu = local_gpu_slug()
        queues = [f"gpu.{gpu}"] + (["default"] if with_default else [])
        if gpu == CPU_SLUG:
            self.stderr.write("No CUDA GPU here: this worker takes CPU jobs (gpu.cpu) only.")
        problem = worker_key_problem()
        if problem:  # the worker would refuse to start (registry/reruns/worker_startup.py)
            self.stderr.write(f"This worker will refuse to start: {problem}.")
        # One job at a time per GPU, one message reserved: a long job never holds a second one.
        self.stdout.write(
            f"celery -A kernelindex worker -Q {','.join(queues)} -c 1 --prefetch-multiplier 1 "
            f"-n {gpu}@%h -l info"
        )
