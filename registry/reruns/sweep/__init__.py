"""The controlled sweep: measure every mappable workload of the source data on this host's GPUs
through the real pipeline (measure jobs on Celery workers, one per GPU), rerun each result on
another card, and export what finished as data that `load_bundled_data` loads.

A rerun on the card that measured cannot make a run `reproduced` (models.raises_level), so a host
with one card leaves the runs it measured for the next host with another card, and spends its
time on new measurements and on the reruns other cards left (`same_card=True` reruns here anyway).
Last, when nothing else is left, it reruns the runs whose every rerun on another card came out
`inconclusive`, since another rerun may settle them (at most judgement.SETTLE_MAX such verdicts a run).

`python manage.py controlled_sweep --out DIR` (docs/reruns.md). Resumable: the runs already in
this database or in DIR (loaded first) are not measured again, so a sweep cut short by its
deadline goes on where it stopped when started again with the same DIR.

- targets.py: what a sweep works on (the targets, the runs measuring them, the reruns owed);
- workers.py: the Celery workers, one per GPU and a recorder, under the sweep's time limit;
- loop.py: `sweep()`, which plans, sends, collects, checkpoints and exports;
- timeouts.py: the targets a job ran past the time limit or out of memory on, kept for later sweeps;
- status.py: `progress()`, where a sweep stands, from the registry alone (`--status`);
- throughput.py: `throughput()`, jobs per hour with one worker and with all (`--throughput`).
"""
