// Opens a dataset with the installed C++ reader and prints what the install test checks: the
// sample count, the first key, the first image's decoded size (PNG datasets load the codec
// plugin from the installed tree) and rank 0's share of two.
#include <cstdio>
#include <exception>

#include "read/dataset.h"
#include "read/partition.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: read_dataset DIR\n");
    return 2;
  }
  try {
    const tarmac::Dataset ds(argv[1]);
    const tarmac::Pixels px = ds.decode(0);
    const auto mine = tarmac::partition_indices(ds.size(), {0, 2, 0, 0, false, false});
    std::printf("%zu %.*s %dx%dx%d %zu\n", ds.size(), static_cast<int>(ds.key(0).size()),
                ds.key(0).data(), px.width, px.height, px.channels, mine.size());
  } catch (const tarmac::FatalError& e) {  // a type of the library, caught across it
    std::fprintf(stderr, "read_dataset: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "read_dataset: unexpected %s\n", e.what());
    return 1;
  }
  return 0;
}
