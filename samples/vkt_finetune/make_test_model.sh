#!/usr/bin/env bash
# ctest vkt_finetune_model (the fixture of vkt-finetune's tests): a small
# Llama-family model in Hugging Face's layout (scripts/make_tiny_model.py:
# random weights, config.json, a SentencePiece tokenizer.model trained on the
# fortunes corpus) in OUT, made once. Exit 77 (skipped) where no python3
# imports numpy and sentencepiece (scripts/deps.sh installs them).
#   make_test_model.sh OUT
set -euo pipefail
out=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=""
for p in "${VKT_PYTHON:-}" python3 /usr/bin/python3; do
  if [[ -n "$p" ]] && "$p" -c 'import numpy, sentencepiece' >/dev/null 2>&1; then python=$p; break; fi
done
[[ -n "$python" ]] || { echo "skipped: no python3 here imports numpy and sentencepiece"; exit 77; }
rm -rf "$out"
"$python" "$here/../../scripts/make_tiny_model.py" "$out" --layers 2 --hidden 64 --heads 4 \
  --kv-heads 2 --intermediate 128 --vocab 512 --max-positions 64 --init-std 0.2 \
  --corpus "$here/../data/fortunes-wisdom.txt"
