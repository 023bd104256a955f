#pragma once
// Fine-tuning text: a plain text file or JSON lines with a "text" field,
// tokenized, packed into windows of context + 1 tokens, every tenth held out.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../runtime/io/dataset.h"

namespace vkt::models {

class Tokenizer;

/// The documents of `path`: a plain text file is one document; a file whose
/// name ends in .jsonl or .json, or whose first character is '{', is JSON
/// lines, each line an object with a string field "text" (blank lines
/// skipped). A missing file, a line that is not such an object, and a file
/// with no text are each a vkt::Error naming the file (and line).
std::vector<std::string> read_documents(const std::string& path);

/// The documents as one token stream: each encoded without BOS and followed
/// by `separator` (the tokenizer's end of sequence) when given, as Hugging
/// Face's run_clm packs a corpus.
std::vector<std::int32_t> pack_documents(const std::vector<std::string>& documents,
                                         const Tokenizer& tokenizer,
                                         std::optional<std::int32_t> separator);

/// Windows of `context` + 1 tokens, one every `context`: "tokens" [N, T] and
/// "next" [N, T] (the token after each). Every tenth window is held out
/// (`held_out` true gives those, false the rest).
Dataset token_windows(const std::vector<std::int32_t>& tokens, std::int64_t context, bool held_out);

}  // namespace vkt::models
