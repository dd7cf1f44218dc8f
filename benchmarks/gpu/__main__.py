"""Round-by-round GPU tuning where the GPU machine has no TVM.

    python -m benchmarks.gpu round  --state benchmarks/results/gpu --n 32      # here: next candidates, exported
    bash benchmarks/results/gpu/round-1/run.sh $OUT                          # there: CuPy runner + PyTorch
    python -m benchmarks.gpu ingest --state benchmarks/results/gpu --round 1 --results <files from $OUT>
    python -m benchmarks.gpu report --state benchmarks/results/gpu             # GFLOPS per scheme and round
    python -m benchmarks.gpu retime --top 4 --passes 3                        # every scheme's best, side by side

Each scheme keeps its own records log (``logs/<workload>/<scheme>.jsonl``); ``round`` recreates the scheme's tuner,
resumes it from that log and exports its ``next_batch``, so every scheme searches as it would locally. A re-timing round
(``retime``) is run there and ingested like any other; ``report`` then adds its table. Carrying a round to the GPU
machine: pack the round folder into a path the device tool carries, and bring the results back as one archive.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .retime import ingest_retime, make_retime, retime_table
from .rounds import DEFAULT_WORKLOADS, SCHEMES, ingest, make_round, plot, report, rounds

__all__ = ["ingest", "main", "make_retime", "make_round", "report", "rounds"]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__.splitlines()[0] if __doc__ else "")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("round", help="export each scheme's next candidates as a new round")
    r.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS))
    r.add_argument("--schemes", default=",".join(SCHEMES))
    r.add_argument("--n", type=int, default=32)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--device-profile", default="h100")
    t = sub.add_parser("retime", help="export every scheme's best kernels to be re-timed side by side")
    t.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS))
    t.add_argument("--schemes", default=",".join(SCHEMES))
    t.add_argument("--top", type=int, default=4, help="kernels per scheme and workload")
    t.add_argument("--passes", type=int, default=3, help="passes, alternating with PyTorch")
    t.add_argument("--device-profile", default="h100")
    i = sub.add_parser("ingest", help="append a measured round's records to the schemes' logs")
    i.add_argument("--round", type=int, required=True)
    i.add_argument("--results", help="folder the GPU machine wrote (default: the round's folder)")
    sub.add_parser("report", help="Markdown table of the logs")
    for q in (r, t, i, sub.choices["report"]):
        q.add_argument("--state", default="benchmarks/results/gpu")
        q.add_argument("--arch", default="sm_90")
    args = p.parse_args(argv)
    try:
        if args.command == "round":
            root = make_round(
                args.state,
                args.workloads.split(","),
                args.schemes.split(","),
                args.n,
                args.arch,
                args.seed,
                args.device_profile or None,
            )
            print(f"exported {root}; on the GPU machine: sh {root}/run.sh OUT_DIR")
        elif args.command == "retime":
            names, schemes = args.workloads.split(","), args.schemes.split(",")
            root = make_retime(args.state, names, schemes, args.top, args.passes, args.arch, args.device_profile)
            print(f"exported {root}; on the GPU machine: sh {root}/run.sh OUT_DIR")
        elif args.command == "ingest" and os.path.exists(
            os.path.join(args.state, f"round-{args.round}", "retime.json")
        ):
            for rel in ingest_retime(args.state, args.round, args.results or ""):
                print(f"kept {rel}")
        elif args.command == "ingest":
            for where, n in ingest(args.state, args.round, args.results).items():
                print(f"{where}: {n} records added")
        else:
            text = report(args.state)
            retimed = os.path.join(args.state, "retime")
            for name in sorted(os.listdir(retimed)) if os.path.isdir(retimed) else []:
                text += "\n" + retime_table(args.state, int(name.split("-")[1]))
            plot(args.state)
            os.makedirs(args.state, exist_ok=True)
            with open(os.path.join(args.state, "summary.md"), "w") as f:
                f.write(text)
            print(text, end="")
    except (ValueError, KeyError, FileExistsError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
