#include "pipeline/outputs/output_paths.hpp"

#include <gst/gst.h>
#include <sys/stat.h>

#include <filesystem>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "pipeline/outputs/video_output.hpp"
#include "pipeline/sources/image_files.hpp"

namespace vc::pipeline {
namespace {

namespace fs = std::filesystem;

struct FileId {
  dev_t dev;
  ino_t ino;
  bool operator==(const FileId& o) const { return dev == o.dev && ino == o.ino; }
};

std::optional<FileId> id_of(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino};
}

// The files an input reads (an image input: each of its images; nothing for cameras, network streams, patterns).
std::vector<std::string> files_read(const config::Input& in) {
  switch (in.kind) {
    case config::InputKind::File: return {in.path};
    case config::InputKind::Uri: {
      if (in.uri.rfind("file://", 0) != 0) return {};
      gchar* local = gst_uri_get_location(in.uri.c_str());
      std::vector<std::string> out;
      if (local) out.emplace_back(local);
      g_free(local);
      return out;
    }
    case config::InputKind::Image:
      try {
        return image_files(in.path);
      } catch (const Error&) {
        return {};  // nothing to protect; the stream reports it when it starts
      }
    default: return {};
  }
}

}  // namespace

void refuse_overwriting_inputs(const config::Config& cfg) {
  const auto& o = cfg.output;
  struct Read {
    std::string path;
    FileId id;
  };
  std::vector<Read> inputs;
  std::vector<FileId> input_folders;  // folders an image input reads
  for (const auto& in : cfg.inputs) {
    for (const auto& file : files_read(in)) {
      if (const auto id = id_of(file)) inputs.push_back({file, *id});
      if (in.kind == config::InputKind::Image) {
        if (const auto dir = id_of(fs::path(file).parent_path().empty() ? "." : fs::path(file).parent_path().string())) {
          input_folders.push_back(*dir);
        }
      }
    }
  }
  struct Write {
    const char* key;
    std::string path;
  };
  std::vector<Write> outputs;
  for (const auto& in : cfg.inputs) {
    if (o.kind == config::OutputKind::File) {
      const auto file = config::for_stream(o.path, in.name);
      outputs.push_back({"output.path", file});
      outputs.push_back({"output.path", file + ".partial"});  // renamed into place at the end
    }
    if (!o.results.empty() && o.results != "-") outputs.push_back({"output.results", config::for_stream(o.results, in.name)});
    if (o.kind == config::OutputKind::Images && in.kind == config::InputKind::Image) {
      for (const auto& file : files_read(in)) outputs.push_back({"output.path", image_output_file(o.path, file, in.name, 0)});
    }
  }
  for (const auto& [key, path] : outputs) {
    const auto id = id_of(path);
    if (!id) continue;
    for (const auto& input : inputs) {
      if (input.id == *id) {
        throw UsageError(fmt::format("{} '{}' is the input file '{}': refusing to overwrite it", key, path, input.path));
      }
    }
  }
  // Labelled images never go into a folder the input images are in, whatever the pattern names them (a folder, or
  // 'imgs/%s.png' beside imgs/*.jpg): one run's outputs would be the next run's inputs, or replace them.
  if (o.kind == config::OutputKind::Images && !config::single_image_output(o.path)) {
    std::vector<std::string> folders;
    if (o.path.find("%s") == std::string::npos) {
      folders.push_back(o.path);
    } else {
      for (const auto& in : cfg.inputs) {
        if (in.kind != config::InputKind::Image) continue;
        for (const auto& file : files_read(in)) {
          const auto parent = fs::path(image_output_file(o.path, file, in.name, 0)).parent_path();
          folders.push_back(parent.empty() ? "." : parent.string());
        }
      }
    }
    for (const auto& out_dir : folders) {
      const auto dir = id_of(out_dir);
      if (!dir) continue;
      for (const auto& folder : input_folders) {
        if (folder == *dir) {
          throw UsageError(fmt::format("output.path '{}' writes into '{}', a folder the input images are in: labelled "
                                       "images would be mixed with them; give another folder", o.path, out_dir));
        }
      }
    }
  }
  if (o.kind == config::OutputKind::File && !o.results.empty() &&
      fs::path(o.path).lexically_normal() == fs::path(o.results).lexically_normal()) {
    throw ConfigError(fmt::format("output.results: '{}' is also output.path", o.results));
  }
}

}  // namespace vc::pipeline
