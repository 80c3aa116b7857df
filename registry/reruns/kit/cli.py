"""kernelindex-repro: reproduce one KernelIndex run on this machine and write (or file) the result.

    kernelindex-repro https://SITE/runs/ID/ [--upload --token TOKEN] [--archive liger.tar.gz] [--out FILE]

It fetches the run's spec from the site (/api/v1/runs/ID/spec/), checks this machine's GPU
against the run's, runs exactly the run's workload through liger-kernel's own benchmark code under
the protocol the site's workers use (the same harness files, the site's timing settings), and
writes one JSON file: the spec and its digest, every sample, the environment and GPU state, the
kit's version and the sha256 of the file's own content. `--upload` files it on the run as a
pending reproduction with your API token (your account page on the site shows it); otherwise
upload the file on the run's reproduction form. Only in the installed kit (`kernelindex_kit.cli`).
"""

import argparse
import datetime
import json
import os
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path

from kernelindex_kit import HARNESS, VERSION, result
from kernelindex_kit.harness import session, spec, upstream

RUN_URL = re.compile(r"^(?P<site>https?://[^?#]+?)/runs/(?P<id>[0-9]+)/?(?:[?#].*)?$")
TOKEN_ENV = "KERNELINDEX_TOKEN"


class KitError(Exception):
    """The reproduction cannot go on; the message says why and what to do."""


TORCH_MISSING = (
    "kernelindex-repro needs torch, which this Python does not have: install the build of torch for "
    "your GPU (https://pytorch.org/get-started/locally/), then run the same command again."
)


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        import torch  # noqa: F401  (the host brings its own build; pip cannot choose it)
    except ImportError:
        print(TORCH_MISSING, file=sys.stderr)
        return 2
    try:
        return reproduce(args)
    except KitError as exc:
        print(f"kernelindex-repro: {exc}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kernelindex-repro", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_url", help="the run's page, e.g. https://kernelindex.example/runs/42/")
    parser.add_argument("--upload", action="store_true", help="file the result on the run (needs --token)")
    parser.add_argument(
        "--token", default=os.environ.get(TOKEN_ENV, ""), help=f"your API token (or {TOKEN_ENV})"
    )
    parser.add_argument(
        "--archive", help="the liger-kernel sdist (or a folder holding it), for a host with no index"
    )
    parser.add_argument(
        "--out", help="where to write the result file (default: kernelindex-run-ID-TIME.json)"
    )
    parser.add_argument(
        "--any-gpu", action="store_true", help="run on another GPU model than the run's (no verdict)"
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds the workload may take (1800)")
    parser.add_argument("--version", action="version", version=f"kernelindex-kit {VERSION} ({HARNESS})")
    return parser


def reproduce(args) -> int:
    if args.upload and not args.token:
        raise KitError(f"--upload needs your API token: --token TOKEN or {TOKEN_ENV} (see your account page)")
    site, run_id = _run_address(args.run_url)
    served = _get_json(f"{site}/api/v1/runs/{run_id}/spec/")
    if served.get("format") != result.SPEC_FORMAT:
        raise KitError(
            f"the site served a spec of format {served.get('format')!r}; this kit reads {result.SPEC_FORMAT}"
        )
    if not served.get("mappable"):
        raise KitError(f"the harness cannot run this run: {served.get('refusal')}")
    if served.get("kit", {}).get("version") not in (None, VERSION):
        print(f"note: the site serves kit {served['kit']['version']}; this is {VERSION}", file=sys.stderr)
    device = _device(served["run"], any_gpu=args.any_gpu)
    job = dict(served["spec"]["job"], device=device)
    try:
        plan = spec.plan_for(job)
        root = upstream.harness_fetch(archive=args.archive)
    except (spec.Refused, upstream.HarnessMissing) as exc:
        raise KitError(str(exc)) from None
    plan["protocol"] = served["spec"]["timing"]
    estimate = served.get("estimate", {}).get("seconds")
    print(
        f"Reproducing run {run_id} on {device}" + (f" (about {estimate:.0f} s)" if estimate else ""),
        file=sys.stderr,
    )
    started = _now()
    harness = session.HarnessSession(device=device, root=root)
    try:
        answer = harness.run(plan, timeout_s=args.timeout)
    finally:
        harness.close()
    if answer["status"] != "ok":
        print(answer.get("log", "")[-4000:], file=sys.stderr)
        raise KitError(f"the harness {answer['status']}: {answer.get('error') or 'no reason given'}")
    document = _document(served, answer, device=device, started=started)
    out = Path(args.out or f"kernelindex-run-{run_id}-{started.replace(':', '').replace('-', '')}.json")
    out.write_bytes(result.canonical(document))
    print(f"Wrote {out} ({len(document['samples'])} samples, digest {document['digest']})", file=sys.stderr)
    if args.upload:
        return _upload(served["uploadUrl"], out.read_bytes(), token=args.token)
    print(
        f"Upload it on {served['run']['url']} (Add a reproduction), or run again with --upload.",
        file=sys.stderr,
    )
    return 0


def _document(served: dict, answer: dict, *, device: str, started: str) -> dict:
    environment = dict(answer.get("environment") or {})
    environment["gpu_slug"] = spec.gpu_slug(environment.get("gpu_name", ""))
    document = {
        "format": result.FORMAT,
        "run": {"id": served["run"]["id"], "url": served["run"]["url"]},
        "specDigest": served["specDigest"],
        "spec": served["spec"],
        "device": device,
        "unit": answer["unit"],
        "samples": [float(s) for s in answer["samples"]],
        "upstream": answer.get("upstream") or {},
        "sampling": answer.get("measured") or {},
        "environment": environment,
        "gpuUuid": answer.get("gpu_uuid") or "",
        "gpuState": answer.get("gpu_state") or {},
        "kit": {"version": VERSION, "harness": HARNESS, "protocol": served["protocols"][device]["name"]},
        "startedAt": started,
        "finishedAt": _now(),
    }
    document["digest"] = result.content_digest(document)
    return document


def _device(run: dict, *, any_gpu: bool) -> str:
    """cpu for a CPU run; cuda on the run's GPU model; otherwise a clear refusal (or, with
    --any-gpu, this machine's own device, whose result the site shows without a verdict)."""
    local_slug, local_name = local_gpu()
    if run["gpu"] == "cpu":
        return "cpu"
    if local_slug == run["gpu"]:
        return "cuda"
    if any_gpu:
        print(
            f"note: the run was measured on {run['gpuProduct']}; timing on {local_name} (no verdict)",
            file=sys.stderr,
        )
        return "cpu" if local_slug == "cpu" else "cuda"
    here = "no CUDA GPU" if local_slug == "cpu" else local_name
    raise KitError(
        f"this run was measured on {run['gpuProduct']} ({run['gpu']}); this machine has {here}. "
        "Run it on that GPU model, or pass --any-gpu (the site then shows the result without a verdict)."
    )


def local_gpu() -> tuple[str, str]:
    """(slug, name) of CUDA device 0 after CUDA_VISIBLE_DEVICES, or ("cpu", "CPU")."""
    import torch

    if not torch.cuda.is_available():
        return "cpu", "CPU"
    name = torch.cuda.get_device_name(0)
    return spec.gpu_slug(name), name


def _upload(url: str, data: bytes, *, token: str) -> int:
    request = urllib.request.Request(
        url,
        data=data,
        method="POST",
        headers={
            "Authorization": f"Token {token}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            filed = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise KitError(f"the site refused the upload ({exc.code}): {_reasons(exc.read())}") from None
    except urllib.error.URLError as exc:
        raise KitError(
            f"could not reach {url}: {exc.reason}; the file is kept, upload it on the run's page"
        ) from None
    print(
        f"Filed as reproduction #{filed['id']}, pending moderation: {filed.get('page') or filed.get('url')}"
    )
    return 0


def _reasons(body: bytes) -> str:
    try:
        detail = json.loads(body)
    except ValueError:
        return body[:500].decode("utf-8", "replace")
    if isinstance(detail, dict):
        return "; ".join(
            f"{key}: {' '.join(map(str, v)) if isinstance(v, list) else v}" for key, v in detail.items()
        )
    return str(detail)


def _run_address(url: str) -> tuple[str, int]:
    found = RUN_URL.match(url.strip())
    if not found:
        raise KitError(f"{url!r} is not a run's page (https://SITE/runs/ID/)")
    return found["site"], int(found["id"])


def _get_json(url: str) -> dict:
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers={"Accept": "application/json"}), timeout=60
        ) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise KitError(f"{url} answered {exc.code}: {_reasons(exc.read())}") from None
    except (urllib.error.URLError, ValueError) as exc:
        raise KitError(f"could not read {url}: {getattr(exc, 'reason', exc)}") from None


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


if __name__ == "__main__":
    sys.exit(main())
