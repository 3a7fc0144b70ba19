#include "vlog/whole_file.h"

#include <cerrno>
#include <memory>

namespace sepfs {

Status ReadWholeFile(Env* env, const std::string& path, std::string* out, uint64_t max_bytes) {
  std::unique_ptr<File> f;
  SEPFS_RETURN_IF_ERROR(env->OpenFile(path, OpenMode::kRead, &f));
  uint64_t size = 0;
  SEPFS_RETURN_IF_ERROR(f->Size(&size));
  if (size > max_bytes) {
    return Status::FromErrno(EFBIG, path + ": " + std::to_string(size) + " bytes, more than " +
                                        std::to_string(max_bytes) + " expected");
  }
  out->resize(size);
  size_t got = 0;
  SEPFS_RETURN_IF_ERROR(f->Read(0, out->size(), out->data(), &got));
  out->resize(got);
  return Status::OK();
}

Status ReplaceWholeFile(Env* env, const std::string& path, const std::string& tmp,
                        std::string_view data) {
  {
    std::unique_ptr<File> f;
    SEPFS_RETURN_IF_ERROR(env->OpenFile(tmp, OpenMode::kCreate, &f));
    SEPFS_RETURN_IF_ERROR(f->Truncate(0));
    SEPFS_RETURN_IF_ERROR(f->Write(0, data));
    SEPFS_RETURN_IF_ERROR(f->Sync());
  }
  if (Status st = env->RenameFile(tmp, path, RenameMode::kReplace); !st.ok()) {
    (void)env->RemoveFile(tmp);  // e.g. a directory in path's place
    return st;
  }
  const size_t slash = path.find_last_of('/');
  return env->SyncDir(slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash));
}

}  // namespace sepfs
