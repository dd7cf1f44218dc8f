#!/usr/bin/env bash
# One claim of benchmarks/RESULTS.md per line (its section above it): raw runs to $RAW/<claim>/<host>, summaries (md, csv, png, json < 256 KiB)
# to benchmarks/results/<claim>/<host>. Timing runs take a lock. CLAIMS="a b": only those; SWEEP=1: re-sweep; GPU_RESULTS=DIR.
set -uo pipefail; cd "$(dirname "$0")/.."; export PY=${PY:-.venv/bin/python} RAW=${RAW:-/tmp/adatune-raw}
HOST=${HOST:-$($PY -c 'import adatune; print(adatune.target.host().attrs.get("mcpu", "cpu"))')}
export D=benchmarks/data R1="env OMP_NUM_THREADS=1 $PY -m benchmarks.harness replay" HOST GPU_RESULTS=${GPU_RESULTS:-} \
  BIG="--trials 512 --plan-size 64 --target-fraction 0.95" FAILED=""
claim() {  # claim NAME 'commands': run the commands with $OUT = $RAW/NAME/$HOST, then keep its summaries
  local name=$1 rc keep="$PWD/benchmarks/results/$1/$HOST"; case " ${CLAIMS:-$name} " in *" $name "*) ;; *) return 0 ;; esac
  export OUT="$RAW/$name/$HOST"; mkdir -p "$OUT" && echo "=== $name ($(date +%T)) -> $OUT"; flock /tmp/bench.lock nice -n 5 bash -c "set -e; $2"; rc=$?
  echo "=== $name exit $rc ($(date +%T))"; [ "$rc" = 0 ] || FAILED+=" $name"; mkdir -p "$keep" && (cd "$OUT" && find . -type f \
    \( -name '*.md' -o -name '*.csv' -o -name '*.png' -o \( -name '*.json' -size -257k \) \) -exec cp --parents {} "$keep" \;); }
# (the replay sections' inputs) complete sweeps of the small spaces and of AutoTVM's unpruned bmm NT spaces, then gzipped
[ "${SWEEP:-0}" = 1 ] && claim sweeps 'for w in bmm-bert-nt dense-bert-qkv conv2d-resnet18-L6-small conv2d-resnet18-L11; do
  $PY -m benchmarks.sweep --workload $w --out $OUT/$w.jsonl; done; for l in "L11 512,KH=1,KW=1,stride=2,pad=0" "L9 256,KH=3,KW=3,stride=1,pad=1"
  do set -- $l; $PY -m benchmarks.sweep --workload conv2d:N=1,CI=256,H=14,W=14,CO=$2,space=small --out $OUT/conv2d-resnet18-$1-small.jsonl; done
  $PY -m benchmarks.sweep --workload "batch_matmul:B=12,M=128,N=128,K=64,layout=NT,space=autotvm" --out $OUT/bmm-bert-nt-autotvm.jsonl
  $PY -m benchmarks.sweep --workload "batch_matmul:B=12,M=64,N=64,K=64,layout=NT,space=autotvm" --max-configs 4800 --subset-seed 0 \
    --out $OUT/bmm-nt-64-autotvm-subset.jsonl; $PY -m benchmarks.sweep --workload "batch_matmul:B=12,M=128,N=128,K=64,layout=NT,\
space=autotvm" --number 50 --repeat 10 --max-configs 6000 --subset-seed 0 --out $OUT/bmm-bert-nt-autotvm-n500.jsonl
  for f in $OUT/*.jsonl; do gzip -9 -nc $f > $D/$(basename $f).gz; done'
# Tuned kernels against PyTorch
claim kernels '$PY -m benchmarks.kernels_vs_pytorch --workloads dense-1024 conv2d-resnet18-L6 --seeds 0 1 2 --trials 128 --out $OUT'
# Padded kernels for awkward shapes
claim awkward-shapes '$PY -m benchmarks.kernels_vs_pytorch --workloads dense:M=62,N=768,K=3072 dense:M=64,N=768,K=3072 \
  batch_matmul:B=12,M=62,N=62,K=64,layout=NT batch_matmul:B=12,M=64,N=64,K=64,layout=NT --seeds 0 1 2 --trials 48 --cpu-rounds 0 --out $OUT'
# Search methods on small spaces (replay)
claim replay-small 'for w in bmm-bert-nt dense-bert-qkv conv2d-resnet18-L{6,9,11}-small; do $R1 --sweeps $D/$w.jsonl.gz --seeds 20 \
  --trials 96 --plan-size 16 --out $OUT/$w; done; $PY -m benchmarks.harness report --inputs $OUT/*/ --out $OUT
  $PY -m benchmarks.tabular --sweep $D/conv2d-resnet18-L11.jsonl.gz --plan-size 64 --confirm 8 --out $OUT/conv2d-resnet18-L11'
# Search methods on a 41,472-config space (replay)
claim large-space 'T=$D/bmm-bert-nt-autotvm.jsonl.gz; $PY -m benchmarks.tabular --sweep $T --plan-size 64 --confirm 8 --out $OUT/table
  $R1 --sweeps $T --schemes XGB+SA RF+SA RFEI+SA RFEI-trees+SA RFEI+CSA RFEI-trees+CSA --seeds 20 $BIG --out $OUT/ablation
  $R1 --sweeps $T --schemes XGB+SA XGB+SA+AE RFEI+CSA+AE RFEI-trees+CSA+AE --seeds 20 $BIG --out $OUT/adatune
  $R1 --sweeps $T --schemes XGB+SA RL SA+AS RL+AS --seeds 20 $BIG --out $OUT/release
  for g in "plugin 20 20 40" "recal 10 60 70"; do set -- $g; for f in $3 $4; do $R1 --sweeps $T --schemes XGB+SA RFEI+CSA+AE \
    RFEI-$1+CSA+AE --seeds $2 --first-seed $f $BIG --out $OUT/$1/seeds$f; done; for b in RFEI+CSA+AE XGB+SA; do
    $PY -m benchmarks.harness report --inputs $OUT/$1/seeds* --baseline $b --out $OUT/$1/vs_$b; done; done
  $PY -m benchmarks.harness report --inputs $OUT/ablation --baseline RFEI+SA --out $OUT/ablation/vs_rfei'
# AdaTune and ReLeASE as their papers ran them (replay)
claim papers 'for a in "15 annealer RFEI+SA/abs-T RFEI+SA RFEI+CSA+AE/abs-T RFEI+CSA+AE" "15 baseline XGB+SA AutoTVM-2020" "15 autotvm32 \
  XGB+SA AutoTVM-2020/32" "15 adatune_arms RFEI+CSA XGB+SA+AE RFEI-released+CSA+AE" "8 release XGB+SA SA+AS/eps SA+AS RL RL+AS/eps RL+AS"
  do set -- $a; $R1 --sweeps $D/bmm-bert-nt-autotvm.jsonl.gz $BIG --seeds $1 --out $OUT/$2 --baseline $3 --schemes ${@:3}; done
  for s in "AutoTVM-2020 XGB+SA XGB+SA+AE RFEI-released+CSA+AE" "RFEI+SA RFEI+CSA RFEI+CSA+AE"; do set -- $s; $R1 --sweeps "$D/*-n500.jsonl.gz" \
  $BIG --seeds 15 --out $OUT/n500/$1 --baseline $1 --schemes $@ & done; wait  # the n = 500 tables (the AdaTune paper regime)
  $R1 --sweeps "$D/*-n500.jsonl.gz" $BIG --seeds 8 --out $OUT/n500/release --baseline XGB+SA --schemes XGB+SA RL SA+AS RL+AS
  for b in XGB+SA AutoTVM-2020 RFEI+SA/abs-T RFEI+CSA+AE/abs-T SA+AS/eps RL+AS/eps RL; do $PY -m benchmarks.harness report --baseline $b \
    --out $OUT/vs_${b//\//_} --inputs $OUT/release $OUT/adatune_arms $OUT/annealer $OUT/baseline $OUT/autotvm32 $OUT/n500/*/; done'
# Search methods on a second large space (replay)
claim second-large-space 'T=$D/bmm-nt-64-autotvm-subset.jsonl.gz; $PY -m benchmarks.tabular --sweep $T --plan-size 64 --confirm 8 --out $OUT/table
  for f in 0 10; do $R1 --sweeps $T --schemes XGB+SA RFEI+SA RFEI+CSA RFEI+CSA+AE RF+SA RF+CSA+AE RL SA+AS RL+AS --seeds 10 \
    --first-seed $f $BIG --out $OUT/seeds$f; done
  for b in XGB+SA RFEI+SA; do $PY -m benchmarks.harness report --inputs $OUT/seeds* --baseline $b --out $OUT/vs_$b; done'
# AdaTune live where runs cost time (n=500)
claim live-n500 'W=conv2d:N=1,CI=256,H=14,W=14,CO=256,KH=3,KW=3,stride=1,pad=1,space=autotvm; H="$PY -m benchmarks.harness"
  $H hardware --paper --workloads $W --schemes AutoTVM-2020 XGB+SA+AE RFEI+CSA+AE --baseline AutoTVM-2020 --seeds 8 --first-seed 100 \
  --budget 150 --plan-size 16 --batch-size 8 --timeout 60 --target-fraction 0.8 --out $OUT; $H report --inputs $OUT --baseline XGB+SA+AE --out $OUT/vs_ae'
# The adaptive evaluator
claim evaluator 'for s in 0 1; do $PY -m benchmarks.harness evaluator --paper --seed $s --workloads dense-1024 dense-bert-qkv \
  conv2d-resnet18-L6 conv2d-resnet18-L9 --sweep-dir /nonexistent --n-top 8 --n-random 4 --confirm-repeats 5 --timeout 120 --out $OUT/seed$s
  done; $PY -m benchmarks.harness hardware --space trace --workloads dense-1024 --schemes TS-XGB TS-XGB+AE TS-RFEI+AE --baseline \
  TS-XGB --seeds 8 --budget 45 --plan-size 16 --batch-size 8 --number 5 --repeat 10 --timeout 20 --out $OUT/trace_live
  $PY -m benchmarks.harness evaluator-rules --sweep $D/bmm-bert-nt-autotvm-n500.jsonl.gz --out $OUT/rules'
# Trace search against the knob templates
claim trace-vs-templates 'for f in 0 5; do $PY -m benchmarks.trace_search --workloads bmm-bert-nt dense-1024 conv2d-resnet18-L6 \
  --arms trace-xgb-packed trace-rfei-packed knob-xgb --trials 32 --per-iter 8 --batch 8 --seeds $(seq $f $((f + 4))) --out $OUT/seeds$f; done'
# The meta_schedule plug-ins
claim plugins '$PY -m benchmarks.trace_search --workloads bmm-bert-nt --arms ms-stock ms+builder ms+runner ms+cost-model ms+search \
  ms-adatune --trials 32 --per-iter 16 --batch 8 --seeds 0 1 2 --out $OUT'
# Operators with no template
claim no-template-ops '$PY -m benchmarks.no_template_ops --seeds 0 1 2 --trials 32 --out $OUT/tuned
  $PY -m benchmarks.no_template_ops --rules packed --seeds 0 --trials 32 --generic --out $OUT/generic'
# Generic operators over a symbolic T
claim generic-ops '$PY -m benchmarks.generic_ops --out $OUT'
# DietCode: BERT's dynamic GEMMs against PyTorch
claim dietcode-vs-pytorch 'for s in 0 1 2; do $PY -m benchmarks.dietcode --workloads qkv attn_out ffn1 ffn2 scores context --arms torch \
  dietcode --seed $s --out $OUT/seed$s; done; $PY -m benchmarks.dietcode.seeds --runs $OUT/seed0 $OUT/seed1 $OUT/seed2 --out $OUT'
# DietCode against converged per-shape tuning
claim dietcode-vs-per-shape '$PY -m benchmarks.dietcode --workloads qkv ffn2 scores context --arms per-shape padded-largest torch \
  numpy dietcode --static-trials 64 --static-converge 24 --out $OUT'
# DietCode on GEMMs that are not BERT's
claim dietcode-other-gemms '$PY -m benchmarks.dietcode --gemm mlp_up=dense:512:2048 --gemm heads8_scores=bmm_nt:8:32 --workloads \
  mlp_up heads8_scores --arms torch dietcode --t-range 1 256 --seed 0 --out $OUT'
# Whole models: BERT-base
claim bert-base 'for s in 0 1 2; do $PY -m benchmarks.models --models bert-base --arms rfei-ae --budget-min 10 --checkpoints 2 \
  --seed $s --cache-flush --confirm 4 --out $OUT/seed$s; done; $PY -m benchmarks.models.seeds $OUT/seed0 $OUT/seed1 $OUT/seed2 \
  --out $OUT; $PY -m benchmarks.models.run_ab --a $OUT/seed0 $OUT/seed1 $OUT/seed2 --labels tuned --rounds 15 --out $OUT/ab'
# Dynamic BERT-base as one module (its static reference: bert-base's seed 0, run first)
claim dynamic-bert '$PY -m benchmarks.dynamic_model --check-t 1 8 16 32 62 64 96 128 --rounds 9 \
  --static-log $RAW/bert-base/$HOST/seed0/records_bert-base_rfei-ae.jsonl --out $OUT'
# Whole models: ResNet-18, and Tuners for a whole model (the same runs with the XGB and trace arms)
claim resnet18 'for a in rfei-ae xgb trace; do w=--winograd; [ $a = trace ] && w=; for s in 0 1 2; do $PY -m benchmarks.models \
  --models resnet18 --arms $a --budget-min 15 --checkpoints 3 $w --seed $s --cache-flush --confirm 4 --out $OUT/$a-seed$s; done; done
  $PY -m benchmarks.models.seeds $OUT/*-seed? --out $OUT; $PY -m benchmarks.models.run_ab --a $OUT/rfei-ae-seed? --labels winograd --rounds 30 --out $OUT/ab'
# CUDA templates on an H100: a state folder whose rounds ran on the GPU machine (benchmarks.gpu round / ingest / retime)
[ -n "${GPU_RESULTS:-}" ] && claim gpu-templates 'cp -r $GPU_RESULTS/gpu/. $OUT && $PY -m benchmarks.gpu report --state $OUT'
# DietCode on an H200: benchmarks.gpu.dietcode_export's batch timed by cuda_export/cupy_runner.py, under $GPU_RESULTS/dietcode
[ -n "${GPU_RESULTS:-}" ] && claim gpu-dietcode '$PY -m benchmarks.gpu.dietcode_report --batch $GPU_RESULTS/dietcode/batch \
  --results $GPU_RESULTS/dietcode/results --rounds 12 --out $OUT'
[ -z "$FAILED" ] || { echo "failed:$FAILED"; exit 1; }
