#!/usr/bin/env bash
# ctest bench_pytorch_scripts: every bench's PyTorch reference runs to its
# result lines at each precision its bench passes it, on this machine's torch,
# at tiny sizes (the benches' own sizes are theirs to time). Exit 77 (skipped)
# where no python3 imports torch.
#   check_pytorch_scripts.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=""
for p in "${VKT_PYTHON:-}" python3 /usr/bin/python3; do
  if [[ -n "$p" ]] && "$p" -c 'import torch' >/dev/null 2>&1; then python=$p; break; fi
done
[[ -n "$python" ]] || { echo "skipped: no python3 here imports torch"; exit 77; }
failed=0
# check NAME EXPECTED_LINE SCRIPT ARGS...: the script succeeds and prints EXPECTED_LINE
# and a positive rate line.
check() {
  local name=$1 expected=$2 script=$3
  shift 3
  local out
  if ! out=$("$python" "$here/$script" --steps 1 --warmup 0 "$@" 2>&1); then
    echo "FAILED $name: $script $*"$'\n'"$out"
    failed=1
    return
  fi
  if [[ -n "$expected" ]] && ! grep -qx "$expected" <<<"$out"; then
    echo "FAILED $name: no line '$expected' in"$'\n'"$out"
    failed=1
    return
  fi
  if ! grep -Eq '^pytorch_[a-z_]*per_s=[0-9.]*[1-9]' <<<"$out"; then
    echo "FAILED $name: no positive pytorch_..._per_s line in"$'\n'"$out"
    failed=1
    return
  fi
  echo "ok $name"
}
gpt=(--batch 2 --context 8 --width 16 --layers 1 --heads 2 --vocab 11)
check "gpt fp32" torch_precision=fp32 pytorch_gpt.py "${gpt[@]}" --precision fp32
check "gpt bf16" torch_precision=bf16 pytorch_gpt.py "${gpt[@]}" --precision bf16
# The CPU has no fp16 autocast: the reference runs, and says, fp32.
check "gpt fp16 on the CPU" torch_precision=fp32 pytorch_gpt.py "${gpt[@]}" --precision fp16
finetune=(--vocab 11 --hidden 16 --layers 1 --heads 2 --kv-heads 1 --intermediate 24
          --context 8 --batch 2 --lora-rank 2 --generate-tokens 4 --prompt-tokens 2)
check "finetune fp32" torch_precision=fp32 pytorch_finetune.py "${finetune[@]}" --precision fp32
check "finetune bf16" torch_precision=bf16 pytorch_finetune.py "${finetune[@]}" --precision bf16
check "finetune fp16 on the CPU" torch_precision=fp32 pytorch_finetune.py "${finetune[@]}" \
  --precision fp16
# Generation alone: its rate lines are then the only ones the check can find.
check "finetune generate" torch_precision=fp32 pytorch_finetune.py "${finetune[@]}" --skip-train
check "mlp sgd" "" pytorch_mlp.py --batch 4 --widths 8,6,3 --optimizer sgd
check "mlp adam" "" pytorch_mlp.py --batch 4 --widths 8,6,3 --optimizer adam
check "cnn" "" pytorch_cnn.py --batch 4 --filters 2,2 --dense 4
exit $failed
