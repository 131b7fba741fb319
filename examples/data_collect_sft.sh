#!/usr/bin/env bash
# Collection → SFT, offline, on the embedded SmolLM2-135M-Instruct.
#
# 1. `podium data collect`: the embedded model, as the teacher (examples/data/embedded_teacher.yaml), answers each
#    question of examples/data/quiz.jsonl under the serial policy; the verifier grades each answer; the correct
#    ones are kept (at most one per question) in OUT/collect/sft.jsonl with their provenance, the funnel is
#    printed and saved in OUT/collect/funnel.json. Greedy decoding: the 135M model is too weak to sample well.
# 2. `podium train sft`: fine-tunes the embedded model on those rows (the loss on its own tokens only).
#
# Usage: examples/data_collect_sft.sh [OUT]   (default OUT: runs/data-collect-sft). Rerunning resumes.
# LIMIT=N collects on the first N questions only (the tests' quick run), STEPS=N trains N steps (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-runs/data-collect-sft}"
PODIUM="${PODIUM:-.venv/bin/podium}"

"$PODIUM" data collect --tasks examples/data/quiz.jsonl --teacher examples/data/embedded_teacher.yaml \
    --samples 1 --temperature 0 --out "$OUT/collect" ${LIMIT:+--limit "$LIMIT"}
"$PODIUM" train sft --config examples/data/train_sft_collected.yaml \
    --trajectories "$OUT/collect/sft.jsonl" --output-dir "$OUT/sft" ${STEPS:+--max-steps "$STEPS"}
