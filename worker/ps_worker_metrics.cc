#include "worker/ps_worker_metrics.h"

#include <glog/logging.h>

#include "metrics/process_collector.h"

namespace ps::worker_main {

StatusOr<std::unique_ptr<WorkerMetrics>> WorkerMetrics::Start(
    const std::string& host, int port, uint32_t worker_id) {
  std::unique_ptr<WorkerMetrics> m(new WorkerMetrics());
  m->labels_ = {{"worker", "worker-" + std::to_string(worker_id)}};
  m->last_scrape_ = std::chrono::steady_clock::now();
  WorkerMetrics* raw = m.get();
  m->registry_.AddCollector(
      [raw](metrics::CollectorSink& sink) { raw->Collect(sink); });
  metrics::AddProcessCollector(&m->registry_);
  PS_ASSIGN_OR_RETURN(m->exporter_,
                      metrics::Exporter::Start(&m->registry_, host, port));
  LOG(INFO) << "metrics: " << m->exporter_->url();
  return m;
}

WorkerMetrics::~WorkerMetrics() { exporter_.reset(); }

worker::ClientCounters* WorkerMetrics::MakeClientCounters(uint32_t shards) {
  if (client_owned_ == nullptr) {
    client_owned_ = std::make_unique<worker::ClientCounters>(shards);
    client_.store(client_owned_.get(), std::memory_order_release);
  }
  return client_owned_.get();
}

void WorkerMetrics::NameTables(const train::ParamStore& store,
                               const std::vector<std::string>& names) {
  std::lock_guard<std::mutex> lock(names_mu_);
  for (const std::string& n : names) {
    if (const proto::TableSpec* spec = store.table(n)) {
      table_names_[spec->id()] = n;
    }
  }
}

void WorkerMetrics::Collect(metrics::CollectorSink& sink) {
  constexpr auto kRelaxed = std::memory_order_relaxed;
  const uint64_t examples = stats_.examples.load(kRelaxed);
  const double loss_sum = stats_.loss_sum.load(kRelaxed);
  double rate, loss;
  {
    std::lock_guard<std::mutex> lock(rate_mu_);
    const auto now = std::chrono::steady_clock::now();
    const double secs =
        std::chrono::duration<double>(now - last_scrape_).count();
    // Scrapes closer than 0.1 s apart keep the previous rate.
    if (secs >= 0.1) {
      last_rate_ = (examples - last_examples_) / secs;
      if (examples > last_examples_) {
        last_loss_ = (loss_sum - last_loss_sum_) / (examples - last_examples_);
      }
      last_scrape_ = now;
      last_examples_ = examples;
      last_loss_sum_ = loss_sum;
    }
    rate = last_rate_;
    loss = last_loss_;
  }
  sink.Counter("ps_train_examples_total", "Training examples trained on.",
               labels_, static_cast<double>(examples));
  sink.Counter("ps_train_loss_sum_total",
               "Sum of the training examples' logloss (over "
               "ps_train_examples_total: the mean loss).",
               labels_, loss_sum);
  sink.Gauge("ps_train_loss",
             "Mean training logloss of the examples since the previous "
             "scrape.",
             labels_, loss);
  sink.Gauge("ps_train_samples_per_second",
             "Training examples per second since the previous scrape.", labels_,
             rate);
  const double auc = stats_.train_auc.load(kRelaxed);
  if (auc >= 0) {
    sink.Gauge("ps_train_auc",
               "AUC over the recent training predictions (the last 50000), "
               "updated every second.",
               labels_, auc);
  }
  if (const worker::ClientCounters* c =
          client_.load(std::memory_order_acquire)) {
    for (uint32_t s = 0; s < c->shards(); ++s) {
      metrics::Labels l = labels_;
      l.emplace_back("shard", std::to_string(s));
      sink.Counter(
          "ps_worker_inbox_credit_waits_total",
          "Pushes that found a server's inbox full and waited for "
          "credit (the server applying behind).",
          l, static_cast<double>(c->shard(s)->credit_waits.load(kRelaxed)));
      sink.Counter(
          "ps_worker_inbox_credit_wait_seconds_total",
          "Time pushes waited for inbox credit, in seconds.", l,
          static_cast<double>(c->shard(s)->credit_wait_ns.load(kRelaxed)) *
              1e-9);
    }
    const xfer::LinkStats link = c->link()->Get();
    sink.Counter("ps_worker_xfer_reconnects_total",
                 "Broken connections to servers re-established (every "
                 "transfer in flight completed once).",
                 labels_, static_cast<double>(link.reconnects));
    sink.Counter("ps_worker_xfer_peers_lost_total",
                 "Servers lost: gone, or unreachable past --timeout_ms.",
                 labels_, static_cast<double>(link.peers_lost));
    std::map<uint32_t, std::string> names;
    {
      std::lock_guard<std::mutex> lock(names_mu_);
      names = table_names_;
    }
    for (const auto& e : c->quant().Snapshot()) {
      metrics::Labels l = labels_;
      auto name = names.find(e.table);
      l.emplace_back("table", name != names.end()
                                  ? name->second
                                  : "id-" + std::to_string(e.table));
      l.emplace_back("type", std::string(kernels::ValueTypeName(e.type)));
      sink.Gauge("ps_worker_quantization_relative_l2_error",
                 "||sent - original|| / ||original|| of quantized push "
                 "values (a sample of the pushes; every sparsified one).",
                 l, e.stats.relative_l2_error());
      sink.Gauge("ps_worker_quantization_max_abs_error",
                 "Largest |sent - original| of a quantized push value.", l,
                 e.stats.max_abs_error);
      sink.Gauge("ps_worker_quantization_rms_error",
                 "RMS of sent - original over quantized push values.", l,
                 e.stats.rms_error());
      sink.Counter("ps_worker_quantization_values_total",
                   "Quantized push values whose error was measured.", l,
                   static_cast<double>(e.stats.values));
    }
  }
  const uint64_t evals = stats_.evaluations.load(kRelaxed);
  sink.Counter("ps_eval_evaluations_total", "Evaluations done.", labels_,
               static_cast<double>(evals));
  if (evals > 0) {
    sink.Gauge("ps_eval_auc", "AUC of the last evaluation.", labels_,
               stats_.eval_auc.load(kRelaxed));
    sink.Gauge("ps_eval_logloss", "Logloss of the last evaluation.", labels_,
               stats_.eval_logloss.load(kRelaxed));
    sink.Gauge("ps_eval_ne",
               "Normalized entropy of the last evaluation (logloss over the "
               "base rate's entropy; < 1 beats the base rate).",
               labels_, stats_.eval_ne.load(kRelaxed));
    sink.Gauge("ps_eval_examples", "Examples of the last evaluation.", labels_,
               static_cast<double>(stats_.eval_examples.load(kRelaxed)));
  }
}

}  // namespace ps::worker_main
