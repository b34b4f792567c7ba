#include "checkpoint/exporter.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>

#include "base/json_string.h"
#include "checkpoint/chain_reader.h"
#include "checkpoint/layout.h"
#include "checkpoint/manifest_entries.h"
#include "checkpoint/npy_writer.h"

namespace ps::checkpoint {
namespace {

// A table's name as a file name when it is a plain one, else its id.
std::string FileStem(const ps::proto::TableSpec& spec) {
  const std::string& n = spec.name();
  const bool plain =
      !n.empty() && n.size() <= 200 && n[0] != '.' &&
      std::all_of(n.begin(), n.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
      });
  return plain ? n : "table-" + std::to_string(spec.id());
}

// One table's files.
struct TableFiles {
  std::unique_ptr<NpyWriter> rows, keys;  // keys: EXACT only
  uint64_t keys_written = 0;
};

// Rows to their places in the rows file (HASHED/DENSE: from any reader
// thread, disjoint rows), EXACT keys appended with their rows.
class FileSink : public ChainRowSink {
 public:
  explicit FileSink(std::map<uint32_t, TableFiles>* files) : files_(files) {}

  Status Rows(const ps::proto::TableSpec& spec, uint64_t first, uint64_t rows,
              const char* values) override {
    return files_->at(spec.id()).rows->WriteAt(first, values, rows);
  }
  Status Key(const ps::proto::TableSpec& spec, uint64_t key,
             const char* values) override {
    TableFiles& f = files_->at(spec.id());
    PS_RETURN_IF_ERROR(f.keys->Append(&key, 1));
    ++f.keys_written;
    return f.rows->Append(values, 1);
  }

 private:
  std::map<uint32_t, TableFiles>* files_;  // not resized while reading
};

int ReadersOf(int requested) {
  if (requested > 0) return requested;
  return static_cast<int>(
      std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, 8));
}

// The output folder: created, or an empty one.
Status PrepareOutDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return IOError("cannot create the export folder " + dir + ": " +
                   ec.message());
  }
  if (!std::filesystem::is_empty(dir, ec) || ec) {
    return InvalidArgument(
        "the export folder " + dir +
        (ec ? " cannot be read: " + ec.message()
            : " is not empty (an export never replaces files: name a new "
              "folder)"));
  }
  return Status::OK();
}

// The JSON of tables.json.
StatusOr<std::string> IndexJson(const std::string& checkpoint_path,
                                const proto::Manifest& m,
                                const std::vector<ExportedTable>& tables) {
  std::string json = "{\n  \"format\": \"ps-export-1\",\n";
  json += "  \"checkpoint\": " + JsonString(checkpoint_path) + ",\n";
  json += "  \"step\": " + std::to_string(m.step()) + ",\n";
  json += "  \"created_unix_ms\": " + std::to_string(m.created_unix_ms()) +
          ",\n  \"tables\": [";
  for (size_t i = 0; i < tables.size(); ++i) {
    const ExportedTable& t = tables[i];
    std::string spec;
    google::protobuf::util::JsonPrintOptions po;
    po.preserve_proto_field_names = true;
    po.always_print_primitive_fields = true;
    if (!google::protobuf::util::MessageToJsonString(t.spec, &spec, po).ok()) {
      return Internal("cannot print " + TableWhere(t.spec) + " as JSON");
    }
    json += i == 0 ? "\n" : ",\n";
    json += "    {\"name\": " + JsonString(t.spec.name()) +
            ", \"id\": " + std::to_string(t.spec.id()) + ", \"kind\": \"" +
            ps::proto::TableKind_Name(t.spec.kind()) +
            "\", \"dim\": " + std::to_string(t.spec.dim()) +
            ", \"rows\": " + std::to_string(t.rows) +
            ",\n     \"rows_file\": " + JsonString(t.rows_file);
    switch (t.spec.kind()) {
      case ps::proto::EXACT:
        json += ", \"keys_file\": " + JsonString(t.keys_file) +
                ",\n     \"key_to_row\": \"the row i where keys[i] == key; "
                "a key not in keys has no row\"";
        break;
      case ps::proto::DENSE:
        json += ",\n     \"key_to_row\": \"row = key\"";
        break;
      default:
        // protocol/shard_map.h: ShardMap::GlobalRow and Mix64.
        json +=
            ",\n     \"key_to_row\": \"row = splitmix64(key ^ seed) % "
            "capacity, all uint64 arithmetic modulo 2**64\",\n"
            "     \"hash\": {\"name\": \"splitmix64\", \"seed\": " +
            std::to_string(t.spec.id()) +
            ", \"capacity\": " + std::to_string(t.spec.capacity()) +
            ", \"steps\": [\"x ^= x >> 30\", \"x *= 0xbf58476d1ce4e5b9\", "
            "\"x ^= x >> 27\", \"x *= 0x94d049bb133111eb\", "
            "\"x ^= x >> 31\"]}";
        break;
    }
    json += ",\n     \"spec\": " + spec + "}";
  }
  return json + "\n  ]\n}\n";
}

}  // namespace

StatusOr<ExportResult> ExportCheckpoint(const std::string& checkpoint_path,
                                        const ExportOptions& options) {
  PS_ASSIGN_OR_RETURN(std::unique_ptr<ChainReader> reader,
                      ChainReader::Open(checkpoint_path, options.tables));
  PS_RETURN_IF_ERROR(PrepareOutDir(options.out_dir));
  ExportResult result;
  result.manifest = reader->manifest();
  for (const auto& c : reader->chain()) result.chain.push_back(c.path);

  std::map<uint32_t, TableFiles> files;
  std::vector<std::string> finished;
  auto write = [&]() -> Status {
    for (const ps::proto::TableSpec* spec : reader->tables()) {
      const std::string stem = JoinPath(options.out_dir, FileStem(*spec));
      TableFiles& f = files[spec->id()];
      PS_ASSIGN_OR_RETURN(
          f.rows, NpyWriter::Create(stem + ".rows.npy", NpyType::kFloat32,
                                    spec->dim()));
      if (spec->kind() == ps::proto::EXACT) {
        PS_ASSIGN_OR_RETURN(
            f.keys, NpyWriter::Create(stem + ".keys.npy", NpyType::kUint64, 0));
      }
    }
    FileSink sink(&files);
    for (uint32_t k = 0; k < result.manifest.num_shards(); ++k) {
      PS_RETURN_IF_ERROR(
          reader->ReadShard(k, {.readers = ReadersOf(options.readers)}, &sink));
    }
    for (const ps::proto::TableSpec* spec : reader->tables()) {
      TableFiles& f = files.at(spec->id());
      ExportedTable out;
      out.spec = *spec;
      out.rows = f.keys ? f.keys_written : spec->capacity();
      out.rows_file = FileStem(*spec) + ".rows.npy";
      if (f.keys) out.keys_file = FileStem(*spec) + ".keys.npy";
      for (NpyWriter* w : {f.rows.get(), f.keys.get()}) {
        if (w == nullptr) continue;
        PS_RETURN_IF_ERROR(w->Finish(out.rows));
        finished.push_back(w->path());
        result.bytes_written += kNpyHeaderBytes + out.rows * w->row_bytes();
      }
      result.tables.push_back(std::move(out));
    }
    PS_ASSIGN_OR_RETURN(
        std::string json,
        IndexJson(reader->chain().back().path, result.manifest, result.tables));
    return WriteFileAtomically(JoinPath(options.out_dir, kExportIndexName),
                               json);
  };
  Status s = write();
  if (!s.ok()) {
    files.clear();  // unfinished files remove themselves
    for (const std::string& f : finished) std::filesystem::remove(f);
    return s.WithContext("exporting " + checkpoint_path);
  }
  result.bytes_read = reader->bytes_read();
  return result;
}

}  // namespace ps::checkpoint
