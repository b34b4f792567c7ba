#include "metrics/exporter.h"

#include <utility>

#include "metrics/text_format.h"

#ifdef PS_HAVE_HTTPLIB
#include <httplib.h>
#endif

namespace ps::metrics {

#ifdef PS_HAVE_HTTPLIB

struct Exporter::Impl {
  httplib::Server server;
};

bool ExporterAvailable() { return true; }

StatusOr<std::unique_ptr<Exporter>> Exporter::Start(const Registry* registry,
                                                    const std::string& host,
                                                    int port) {
  if (port < 0 || port > 65535) {
    return InvalidArgument("metrics port must be in [0, 65535], not " +
                           std::to_string(port));
  }
  auto impl = std::make_unique<Impl>();
  impl->server.Get(
      "/metrics", [registry](const httplib::Request&, httplib::Response& res) {
        res.set_content(RenderText(registry->Snapshot()), kTextContentType);
      });
  impl->server.set_keep_alive_max_count(100);
  // Two connections at a time (a Prometheus keeps one open) instead of the
  // library's one thread per core, at least 8, idling in every process.
  impl->server.new_task_queue = [] { return new httplib::ThreadPool(2); };
  int bound = port;
  if (port == 0) {
    bound = impl->server.bind_to_any_port(host);
  } else if (!impl->server.bind_to_port(host, port)) {
    bound = -1;
  }
  if (bound <= 0) {
    return IOError("cannot serve metrics on " + host + ":" +
                   std::to_string(port) +
                   " (port in use, not permitted, or not a local address)");
  }
  std::unique_ptr<Exporter> e(new Exporter(std::move(impl)));
  e->host_ = host;
  e->port_ = bound;
  Impl* raw = e->impl_.get();
  e->thread_ = std::thread([raw] { raw->server.listen_after_bind(); });
  return e;
}

Exporter::~Exporter() {
  if (impl_ != nullptr) impl_->server.stop();
  if (thread_.joinable()) thread_.join();
}

#else  // !PS_HAVE_HTTPLIB

struct Exporter::Impl {};

bool ExporterAvailable() { return false; }

StatusOr<std::unique_ptr<Exporter>> Exporter::Start(const Registry*,
                                                    const std::string&, int) {
  return NotSupported(
      "this build has no metrics endpoint: cpp-httplib was not found at "
      "configure time (install libcpp-httplib-dev: scripts/setup.sh)");
}

Exporter::~Exporter() = default;

#endif

Exporter::Exporter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::string Exporter::url() const {
  const bool v6 = host_.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + host_ + "]" : host_) + ":" +
         std::to_string(port_) + "/metrics";
}

}  // namespace ps::metrics
