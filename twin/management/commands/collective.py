"""``collective``: price one NCCL collective on a preset's (or a named) accelerator and NIC.

The model is :mod:`scheduler.physics.collectives`; this command parses and checks the flags,
prints the candidate algorithms as a table and writes the chosen one as JSON.  ``--preset``
takes the accelerator, its NIC speed and the fabric kind from the preset's first node group;
otherwise ``--accelerator`` (default H100-SXM), ``--nic-gbps`` (default 400) and ``--fabric``
(default rail).  Ranks sit ``scaleup_domain`` to a node (8 on HGX, 72 on NVL72).  ``--fabric``
only labels the result; ``--oversubscription R`` gives the scale-out traffic a share ``1/R``
when the communicator spans more than one node.  The command does not place the
communicator, so it takes the worst case: every inter-node hop leaves its pod through the
oversubscribed layer (the routing layer refines the share per placement).
"""

from __future__ import annotations

import json
import math
import re
import sys

from django.core.management.base import BaseCommand

from scheduler.fabric.topology import KINDS
from scheduler.hardware.catalog import get as get_model
from scheduler.limits import checks
from scheduler.limits.bounds import (
    CLUSTER_GPUS,
    COLLECTIVE_BYTES,
    NIC_GBPS,
    OVERSUBSCRIPTION,
)
from scheduler.physics.collectives import algorithms, collective, scaleout_link, scaleup_link
from scheduler.presets import PRESETS, get_preset
from twin.management.one_line import checked, output_path, output_write, refuse

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
CHOICES = ("auto", "ring", "tree", "nvls")
_SUFFIX = {"": 1, "K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30, "T": 2 ** 40}
_SIZE = re.compile(r"(\d+(?:\.\d*)?)\s*([KMGT]?)(?:I?B)?")


def parse_bytes(raw: str) -> float:
    """``8``, ``1e9``, ``8K``, ``256M``, ``1G``, ``2GiB``: suffixes are powers of 2 (nccl-tests).

    >>> parse_bytes("256M") == 256 * 2 ** 20
    True
    """
    message = f"--bytes must be a positive size such as 1048576, 256M or 8G, not {raw!r}"
    match = _SIZE.fullmatch(raw.strip().upper())
    try:
        value = float(match[1]) * _SUFFIX[match[2]] if match else float(raw)
    except ValueError:
        raise refuse(message) from None
    if not (math.isfinite(value) and value > 0):
        raise refuse(message)
    return checked(checks.within, "--bytes", value, COLLECTIVE_BYTES)


def _size(nbytes: float) -> str:
    for suffix, scale in (("TiB", 2 ** 40), ("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {suffix}"
    return f"{nbytes:g} B"


def _gpus(raw: str | None) -> int:
    if raw is None:
        raise refuse("--gpus is required (a positive integer)")
    return checked(checks.integer_from_text, "--gpus", raw, at_least=1, bound=CLUSTER_GPUS)


def _nic_gbps(raw: str | None) -> float:
    if raw is None:
        return 400.0
    return checked(checks.number_from_text, "--nic-gbps", raw, above=0, bound=NIC_GBPS,
                    expect="a positive number of Gb/s such as 400")


def _oversubscription(raw: str | None) -> float | None:
    return checked(checks.optional, checks.number_from_text, "--oversubscription", raw,
                    at_least=1, bound=OVERSUBSCRIPTION, expect="a ratio >= 1 such as 7")


class Command(BaseCommand):
    help = "Price one collective (time, algbw, busbw as nccl-tests reports them)."

    def add_arguments(self, parser):
        # Values are parsed here, not by argparse, so every bad flag is one line and status 2.
        parser.add_argument("--op", help=f"one of: {', '.join(OPS)} (required)")
        parser.add_argument("--bytes", help="size S as nccl-tests prints it: 8M, 1G, ... "
                                            "(powers of 2; required)")
        parser.add_argument("--gpus", help="ranks (required)")
        parser.add_argument("--preset", help=f"take accelerator and NIC from: {', '.join(PRESETS)}")
        parser.add_argument("--accelerator", help="accelerator model (default H100-SXM)")
        parser.add_argument("--fabric", help=f"scale-out kind label: {', '.join(KINDS)} "
                                             "(default: the preset's, else rail)")
        parser.add_argument("--nic-gbps", help="NIC line rate per GPU, Gb/s (default 400)")
        parser.add_argument("--algorithm", default="auto", help=f"one of: {', '.join(CHOICES)}")
        parser.add_argument("--oversubscription", metavar="R",
                            help="scale-out share 1/R for traffic leaving a pod")
        parser.add_argument("--json", metavar="PATH|-", help="write the result as JSON")

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)

        def error(message):
            if parser.called_from_command_line:
                parser.exit(2, f"CommandError: {message}\n")
            raise refuse(message)

        parser.error = error
        return parser

    def execute(self, *args, **options):
        self._json_to_stdout = options.get("json") == "-"
        return super().execute(*args, **options)

    def handle(self, *args, **opts):
        json_path = output_path("--json", opts["json"])
        report = self._run(opts)
        self._print(report)
        if opts["json"]:
            text = json.dumps(report, indent=2) + "\n"
            if json_path is None:
                sys.stdout.write(text)
            else:
                output_write(json_path, text)

    def _run(self, opts) -> dict:
        op = opts["op"]
        if op not in OPS:
            raise refuse(f"--op must be one of: {', '.join(OPS)}, not {op!r}" if op else
                          f"--op is required: one of {', '.join(OPS)}")
        if opts["bytes"] is None:
            raise refuse("--bytes is required (e.g. 1G)")
        nbytes = parse_bytes(opts["bytes"])
        gpus = _gpus(opts["gpus"])
        if opts["algorithm"] not in CHOICES:
            raise refuse(f"--algorithm must be one of: {', '.join(CHOICES)}, not "
                          f"{opts['algorithm']!r}")
        ratio = _oversubscription(opts["oversubscription"])
        model, nic_gbps, fabric = self._hardware(opts)
        up, out = scaleup_link(model), scaleout_link(nic_gbps)
        per_node = model.scaleup_domain
        share = 1.0 / ratio if ratio and gpus > per_node else 1.0
        names = (algorithms(op, gpus=gpus, gpus_per_node=per_node, scaleup=up)
                 if opts["algorithm"] == "auto" else (opts["algorithm"],))
        try:
            chosen = collective(op, nbytes, gpus, gpus_per_node=per_node, scaleup=up,
                                scaleout=out, algorithm=opts["algorithm"],
                                scaleout_share=share)
            others = [collective(op, nbytes, gpus, gpus_per_node=per_node, scaleup=up,
                                 scaleout=out, algorithm=a, scaleout_share=share)
                      for a in names] if gpus > 1 else [chosen]
        except ValueError as exc:
            raise refuse(str(exc)) from None
        return {
            "op": op, "bytes": nbytes, "gpus": gpus, "gpus_per_node": per_node,
            "nodes": chosen.nodes, "algorithm": chosen.algorithm, "time_s": chosen.time_s,
            "algbw_GB_s": chosen.algbw_GB_s, "busbw_GB_s": chosen.busbw_GB_s,
            "accelerator": model.name, "nic_gbps": nic_gbps, "fabric": fabric,
            "preset": opts["preset"], "oversubscription": ratio, "scaleout_share": share,
            "scaleup_GB_s": up.bw_gb_s, "scaleout_GB_s": out.bw_gb_s,
            "candidates": {r.algorithm: {"time_s": r.time_s, "algbw_GB_s": r.algbw_GB_s,
                                         "busbw_GB_s": r.busbw_GB_s} for r in others},
        }

    def _hardware(self, opts):
        if opts["preset"] and (opts["accelerator"] or opts["fabric"] or opts["nic_gbps"]):
            raise refuse("give --preset or --accelerator/--fabric/--nic-gbps, not both")
        nic_gbps = _nic_gbps(opts["nic_gbps"])
        try:
            if opts["preset"]:
                preset = get_preset(opts["preset"])
                group = preset.groups[0]
                return get_model(group.model), group.shape.nic_gbps, preset.fabric_kind
            fabric = opts["fabric"] or "rail"
            if fabric not in KINDS:
                raise refuse(f"unknown fabric {fabric!r}; choose one of: {', '.join(KINDS)}")
            return get_model(opts["accelerator"] or "H100-SXM"), nic_gbps, fabric
        except KeyError as exc:
            raise refuse(str(exc).strip("'\"")) from None

    def _print(self, r: dict) -> None:
        out = self.stderr if self._json_to_stdout else self.stdout
        share = f", scale-out share {r['scaleout_share']:.3g}" if r["scaleout_share"] < 1 else ""
        out.write(f"{r['op']} of {_size(r['bytes'])} ({r['bytes']:,.0f} B) on {r['gpus']:,} GPUs "
                  f"({r['nodes']:,} node(s), up to {r['gpus_per_node']} per scale-up domain); "
                  f"{r['accelerator']} scale-up {r['scaleup_GB_s']:.0f} GB/s, "
                  f"{r['nic_gbps']:g}G NIC {r['scaleout_GB_s']:.1f} GB/s, {r['fabric']} "
                  f"fabric{share}")
        rows = [(name + (" *" if name == r["algorithm"] else ""), f"{c['time_s'] * 1e3:,.3f}",
                 f"{c['algbw_GB_s']:,.2f}", f"{c['busbw_GB_s']:,.2f}")
                for name, c in r["candidates"].items()]
        headers = ("algorithm", "time ms", "algbw GB/s", "busbw GB/s")
        widths = [max(len(x) for x in col) for col in zip(headers, *rows, strict=True)]
        for row in (headers, tuple("-" * w for w in widths), *rows):
            out.write("  " + "  ".join(c.ljust(w) if j == 0 else c.rjust(w)
                                       for j, (c, w) in enumerate(zip(row, widths, strict=True))))
