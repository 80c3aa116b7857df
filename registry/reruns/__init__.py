"""The controlled-run pipeline: rerun and measure jobs, from a moderator's request through a GPU
worker's harness run to the recorder's verdict.

services (request, worker, record), tasks, the harness, the admin, API and pages of jobs, and the
controlled-run loader all live here; the models (`RerunJob`) stay in `registry.models`.
"""
