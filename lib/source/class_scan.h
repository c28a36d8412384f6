#pragma once
// The pre-pass of --classes-from-dirs: the sorted names of the folders that hold images, fixed
// before any sample is converted. A streaming converter cannot know the last folder name before
// it has read everything, and a class's index depends on every name sorted before it; so the
// names are read first (member names only, never their data: a directory is listed, an
// uncompressed tar mostly seeked over). Every part of --shard I/N scans all the run's inputs
// and so numbers classes as one run would.
#include <functional>
#include <string>
#include <vector>

#include "source/input_reader.h"

namespace tarmac {

/// The name of the folder holding a member: "train/n01440764/x.JPEG" -> "n01440764"; "" for a
/// member in no folder ("x.JPEG").
std::string parent_folder(const std::string& name);

/// The distinct parent folder names of every image member of `reader`'s inputs (not hidden,
/// with a key under `rule`, and an extension that is_image_extension by `image_exts`), sorted
/// by byte: for UTF-8 that is code point order, Python's sorted(), so index i is the class
/// torchvision's ImageFolder numbers i. Throws FatalError as InputReader::run does. `on_member`,
/// if given, is called after each member (progress, stop requests).
std::vector<std::string> scan_class_folders(InputReader& reader, KeyRule rule,
                                            const std::vector<std::string>& image_exts,
                                            const std::function<void()>& on_member = {});

}  // namespace tarmac
