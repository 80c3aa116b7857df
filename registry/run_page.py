"""The run page's read model: everything the run page and the run API show of one run, read once.

`run_page()` finds the run by id or digest (the page); `run_page_of()` starts from a run already
read (the API reads it through its own filters). Either builds one `RunPage` in three queries at
most past the run, whatever the size of its comparison group and the number of its jobs: its group
with the rows it replaced (selectors.run_relatives), every job of it (evidence.run_jobs: its
controlled evidence, its rerun history and what a reproduction needs all read them), and the
stored intervals of the group's other controlled runs, for their rank intervals (none when it has
none).

Nothing here draws: the view asks registry/sampleplot.py for the plot of `RunPage.plotted_jobs`.
"""

import datetime
import json
from dataclasses import dataclass
from functools import cached_property

from django.utils import timezone

from registry import citations, rank_status, selectors
from registry.evidence import JobEvidence, RunEvidence, number, run_evidence, run_jobs
from registry.models import BenchmarkRun


@dataclass
class RunPage:
    run: BenchmarkRun  # with its `standing` (registry/rank_status.py)
    members: list[BenchmarkRun]  # its comparison group, best first, each with its `standing`
    best: BenchmarkRun | None  # the run it is compared with: the compare link's and its standing's
    supersedes: list[BenchmarkRun]  # the rows it replaced, newest first
    jobs: list  # every job of the run (registry.reruns.models.RerunJob), newest first
    controlled: RunEvidence
    accessed: datetime.date  # the citations' access date

    @property
    def best_change(self) -> float | None:
        return selectors.change_percent(self.run.median, self.best.median) if self.best else None

    @property
    def plotted_jobs(self) -> list[JobEvidence]:
        """The jobs whose samples the page plots: the measurement, then the reruns, newest first."""
        measurement = self.controlled.measurement
        return ([measurement] if measurement else []) + self.controlled.reruns

    @property
    def plot_reference(self) -> float | None:
        """The plot's dashed line: for a run without a measurement (a source's), its recorded median."""
        return None if self.controlled.measurement else number(self.run.median)

    @property
    def permalink(self) -> str:
        return citations.permalink(self.run)

    @property
    def digest_permalink(self) -> str:
        return citations.digest_permalink(self.run)

    @cached_property
    def bibtex(self) -> str:
        return citations.bibtex(self.run, accessed=self.accessed)

    @cached_property
    def manifest_json(self) -> str:
        return json.dumps(self.run.manifest, indent=2, sort_keys=True, ensure_ascii=False)


def run_page(*, pk: int | None = None, digest: str | None = None) -> RunPage | None:
    """The public run with this id or digest, read for its page; None when there is none."""
    run = selectors.run_for_page(pk=pk, digest=digest)
    return run_page_of(run) if run is not None else None


def run_page_of(run: BenchmarkRun) -> RunPage:
    members, supersedes = selectors.run_relatives(run)
    jobs = run_jobs(run)
    controlled = run_evidence(run, jobs)
    best = selectors.group_best_other(members, run)
    job = controlled.measurement.job if controlled.measurement else None
    known = {run.pk: (job.judged_ci_low, job.judged_ci_high)} if job and job.judged_ci_low is not None else {}
    rank_status.attach_group(run, members, best, known=known)
    return RunPage(
        run=run,
        members=members,
        best=best,
        supersedes=supersedes,
        jobs=jobs,
        controlled=controlled,
        accessed=timezone.now().date(),
    )
