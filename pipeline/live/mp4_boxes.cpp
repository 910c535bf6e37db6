#include "pipeline/live/mp4_boxes.hpp"

#include <fmt/format.h>

#include "config/errors.hpp"

namespace vc::pipeline {
namespace {

constexpr uint32_t kNonSync = 0x00010000;  // sample_is_non_sync_sample (ISO/IEC 14496-12, 8.8.3.1)

uint32_t be32(std::string_view b, size_t at) {
  return uint32_t(uint8_t(b[at])) << 24 | uint32_t(uint8_t(b[at + 1])) << 16 | uint32_t(uint8_t(b[at + 2])) << 8 |
         uint32_t(uint8_t(b[at + 3]));
}

// The child box of `type` inside `parent` (a whole box: its header skipped, plus `skip` bytes of its own fields), its
// payload (without its 8-byte header); empty when there is none or the boxes do not add up.
std::string_view child(std::string_view parent, std::string_view type, size_t skip = 0) {
  size_t at = 8 + skip;
  while (at + 8 <= parent.size()) {
    const uint32_t size = be32(parent, at);
    if (size < 8 || at + size > parent.size()) return {};
    if (parent.substr(at + 4, 4) == type) return parent.substr(at + 8, size - 8);
    at += size;
  }
  return {};
}

// `payload` re-headed so that child() can read into it (child() skips a header).
std::string_view as_box(std::string_view payload) {
  return payload.empty() ? payload : std::string_view(payload.data() - 8, payload.size() + 8);
}

}  // namespace

std::optional<Mp4Box> Mp4BoxReader::next() {
  if (pending_.size() < 8) return std::nullopt;
  uint64_t size = be32(pending_, 0);
  size_t header = 8;
  if (size == 1) {  // a 64-bit size follows the type
    if (pending_.size() < 16) return std::nullopt;
    size = uint64_t(be32(pending_, 8)) << 32 | be32(pending_, 12);
    header = 16;
  }
  if (size < header || size > kMaxBox) {
    throw DataError(fmt::format("the MP4 muxer wrote a box of {} bytes (type '{}')", size, pending_.substr(4, 4)));
  }
  if (pending_.size() < size) return std::nullopt;
  Mp4Box box{pending_.substr(4, 4), pending_.substr(0, size_t(size))};
  pending_.erase(0, size_t(size));
  return box;
}

uint32_t trex_default_sample_flags(std::string_view moov) {
  const auto trex = child(as_box(child(moov, "mvex")), "trex");
  // version/flags, track_ID, default_sample_description_index, _duration, _size, _flags
  return trex.size() >= 24 ? be32(trex, 20) : 0;
}

bool fragment_starts_with_keyframe(std::string_view moof, uint32_t trex_flags) {
  const auto traf = as_box(child(moof, "traf"));
  const auto tfhd = child(traf, "tfhd");
  const auto trun = child(traf, "trun");
  if (tfhd.size() < 8 || trun.size() < 8) return false;
  uint32_t flags = trex_flags;
  const uint32_t tf = be32(tfhd, 0) & 0xFFFFFF;
  if (tf & 0x20) {  // default-sample-flags-present, after the optional fields before it
    size_t at = 8 + (tf & 0x1 ? 8 : 0) + (tf & 0x2 ? 4 : 0) + (tf & 0x8 ? 4 : 0) + (tf & 0x10 ? 4 : 0);
    if (at + 4 > tfhd.size()) return false;
    flags = be32(tfhd, at);
  }
  const uint32_t tr = be32(trun, 0) & 0xFFFFFF;
  if (be32(trun, 4) == 0) return false;  // no samples
  size_t at = 8 + (tr & 0x1 ? 4 : 0);
  if (tr & 0x4) {  // first-sample-flags-present
    if (at + 4 > trun.size()) return false;
    flags = be32(trun, at);
    at += 4;
  } else if (tr & 0x400) {  // every sample's flags: the first's, after its duration and size
    at += (tr & 0x100 ? 4 : 0) + (tr & 0x200 ? 4 : 0);
    if (at + 4 > trun.size()) return false;
    flags = be32(trun, at);
  }
  return (flags & kNonSync) == 0;
}

}  // namespace vc::pipeline
