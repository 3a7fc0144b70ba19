#include "kvstore/leveldb_fault_env.h"

#include <cstring>
#include <memory>

namespace sepfs::kv {
namespace {

leveldb::Status ToLevelDb(const Status& st, const std::string& path) {
  if (st.ok()) return leveldb::Status::OK();
  return leveldb::Status::IOError(path + " (" + std::string(st.message()) + ")",
                                  std::strerror(st.err()));
}

// Carries a LevelDB status through a sepfs Status-returning callback.
struct Carry {
  leveldb::Status ls;
  Status Set(leveldb::Status s) {
    ls = std::move(s);
    return ls.ok() ? Status::OK() : Status::IOError(ls.ToString());
  }
  // The real call's own status when it ran, else the model's.
  leveldb::Status Result(const Status& st, const std::string& path) const {
    if (!ls.ok()) return ls;
    return ToLevelDb(st, path);
  }
};

bool IsManifest(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return base.rfind("MANIFEST", 0) == 0;
}

class NullWritableFile final : public leveldb::WritableFile {
 public:
  leveldb::Status Append(const leveldb::Slice&) override { return leveldb::Status::OK(); }
  leveldb::Status Close() override { return leveldb::Status::OK(); }
  leveldb::Status Flush() override { return leveldb::Status::OK(); }
  leveldb::Status Sync() override { return leveldb::Status::OK(); }
};

class FaultWritableFile final : public leveldb::WritableFile {
 public:
  FaultWritableFile(FaultModel* model, std::string path, leveldb::WritableFile* f,
                    FaultModel::NodeRef node)
      : model_(model), path_(std::move(path)), f_(f), node_(std::move(node)) {}

  leveldb::Status Append(const leveldb::Slice& data) override {
    Carry c;
    bool dropped;
    Status st = model_->Append(
        FaultScope::kLevelDb, node_, data.size(), [&] { return c.Set(f_->Append(data)); },
        &dropped);
    return c.Result(st, path_);
  }
  leveldb::Status Flush() override {
    if (model_->power_lost()) return leveldb::Status::OK();
    return f_->Flush();
  }
  leveldb::Status Sync() override {
    Carry c;
    bool dropped;
    Status st = model_->Sync(
        FaultScope::kLevelDb, node_, IsManifest(path_), [&] { return c.Set(model_->real_syncs() ? f_->Sync() : f_->Flush()); },
        &dropped);
    return c.Result(st, path_);
  }
  leveldb::Status Close() override { return f_->Close(); }

 private:
  FaultModel* const model_;
  const std::string path_;
  std::unique_ptr<leveldb::WritableFile> f_;
  const FaultModel::NodeRef node_;
};

class FaultRandomAccessFile final : public leveldb::RandomAccessFile {
 public:
  FaultRandomAccessFile(FaultModel* model, std::string path, leveldb::RandomAccessFile* f)
      : model_(model), path_(std::move(path)), f_(f) {}
  leveldb::Status Read(uint64_t offset, size_t n, leveldb::Slice* result,
                       char* scratch) const override {
    Status st = model_->CheckRead(FaultScope::kLevelDb, path_);
    if (!st.ok()) return ToLevelDb(st, path_);
    return f_->Read(offset, n, result, scratch);
  }

 private:
  FaultModel* const model_;
  const std::string path_;
  std::unique_ptr<leveldb::RandomAccessFile> f_;
};

}  // namespace

LevelDbFaultEnv::LevelDbFaultEnv(leveldb::Env* target, FaultModel* model)
    : leveldb::EnvWrapper(target != nullptr ? target : leveldb::Env::Default()), model_(model) {}

LevelDbFaultEnv::~LevelDbFaultEnv() = default;

leveldb::Status LevelDbFaultEnv::OpenWritable(const std::string& f, bool truncate,
                                              leveldb::WritableFile** r) {
  Carry c;
  leveldb::WritableFile* real = nullptr;
  bool dropped;
  FaultModel::NodeRef node;
  Status st = model_->OpenForWrite(
      FaultScope::kLevelDb, f, truncate,
      [&] {
        return c.Set(truncate ? target()->NewWritableFile(f, &real)
                              : target()->NewAppendableFile(f, &real));
      },
      &dropped, &node);
  if (!st.ok()) {
    delete real;
    *r = nullptr;
    return c.Result(st, f);
  }
  if (dropped) {
    *r = new NullWritableFile();
  } else {
    *r = new FaultWritableFile(model_, f, real, std::move(node));
  }
  return leveldb::Status::OK();
}

leveldb::Status LevelDbFaultEnv::NewWritableFile(const std::string& f, leveldb::WritableFile** r) {
  return OpenWritable(f, /*truncate=*/true, r);
}

leveldb::Status LevelDbFaultEnv::NewAppendableFile(const std::string& f,
                                                   leveldb::WritableFile** r) {
  return OpenWritable(f, /*truncate=*/false, r);
}

leveldb::Status LevelDbFaultEnv::NewRandomAccessFile(const std::string& f,
                                                     leveldb::RandomAccessFile** r) {
  leveldb::RandomAccessFile* real = nullptr;
  leveldb::Status s = target()->NewRandomAccessFile(f, &real);
  if (!s.ok()) return s;
  *r = new FaultRandomAccessFile(model_, f, real);
  return s;
}

leveldb::Status LevelDbFaultEnv::RemoveFile(const std::string& f) {
  Carry c;
  bool dropped;
  Status st = model_->Remove(
      FaultScope::kLevelDb, f, [&] { return c.Set(target()->RemoveFile(f)); }, &dropped);
  return c.Result(st, f);
}

leveldb::Status LevelDbFaultEnv::CreateDir(const std::string& d) {
  Carry c;
  bool dropped;
  Status st = model_->MakeDir(
      FaultScope::kLevelDb, d, [&] { return c.Set(target()->CreateDir(d)); }, &dropped);
  return c.Result(st, d);
}

leveldb::Status LevelDbFaultEnv::RemoveDir(const std::string& d) {
  Carry c;
  bool dropped;
  Status st = model_->RemoveDir(
      FaultScope::kLevelDb, d, [&] { return c.Set(target()->RemoveDir(d)); }, &dropped);
  return c.Result(st, d);
}

leveldb::Status LevelDbFaultEnv::RenameFile(const std::string& s, const std::string& t) {
  Carry c;
  bool dropped;
  Status st = model_->Rename(
      FaultScope::kLevelDb, s, t, [&] { return c.Set(target()->RenameFile(s, t)); }, &dropped);
  return c.Result(st, s);
}

}  // namespace sepfs::kv
