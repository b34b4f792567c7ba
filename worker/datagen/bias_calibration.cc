#include "worker/datagen/bias_calibration.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace ps::datagen {

double CalibrateBias(std::span<const double> p, double rate, double lo,
                     double hi) {
  if (p.empty()) return std::clamp(std::log(rate / (1 - rate)), lo, hi);
  auto mean_at = [&](double b) {
    double scale = std::exp(b), sum = 0;
    for (double pi : p) sum += pi * scale / (pi * scale + (1 - pi));
    return sum / static_cast<double>(p.size());
  };
  // 60 halvings of a range of at most 60 leave far less than float's
  // precision, the precision of the planted bias.
  for (int i = 0; i < 60; ++i) {
    double mid = (lo + hi) / 2;
    (mean_at(mid) < rate ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

double CalibrateBias(RowSynth* zero_bias_synth, int rows, double rate,
                     double lo, double hi) {
  std::vector<double> p(rows);
  std::string line;
  for (double& pi : p) zero_bias_synth->NextRow(&line, &pi);
  return CalibrateBias(p, rate, lo, hi);
}

}  // namespace ps::datagen
