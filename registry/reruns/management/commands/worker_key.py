"""GPU worker keys (docs/deploy.md, "GPU workers"): one Ed25519 key per worker, registered by an
operator for one GPU model and its cards, revocable, rotated under a new name."""

import os
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from registry.reruns.services import signing


class Command(BaseCommand):
    help = "Make (on the GPU host), register, revoke and list GPU worker keys; print the job-verify key."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True)
        generate = actions.add_parser(
            "generate", help="On the GPU host: write a new private key, print its public key."
        )
        generate.add_argument(
            "--out", required=True, help="The key file (written mode 0600; must not exist)."
        )
        register = actions.add_parser("register", help="Register a worker's public key.")
        register.add_argument("name", help="The worker's name (WORKER_NAME on its host), e.g. h200-a-1.")
        register.add_argument("--gpu", required=True, help="The GPU model slug it serves, e.g. nvidia-h200.")
        register.add_argument("--public-key", required=True, help="What `worker_key generate` printed.")
        register.add_argument(
            "--card", action="append", default=[], help="An NVML UUID it may report (repeat)."
        )
        register.add_argument("--note", default="")
        revoke = actions.add_parser("revoke", help="Revoke a key: nothing it signs is taken from now on.")
        revoke.add_argument("name")
        actions.add_parser("list", help="Every key, revoked ones included.")
        actions.add_parser("job-key", help="Print JOB_VERIFY_KEY for the GPU workers' env files.")

    def handle(self, *args, action, **options):
        getattr(self, action.replace("-", "_"))(**options)

    def generate(self, *, out, **options):
        path = Path(out)
        if path.exists():
            raise CommandError(f"{path} exists: a key is never overwritten (rotate under a new file)")
        pem, public = signing.private_key_generate()
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(pem)
        self.stdout.write(public)

    def register(self, *, name, gpu, public_key, card, note, **options):
        from registry.reruns.services import worker_key_register

        try:
            key = worker_key_register(name=name, gpu_slug=gpu, public_key=public_key, cards=card, note=note)
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from exc
        self.stdout.write(
            f"registered {key.name} for gpu.{key.gpu_slug}, cards: {', '.join(key.cards) or 'none'}"
        )

    def revoke(self, *, name, **options):
        from registry.reruns.services import worker_key_revoke

        if not worker_key_revoke(name=name):
            raise CommandError(f"no unrevoked worker key named {name}")
        self.stdout.write(f"revoked {name}")

    def list(self, **options):
        from registry.reruns.models import WorkerKey

        for key in WorkerKey.objects.order_by("gpu_slug", "name"):
            state = f"revoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "active"
            self.stdout.write(
                f"{key.name}\t{key.gpu_slug}\t{state}\t{key.public_key}\t{','.join(key.cards) or '-'}"
            )

    def job_key(self, **options):
        self.stdout.write(signing.job_verify_key_text())
