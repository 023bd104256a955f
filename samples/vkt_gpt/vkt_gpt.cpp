// vkt-gpt: a character-level GPT trained on the fortunes corpus (Debian's
// fortunes package), replicated on every chosen Vulkan device and under
// mpirun; it reports the validation loss in nats per character as it trains
// and ends with text sampled from the trained model.
//
//   vkt-gpt --devices 0,0                          # the default run
//   vkt-gpt --layers 1 --width 32 --context 16 --steps 20 --generate 40
//   vkt-gpt --warm-start pretrained --lora 8 --model-dir tuned  # a LoRA fine-tune
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <vktower/tower/estimator.h>
#include <vktower/tower/replicate.h>
#include <vktower/vktower.h>
#include "../sample_cli.h"
#include "../sample_data.h"
#include "../sample_throughput.h"
#include "corpus.h"
#include "gpt_generator.h"
#include "gpt_model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

/// Where Debian's fortunes package puts the fortune files.
constexpr const char* kFortunes = "/usr/share/games/fortunes";

/// `count` characters after `prompt`, each drawn from softmax(logits / temperature)
/// of the trained model (its newest checkpoint), on a models::Generator: the
/// weights uploaded once and a key/value cache, so each character is one
/// single-token step. Past the context the cache starts again from the last
/// half context, as positions are learned only up to it.
std::string generate(vkt::Estimator& estimator, std::uint32_t device_index, const Corpus& corpus,
                     const GptSettings& model, const std::string& prompt, int count,
                     double temperature, std::uint64_t seed) {
  std::vector<std::int32_t> tokens;
  for (const char c : prompt) {
    if (corpus.id(c) < 0) {
      throw vkt::Error(fmt::format("--prompt: the character '{}' is not in the corpus", c));
    }
    tokens.push_back(corpus.id(c));
  }
  if (tokens.empty()) tokens.push_back(corpus.id('\n') >= 0 ? corpus.id('\n') : 0);
  const std::map<std::string, vkt::HostTensor> saved =
      vkt::read_checkpoint(estimator.latest_checkpoint().value());
  vkt::Device device(estimator.instance(), device_index);
  vkt::models::Generator generator(device, gpt_decoder_config(model),
                                   gpt_decoder_weights(saved, model), gpt_decoder_options(model),
                                   model.context);
  std::vector<float> logits;
  // Runs the last `keep` tokens from an empty cache.
  const auto refill = [&](std::int64_t keep) {
    generator.reset();
    const auto size = static_cast<std::int64_t>(tokens.size());
    for (std::int64_t i = std::max<std::int64_t>(0, size - keep); i < size; ++i) {
      logits = generator.step(tokens[static_cast<std::size_t>(i)]);
    }
  };
  refill(model.context);
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::string out = prompt;
  for (int n = 0; n < count; ++n) {
    const std::int32_t next =
        vkt::models::pick_token(logits, {.temperature = temperature}, uniform(random));
    tokens.push_back(next);
    out += static_cast<char>(corpus.vocab[static_cast<std::size_t>(next)]);
    if (generator.position() == model.context) {
      refill(std::max<std::int64_t>(1, model.context / 2));
    } else {
      logits = generator.step(next);
    }
  }
  return out;
}

/// The warm start --warm-start asks for: every weight of the earlier run,
/// but no LoRA adapter (which it has none of, and which start fresh).
std::optional<vkt::WarmStartSettings> warm_start_settings(const std::string& from, bool lora) {
  if (from.empty()) return std::nullopt;
  return vkt::WarmStartSettings{.ckpt_to_initialize_from = from,
                                .vars_to_warm_start = lora ? "(?!.*/lora_[ab]$)" : ".*"};
}

/// A --model-dir checkpoint resumes only with the --lora it was written with:
/// its adapters' rank, or none.
void check_lora_fits(const std::map<std::string, vkt::HostTensor>& saved, const std::string& file,
                     std::int64_t lora_rank) {
  std::int64_t saved_rank = 0;
  for (const auto& [name, tensor] : saved) {
    if (name.ends_with("/lora_a") && tensor.shape.rank() == 2) saved_rank = tensor.shape[1];
  }
  if (saved_rank == lora_rank) return;
  if (saved_rank == 0) {
    throw vkt::Error(fmt::format(
        "--lora {}: checkpoint '{}' holds no adapters, so --model-dir trained the whole model; "
        "to fine-tune it, give it as --warm-start and a new --model-dir",
        lora_rank, file));
  }
  throw vkt::Error(fmt::format(
      "checkpoint '{}' holds LoRA adapters of rank {}: give --lora {} to resume it, or another "
      "--model-dir",
      file, saved_rank, saved_rank));
}

/// A checkpoint (in --model-dir, or the one --warm-start starts from) made for
/// another corpus or context would feed token ids past its vocabulary or
/// positions past its table: say which, with the values, the file and the
/// flag, before anything trains.
void check_checkpoint_fits(const vkt::Estimator& estimator, const std::string& warm_start,
                           const Corpus& corpus, const std::string& data,
                           const GptSettings& model) {
  const std::int64_t context = model.context;
  std::optional<std::string> latest = estimator.latest_checkpoint();
  std::string flag = "--model-dir";
  if (!latest && !warm_start.empty()) {
    try {
      latest = vkt::warm_start_file(warm_start);  // the file the warm start will read
    } catch (const vkt::Error& e) {  // in the sample's words: the flag, not the setting
      std::string what = e.what();
      if (what.starts_with("warm start: ")) what.erase(0, 12);
      throw vkt::Error("--warm-start: " + what);
    }
    flag = "--warm-start";
  }
  if (!latest) return;
  const std::map<std::string, vkt::HostTensor> saved = vkt::read_checkpoint(*latest);
  if (flag == "--model-dir") check_lora_fits(saved, *latest, model.lora_rank);
  const auto rows = [&](const char* name) -> std::int64_t {
    const auto it = saved.find(name);
    return it == saved.end() || it->second.shape.rank() != 2 ? -1 : it->second.shape[0];
  };
  if (const std::int64_t vocab = rows("wte"); vocab >= 0 && vocab != corpus.vocab_size()) {
    throw vkt::Error(fmt::format(
        "--data '{}' has {} distinct characters, but checkpoint '{}' was trained on {}: its "
        "token ids would not match; give the --data it was trained on, or another {}",
        data, corpus.vocab_size(), *latest, vocab, flag));
  }
  if (const std::int64_t positions = rows("wpe"); positions >= 0 && positions != context) {
    throw vkt::Error(fmt::format(
        "--context {} {} the position table of checkpoint '{}' ({} positions); give --context "
        "{}, or another {}",
        context, context > positions ? "is longer than" : "does not match", *latest, positions,
        positions, flag));
  }
  if (const auto it = saved.find("wte");
      it != saved.end() && it->second.shape.rank() == 2 && it->second.shape[1] != model.width) {
    throw vkt::Error(fmt::format(
        "--width {} does not match checkpoint '{}' (width {}); give --width {}, or another {}",
        model.width, *latest, it->second.shape[1], it->second.shape[1], flag));
  }
  const auto blocks = std::count_if(saved.begin(), saved.end(), [](const auto& entry) {
    return entry.first.ends_with("/ln_1/gamma");
  });
  if (blocks > 0 && blocks != model.layers) {
    throw vkt::Error(fmt::format(
        "--layers {} does not match checkpoint '{}' ({} transformer blocks); give --layers {}, "
        "or another {}",
        model.layers, *latest, blocks, blocks, flag));
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "vkt-gpt: a character-level GPT (pre-LayerNorm transformer blocks, causal attention) "
      "trained on the fortunes corpus, replicated on every chosen Vulkan device; resumes "
      "from --model-dir"};
  SampleFlags flags{.steps = 300, .batch_size = 32};
  GptSettings model;
  std::string data;  // after the flags: --help must not look for it
  std::string prompt = "The ";
  int generated = 300;
  double temperature = 0.8;
  std::uint64_t eval_every = 100;
  std::uint64_t eval_batches = 20;
  std::string warm_start;
  add_sample_flags(app, flags, "initial weights, dropout, shuffling and sampling");
  app.add_option("--layers", model.layers, "transformer blocks")
      ->capture_default_str()
      ->check(whole_number(1, 64));
  app.add_option("--heads", model.heads, "attention heads (a divisor of --width)")
      ->capture_default_str()
      ->check(whole_number(1, 64));
  app.add_option("--width", model.width, "the model's width")
      ->capture_default_str()
      ->check(whole_number(1, 4096));
  app.add_option("--context", model.context, "characters a position sees (the window)")
      ->capture_default_str()
      ->check(whole_number(2, 4096));
  app.add_option("--dropout", model.dropout, "dropout on attention and both residual branches")
      ->capture_default_str()
      ->check(real_number(0.0, 0.9));
  app.add_option("--attention", model.attention,
                 "attention kernels: fused (scores never in memory), composed (matmul, softmax, "
                 "matmul) or auto (fused where the device's shared memory holds its tiles)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "fused", "composed"}));
  app.add_flag("--tie-weights", model.tie_weights,
               "GPT-2's weight tying: the logits use the token table (no separate output matrix)");
  app.add_option("--lora", model.lora_rank,
                 "fine-tune by LoRA with adapters of this rank on every attention projection, "
                 "the rest of the --warm-start model frozen in bf16 (0: train every weight)")
      ->capture_default_str()
      ->check(whole_number(0, 4096));
  app.add_option("--warm-start", warm_start,
                 "start from another run's weights: its --model-dir or a checkpoint file "
                 "(when --model-dir holds no checkpoint yet)");
  app.add_option("--learning-rate", model.learning_rate,
                 "the peak rate (linear warm-up over 5% of the steps, then cosine to 10%)")
      ->capture_default_str()
      ->check(positive_number());
  app.add_option("--data", data,
                 std::string("a text file, or a directory of fortune files (default: ") +
                     kFortunes + " when the fortunes package is installed; otherwise " +
                     sample_data_help("fortunes-wisdom.txt") + ")");
  app.add_option("--eval-every", eval_every, "steps between validation losses")
      ->capture_default_str()
      ->check(whole_number(1, 1000000));
  app.add_option("--eval-batches", eval_batches, "validation batches per evaluation")
      ->capture_default_str()
      ->check(whole_number(1, 1000000));
  app.add_option("--prompt", prompt, "the text generation starts from")->capture_default_str();
  app.add_option("--generate", generated, "characters to sample at the end (0: none)")
      ->capture_default_str()
      ->check(whole_number(0, 100000));
  app.add_option("--temperature", temperature, "sampling temperature")
      ->capture_default_str()
      ->check(real_number(0.05, 10.0));
  if (const std::optional<int> exit = parse_flags(app, argc, argv, "vkt-gpt")) return *exit;

  return run_sample("vkt-gpt", [&] {
    if (model.width % model.heads != 0) {
      throw vkt::Error(
          fmt::format("--heads {} does not divide --width {}", model.heads, model.width));
    }
    if (model.lora_rank > 0 && warm_start.empty()) {
      throw vkt::Error(
          "--lora fine-tunes a pretrained model: give --warm-start with the --model-dir of an "
          "earlier vkt-gpt run (or a checkpoint file of one)");
    }
    if (data.empty()) {
      data = std::filesystem::exists(kFortunes) ? std::string(kFortunes)
                                                : sample_data_file("fortunes-wisdom.txt");
    }
    const Corpus corpus = read_corpus(data);
    const vkt::Dataset train = windows(corpus, model.context, false);
    const vkt::Dataset validation = windows(corpus, model.context, true);
    if (train.size() < flags.batch_size || validation.size() == 0) {
      throw vkt::Error(fmt::format(
          "--data '{}' has {} characters: {} training windows of {} + 1 characters, fewer than a "
          "--batch-size of {} (or no validation window); give more text or a smaller "
          "--context or --batch-size",
          data, corpus.text.size(), train.size(), model.context, flags.batch_size));
    }
    model.vocab = corpus.vocab_size();
    model.steps = flags.steps;
    const Towers towers = resolve_devices(flags.devices);
    vkt::Estimator estimator(
        vkt::replicate_model_fn(gpt_model, replicate_options(flags, towers.devices)),
        {.model_dir = flags.model_dir,
         .random_seed = flags.seed,
         .log_step_count_steps = eval_every,
         .accumulate_steps = flags.accumulate,
         .warm_start_from = warm_start_settings(warm_start, model.lora_rank > 0),
         .mpi = mpi_setting(flags),
         .on_device_loss = device_loss_action(flags)},
        to_params(model));
    check_checkpoint_fits(estimator, warm_start, corpus, data, model);
    const bool chief = estimator.rank() == 0;
    const int processes = processes_of(estimator);
    const std::size_t all_towers = towers.devices.size() * static_cast<std::size_t>(processes);
    if (chief) {
      fmt::print(
          "{} characters of {} file{} ({} distinct); {} training and {} validation "
          "windows of {}; {} tower{} on devices {}\n",
          corpus.text.size(), corpus.files, corpus.files == 1 ? "" : "s", corpus.vocab_size(),
          train.size(), validation.size(), model.context, all_towers, all_towers == 1 ? "" : "s",
          towers.description);
      if (model.lora_rank > 0 && !estimator.latest_checkpoint()) {
        fmt::print(
            "fine-tuning {} by LoRA: rank-{} adapters on the attention projections train, "
            "every other weight frozen in bf16\n",
            warm_start, model.lora_rank);
      }
    }
    const vkt::InputFn train_input = vkt::dataset_input(train, {.batch_size = flags.batch_size,
                                                                .epochs = 0,
                                                                .shuffle_seed = flags.seed,
                                                                .drop_remainder = true,
                                                                .label_columns = {"next"}});
    const vkt::InputFn validation_input =
        vkt::dataset_input(validation, {.batch_size = flags.batch_size, .label_columns = {"next"}});
    const auto throughput = std::make_shared<Throughput>();
    const std::uint64_t last = estimator.global_step() + flags.steps;
    double val_loss = 0;
    for (std::uint64_t step = estimator.global_step(); step < last;) {
      const std::uint64_t to = std::min(last, (step / eval_every + 1) * eval_every);
      step = estimator.train(train_input, {.max_steps = to, .hooks = {throughput}});
      val_loss = estimator.evaluate(validation_input, eval_batches).at("loss");
      if (chief) fmt::print("step {}: validation loss {:.4f} nats/char\n", step, val_loss);
      if (step < to) break;  // the input ended
    }
    // Sampling reads rank 0's predictions; the other ranks have none.
    const std::string text = generated > 0 && processes == 1
                                 ? generate(estimator, towers.devices.front(), corpus, model,
                                            prompt, generated, temperature, flags.seed)
                                 : "";
    if (!chief) return 0;
    const double tokens_per_s = throughput->steps_per_s() * static_cast<double>(flags.batch_size) *
                                flags.accumulate * static_cast<double>(model.context);
    if (!text.empty())
      fmt::print("\n---- sampled (temperature {}) ----\n{}\n----\n", temperature, text);
    print_model_dir(estimator, flags);
    print_startup(*throughput);
    fmt::print("val_loss={:.4f} tokens_per_s={:.0f} towers={}\n", val_loss, tokens_per_s,
               all_towers);
    return 0;
  });
}
