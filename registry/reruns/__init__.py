"""The controlled-run pipeline: rerun and measure jobs, from a moderator's request through a GPU
worker's harness run to the recorder's verdict.

A Django app of its own (label `reruns`, registry/reruns/apps.py): its models (`RerunJob`,
`MeasuredCeiling`), services (request, worker, record), tasks, the harness, the admin, API and
pages of jobs, and the controlled-run loader all live here.
"""
