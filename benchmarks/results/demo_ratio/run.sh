#!/bin/bash
# demo ratio before/after, alternating: new, old, new, old
cd /tmp/demo
for i in 1 2; do
  for arm in new old; do
    if [ $arm = old ]; then PP=/tmp/base; else PP=/work/main; fi
    cat /proc/loadavg > load_${arm}_$i.txt
    (cd /tmp/demo && PYTHONPATH=$PP /work/main/.venv/bin/python -c "import adatune,sys; print(adatune.__file__, file=sys.stderr); from adatune.cli import main; sys.exit(main(['tune','--workload','dense-1024','--tuner','xgb','--trials','128','--log','demo_${arm}_$i.jsonl','--reference']))") > out_${arm}_$i.txt 2>&1
    cat /proc/loadavg >> load_${arm}_$i.txt
  done
done
