#!/usr/bin/env bash
# ctest vkt_gpt_replica_parity: vkt-gpt and its PyTorch replica
# (torch_replica.py) trained from the same initial weights, without dropout,
# on the same corpus, windows, shuffled order and schedule, end with the same
# validation loss (within 0.005 nats/char): the sample's whole pipeline, not
# only its arithmetic, matches PyTorch's. Exit 77 (skipped) where no python3
# imports torch.
#   replica_parity_test.sh VKT_GPT WORK_DIR
set -euo pipefail
program=$1 work=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=""
for p in "${VKT_PYTHON:-}" python3 /usr/bin/python3; do
  if [[ -n "$p" ]] && "$p" -c 'import torch' >/dev/null 2>&1; then python=$p; break; fi
done
[[ -n "$python" ]] || { echo "skipped: no python3 here imports torch"; exit 77; }
rm -rf "$work" && mkdir -p "$work"
data=/usr/share/games/fortunes
[[ -d "$data" ]] || data="$here/../data/fortunes-wisdom.txt"
model=(--data "$data" --layers 1 --width 32 --heads 2 --context 16 --batch-size 8 --dropout 0 --eval-batches 4)
# The first step's rate is 0 (the warm-up starts there): its checkpoint holds the initial weights.
"$program" --devices 0 "${model[@]}" --steps 1 --generate 0 --model-dir "$work/init" >/dev/null
ours=$("$program" --devices 0 "${model[@]}" --steps 30 --eval-every 30 --generate 0 \
  --model-dir "$work/run" | sed -n 's/^val_loss=\([0-9.]*\) .*/\1/p')
theirs=$("$python" "$here/torch_replica.py" "${model[@]}" --steps 30 --eval-every 30 --seed 0 \
  --init "$work/init/ckpt-1.safetensors" | sed -n 's/^val_loss=//p')
echo "vkt-gpt val_loss=$ours, replica val_loss=$theirs"
awk -v a="$ours" -v b="$theirs" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d < 0.005) }'
