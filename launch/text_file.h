// Reading the small files a launcher watches: logs, port files, pid files.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace ps::launch {

// The whole file, or nullopt if it cannot be opened.
std::optional<std::string> ReadWholeFile(const std::string& path);

// The last `max_bytes` of a file ("" if it cannot be read).
std::string FileTail(const std::string& path, size_t max_bytes);

}  // namespace ps::launch
