import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")

app = Celery("kernelindex")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# A GPU worker without a usable worker key refuses to start (registry/reruns/worker_startup.py).
app.steps["worker"].add("registry.reruns.worker_startup.WorkerKeyCheck")
