#include "kernels/value_section.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace ps::kernels {

void WriteValueSection(ValueType type, uint32_t int8_block, const float* values,
                       size_t count, uint8_t* dst) {
  switch (type) {
    case ValueType::kFp32:
      std::memcpy(dst, values, count * 4);
      break;
    case ValueType::kFp16:
      QuantizeFp16(values, count, reinterpret_cast<uint16_t*>(dst));
      break;
    case ValueType::kBf16:
      QuantizeBf16(values, count, reinterpret_cast<uint16_t*>(dst));
      break;
    case ValueType::kInt8: {
      size_t scales = Int8BlockCount(count, int8_block);
      QuantizeInt8(values, count, int8_block,
                   reinterpret_cast<int8_t*>(dst + 4 * scales),
                   reinterpret_cast<float*>(dst));
      break;
    }
  }
}

void ReadValueRange(ValueType type, uint32_t int8_block, const uint8_t* section,
                    uint64_t total_values, uint64_t first, size_t count,
                    float* out) {
  if (type == ValueType::kInt8) {
    const uint64_t block = int8_block;
    const uint8_t* q = section + 4 * Int8BlockCount(total_values, block);
    size_t done = 0;
    while (done < count) {
      uint64_t v = first + done;
      uint64_t b = v / block;
      size_t len = static_cast<size_t>(
          std::min<uint64_t>(count - done, (b + 1) * block - v));
      float scale;
      std::memcpy(&scale, section + 4 * b, 4);
      DequantizeInt8(reinterpret_cast<const int8_t*>(q + v), len, len, &scale,
                     out + done);
      done += len;
    }
    return;
  }
  const size_t width = ValueTypeBytes(type);
  const uint8_t* src = section + first * width;
  if (type == ValueType::kFp32) {
    std::memcpy(out, src, count * 4);
    return;
  }
  auto convert = [&](const uint16_t* in, size_t n, float* dst) {
    if (type == ValueType::kFp16)
      DequantizeFp16(in, n, dst);
    else
      DequantizeBf16(in, n, dst);
  };
  if (reinterpret_cast<uintptr_t>(src) % alignof(uint16_t) == 0) {
    convert(reinterpret_cast<const uint16_t*>(src), count, out);
    return;
  }
  uint16_t tmp[1024];  // unaligned packet: convert from an aligned copy
  for (size_t done = 0; done < count;) {
    size_t len = std::min<size_t>(1024, count - done);
    std::memcpy(tmp, src + 2 * done, 2 * len);
    convert(tmp, len, out + done);
    done += len;
  }
}

bool AllFinite(const float* v, size_t n) {
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, v + i, 4);
    bad |= static_cast<uint32_t>((bits & 0x7f800000) == 0x7f800000);
  }
  return bad == 0;
}

float LargestMagnitude(const float* v, size_t n) {
  // Non-negative as int32 once the sign is cleared: a signed max, which
  // SSE2 can do in vectors too.
  int32_t most = 0;
  for (size_t i = 0; i < n; ++i) {
    int32_t bits;
    std::memcpy(&bits, v + i, 4);
    most = std::max(most, bits & 0x7fffffff);
  }
  float largest;
  std::memcpy(&largest, &most, 4);
  return largest;
}

Status CheckInt8Section(uint32_t int8_block, const uint8_t* section,
                        uint64_t total_values) {
  uint64_t blocks = Int8BlockCount(total_values, int8_block);
  for (uint64_t b = 0; b < blocks; ++b) {
    float s;
    std::memcpy(&s, section + 4 * b, 4);
    if (!(s >= 0.0f) || !std::isfinite(s))
      return Corruption("int8 scale " + std::to_string(b) + " is " +
                        std::to_string(s) + " (must be finite and >= 0)");
  }
  const int8_t* q = reinterpret_cast<const int8_t*>(section + 4 * blocks);
  uint32_t bad = 0;
  for (uint64_t i = 0; i < total_values; ++i) bad |= (q[i] == -128);
  if (bad) return Corruption("int8 value -128 (the encoder uses [-127, 127])");
  return Status::OK();
}

}  // namespace ps::kernels
