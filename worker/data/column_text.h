// The text of one column of a data line, as every line parser reads it: the
// label, and the offending text quoted in an error message.
//
// Thread-safety: plain functions of their arguments.
#pragma once

#include <string>
#include <string_view>

namespace ps::data {

// `text` without a leading '+' (std::from_chars takes none); "+-1" keeps
// it, so that it stays refused.
std::string_view WithoutPlusSign(std::string_view text);

// Accepts 0/1 and -1/+1 (also written 1.0, +1 and the like) as the label 1
// or 0; anything else (also "+-1") is false.
bool ParseLabel(std::string_view text, float* label);

// `text` shortened to 32 characters (and "...") for an error message.
std::string Clip(std::string_view text);

}  // namespace ps::data
