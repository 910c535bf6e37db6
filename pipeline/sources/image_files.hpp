// The files of an image input: one image, a folder (its .jpg, .jpeg, .png and .bmp files) or a glob, sorted. A
// path that exists is taken as it is, even if its name holds glob characters ('q?x.png'). Entries that cannot be
// used — a symlink loop, a file without read permission, a broken link — are skipped, each with a warning.
#pragma once
#include <string>
#include <vector>

namespace vc::pipeline {

// Throws vc::NoInputError when nothing usable is left (saying how many entries were skipped and why).
std::vector<std::string> image_files(const std::string& spec);

// The images of a folder opened already (`dir`: its descriptor; `spec`: its name, for the paths returned): the regular
// files with an image's name, no link followed, sorted. Throws vc::NoInputError when there is none.
std::vector<std::string> image_files_in(int dir, const std::string& spec);
// Opens one of them (`name`: its file name) for reading, no link followed: a descriptor, or -1 with errno set.
int open_image_in(int dir, const std::string& name);

// Whether a file name has an image extension the app reads (.jpg, .jpeg, .png, .bmp; any case).
bool is_image_name(const std::string& path);

}  // namespace vc::pipeline
