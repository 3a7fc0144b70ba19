// Text report of a store's space and counters, shared by `sepfs stats` on
// an unmounted store and the live statistics of a mounted one.
#pragma once

#include <string>

#include "fs/store.h"

namespace sepfs::fs {

std::string StoreReport(Store* store);

}  // namespace sepfs::fs
