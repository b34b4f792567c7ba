#include "checkpoint/best_marker.h"

#include "checkpoint/layout.h"

namespace ps::checkpoint {

Status WriteBestMarker(const std::string& root, const proto::BestMarker& m) {
  return WriteFramedFile(JoinPath(root, kBestMarkerName),
                         m.SerializeAsString());
}

StatusOr<proto::BestMarker> ReadBestMarker(const std::string& root) {
  const std::string path = JoinPath(root, kBestMarkerName);
  PS_ASSIGN_OR_RETURN(std::string payload, ReadFramedFile(path));
  proto::BestMarker m;
  if (!m.ParseFromString(payload)) {
    return Corruption(path + ": not a best-checkpoint marker");
  }
  return m;
}

}  // namespace ps::checkpoint
