"""A job's result, the one contract between the GPU worker that produces it and the recorder that
takes it (registry/reruns/services/record.py): its keys are written here and nowhere else.

It travels as a plain dict (JSON through Celery, signed by the worker): `as_wire()` makes that dict,
`from_wire()` reads one back. Reading keeps each value as it came, unknown keys aside: a worker's
message is checked by the recorder, which refuses a result without a finite median, a wrong GPU
model or unit, and reads the mappings defensively."""

from dataclasses import asdict, dataclass, field, fields


@dataclass
class JobResult:
    status: str  # "ok", "failed" or "refused"
    median: float | None = None
    p20: float | None = None
    p80: float | None = None
    unit: str | None = None
    samples: list = field(default_factory=list)
    environment: dict = field(default_factory=dict)
    protocol: dict = field(default_factory=dict)
    log: str = ""
    error: str = ""
    timed_out: bool = False  # a failed job: it ran past its time limit and was killed
    upstream: dict | None = None  # the source protocol's own figure (upstream do_bench)
    gpu_uuid: str = ""
    gpu_state: dict = field(default_factory=dict)
    sampling: dict = field(default_factory=dict)  # how sampling stopped, blocks, the host's seconds
    ceilings: dict | None = None  # a ceilings job: the whole measurement document

    def __post_init__(self):
        if self.status != "ok":
            self.median = self.p20 = self.p80 = None

    def as_wire(self) -> dict:
        return asdict(self)

    @classmethod
    def from_wire(cls, message) -> "JobResult":
        message = message if isinstance(message, dict) else {}
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in message.items() if k in known and v is not None}
        values.setdefault("status", "")
        result = cls.__new__(cls)
        for f in fields(cls):  # as sent, without __post_init__: the recorder judges it
            default = f.default_factory() if callable(f.default_factory) else f.default
            setattr(result, f.name, values.get(f.name, default))
        return result


# What a harness answer carries into the job's result, beside status, log, error and protocol.
ANSWER_FIELDS = tuple(
    f.name
    for f in fields(JobResult)
    if f.name not in ("status", "log", "error", "protocol", "sampling", "ceilings")
)
