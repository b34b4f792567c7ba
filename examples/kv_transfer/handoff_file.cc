// Writing, reading and waiting for the hand-off file (handoff_file.h).
#include "examples/kv_transfer/handoff_file.h"

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

namespace ps::kv {
namespace {

constexpr char kHeader[] = "kv_transfer handoff 1";

std::string Hex(const std::string& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool Unhex(const std::string& hex, std::string* out) {
  if (hex.size() % 2 != 0) return false;
  out->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = HexDigit(hex[i]), lo = HexDigit(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    *out += static_cast<char>(hi << 4 | lo);
  }
  return !out->empty();
}

bool ParseUint(const std::string& word, uint64_t* v) {
  if (word.empty() || word.size() > 20) return false;
  uint64_t r = 0;
  for (char c : word) {
    if (c < '0' || c > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (r > (UINT64_MAX - digit) / 10) return false;
    r = r * 10 + digit;
  }
  *v = r;
  return true;
}

}  // namespace

Status WriteHandoff(const std::string& path, const Handoff& h) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kHeader << "\n"
        << "address " << h.address << "\n"
        << "shape " << h.shape.layers << " " << h.shape.tokens << " "
        << h.shape.heads << " " << h.shape.head_dim << "\n"
        << "heads " << h.heads.begin << " " << h.heads.end << "\n"
        << "transfers " << h.transfers << "\n"
        << "pool_block " << h.pool_block << "\n"
        << "pool " << Hex(h.pool_descriptor) << "\n"
        << "control " << Hex(h.control_descriptor) << "\n";
    out.flush();
    if (!out) return IOError("cannot write the hand-off file " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return ErrnoStatus(StatusCode::kIOError, "rename " + tmp + " to " + path,
                       errno);
  }
  return Status::OK();
}

StatusOr<Handoff> ReadHandoff(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    const int err = errno;
    if (err == ENOENT) return NotFound("no hand-off file " + path);
    return ErrnoStatus(StatusCode::kIOError, "open " + path, err);
  }
  auto bad = [&](const std::string& why) {
    return InvalidArgument("hand-off file " + path + ": " + why);
  };
  std::string line;
  if (!std::getline(in, line) || line != kHeader) {
    return bad("it does not start with '" + std::string(kHeader) + "'");
  }
  std::map<std::string, std::vector<std::string>> fields;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream words(line);
    std::string key;
    words >> key;
    std::vector<std::string> values;
    for (std::string w; words >> w;) values.push_back(w);
    if (!fields.emplace(key, values).second) {
      return bad("'" + key + "' appears twice");
    }
  }
  if (in.bad()) return IOError("cannot read " + path);
  // The values of `key`: exactly `n` unsigned numbers.
  auto numbers = [&](const char* key, size_t n,
                     std::vector<uint64_t>* out) -> Status {
    auto it = fields.find(key);
    if (it == fields.end()) return bad(std::string("no '") + key + "' line");
    if (it->second.size() != n) {
      return bad(std::string("'") + key + "' needs " + std::to_string(n) +
                 " numbers");
    }
    out->assign(n, 0);
    for (size_t i = 0; i < n; ++i) {
      if (!ParseUint(it->second[i], &(*out)[i])) {
        return bad(std::string("'") + key + "': '" + it->second[i] +
                   "' is not a number");
      }
    }
    return Status::OK();
  };
  auto one_word = [&](const char* key, std::string* out) -> Status {
    auto it = fields.find(key);
    if (it == fields.end() || it->second.size() != 1) {
      return bad(std::string("no single-word '") + key + "' line");
    }
    *out = it->second[0];
    return Status::OK();
  };
  Handoff h;
  std::vector<uint64_t> v;
  PS_RETURN_IF_ERROR(one_word("address", &h.address));
  PS_RETURN_IF_ERROR(numbers("shape", 4, &v));
  h.shape = {v[0], v[1], v[2], v[3]};
  PS_RETURN_IF_ERROR(numbers("heads", 2, &v));
  h.heads = {v[0], v[1]};
  PS_RETURN_IF_ERROR(numbers("transfers", 1, &v));
  h.transfers = v[0];
  PS_RETURN_IF_ERROR(numbers("pool_block", 1, &v));
  h.pool_block = v[0];
  std::string hex;
  PS_RETURN_IF_ERROR(one_word("pool", &hex));
  if (!Unhex(hex, &h.pool_descriptor)) return bad("'pool' is not hex");
  PS_RETURN_IF_ERROR(one_word("control", &hex));
  if (!Unhex(hex, &h.control_descriptor)) return bad("'control' is not hex");
  if (Status s = ValidateShape(h.shape); !s.ok()) return bad(s.message());
  if (Status s = ValidateHeads(h.shape, h.heads); !s.ok()) {
    return bad(s.message());
  }
  if (h.transfers == 0) return bad("'transfers' must be at least 1");
  return h;
}

StatusOr<Handoff> WaitForHandoff(const std::string& path,
                                 std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    StatusOr<Handoff> h = ReadHandoff(path);
    if (!h.status().Is(StatusCode::kNotFound)) return h;
    if (std::chrono::steady_clock::now() >= deadline) {
      return Timeout("no decode published " + path + " within " +
                     std::to_string(timeout.count()) +
                     " ms (start the decode role with the same --peer_file)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace ps::kv
