#!/usr/bin/env bash
# Every benchmark, one after another; each timing run takes the shared lock (never two at once on a small box).
# Durations measured on a 2-core znver3 shared with other work: sweeps 3-15 min each, replay ~25 min per
# workload (20 seeds x 6 schemes), each hardware preset ~15 min, the evaluator study ~10 min.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
# replays run with OMP_NUM_THREADS=1 (XGBoost's DMatrix otherwise spins one thread per core on every
# prediction); never export it for runs that time kernels: TVM's thread pool would then use one core
mkdir -p benchmarks/results
run() { echo "=== $* ($(date +%T))"; "$@"; echo "=== exit $? ($(date +%T))"; }
locked() { run flock /tmp/bench.lock nice -n 5 "$@"; }
# a registered replay on bmm-bert-nt: OUT SEEDS_PER_GROUP "SCHEMES" FIRST_SEED...; one replay per group of seeds, then
# the pooled report against AdaTune (OUT) and against AutoTVM (OUT/vs_xgb)
bmm_replay_groups() {
  local out=$1 n=$2 schemes=$3 inputs=()
  shift 3
  for f in "$@"; do
    # shellcheck disable=SC2086  # the schemes are words
    run env OMP_NUM_THREADS=1 $PY -m benchmarks.harness replay --sweeps benchmarks/data/bmm-bert-nt-autotvm.jsonl \
      --schemes $schemes --seeds "$n" --first-seed "$f" --trials 512 --plan-size 64 --target-fraction 0.95 \
      --out "$out/seeds$f"
    inputs+=("$out/seeds$f")
  done
  run $PY -m benchmarks.harness report --inputs "${inputs[@]}" --baseline RFEI+CSA+AE --out "$out"
  run $PY -m benchmarks.harness report --inputs "${inputs[@]}" --baseline XGB+SA --out "$out/vs_xgb"
}
if [ "${SKIP_SWEEP:-0}" != 1 ]; then
  locked $PY -m benchmarks.sweep --workload bmm-bert-nt --max-seconds 840
  locked $PY -m benchmarks.sweep --workload conv2d:N=1,CI=256,H=14,W=14,CO=512,KH=1,KW=1,stride=2,pad=0,space=small \
    --out benchmarks/data/conv2d-resnet18-L11-small.jsonl --max-seconds 840
  locked $PY -m benchmarks.sweep --workload dense-bert-qkv --max-configs 512 --max-seconds 840
  locked $PY -m benchmarks.sweep --workload conv2d:N=1,CI=256,H=14,W=14,CO=256,KH=3,KW=3,stride=1,pad=1,space=small \
    --out benchmarks/data/conv2d-resnet18-L9-small.jsonl --max-seconds 840
  locked $PY -m benchmarks.sweep --workload conv2d-resnet18-L6-small --max-seconds 840
fi
for f in benchmarks/data/*.jsonl; do
  w=$(basename "$f" .jsonl)
  case "$w" in *-autotvm) continue ;; esac  # the large space has its own settings below
  run env OMP_NUM_THREADS=1 $PY -m benchmarks.harness replay --sweeps "$f" --seeds 20 --trials 96 --plan-size 16 \
    --title "Replay: search schemes on $w" --out "/tmp/replay_parts/$w"
done
run env OMP_NUM_THREADS=1 $PY -m benchmarks.harness report --inputs /tmp/replay_parts/*/ --out benchmarks/results/replay
run env OMP_NUM_THREADS=1 $PY -m benchmarks.harness report --inputs /tmp/replay_parts/*/ --target-fraction 1.0 \
  --out benchmarks/results/replay/optimum
# the large space: AutoTVM's unpruned bmm-bert-nt (41,472 configs; the sweep resumes, ~60 min from scratch)
BIG="batch_matmul:B=12,M=128,N=128,K=64,layout=NT,space=autotvm"
locked $PY -m benchmarks.sweep --workload "$BIG" --out benchmarks/data/bmm-bert-nt-autotvm.jsonl
locked $PY -m benchmarks.tabular --sweep benchmarks/data/bmm-bert-nt-autotvm.jsonl --plan-size 64 --confirm 8 \
  --spot-check 400 --out benchmarks/results/tabular/bmm-bert-nt-autotvm
for arms in "adatune:XGB+SA RFEI+SA RFEI+CSA RFEI+CSA+AE RF+SA" "release:XGB+SA RL SA+AS RL+AS Random"; do
  # shellcheck disable=SC2086 # the schemes are separate words
  run env OMP_NUM_THREADS=1 $PY -m benchmarks.harness replay --sweeps benchmarks/data/bmm-bert-nt-autotvm.jsonl \
    --schemes ${arms#*:} --seeds 20 --trials 512 --plan-size 64 --target-fraction 0.95 \
    --out "benchmarks/results/large_space/${arms%%:*}"
done
run env OMP_NUM_THREADS=1 $PY -m benchmarks.harness replay --sweeps benchmarks/data/bmm-bert-nt-autotvm.jsonl \
  --schemes RFEI+SA RFEI-raw+SA RFEI-trees+SA --baseline RFEI+SA --seeds 20 --trials 512 --plan-size 64 \
  --target-fraction 0.95 --out benchmarks/results/large_space/rfei_uncertainty
locked $PY -m benchmarks.harness hardware --workloads "$BIG" --schemes XGB+SA RFEI+CSA+AE RL+AS --seeds 6 --budget 50 \
  --plan-size 64 --batch-size 16 --number 10 --repeat 10 --timeout 10 --out benchmarks/results/large_space/live
locked $PY -m benchmarks.harness evaluator --workloads bmm-bert-nt dense-bert-qkv --n-random 6 --n-top 6
locked $PY -m benchmarks.tune_workloads --budget 50
locked $PY -m benchmarks.ablation --no-replay --budget 60 --seeds 3 --plan-size 16 --workloads bmm-bert-nt
locked $PY -m benchmarks.release --no-replay --budget 60 --seeds 3 --plan-size 16 --workloads conv2d-resnet18-L11
for s in 0 1 2; do
  locked $PY -m benchmarks.kernels_vs_pytorch --stage tune --workloads dense-1024 conv2d-resnet18-L6 --seeds $s --trials 128
done
locked $PY -m benchmarks.kernels_vs_pytorch --stage time --workloads dense-1024 conv2d-resnet18-L6 --seeds 0 1 2
locked $PY -m benchmarks.trace_search --workloads softmax-bert dense-1024 --trials 16 --per-iter 8 --batch 8 --max-minutes 9
locked $PY -m benchmarks.trace_search --workloads bmm-bert-nt --arms ms-stock ms+builder ms+runner ms+cost-model \
  ms+search ms-adatune --trials 32 --per-iter 16 --batch 8 --seeds 0 1 2 --out benchmarks/results/trace_search/plugins
locked $PY -m benchmarks.trace_search --workloads bmm-bert-nt dense-1024 --arms ms-stock trace-xgb trace-rfei knob-xgb \
  --trials 16 --per-iter 8 --batch 8 --seeds 0 1 2 --out benchmarks/results/trace_search/seeds3  # ~21 min
locked $PY -m benchmarks.harness hardware --paper --workloads "dense:M=128,N=768,K=768,space=autotvm" \
  --schemes XGB+SA RFEI+CSA+AE --seeds 8 --budget 180 --plan-size 16 --batch-size 8 --timeout 60 \
  --target-fraction 0.9 --out benchmarks/results/large_space/live_paper_qkv_8seeds  # ~55 min
locked $PY -m benchmarks.harness hardware --paper --workloads "dense:M=128,N=768,K=768,space=autotvm" \
  --schemes XGB+SA RFEI+CSA+AE --seeds 8 --first-seed 8 --budget 180 --plan-size 16 --batch-size 8 --timeout 60 \
  --target-fraction 0.8 --out benchmarks/results/large_space/live_paper_qkv_confirm80  # ~53 min
locked $PY -m benchmarks.harness hardware --paper --workloads "dense:M=128,N=768,K=768,space=autotvm" \
  --schemes XGB+SA RFEI+CSA+AE --seeds 8 --first-seed 16 --budget 300 --plan-size 16 --batch-size 8 --timeout 60 \
  --target-fraction 0.8 --out benchmarks/results/large_space/live_paper_qkv_budget300  # ~86 min
locked $PY -m benchmarks.trace_search --workloads bmm-bert-nt dense-1024 conv2d-bias-relu-L6 \
  --arms trace-xgb trace-xgb-vector knob-xgb --trials 16 --per-iter 8 --batch 8 --seeds 0 1 2 \
  --out benchmarks/results/trace_search/vector_rules
locked $PY -m benchmarks.trace_search --workloads bmm-bert-nt dense-1024 --arms trace-rfei trace-rfei-vector knob-xgb \
  --trials 16 --per-iter 8 --batch 8 --seeds 0 1 2 --out benchmarks/results/trace_search/vector_rules_rfei
locked $PY -m benchmarks.trace_search --workloads bmm-bert-nt dense-1024 --arms trace-xgb trace-xgb-vector knob-xgb \
  --trials 16 --per-iter 8 --batch 8 --seeds 3 4 5 --out benchmarks/results/trace_search/vector_rules_seeds345
# the packed rule set (layout rules: operand panels, channels innermost), Zen 4
locked $PY -m benchmarks.trace_search --workloads bmm-bert-nt dense-1024 --arms trace-xgb-vector trace-xgb-packed \
  trace-rfei-packed knob-xgb --trials 16 --per-iter 8 --batch 8 --seeds 0 1 2 \
  --out benchmarks/results/trace_search/packed_rules_zen4  # ~11 min
locked $PY -m benchmarks.trace_search --workloads bmm-bert-nt dense-1024 conv2d-resnet18-L6 --arms trace-xgb-vector \
  trace-xgb-packed trace-rfei-packed knob-xgb --trials 16 --per-iter 8 --batch 8 --seeds 0 1 2 3 4 \
  --out benchmarks/results/trace_search/layout_rules_zen4  # ~30 min
locked $PY -m benchmarks.trace_search --workloads bmm-bert-nt conv2d-resnet18-L6 --arms trace-xgb-packed \
  trace-rfei-packed knob-xgb --trials 32 --per-iter 8 --batch 8 --seeds 0 1 2 \
  --out benchmarks/results/trace_search/layout_rules_zen4_32trials  # ~13 min
locked $PY -m benchmarks.trace_search --workloads bmm-bert-nt dense-1024 conv2d-resnet18-L6 --arms trace-xgb-packed \
  trace-rfei-packed knob-xgb --trials 32 --per-iter 8 --batch 8 --seeds 0 1 2 3 4 \
  --out benchmarks/results/trace_search/layout_rules_zen4_32trials_5seeds  # ~32 min
locked $PY -m benchmarks.trace_search --workloads bmm-bert-nt --arms trace-xgb-packed trace-rfei-packed knob-xgb \
  --trials 32 --per-iter 8 --batch 8 --seeds 5 6 7 8 9 \
  --out benchmarks/results/trace_search/layout_rules_zen4_32trials_bmm_seeds5-9  # ~11 min
locked $PY -m benchmarks.trace_search --workloads dense-1024 conv2d-resnet18-L6 --arms trace-xgb-packed \
  trace-rfei-packed knob-xgb --trials 32 --per-iter 8 --batch 8 --seeds 5 6 7 8 9 \
  --out benchmarks/results/trace_search/layout_rules_zen4_32trials_dense_conv_seeds5-9  # ~16 min
locked $PY -m benchmarks.no_template_ops --seeds 0 1 2 --trials 32 \
  --out benchmarks/results/no_template_ops/zen4  # ~15 min: layer norm, softmax, depthwise conv, max pool vs PyTorch
locked $PY -m benchmarks.no_template_ops --seeds 0 1 2 --trials 32 \
  --out benchmarks/results/no_template_ops/zen4_time_evaluator  # ~21 min: all five, TVM timed by time_evaluator
locked $PY -m benchmarks.no_template_ops --ops softmax softmax-fast-exp --seeds 0 1 2 --trials 32 --scalar-libm \
  --out benchmarks/results/no_template_ops/zen4_vector_math  # ~9 min: the softmaxes built with libmvec and without
run $PY -m benchmarks.vector_math_accuracy --out benchmarks/results/vector_math_accuracy  # seconds: ulp, no timing
locked $PY -m benchmarks.generic_ops \
  --out benchmarks/results/generic_ops_zen4_halving_reductions  # ~4 min: generic ops over T, vector tails or plain, vs PyTorch
locked $PY -m benchmarks.dynamic_model --check-t 1 8 16 32 62 64 96 128 --scalar-tails --rounds 9 \
  --out benchmarks/results/dynamic_bert_zen4_vector_tails_final  # ~15 min: dynamic BERT with and without the tails
locked $PY -m benchmarks.ms_builders --n 20 --per-call 3
locked $PY -m benchmarks.dietcode --out benchmarks/results/dietcode/all-ops  # ~23 min: all six BERT dynamic GEMMs
locked $PY -m benchmarks.dietcode --workloads scores --arms torch dietcode \
  --out benchmarks/results/dietcode/zen3_scores_crop_vote  # ~4 min: bmm NT with the crop chosen per kernel
locked $PY -m benchmarks.dietcode --workloads scores --arms torch dietcode --seed 1 \
  --out benchmarks/results/dietcode/zen3_scores_crop_vote_seed1  # ~4 min: the same on a second seed
locked $PY -m benchmarks.dietcode.pad_probe --out benchmarks/results/dietcode/pad_probe  # ~2 min: where A is padded
locked $PY -m benchmarks.dietcode.pad_probe --kinds bmm_nt --t 16 64 100 113 124 128 \
  --out benchmarks/results/dietcode/crop_probe  # ~2 min: where bmm NT's output is cropped
locked $PY -m benchmarks.dietcode.pad_probe --kinds bmm_nt --t 1 2 8 16 64 113 128 \
  --out benchmarks/results/dietcode/crop_probe_serial  # ~3 min: the same down to T = 1, with the crop on one thread
locked $PY -m benchmarks.dietcode.pad_extent_probe \
  --out benchmarks/results/dietcode/pad_extent_probe  # ~3 min: T padded to the tile or to the register tile
locked $PY -m benchmarks.dietcode --workloads qkv attn_out ffn1 ffn2 scores context --arms torch dietcode \
  --out benchmarks/results/dietcode/zen3_regpad  # ~21 min: the six GEMMs padded to the register tile
locked $PY -m benchmarks.dietcode --workloads qkv attn_out ffn1 ffn2 scores context --arms torch dietcode --seed 1 \
  --out benchmarks/results/dietcode/zen3_regpad_seed1  # ~22 min: the same on a second seed
locked $PY -m benchmarks.dietcode.kernel_probe --workload scores --kernels cpu:6x64x4/6x16/column \
  cpu:24x16x1/6x16/column cpu:12x64x4/12x8/column cpu:24x8x4/12x8/column cpu:8x64x4/8x8/column \
  --out benchmarks/results/dietcode/kernel_probe_one_vector  # ~1 min: one-vector register tiles on scores
locked $PY -m benchmarks.dietcode --workloads qkv attn_out ffn1 ffn2 scores context --arms torch dietcode \
  --out benchmarks/results/dietcode/zen4_regpad  # ~20 min: the six GEMMs on an AVX-512 Zen 4
locked $PY -m benchmarks.dietcode.kernel_probe --workload scores --kernels cpu:14x192x8/14x32/column \
  cpu:20x192x8/10x32/column cpu:24x64x4/24x16/column cpu:16x64x4/16x16/column cpu:28x64x4/28x16/column \
  cpu:12x128x4/12x16/column cpu:24x16x4/24x16/column --t 9 12 16 20 24 34 41 48 65 72 80 97 104 113 \
  --out benchmarks/results/dietcode/zen4_kernel_probe_one_vector  # ~1 min: one-vector tiles between multiples of 32
locked $PY -m benchmarks.dietcode.kernel_probe --workload scores --kernels cpu:14x192x8/14x32/column \
  cpu:20x192x8/10x32/column cpu:2x192x4/2x64/column cpu:16x64x4/16x16/column cpu:12x128x4/12x16/column \
  cpu:20x128x4/20x16/column cpu:12x64x8/12x16/column --t 32 56 64 88 96 120 128 \
  --out benchmarks/results/dietcode/zen4_kernel_probe_one_vector_multiples  # ~1 min: the same at multiples
locked $PY -m benchmarks.dietcode --workloads scores --arms torch dietcode \
  --out benchmarks/results/dietcode/zen4_scores_one_vector  # ~5 min: scores with one-vector tiles in its space
locked $PY -m benchmarks.dietcode --workloads scores --arms torch dietcode --seed 1 \
  --out benchmarks/results/dietcode/zen4_scores_one_vector_seed1  # ~5 min: the same on a second seed
locked $PY -m benchmarks.dietcode --workloads scores --arms torch dietcode --seed 2 \
  --out benchmarks/results/dietcode/zen4_scores_one_vector_seed2  # ~4 min: a third seed
# micro-kernels that unroll (unroll=64), Zen 4
locked $PY -m benchmarks.dietcode.kernel_probe --workload scores --kernels cpu:27x96x1/27x16 cpu:27x96x1/27x16/unroll64 \
  cpu:40x96x8/20x16/column cpu:40x96x8/20x16/column/unroll64 cpu:48x128x4/12x32/crop-tile \
  cpu:48x128x4/12x32/crop-tile/unroll64 cpu:72x32x2/18x16/column/crop-tile cpu:72x32x2/18x16/column/crop-tile/unroll64 \
  --t 5 24 43 62 81 100 119 128 --static-log benchmarks/results/dietcode/zen4_paper_search/static_scores.jsonl \
  --out benchmarks/results/dietcode/zen4_unroll_probe_scores  # ~1 min: unrolled or not, and the per-shape template
locked $PY -m benchmarks.dietcode.kernel_probe --workload context --kernels cpu:32x64x4/4x64 cpu:32x64x4/4x64/unroll64 \
  cpu:80x64x2/5x32 cpu:80x64x2/5x32/unroll64 --t 5 24 43 62 81 100 119 128 \
  --static-log benchmarks/results/dietcode/zen4_paper_search/static_context.jsonl --out benchmarks/results/dietcode/zen4_unroll_probe_context  # ~1 min
locked $PY -m benchmarks.dietcode.kernel_probe --workload qkv --kernels cpu:96x192x4/12x32 cpu:96x192x4/12x32/unroll64 \
  cpu:40x128x8/5x64 cpu:40x128x8/5x64/unroll64 --t 5 24 62 128 --out benchmarks/results/dietcode/zen4_unroll_probe_qkv  # ~1 min
locked $PY -m benchmarks.dietcode --workloads scores --arms torch dietcode --out benchmarks/results/dietcode/zen4_scores_unroll  # ~4 min
locked $PY -m benchmarks.dietcode --workloads scores --arms torch dietcode --seed 1 --out benchmarks/results/dietcode/zen4_scores_unroll_seed1
locked $PY -m benchmarks.dietcode --workloads scores --arms torch dietcode --seed 2 --out benchmarks/results/dietcode/zen4_scores_unroll_seed2
# what binding T gains against the per-shape template
locked $PY -m benchmarks.dietcode.kernel_probe --workload scores --kernels cpu:27x96x1/27x16/unroll64 \
  cpu:48x128x4/12x32/crop-tile/unroll64 cpu:40x96x8/20x16/column/unroll64 --t 24 62 81 119 128 \
  --static-log benchmarks/results/dietcode/zen4_paper_search/static_scores.jsonl --specialise --out benchmarks/results/dietcode/zen4_specialise_probe_scores
locked $PY -m benchmarks.dietcode.kernel_probe --workload context --kernels cpu:32x64x4/4x64 cpu:80x64x2/5x32 \
  --t 24 62 81 119 128 --static-log benchmarks/results/dietcode/zen4_paper_search/static_context.jsonl --specialise \
  --out benchmarks/results/dietcode/zen4_specialise_probe_context
locked $PY -m benchmarks.dietcode.kernel_probe --workload scores --kernels cpu:64x64x4/4x64/unroll64 \
  cpu:48x128x4/12x32/crop-tile/unroll64 cpu:27x96x1/27x16/unroll64 cpu:40x96x8/20x16/column/unroll64 \
  cpu:20x32x2/10x16/column/crop-tile --t 16 32 48 64 96 128 --aligned --specialise \
  --out benchmarks/results/dietcode/zen4_align_probe_scores  # ~1 min: aligned kernel versions against generic and T-bound
locked $PY -m benchmarks.dietcode.kernel_probe --workload context --kernels cpu:32x64x4/4x64 cpu:80x64x2/5x32 \
  cpu:16x64x8/8x16 --t 16 24 62 64 96 128 --aligned --specialise --out benchmarks/results/dietcode/zen4_align_probe_context
for s in 0 1 2; do
  locked $PY -m benchmarks.dietcode --workloads scores context --arms torch dietcode --seed $s \
    --out benchmarks/results/dietcode/zen4_aligned_seed$s  # ~7 min each: scores and context with aligned versions
done
locked $PY -m benchmarks.dietcode.kernel_probe --workload scores --kernels cpu:27x96x1/27x16/unroll64 \
  cpu:20x32x2/10x16/column/crop-tile cpu:24x24x4/24x8 cpu:24x24x4/24x8/unroll64 cpu:16x24x4/16x8/column/crop-tile \
  cpu:12x24x2/12x8/unroll64 cpu:28x48x2/28x8/unroll64 --t 17 20 24 34 36 49 50 \
  --static-log benchmarks/results/dietcode/zen4_paper_search/static_scores.jsonl \
  --out benchmarks/results/dietcode/zen4_half_vector_probe  # ~1 min: half-vector register tiles on scores
for s in 0 1 2; do
  locked $PY -m benchmarks.dietcode --workloads scores --arms torch dietcode --seed $s \
    --out benchmarks/results/dietcode/zen4_half_vector_seed$s  # ~3.5 min each: scores with half-vector tiles
done
locked $PY -m benchmarks.dynamic_model --fast-math --check-t 1 8 16 32 62 64 96 128 \
  --static-log benchmarks/results/models_zen4/records_bert-base_rfei-ae.jsonl \
  --out benchmarks/results/dynamic_bert_zen4_aligned  # ~12 min: dynamic BERT-base with both
$PY -m benchmarks.dietcode.vote_replay --logs 'benchmarks/results/dietcode/zen4_*/records_*.jsonl' \
  --out benchmarks/results/dietcode/vote_replay_zen4  # no timing (replays logs): what an unsampled T votes on
for s in 0 1 2; do
  locked $PY -m benchmarks.dietcode --workloads scores context --arms torch dietcode --seed $s \
    --out benchmarks/results/dietcode/zen4_calibrated_seed$s  # ~7 min each: the calibrated vote (the default)
done
locked $PY -m benchmarks.dietcode --workloads qkv attn_out ffn1 ffn2 scores context --arms torch dietcode --seed 1 \
  --out benchmarks/results/dietcode/zen4_six_seed1  # ~17 min: the six GEMMs on a second seed, final space
locked $PY -m benchmarks.models --models bert-base --arms rfei-ae --budget-min 10 --checkpoints 2 --fast-math \
  --out benchmarks/results/models_zen4  # ~14 min: static BERT-base on Zen 4 (its log feeds the next run)
locked $PY -m benchmarks.models --models resnet18 --arms rfei-ae --budget-min 10 --checkpoints 2 \
  --out benchmarks/results/models_zen4_resnet18  # ~13 min: ResNet-18 on Zen 4
for s in 1 2; do
  locked $PY -m benchmarks.models --models bert-base --arms rfei-ae --budget-min 10 --checkpoints 2 --fast-math \
    --seed $s --out benchmarks/results/models_zen4_seed$s  # ~14 min each: BERT-base's seeds 1 and 2
done
$PY -m benchmarks.models.seeds benchmarks/results/models_zen4 benchmarks/results/models_zen4_seed1 \
  benchmarks/results/models_zen4_seed2 --out benchmarks/results/models_zen4_bert_seeds
for s in 0 1 2; do
  locked $PY -m benchmarks.models --models resnet18 --arms rfei-ae --budget-min 15 --checkpoints 3 --seed $s \
    --out benchmarks/results/models_zen4_resnet18_15min_seed$s  # ~18 min each: ResNet-18, 15 min of tuning
done
$PY -m benchmarks.models.seeds benchmarks/results/models_zen4_resnet18_15min_seed0 \
  benchmarks/results/models_zen4_resnet18_15min_seed1 benchmarks/results/models_zen4_resnet18_15min_seed2 \
  --out benchmarks/results/models_zen4_resnet18_15min_seeds
for s in 0 1 2; do
  locked $PY -m benchmarks.models --models resnet18 --arms rfei-ae --budget-min 15 --checkpoints 3 --winograd \
    --seed $s --out benchmarks/results/models_zen4_resnet18_winograd_seed$s  # ~17 min each: Winograd convolutions
done
$PY -m benchmarks.models.seeds benchmarks/results/models_zen4_resnet18_winograd_seed0 \
  benchmarks/results/models_zen4_resnet18_winograd_seed1 benchmarks/results/models_zen4_resnet18_winograd_seed2 \
  --out benchmarks/results/models_zen4_resnet18_winograd_seeds
locked $PY -m benchmarks.models.run_ab --a benchmarks/results/models_zen4_resnet18_15min_seed{0,1,2} \
  --b benchmarks/results/models_zen4_resnet18_winograd_seed{0,1,2} --labels NCHW Winograd \
  --out benchmarks/results/models_zen4_resnet18_winograd_ab  # ~4 min: both ways' models timed in the same turns
locked $PY -m benchmarks.models.small_models --seeds 0 1 2 --budget-s 40 \
  --out benchmarks/results/small_models_zen4  # ~9 min: the three small test models against PyTorch eager
locked $PY -m benchmarks.dynamic_model --check-t 1 8 16 32 62 64 96 128 \
  --static-log benchmarks/results/models_zen4/records_bert-base_rfei-ae.jsonl \
  --out benchmarks/results/dynamic_bert_zen4  # ~10 min: exact GELU; the static model built without fast math
locked $PY -m benchmarks.dynamic_model --fast-math --check-t 1 8 16 32 62 64 96 128 \
  --static-log benchmarks/results/models_zen4/records_bert-base_rfei-ae.jsonl \
  --out benchmarks/results/dynamic_bert_zen4_fastmath  # ~10 min: both models with fast math, as the log was tuned
locked $PY -m benchmarks.kernels_vs_pytorch --workloads dense-1024 conv2d-resnet18-L6 --seeds 0 1 2 --trials 128 \
  --out benchmarks/results/kernels_vs_pytorch_zen4  # ~4 min: tuned kernels against PyTorch on Zen 4
locked $PY -m benchmarks.dynamic_model --check-t 1 8 16 32 62 64 96 128 \
  --static-log benchmarks/results/models_zen3/records_bert-base_rfei-ae.jsonl \
  --out benchmarks/results/dynamic_bert_zen3_regpad  # ~12 min: dynamic BERT-base as one module (needs models_zen3's log)
locked $PY -m benchmarks.rpc_overhead --out benchmarks/results/rpc_overhead
locked $PY -m benchmarks.models  # ~55 min: ResNet-18 and BERT-base, XGB and RFEI+AE, 10 min each
locked $PY -m benchmarks.dynamic_model --fast-math --check-t 1 8 16 32 62 64 96 128 \
  --static-log benchmarks/results/models_zen4/records_bert-base_rfei-ae.jsonl \
  --out benchmarks/results/dynamic_bert_zen4_generic  # ~10 min: generic schedules fused per row (panels still 192)
locked $PY -m benchmarks.dietcode.panel_probe \
  --out benchmarks/results/dietcode/panel_probe/output.txt  # ~4 min: dense weights in 192-, tile- or vector-wide panels
locked $PY -m benchmarks.dynamic_model --fast-math --check-t 1 8 16 32 62 64 96 128 \
  --static-log benchmarks/results/models_zen4/records_bert-base_rfei-ae.jsonl \
  --out benchmarks/results/dynamic_bert_zen4_vector_panels  # ~10 min: and dense weights in one-vector panels
locked $PY -m benchmarks.dynamic_model --fast-math --seed 1 --check-t 1 8 16 32 62 64 96 128 \
  --static-log benchmarks/results/models_zen4/records_bert-base_rfei-ae.jsonl \
  --out benchmarks/results/dynamic_bert_zen4_vector_panels_seed1  # ~11 min: the same on a second seed
locked $PY -m benchmarks.dietcode --workloads qkv attn_out ffn1 ffn2 --arms torch dietcode \
  --out benchmarks/results/dietcode/zen4_vector_panels  # ~13 min: the dense GEMMs with one-vector weight panels
locked $PY -m benchmarks.dietcode --workloads scores context qkv ffn2 --arms per-shape padded-largest torch numpy \
  dietcode --static-trials 64 --static-converge 24 \
  --out benchmarks/results/dietcode/zen4_paper_search  # ~39 min: against per-shape tuning to convergence, Zen 4
locked $PY -m benchmarks.dietcode --workloads scores context --arms per-shape padded-largest torch numpy dietcode \
  --static-trials 64 --static-converge 24 \
  --out benchmarks/results/dietcode/zen4_paper_search_attn  # ~20 min: the attention GEMMs again, aligned + calibrated
# GPU (DietCode's CUDA options; export and report run here, the runner on the GPU machine; see the README):
#   $PY -m benchmarks.gpu.dietcode_report --batch benchmarks/results/gpu_dietcode/batch --results \
#     benchmarks/results/gpu_dietcode/h200_run2 --out benchmarks/results/gpu_dietcode/h200_run2/report_calibrated \
#     --features program
#   $PY -m benchmarks.gpu.dietcode_export --out benchmarks/results/gpu_dietcode/batch_splitk --split-k 1,2,4,8 \
#     --interleave --from-run benchmarks/results/gpu_dietcode/h200_run2 --from-top 6 \
#     --also-keys benchmarks/results/gpu_dietcode/h200_run2/report_calibrated/deployed.json
#   there: python benchmarks/gpu/dietcode_runner.py BATCH --out $OUT --top 3 --repeat 5 --budget 330 \
#     --p2-keys deployed.json
#   $PY -m benchmarks.gpu.dietcode_options --batch benchmarks/results/gpu_dietcode/batch_splitk \
#     --results benchmarks/results/gpu_dietcode/h200_splitk --out benchmarks/results/gpu_dietcode/h200_splitk/report \
#     --chosen benchmarks/results/gpu_dietcode/h200_run2/report_calibrated/per_t.csv
#   (the same with --split-k 1,8,16,32 and no --interleave: batch_split32 / h200_split32, runner --top 2 --budget 60)
#   $PY -m benchmarks.gpu.dietcode_export --out benchmarks/results/gpu_dietcode/batch_splitk_full --split-k 1,2,4,8 \
#     --workloads qkv,ffn2
#   there: python benchmarks/gpu/dietcode_runner.py BATCH --out $OUT --top 3 --repeat 5 --budget 290 --p1-share 0.9
#   $PY -m benchmarks.gpu.dietcode_report --batch benchmarks/results/gpu_dietcode/batch_splitk_full \
#     --results benchmarks/results/gpu_dietcode/h200_splitk_full --out benchmarks/results/gpu_dietcode/h200_splitk_full/report
#   (the same for attention-out and FFN1: --workloads attn_out,ffn1, batch_splitk_rest / h200_splitk_rest, runner
#   --budget 300; and FFN2 with 16 and 32 parts: --split-k 1,2,4,8,16,32 --workloads ffn2, batch_splitk32_ffn2 /
#   h200_splitk32_ffn2, runner --budget 300)
for s in 1 2; do
  locked $PY -m benchmarks.dietcode --workloads scores context --arms per-shape padded-largest torch numpy dietcode \
    --static-trials 64 --static-converge 24 --seed $s \
    --out benchmarks/results/dietcode/zen4_paper_search_attn_seed$s  # ~19 min each
done
$PY -m benchmarks.dietcode.seeds --runs benchmarks/results/dietcode/zen4_paper_search_attn \
  benchmarks/results/dietcode/zen4_paper_search_attn_seed1 benchmarks/results/dietcode/zen4_paper_search_attn_seed2 \
  --out benchmarks/results/dietcode/zen4_paper_search_attn_seeds  # no timing: the three runs over seeds
# the calling thread's placement, and the models re-timed with it placed and the host state read per measurement
locked $PY -m benchmarks.thread_placement --rounds 30 --model benchmarks/results/models_zen4_resnet18_winograd_seed0 \
  --out benchmarks/results/thread_placement  # ~5 min
locked $PY -m benchmarks.models.run_ab --a benchmarks/results/models_zen4_resnet18_15min_seed{0,1,2} \
  --b benchmarks/results/models_zen4_resnet18_winograd_seed{0,1,2} --labels NCHW Winograd --rounds 30 \
  --out benchmarks/results/models_zen4_resnet18_winograd_ab_placed30  # ~9 min
locked $PY -m benchmarks.models.run_ab --a benchmarks/results/models_zen4 benchmarks/results/models_zen4_seed1 \
  benchmarks/results/models_zen4_seed2 --labels tuned --rounds 15 \
  --out benchmarks/results/models_zen4_bert_vs_engines_placed  # ~13 min
locked $PY -m benchmarks.dietcode --workloads scores --arms per-shape padded-largest torch numpy dietcode \
  --static-trials 64 --static-converge 24 --out benchmarks/results/dietcode/zen4_paper_search_scores_placed  # ~10 min
# the DietCode pass with the host state read around every timing; row-aligned context kernels; verify as an A/B arm
locked $PY -m benchmarks.dietcode --workloads scores --arms per-shape padded-largest torch numpy dietcode \
  --static-trials 64 --static-converge 24 --out benchmarks/results/dietcode/zen4_scores_states  # ~24 min
locked $PY -m benchmarks.dietcode.kernel_probe --workload context --kernels cpu:32x64x1/2x64 cpu:24x64x1/3x64 \
  cpu:20x64x1/5x64 cpu:12x64x1/3x64 cpu:64x64x4/4x64 --t 43 62 64 80 81 96 100 119 128 --aligned \
  --static-log benchmarks/results/dietcode/zen4_paper_search_attn/static_context.jsonl \
  --out benchmarks/results/dietcode/zen4_context_rows_aligned  # ~1 min
locked $PY -m benchmarks.dietcode --workloads scores context --arms torch dietcode dietcode-verified \
  --state-passes 1 --out benchmarks/results/dietcode/zen4_verify_ab  # ~23 min
# (the six-GEMM run with --state-passes 4 was cut off after QKV: benchmarks/results/dietcode/zen4_qkv_states)
# 2026-11-28: context against converged per-shape with the row-aligned versions; BERT-base against the host's peak
locked $PY -m benchmarks.dietcode --workloads context --arms per-shape padded-largest torch numpy dietcode \
  --static-trials 64 --static-converge 24 --out benchmarks/results/dietcode/zen4_context_aligned  # ~25 min
locked $PY -m benchmarks.dietcode --workloads context --arms per-shape padded-largest torch numpy dietcode \
  --static-trials 64 --static-converge 24 --seed 1 --out benchmarks/results/dietcode/zen4_context_aligned_seed1  # ~24 min
locked $PY -m benchmarks.models.peak_bound --tasks benchmarks/results/models_zen4/tasks.csv \
  --ab benchmarks/results/models_zen4_bert_vs_engines_placed --goal 0.8 --out benchmarks/results/peak_bound_zen4  # ~1 min
# where a tuned model loses to onnxruntime, per operator class; BERT-base with FFN2's K-blocked GEMM tiles (Zen 3)
locked $PY -m benchmarks.models.engine_profile benchmarks/results/models_zen3_bert_confirm --rounds 7 --repeats 10 \
  --out benchmarks/results/models_zen3_bert_confirm/engine_profile  # ~2.5 min
for s in 0 1; do
  locked $PY -m benchmarks.models --models bert-base --arms rfei-ae --budget-min 10 --checkpoints 2 --untuned-repeats 1 \
    --seed $s --cache-flush --confirm 4 --out benchmarks/results/models_zen3_bert_kblock_seed$s  # ~16 min each
done
locked $PY -m benchmarks.models.run_ab --a benchmarks/results/models_zen3_bert_confirm \
  benchmarks/results/models_zen3_bert_confirm_seed1 --b benchmarks/results/models_zen3_bert_kblock_seed{0,1} \
  --labels whole-K k-block --rounds 8 --out benchmarks/results/models_zen3_bert_kblock_seed0/ab_vs_whole_k  # ~7 min
locked $PY -m benchmarks.models.engine_profile benchmarks/results/models_zen3_bert_kblock_seed0 --rounds 7 \
  --repeats 10 --out benchmarks/results/models_zen3_bert_kblock_seed0/engine_profile  # ~2.5 min
locked $PY -m benchmarks.models --models bert-base --arms rfei-ae --budget-min 10 --checkpoints 2 --untuned-repeats 1 \
  --seed 2 --cache-flush --confirm 4 --out benchmarks/results/models_zen3_bert_kblock_seed2  # ~16 min: a third seed
$PY -m benchmarks.models.seeds benchmarks/results/models_zen3_bert_kblock_seed{0,1,2} \
  --out benchmarks/results/models_zen3_bert_kblock_seeds  # no timing
locked $PY -m benchmarks.models.run_ab --a benchmarks/results/models_zen3_bert_kblock_seed{0,1,2} --labels k-block \
  --rounds 8 --out benchmarks/results/models_zen3_bert_kblock_seeds/vs_engines  # ~9 min
locked $PY -m benchmarks.models.k_block_probe --out benchmarks/results/k_block_probe_zen3  # ~2 min: FFN2 whole-K vs blocks
locked $PY -m benchmarks.kernels_vs_pytorch --workloads dense-1024 --seeds 0 1 2 --trials 128 \
  --out benchmarks/results/kernels_vs_pytorch_zen3_kblock  # ~5 min: dense-1024 with the k_block knob in its space
# ResNet-18 with Winograd on the AVX2 Zen 3 (2026-11-29): three seeds, combined, re-timed together, profiled per layer
for s in 0 1 2; do
  locked $PY -m benchmarks.models --models resnet18 --arms rfei-ae --budget-min 15 --checkpoints 3 --winograd --seed $s \
    --cache-flush --confirm 4 --out benchmarks/results/models_zen3_resnet18_winograd_seed$s  # ~20 min each
done
$PY -m benchmarks.models.seeds benchmarks/results/models_zen3_resnet18_winograd_seed{0,1,2} \
  --out benchmarks/results/models_zen3_resnet18_winograd_seeds  # no timing
locked $PY -m benchmarks.models.run_ab --a benchmarks/results/models_zen3_resnet18_winograd_seed{0,1,2} \
  --labels winograd --rounds 8 --out benchmarks/results/models_zen3_resnet18_winograd_seeds/vs_engines  # ~3 min
locked $PY -m benchmarks.models.engine_profile benchmarks/results/models_zen3_resnet18_winograd_seed0 --rounds 7 \
  --repeats 20 --out benchmarks/results/models_zen3_resnet18_winograd_seed0/engine_profile  # ~1 min
locked $PY -m benchmarks.models.small_models --seeds 0 1 2 --budget-s 40 --out benchmarks/results/small_models_zen3  # ~9 min
# DietCode's attention GEMMs on the Zen 3 with the current code, and the aligned versions of their kernels
for s in 0 1; do
  locked $PY -m benchmarks.dietcode --workloads scores context --arms torch dietcode --seed $s \
    --out benchmarks/results/dietcode/zen3_attention_seed$s  # ~14 min each
done
locked $PY -m benchmarks.dietcode.kernel_probe --workload context --kernels cpu:24x64x1/6x16 cpu:6x96x4/3x24 \
  cpu:32x64x1/2x32 --t 84 85 90 91 96 97 --aligned --out benchmarks/results/dietcode/zen3_align_probe_context  # ~1 min
locked $PY -m benchmarks.dietcode.kernel_probe --workload scores --kernels cpu:6x96x2/6x16/crop-tile/unroll64 \
  cpu:44x24x4/11x8/crop-tile cpu:16x48x1/8x8/crop-tile/unroll64 --t 64 65 96 97 120 124 --aligned \
  --out benchmarks/results/dietcode/zen3_align_probe_scores  # ~1 min
# 2026-11-29 (second session), Zen 3: aligned versions deployed only where timed faster (check_versions), with the
# dietcode-all-versions arm (the same kernels deploying every version) as the A/B of that decision
for s in 1 0; do
  locked $PY -m benchmarks.dietcode --workloads scores context --arms torch dietcode dietcode-all-versions --seed $s \
    --out benchmarks/results/dietcode/zen3_attention_versions_seed$s  # ~25 min each
done
locked $PY -m benchmarks.dynamic_model --check-t 1 8 16 32 62 64 96 128 --rounds 9 \
  --static-log benchmarks/results/models_zen3_bert_kblock_seed0/records_bert-base_rfei-ae.jsonl \
  --out benchmarks/results/dynamic_bert_zen3_versions  # ~15 min: dynamic BERT-base against the k-block static model
# 2026-11-29 (third session), Zen 3: Winograd's tile by output map (F(2x2) on 7x7 maps) per layer, hot and cold, and
# in ResNet-18: the 7x7 layers alone swapped into the earlier seed 0, and two seeds tuned afresh with the table
locked $PY -m benchmarks.models.winograd_tiles --layers 512x7 256x14 --tiles 2 4 --budget-s 150 \
  --out benchmarks/results/winograd_small_maps  # ~17 min
locked $PY -m benchmarks.models.winograd_tiles --layers 512x7 256x14 --tiles 2 4 \
  --from-logs benchmarks/results/winograd_small_maps --out benchmarks/results/winograd_small_maps_cold  # ~5 min
for s in 0 1; do
  locked $PY -m benchmarks.models --models resnet18 --arms rfei-ae --budget-min 15 --checkpoints 3 --winograd --seed $s \
    --cache-flush --confirm 4 --out benchmarks/results/models_zen3_resnet18_winograd_small_seed$s  # ~21 min each
done
run $PY -m benchmarks.models.swap_records --base benchmarks/results/models_zen3_resnet18_winograd_seed0 \
  --donor benchmarks/results/models_zen3_resnet18_winograd_small_seed0 --template conv2d_winograd.x86 --arg 6=2 \
  --out benchmarks/results/models_zen3_resnet18_winograd_seed0_f2_swap
locked $PY -m benchmarks.models.run_ab --a benchmarks/results/models_zen3_resnet18_winograd_seed0 \
  --b benchmarks/results/models_zen3_resnet18_winograd_seed0_f2_swap --labels direct-7x7 F2-7x7 --rounds 30 \
  --out benchmarks/results/models_zen3_resnet18_winograd_seed0_f2_swap/vs_direct_30  # ~7 min
locked $PY -m benchmarks.models.run_ab --a benchmarks/results/models_zen3_resnet18_winograd_seed0 \
  benchmarks/results/models_zen3_resnet18_winograd_seed1 --b benchmarks/results/models_zen3_resnet18_winograd_small_seed0 \
  benchmarks/results/models_zen3_resnet18_winograd_small_seed1 --labels before small-maps --rounds 8 \
  --out benchmarks/results/models_zen3_resnet18_winograd_small_seeds/vs_before  # ~4 min
# 2026-11-29 (fourth session), Zen 3, issue 18: plug-in EI's registered confirmation on new seeds; the earlier large-space
# groups at 99%; a second large space (a 4,800-config subset of bmm NT 64's unpruned space), its gates and replays
bmm_replay_groups benchmarks/results/large_space/plugin_ei_confirm 20 "XGB+SA RFEI+CSA+AE RFEI-plugin+CSA+AE" \
  20 40  # ~17 min per group, one core
for g in ablation_current adatune_table_valued plugin_ei release; do
  run $PY -m benchmarks.harness report --inputs benchmarks/results/large_space/$g --target-fraction 0.99 \
    --out benchmarks/results/large_space/target99/$g
done
locked $PY -m benchmarks.sweep --workload "batch_matmul:B=12,M=64,N=64,K=64,layout=NT,space=autotvm" \
  --out benchmarks/data/bmm-nt-64-autotvm-subset.jsonl --max-configs 4800 --subset-seed 0  # ~32 min
locked $PY -m benchmarks.tabular --sweep benchmarks/data/bmm-nt-64-autotvm-subset.jsonl --plan-size 64 --confirm 8 \
  --spot-check 200 --out benchmarks/results/tabular/bmm-nt-64-autotvm-subset  # ~2 min
for f in 0 10; do
  run env OMP_NUM_THREADS=1 $PY -m benchmarks.harness replay --sweeps benchmarks/data/bmm-nt-64-autotvm-subset.jsonl \
    --schemes XGB+SA RFEI+SA RFEI+CSA RFEI+CSA+AE RF+SA RL SA+AS RL+AS --seeds 10 --first-seed $f --trials 512 \
    --plan-size 64 --target-fraction 0.95 --out benchmarks/results/large_space/bmm64_subset/seeds$f  # ~27 min each
  run env OMP_NUM_THREADS=1 $PY -m benchmarks.harness replay --sweeps benchmarks/data/bmm-nt-64-autotvm-subset.jsonl \
    --schemes XGB+SA RF+CSA+AE --seeds 10 --first-seed $f --trials 512 --plan-size 64 --target-fraction 0.95 \
    --out benchmarks/results/large_space/bmm64_subset_mean/seeds$f  # ~5 min each
done
for b in XGB+SA RFEI+SA; do
  run $PY -m benchmarks.harness report --inputs benchmarks/results/large_space/bmm64_subset/seeds0 \
    benchmarks/results/large_space/bmm64_subset/seeds10 --baseline $b --out "benchmarks/results/large_space/bmm64_subset/vs_$b"
done
run $PY -m benchmarks.harness report --inputs benchmarks/results/large_space/bmm64_subset_mean/seeds0 \
  benchmarks/results/large_space/bmm64_subset_mean/seeds10 --out benchmarks/results/large_space/bmm64_subset_mean
# 2026-11-29 (third session), Zen 1 (znver1, AVX2): scores before the three-vector split (6 rounds), the split's A/B,
# then the attention GEMMs with it
locked $PY -m benchmarks.dietcode --workloads scores --arms torch dietcode --dietcode-rounds 6 --seed 1 \
  --out benchmarks/results/dietcode/zen1_scores_rounds6_seed1_unsplit  # ~8 min (needs the code before c47f0af)
locked $PY -m benchmarks.dietcode.vector_split_probe --workload scores --kernels cpu:8x96x8/4x24 \
  cpu:24x72x4/3x24/column cpu:16x96x8/4x24/column/unroll64 --template dense.x86 --template-args 128 768 768 \
  --out benchmarks/results/dietcode/zen1_three_vector_probe  # ~3 min
for s in 0 1 2; do
  locked $PY -m benchmarks.dietcode --workloads scores context --arms torch dietcode --seed $s \
    --out benchmarks/results/dietcode/zen1_attention_split_seed$s  # 9-17 min each
done
$PY -m benchmarks.dietcode.seeds --runs benchmarks/results/dietcode/zen1_attention_split_seed0 \
  benchmarks/results/dietcode/zen1_attention_split_seed1 benchmarks/results/dietcode/zen1_attention_split_seed2 \
  --out benchmarks/results/dietcode/zen1_attention_split_seeds
locked $PY -m benchmarks.dietcode.kernel_probe --workload scores --kernels cpu:24x72x4/3x24/column \
  cpu:16x64x4/2x32/column/unroll64 --t 96 97 104 116 120 128 --specialise --aligned \
  --out benchmarks/results/dietcode/zen1_scores_large_t_probe  # ~2 min: where scores loses at large T
locked $PY -m benchmarks.models --models bert-base --arms rfei-ae --budget-min 10 --checkpoints 2 --untuned-repeats 1 \
  --seed 0 --cache-flush --confirm 4 --out benchmarks/results/models_zen1_bert_split_seed0  # ~19 min: BERT-base on Zen 1
# 2026-11-29 (fourth session), Zen 1: BERT-base's per-class profile; bmm_nt column tails (kernel A/B, then scores)
locked $PY -m benchmarks.models.engine_profile benchmarks/results/models_zen1_bert_split_seed0 --rounds 7 --repeats 10 \
  --out benchmarks/results/models_zen1_bert_split_seed0/engine_profile  # ~4 min
locked $PY -m benchmarks.dietcode.kernel_probe --workload scores --kernels cpu:12x96x1/6x16/column \
  cpu:12x96x1/6x16/column/tail8 cpu:24x72x4/3x24/column cpu:24x72x4/3x24/column/tail8 cpu:96x64x8/6x16/unroll64 \
  cpu:96x64x8/6x16/unroll64/tail8 --t 17 40 49 68 96 97 100 104 116 128 --rounds 7 \
  --out benchmarks/results/dietcode/zen1_tail_probe  # ~1 min (tail8 is the Zen 1's 8 lanes)
for s in 0 1 2; do
  locked $PY -m benchmarks.dietcode --workloads scores --arms torch dietcode --seed $s \
    --out benchmarks/results/dietcode/zen1_scores_tail_seed$s  # ~6 min each (code of 678752f)
done
# (the three runs above: tails in the space, before tail_twins; needs the code of 678752f)
$PY -m benchmarks.dietcode.seeds --runs benchmarks/results/dietcode/zen1_scores_tail_seed0 \
  benchmarks/results/dietcode/zen1_scores_tail_seed1 benchmarks/results/dietcode/zen1_scores_tail_seed2 \
  --out benchmarks/results/dietcode/zen1_scores_tail_seeds
for s in 0 1 2; do  # with tail_twins (ran at b9dd75d, where it was the default; now the flag)
  locked $PY -m benchmarks.dietcode --workloads scores --arms torch dietcode --seed $s --tail-twins \
    --out benchmarks/results/dietcode/zen1_scores_twins_seed$s  # ~7 min each
done
$PY -m benchmarks.dietcode.seeds --runs benchmarks/results/dietcode/zen1_scores_twins_seed0 \
  benchmarks/results/dietcode/zen1_scores_twins_seed1 benchmarks/results/dietcode/zen1_scores_twins_seed2 \
  --out benchmarks/results/dietcode/zen1_scores_twins_seeds
# 2026-11-30, Zen 1: ResNet-18 with Winograd convolutions, three seeds, combined and re-timed with the engines
for s in 0 1 2; do
  locked $PY -m benchmarks.models --models resnet18 --arms rfei-ae --budget-min 15 --checkpoints 3 --winograd --seed $s \
    --cache-flush --confirm 4 --out benchmarks/results/models_zen1_resnet18_winograd_seed$s  # ~21 min each
done
run $PY -m benchmarks.models.seeds benchmarks/results/models_zen1_resnet18_winograd_seed0 \
  benchmarks/results/models_zen1_resnet18_winograd_seed1 benchmarks/results/models_zen1_resnet18_winograd_seed2 \
  --out benchmarks/results/models_zen1_resnet18_winograd_seeds
# 2026-11-30, Zen 1: BERT-base's second seed and both combined
locked $PY -m benchmarks.models --models bert-base --arms rfei-ae --budget-min 10 --checkpoints 2 --untuned-repeats 1 \
  --seed 1 --cache-flush --confirm 4 --out benchmarks/results/models_zen1_bert_split_seed1  # ~22 min
run $PY -m benchmarks.models.seeds benchmarks/results/models_zen1_bert_split_seed0 \
  benchmarks/results/models_zen1_bert_split_seed1 --out benchmarks/results/models_zen1_bert_split_seeds
# 2026-11-30, issue 18: held-out recalibration of RFEI's sigma, registered (PREREGISTERED.md), on new seeds
bmm_replay_groups benchmarks/results/large_space/recalibrate 10 "XGB+SA RFEI+CSA+AE RFEI-recal+CSA+AE" \
  60 70  # ~13 min per group, one core
locked $PY -m benchmarks.models.engine_profile benchmarks/results/models_zen1_resnet18_winograd_seed0 --rounds 7 \
  --repeats 20 --out benchmarks/results/models_zen1_resnet18_winograd_seed0/engine_profile  # ~1.5 min (Zen 1)
# 2026-11-30 (second session), Zen 1, issue 20: every goal's figure on this host (each alone, one after another)
locked $PY -m benchmarks.dynamic_model --check-t 1 8 16 32 62 64 96 128 --rounds 9 \
  --static-log benchmarks/results/models_zen1_bert_split_seed0/records_bert-base_rfei-ae.jsonl \
  --out benchmarks/results/dynamic_bert_zen1  # ~14 min
locked $PY -m benchmarks.dietcode --workloads qkv ffn2 --arms per-shape padded-largest torch numpy dietcode \
  --static-trials 64 --static-converge 24 --out benchmarks/results/dietcode/zen1_paper_search_dense  # ~62 min
locked $PY -m benchmarks.dietcode --workloads attn_out ffn1 --arms torch dietcode \
  --out benchmarks/results/dietcode/zen1_dense_attn_out_ffn1  # ~12 min
locked $PY -m benchmarks.dietcode --workloads scores context --arms per-shape padded-largest torch numpy dietcode \
  --static-trials 64 --static-converge 24 --out benchmarks/results/dietcode/zen1_paper_search_attn  # ~48 min
# 2026-11-30 (third session), Zen 1, issue 18: the live 3-arm study at n=500, registered (PREREGISTERED.md)
locked $PY -m benchmarks.harness hardware --paper --workloads "dense:M=128,N=768,K=768,space=autotvm" \
  --schemes XGB+SA XGB+SA+AE RFEI+CSA+AE --seeds 6 --first-seed 24 --budget 240 --plan-size 16 --batch-size 8 \
  --timeout 60 --target-fraction 0.8 --out benchmarks/results/large_space/live_paper_qkv_zen1  # ~78 min
run $PY -m benchmarks.harness report --inputs benchmarks/results/large_space/live_paper_qkv_zen1 \
  --baseline XGB+SA+AE --title "hardware study, against XGB+SA+AE" \
  --out benchmarks/results/large_space/live_paper_qkv_zen1/vs_xgb_ae
# issue 19: ResNet-18 with every task by trace search (templates off; NCHW: TVM's rules make no space of Winograd)
for s in 0 1 2; do
  locked $PY -m benchmarks.models --models resnet18 --arms trace --budget-min 15 --checkpoints 3 --seed $s \
    --cache-flush --confirm 4 --out benchmarks/results/models_zen1_resnet18_trace_seed$s  # ~31 min each
done
# issue 19 item 5: the XGB arm's three seeds, as the rfei-ae arm's above (Winograd)
for s in 0 1 2; do
  locked $PY -m benchmarks.models --models resnet18 --arms xgb --budget-min 15 --checkpoints 3 --winograd --seed $s \
    --cache-flush --confirm 4 --out benchmarks/results/models_zen1_resnet18_winograd_xgb_seed$s  # ~21 min each
done
run $PY -m benchmarks.models.seeds benchmarks/results/models_zen1_resnet18_winograd_seed{0,1,2} \
  benchmarks/results/models_zen1_resnet18_winograd_xgb_seed{0,1,2} benchmarks/results/models_zen1_resnet18_trace_seed{0,1,2} \
  --out benchmarks/results/models_zen1_resnet18_arms_seeds
# issue 20: scores on the Zen 1 at small T and at multiples of the register tile (deployed kernels, T-bound builds,
# aligned versions, per-shape's best); then aligned versions with the kernel's column tile against nt = nr
locked $PY -m benchmarks.dietcode.kernel_probe --workload scores --kernels cpu:18x32x4/9x8/unroll64 \
  cpu:12x72x8/3x24/column/unroll64 cpu:24x24x8/3x24/column/unroll64 cpu:6x96x8/6x16/column cpu:5x5x1/5x5/unroll64 \
  --t 5 24 48 96 --rounds 7 --specialise --aligned \
  --static-log benchmarks/results/dietcode/zen1_paper_search_attn/static_scores.jsonl \
  --out benchmarks/results/dietcode/zen1_small_t_aligned_probe  # ~2 min (code before aligned_tile)
locked $PY -m benchmarks.dietcode.kernel_probe --workload scores --kernels cpu:12x72x8/3x24/column/unroll64 \
  cpu:12x24x8/3x24/column/unroll64 cpu:32x144x8/4x24/column cpu:32x24x8/4x24/column cpu:6x96x8/6x16/column \
  cpu:6x16x8/6x16/column --t 16 24 32 48 64 72 96 120 128 --rounds 7 --aligned --specialise \
  --out benchmarks/results/dietcode/zen1_aligned_column_tile_probe  # ~3 min (code before aligned_tile)
locked $PY -m benchmarks.dietcode --workloads scores --arms torch dietcode --seed 0 \
  --out benchmarks/results/dietcode/zen1_scores_aligned_tile_seed0  # ~6 min: scores with aligned_tile
# issue 20: the kernels at the T where scores ran below 0.9x PyTorch; then TVM's workspace pool inside parallel loops
# (register tiles' accumulators, per-tile copies), each A/B in turns
locked $PY -m benchmarks.dietcode.kernel_probe --workload scores --kernels cpu:8x64x4/4x16/unroll64 \
  cpu:8x64x4/4x16/unroll64/tail8 cpu:12x72x8/3x24/column/unroll64 cpu:8x24x1/4x24/column/unroll64/tail8 \
  cpu:18x24x2/9x8/unroll64 cpu:24x8x4/12x8/column --t 36 49 52 80 84 100 104 112 128 --rounds 7 --aligned \
  --specialise --out benchmarks/results/dietcode/zen1_below_torch_probe  # ~3 min (code before both changes)
locked $PY -m benchmarks.accumulator_scope_probe --tasks 8 --rounds 9 \
  --out benchmarks/results/accumulator_scope_probe_zen1  # ~2 min
locked $PY -m benchmarks.parallel_stack_probe --tasks 8 --rounds 9 \
  --out benchmarks/results/parallel_stack_probe_zen1  # ~2 min
# issue 20: scores over the range with both allocation changes, three seeds, then combined
for s in 0 1 2; do
  locked $PY -m benchmarks.dietcode --workloads scores --arms torch dietcode --seed $s \
    --out benchmarks/results/dietcode/zen1_scores_stack_seed$s  # ~5 min each
done
run $PY -m benchmarks.dietcode.seeds --runs benchmarks/results/dietcode/zen1_scores_stack_seed{0,1,2} \
  --out benchmarks/results/dietcode/zen1_scores_stack_seeds
locked $PY -m benchmarks.dietcode --workloads scores --arms per-shape torch dietcode --static-trials 64 \
  --static-converge 24 --out benchmarks/results/dietcode/zen1_scores_vs_per_shape_stack  # ~8 min
locked $PY -m benchmarks.dynamic_model --check-t 1 8 16 32 62 64 96 128 --rounds 9 \
  --static-log benchmarks/results/models_zen1_bert_split_seed0/records_bert-base_rfei-ae.jsonl \
  --out benchmarks/results/dynamic_bert_zen1_stack  # ~15 min, after both allocation changes
# issue 20: dynamic GEMMs that are not BERT's (a dense MLP layer, an 8-head attention bmm), T in [1, 256]
locked $PY -m benchmarks.dietcode --gemm mlp_up=dense:512:2048 --gemm heads8_scores=bmm_nt:8:32 \
  --workloads mlp_up heads8_scores --arms torch dietcode --t-range 1 256 --seed 0 \
  --out benchmarks/results/dietcode/zen1_non_bert_gemms  # ~21 min
