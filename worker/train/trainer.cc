// Trainer: creation, the run's epochs (its threads run StepLoop while this
// thread reports progress and evaluates) and the result's JSON. Evaluate is
// in trainer_eval.cc.
#include "worker/train/trainer.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "protocol/spec_choices.h"
#include "worker/train/batch_runner.h"
#include "worker/train/early_stop.h"
#include "worker/train/example_source.h"
#include "worker/train/progress_log.h"
#include "worker/train/step_loop.h"

namespace ps::train {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

StatusOr<Trainer> Trainer::Create(const TrainerOptions& options,
                                  const Model* model, ParamStore* store) {
  if (options.batch_size == 0 || options.threads == 0 || options.epochs == 0) {
    return InvalidArgument("--batch_size, --threads and --epochs must be >= 1");
  }
  if (options.early_stop &&
      (options.eval_steps == 0 || options.early_stop_patience == 0)) {
    return InvalidArgument(
        "--early_stop needs eval points (--eval_every) and "
        "--early_stop_patience >= 1");
  }
  Trainer t(options, model, store);
  const proto::TableSpec* sparse = store->table(options.sparse_table);
  if (sparse == nullptr) {
    return InvalidArgument("the table config has no table '" +
                           options.sparse_table + "' (the " + model->name() +
                           " model's sparse table)");
  }
  if (sparse->kind() == proto::DENSE || sparse->dim() != model->sparse_dim()) {
    return InvalidArgument(
        "table " + sparse->name() + " must be HASHED or EXACT with dim " +
        std::to_string(model->sparse_dim()) + " for model " + model->name() +
        " (it has dim " + std::to_string(sparse->dim()) + ")");
  }
  t.sparse_id_ = sparse->id();
  if (model->dense_size() > 0) {
    const proto::TableSpec* dense = store->table(options.dense_table);
    if (dense == nullptr) {
      return InvalidArgument("the table config has no table '" +
                             options.dense_table + "' (the " + model->name() +
                             " model's MLP weights)");
    }
    const uint64_t floats = dense->capacity() * dense->dim();
    if (dense->kind() != proto::DENSE || floats != model->dense_size()) {
      return InvalidArgument(
          "table " + dense->name() + " must be DENSE with capacity x dim = " +
          std::to_string(model->dense_size()) + " floats for this MLP (has " +
          std::to_string(floats) + ")");
    }
    t.dense_id_ = dense->id();
  }
  if (sparse->has_adaptive_admission()) {
    const double r = sparse->adaptive_admission().reliability();
    t.admission_ = FeatureAdmission::Adaptive(
        r > 0 ? r : 0.5, options.num_workers, options.admission_sketch_bytes);
  } else if (sparse->admit_after_examples() > 0) {
    t.admission_ = std::make_shared<FeatureAdmission>(
        sparse->admit_after_examples(), options.num_workers,
        options.admission_sketch_bytes);
  }
  return t;
}

std::string Trainer::DivergenceHint() const {
  auto describe = [&](const std::string& name) {
    const proto::TableSpec* t = store_->table(name);
    if (t == nullptr) return name;
    const proto::OptimizerSpec& o = t->optimizer();
    auto kind = protocol::OptimizerKindOf(o);  // the store validated it
    if (!kind.ok() || *kind == proto::OPTIMIZER_SUM) {
      return name + " (sum: gradients are added as they are; give it sgd or " +
             "adagrad with a learning rate)";
    }
    if (*kind == proto::OPTIMIZER_FTRL) {
      return name + " (ftrl, ftrl_alpha " + FormatNumber(o.ftrl_alpha()) + ")";
    }
    return name + " (" + std::string(protocol::OptimizerKindName(*kind)) +
           ", learning_rate " + FormatNumber(o.learning_rate()) + ")";
  };
  std::string tables = "table " + describe(options_.sparse_table);
  if (model_->dense_size() > 0) {
    tables += " or table " + describe(options_.dense_table);
  }
  return "lower the learning rate of " + tables +
         ", or look for huge feature values in the data";
}

SourceOptions Trainer::TrainSourceOptions() const {
  SourceOptions so;
  so.format = options_.format;
  so.csv_spec = options_.csv_spec;
  so.strict = options_.strict_data;
  so.worker_id = options_.worker_id;
  so.num_workers = options_.num_workers;
  so.seed = options_.seed;
  so.holdout_every = options_.eval_data.empty() ? options_.holdout_every : 0;
  return so;
}

Status Trainer::CheckSameCsvFields(const data::CsvLayout& train,
                                   data::LineReader* eval) const {
  PS_ASSIGN_OR_RETURN(
      data::LineFormat format,
      data::LineFormat::Open(data::DataFormat::kCsv, options_.csv_spec, eval));
  if (format.csv()->field_names() == train.field_names()) return Status::OK();
  auto list = [](const std::vector<std::string>& names) {
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  };
  return InvalidArgument(
      options_.eval_data + "'s header gives the feature columns (" +
      list(format.csv()->field_names()) + "), " + options_.train_data + "'s (" +
      list(train.field_names()) +
      "): the model needs the same columns in the same order");
}

StatusOr<TrainResult> Trainer::Run() {
  PS_ASSIGN_OR_RETURN(auto source, ExampleSource::Open(options_.train_data,
                                                       TrainSourceOptions()));
  if (!options_.eval_data.empty()) {
    // Fail now, not after hours of training.
    PS_ASSIGN_OR_RETURN(auto eval_lines,
                        data::LineReader::Open(options_.eval_data));
    if (source->format().csv() != nullptr &&
        data::IsRegularFile(options_.eval_data)) {
      PS_RETURN_IF_ERROR(
          CheckSameCsvFields(*source->format().csv(), eval_lines.get()));
    }
  }

  // Adaptive admission sets its thresholds from a counting pass before
  // training; a resumed run counts again (the counts are not restored).
  if ((admission_ != nullptr && admission_->adaptive()) ||
      options_.start_epoch > 0 || options_.start_consumed > 0) {
    PS_RETURN_IF_ERROR(CountAdmissionPass());
  }

  TrainResult result;
  ProgressLog progress(options_.epochs, options_.progress_in_place,
                       options_.stats);
  progress.set_metrics(options_.metrics_out.get());
  // With early stopping the loop runs on options whose gate calls hold the
  // eval points too.
  TrainerOptions run_options = options_;
  std::optional<EarlyStop> early;
  StepLoop* loop_of_run = nullptr;
  if (options_.early_stop) {
    early.emplace(options_.early_stop_patience);
    InstallEvalPoints(&run_options, &*early, &loop_of_run, &result, &progress);
  }
  StepLoop::Params params;
  params.options = &run_options;
  params.model = model_;
  params.store = store_;
  params.tables = {sparse_id_, dense_id_, admission_.get()};
  params.source = source.get();
  params.progress = &progress;
  params.divergence_hint = [this] { return DivergenceHint(); };
  StepLoop loop(params);
  loop_of_run = &loop;
  uint64_t examples_per_epoch = 0;  // known after the first epoch
  const auto start = Clock::now();
  // Early stopping evaluates at its step boundaries instead.
  uint64_t next_eval = options_.early_stop ? 0 : options_.eval_every;

  auto evaluate_now = [&](bool final_eval) -> Status {
    if (!options_.evaluate) return Status::OK();
    PS_ASSIGN_OR_RETURN(EvalPoint p,
                        Evaluate(final_eval ? options_.threads : 1));
    p.trained_examples = loop.examples();
    result.history.push_back(p);
    progress.EvalLine(p, final_eval);
    WarnIfNoBetterThanBaseRate(p);
    if (early && final_eval) early->Observe(p);
    if (final_eval) {
      result.final_eval = p;
      result.evaluated = true;
    }
    return Status::OK();
  };
  const bool print_progress = options_.progress_secs > 0;
  auto progress_line = [&](uint32_t epoch, bool final_line) {
    progress.Line(epoch, loop.examples(), examples_per_epoch,
                  source->fraction_read(), final_line, print_progress);
  };

  // Metrics: the running training AUC about once a second (and after each
  // epoch, however short).
  auto last_auc = Clock::now();
  const uint32_t first_epoch = options_.start_epoch;
  for (uint32_t epoch = first_epoch; epoch < options_.epochs; ++epoch) {
    const bool resumed_mid_epoch =
        epoch == first_epoch && options_.start_consumed > 0;
    if (epoch > 0 && !resumed_mid_epoch) {
      PS_RETURN_IF_ERROR(source->Rewind());
    }
    if (resumed_mid_epoch) {
      PS_RETURN_IF_ERROR(source->Skip(options_.start_consumed));
    }
    const uint64_t epoch_start_examples = loop.examples();
    loop.BeginEpoch();
    std::mutex done_mu;
    std::condition_variable done_cv;
    uint32_t running = options_.threads;  // guarded by done_mu
    std::vector<std::thread> pool;
    for (uint32_t i = 0; i < options_.threads; ++i) {
      pool.emplace_back([&] {
        loop.RunEpoch(epoch);
        std::lock_guard<std::mutex> lock(done_mu);
        if (--running == 0) done_cv.notify_all();
      });
    }
    // This thread reports progress and runs interval evaluations.
    auto last_report = Clock::now();
    // Without progress lines, curves (--metrics_out) still get a point a
    // second.
    const double period = print_progress           ? options_.progress_secs
                          : progress.has_metrics() ? 1.0
                                                   : 1e9;
    while (true) {
      {
        std::unique_lock<std::mutex> lock(done_mu);
        done_cv.wait_for(lock, std::chrono::milliseconds(100),
                         [&] { return running == 0; });
        if (running == 0) break;
      }
      if (SecondsSince(last_report) >= period) {
        progress_line(epoch, false);
        last_report = Clock::now();
      }
      if (options_.stats != nullptr && SecondsSince(last_auc) >= 1) {
        progress.PublishAuc();
        last_auc = Clock::now();
      }
      if (next_eval > 0 && loop.examples() >= next_eval) {
        next_eval += options_.eval_every;
        Status s = evaluate_now(false);
        if (!s.ok()) loop.Fail(s);
      }
    }
    for (auto& t : pool) t.join();
    if (options_.stats != nullptr) progress.PublishAuc();
    PS_RETURN_IF_ERROR(loop.first_error());
    if (admission_ != nullptr) admission_->Freeze();  // counted one pass
    result.early_stopped = loop.stopped_early();
    if (examples_per_epoch == 0 && !resumed_mid_epoch &&
        !result.early_stopped) {
      examples_per_epoch = loop.examples() - epoch_start_examples;
    }
    if (loop.examples() == epoch_start_examples && !resumed_mid_epoch &&
        !result.early_stopped) {
      return InvalidArgument("no training examples for worker " +
                             std::to_string(options_.worker_id) + " in " +
                             options_.train_data);
    }
    if (print_progress || progress.has_metrics()) progress_line(epoch, true);
    result.train_logloss = loop.epoch_logloss();
    if (result.early_stopped) break;
    // Early stopping has its own eval points: an eval here would be of no
    // step every worker shares (the others may still train) and could not
    // be kept.
    if (epoch + 1 < options_.epochs && !options_.early_stop) {
      PS_RETURN_IF_ERROR(evaluate_now(false));
    }
  }
  result.train_seconds = SecondsSince(start);
  result.train_examples = loop.examples();
  result.samples_per_sec = result.train_examples / result.train_seconds;
  data::ReaderStats stats = source->stats();
  result.malformed_lines = stats.malformed;
  result.first_malformed = stats.first_malformed;

  // Every push applied everywhere before anyone evaluates.
  PS_RETURN_IF_ERROR(store_->Flush());
  PS_RETURN_IF_ERROR(store_->Barrier());
  // After an early stop the latest parameters are not the point: the best
  // one is reported (and, locally, brought back) instead.
  if (!result.early_stopped) PS_RETURN_IF_ERROR(evaluate_now(true));
  if (early) PS_RETURN_IF_ERROR(FinishEarlyStop(*early, &result, &progress));
  return result;
}

std::string TrainResultJson(const TrainResult& r, const std::string& model,
                            bool local, const TrainerOptions& o) {
  std::ostringstream j;
  j.precision(6);
  j << "{\"model\": \"" << model
    << "\", \"local\": " << (local ? "true" : "false")
    << ", \"worker_id\": " << o.worker_id
    << ", \"num_workers\": " << o.num_workers << ", \"threads\": " << o.threads
    << ", \"epochs\": " << o.epochs << ", \"batch_size\": " << o.batch_size
    << ", \"train_examples\": " << r.train_examples
    << ", \"train_seconds\": " << r.train_seconds
    << ", \"samples_per_sec\": " << r.samples_per_sec
    << ", \"train_logloss\": " << r.train_logloss
    << ", \"malformed_lines\": " << r.malformed_lines;
  if (r.evaluated) {
    j << ", \"eval_auc\": " << r.final_eval.auc
      << ", \"eval_logloss\": " << r.final_eval.logloss
      << ", \"eval_ne\": " << NeJson(r.final_eval)
      << ", \"eval_positive_rate\": " << r.final_eval.positive_rate
      << ", \"eval_examples\": " << r.final_eval.examples;
  }
  auto point = [&](const EvalPoint& p) {
    j << "{\"trained_examples\": " << p.trained_examples
      << ", \"step\": " << p.step << ", \"auc\": " << p.auc
      << ", \"logloss\": " << p.logloss << ", \"ne\": " << NeJson(p) << "}";
  };
  if (o.early_stop) {
    j << ", \"early_stopped\": " << (r.early_stopped ? "true" : "false");
    if (r.has_best) {
      j << ", \"best\": ";
      point(r.best);
    }
  }
  j << ", \"history\": [";
  for (size_t i = 0; i < r.history.size(); ++i) {
    j << (i ? ", " : "");
    point(r.history[i]);
  }
  j << "]}\n";
  return j.str();
}

}  // namespace ps::train
