// GPT-2's byte-level spelling and pre-tokenizer.
#include "byte_level.h"

#include <unicode/uchar.h>

#include <array>

namespace vkt::models {
namespace {

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool stands_for_itself(std::uint32_t byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE);
}

/// byte -> code point of its spelling, built once.
const std::array<char32_t, 256>& byte_to_code_point() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 0x100;
    for (std::uint32_t b = 0; b < 256; ++b) t[b] = stands_for_itself(b) ? b : next++;
    return t;
  }();
  return table;
}

/// One decoded character: a code point, or a byte that is not UTF-8 (cp < 0).
struct Char {
  std::int32_t cp;
  std::size_t length;
};

/// The character at text[at]: strict UTF-8 (no overlong forms, surrogates or
/// code points past U+10FFFF); anything else is one byte on its own.
Char next_char(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(text[i]); };
  const std::uint8_t lead = byte(at);
  if (lead < 0x80) return {lead, 1};
  std::size_t length = 0;
  std::int32_t cp = 0, min = 0;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, cp = lead & 0x1F, min = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, cp = lead & 0x0F, min = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, cp = lead & 0x07, min = 0x10000;
  } else {
    return {-1, 1};
  }
  if (at + length > text.size()) return {-1, 1};
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(at + i) & 0xC0) != 0x80) return {-1, 1};
    cp = (cp << 6) | (byte(at + i) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {-1, 1};
  return {cp, length};
}

enum class Kind { Letter, Number, Space, Other };

Kind kind_of(std::int32_t cp) {
  if (cp < 0) return Kind::Other;
  if (cp < 0x80) {  // the common case without a table look-up
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return Kind::Letter;
    if (cp >= '0' && cp <= '9') return Kind::Number;
    // White_Space in ASCII: \t..\r and the space (not 0x1C..0x1F).
    if (cp == ' ' || (cp >= '\t' && cp <= '\r')) return Kind::Space;
    return Kind::Other;
  }
  const auto c = static_cast<UChar32>(cp);
  if (u_isUWhiteSpace(c)) return Kind::Space;
  const auto mask = U_GET_GC_MASK(c);
  if (mask & U_GC_L_MASK) return Kind::Letter;
  if (mask & U_GC_N_MASK) return Kind::Number;
  return Kind::Other;
}

struct Decoded {
  std::size_t begin;  // byte offset
  Kind kind;
};

/// Length in characters of the contraction ('s 't 're 've 'm 'll 'd) at chars[i], or 0.
std::size_t contraction_at(std::string_view text, const std::vector<Decoded>& chars,
                           std::size_t i) {
  // A character whose first byte is ASCII is that one byte, so comparing first
  // bytes compares characters. chars ends with a marker: chars.size() - 1 are real.
  const std::size_t n = chars.size() - 1;
  if (text[chars[i].begin] != '\'' || i + 1 >= n) return 0;
  const char a = text[chars[i + 1].begin];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= n) return 0;
  const char b = text[chars[i + 2].begin];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

}  // namespace

std::string byte_level_char(std::uint8_t byte) {
  std::string out;
  append_utf8(out, byte_to_code_point()[byte]);
  return out;
}

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char b : bytes) append_utf8(out, byte_to_code_point()[static_cast<std::uint8_t>(b)]);
  return out;
}

std::optional<std::string> byte_level_decode(std::string_view spelled) {
  // code point -> byte for the spellings, which all lie below U+0144.
  static const std::array<std::int16_t, 0x144> code_point_to_byte = [] {
    std::array<std::int16_t, 0x144> t{};
    t.fill(-1);
    for (std::uint32_t b = 0; b < 256; ++b)
      t[byte_to_code_point()[b]] = static_cast<std::int16_t>(b);
    return t;
  }();
  std::string out;
  out.reserve(spelled.size());
  for (std::size_t at = 0; at < spelled.size();) {
    const Char c = next_char(spelled, at);
    if (c.cp < 0 || static_cast<std::size_t>(c.cp) >= code_point_to_byte.size() ||
        code_point_to_byte[c.cp] < 0) {
      return std::nullopt;
    }
    out += static_cast<char>(code_point_to_byte[c.cp]);
    at += c.length;
  }
  return out;
}

std::vector<std::string_view> gpt2_pre_tokenize(std::string_view text) {
  // Characters with their classes, plus an end marker at text.size().
  std::vector<Decoded> chars;
  chars.reserve(text.size() + 1);
  for (std::size_t at = 0; at < text.size();) {
    const Char c = next_char(text, at);
    chars.push_back({at, kind_of(c.cp)});
    at += c.length;
  }
  const std::size_t n = chars.size();
  chars.push_back({text.size(), Kind::Other});

  const auto is_space_char = [&](std::size_t i) { return i < n && text[chars[i].begin] == ' '; };
  const auto run_end = [&](std::size_t i, Kind kind) {
    while (i < n && chars[i].kind == kind) ++i;
    return i;
  };

  std::vector<std::string_view> pieces;
  for (std::size_t i = 0; i < n;) {
    std::size_t end = i;
    if (const std::size_t c = contraction_at(text, chars, i); c > 0) {
      end = i + c;
    } else {
      // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": a run of one class,
      // after one optional U+0020 (which, being \s, is in none of them).
      const std::size_t start = is_space_char(i) && i + 1 < n ? i + 1 : i;
      const Kind kind = chars[start].kind;
      if (kind != Kind::Space) {
        end = run_end(start, kind);
      } else {
        // "\s+(?!\S)": the run of white space, less its last character when a
        // non-space follows it; "\s+" takes the whole run when that leaves nothing.
        const std::size_t whole = run_end(i, Kind::Space);
        end = (whole < n && whole - i > 1) ? whole - 1 : whole;
      }
    }
    pieces.push_back(text.substr(chars[i].begin, chars[end].begin - chars[i].begin));
    i = end;
  }
  return pieces;
}

}  // namespace vkt::models
