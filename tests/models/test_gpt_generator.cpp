// vkt-gpt's model (samples/vkt_gpt/gpt_model.h) read as the library's GPT-2
// decoder (samples/vkt_gpt/gpt_generator.h), which vkt-gpt samples from:
// the same logits as the sample's own graph, tied head or not.
#include <catch2/catch.hpp>

#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>

#include "../../samples/vkt_gpt/gpt_generator.h"
#include "../../samples/vkt_gpt/gpt_model.h"
#include "../test_support.h"
#include "decoder_check.h"

TEST_CASE("vkt-gpt's model read as a GPT-2 decoder gives the logits of its own graph") {
  for (const bool tie : {false, true}) {
    GptSettings s{.vocab = 11, .context = 8, .width = 16, .layers = 2, .heads = 2};
    s.dropout = 0.0;
    s.tie_weights = tie;
    const std::int64_t b = 2;
    std::vector<std::int32_t> tokens;
    for (std::int64_t i = 0; i < b * s.context; ++i) {
      tokens.push_back(static_cast<std::int32_t>((i * 7 + 2) % s.vocab));
    }
    vkt::Graph g(vkt::test::shared_device(), {.seed = 4});
    const vkt::Tensor input = g.input("tokens", {b, s.context}, vkt::DType::I32);
    const vkt::Tensor logits = gpt_logits(g, input, to_params(s));
    std::vector<vkt::Tensor> fetches{logits};
    for (const vkt::Variable& v : g.variables()) fetches.push_back(v.tensor);
    vkt::Executor exec(g, fetches, {.training = false});
    exec.feed("tokens", tokens);
    exec.run();
    std::map<std::string, vkt::HostTensor> saved;
    for (const vkt::Variable& v : g.variables()) {
      saved[v.tensor.name()] = vkt::HostTensor::floats(v.tensor.shape(), exec.read(v.tensor));
    }
    const vkt::models::DecoderWeights weights = gpt_decoder_weights(saved, s);
    const vkt::models::DecoderConfig config = gpt_decoder_config(s);
    CHECK(weights.size() == vkt::models::decoder_weight_entries(config).size());
    const std::vector<float> want = exec.read(logits);
    CHECK(vkt::test::norm_relative(vkt::test::device_logits(config, weights, tokens, b), want) <
          1e-5);
  }
}
