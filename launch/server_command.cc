#include "launch/server_command.h"

#include "core/transport_name.h"
#include "protocol/spec_choices.h"

namespace ps::launch {

std::vector<std::string> ServerArgv(const ServerCommand& c) {
  std::vector<std::string> args = {
      c.binary,
      "--shard_id=" + std::to_string(c.shard_id),
      "--num_shards=" + std::to_string(c.num_shards),
      "--num_workers=" + std::to_string(c.num_workers),
      "--port=0",
      "--port_file=" + c.port_file,
  };
  if (!c.listen_host.empty()) args.push_back("--listen_host=" + c.listen_host);
  args.push_back("--tables=" + c.tables_path);
  args.push_back("--apply_threads=" + std::to_string(c.apply_threads));
  args.push_back("--consistency=" +
                 std::string(protocol::ConsistencyName(c.consistency)));
  args.push_back("--staleness=" + std::to_string(c.staleness));
  args.push_back("--transport=" +
                 std::string(xfer::TransportChoiceName(c.transport)));
  if (c.inbox_slots != 0)
    args.push_back("--inbox_slots=" + std::to_string(c.inbox_slots));
  if (c.slot_bytes != 0)
    args.push_back("--slot_bytes=" + std::to_string(c.slot_bytes));
  for (const auto& f : c.extra_flags) args.push_back(f);
  return args;
}

}  // namespace ps::launch
