// The shared temporary directory, under the kvstore tests' namespace.
#pragma once

#include "tests/temp_dir.h"

namespace sepfs::kv::testing {
using sepfs::testing::TempDir;
}  // namespace sepfs::kv::testing
