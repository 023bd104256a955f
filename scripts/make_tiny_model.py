#!/usr/bin/env python3
"""Writes a tiny decoder checkpoint laid out exactly as a Hugging Face model directory.

vktower loads Hugging Face decoders (LlamaForCausalLM and its Mistral and Qwen2 relatives,
GPT2LMHeadModel) from a model directory. No real weights can be downloaded where its tests
run, so this program makes small ones with random weights: the same file names, config
fields, tensor names, tensor layouts and safetensors encoding as a directory written by
Hugging Face's save_pretrained, at a size a test reads in milliseconds.

Usage:
  make_tiny_model.py OUT_DIR --arch llama [--model-type llama|mistral|qwen2] [--layers 2]
      [--hidden 48] [--heads 6] [--kv-heads 2] [--intermediate 80] [--vocab 512]
      [--max-positions 128] [--dtype f32|f16|bf16] [--tie | --no-tie] [--seed 0]
      [--shards N] [--tokenizer sentencepiece|none] [--corpus PATH] [--rope-theta 10000]
      [--qkv-bias] [--norm-eps E] [--init-std 0.02]
  make_tiny_model.py OUT_DIR --arch gpt2 [--layers 2] [--hidden 48] [--heads 6] ...

OUT_DIR receives:
  config.json                   the architecture's own field names (sorted, indent 2)
  generation_config.json        bos/eos ids
  model.safetensors             or, with --shards N > 1, model-0000k-of-0000N.safetensors
                                plus model.safetensors.index.json
  tokenizer.model               with --tokenizer sentencepiece (Llama family only): a
  tokenizer_config.json         SentencePiece model trained on --corpus, Llama's special ids
  special_tokens_map.json       (unk 0, bos 1, eos 2, no pad)

The weights are drawn in float32 from one generator seeded with --seed, in the checkpoint's
tensor order, and then rounded to --dtype; so the f32, f16 and bf16 checkpoints of one seed
are roundings of the same model. The same arguments write the same bytes.

Needs numpy; --tokenizer sentencepiece also needs the sentencepiece module (Debian's
python3-sentencepiece). Exits 77 when a module it needs cannot be imported, so that a test
built on it can report a skip.
"""

import argparse
import glob
import io
import json
import os
import struct
import sys

try:
    import numpy as np
except ImportError:
    print("make_tiny_model: numpy cannot be imported (apt-get install python3-numpy)",
          file=sys.stderr)
    sys.exit(77)

# The safetensors dtype names, the numpy dtype each is written from, and the config's
# torch_dtype for it.
DTYPES = {
    "f32": ("F32", "float32"),
    "f16": ("F16", "float16"),
    "bf16": ("BF16", "bfloat16"),
}

# The fortune files' corpus where the fortunes package is installed (scripts/deps.sh
# installs it), else the one file of it that the repository carries.
FORTUNES_DIR = "/usr/share/games/fortunes"
SAMPLE_CORPUS = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "samples", "data", "fortunes-wisdom.txt"
)

# Llama's SentencePiece special ids.
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2


# ----------------------------------------------------------------------------------------------
# safetensors


def float32_to_bfloat16_bits(values):
    """The bfloat16 bit patterns (uint16) nearest to float32 `values`, ties to even.

    bfloat16 is the upper half of a float32, so rounding adds 0x7FFF plus the lowest kept bit
    before truncating: a remainder above half carries into the kept bits, one below half
    doesn't, and one of exactly half carries only when the kept part is odd. NaNs would carry
    into the exponent, so they are written as the quiet NaN instead."""
    bits = np.ascontiguousarray(values, dtype="<f4").view("<u4").astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    rounded = np.where(np.isnan(values), 0x7FC0, rounded)
    return rounded.astype("<u2")


def tensor_bytes(values, dtype):
    """The little-endian bytes of float32 array `values` stored as `dtype` (f32, f16, bf16)."""
    if dtype == "f32":
        return np.ascontiguousarray(values, dtype="<f4").tobytes()
    if dtype == "f16":
        # numpy's float32 -> float16 conversion rounds to nearest, ties to even.
        return np.ascontiguousarray(values, dtype="<f4").astype("<f2").tobytes()
    if dtype == "bf16":
        return float32_to_bfloat16_bits(values).tobytes()
    raise ValueError(f"unknown dtype {dtype}")


def safetensors_bytes(tensors):
    """One safetensors file holding `tensors`: a list of (name, safetensors dtype, shape, raw
    bytes).

    The layout: an 8-byte little-endian header length, then the JSON header (each tensor's
    dtype, shape and [begin, end) byte offsets into the data that follows, and the
    "__metadata__" that PyTorch's writers add), padded with spaces so that the data starts at
    a multiple of 8, then the tensors' bytes back to back. Tensors are stored sorted by name,
    as the safetensors library stores tensors of one dtype."""
    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    ordered = sorted(tensors, key=lambda t: t[0])
    for name, st_dtype, shape, raw in ordered:
        header[name] = {
            "dtype": st_dtype,
            "shape": list(shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    out = io.BytesIO()
    out.write(struct.pack("<Q", len(text)))
    out.write(text)
    for _, _, _, raw in ordered:
        out.write(raw)
    return out.getvalue()


def split_into_shards(sizes, count):
    """Splits tensors of byte `sizes` (in checkpoint order) into `count` consecutive, non-empty
    groups of about equal bytes, as Hugging Face's sharding keeps the state dict's order.
    Returns each group's index range."""
    if count > len(sizes):
        raise SystemExit(f"make_tiny_model: {count} shards for {len(sizes)} tensors")
    total = sum(sizes)
    ranges, begin, written = [], 0, 0
    for shard in range(count - 1):
        # Close the shard once the bytes so far reach its share of the total, leaving at
        # least one tensor for each later shard.
        target = total * (shard + 1) / count
        end = begin + 1
        written += sizes[begin]
        while end < len(sizes) - (count - shard - 1) and written < target:
            written += sizes[end]
            end += 1
        ranges.append((begin, end))
        begin = end
    ranges.append((begin, len(sizes)))
    return ranges


def write_checkpoint(out_dir, named_arrays, dtype, shards):
    """Writes `named_arrays` ((name, float32 array) in checkpoint order) as model.safetensors,
    or as `shards` files model-0000k-of-0000N.safetensors plus model.safetensors.index.json."""
    st_dtype = DTYPES[dtype][0]
    tensors = [(name, st_dtype, a.shape, tensor_bytes(a, dtype)) for name, a in named_arrays]
    # Shards of an earlier run with another count would be read by a loader that globs.
    for stale in glob.glob(os.path.join(out_dir, "model*.safetensors*")):
        os.remove(stale)
    if shards <= 1:
        with open(os.path.join(out_dir, "model.safetensors"), "wb") as f:
            f.write(safetensors_bytes(tensors))
        return
    weight_map = {}
    ranges = split_into_shards([len(t[3]) for t in tensors], shards)
    for k, (begin, end) in enumerate(ranges):
        file_name = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        with open(os.path.join(out_dir, file_name), "wb") as f:
            f.write(safetensors_bytes(tensors[begin:end]))
        for name, _, _, _ in tensors[begin:end]:
            weight_map[name] = file_name
    index = {
        # Hugging Face's total_size counts the tensors' bytes, not the files'.
        "metadata": {"total_size": sum(len(t[3]) for t in tensors)},
        "weight_map": dict(sorted(weight_map.items())),
    }
    write_json(os.path.join(out_dir, "model.safetensors.index.json"), index)


def write_json(path, value):
    """Writes `value` the way Hugging Face writes its JSON files: sorted keys, indent 2."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(value, indent=2, sort_keys=True) + "\n")


# ----------------------------------------------------------------------------------------------
# Weights


class WeightMaker:
    """Draws the checkpoint's tensors from one seeded generator, in the order they are made.

    Matrices and embeddings are normal with std `init_std` (the architectures' own
    initializer_range); norm weights are 1 plus noise, and biases small but nonzero, so that a
    loader that skips a norm or a bias, or a decoder that gets one wrong, changes the logits."""

    def __init__(self, seed, init_std):
        self.rng = np.random.default_rng(seed)
        self.init_std = init_std
        self.tensors = []

    def matrix(self, name, shape):
        self.tensors.append((name, self.init_std * self.rng.standard_normal(shape, np.float32)))

    def norm(self, name, width):
        self.tensors.append((name, 1 + 0.1 * self.rng.standard_normal(width, np.float32)))

    def bias(self, name, width):
        self.tensors.append((name, 0.02 * self.rng.standard_normal(width, np.float32)))


def llama_tensors(args, maker):
    """The Llama family's tensors under their Hugging Face names, nn.Linear's [out, in] layout."""
    d, dh = args.hidden, args.hidden // args.heads
    maker.matrix("model.embed_tokens.weight", (args.vocab, d))
    for n in range(args.layers):
        p = f"model.layers.{n}."
        widths = (("q", args.heads * dh), ("k", args.kv_heads * dh), ("v", args.kv_heads * dh))
        for proj, rows in widths:
            maker.matrix(f"{p}self_attn.{proj}_proj.weight", (rows, d))
            if args.qkv_bias:
                maker.bias(f"{p}self_attn.{proj}_proj.bias", rows)
        maker.matrix(f"{p}self_attn.o_proj.weight", (d, args.heads * dh))
        if args.o_bias:
            maker.bias(f"{p}self_attn.o_proj.bias", d)
        maker.matrix(f"{p}mlp.gate_proj.weight", (args.intermediate, d))
        maker.matrix(f"{p}mlp.up_proj.weight", (args.intermediate, d))
        maker.matrix(f"{p}mlp.down_proj.weight", (d, args.intermediate))
        maker.norm(f"{p}input_layernorm.weight", d)
        maker.norm(f"{p}post_attention_layernorm.weight", d)
    maker.norm("model.norm.weight", d)
    if not args.tie:
        maker.matrix("lm_head.weight", (args.vocab, d))


def gpt2_tensors(args, maker):
    """GPT-2's tensors under their Hugging Face names. Its projections are Conv1D modules,
    whose weight is [in, out] (x @ W + b), the transpose of nn.Linear's; lm_head is tied to
    wte and so is not stored."""
    d, inner = args.hidden, args.intermediate
    maker.matrix("transformer.wte.weight", (args.vocab, d))
    maker.matrix("transformer.wpe.weight", (args.max_positions, d))
    for n in range(args.layers):
        p = f"transformer.h.{n}."
        maker.norm(f"{p}ln_1.weight", d)
        maker.bias(f"{p}ln_1.bias", d)
        maker.matrix(f"{p}attn.c_attn.weight", (d, 3 * d))
        maker.bias(f"{p}attn.c_attn.bias", 3 * d)
        maker.matrix(f"{p}attn.c_proj.weight", (d, d))
        maker.bias(f"{p}attn.c_proj.bias", d)
        maker.norm(f"{p}ln_2.weight", d)
        maker.bias(f"{p}ln_2.bias", d)
        maker.matrix(f"{p}mlp.c_fc.weight", (d, inner))
        maker.bias(f"{p}mlp.c_fc.bias", inner)
        maker.matrix(f"{p}mlp.c_proj.weight", (inner, d))
        maker.bias(f"{p}mlp.c_proj.bias", d)
    maker.norm("transformer.ln_f.weight", d)
    maker.bias("transformer.ln_f.bias", d)


# ----------------------------------------------------------------------------------------------
# Configs


def llama_config(args):
    """config.json of LlamaForCausalLM, MistralForCausalLM or Qwen2ForCausalLM, with the fields
    and defaults their configuration classes write."""
    common = {
        "attention_dropout": 0.0,
        "bos_token_id": args.bos_id,
        "eos_token_id": args.eos_id,
        "head_dim": args.hidden // args.heads,
        "hidden_act": "silu",
        "hidden_size": args.hidden,
        "initializer_range": args.init_std,
        "intermediate_size": args.intermediate,
        "max_position_embeddings": args.max_positions,
        "num_attention_heads": args.heads,
        "num_hidden_layers": args.layers,
        "num_key_value_heads": args.kv_heads,
        "rms_norm_eps": args.norm_eps,
        "rope_theta": args.rope_theta,
        "tie_word_embeddings": args.tie,
        "torch_dtype": DTYPES[args.dtype][1],
        "use_cache": True,
        "vocab_size": args.vocab,
    }
    if args.model_type == "llama":
        return {
            **common,
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            # Llama's attention_bias puts a bias on q, k, v and o alike.
            "attention_bias": args.qkv_bias,
            "mlp_bias": False,
            "pretraining_tp": 1,
            "rope_scaling": None,
        }
    if args.model_type == "mistral":
        return {
            **common,
            "architectures": ["MistralForCausalLM"],
            "model_type": "mistral",
            # Mistral v0.2 and later attend to the whole context.
            "sliding_window": None,
        }
    # Qwen2 always has q, k and v biases (no config field says so) and no o bias.
    return {
        **common,
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "max_window_layers": args.layers,
        "rope_scaling": None,
        "sliding_window": args.max_positions,
        "use_sliding_window": False,
    }


def gpt2_config(args):
    """config.json of GPT2LMHeadModel, with the fields GPT2Config writes."""
    return {
        "activation_function": "gelu_new",
        "architectures": ["GPT2LMHeadModel"],
        "attn_pdrop": 0.1,
        "bos_token_id": args.bos_id,
        "embd_pdrop": 0.1,
        "eos_token_id": args.eos_id,
        "initializer_range": args.init_std,
        "layer_norm_epsilon": args.norm_eps,
        "model_type": "gpt2",
        "n_ctx": args.max_positions,
        "n_embd": args.hidden,
        "n_head": args.heads,
        # null means 4 * n_embd, which is what GPT-2's checkpoints have.
        "n_inner": None if args.intermediate == 4 * args.hidden else args.intermediate,
        "n_layer": args.layers,
        "n_positions": args.max_positions,
        "reorder_and_upcast_attn": False,
        "resid_pdrop": 0.1,
        "scale_attn_by_inverse_layer_idx": False,
        "scale_attn_weights": True,
        "summary_activation": None,
        "summary_first_dropout": 0.1,
        "summary_proj_to_labels": True,
        "summary_type": "cls_index",
        "summary_use_proj": True,
        # GPT2Config's default, which Hugging Face leaves out of the file; written here so
        # that the file says it.
        "tie_word_embeddings": True,
        "torch_dtype": DTYPES[args.dtype][1],
        "use_cache": True,
        "vocab_size": args.vocab,
    }


# ----------------------------------------------------------------------------------------------
# Tokenizer


def corpus_files(corpus):
    """The text files to train on: `corpus` (a file or a folder of files), else the fortune
    files, else the repository's sample of them. In a folder, the .dat indexes, links and
    anything that is not UTF-8 text are left out."""
    if corpus is None:
        corpus = FORTUNES_DIR if os.path.isdir(FORTUNES_DIR) else SAMPLE_CORPUS
    if not os.path.isdir(corpus):
        return [corpus]
    files = []
    for path in sorted(glob.glob(os.path.join(corpus, "*"))):
        if path.endswith(".dat") or os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            try:
                f.read().decode("utf-8")
            except UnicodeDecodeError:
                continue
        files.append(path)
    if not files:
        raise SystemExit(f"make_tiny_model: no text files in {corpus}")
    return files


def corpus_lines(files):
    """The corpus's non-empty lines, without the fortune files' '%' separators."""
    for path in files:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line and line != "%":
                    yield line


def train_sentencepiece(args):
    """Trains a SentencePiece model of exactly --vocab pieces the way Llama's was made (BPE,
    identity normalization, digits split, byte fallback) and returns its serialized bytes.

    Byte fallback needs 256 byte pieces besides the corpus's characters; a vocabulary too small
    for both is trained without it (a note says so). The sentences are fed from memory and the
    model is returned in memory, so that no path of this run ends up in the model's stored
    trainer settings, and the sampler is seeded: the same arguments give the same bytes."""
    try:
        import sentencepiece as spm
    except ImportError:
        print("make_tiny_model: sentencepiece cannot be imported "
              "(apt-get install python3-sentencepiece)", file=sys.stderr)
        sys.exit(77)
    files = corpus_files(args.corpus)

    def train(byte_fallback):
        spm.set_random_generator_seed(args.seed)
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=corpus_lines(files),
            model_writer=model,
            vocab_size=args.vocab,
            model_type=args.sp_model_type,
            byte_fallback=byte_fallback,
            character_coverage=0.9995,
            # A sample of the corpus keeps training to about a second.
            input_sentence_size=20000,
            shuffle_input_sentence=True,
            normalization_rule_name="identity",
            remove_extra_whitespaces=False,
            split_digits=True,
            allow_whitespace_only_pieces=True,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            pad_id=-1,
            # One thread: the pieces must not depend on the machine's core count.
            num_threads=1,
            minloglevel=2,
        )
        return model.getvalue()

    try:
        model = train(byte_fallback=True)
    except RuntimeError as error:
        if "Vocabulary size is smaller than required_chars" not in str(error):
            raise
        print(f"make_tiny_model: --vocab {args.vocab} leaves no room for the 256 byte pieces; "
              "training without byte fallback", file=sys.stderr)
        model = train(byte_fallback=False)
    pieces = spm.SentencePieceProcessor(model_proto=model).get_piece_size()
    if pieces != args.vocab:
        raise SystemExit(f"make_tiny_model: the tokenizer has {pieces} pieces, not {args.vocab}")
    return model


def write_tokenizer(args, out_dir):
    """tokenizer.model and the Hugging Face files that describe it (LlamaTokenizer's)."""
    model = train_sentencepiece(args)
    with open(os.path.join(out_dir, "tokenizer.model"), "wb") as f:
        f.write(model)
    write_json(os.path.join(out_dir, "tokenizer_config.json"), {
        "add_bos_token": True,
        "add_eos_token": False,
        "bos_token": "<s>",
        "clean_up_tokenization_spaces": False,
        "eos_token": "</s>",
        "model_max_length": args.max_positions,
        "pad_token": None,
        "sp_model_kwargs": {},
        "tokenizer_class": "LlamaTokenizer",
        "unk_token": "<unk>",
    })
    write_json(os.path.join(out_dir, "special_tokens_map.json"), {
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
    })


# ----------------------------------------------------------------------------------------------
# Command line


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Writes a tiny Hugging Face decoder checkpoint (random weights).")
    parser.add_argument("out_dir", metavar="OUT_DIR")
    parser.add_argument("--arch", choices=["llama", "gpt2"], default="llama")
    parser.add_argument("--model-type", choices=["llama", "mistral", "qwen2"], default="llama",
                        help="the Llama family member (--arch llama only)")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=48)
    parser.add_argument("--heads", type=int, default=6)
    parser.add_argument("--kv-heads", type=int, default=2,
                        help="key/value heads (grouped-query attention; --arch llama only)")
    parser.add_argument("--intermediate", type=int, default=None,
                        help="MLP width (default: 80 for llama, 4 * hidden for gpt2)")
    parser.add_argument("--vocab", type=int, default=512)
    parser.add_argument("--max-positions", type=int, default=128)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="f32")
    parser.add_argument("--tie", action=argparse.BooleanOptionalAction, default=None,
                        help="tie lm_head to the embedding (default: no for llama; gpt2 always)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument("--tokenizer", choices=["sentencepiece", "none"], default=None,
                        help="default: sentencepiece for llama, none for gpt2")
    parser.add_argument("--sp-model-type", choices=["bpe", "unigram"], default="bpe")
    parser.add_argument("--corpus", default=None,
                        help=f"text file or folder for the tokenizer (default: {FORTUNES_DIR}, "
                             "else samples/data/fortunes-wisdom.txt)")
    parser.add_argument("--rope-theta", type=float, default=10000.0)
    parser.add_argument("--qkv-bias", action="store_true",
                        help="biases on q, k and v (qwen2 always has them; llama's "
                             "attention_bias adds one on o_proj too)")
    parser.add_argument("--norm-eps", type=float, default=None,
                        help="rms_norm_eps / layer_norm_epsilon (default: the family's)")
    parser.add_argument("--init-std", type=float, default=0.02)
    args = parser.parse_args(argv)

    def fail(message):
        parser.error(message)

    if args.layers < 1 or args.hidden < 1 or args.heads < 1 or args.vocab < 2:
        fail("--layers, --hidden, --heads must be positive and --vocab at least 2")
    if args.hidden % args.heads:
        fail(f"--hidden {args.hidden} is not a multiple of --heads {args.heads}")
    if args.shards < 1:
        fail("--shards must be at least 1")
    if args.arch == "gpt2":
        if args.tie is False:
            fail("GPT2LMHeadModel always ties lm_head to transformer.wte")
        if args.tokenizer == "sentencepiece":
            fail("GPT-2 checkpoints carry vocab.json and merges.txt, not tokenizer.model")
        if args.qkv_bias or args.model_type != "llama":
            fail("--qkv-bias and --model-type are for --arch llama")
        args.tie, args.tokenizer = True, "none"
        args.kv_heads = args.heads
        args.intermediate = args.intermediate or 4 * args.hidden
        args.norm_eps = 1e-5 if args.norm_eps is None else args.norm_eps
        # GPT-2's 50256 is both bos and eos: the last id.
        args.bos_id = args.eos_id = args.vocab - 1
        args.o_bias = False
    else:
        if args.heads % args.kv_heads:
            fail(f"--heads {args.heads} is not a multiple of --kv-heads {args.kv_heads}")
        if (args.hidden // args.heads) % 2:
            # Rotary embedding turns pairs (x[i], x[i + Dh/2]) of each head.
            fail(f"head width {args.hidden // args.heads} is odd; rotary embedding needs it even")
        if args.model_type == "mistral" and args.qkv_bias:
            fail("Mistral has no attention biases")
        args.o_bias = args.model_type == "llama" and args.qkv_bias
        args.qkv_bias = args.qkv_bias or args.model_type == "qwen2"
        args.tie = bool(args.tie)
        args.tokenizer = args.tokenizer or "sentencepiece"
        args.intermediate = args.intermediate or 80
        if args.norm_eps is None:
            args.norm_eps = 1e-6 if args.model_type == "qwen2" else 1e-5
        if args.tokenizer == "sentencepiece" and args.vocab < 8:
            fail("a SentencePiece vocabulary needs at least a few pieces besides unk, bos, eos")
        args.bos_id, args.eos_id = BOS_ID, EOS_ID
    return args


def main(argv):
    args = parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    maker = WeightMaker(args.seed, args.init_std)
    if args.arch == "gpt2":
        gpt2_tensors(args, maker)
        config = gpt2_config(args)
    else:
        llama_tensors(args, maker)
        config = llama_config(args)
    write_checkpoint(args.out_dir, maker.tensors, args.dtype, args.shards)
    write_json(os.path.join(args.out_dir, "config.json"), config)
    write_json(os.path.join(args.out_dir, "generation_config.json"), {
        "_from_model_config": True,
        "bos_token_id": args.bos_id,
        "eos_token_id": args.eos_id,
    })
    for stale in ("tokenizer.model", "tokenizer_config.json", "special_tokens_map.json"):
        if args.tokenizer == "none" and os.path.exists(os.path.join(args.out_dir, stale)):
            os.remove(os.path.join(args.out_dir, stale))
    if args.tokenizer == "sentencepiece":
        write_tokenizer(args, args.out_dir)
    parameters = sum(a.size for _, a in maker.tensors)
    print(f"make_tiny_model: {args.out_dir}: {config['architectures'][0]}, "
          f"{parameters} parameters, {args.dtype}, {max(args.shards, 1)} file(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
