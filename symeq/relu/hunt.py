"""The ReLU counterexample hunter's driver: work units, workers and resumable result files.

For ReLU, identifiability is open, so Theorem 4.1 (Shahverdi-Marchetti-Bokman-Kohn 2026) applies
only conditionally, and Bokman-Kahl (2023) showed that end-to-end equivariance does not imply
layerwise equivariance.  The hunter searches for such networks (candidates and their exact
verification: :mod:`symeq.relu.candidates`; two or more hidden layers: :mod:`symeq.relu.deep`;
the catalogue: :mod:`symeq.relu.catalogue`).

* **Output**: one JSON line per candidate index (``{"type": "candidate", "index": ...}``), each
  appended with a single ``write`` on an ``O_APPEND`` descriptor, *in index order*: the file is
  always a prefix of the stream (plus at most one torn line, cut off on restart), so a killed and
  resumed hunt writes exactly the records of an uninterrupted one, none lost or doubled.
* **Execution**: work units are runs of consecutive candidates, sized from the measured cost per
  candidate so that a unit takes about a second (shipping single candidates of a few ms costs more
  than the work); in-process for ``workers=1``, a local process pool whose workers are started
  once with an initializer (imports and group caches stay warm) for ``workers>1``, or
  ``dask.distributed`` futures on its long-lived workers (warmed once with ``client.run``) when a
  scheduler address is given (the ``distributed`` extra).  Units finished out of order wait until
  the units before them are written.

Examples
--------
>>> d = decide_fibre(identity_example(), resolve_group("rot3"))
>>> d.verdict, d.smallest_equivariant_width
('no-layerwise-parameter', 6)
"""

from __future__ import annotations

import bisect
import json
import os
import time
from pathlib import Path

from ..errors import EngineMissing, InputError
from .fibre import decide_fibre  # noqa: F401  (the doctest above)
from .candidates import (  # re-exported: the hunter's public names
    FIND_STATUSES,
    FORMAT,
    HUNT_GROUPS,
    PARENT_STATUSES,
    candidate_rng,
    group_info,
    build_layers,
    certificate,
    generate_candidate,
    identity_example,
    minimise,
    normalise_neurons,
    read_records,
    resolve_group,
    verify_candidate,
)

__all__ = [
    "HUNT_GROUPS",
    "resolve_group",
    "identity_example",
    "generate_candidate",
    "build_layers",
    "minimise",
    "certificate",
    "normalise_neurons",
    "verify_candidate",
    "hunt",
    "read_records",
    "report",
]


def _work(job):
    arch, spec, seed, index, parents, mini = job[:6]
    return verify_candidate(arch, spec, seed, index, parents, mini, slope=job[6] if len(job) > 6 else None)


def _verify_any(arch, spec, seed, index, parents, mini, slope=None) -> dict:
    """One candidate of any depth: one hidden layer here, two or more in :mod:`symeq.relu.deep`;
    ``slope``: leaky ReLU hidden layers with that slope (None: ReLU)."""
    if len(arch) == 3:
        return verify_candidate(arch, spec, seed, index, parents, mini, slope=slope)
    from .deep import verify_deep_candidate  # same level; deep builds on this module's recipes

    return verify_deep_candidate(arch, spec, seed, index, parents, mini, slope=slope)


def _init_worker(spec: str, arch, worker: bool = True) -> None:
    """Warm a worker once: imports, the group, its equivariant bases (per-process caches)."""
    if worker:  # a pool worker must not outlive a hunt that was killed
        from ..procs import die_with_parent

        die_with_parent()
    group_info(spec)
    if len(arch) > 3:
        import sys

        if worker and "numpy" not in sys.modules:
            # one BLAS thread per worker process (the workers are the parallelism; as dask does)
            for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
                os.environ.setdefault(var, "1")
        import numpy  # noqa: F401  (the functional-dimension evidence of deep finds)

        from . import probe  # noqa: F401
        from .deep import warm

        warm(spec)
    from .. import layerwise, submodels  # noqa: F401  (import cost paid once per worker)
    from . import fibre, regions  # noqa: F401


def _work_chunk(job) -> tuple[list, float, float]:
    """A work unit: many consecutive candidates; returns (records in index order, wall seconds,
    CPU seconds of this process)."""
    arch, spec, seed, items, mini = job[:5]
    slope = job[5] if len(job) > 5 else None
    t, c = time.perf_counter(), time.process_time()
    _init_worker(spec, arch, worker=False)
    recs = [_verify_any(arch, spec, seed, i, [] if p is None else [p], mini, slope) for i, p in items]
    return recs, time.perf_counter() - t, time.process_time() - c


# ----------------------------------------------------------------------------------------------
# JSONL with resume
# ----------------------------------------------------------------------------------------------


def _repair(path: Path) -> None:
    """Cut a torn (unterminated) last line left by an interrupted write."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        with open(path, "r+b") as f:
            f.truncate(cut)


class _Appender:
    def __init__(self, path: Path):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, obj) -> None:
        os.write(self.fd, (json.dumps(obj, separators=(",", ":"), sort_keys=True) + "\n").encode())

    def sync(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        os.fsync(self.fd)
        os.close(self.fd)


DEFAULT_LAG = 512
TARGET_TASK_SECONDS = 1.0
MAX_ARCH_WIDTH = 64


def _parse_arch(arch) -> tuple:
    if isinstance(arch, str):
        try:
            arch = tuple(int(x) for x in arch.split(","))
        except ValueError:
            raise InputError(f"--arch takes n,h1,...,m like 2,4,2 or 2,4,4,2, got {arch!r}") from None
    arch = tuple(int(a) for a in arch)
    if len(arch) < 3 or any(a < 1 for a in arch):
        raise InputError("--arch takes positive sizes n,h1,...,m: input, one or more hidden ReLU widths, output "
                         "(e.g. 2,4,2 or 2,4,4,2)")
    if max(arch) > MAX_ARCH_WIDTH or len(arch) > 6:
        raise InputError(f"--arch {','.join(map(str, arch))} is too large for exact hunting (at most 4 hidden "
                         f"layers of width <= {MAX_ARCH_WIDTH})")
    return arch


def _hunt_slope(activation) -> str | None:
    """The leaky slope (text) of a hunt's activation; None for ReLU.  Anything that is not ReLU or a
    leaky ReLU is refused: the hunter's machinery is piecewise linear."""
    if activation is None:
        return None
    spec = activation.to_spec() if hasattr(activation, "to_spec") else activation
    if isinstance(spec, str):
        spec = {"type": spec}
    kind = spec.get("type") if isinstance(spec, dict) else None
    if kind == "relu":
        return None
    if kind == "leaky_relu":
        from ..numbers import format_number, parse_number

        a = parse_number(spec.get("slope", "1/100"), "--activation slope")
        if a == 0:
            return None
        if a == 1 or a == -1:
            raise InputError(f"leaky ReLU slope {a}: the hunter needs a slope other than 1 and -1")
        return format_number(a)
    raise InputError(f"symeq hunt takes relu or leaky_relu (e.g. leaky_relu:1/10), not {kind!r}: the exact "
                     "machinery of the hunter is piecewise linear")


class _InProcess:
    """Runs each work unit at submission (workers=1): same code path, no pickling."""

    slots = 1

    class _Done:
        def __init__(self, value):
            self.value = value

        def result(self):
            return self.value

    def submit(self, job):
        return self._Done(_work_chunk(job))

    def wait(self, pending):
        return set(pending)

    def close(self):
        pass


class _Pool:
    """A local process pool whose workers are started once (initializer) and keep their caches."""

    def __init__(self, workers: int, spec: str, arch):
        from concurrent.futures import ProcessPoolExecutor

        self.slots = workers
        self.ex = ProcessPoolExecutor(max_workers=workers, initializer=_init_worker, initargs=(spec, arch))

    def submit(self, job):
        return self.ex.submit(_work_chunk, job)

    def wait(self, pending):
        from concurrent.futures import FIRST_COMPLETED, wait

        return wait(pending, return_when=FIRST_COMPLETED).done

    def close(self):
        self.ex.shutdown(wait=True, cancel_futures=True)


class _Dask:
    """dask.distributed: long-lived workers, warmed once with ``client.run``; futures per work unit."""

    def __init__(self, scheduler: str, spec: str, arch):
        try:
            from distributed import Client
        except ImportError:
            raise EngineMissing("--scheduler needs dask.distributed: pip install 'symeq[distributed]'") from None
        try:
            self.client = Client(scheduler, timeout=30)
        except (OSError, TimeoutError) as e:
            raise InputError(f"cannot reach the dask scheduler at {scheduler}: {e}") from None
        self.client.run(_init_worker, spec, arch)
        self.slots = max(1, sum(self.client.nthreads().values()))

    def submit(self, job):
        return self.client.submit(_work_chunk, job, pure=False)

    def wait(self, pending):
        from distributed import wait

        return set(wait(list(pending), return_when="FIRST_COMPLETED").done)

    def close(self):
        self.client.close()


class _ChunkSizer:
    """Work-unit size from the measured cost per candidate, so that a unit takes about
    ``target`` seconds: big enough that shipping it costs little next to the work, small enough
    that the last units of a hunt spread over every worker."""

    def __init__(self, slots: int, target: float = TARGET_TASK_SECONDS):
        self.slots, self.target = slots, target
        self.seconds = 0.0
        self.count = 0

    def record(self, n: int, seconds: float) -> None:
        # a decaying sum: recent units weigh most (cost drifts as mutations of finds appear)
        self.seconds = 0.7 * self.seconds + seconds
        self.count = 0.7 * self.count + n

    def size(self, remaining: int | None, lag: int) -> int:
        if self.count <= 0:
            s = 4  # first units: measure
        else:
            s = int(self.target * self.count / max(self.seconds, 1e-6))
        if remaining is not None:
            s = min(s, -(-remaining // (2 * self.slots)))
        # several units must fit in the window of candidates that may run before their
        # mutation parents are known (see ``lag``)
        s = min(s, max(1, lag // (2 * self.slots)), 4096)
        return max(1, s)


def _hunt_options(arch, G, spec, budget, seconds, workers, lag, batch):
    """The options, checked before any work; returns ``lag`` (``batch`` is its old name) or None."""
    if G.input_dim != arch[0] or G.output_dim != arch[-1]:
        raise InputError(f"group {spec} acts on R^{G.input_dim} -> R^{G.output_dim}, the architecture is "
                         f"{arch[0]} -> {arch[-1]}")
    if len(arch) > 3 and G.input_dim != G.output_dim:
        raise InputError("hunts with two or more hidden layers need a group acting on input and output in the "
                         f"same dimension (the hidden blocks map R^{G.input_dim} to itself); {spec} does not")
    if budget is None and seconds is None:
        raise InputError("give --budget N (candidates) or --seconds S")
    if budget is not None and budget < 0:
        raise InputError("--budget must be >= 0")
    if workers < 1:
        raise InputError("--workers must be at least 1")
    if lag is None:
        lag = batch
    if lag is not None and int(lag) < 1:
        raise InputError("--lag must be at least 1")
    return lag


def _resumed_lag(path: Path, header, want: dict, lag, minimise_finds: bool) -> int:
    """The lag of the hunt: the stored one when ``path`` holds a hunt with the same settings (else a
    specific refusal), or the one asked for (``DEFAULT_LAG``) for a new file, recorded in ``want``."""
    if header is None and path.exists() and path.stat().st_size > 0:
        raise InputError(f"{path} exists and is not a hunt file (no header line); choose another --out")
    if header is None:
        lag = int(lag if lag is not None else DEFAULT_LAG)
        want["lag"] = lag
        want["minimise"] = bool(minimise_finds)
        return lag
    if header.get("format") != FORMAT:
        raise InputError(f"{path} was written by an older hunter ({header.get('format')}), whose candidate "
                         f"stream differs; start a new --out file (--report still reads it)")
    if [header.get(k) for k in ("arch", "group", "seed")] != [want[k] for k in ("arch", "group", "seed")]:
        raise InputError(f"{path} holds a hunt with arch {header.get('arch')}, group {header.get('group')}, "
                         f"seed {header.get('seed')}; use another --out or the same settings to resume")
    if header.get("activation") != want.get("activation"):
        old = header.get("activation")
        old = f"leaky_relu:{old.get('slope')}" if isinstance(old, dict) else "relu"
        raise InputError(f"{path} holds a hunt with --activation {old}; resume with the same --activation or use "
                         f"another --out")
    if header.get("minimise", True) != minimise_finds:
        raise InputError(f"{path} was started {'with' if header.get('minimise', True) else 'without'} "
                         f"minimisation of finds; resume with the same setting (--no-minimise)")
    if lag is not None and int(lag) != header.get("lag"):
        raise InputError(f"{path} was started with --lag {header.get('lag')}; resume with the same value")
    return int(header["lag"])


class _Stream:
    """The candidate stream of one hunt: what is written (``done``, the finds that may become parents,
    the count of finds), the frontier (the first index not yet written), and the units in flight.

    Units are handed out while there is room, a unit only once the finds it may mutate (indices
    < i - lag) are all written; units finished out of order wait in ``ready`` until the units before
    them are written, so the file is always a prefix of the stream."""

    def __init__(self, records, arch, spec, seed, lag, minimise_finds, slope, budget):
        self.done = {r["index"] for r in records}
        self.finds = sorted((r["index"], r["recipe"]) for r in records
                            if r.get("status") in PARENT_STATUSES and "recipe" in r)
        self.find_index = [i for i, _ in self.finds]  # sorted; finds are appended in index order
        self.n_finds = sum(1 for r in records if r.get("status") in FIND_STATUSES)
        self.frontier = 0  # the first index not yet verified: the file is a prefix of the stream
        self._advance()
        self.arch, self.spec, self.seed, self.lag = arch, spec, seed, lag
        self.minimise_finds, self.slope, self.budget = minimise_finds, slope, budget
        self.pending: dict = {}  # future -> first index of its unit
        self.ready: dict = {}    # first index -> records, for units finished out of order
        self.order: list = []    # first indices of units in flight, in stream order
        self.nxt = self.frontier  # next index to hand out
        self.new = 0
        self.work = 0.0  # seconds spent inside work units (measured by the workers)
        self.cpu = 0.0  # CPU seconds the workers used for them

    def _advance(self) -> None:
        while self.frontier in self.done:
            self.frontier += 1

    def complete(self) -> bool:
        return self.budget is not None and all(i in self.done for i in range(self.budget))

    def _items(self, lo: int, hi: int) -> list:
        items = []
        for i in range(lo, hi):
            if i in self.done:
                continue
            # as _select_parent(seed, i, [finds with index < i - lag]), without the copy
            count = bisect.bisect_left(self.find_index, i - self.lag)
            par = None
            if count and candidate_rng(self.seed, i).random() < 0.15:
                par = self.finds[candidate_rng(self.seed, i, "parent").randrange(count)]
            items.append((i, par))
        return items

    def hand_out(self, runner, sizer) -> None:
        """Submit units while there is room (two per worker slot) and the lag allows."""
        budget = self.budget
        while len(self.pending) < 2 * runner.slots:
            if budget is not None and self.nxt >= budget:
                break
            size = sizer.size(None if budget is None else budget - self.nxt, self.lag)
            hi = self.nxt + size if budget is None else min(self.nxt + size, budget)
            hi = min(hi, self.frontier + self.lag + 1)
            if hi <= self.nxt:
                break
            items = self._items(self.nxt, hi)
            if items:
                fut = runner.submit((self.arch, self.spec, self.seed, items, self.minimise_finds, self.slope))
                self.pending[fut] = self.nxt
            else:
                self.ready[self.nxt] = ([], 0.0)
            self.order.append(self.nxt)
            self.nxt = hi

    def collect(self, runner, sizer) -> None:
        """Wait for units in flight; keep their records until their turn."""
        for fut in runner.wait(list(self.pending)):
            first = self.pending.pop(fut)
            recs, dt, cpu_dt = fut.result()
            sizer.record(len(recs), dt)
            self.work += dt
            self.cpu += cpu_dt
            self.ready[first] = (recs, dt)

    def write_ready(self, out_f) -> None:
        """Write the units that are next in the stream."""
        while self.order and self.order[0] in self.ready:
            recs, _ = self.ready.pop(self.order.pop(0))
            for rec in recs:
                out_f.write(rec)
                self.done.add(rec["index"])
                self.new += 1
                if rec.get("status") in PARENT_STATUSES and "recipe" in rec:
                    self.finds.append((rec["index"], rec["recipe"]))
                    self.find_index.append(rec["index"])
                if rec.get("status") in FIND_STATUSES:
                    self.n_finds += 1
            self._advance()


def hunt(arch, spec: str, out, *, budget: int | None = None, seconds: float | None = None, workers: int = 1,
         scheduler: str | None = None, seed: int = 0, lag: int | None = None, batch: int | None = None,
         minimise_finds: bool = True, progress=None, activation=None) -> dict:
    """Run (or resume) a hunt; returns a summary dict.

    Work units are runs of consecutive candidates sized by their measured cost (about
    ``TARGET_TASK_SECONDS`` each); workers are started once and keep their caches; results are
    written in index order, so the file is always a prefix of the candidate stream and a killed
    hunt resumes with nothing lost or doubled.  Candidate ``i`` may mutate the finds among
    candidates ``< i - lag`` (``lag`` is part of the stream and stored in the header), which lets
    ``lag`` candidates run while earlier ones are still in flight.  ``batch`` is the old name of
    ``lag``.  See the module docstring (and :class:`_Stream`).

    ``activation``: None or ReLU (``{"type": "relu"}``), or a leaky ReLU
    (``{"type": "leaky_relu", "slope": "1/10"}``, or an :class:`~symeq.activations.Activation`):
    the same candidate stream, verified with leaky hidden layers (:mod:`symeq.relu.leaky`; deep
    finds stay candidates, the first-layer orbit bound needs ReLU).  Stored in the header.
    """
    arch = _parse_arch(arch)
    slope = _hunt_slope(activation)
    G = resolve_group(spec)
    lag = _hunt_options(arch, G, spec, budget, seconds, workers, lag, batch)
    path = Path(out)
    _repair(path)
    header, records = read_records(path)
    want = {"type": "header", "format": FORMAT, "arch": list(arch), "group": spec, "seed": seed}
    if slope is not None:
        want["activation"] = {"type": "leaky_relu", "slope": slope}
    lag = _resumed_lag(path, header, want, lag, minimise_finds)
    stream = _Stream(records, arch, spec, seed, lag, minimise_finds, slope, budget)
    if stream.complete():
        return {"verified": 0, "total": len(stream.done), "finds": stream.n_finds, "seconds": 0.0,
                "per_second": None, "complete": True, "work_seconds": 0.0, "cpu_seconds": 0.0, "workers": 0,
                "busy": None}
    out_f = _Appender(path)
    if header is None:
        out_f.write(want)
    start_t = time.monotonic()
    runner = (_Dask(scheduler, spec, arch) if scheduler else
              _Pool(workers, spec, arch) if workers > 1 else _InProcess())
    sizer = _ChunkSizer(runner.slots)
    last_note = start_t
    stopped = False
    try:
        while True:
            if not stopped:
                stream.hand_out(runner, sizer)
            if not stream.pending and not (stream.order and stream.order[0] in stream.ready):
                break
            if stream.pending:
                stream.collect(runner, sizer)
            stream.write_ready(out_f)
            if seconds is not None and time.monotonic() - start_t > seconds:
                stopped = True  # hand out nothing more; the units in flight finish and are written
            now = time.monotonic()
            if progress and now - last_note > 2.0:
                last_note = now
                progress(f"hunt: {len(stream.done)} candidates, {stream.n_finds} find(s), "
                         f"{stream.new / (now - start_t):.1f} candidates/s, units of {sizer.size(None, lag)}")
        out_f.sync()
    finally:
        out_f.close()
        runner.close()
    elapsed = time.monotonic() - start_t
    slots, work, new = runner.slots, stream.work, stream.new
    return {"verified": new, "total": len(stream.done), "finds": stream.n_finds, "seconds": elapsed,
            "per_second": new / elapsed if elapsed > 0 else None, "complete": stream.complete(),
            "work_seconds": work, "cpu_seconds": stream.cpu, "workers": slots,
            # how busy the workers were: 1.0 when every slot computed all the time
            "busy": work / (slots * elapsed) if elapsed > 0 else None}


# ----------------------------------------------------------------------------------------------
# catalogue
# ----------------------------------------------------------------------------------------------


def report(paths, picture=None) -> str:
    """The catalogue of one or more hunt files (see :func:`symeq.relu.catalogue.report`)."""
    from .catalogue import report as _report  # same level; the catalogue reads this module's files

    return _report(paths, picture=picture)
