#!/usr/bin/env bash
# Regenerates the committed goldens in this folder. Usage, after building: golden/data/make_goldens.sh
# [path/to/attncheck] (absolute, or relative to golden/data; default ../../build/cli/attncheck).
# Weights are named by the generator and projection gradients sketched (golden/SCHEMA.md), except in
# small_softcap_padding.h5, which stores everything in full as an example for readers. The others:
# batch 2, 6 tokens, decoding 4 + 1 + 1.
set -euo pipefail
cd "$(dirname "$0")"
attncheck=${1:-../../build/cli/attncheck}
compact=(--weights generated --sketch-gradients --batch 2 --seq 6 --seed 2026)
decode=(--decode 4,1,1)

"$attncheck" golden make --preset qwen3-0.6b --tp 1 "${compact[@]}" "${decode[@]}" -o qwen3-0.6b_tp1.h5
"$attncheck" golden make --preset qwen3-0.6b --tp 2 "${compact[@]}" "${decode[@]}" -o qwen3-0.6b_tp2.h5
"$attncheck" golden make --preset qwen3-0.6b --tp 4 "${compact[@]}" "${decode[@]}" --pad-keys -o qwen3-0.6b_tp4.h5
"$attncheck" golden make --preset qwen3-4b --tp 2 "${compact[@]}" "${decode[@]}" -o qwen3-4b_tp2.h5
"$attncheck" golden make --preset qwen3-32b --tp 16 "${compact[@]}" "${decode[@]}" -o qwen3-32b_tp16.h5
"$attncheck" golden make --preset gemma-3-270m --tp 1 "${compact[@]}" "${decode[@]}" -o gemma-3-270m_tp1.h5
"$attncheck" golden make --preset gemma-3-270m --tp 4 "${compact[@]}" "${decode[@]}" --pad-keys -o gemma-3-270m_tp4.h5
"$attncheck" golden make --preset gpt-neox-20b --tp 1 "${compact[@]}" "${decode[@]}" -o gpt-neox-20b_tp1.h5
"$attncheck" golden make --hidden 64 --heads 4 --kv-heads 2 --head-dim 24 --softcap 5 --qkv-bias --out-bias \
  --batch 3 --seq 7 --pad-keys --activations heavy-tailed --decode 3,2,1 --seed 2026 -o small_softcap_padding.h5
