"""``reliability``: closed-form answers without simulating (:mod:`scheduler.reliability.analysis`).

Subcommands:

* ``mttf`` — job MTTF by size (1,024 to 131,072 GPUs, or ``--sizes``) for a failure profile;
* ``interval`` — Young, Daly and Daly-exact checkpoint intervals for a checkpoint cost and an
  MTTF (``--mttf-h``, or a job size and profile);
* ``ettr`` — expected ETTR of a job for an interval (seconds or a rule), synchronous or
  asynchronous (``--persist-s``), with the restart split into detection, rescheduling,
  loading and warm-up; with ``--modes`` it compares checkpoint modes
  (:mod:`scheduler.reliability.mode_comparison`) at equal intervals, at each mode's optimum,
  or both (``--intervals``), and every table says which (``intervals: equal (42.0 min)``,
  ``intervals: each mode's optimum (Daly)``).

``--failure-profile NAME`` reads :func:`scheduler.reliability.profiles.load_profile` when that
package is installed; without it only ``llama3`` (the built-in
:data:`scheduler.reliability.failures.MODES`) is known.  Every value is parsed here so a bad
one is one line and exit status 2; ``--json PATH|-`` writes the answer as JSON.
"""

from __future__ import annotations

import json
import sys

from scheduler.limits import checks
from scheduler.limits.bounds import CLUSTER_GPUS, Bound
from scheduler.reliability import analysis as ra
from scheduler.reliability import checkpoint as ck
from scheduler.reliability import mode_comparison as mc
from scheduler.reliability.failures import MODES
from twin.management.one_line import OneLineCommand, checked, output_path, output_write, refuse

BUILTIN_PROFILE = "llama3"
MAX_SECONDS = 366 * 86400.0


def load_modes(name: str | None) -> tuple[str, tuple]:
    """The failure modes of profile ``name`` (default: the built-in Llama 3 rates)."""
    try:
        from scheduler.reliability.profiles import load_profile
    except ImportError:
        if name in (None, BUILTIN_PROFILE):
            return BUILTIN_PROFILE, MODES
        raise refuse(f"unknown failure profile {name!r}; this install has only "
                     f"{BUILTIN_PROFILE!r}") from None
    if name is None:
        name = BUILTIN_PROFILE
    try:
        profile = load_profile(name)
    except (KeyError, ValueError, OSError) as exc:
        raise refuse(str(exc).strip("'\"")) from None
    return profile.name, tuple(profile.modes)


def _number(flag: str, raw: str | None, *, default: float | None = None, low: float = 0.0,
            strict: bool = False, high: float = MAX_SECONDS) -> float | None:
    if raw is None:
        return default
    lower = {"above": low} if strict else {"at_least": low}
    return checked(checks.number_from_text, flag, raw, at_most=high, **lower)


def _integer(flag: str, raw: str, bound: Bound | None = None, low: int = 1) -> int:
    return checked(checks.integer_from_text, flag, raw, at_least=low, bound=bound,
                    expect=f"an integer >= {low}")


def _size(opts) -> tuple[int, int]:
    """``--gpus`` and ``--gpus-per-node`` as (GPUs, nodes)."""
    if opts["gpus"] is None:
        raise refuse("--gpus is required (a positive integer)")
    gpus = _integer("--gpus", opts["gpus"], CLUSTER_GPUS)
    per_node = _integer("--gpus-per-node", opts["gpus_per_node"] or str(ra.GPUS_PER_NODE))
    if per_node > 72:
        raise refuse(f"--gpus-per-node must be at most 72, not {per_node}")
    return gpus, -(-gpus // per_node)


def _finite(x: float) -> float | None:
    return x if checks.is_finite(x) else None


class Command(OneLineCommand):
    help = "Closed-form reliability: job MTTF by size, Young/Daly intervals, expected ETTR."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", metavar="{mttf,interval,ettr}")
        sub.required = True
        one_line = parser.error
        mttf = sub.add_parser("mttf", help="job MTTF by job size")
        mttf.add_argument("--sizes", help="GPUs, comma-separated (default 1024,...,131072)")
        interval = sub.add_parser("interval", help="Young, Daly and Daly-exact intervals")
        interval.add_argument("--checkpoint-s", help="checkpoint stall C, s (required)")
        interval.add_argument("--mttf-h", help="MTTF M, h (or give --gpus)")
        interval.add_argument("--gpus", help="job size: M from the profile")
        ettr = sub.add_parser("ettr", help="expected ETTR of a job")
        ettr.add_argument("--gpus", help="job size, GPUs (required)")
        ettr.add_argument("--checkpoint-s", help="checkpoint stall, s (required; the snapshot "
                                                 "when asynchronous)")
        ettr.add_argument("--interval", default="daly",
                          help="compute between checkpoints, s, or young, daly, daly-exact "
                               "(default daly; all are shown)")
        ettr.add_argument("--persist-s", help="asynchronous: background persist time, s")
        ettr.add_argument("--detect-s", help="detection, s (default: each mode's own)")
        ettr.add_argument("--reschedule-s", help="relaunch and rendezvous, s "
                                                 f"(default {ra.RESTART_FIXED_S:g})")
        ettr.add_argument("--load-s", help="checkpoint load, s (default 0)")
        ettr.add_argument("--warmup-s", help="warm-up to full speed, s (default 0)")
        ettr.add_argument("--days", help="report expected interruptions in this many days "
                                         "(default 54)")
        ettr.add_argument("--modes", help="compare checkpoint modes, comma-separated: disk "
                                          "(or sync), async, memory (or in-memory); "
                                          "--checkpoint-s is then the central tier's write")
        ettr.add_argument("--intervals", help="with --modes: equal (every mode at --interval, "
                                              "or the rule's interval for the first mode), "
                                              "optimum (each mode's own under the rule) or "
                                              "both (default)")
        ettr.add_argument("--snapshot-s", help="with --modes: device-to-host stall of async "
                                               "and memory checkpoints, s")
        ettr.add_argument("--replicate-s", help="with --modes: replication to a peer's memory, "
                                                "s (memory)")
        ettr.add_argument("--memory-load-s", help="with --modes: restore from peers' memory, "
                                                  "s (memory)")
        ettr.add_argument("--checkpoint-gb", help="with --modes: checkpoint size, GB; the "
                                                  "snapshot, replication and memory restore "
                                                  "not given follow from it")
        for p in (mttf, interval, ettr):
            p.add_argument("--failure-profile", metavar="NAME",
                           help=f"failure profile (default {BUILTIN_PROFILE})")
            p.add_argument("--gpus-per-node", help=f"default {ra.GPUS_PER_NODE}")
            p.add_argument("--json", metavar="PATH|-", help="write the answer as JSON")
            if parser.called_from_command_line:
                p.error = one_line

    def execute(self, *args, **options):
        self._json_to_stdout = options.get("json") == "-"
        return super().execute(*args, **options)

    def handle(self, *args, **opts):
        json_path = output_path("--json", opts["json"])
        report = getattr(self, f"_{opts['action']}")(opts)
        out = self.stderr if self._json_to_stdout else self.stdout
        out.write(self._table(report))
        if opts["json"]:
            text = json.dumps(report, indent=2) + "\n"
            if json_path is None:
                sys.stdout.write(text)
            else:
                output_write(json_path, text)

    # --------------------------------------------------------------------------- answers
    def _mttf(self, opts) -> dict:
        sizes = ra.DEFAULT_SIZES
        if opts["sizes"] is not None:
            sizes = tuple(_integer("--sizes", s.strip(), CLUSTER_GPUS)
                          for s in opts["sizes"].split(","))
        per_node = _integer("--gpus-per-node", opts["gpus_per_node"] or str(ra.GPUS_PER_NODE))
        name, modes = load_modes(opts["failure_profile"])
        rows = self._modes_call(ra.mttf_table, modes, sizes=sizes, gpus_per_node=per_node)
        return {"action": "mttf", "profile": name, "gpus_per_node": per_node, "rows": [
            {"gpus": r.gpus, "nodes": r.nodes, "mttf_h": _finite(r.mttf_h),
             "unplanned_mttf_h": _finite(r.unplanned_mttf_h),
             "interruptions_per_day": r.interruptions_per_day} for r in rows]}

    def _interval(self, opts) -> dict:
        cost = _number("--checkpoint-s", opts["checkpoint_s"], strict=True)
        if cost is None:
            raise refuse("--checkpoint-s is required (seconds the job stalls per checkpoint)")
        if (opts["mttf_h"] is None) == (opts["gpus"] is None):
            raise refuse("give --mttf-h or --gpus (with --failure-profile), one of them")
        name, gpus = None, None
        if opts["mttf_h"] is not None:
            mttf_h = _number("--mttf-h", opts["mttf_h"], strict=True, high=1e9)
        else:
            gpus, nodes = _size(opts)
            name, modes = load_modes(opts["failure_profile"])
            rates = self._modes_call(ra.job_rates, modes, gpus=gpus, nodes=nodes)
            if rates.unplanned_per_h <= 0:
                raise refuse(f"profile {name!r} has no unplanned failures: no interval needed")
            mttf_h = 1.0 / rates.unplanned_per_h
        m = mttf_h * 3600.0
        rules = {rule: ra.interval(rule, cost_s=cost, mttf_s=m) for rule in ra.INTERVAL_RULES}
        return {"action": "interval", "profile": name, "gpus": gpus, "checkpoint_s": cost,
                "mttf_h": mttf_h, "intervals_s": rules}

    def _ettr(self, opts) -> dict:
        gpus, nodes = _size(opts)
        cost = _number("--checkpoint-s", opts["checkpoint_s"])
        if cost is None:
            raise refuse("--checkpoint-s is required (seconds the job stalls per checkpoint)")
        chosen = opts["interval"]
        if chosen not in ra.INTERVAL_RULES:
            chosen = _number("--interval", chosen, strict=True)
        if cost == 0 and isinstance(chosen, str):
            raise refuse("a rule needs --checkpoint-s > 0; give --interval in seconds")
        restart = ra.Restart(
            detect_s=_number("--detect-s", opts["detect_s"]),
            reschedule_s=_number("--reschedule-s", opts["reschedule_s"],
                                 default=ra.RESTART_FIXED_S),
            load_s=_number("--load-s", opts["load_s"], default=0.0),
            warmup_s=_number("--warmup-s", opts["warmup_s"], default=0.0))
        persist = _number("--persist-s", opts["persist_s"], default=0.0)
        days = _number("--days", opts["days"], default=54.0, strict=True, high=3660.0)
        compare = _compare_options(opts, gpus, nodes, chosen, cost, persist)
        name, modes = load_modes(opts["failure_profile"])
        if compare is not None:
            return self._compare(compare, modes, name=name, gpus=gpus, nodes=nodes,
                                 cost=cost, chosen=chosen, restart=restart, days=days)
        rows = []
        for rule in dict.fromkeys((chosen, *(ra.INTERVAL_RULES if cost > 0 else ()))):
            e = self._modes_call(ra.job_ettr, modes, gpus=gpus, nodes=nodes, cost_s=cost,
                                 interval_s=rule, persist_s=persist, restart=restart)
            rows.append({"rule": e.rule, "interval_s": _finite(e.interval_s), "ettr": e.ettr,
                         "chosen": rule == chosen})
        return {"action": "ettr", "profile": name, "gpus": gpus, "nodes": nodes,
                "checkpoint_s": cost, "persist_s": persist,
                "mode": "asynchronous" if persist > 0 else "synchronous",
                "mttf_h": _finite(e.mttf_h), "unplanned_mttf_h": _finite(e.unplanned_mttf_h),
                "restart_s": e.restart_s, "planned_restart_s": e.planned_restart_s,
                "days": days, "interruptions": e.interruptions(days),
                "ettr": rows[0]["ettr"], "interval_s": rows[0]["interval_s"], "rows": rows}

    def _compare(self, c: dict, modes, *, name, gpus, nodes, cost, chosen, restart,
                 days) -> dict:
        rates = self._modes_call(ra.job_rates, modes, gpus=gpus, nodes=nodes)
        comparisons = []
        for basis in c["bases"]:
            tau = chosen if basis == "equal" or isinstance(chosen, str) else "daly"
            cmp = self._modes_call(mc.compare_modes, modes, gpus=gpus, nodes=nodes,
                                   prices=c["prices"], loads=c["loads"], basis=basis,
                                   interval_s=tau, restart=restart)
            comparisons.append({
                "basis": cmp.basis, "line": cmp.line, "rule": cmp.rule,
                "interval_s": cmp.interval_s, "reference": cmp.reference,
                "rows": [{"mode": r.mode, "label": ck.MODE_LABELS[r.mode],
                          "interval_s": _finite(r.interval_s), "stall_s": r.stall_s,
                          "lag_s": r.lag_s, "load_s": r.load_s, "ettr": r.ettr,
                          "lost_per_failure_s": r.lost_per_failure_s,
                          "waste_per_failure_s": r.waste_per_failure_s,
                          "waste_ratio": _finite(cmp.waste_ratio(r.mode))}
                         for r in cmp.rows]})
        mttf_h = rates.mttf_h
        return {"action": "ettr", "compare": True, "profile": name, "gpus": gpus,
                "nodes": nodes, "checkpoint_s": cost, "mttf_h": _finite(mttf_h),
                "unplanned_mttf_h": _finite(1.0 / rates.unplanned_per_h
                                            if rates.unplanned_per_h else float("inf")),
                "days": days, "interruptions": rates.interruptions(days),
                "comparisons": comparisons}

    @staticmethod
    def _modes_call(func, modes, **kw):
        try:
            return func(modes, **kw)
        except ValueError as exc:
            raise refuse(str(exc)) from None

    # ----------------------------------------------------------------------------- table
    @staticmethod
    def _table(r: dict) -> str:
        def fmt(x, spec):
            return "inf" if x is None else format(x, spec)

        if r.get("compare"):
            return _compare_table(r)
        if r["action"] == "mttf":
            head = f"job MTTF by size, profile {r['profile']}, {r['gpus_per_node']} GPUs a node"
            cols = ("GPUs", "nodes", "MTTF h", "unplanned MTTF h", "interruptions/day")
            rows = [(f"{x['gpus']:,}", f"{x['nodes']:,}", fmt(x["mttf_h"], ",.2f"),
                     fmt(x["unplanned_mttf_h"], ",.2f"),
                     f"{x['interruptions_per_day']:.2f}") for x in r["rows"]]
        elif r["action"] == "interval":
            who = f", {r['gpus']:,} GPUs, profile {r['profile']}" if r["profile"] else ""
            head = (f"checkpoint every: C = {r['checkpoint_s']:g} s, unplanned MTTF "
                    f"{r['mttf_h']:.3f} h{who}")
            cols = ("rule", "interval s", "interval min")
            rows = [(k, f"{v:,.1f}", f"{v / 60:,.2f}") for k, v in r["intervals_s"].items()]
        else:
            head = (f"expected ETTR: {r['gpus']:,} GPUs on {r['nodes']:,} nodes, profile "
                    f"{r['profile']}, MTTF {fmt(r['mttf_h'], '.3f')} h, {r['mode']} "
                    f"checkpoint stall {r['checkpoint_s']:g} s"
                    + (f" + persist {r['persist_s']:g} s" if r["persist_s"] else "")
                    + f", restart {r['restart_s']:.0f} s; {r['interruptions']:.0f} "
                    f"interruptions in {r['days']:g} days")
            cols = ("interval", "seconds", "ETTR")
            rows = [(x["rule"] + (" *" if x["chosen"] else ""), fmt(x["interval_s"], ",.1f"),
                     f"{x['ettr']:.4f}") for x in r["rows"]]
        return "\n".join([head, *_columns(cols, rows)])


def _columns(cols, rows) -> list[str]:
    widths = [max(len(x) for x in col) for col in zip(cols, *rows, strict=True)]
    return ["  " + "  ".join(c.ljust(w) if j == 0 else c.rjust(w)
                             for j, (c, w) in enumerate(zip(row, widths, strict=True)))
            for row in (cols, tuple("-" * w for w in widths), *rows)]


def _compare_table(r: dict) -> str:
    mttf = "inf" if r["unplanned_mttf_h"] is None else f"{r['unplanned_mttf_h']:.2f}"
    lines = [f"checkpoint modes compared: {r['gpus']:,} GPUs on {r['nodes']:,} nodes, profile "
             f"{r['profile']}, unplanned MTTF {mttf} h; central-tier write "
             f"{r['checkpoint_s']:g} s; waste per failure = compute lost + restore (Gemini's "
             "measure: detection and relaunch left out)"]
    for c in r["comparisons"]:
        first = c["rows"][0]["label"]
        cols = ("mode", "interval min", "stall s", "usable after s", "restore s", "ETTR",
                "waste/failure min", f"{first} / mode")
        rows = [(x["label"], "inf" if x["interval_s"] is None else f"{x['interval_s'] / 60:,.1f}",
                 f"{x['stall_s']:,.2f}", f"{x['lag_s']:,.2f}", f"{x['load_s']:,.2f}",
                 f"{x['ettr']:.4f}", f"{x['waste_per_failure_s'] / 60:,.2f}",
                 "inf" if x["waste_ratio"] is None else f"{x['waste_ratio']:,.1f}x")
                for x in c["rows"]]
        lines += [c["line"], *_columns(cols, rows)]
    return "\n".join(lines)


COMPARE_ONLY = ("intervals", "snapshot_s", "replicate_s", "memory_load_s", "checkpoint_gb")


def _compare_options(opts, gpus: int, nodes: int, chosen, cost: float,
                     persist: float) -> dict | None:
    """``--modes`` and what goes with it checked: the modes' prices and restores and the
    bases to compare on; None without ``--modes``."""
    if opts["modes"] is None:
        given = [f"--{k.replace('_', '-')}" for k in COMPARE_ONLY if opts[k] is not None]
        if given:
            raise refuse(f"{given[0]} goes with --modes (a comparison of checkpoint modes)")
        return None
    names = [m.strip() for m in opts["modes"].split(",")]
    modes = []
    for m in names:
        try:
            mode = mc.checkpoint_mode(m)
        except ValueError:
            raise refuse(f"--modes: unknown checkpoint mode {m!r}; choose from disk (or "
                         "sync), async, memory (or in-memory)") from None
        if mode in modes:
            raise refuse(f"--modes names {mode} twice")
        modes.append(mode)
    if opts["persist_s"] is not None:
        raise refuse("--persist-s is for one asynchronous job; with --modes the async persist "
                     "is --checkpoint-s (the central tier's write)")
    raw = opts["intervals"] or "both"
    if raw not in (*mc.INTERVAL_BASES, "both"):
        raise refuse(f"--intervals must be equal, optimum or both, not {raw!r}")
    bases = mc.INTERVAL_BASES if raw == "both" else (raw,)
    if raw == "optimum" and not isinstance(chosen, str):
        raise refuse("--intervals optimum takes each mode's interval from a rule: give "
                     "--interval young, daly or daly-exact, not seconds")
    gb = _number("--checkpoint-gb", opts["checkpoint_gb"], strict=True, high=1e9)
    derived = {} if gb is None else {
        "snapshot_s": ck.snapshot_seconds(gb, gpus),
        "replicate_s": ck.replication_seconds(gb, nodes),
        "memory_load_s": gb / nodes / ck.NODE_RDMA_GB_S}
    times = {k: _number(f"--{k.replace('_', '-')}", opts[k], default=derived.get(k))
             for k in ("snapshot_s", "replicate_s", "memory_load_s")}
    need = {"async": ("snapshot_s",), "memory": ("snapshot_s", "replicate_s", "memory_load_s")}
    for mode in modes:
        lacking = [f"--{k.replace('_', '-')}" for k in need.get(mode, ()) if times[k] is None]
        if lacking:
            raise refuse(f"--modes {mode} needs {' and '.join(lacking)} (or --checkpoint-gb "
                         "to derive them)")
    load = _number("--load-s", opts["load_s"], default=0.0)
    prices = {m: ck.mode_price(m, write_s=cost, snapshot_s=times["snapshot_s"] or 0.0,
                               replicate_s=times["replicate_s"] or 0.0) for m in modes}
    loads = {m: times["memory_load_s"] if m == "memory" else load for m in modes}
    return {"prices": prices, "loads": loads, "bases": bases}
