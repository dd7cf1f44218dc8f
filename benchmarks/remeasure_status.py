"""How far a sweep's re-measurement got: configs whose last record is from a session that passed the noise
gate, and how re-measured configs' last records compare with their first (``tabular.remeasured``), without
re-timing anything (``benchmarks.tabular`` re-times the top configs and a spot check as well).

    python -m benchmarks.remeasure_status --sweep benchmarks/data/bmm-bert-nt-autotvm.jsonl --out F.json
"""

from __future__ import annotations

import argparse
import json

from adatune.records import load_from_file

from .sweep import gated_keys, load_sessions, session_passed
from .tabular import remeasured


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sweep", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    records = list(load_from_file(args.sweep))
    sessions = load_sessions(args.sweep)
    keys = {str(r.key) for r in records}
    task = records[0].create_task()
    status = {
        "sweep": args.sweep,
        "lines": len(records),
        "configs": len(keys),
        "gated_configs": len(gated_keys(records, sessions)),
        "sessions": [
            {"started": s["started"], "measured": s["measured"], "passed": session_passed(s)} for s in sessions
        ],
        "remeasured": remeasured(records, task.flop),
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(status, f, indent=1)
    rm = status["remeasured"] or {}
    print(
        f"{status['gated_configs']} of {status['configs']} configs gated; re-measured {rm.get('n')}: Spearman "
        f"{rm.get('spearman', float('nan')):.3f}, last/first median {rm.get('ratio_median', float('nan')):.3f} "
        f"(10-90% {rm.get('ratio_p10_p90')}); >=95% set first {rm.get('top_first')} last {rm.get('top_last')}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
