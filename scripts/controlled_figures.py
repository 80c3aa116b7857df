#!/usr/bin/env python3
"""The figures docs/reports/2026-12-04-h200-controlled-runs.md gives for the shipped controlled runs, read from the files themselves
(numpy and scipy): coverage, verdicts, rerun-to-rerun differences, the offset between each pair
of cards, sampling and where the host's seconds went.

    .venv/bin/python scripts/controlled_figures.py [registry/data/controlled-runs] [--since 2026-12-01T10:00]
    .venv/bin/python scripts/controlled_figures.py --verdicts [--write-model registry/data/verdict-model-nvidia-h200.json]
    .venv/bin/python scripts/controlled_figures.py --gpu-model nvidia-h100-80gb-hbm3 [--write-model]

`--verdicts`: the verdict model's figures (registry/stats/; docs/protocol.md, "Verdicts by class"):
each class's between-process component and margin, and every "Done when" figure of issue 35 on
the shipped reruns judged again under it. `--write-model`: also write the model's parameters, which
the recorder and `rejudge_reruns` judge by. `--gpu-model`: the same for a GPU model that only
KernelBench's sweeps measured on (the H100s), fitted on those sweeps' reruns.

`--since`: the host seconds of the measure jobs started from then on, and of those before, as well
(the harness has run upstream's setup on the GPU since 2026-12-01T10:00 UTC; docs/protocol.md).
"""

import argparse
import dataclasses
import gzip
import importlib.util
import json
import math
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # registry.stats needs no Django
from registry.stats import shipped, verdict_model  # noqa: E402

# A pair of cards is reported with at least this many latency reruns between them in a band.
PAIR_MIN = 10
# Bands of a run's median (ms), largest first: the first whose bound the median reaches.
BANDS = (("10 ms or more", 10), ("1-10 ms", 1), ("0.1-1 ms", 0.1), ("25-100 us", 0.025), ("under 25 us", 0))
# A slow job: longer than SLOW_S and SLOW_TIMES times its kernel and metric's median job.
SLOW_S, SLOW_TIMES = 8, 3
FOLDER = ROOT / "registry" / "data" / "controlled-runs"
# Another reading of the cap, tried against the model's: a limit named and the SM clock then below
# 1,950 MHz, 98.5% of the H200's top clock (1,980 MHz, the reading of nearly every shipped job
# without a limit named): the cap slowing the card.
SLOWED_BELOW_MHZ = 1950


def _load_timing():
    """registry/reruns/harness/timing.py, loaded on its own (it needs no Django): the rule for a
    host-paced median lives there, and only there."""
    spec = importlib.util.spec_from_file_location(
        "_harness_timing", ROOT / "registry/reruns/harness/timing.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


timing = _load_timing()


def main(folder: Path, since: str = "") -> None:
    verdicts, legacy, stops, levels, bands = Counter(), Counter(), Counter(), Counter(), Counter()
    paced = Counter()  # (host-paced measurement or rerun?, verdict) of latency reruns on another card
    pace_read = Counter()  # latency jobs that read the host's pace: all, any call host-paced, half or more
    kernels, workloads, cards, differences, samples, seconds = set(), set(), set(), [], [], []
    runs = other_card = 0
    recent, earlier = [], []
    by_card = {True: [], False: [], None: []}
    durations = []  # (kernel, metric, seconds from a job's start to its finish)
    pairs = {}  # (first card, second card, small) -> signed differences, second against first
    apart = []  # (|difference| of medians, verdict) of the latency reruns on another card
    checked = Counter()  # kernel -> its runs with a judged rerun on another card
    for path in sorted(folder.glob("*.json.gz")):
        for entry in json.loads(gzip.decompress(path.read_bytes()))["runs"]:
            run, jobs = entry["run"], entry["jobs"]
            # Runs of the older protocol carry no sampling record on their measure job.
            old = any(job["kind"] == "measure" and not job.get("sampling") for job in jobs)
            if not old:
                runs += 1
                levels[run["evidence_level"]] += 1
                kernels.add(entry["kernel"]["slug"])
                # The sweep's target: kernel, workload, provider, pass and metric.
                workloads.add(
                    (entry["kernel"]["slug"], entry["workload"]["slug"], entry["implementation"]["provider"])
                    + (run["operation_mode"], run["metric"])
                )
                cards.update(job["gpu_uuid"] for job in jobs if job.get("gpu_uuid"))
                checked[entry["kernel"]["slug"]] += any(
                    job["kind"] == "rerun"
                    and job.get("verdict")
                    and (job.get("sampling") or {}).get("same_gpu") is False
                    for job in jobs
                )
            measure = next((job for job in jobs if job["kind"] == "measure"), {})
            host_paced = _host_paced(measure)
            for job in jobs:
                if took := _duration(job):
                    durations.append((entry["kernel"]["slug"], run["metric"], took))
                sampling = job.get("sampling") or {}
                if job["kind"] == "measure" and not old:
                    split = [
                        sampling.get(k, 0)
                        for k in ("process_start_s", "setup_s", "upstream_s", "warmup_s", "timing_s")
                    ]
                    seconds.append(split)
                    if since:
                        started = job["dates"].get("started_at") or ""
                        (recent if started >= since else earlier).append(split)
                    if run["metric"] == "latency":
                        stops[sampling.get("stop")] += 1
                        samples.append(len(job["samples"]))
                if run["metric"] == "latency" and isinstance(sampling.get("host_paced_samples"), int):
                    pace_read["all"] += 1
                    pace_read["any"] += sampling["host_paced_samples"] > 0
                    pace_read["half"] += _host_paced(job)
                if job["kind"] != "rerun" or not job.get("verdict"):
                    continue
                if old:
                    legacy[(run["metric"], job["verdict"])] += 1
                    continue
                verdicts[(run["metric"], job["verdict"])] += 1
                other_card += sampling.get("same_gpu") is False
                by_card[sampling.get("same_gpu")].append(job["verdict"] == "agrees")
                if run["metric"] == "latency":
                    differences.append((abs(job["deviation"]), run["median"], sampling.get("same_gpu")))
                    if sampling.get("same_gpu") is False:
                        apart.append((abs(job["deviation"]), job["verdict"]))
                        _pair_difference(pairs, jobs, job, run["median"])
                        paced[(host_paced or _host_paced(job), job["verdict"])] += 1
                    band = next(label for label, low in BANDS if run["median"] >= low)
                    bands[(sampling.get("same_gpu"), band, job["verdict"])] += 1
    total = sum(verdicts.values())
    agree = sum(n for (_, verdict), n in verdicts.items() if verdict == "agrees")
    print(
        f"runs under KernelIndex's protocols: {runs}, kernels: {len(kernels)}, distinct workloads: "
        f"{len(workloads)}, physical cards: {len(cards)}"
    )
    print(
        f"reruns with a verdict: {total} ({other_card} on the other card); agree: {agree} ({agree / total:.0%})"
    )
    for same, label in ((False, "another card"), (True, "the same card")):
        if by_card[same]:
            print(f"  on {label}: {sum(by_card[same])} of {len(by_card[same])} agree")
    print(f"runs by evidence level: {dict(sorted(levels.items()))}")
    print(f"runs with a verdict on another card: {sum(checked.values())}; reproduced: {levels['reproduced']}")
    fewest = min(sorted(kernels), key=lambda kernel: checked[kernel])
    print(
        f"kernels with a run rerun on another card: {sum(checked[k] > 0 for k in kernels)} of {len(kernels)} "
        f"(fewest such runs: {fewest}, {checked[fewest]})"
    )
    for key, count in sorted(verdicts.items()):
        print(f"  {key[0]:8} {key[1]:13} {count}")
    print(
        "latency verdicts by the run's median, on another card (on the same card): agree / disagree / inconclusive"
    )
    for label, _ in reversed(BANDS):
        counts = [
            "{} ({})".format(*(bands[(same, label, verdict)] for same in (False, True)))
            for verdict in ("agrees", "disagrees", "inconclusive")
        ]
        print(f"  {label:14} " + " / ".join(counts))
    for label, keep in (("1 ms or more", lambda m: m >= 1), ("under 1 ms", lambda m: m < 1)):
        for same, where in ((None, ""), (True, ", on the same card"), (False, ", on another card")):
            values = np.array(
                [d for d, median, on in differences if keep(median) and (same is None or on is same)]
            )
            if values.size:
                print(
                    f"|difference| of medians, speed workloads {label}{where}: n={values.size}, "
                    f"median {np.median(values):.2%}, 95th percentile {np.quantile(values, 0.95):.2%}, "
                    f"within 1%: {(values <= 0.01).mean():.0%}"
                )
    gaps = np.array([gap for gap, _ in apart])
    within = ", ".join(f"{limit:.0%} {np.mean(gaps <= limit):.0%}" for limit in (0.01, 0.02, 0.05))
    print(f"latency reruns on another card, |difference| of medians within: {within} (n={gaps.size})")
    unsettled = np.array([gap for gap, verdict in apart if verdict == "inconclusive"])
    print(
        f"  of them inconclusive: {unsettled.size}, median |difference| {np.median(unsettled):.1%}, "
        f"inside the 2% tolerance {np.mean(unsettled < 0.02):.0%}"
    )
    print(
        f"latency jobs that read the host's pace: {pace_read['all']}; with a host-paced call: "
        f"{pace_read['any']}; with half their calls or more host-paced: {pace_read['half']}"
    )
    for flag, label in ((True, "host-paced or spin at its cap"), (False, "the others")):
        counts = " / ".join(
            str(paced[(flag, verdict)]) for verdict in ("agrees", "disagrees", "inconclusive")
        )
        print(
            f"latency reruns on another card, measurement or rerun {label}: agree / disagree / inconclusive {counts}"
        )
    _print_pairs(pairs)
    print(f"latency sampling stopped on: {dict(stops)}; median samples {np.median(samples):.0f}")
    for label, rows in (
        ("", seconds),
        (f" started from {since}", recent),
        (f" started before {since}", earlier),
    ):
        if rows:
            split = np.array(rows).sum(axis=0)
            print(
                "host seconds over {} measure jobs{}: process start {:.0f}, setup {:.0f}, upstream call {:.0f}, "
                "warm-up {:.0f}, timing {:.0f}; overhead / timing {:.0%}".format(
                    len(rows), label, *split, (split[0] + split[1] + split[3]) / split[4]
                )
            )
    _print_slow_jobs(durations)
    print(f"older-protocol runs, rerun under their own protocol: {dict(legacy)}")


def _host_paced(job: dict) -> bool:
    """A job half of whose calls or more took the host longer to queue than the spin ahead of
    them lasted, so that its median includes the host's pace (timing.median_host_paced), or,
    recorded before the harness read that, whose spin reached its cap."""
    sampling = job.get("sampling") or {}
    if isinstance(sampling.get("host_paced_samples"), int):
        return timing.median_host_paced(sampling["host_paced_samples"], len(job.get("samples") or []))
    # A spin at its cap (20 ms at 2 GHz) may not have covered the host's pace.
    return (sampling.get("lead_cycles") or 0) >= timing.LEAD_CAP_CYCLES


def _duration(job: dict) -> float | None:
    """Seconds from a finished job's start to its finish."""
    dates = job.get("dates") or {}
    if job["state"] not in ("succeeded", "diverged") or not (
        dates.get("started_at") and dates.get("finished_at")
    ):
        return None
    took = datetime.fromisoformat(dates["finished_at"]) - datetime.fromisoformat(dates["started_at"])
    return took.total_seconds()


def _print_slow_jobs(durations: list) -> None:
    """Seconds that slow jobs spent above their kernel and metric's median job (a cold host's
    first jobs of a kernel compile its Triton kernels into an empty cache): jobs over SLOW_S and
    SLOW_TIMES that median."""
    by_kind = {}
    for kernel, metric, took in durations:
        by_kind.setdefault((kernel, metric), []).append(took)
    middle = {kind: np.median(values) for kind, values in by_kind.items()}
    excess = Counter()
    for kernel, metric, took in durations:
        typical = middle[(kernel, metric)]
        if took > max(SLOW_S, SLOW_TIMES * typical):
            excess[kernel] += took - typical
    top = ", ".join(f"{kernel} {seconds:.0f}" for kernel, seconds in excess.most_common(3))
    print(
        f"job seconds, start to finish, over {len(durations)} jobs: {sum(d for *_, d in durations):.0f}; "
        f"above their kernel's median in jobs over {SLOW_S} s and {SLOW_TIMES}x it: {sum(excess.values()):.0f} ({top})"
    )


def _pair_difference(pairs: dict, jobs: list, rerun: dict, median: float) -> None:
    """File a cross-card rerun's difference under its two cards in a fixed order (the second's
    time against the first's: the sign turned round when the rerun ran on the first)."""
    measured_on = next((j.get("gpu_uuid") for j in jobs if j["kind"] == "measure"), "")
    cards = (measured_on or "", rerun.get("gpu_uuid") or "")
    if not all(cards) or 0.1 <= median < 1:
        return
    first, second = sorted(cards)
    sign = 1 if cards == (first, second) else -1
    pairs.setdefault((first, second, median < 0.1), []).append(sign * rerun["deviation"])


def _print_pairs(pairs: dict) -> None:
    """Each pair of cards with PAIR_MIN reruns or more in a band: the median of the second's time
    against the first's, with its distribution-free 95% interval (scipy's quantile_test), and how
    many reruns went the median's way. An interval clear of zero is an offset between the cards
    (or their hosts), not noise of single jobs."""
    for small, label in ((True, "under 0.1 ms"), (False, "1 ms or more")):
        rows = [(key, values) for key, values in sorted(pairs.items()) if key[2] is small]
        rows = [(key, np.array(values)) for key, values in rows if len(values) >= PAIR_MIN]
        if not rows:
            continue
        print(f"offset between two cards, latency workloads {label} (the second card against the first):")
        for (first, second, _), values in rows:
            middle = np.median(values)
            interval = stats.quantile_test(values, q=0, p=0.5).confidence_interval(0.95)
            same_way = np.mean(np.sign(values) == np.sign(middle))
            print(
                f"  {first[:12]} / {second[:12]}: n={values.size}, median {middle:+.2%}, 95% interval "
                f"{interval.low:+.2%} to {interval.high:+.2%}, {same_way:.0%} of reruns that way"
            )


GPU, GPU_NAME = "nvidia-h200", "H200"
MODEL_PATH = ROOT / "registry" / "data" / f"verdict-model-{GPU}.json"


def verdict_figures(folder: Path, write_model: Path | None = None) -> dict:
    """Fit the verdict model on the shipped reruns and print every "Done when" figure of the
    verdicts; returns them by name (tests/stats/test_protocol_figures.py reads this)."""
    rows = shipped.reruns(folder)
    pairs = [row.pair for row in rows]
    model = verdict_model.fit(pairs, gpu=GPU, gpu_name=GPU_NAME)
    if write_model:
        write_model.write_text(json.dumps(model.to_json(), indent=1, ensure_ascii=False) + "\n")
        print(
            f"model written: {write_model.relative_to(ROOT) if write_model.is_relative_to(ROOT) else write_model}"
        )
    figures = {}
    print("classes: between-process SD (fitted on) | margin (measured on)")
    for key, params in sorted(model.classes.items()):
        print(
            f"  {key:45} {params.process_sd:.2%} ({params.process_from}) | ±{params.margin:.1%} "
            f"({params.margin_from})"
        )
        figures[f"margin {key}"] = params.margin
        figures[f"process sd {key}"] = params.process_sd
    gpu_timed = [row for row in rows if verdict_model.is_gpu_timed(row.pair.key)]
    cross = [row.pair for row in gpu_timed if not row.pair.same_card]
    counts = Counter(verdict_model.verdicts(model, cross))
    figures["cross n"] = len(cross)
    figures["cross agree"] = counts["agrees"] / len(cross)
    figures["cross disagree"] = counts["disagrees"] / len(cross)
    print(
        f"GPU-timed latency reruns on another card: {len(cross)}; agree {counts['agrees']} "
        f"({figures['cross agree']:.1%}), disagree {counts['disagrees']} ({figures['cross disagree']:.1%}), "
        f"inconclusive {counts['inconclusive']}"
    )
    every_cross = [row.pair for row in rows if not row.pair.same_card]
    by_class = Counter(
        zip((p.key for p in every_cross), verdict_model.verdicts(model, every_cross), strict=True)
    )
    for key in sorted(model.classes):
        row = [by_class[(key, v)] for v in ("agrees", "disagrees", "inconclusive")]
        figures[f"class {key}"] = tuple(row)
        if sum(row):
            print(f"  {key:45} agree / disagree / inconclusive {row[0]} / {row[1]} / {row[2]}")
    first = [row.pair for row in shipped.first_reruns(gpu_timed)]
    first_counts = Counter(verdict_model.verdicts(model, first))
    figures["first agree"] = first_counts["agrees"] / len(first)
    figures["first n"] = len(first)
    print(
        f"  the first rerun on another card of each run: {first_counts['agrees']} of {len(first)} agree "
        f"({figures['first agree']:.1%}), {first_counts['disagrees']} disagree"
    )
    loko = Counter(
        verdict_model.leave_one_kernel_out(
            pairs, gpu=GPU, select=lambda p: not p.same_card and verdict_model.is_gpu_timed(p.key)
        )
    )
    figures["loko agree"] = loko["agrees"] / sum(loko.values())
    print(
        f"leave one kernel out (each kernel judged by a model fitted on the others): {loko['agrees']} of "
        f"{sum(loko.values())} agree ({figures['loko agree']:.1%}), {loko['disagrees']} disagree"
    )
    same = [row.pair for row in gpu_timed if row.pair.same_card]
    figures["same n"] = len(same)
    figures["coverage"] = verdict_model.coverage(model, same)
    figures["coverage loko"] = verdict_model.leave_one_kernel_out_coverage(
        pairs, gpu=GPU, select=lambda p: verdict_model.is_gpu_timed(p.key)
    )
    figures["coverage within"] = verdict_model.coverage(verdict_model.without_process_component(model), same)
    print(
        f"same-card coverage: of {len(same)} GPU-timed same-card reruns, {figures['coverage']:.1%} have their "
        f"median inside the measurement's 95% interval for a rerun; {figures['coverage loko']:.1%} with each "
        f"kernel's component fitted on the other kernels; {figures['coverage within']:.1%} with the within-job "
        "variance alone"
    )
    long_enough = _shift_test(figures, model, cross, "GPU-timed, 0.1 ms or more, {} reruns on another card")
    _misses(figures, model, cross, long_enough)
    _disagreements(figures, model, [row for row in gpu_timed if not row.pair.same_card])
    _cap_by_clock(figures, folder)
    _host_kinds(figures, model, rows, cross)
    bound = [row for row in rows if row.host_bound]
    figures["host-bound reruns"] = len(bound)
    print(
        f"reruns whose figure includes the host's pace, judged apart and never counted above: {len(bound)} "
        f"({sum(not r.pair.same_card for r in bound)} on another card)"
    )
    for name, select in (("paced by the host", verdict_model.is_paced), ("waiting on the host", _waits)):
        chosen = [row.pair for row in bound if not row.pair.same_card and select(row.pair.key)]
        counted = Counter(verdict_model.verdicts(model, chosen))
        figures[f"{name} cross n"] = len(chosen)
        figures[f"{name} cross agree"] = counted["agrees"] / len(chosen) if chosen else math.nan
        print(
            f"  {name}, on another card: {len(chosen)}; agree {counted['agrees']}, disagree "
            f"{counted['disagrees']}, inconclusive {counted['inconclusive']}"
        )
    figures.update(_reproduced_figures(folder, model))
    figures["model"] = model
    return figures


# GPU models only KernelBench's runs were measured on: their verdict models are fitted on
# KernelBench's shipped sweep files (registry/sources/kernelbench/pairs.py), each on its own cards.
KERNELBENCH_GPUS = ("nvidia-h100-80gb-hbm3",)


def kernelbench_model_figures(gpu: str, write_model: Path | None = None) -> dict:
    """Fit the verdict model of a GPU model that only KernelBench's sweeps measured on, on those
    sweeps' reruns, and print its classes and checks: agreement of GPU-timed reruns on another
    card, leave one kernel out, the shift test. `write_model`: also write its parameters."""
    from registry.sources.kernelbench import (
        pairs as kernelbench_pairs,  # the importer's names: Django's slugify
    )

    rows = kernelbench_pairs.pairs(gpu)
    model = verdict_model.fit(rows, gpu=gpu, gpu_name=kernelbench_pairs.gpu_name(gpu))
    if write_model:
        write_model.write_text(json.dumps(model.to_json(), indent=1, ensure_ascii=False) + "\n")
        print(
            f"model written: {write_model.relative_to(ROOT) if write_model.is_relative_to(ROOT) else write_model}"
        )
    figures = {"model": model, "reruns": len(rows), "same card": sum(p.same_card for p in rows)}
    print(f"{gpu}: {len(rows)} reruns of KernelBench's sweeps, {figures['same card']} on the measuring card")
    for key, params in sorted(model.classes.items()):
        print(
            f"  {key:45} {params.process_sd:.2%} ({params.process_from}) | ±{params.margin:.1%} ({params.margin_from})"
        )

    def gpu_timed_cross(pair) -> bool:
        return not pair.same_card and verdict_model.is_gpu_timed(pair.key)

    cross = [p for p in rows if gpu_timed_cross(p)]
    counts = Counter(verdict_model.verdicts(model, cross))
    loko = Counter(verdict_model.leave_one_kernel_out(rows, gpu=gpu, select=gpu_timed_cross))
    figures.update(
        {
            "cross n": len(cross),
            "cross agree": counts["agrees"] / len(cross),
            "cross disagree": counts["disagrees"] / len(cross),
            "loko agree": loko["agrees"] / sum(loko.values()),
            "host-bound cross n": sum(
                not p.same_card and not verdict_model.is_gpu_timed(p.key) for p in rows
            ),
        }
    )
    print(
        f"GPU-timed latency reruns on another card: {len(cross)}; agree {figures['cross agree']:.1%}, disagree "
        f"{figures['cross disagree']:.1%}; leave one kernel out {figures['loko agree']:.1%} agree; "
        f"judged apart (the host's pace in the figure, or two compiled programs): {figures['host-bound cross n']}"
    )
    figures["shift n"] = len(_shift_test(figures, model, cross, "{} reruns of 0.1 ms or more"))
    return figures


def _shift_test(figures: dict, model, cross: list, what: str) -> list:
    """The shift test on the GPU-timed reruns on another card of 0.1 ms or more, their samples
    scaled by each of verdict_model.SHIFTS: the share that agree and that disagree, into `figures`
    and printed (`what`: their description, with a place for their count). Returns those reruns."""
    long_enough = [p for p in cross if p.old.median >= 0.1]
    for shift in verdict_model.SHIFTS:
        shifted = Counter(verdict_model.verdicts(model, long_enough, shift=shift))
        figures[f"shift {shift:.0%} agree"] = shifted["agrees"] / len(long_enough)
        figures[f"shift {shift:.0%} disagree"] = shifted["disagrees"] / len(long_enough)
        print(
            f"shift test +{shift:.0%} ({what.format(len(long_enough))}): agree "
            f"{figures[f'shift {shift:.0%} agree']:.1%}, disagree {figures[f'shift {shift:.0%} disagree']:.1%}"
        )
    return long_enough


def _misses(figures: dict, model, cross: list, long_enough: list) -> None:
    """Where the agreement and the shift test fall short: at the power cap, and with a 90%
    interval instead of the 95% one (docs/protocol.md's paragraph under the table)."""
    capped = [p for p in cross if "at the power cap" in p.key]
    verdicts = verdict_model.verdicts(model, cross)
    shifted = verdict_model.verdicts(model, long_enough, shift=0.05)
    figures["inconclusive"] = verdicts.count("inconclusive")
    figures["inconclusive at the cap"] = sum(
        v == "inconclusive" and "at the power cap" in p.key for p, v in zip(cross, verdicts, strict=True)
    )
    figures["inconclusive under 0.1 ms"] = sum(
        v == "inconclusive" and p.old.median < 0.1 for p, v in zip(cross, verdicts, strict=True)
    )
    figures["shift 5% agrees"] = shifted.count("agrees")
    figures["shift 5% agrees at the cap"] = sum(
        v == "agrees" and "at the power cap" in p.key for p, v in zip(long_enough, shifted, strict=True)
    )
    figures["repeat reruns"] = len(cross) - figures.get("first n", 0)
    before = _rule_before(model)
    figures["before agree"], figures["before shift 5% agree"] = _agree_and_shifted(before, cross, long_enough)
    figures["before disagree"] = verdict_model.verdicts(before, cross).count("disagrees") / len(cross)
    print(
        f"at the power cap: {len(capped)} reruns, {figures['inconclusive at the cap']} of the "
        f"{figures['inconclusive']} inconclusive ({figures['inconclusive under 0.1 ms']} under 0.1 ms), "
        f"{figures['shift 5% agrees at the cap']} of the {figures['shift 5% agrees']} that agree shifted by +5%; "
        f"{figures['repeat reruns']} repeat reruns; under the rule before 2026-12-07 (a 95% interval, "
        f"disagreeing beyond the margin itself) {figures['before agree']:.1%} agree, "
        f"{figures['before disagree']:.1%} disagree, {figures['before shift 5% agree']:.1%} shifted by +5%"
    )


def _rule_before(model):
    """The model as it judged until 2026-12-07: a 95% interval, and `disagrees` wholly beyond the
    margin itself rather than beyond the top of the margin's interval."""
    classes = {
        key: dataclasses.replace(params, margin_interval=(math.nan, math.nan))
        for key, params in model.classes.items()
    }
    return dataclasses.replace(model, classes=classes, verdict_confidence=model.confidence)


FEW_SAMPLES = 50


def _disagreements(figures: dict, model, rows: list) -> None:
    """Where the GPU-timed reruns on another card that disagree are: the jobs' sampling (one
    process or independent blocks, how many samples), the sessions of a pair of cards (the two
    cards and the rerun's hour) and the kernels that hold the most of them."""
    verdicts = verdict_model.verdicts(model, [row.pair for row in rows])
    out = [row for row, verdict in zip(rows, verdicts, strict=True) if verdict == "disagrees"]
    figures["disagree one process"] = sum(not (r.pair.old.independent or r.pair.new.independent) for r in out)
    figures["disagree few samples"] = sum(min(r.samples) <= FEW_SAMPLES for r in out)

    def session(row) -> tuple:
        return (row.pair.cards[0][:8], row.pair.cards[1][:8], row.started_at[:13])

    for name, key in (("sessions", session), ("kernels", lambda row: row.pair.kernel)):
        every, missed = Counter(map(key, rows)), Counter(map(key, out))
        top = sorted(missed, key=lambda k: (-missed[k], k))[:3]
        figures[f"disagree {name}"] = [(k, missed[k], every[k]) for k in top]
    words = "; ".join(
        f"{a}→{b} {hour.replace('T', ' ')}h: {n} of {total}"
        for (a, b, hour), n, total in figures["disagree sessions"]
    )
    print(
        f"the {len(out)} that disagree: {figures['disagree one process']} between jobs of one process (no "
        f"independent blocks), {figures['disagree few samples']} with {FEW_SAMPLES} samples or fewer on a side; "
        f"by session of a pair of cards {words}; by kernel "
        + "; ".join(f"{k}: {n} of {total}" for k, n, total in figures["disagree kernels"])
    )


def _agree_and_shifted(model, cross: list, long_enough: list) -> tuple[float, float]:
    """The share of `cross` that agrees under `model`, and of `long_enough` shifted by +5%."""
    agree = verdict_model.verdicts(model, cross).count("agrees") / len(cross)
    shifted = verdict_model.verdicts(model, long_enough, shift=0.05).count("agrees") / len(long_enough)
    return agree, shifted


def _capped_and_slowed(state: dict) -> bool:
    after = (state if isinstance(state, dict) else {}).get("after") or {}
    return verdict_model.power_capped(state) and (after.get("sm_clock_mhz") or 0) < SLOWED_BELOW_MHZ


def _cap_by_clock(figures: dict, folder: Path) -> None:
    """The model refitted with a pair at the cap only where a limit named after the timing came
    with a clock below SLOWED_BELOW_MHZ: the readings that name a limit at the top clock set
    apart (docs/protocol.md's paragraph under the table)."""
    readings = [
        (job.get("gpu_state") or {}).get("after") or {}
        for entry in shipped.entries(folder)
        if entry["protocol"]["comparability_family"] == shipped.LATENCY_FAMILY
        for job in entry["jobs"]
    ]
    named = [r for r in readings if verdict_model.POWER_LIMITS & set(r.get("reasons") or [])]
    figures["cap named"] = len(named)
    figures["cap named at the top clock"] = sum(
        (r.get("sm_clock_mhz") or 0) >= SLOWED_BELOW_MHZ for r in named
    )
    every = shipped.reruns(folder, capped=_capped_and_slowed)
    model = verdict_model.fit([row.pair for row in every], gpu=GPU, gpu_name=GPU_NAME)
    cross = [row.pair for row in every if verdict_model.is_gpu_timed(row.pair.key) and not row.pair.same_card]
    long_enough = [p for p in cross if p.old.median >= 0.1]
    figures["slowed agree"], figures["slowed shift 5% agree"] = _agree_and_shifted(model, cross, long_enough)
    print(
        f"the cap read as slowing the card (a limit named below {SLOWED_BELOW_MHZ:,} MHz): "
        f"{figures['cap named at the top clock']} of the {figures['cap named']} readings that name a limit "
        f"are at the top clock; {figures['slowed agree']:.1%} agree, "
        f"{figures['slowed shift 5% agree']:.1%} agree shifted by +5%"
    )


def _waits(key: str) -> bool:
    return key.split("|")[1] == verdict_model.HOST_WAITS_CLASS


def _host_kinds(figures: dict, model, rows: list, cross: list) -> None:
    """The reruns timed on another kind of host than their measurement (verdict_model.hosts_differ),
    judged apart: how they fare, and the GPU agreement had they been counted in it."""
    apart = [
        row.pair
        for row in rows
        if not row.pair.same_card and row.pair.key.split("|")[1] == verdict_model.HOST_KINDS_CLASS
    ]
    counted = Counter(verdict_model.verdicts(model, apart))
    both = Counter(verdict_model.verdicts(model, cross + apart))
    figures["host kinds cross n"] = len(apart)
    figures["host kinds cross agree"] = counted["agrees"] / len(apart) if apart else math.nan
    figures["with host kinds agree"] = both["agrees"] / (len(cross) + len(apart))
    figures["with host kinds disagree"] = both["disagrees"] / (len(cross) + len(apart))
    # How far apart pairs of cards put a workload's median, by the kinds of host of the two jobs.
    by_hosts = {}
    for row in rows:
        if not row.pair.same_card and not verdict_model.is_paced(row.pair.key) and not _waits(row.pair.key):
            by_hosts.setdefault(row.hosts, []).append(math.expm1(row.pair.log_ratio))
    for hosts, differences in sorted(by_hosts.items()):
        spread = float(np.quantile(np.abs(differences), verdict_model.MARGIN_QUANTILE))
        faster = sum(d < 0 for d in differences)
        figures[f"hosts {' / '.join(hosts)}"] = (len(differences), spread, faster)
        print(
            f"  measured on {hosts[0] or 'an unrecorded host'}, rerun on {hosts[1] or 'an unrecorded host'}: "
            f"{len(differences)} pairs, {spread:.1%} apart at the 95th percentile, the rerun faster in {faster}"
        )
    print(
        f"timed on two kinds of host, on another card (judged apart, never counted above): {len(apart)}; agree "
        f"{counted['agrees']}, disagree {counted['disagrees']}, inconclusive {counted['inconclusive']}; counted "
        f"with the GPU-timed ones: {figures['with host kinds agree']:.1%} agree, "
        f"{figures['with host kinds disagree']:.1%} disagree of {len(cross) + len(apart)}"
    )


def _reproduced_figures(folder: Path, model) -> dict:
    """Current cuda-v1 latency runs and how many are `reproduced` under the model: a rerun on
    another card agrees, judged in its class. A run the host paces cannot be (its figure is the
    host's pace); one whose pass waits on the host once a call can, in a class of its own."""
    verdicts_by_run, paced_runs, waits_runs, runs = {}, set(), set(), set()
    for entry in shipped.entries(folder):
        run = entry["run"]
        if entry["protocol"]["comparability_family"] != shipped.LATENCY_FAMILY or run["metric"] != "latency":
            continue
        if run.get("withdrawn"):
            continue
        measure = next((job for job in entry["jobs"] if job["kind"] == "measure"), None)
        if measure is None:
            continue
        runs.add(run["external_id"])
        key = shipped.job_class(entry, measure, None)[0]
        if verdict_model.is_paced(key):
            paced_runs.add(run["external_id"])
        elif not verdict_model.is_gpu_timed(key):
            waits_runs.add(run["external_id"])
    for row in shipped.reruns(folder):
        if row.pair.same_card or verdict_model.is_paced(row.pair.key):
            continue
        verdicts_by_run.setdefault(row.run, []).append(verdict_model.verdicts(model, [row.pair])[0])
    reproduced = {run for run, verdicts in verdicts_by_run.items() if "agrees" in verdicts} - paced_runs
    gpu_runs = runs - paced_runs - waits_runs
    figures = {
        "reproduced runs": len(reproduced & runs),
        "reproduced share": len(reproduced & runs) / len(runs),
        "reproduced gpu share": len(reproduced & gpu_runs) / len(gpu_runs),
        "reproduced waits share": len(reproduced & waits_runs) / len(waits_runs) if waits_runs else math.nan,
    }
    print(
        f"current kernelindex/cuda-v1 latency runs: {len(runs)}; reproduced {len(reproduced & runs)} "
        f"({figures['reproduced share']:.1%}); of the {len(gpu_runs)} GPU-timed ones {len(reproduced & gpu_runs)} "
        f"({figures['reproduced gpu share']:.1%}); of the {len(waits_runs)} whose pass waits on the host "
        f"{len(reproduced & waits_runs)}; runs the host paces (never reproduced): {len(paced_runs)}"
    )
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, default=FOLDER, help="default: the shipped runs")
    parser.add_argument(
        "--since", default="", help="an ISO date: also the host seconds of the jobs from then"
    )
    parser.add_argument("--verdicts", action="store_true", help="the verdict model's figures")
    parser.add_argument(
        "--write-model",
        nargs="?",
        type=Path,
        const=MODEL_PATH,
        default=None,
        help=f"with --verdicts: write the model's parameters (default {MODEL_PATH.relative_to(ROOT)})",
    )
    parser.add_argument(
        "--gpu-model",
        choices=KERNELBENCH_GPUS,
        help="the verdict model of a GPU model only KernelBench's sweeps measured on (with --write-model: "
        "registry/data/verdict-model-<gpu>.json)",
    )
    args = parser.parse_args()
    if args.gpu_model:
        path = ROOT / "registry" / "data" / f"verdict-model-{args.gpu_model}.json"
        kernelbench_model_figures(args.gpu_model, path if args.write_model else None)
        sys.exit(0)
    if not args.folder.is_dir() or not list(args.folder.glob("*.json.gz")):
        parser.error(f"{args.folder}: no controlled-run exports (*.json.gz) there")
    if args.verdicts or args.write_model:
        verdict_figures(args.folder, args.write_model)
    else:
        main(args.folder, args.since)
