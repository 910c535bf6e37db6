// Reading what a muxer writes for the live view (fmp4_remuxer.hpp): a fragmented MP4's top-level boxes one at a time
// as its bytes come, and whether a fragment starts with a picture that decodes on its own (a viewer may join or
// resume there). Reading only: the muxing is GStreamer's (mp4mux).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vc::pipeline {

struct Mp4Box {
  std::string type;   // "ftyp", "moov", "moof", "mdat", …
  std::string bytes;  // the whole box, header included
};

// Bytes in, whole top-level boxes out. Throws vc::DataError for a box it cannot read (a size smaller than its
// header, a box to the end of the file, one larger than kMaxBox).
class Mp4BoxReader {
 public:
  static constexpr uint64_t kMaxBox = uint64_t(64) << 20;

  void append(std::string_view bytes) { pending_.append(bytes); }
  // The next whole box, if its bytes are all here.
  std::optional<Mp4Box> next();

 private:
  std::string pending_;
};

// The default sample flags of the first track's fragments (moov/mvex/trex), 0 when the init segment has none.
uint32_t trex_default_sample_flags(std::string_view moov);

// Whether a movie fragment (a moof box) starts with a sync sample: its first sample's flags (trun's first-sample
// flags, its own flags, tfhd's defaults or `trex_flags`, in that order) do not say "non-sync". False for a moof it
// cannot read.
bool fragment_starts_with_keyframe(std::string_view moof, uint32_t trex_flags);

}  // namespace vc::pipeline
