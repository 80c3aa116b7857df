"""Visitors browsing KernelIndex: home, a kernel, a run, the comparison with its group's best, and
the read API. Run through bench/load.py, which starts the site as deployed and a rerun job beside
the load; or alone against any KernelIndex:

    locust -f bench/locustfile.py --headless -u 50 -r 10 -t 3m -H http://127.0.0.1:8000
"""

import random

from locust import HttpUser, between, task


class Visitor(HttpUser):
    wait_time = between(0.5, 2.0)

    def on_start(self):
        kernels = self.client.get("/api/v1/kernels/", name="/api/v1/kernels/").json()
        kernels = kernels["results"] if isinstance(kernels, dict) else kernels
        self.kernels = [k["slug"] for k in kernels] or ["geglu"]
        runs = self.client.get("/api/v1/runs/", name="/api/v1/runs/").json()
        self.run_count = max(runs.get("count", 1), 1)
        self.run_ids = [r["id"] for r in runs.get("results", [])] or [1]
        self.pages = max(-(-self.run_count // max(len(self.run_ids), 1)), 1)

    def run_id(self) -> int:
        # Ids run from 1 to the count in a freshly loaded registry; a few from the first page
        # keep it honest if they do not.
        return random.choice([random.randint(1, self.run_count), random.choice(self.run_ids)])

    @task(2)
    def home(self):
        self.client.get("/", name="/")

    @task(2)
    def kernel(self):
        self.client.get(f"/kernels/{random.choice(self.kernels)}/", name="/kernels/[slug]/")

    @task(4)
    def run_page(self):
        self.client.get(f"/runs/{self.run_id()}/", name="/runs/[id]/")

    @task(1)
    def compare_with_best(self):
        # Redirects to /compare/<a>/<b>/ with the group's best; a run alone in its comparison
        # group has none, and the 404 that says so is the right answer.
        with self.client.get(
            f"/runs/{self.run_id()}/compare/", name="/runs/[id]/compare/", catch_response=True
        ) as response:
            if response.status_code == 404 and b"alone in its comparison group" in response.content:
                response.success()

    @task(2)
    def api_runs(self):
        self.client.get(f"/api/v1/runs/?page={random.randint(1, self.pages)}", name="/api/v1/runs/?page=")

    @task(2)
    def api_run(self):
        self.client.get(f"/api/v1/runs/{self.run_id()}/", name="/api/v1/runs/[id]/")
