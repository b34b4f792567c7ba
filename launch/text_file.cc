#include "launch/text_file.h"

#include <fstream>
#include <sstream>

namespace ps::launch {

std::optional<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string FileTail(const std::string& path, size_t max_bytes) {
  auto text = ReadWholeFile(path);
  if (!text) return "";
  if (text->size() > max_bytes) return text->substr(text->size() - max_bytes);
  return *text;
}

}  // namespace ps::launch
