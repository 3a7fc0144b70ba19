// Shared by the crash and error tests: a store whose vLog and LevelDB go
// through one FaultModel, and helpers to crash, rewind and check it.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "../fs/fs_test_util.h"
#include "fs/filesystem.h"
#include "fs/fsck.h"
#include "kvstore/leveldb_fault_env.h"
#include "vlog/fault_env.h"

namespace sepfs::crashtest {

using fs::testing::TempDir;

inline uint64_t EnvNumber(const char* name, uint64_t dflt) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return dflt;
  return std::strtoull(v, nullptr, 0);
}

// A temporary directory with the store and the model's scratch directory
// side by side (same filesystem), and fault Envs for both halves.
class FaultStore {
 public:
  explicit FaultStore(const TempDir& tmp)
      : store_dir_(tmp.Sub("store")),
        model_(tmp.Sub("scratch")),
        vlog_env_(Env::Default(), &model_),
        lsm_env_(nullptr, &model_) {}

  const std::string& dir() const { return store_dir_; }
  FaultModel& model() { return model_; }
  FaultInjectionEnv* vlog_env() { return &vlog_env_; }
  kv::LevelDbFaultEnv* lsm_env() { return &lsm_env_; }

  // Options whose Store goes through the fault Envs.
  fs::FsOptions FaultOptions(fs::FsOptions o) {
    o.store.env = &vlog_env_;
    o.store.leveldb_env = &lsm_env_;
    return o;
  }

  // Fsck of the closed store with the real Envs; errors are returned as one
  // string ("" when clean).
  std::string FsckErrors(fs::FsckReport* rep_out = nullptr) {
    std::unique_ptr<fs::Store> store;
    Status st = fs::Store::Open(store_dir_, fs::StoreOptions{}, &store);
    if (!st.ok()) return "store does not open for fsck: " + st.ToString();
    fs::FsckReport rep;
    st = fs::Fsck(store.get(), &rep, nullptr);
    std::string out;
    if (!st.ok()) out = "fsck failed: " + st.ToString();
    for (const auto& e : rep.errors) out += (out.empty() ? "" : "\n") + e;
    if (rep_out != nullptr) *rep_out = rep;
    return out;
  }

 private:
  std::string store_dir_;
  FaultModel model_;
  FaultInjectionEnv vlog_env_;
  kv::LevelDbFaultEnv lsm_env_;
};

}  // namespace sepfs::crashtest
