#!/usr/bin/env bash
# Checks the two Python programs the checkpoint tests are built on, before any C++ is compared
# with them: scripts/make_tiny_model.py (tiny Hugging Face checkpoints) and
# tests/models/torch_decoder_reference.py (their float64 logits).
#
# A reference that is wrong in a way its own numbers can't show would make every later parity
# test wrong with it, so this checks properties a mistake would break:
#   - the generator writes the same bytes twice, and a tokenizer of exactly vocab_size pieces
#     with Llama's special ids;
#   - causality: the logits of a prefix are the first rows of the full sequence's (1e-12);
#   - a batch's rows are the rows run alone (1e-12);
#   - --self-check: a numpy recomputation with explicit loops over positions and heads (its
#     own rotary pairing, softmax, norms and kv-head mapping) matches the torch one (1e-10);
#   - --loss and --greedy agree with the printed logits;
#   - Llama: rotary embedding is relative (every position shifted by 7: same logits, 1e-10);
#     grouped-query attention equals full attention with each kv head copied to the query
#     heads of its group (1e-12), and a copy to the wrong heads does not; 2 shards read as
#     the same model as 1 file.
# Models: a Llama with GQA and widths that are no power of two (hidden 60, 6 heads of 10,
# 2 kv heads, intermediate 70, vocab 300, bf16, 2 shards; a head width of 7, as hidden 42
# would give, has no rotary pairing), a GPT-2 (f16), and a Qwen2 (q/k/v biases, tied, f32).
#
# Usage: tests/models/test_reference_scripts.sh. Uses $VKT_PYTHON, else the first of python3
# and /usr/bin/python3 that imports torch, numpy and sentencepiece; exits 77 (skip) when none
# does. Prints one "ok - ..." line per check and "N passed, M failed" last.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
make_model="$root/scripts/make_tiny_model.py"
reference="$here/torch_decoder_reference.py"

python=""
for candidate in ${VKT_PYTHON:+"$VKT_PYTHON"} python3 /usr/bin/python3; do
  if "$candidate" -c "import numpy, sentencepiece, torch" 2>/dev/null; then
    python="$candidate"
    break
  fi
done
if [[ -z "$python" ]]; then
  echo "skipped: no python3 here imports torch, numpy and sentencepiece" \
    "(apt-get install python3-torch python3-sentencepiece, or set VKT_PYTHON)"
  exit 77
fi

# Importing the two programs as modules must not leave __pycache__ folders in the source tree.
export PYTHONDONTWRITEBYTECODE=1

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
report() { # report NAME STATUS
  if [[ "$2" == 0 ]]; then
    echo "ok - $1"
    passed=$((passed + 1))
  else
    echo "FAILED - $1"
    failed=$((failed + 1))
  fi
}

llama_args=(--arch llama --layers 2 --hidden 60 --heads 6 --kv-heads 2 --intermediate 70
  --vocab 300 --dtype bf16 --seed 3)
"$python" "$make_model" "$tmp/llama" "${llama_args[@]}" --shards 2 >/dev/null 2>&1
"$python" "$make_model" "$tmp/llama_again" "${llama_args[@]}" --shards 2 >/dev/null 2>&1
"$python" "$make_model" "$tmp/llama_1file" "${llama_args[@]}" --shards 1 --tokenizer none \
  >/dev/null
"$python" "$make_model" "$tmp/gpt2" --arch gpt2 --layers 2 --hidden 36 --heads 3 --vocab 300 \
  --max-positions 32 --dtype f16 --seed 4 >/dev/null
"$python" "$make_model" "$tmp/qwen2" --model-type qwen2 --layers 2 --hidden 40 --heads 4 \
  --kv-heads 2 --intermediate 56 --vocab 300 --tie --tokenizer none --seed 5 >/dev/null

same=0
for file in "$tmp"/llama/*; do
  cmp -s "$file" "$tmp/llama_again/$(basename "$file")" || same=1
done
[[ "$(ls "$tmp/llama")" == "$(ls "$tmp/llama_again")" ]] || same=1
report "make_tiny_model.py writes the same bytes twice" "$same"

tokens="1,17,243,5,99,299,42,7,7,150,2,64"
prefix="1,17,243,5,99,299"
other="9,8,7,6,5,4,3,2,1,0,298,297"
for model in llama gpt2 qwen2; do
  status=0
  "$python" "$reference" "$tmp/$model" --tokens "$tokens" --self-check --loss --greedy 3 \
    --out "$tmp/$model.full.npy" >"$tmp/$model.full.txt" 2>&1 || status=$?
  [[ "$status" == 0 ]] || cat "$tmp/$model.full.txt"
  report "$model: --self-check (numpy loops vs torch, 1e-10)" "$status"
done
# The printed form of the logits, once: the prefix run's, which the causality check reads.
status=0
"$python" "$reference" "$tmp/llama" --tokens "$prefix" >"$tmp/llama.prefix.txt" 2>&1 || status=$?
[[ "$status" == 0 ]] || cat "$tmp/llama.prefix.txt"
report "llama: a run without --out prints its logits" "$status"

# The numeric checks, in one process: it imports both programs as modules.
status=0
"$python" - "$tmp" "$make_model" "$reference" "$tokens" "$other" >"$tmp/numeric.txt" 2>&1 \
  <<'EOF' || status=$?
import importlib.util
import json
import os
import shutil
import sys

import numpy as np
import sentencepiece

tmp, make_model_path, reference_path, tokens_text, other_text = sys.argv[1:]


def module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


make_model = module("make_tiny_model", make_model_path)
ref = module("torch_decoder_reference", reference_path)
tokens = np.array([[int(v) for v in tokens_text.split(",")]])
other = np.array([[int(v) for v in other_text.split(",")]])
t = tokens.shape[1]
failures = 0


def check(name, ok, detail=""):
    global failures
    print(("ok - " if ok else "FAILED - ") + name + (f" ({detail})" if detail else ""))
    failures += 0 if ok else 1


def printed(path):
    """The key=value lines a reference run printed."""
    with open(path) as f:
        return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)


def max_diff(a, b):
    return float(np.abs(np.asarray(a) - np.asarray(b)).max())


def positions(rows, offset=0):
    return np.tile(np.arange(offset, offset + t), (rows, 1))


# The tokenizer: exactly vocab_size pieces, Llama's special ids, text survives a round trip.
with open(os.path.join(tmp, "llama", "config.json")) as f:
    config = json.load(f)
sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(tmp, "llama", "tokenizer.model"))
text = "Wisdom is knowing what to do next."
check("llama: tokenizer.model has vocab_size pieces and unk 0, bos 1, eos 2",
      sp.get_piece_size() == config["vocab_size"] == 300
      and (sp.unk_id(), sp.bos_id(), sp.eos_id()) == (0, 1, 2)
      and sp.decode(sp.encode(text)) == text)

for name in ("llama", "gpt2", "qwen2"):
    model = ref.Model(os.path.join(tmp, name))
    full = np.load(os.path.join(tmp, f"{name}.full.npy"))
    out = printed(os.path.join(tmp, f"{name}.full.txt"))
    check(f"{name}: logits_shape",
          out["logits_shape"] == f"1,{t},300" and full.shape == (1, t, 300))

    if name == "llama":
        prefix_out = printed(os.path.join(tmp, "llama.prefix.txt"))
        shape = [int(v) for v in prefix_out["logits_shape"].split(",")]
        prefix = np.array([float(v) for v in prefix_out["logits"].split(",")]).reshape(shape)
    else:
        prefix = ref.logits(model, tokens[:, :6], positions(1)[:, :6])
        shape = prefix.shape
    diff = max_diff(prefix, full[:, :shape[1]])
    check(f"{name}: causality: the prefix's logits are the full run's first rows", diff <= 1e-12,
          f"{diff:.3g}")

    batch = ref.logits(model, np.concatenate([tokens, other]), positions(2))
    alone = ref.logits(model, other, positions(1))
    diff = max(max_diff(batch[:1], full), max_diff(batch[1:], alone))
    check(f"{name}: a batch's rows are the rows run alone", diff <= 1e-12, f"{diff:.3g}")

    diff = abs(float(out["loss"]) - ref.next_token_loss(full, tokens))
    # Recomputed here in the plainest way: -log softmax at each next token.
    plain = np.mean([np.log(np.exp(full[0, i]).sum()) - full[0, i, tokens[0, i + 1]]
                     for i in range(t - 1)])
    diff = max(diff, abs(float(out["loss"]) - plain))
    check(f"{name}: --loss is the mean next-token cross-entropy", diff <= 1e-12, f"{diff:.3g}")

    generated = [int(v) for v in out["greedy"].split(",")]
    sequence = np.concatenate([tokens, [generated[:2]]], axis=1)
    last = ref.logits(model, sequence, np.arange(t + 2)[None])[0]
    check(f"{name}: --greedy takes the argmax after the prompt and after its own ids",
          len(generated) == 3 and generated[0] == int(full[0, -1].argmax())
          and generated[1] == int(last[t].argmax()) and generated[2] == int(last[t + 1].argmax()),
          f"greedy {generated}")

# Llama: rotary embedding depends only on the distance between positions.
llama = ref.Model(os.path.join(tmp, "llama"))
full = np.load(os.path.join(tmp, "llama.full.npy"))
diff = max_diff(ref.logits(llama, tokens, positions(1, offset=7)), full)
check("llama: positions shifted by 7 give the same logits (rotary is relative)", diff <= 1e-10,
      f"{diff:.3g}")

# Llama: 2 shards and 1 file hold the same model.
single = ref.Model(os.path.join(tmp, "llama_1file"))
same = sorted(single.weights) == sorted(llama.weights) and all(
    np.array_equal(single.weights[k], llama.weights[k]) for k in llama.weights)
check("llama: the 2 shards and the single file hold the same tensors", same)


def expanded_kv(to_kv_head, directory):
    """The llama with every query head given its own copy of kv head to_kv_head(j): a full
    multi-head attention model, written as f32 (which holds the bf16 values exactly)."""
    group = llama.heads // llama.kv_heads
    dh = llama.dh
    arrays = []
    for key, values in llama.weights.items():
        if key.endswith(("k_proj.weight", "v_proj.weight")):
            values = np.concatenate([values[to_kv_head(j, group) * dh:][:dh]
                                     for j in range(llama.heads)])
        arrays.append((key, values.astype(np.float32)))
    os.makedirs(directory)
    make_model.write_checkpoint(directory, arrays, "f32", 1)
    shutil.copy(os.path.join(tmp, "llama", "config.json"), directory)
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    config["num_key_value_heads"] = llama.heads
    make_model.write_json(os.path.join(directory, "config.json"), config)
    return ref.logits(ref.Model(directory), tokens, positions(1))


diff = max_diff(expanded_kv(lambda j, group: j // group, os.path.join(tmp, "mha")), full)
check("llama: GQA equals MHA with query head j reading kv head j // group", diff <= 1e-12,
      f"{diff:.3g}")
wrong = max_diff(expanded_kv(lambda j, group: j % llama.kv_heads, os.path.join(tmp, "wrong")),
                 full)
check("llama: a kv head copied to the wrong query heads changes the logits", wrong > 1e-6,
      f"{wrong:.3g}")

sys.exit(1 if failures else 0)
EOF
cat "$tmp/numeric.txt"
passed=$((passed + $(grep -c '^ok - ' "$tmp/numeric.txt" || true)))
failed=$((failed + $(grep -c '^FAILED - ' "$tmp/numeric.txt" || true)))
# A crash before its last check fails too, whatever it printed.
if [[ "$status" != 0 ]] && ! grep -q '^FAILED - ' "$tmp/numeric.txt"; then
  report "the numeric checks ran to the end" "$status"
fi

echo "$passed passed, $failed failed"
[[ "$failed" == 0 ]]
