#include "metrics/process_collector.h"

#include <dirent.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace ps::metrics {
namespace {

struct ProcStat {
  bool ok = false;
  double cpu_seconds = 0;
  double start_seconds_after_boot = 0;
  double threads = 0;
  double vsize = 0;
  double rss_bytes = 0;
};

ProcStat ReadStat() {
  ProcStat s;
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return s;
  // The command name (field 2) may hold spaces: fields resume after ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return s;
  std::istringstream fields(line.substr(close + 2));
  std::string f[23];
  for (int i = 0; i < 22 && fields >> f[i]; ++i) {
  }
  // Fields from 3 (state) on: f[0] is field 3.
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  try {
    s.cpu_seconds = (std::stod(f[11]) + std::stod(f[12])) / tick;  // 14, 15
    s.threads = std::stod(f[17]);                                  // 20
    s.start_seconds_after_boot = std::stod(f[19]) / tick;          // 22
    s.vsize = std::stod(f[20]);                                    // 23
    s.rss_bytes = std::stod(f[21]) * page;                         // 24
    s.ok = true;
  } catch (...) {
    s.ok = false;
  }
  return s;
}

double OpenFds() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return 0;
  double n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n - 1;  // the directory stream's own
}

double BootTimeSeconds() {
  timespec now_real{}, now_boot{};
  clock_gettime(CLOCK_REALTIME, &now_real);
  clock_gettime(CLOCK_BOOTTIME, &now_boot);
  return (now_real.tv_sec - now_boot.tv_sec) +
         (now_real.tv_nsec - now_boot.tv_nsec) * 1e-9;
}

}  // namespace

void AddProcessCollector(Registry* registry) {
  registry->AddCollector([](CollectorSink& sink) {
    const ProcStat s = ReadStat();
    if (!s.ok) return;
    sink.Counter("process_cpu_seconds_total",
                 "User and system CPU time of the process, in seconds.", {},
                 s.cpu_seconds);
    sink.Gauge("process_resident_memory_bytes",
               "Resident set size of the process, in bytes.", {}, s.rss_bytes);
    sink.Gauge("process_virtual_memory_bytes",
               "Virtual memory size of the process, in bytes.", {}, s.vsize);
    sink.Gauge("process_threads", "Threads of the process.", {}, s.threads);
    sink.Gauge("process_open_fds", "Open file descriptors of the process.", {},
               OpenFds());
    sink.Gauge("process_start_time_seconds",
               "Start time of the process since the Unix epoch, in seconds.",
               {}, BootTimeSeconds() + s.start_seconds_after_boot);
  });
}

}  // namespace ps::metrics
