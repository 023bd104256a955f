// vkt-finetune: fine-tunes a Hugging Face model directory (a Llama-family or
// GPT-2 checkpoint, its config.json and tokenizer) on a text file by LoRA on
// every chosen Vulkan device, prints the held-out loss before and after and
// a continuation of --prompt, and writes the fine-tuned model back out.
//
//   vkt-finetune --model tiny-llama --data notes.txt --steps 50 --prompt "Once" --export tuned
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <vktower/models/causal_lm.h>
#include <vktower/models/generator.h>
#include <vktower/models/pretrained.h>
#include <vktower/models/text_dataset.h>
#include <vktower/models/tokenizer.h>
#include <vktower/runtime/io/checkpoint.h>
#include <vktower/runtime/io/checkpoint_manager.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/replicate.h>
#include <vktower/vktower.h>
#include "../sample_cli.h"
#include "../sample_throughput.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

/// What the fine-tune's own flags hold.
struct FinetuneFlags {
  std::string model, data, prompt, export_dir, targets;
  std::int64_t context = 128, lora_rank = 8, max_new_tokens = 40, top_k = 0;
  double lora_alpha = 16, learning_rate = 1e-3, temperature = 0.0;
  std::uint64_t eval_batches = 8;
};

std::vector<std::string> comma_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

/// The trained run's values of every decoder variable (and adapter), from
/// its checkpoint `saved`.
vkt::models::DecoderWeights trained_weights(const std::map<std::string, vkt::HostTensor>& saved,
                                            const vkt::models::PretrainedDecoder& model,
                                            const vkt::models::DecoderOptions& options) {
  vkt::models::DecoderWeights weights;
  for (const vkt::models::WeightEntry& e : vkt::models::decoder_weight_entries(model.config)) {
    const vkt::HostTensor& v = saved.at(e.variable);
    weights.set(e.variable, v.shape, v.f32);
    if (options.lora && e.variable == e.module + "/kernel" &&
        vkt::models::lora_targeted(e.module, options.lora_targets.empty()
                                                 ? vkt::models::default_lora_targets(model.config)
                                                 : options.lora_targets)) {
      for (const char* part : {"/lora_a", "/lora_b"}) {
        const vkt::HostTensor& a = saved.at(e.module + part);
        weights.set(e.module + part, a.shape, a.f32);
      }
    }
  }
  return weights;
}

/// The tokenizer's files, beside the exported weights, so the export is a
/// whole model directory.
void copy_tokenizer_files(const std::string& from, const std::string& to) {
  for (const char* name :
       {"tokenizer.model", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
        "vocab.json", "merges.txt", "generation_config.json"}) {
    const std::filesystem::path source = std::filesystem::path(from) / name;
    if (std::filesystem::exists(source)) {
      std::filesystem::copy_file(source, std::filesystem::path(to) / name,
                                 std::filesystem::copy_options::overwrite_existing);
    }
  }
}

/// The model directory, read and checked against the flags.
struct Pretrained {
  std::shared_ptr<const vkt::models::PretrainedDecoder> model;
  std::unique_ptr<vkt::models::Tokenizer> tokenizer;
};

Pretrained load_model(const FinetuneFlags& f) {
  Pretrained p;
  try {  // the model directory's errors in the flag's words
    p.model =
        std::make_shared<vkt::models::PretrainedDecoder>(vkt::models::load_pretrained(f.model));
    p.tokenizer = vkt::models::load_tokenizer(f.model);
  } catch (const vkt::Error& e) {
    throw vkt::Error(fmt::format("--model {}: {}", f.model, e.what()));
  }
  const std::int64_t positions = p.model->config.max_position_embeddings;
  if (f.context > positions) {
    throw vkt::Error(
        fmt::format("--context {} is longer than the model's {} positions "
                    "(max_position_embeddings); give --context {} or less",
                    f.context, positions, positions));
  }
  return p;
}

/// --data tokenized and cut into training and held-out windows.
struct Windows {
  std::vector<std::int32_t> stream;
  vkt::Dataset train, held_out;
};

Windows load_windows(const FinetuneFlags& f, const SampleFlags& flags,
                     const vkt::models::Tokenizer& tokenizer) {
  Windows w;
  w.stream = vkt::models::pack_documents(vkt::models::read_documents(f.data), tokenizer,
                                         tokenizer.eos_id());
  w.train = vkt::models::token_windows(w.stream, f.context, false);
  w.held_out = vkt::models::token_windows(w.stream, f.context, true);
  if (w.train.size() < flags.batch_size || w.held_out.size() == 0) {
    throw vkt::Error(fmt::format(
        "--data '{}' has {} tokens: {} training windows of {} + 1 tokens, fewer than a "
        "--batch-size of {} (or no held-out window); give more text or a smaller --context "
        "or --batch-size",
        f.data, w.stream.size(), w.train.size(), f.context, flags.batch_size));
  }
  return w;
}

/// --prompt continued by the trained model on `device`, from its key/value cache.
void print_continuation(vkt::Device& device, const vkt::models::PretrainedDecoder& model,
                        const vkt::models::DecoderWeights& weights,
                        const vkt::models::DecoderOptions& options,
                        const vkt::models::Tokenizer& tokenizer, const FinetuneFlags& f,
                        std::uint64_t seed) {
  const std::vector<std::int32_t> prompt = tokenizer.encode(f.prompt);
  vkt::models::Generator generator(
      device, model.config, weights, options,
      std::min<std::int64_t>(model.config.max_position_embeddings,
                             static_cast<std::int64_t>(prompt.size()) + f.max_new_tokens));
  vkt::models::GenerationOptions generation{.max_new_tokens = f.max_new_tokens,
                                            .temperature = f.temperature,
                                            .top_k = f.top_k,
                                            .seed = seed};
  if (tokenizer.eos_id()) generation.stop_tokens.push_back(*tokenizer.eos_id());
  const std::vector<std::int32_t> continuation = generator.generate(prompt, generation);
  fmt::print("\n---- {} ----\n{}{}\n----\n",
             f.temperature > 0 ? fmt::format("sampled (temperature {})", f.temperature)
                               : std::string("greedy"),
             f.prompt, tokenizer.decode(continuation));
}

/// --export: the merged model with the tokenizer's files, and the adapters in DIR/adapter.
void export_finetuned(const std::map<std::string, vkt::HostTensor>& saved,
                      const vkt::models::PretrainedDecoder& model,
                      const vkt::models::DecoderOptions& options, const FinetuneFlags& f) {
  const auto values = [&](const std::string& name) { return saved.at(name).f32; };
  vkt::models::export_merged(f.export_dir, model, options, values);
  copy_tokenizer_files(f.model, f.export_dir);
  if (options.lora) {
    vkt::models::export_adapters((std::filesystem::path(f.export_dir) / "adapter").string(), model,
                                 options, values, f.model);
  }
  fmt::print("exported the fine-tuned model to {} (adapters in {}/adapter)\n", f.export_dir,
             f.export_dir);
}

/// The global step of --model-dir's newest checkpoint (0 without one).
std::uint64_t resumed_step(const std::string& model_dir) {
  if (model_dir.empty() || !std::filesystem::exists(model_dir)) return 0;
  const std::optional<std::string> latest = vkt::CheckpointManager(model_dir, 1).latest();
  return latest ? vkt::checkpoint_global_step(*latest) : 0;
}

void add_finetune_flags(CLI::App& app, FinetuneFlags& f) {
  app.add_option("--model", f.model,
                 "a Hugging Face model directory: config.json, model.safetensors (or shards "
                 "and model.safetensors.index.json), tokenizer.model or tokenizer.json")
      ->required();
  app.add_option("--data", f.data, "a text file, or JSON lines with a \"text\" field")->required();
  app.add_option("--context", f.context, "tokens per training window")
      ->capture_default_str()
      ->check(whole_number(2, 1 << 20));
  app.add_option("--lora-rank", f.lora_rank,
                 "the adapters' rank (0: train every weight, in f32, instead of adapters)")
      ->capture_default_str()
      ->check(whole_number(0, 4096));
  app.add_option("--lora-alpha", f.lora_alpha, "the adapters' scale is alpha / rank")
      ->capture_default_str()
      ->check(positive_number());
  app.add_option("--lora-targets", f.targets,
                 "comma-separated projections that take adapters, as PEFT's target_modules "
                 "(default q,k,v,o: q_proj,k_proj,v_proj,o_proj; GPT-2: attn.c_attn,attn.c_proj)");
  app.add_option("--learning-rate", f.learning_rate,
                 "the peak rate (linear warm-up over 5% of the steps, then cosine to 0)")
      ->capture_default_str()
      ->check(positive_number());
  app.add_option("--eval-batches", f.eval_batches, "held-out batches per evaluation")
      ->capture_default_str()
      ->check(whole_number(1, 1000000));
  app.add_option("--prompt", f.prompt, "text to continue after training (empty: none)");
  app.add_option("--max-new-tokens", f.max_new_tokens, "tokens to generate after --prompt")
      ->capture_default_str()
      ->check(whole_number(1, 1 << 20));
  app.add_option("--temperature", f.temperature, "0: greedy; above 0: sample at this temperature")
      ->capture_default_str()
      ->check(real_number(0.0, 100.0));
  app.add_option("--top-k", f.top_k, "sample among the k most likely tokens (0: all)")
      ->capture_default_str()
      ->check(whole_number(0, 1 << 30));
  app.add_option("--export", f.export_dir,
                 "write the fine-tuned model here (merged, in the original's names, layout and "
                 "dtypes) and the adapters alone in DIR/adapter (PEFT's layout)");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "vkt-finetune: LoRA fine-tuning of a Hugging Face Llama-family or GPT-2 model on every "
      "chosen Vulkan device; resumes from --model-dir"};
  SampleFlags flags{.steps = 50, .batch_size = 8};
  FinetuneFlags f;
  add_sample_flags(app, flags, "the adapters' initial values, shuffling and sampling");
  add_finetune_flags(app, f);
  if (const std::optional<int> exit = parse_flags(app, argc, argv, "vkt-finetune")) return *exit;

  return run_sample("vkt-finetune", [&] {
    const Pretrained pretrained = load_model(f);
    const std::shared_ptr<const vkt::models::PretrainedDecoder>& model = pretrained.model;
    const vkt::models::Tokenizer* tokenizer = pretrained.tokenizer.get();
    const Windows windows = load_windows(f, flags, *tokenizer);
    const std::vector<std::int32_t>& stream = windows.stream;
    const vkt::Dataset& train = windows.train;
    const vkt::Dataset& held_out = windows.held_out;
    // The schedule spans this run's steps from where --model-dir stands, so a
    // resumed run warms up and decays again over the steps it was given.
    vkt::models::CausalLmSettings settings{.learning_rate = f.learning_rate,
                                           .steps = resumed_step(flags.model_dir) + flags.steps};
    if (f.lora_rank > 0) {
      settings.decoder.lora = vkt::layers::LoraOptions{
          .rank = f.lora_rank,
          .alpha = static_cast<float>(f.lora_alpha),
          .base_dtype = flags.precision == "fp32" ? vkt::DType::F32 : vkt::DType::BF16};
      settings.decoder.lora_targets = comma_list(f.targets);
    }
    const Towers towers = resolve_devices(flags.devices);
    vkt::Estimator estimator(
        vkt::replicate_model_fn(vkt::models::causal_lm_model_fn(model, settings),
                                replicate_options(flags, towers.devices)),
        {.model_dir = flags.model_dir,
         .random_seed = flags.seed,
         .log_step_count_steps = std::max<std::uint64_t>(flags.steps / 5, 1),
         .accumulate_steps = flags.accumulate,
         .mpi = mpi_setting(flags),
         .on_device_loss = device_loss_action(flags)});
    const bool chief = estimator.rank() == 0;
    const int processes = processes_of(estimator);
    const std::size_t all_towers = towers.devices.size() * static_cast<std::size_t>(processes);
    if (chief) {
      fmt::print(
          "{} ({}, {} layers, width {}, vocabulary {}); {} tokens of {}: {} training and "
          "{} held-out windows of {}; {} tower{} on devices {}\n",
          f.model, model->config.architecture_name, model->config.num_hidden_layers,
          model->config.hidden_size, model->config.vocab_size, stream.size(), f.data, train.size(),
          held_out.size(), f.context, all_towers, all_towers == 1 ? "" : "s", towers.description);
    }
    const vkt::InputFn train_input = vkt::dataset_input(train, {.batch_size = flags.batch_size,
                                                                .epochs = 0,
                                                                .shuffle_seed = flags.seed,
                                                                .drop_remainder = true,
                                                                .label_columns = {"next"}});
    const vkt::InputFn held_out_input =
        vkt::dataset_input(held_out, {.batch_size = flags.batch_size, .label_columns = {"next"}});
    // A fresh run is scored on one device before any step (the Estimator has no
    // checkpoint to evaluate yet); a resumed one by the Estimator, from its checkpoint.
    double before = 0;
    if (estimator.latest_checkpoint()) {
      before = estimator.evaluate(held_out_input, f.eval_batches).at("loss");
    } else if (chief) {
      vkt::Device device(estimator.instance(), towers.devices.front());
      before = vkt::models::held_out_loss(device, model->config, model->weights, settings.decoder,
                                          held_out, flags.batch_size,
                                          static_cast<std::int64_t>(f.eval_batches));
    }
    const auto throughput = std::make_shared<Throughput>();
    const std::uint64_t first = estimator.global_step();
    const std::uint64_t last =
        estimator.train(train_input, {.steps = flags.steps, .hooks = {throughput}});
    const double after = estimator.evaluate(held_out_input, f.eval_batches).at("loss");
    if (!chief) return 0;
    // The trained values, read once: the checkpoint train() wrote as it ended.
    const std::map<std::string, vkt::HostTensor> saved =
        vkt::read_checkpoint(estimator.latest_checkpoint().value());
    if (!f.prompt.empty() && processes == 1) {
      vkt::Device device(estimator.instance(), towers.devices.front());
      print_continuation(device, *model, trained_weights(saved, *model, settings.decoder),
                         settings.decoder, *tokenizer, f, flags.seed);
    }
    if (!f.export_dir.empty()) export_finetuned(saved, *model, settings.decoder, f);
    const double tokens_per_s = throughput->steps_per_s() * static_cast<double>(flags.batch_size) *
                                flags.accumulate * static_cast<double>(f.context);
    fmt::print("trained steps {} to {}\n", first, last);
    print_model_dir(estimator, flags);
    print_startup(*throughput);
    fmt::print("val_loss_before={:.4f} val_loss_after={:.4f} tokens_per_s={:.0f} towers={}\n",
               before, after, tokens_per_s, all_towers);
    return 0;
  });
}
