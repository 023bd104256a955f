#pragma once
// GPT-2's byte-level pieces: every byte spelled as one printable character, and
// the pre-tokenizer that cuts text into the words BPE merges within.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vkt::models {

/// The character (as UTF-8) GPT-2's byte-level vocabularies spell `byte` with:
/// the printable bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for
/// themselves; the other 68 bytes, in order, for U+0100, U+0101, ... (so 0x20,
/// the space, is "Ġ" U+0120 and 0x0A, the newline, is "Ċ" U+010A).
std::string byte_level_char(std::uint8_t byte);

/// `bytes` spelled with byte_level_char, byte by byte.
std::string byte_level_encode(std::string_view bytes);

/// The bytes a byte-level spelling stands for; std::nullopt when `spelled`
/// holds a character that is no byte's spelling.
std::optional<std::string> byte_level_decode(std::string_view spelled);

/// `text` cut as GPT-2's pre-tokenizer pattern cuts it,
///   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
/// (first alternative that matches, each as long as it can), into pieces that
/// together are `text`. Letters (\p{L}), numbers (\p{N}) and white space (\s,
/// the White_Space property) are ICU's Unicode classes. Bytes that are not
/// UTF-8 count as one character each, of none of the three classes.
///
///   gpt2_pre_tokenize("I've  3 cats!")  // {"I", "'ve", " ", " 3", " cats", "!"}
std::vector<std::string_view> gpt2_pre_tokenize(std::string_view text);

}  // namespace vkt::models
