// What making an NVDEC decoder costs, and whether the driver makes several at once (#42: 150 live streams' decoders
// all made at the start took 7.9 s, ~50 ms each, and no stream got a picture until the last was made).
//
// On the driver's own libraries (libcuda, libnvcuvid: loaded by ffnvcodec's loader, as FFmpeg does), no GStreamer:
//   1. one decoder made and destroyed at a time, for 1080p H.264 and HEVC, with each count of decode surfaces
//      (--surfaces; GStreamer 1.22 asks for the stream's DPB + a few, ~20 for these) and of output surfaces;
//      and each creation flag (--flags: the driver's choice, CUDA or the decode engine for the post-processing);
//   2. --decoders decoders made at once from each count of --threads threads (all kept until the last is made, as
//      at a start), the wall time against --decoders × the one-at-a-time time: 1.0 = the driver makes one at a time;
//      with each count of CUDA contexts (--contexts: thread i makes its decoders in context i mod N) — whether the
//      driver makes them one at a time per context or per GPU.
//   3. with --share FILE (instead of 1 and 2): whether a decoder can serve several streams (below, share_experiment);
//      exits 3 where a stream did not decode to the same pictures as alone, 4 where its control could not tell.
//      (Measured on an H100 on 2026-12-07: they cannot — every stream on a shared decoder, even the one whose indices
//      are not moved, decoded other pictures than alone; docs/BENCHMARKS.md.)
// Prints tables; --json writes them. Needs a GPU with NVDEC (exits 2 without one).
//
//   usage: nvdec_create [--decoders 64] [--threads 1,8,64] [--surfaces 4,8,20] [--flags cuvid,cuda,default]
//                       [--contexts 1,8] [--repeats 8] [--json out.json]
//          nvdec_create --share FILE.h264 [--codec h264|hevc] [--streams 4] [--per 0] [--json out.json]
#include <ffnvcodec/dynlink_loader.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/percentile.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;
using vc::bench::percentile;

CudaFunctions* cu = nullptr;
CuvidFunctions* cuvid = nullptr;

// "WHAT failed: CUDA_ERROR_..." (the driver's name for the error).
std::string failed(const std::string& what, CUresult r) {
  const char* name = nullptr;
  if (cu->cuGetErrorName(r, &name) != CUDA_SUCCESS) name = "unknown";
  return what + " failed: " + name;
}

void check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) throw std::runtime_error(failed(what, r));
}

struct Flag {
  const char* name;
  unsigned long value;
};
constexpr Flag kFlags[] = {{"cuvid", cudaVideoCreate_PreferCUVID}, {"cuda", cudaVideoCreate_PreferCUDA},
                           {"default", cudaVideoCreate_Default}};

struct Shape {
  const char* codec;
  cudaVideoCodec id;
};
constexpr Shape kShapes[] = {{"H.264", cudaVideoCodec_H264}, {"HEVC", cudaVideoCodec_HEVC}};
constexpr int kWidth = 1920, kHeight = 1088;  // (1080p's coded height: whole 16-pixel macroblocks)

CUVIDDECODECREATEINFO create_info(cudaVideoCodec codec, int decode_surfaces, int output_surfaces,
                                  unsigned long flags = cudaVideoCreate_PreferCUVID) {
  CUVIDDECODECREATEINFO info{};
  info.ulWidth = info.ulMaxWidth = info.ulTargetWidth = kWidth;
  info.ulHeight = info.ulMaxHeight = info.ulTargetHeight = kHeight;
  info.ulNumDecodeSurfaces = decode_surfaces;
  info.ulNumOutputSurfaces = output_surfaces;
  info.CodecType = codec;
  info.ChromaFormat = cudaVideoChromaFormat_420;
  info.OutputFormat = cudaVideoSurfaceFormat_NV12;
  info.DeinterlaceMode = cudaVideoDeinterlaceMode_Weave;
  info.ulCreationFlags = flags;
  info.display_area.right = kWidth;
  info.display_area.bottom = 1080;
  info.target_rect.right = kWidth;
  info.target_rect.bottom = 1080;
  return info;
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// One decoder made (timed) and destroyed (timed), `repeats` times: the medians.
std::pair<double, double> one_at_a_time(CUcontext ctx, const CUVIDDECODECREATEINFO& info, int repeats) {
  std::vector<double> made, destroyed;
  check(cu->cuCtxPushCurrent(ctx), "cuCtxPushCurrent");
  for (int i = 0; i < repeats; ++i) {
    auto info_copy = info;
    CUvideodecoder decoder = nullptr;
    auto t = Clock::now();
    check(cuvid->cuvidCreateDecoder(&decoder, &info_copy), "cuvidCreateDecoder");
    made.push_back(ms_since(t));
    t = Clock::now();
    check(cuvid->cuvidDestroyDecoder(decoder), "cuvidDestroyDecoder");
    destroyed.push_back(ms_since(t));
  }
  CUcontext popped = nullptr;
  check(cu->cuCtxPopCurrent(&popped), "cuCtxPopCurrent");
  return {percentile(made, 0.5), percentile(destroyed, 0.5)};
}

struct Together {
  double wall_ms = 0, longest_ms = 0, median_ms = 0;
};

// `count` decoders made by `threads` threads at once (each makes its share, one after another; thread t in
// contexts[t mod N]), all kept until the last is made; then destroyed.
Together at_once(const std::vector<CUcontext>& contexts, const CUVIDDECODECREATEINFO& info, int count, int threads) {
  std::vector<CUvideodecoder> decoders(count, nullptr);
  std::vector<CUcontext> made_in(count, nullptr);
  std::vector<double> took(count, 0);
  std::atomic<int> next{0}, ready{0};
  std::atomic<bool> go{false}, failed{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, ctx = contexts[size_t(t) % contexts.size()]] {
      if (cu->cuCtxPushCurrent(ctx) != CUDA_SUCCESS) failed = true;
      ++ready;
      while (!go) std::this_thread::yield();
      for (int i; (i = next++) < count;) {
        auto info_copy = info;
        const auto t0 = Clock::now();
        if (cuvid->cuvidCreateDecoder(&decoders[i], &info_copy) != CUDA_SUCCESS) failed = true;
        took[i] = ms_since(t0);
        made_in[i] = ctx;
      }
      CUcontext popped = nullptr;
      cu->cuCtxPopCurrent(&popped);
    });
  }
  while (ready < threads) std::this_thread::yield();
  const auto start = Clock::now();
  go = true;
  for (auto& t : pool) t.join();
  Together out{ms_since(start), *std::max_element(took.begin(), took.end()), percentile(took, 0.5)};
  for (int i = 0; i < count; ++i) {
    if (!decoders[i]) continue;
    CUcontext popped = nullptr;
    check(cu->cuCtxPushCurrent(made_in[i]), "cuCtxPushCurrent");
    cuvid->cuvidDestroyDecoder(decoders[i]);
    check(cu->cuCtxPopCurrent(&popped), "cuCtxPopCurrent");
  }
  if (failed) throw std::runtime_error("a decoder could not be made (out of NVDEC sessions or memory?)");
  return out;
}


// ---- Decoders shared by streams (--share FILE): whether NVDEC decodes N streams through decoders whose surfaces
// are split between them — each stream its own parser, its picture indices moved into its share — to the same
// pictures as a decoder of its own. A decoder holds at most 32 surfaces (FFmpeg warns above; the driver refuses),
// so G = 32 / (surfaces per stream) streams share one. The streams are the same elementary stream, each decoded whole
// from its start, stream i started i/(N+1) of the file after stream 0, so that their surfaces hold pictures far
// apart; a control run moves only the current picture's index, not the references: it
// must NOT decode as alone, or the experiment could not have seen a wrong reference. Every picture's luma is hashed
// (FNV-1a over its rows, eight bytes at a time).

constexpr size_t kChunk = 8 << 10;
constexpr int kMaxSurfaces = 32;

enum class Sharing { Separate, Shared, Control };  // a decoder each; G per decoder; G per decoder, references not moved

struct ShareRun {
  CUcontext ctx = nullptr;
  cudaVideoCodec codec = cudaVideoCodec_H264;
  int streams = 1, per = 0;  // streams; surfaces per stream (0: the stream's minimum + 2)
  Sharing sharing = Sharing::Separate;
  int group = 1;             // streams per decoder
  std::vector<CUvideodecoder> decoders;
  std::vector<std::vector<uint64_t>> hashes;  // per stream, per picture shown
  std::vector<unsigned char> luma;            // the picture being hashed
  unsigned width = 0, height = 0;             // the displayed picture
  double create_ms = 0;
  std::string error;  // the first failure
};

struct ShareStream {
  ShareRun* run;
  int stream;
  size_t decoder_index() const { return size_t(run->sharing == Sharing::Separate ? stream : stream / run->group); }
  CUvideodecoder decoder() const { return run->decoders[decoder_index()]; }
  int base() const { return run->sharing == Sharing::Separate ? 0 : stream % run->group * run->per; }  // its first surface
};

void share_fail(ShareRun& run, const std::string& what, CUresult r) {
  if (run.error.empty()) run.error = failed(what, r);
}

int CUDAAPI share_sequence(void* user, CUVIDEOFORMAT* format) {
  auto& s = *static_cast<ShareStream*>(user);
  auto& run = *s.run;
  if (format->bit_depth_luma_minus8 != 0 || format->chroma_format != cudaVideoChromaFormat_420) {
    run.error = "only 8-bit 4:2:0 streams are measured";
    return 0;
  }
  if (run.per == 0) run.per = format->min_num_decode_surfaces + 2;
  if (run.per < format->min_num_decode_surfaces || run.per > kMaxSurfaces) {
    run.error = "--per " + std::to_string(run.per) + " is outside the stream's " +
                std::to_string(format->min_num_decode_surfaces) + " to " + std::to_string(kMaxSurfaces) + " surfaces";
    return 0;
  }
  if (run.sharing != Sharing::Separate && run.group == 0) run.group = kMaxSurfaces / run.per;
  if (run.decoders.empty()) {
    const int users = run.sharing == Sharing::Separate ? 1 : run.group;
    run.decoders.assign(size_t((run.streams + users - 1) / users), nullptr);
  }
  if (!s.decoder()) {
    const int surfaces = run.sharing == Sharing::Separate ? run.per : std::min(run.group, run.streams) * run.per;
    CUVIDDECODECREATEINFO info = create_info(format->codec, surfaces, 1);
    info.ulWidth = info.ulMaxWidth = format->coded_width;
    info.ulHeight = info.ulMaxHeight = format->coded_height;
    info.display_area.left = short(format->display_area.left);
    info.display_area.top = short(format->display_area.top);
    info.display_area.right = short(format->display_area.right);
    info.display_area.bottom = short(format->display_area.bottom);
    run.width = unsigned(format->display_area.right - format->display_area.left);
    run.height = unsigned(format->display_area.bottom - format->display_area.top);
    info.ulTargetWidth = run.width;
    info.ulTargetHeight = run.height;
    info.target_rect = {0, 0, short(run.width), short(run.height)};
    const auto t = Clock::now();
    const CUresult r = cuvid->cuvidCreateDecoder(&run.decoders[s.decoder_index()], &info);
    run.create_ms += ms_since(t);
    if (r != CUDA_SUCCESS) {
      share_fail(run, "cuvidCreateDecoder with " + std::to_string(surfaces) + " surfaces", r);
      return 0;
    }
  }
  return run.per;  // (> 1: the parser uses this many surfaces, indices 0 .. per - 1)
}

int CUDAAPI share_decode(void* user, CUVIDPICPARAMS* picture) {
  auto& s = *static_cast<ShareStream*>(user);
  CUVIDPICPARAMS moved = *picture;  // (the parser's own is left as it is)
  const int base = s.base();
  moved.CurrPicIdx += base;
  if (s.run->sharing == Sharing::Shared) {  // (the control leaves the references where the parser put them)
    if (s.run->codec == cudaVideoCodec_H264) {
      for (auto& ref : moved.CodecSpecific.h264.dpb) ref.PicIdx += ref.PicIdx >= 0 ? base : 0;
    } else {
      for (auto& ref : moved.CodecSpecific.hevc.RefPicIdx) ref += ref >= 0 ? base : 0;
    }
  }
  const CUresult r = cuvid->cuvidDecodePicture(s.decoder(), &moved);
  if (r != CUDA_SUCCESS) share_fail(*s.run, "cuvidDecodePicture", r);
  return r == CUDA_SUCCESS;
}

int CUDAAPI share_display(void* user, CUVIDPARSERDISPINFO* shown) {
  auto& s = *static_cast<ShareStream*>(user);
  auto& run = *s.run;
  if (!shown) return 1;  // (the end of the stream)
  CUVIDPROCPARAMS params{};
  params.progressive_frame = shown->progressive_frame;
  params.top_field_first = shown->top_field_first;
  unsigned long long frame = 0;
  unsigned pitch = 0;
  CUresult r = cuvid->cuvidMapVideoFrame(s.decoder(), shown->picture_index + s.base(), &frame, &pitch, &params);
  if (r != CUDA_SUCCESS) {
    share_fail(run, "cuvidMapVideoFrame", r);
    return 0;
  }
  auto& luma = run.luma;
  luma.resize(size_t(run.width) * run.height);
  CUDA_MEMCPY2D copy{};
  copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.srcDevice = frame;
  copy.srcPitch = pitch;
  copy.dstMemoryType = CU_MEMORYTYPE_HOST;
  copy.dstHost = luma.data();
  copy.dstPitch = run.width;
  copy.WidthInBytes = run.width;
  copy.Height = run.height;
  r = cu->cuMemcpy2D(&copy);
  cuvid->cuvidUnmapVideoFrame(s.decoder(), frame);
  if (r != CUDA_SUCCESS) {
    share_fail(run, "cuMemcpy2D", r);
    return 0;
  }
  uint64_t hash = 1469598103934665603ull;  // (FNV-1a, eight bytes at a time)
  for (size_t i = 0; i < luma.size(); i += 8) {
    uint64_t word = 0;
    std::memcpy(&word, luma.data() + i, std::min<size_t>(8, luma.size() - i));
    hash = (hash ^ word) * 1099511628211ull;
  }
  run.hashes[size_t(s.stream)].push_back(hash);
  return 1;
}

// The file parsed as `streams` streams, through one decoder each or shared ones, each the whole file in chunks, stream
// i starting i * chunks / (streams + 1) chunks after stream 0. Returns the wall time of the decoding in ms, the
// decoders' making left out.
double share_decode_all(ShareRun& run, const std::string& data) {
  run.hashes.assign(size_t(run.streams), {});
  std::vector<ShareStream> users;
  for (int i = 0; i < run.streams; ++i) users.push_back({&run, i});
  std::vector<CUvideoparser> parsers(size_t(run.streams), nullptr);
  check(cu->cuCtxPushCurrent(run.ctx), "cuCtxPushCurrent");
  for (int i = 0; i < run.streams; ++i) {
    CUVIDPARSERPARAMS params{};
    params.CodecType = run.codec;
    params.ulMaxNumDecodeSurfaces = 1;  // (the sequence callback says how many)
    params.ulMaxDisplayDelay = 1;
    params.pUserData = &users[size_t(i)];
    params.pfnSequenceCallback = share_sequence;
    params.pfnDecodePicture = share_decode;
    params.pfnDisplayPicture = share_display;
    const CUresult r = cuvid->cuvidCreateVideoParser(&parsers[size_t(i)], &params);
    if (r != CUDA_SUCCESS) share_fail(run, "cuvidCreateVideoParser", r);
  }
  const size_t chunks = (data.size() + kChunk - 1) / kChunk;
  // Stream i waits delay(i) steps, then parses the file's chunks in order: at any step, stream i is
  // delay(i) - delay(j) chunks behind stream j.
  const auto delay = [&](int i) { return size_t(i) * chunks / size_t(run.streams + 1); };
  const auto start = Clock::now();
  for (size_t step = 0; step < chunks + delay(run.streams - 1) && run.error.empty(); ++step) {
    for (int i = 0; i < run.streams && run.error.empty(); ++i) {
      if (step < delay(i) || step - delay(i) >= chunks) continue;
      const size_t at = (step - delay(i)) * kChunk;
      CUVIDSOURCEDATAPACKET packet{};
      packet.payload = reinterpret_cast<const unsigned char*>(data.data()) + at;
      packet.payload_size = std::min(kChunk, data.size() - at);
      CUresult r = cuvid->cuvidParseVideoData(parsers[size_t(i)], &packet);
      if (r == CUDA_SUCCESS && step - delay(i) + 1 == chunks) {  // its last: the end of its stream, on its own
        CUVIDSOURCEDATAPACKET end{};
        end.flags = CUVID_PKT_ENDOFSTREAM;
        r = cuvid->cuvidParseVideoData(parsers[size_t(i)], &end);
      }
      if (r != CUDA_SUCCESS) share_fail(run, "cuvidParseVideoData", r);
    }
  }
  const double wall = ms_since(start) - run.create_ms;
  for (auto* parser : parsers) {
    if (parser) cuvid->cuvidDestroyVideoParser(parser);
  }
  for (auto* decoder : run.decoders) {
    if (decoder) cuvid->cuvidDestroyDecoder(decoder);
  }
  CUcontext popped = nullptr;
  check(cu->cuCtxPopCurrent(&popped), "cuCtxPopCurrent");
  return wall;
}

// The --share experiment: the file alone (the reference); N streams with a decoder each; N sharing decoders; the
// control. Exit status: 0 the shared decoders decode as alone (and the control does not); 3 they do not; 4 the
// control decoded as alone too (the experiment cannot tell).
json share_experiment(CUcontext ctx, const std::string& file, cudaVideoCodec codec, int streams, int per, int& status) {
  std::ifstream in(file, std::ios::binary);
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (data.empty()) throw std::runtime_error(file + ": empty or unreadable");
  if (data.size() < 2 * size_t(streams + 1) * kChunk) {
    throw std::runtime_error(file + ": too short to start " + std::to_string(streams) + " streams apart (" +
                             std::to_string(2 * (streams + 1) * (kChunk >> 10)) + " KiB at least)");
  }
  ShareRun reference;
  reference.ctx = ctx;
  reference.codec = codec;
  reference.per = per;
  share_decode_all(reference, data);
  if (!reference.error.empty()) throw std::runtime_error("the file alone: " + reference.error);
  const auto& want = reference.hashes[0];
  const int group = std::min(streams, kMaxSurfaces / reference.per);
  std::printf("decoders shared by streams: %s, %zu pictures of %ux%u, %d surfaces per stream (%d streams per decoder "
              "at most: %d surfaces); %d streams, started %zu KiB apart\n%-34s %9s %10s %11s %10s %s\n", file.c_str(),
              want.size(), reference.width, reference.height, reference.per, kMaxSurfaces / reference.per, kMaxSurfaces,
              streams, data.size() / size_t(streams + 1) >> 10, "decoders", "make ms", "decode ms", "pictures/s",
              "as alone", "");
  json out = {{"file", file}, {"pictures", want.size()}, {"surfaces_per_stream", reference.per}, {"streams", streams},
              {"streams_per_decoder", group}};
  std::map<Sharing, size_t> same_by;
  for (Sharing sharing : {Sharing::Separate, Sharing::Shared, Sharing::Control}) {
    ShareRun run;
    run.ctx = ctx;
    run.codec = codec;
    run.streams = streams;
    run.per = reference.per;
    run.sharing = sharing;
    run.group = sharing == Sharing::Separate ? 1 : group;
    const double wall = share_decode_all(run, data);
    size_t same = 0, pictures = 0;
    for (const auto& h : run.hashes) {
      pictures += h.size();
      same += h == want ? 1 : 0;
    }
    same_by[sharing] = same;
    const std::string what = sharing == Sharing::Separate ? std::to_string(streams) + ", one each"
                             : std::to_string(run.decoders.size()) + ", " + std::to_string(group) + " streams each" +
                                   (sharing == Sharing::Control ? " (control)" : "");
    std::printf("%-34s %9.1f %10.0f %11.0f %7zu/%-2d %s\n", what.c_str(), run.create_ms, wall,
                wall > 0 ? 1000.0 * double(pictures) / wall : 0.0, same, streams, run.error.c_str());
    const char* key = sharing == Sharing::Separate ? "separate" : sharing == Sharing::Shared ? "shared" : "control";
    out[key] = {{"decoders", run.decoders.size()}, {"make_ms", run.create_ms}, {"decode_ms", wall},
                {"pictures", pictures}, {"streams_as_alone", same}, {"error", run.error}};
  }
  const bool shared_ok = same_by[Sharing::Shared] == size_t(streams) && same_by[Sharing::Separate] == size_t(streams);
  const bool control_caught = same_by[Sharing::Control] < size_t(streams);
  status = !control_caught ? 4 : shared_ok ? 0 : 3;
  std::printf("%s\n", status == 0   ? "=> every stream decoded through shared decoders as alone (and the control did not)"
                      : status == 3 ? "=> NOT as alone through shared decoders"
                                    : "=> inconclusive: the control (references not moved) decoded as alone too");
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"What making an NVDEC decoder costs, alone and many at once"};
  int decoders = 64, repeats = 8;
  std::vector<int> threads{1, 8, 64}, surfaces{4, 8, 20}, outputs{1, 2}, context_counts{1, 8};
  std::vector<std::string> flags{"cuvid", "cuda", "default"};
  std::string json_path, share_file, share_codec = "h264";
  int share_streams = 4, share_per = 0;
  cli.add_option("--decoders", decoders, "decoders made at once")->check(CLI::Range(1, 1000));
  cli.add_option("--threads", threads, "threads making them (each count in turn)")->delimiter(',');
  cli.add_option("--surfaces", surfaces, "decode surfaces per decoder (each count in turn)")->delimiter(',');
  cli.add_option("--outputs", outputs, "output surfaces per decoder, one at a time only")->delimiter(',');
  cli.add_option("--flags", flags, "creation flags, one at a time only: cuvid, cuda, default")
      ->delimiter(',')
      ->check(CLI::IsMember({"cuvid", "cuda", "default"}));
  cli.add_option("--contexts", context_counts, "CUDA contexts the threads making them at once use (each count in turn)")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  cli.add_option("--repeats", repeats, "decoders made one at a time per setting (the median)")->check(CLI::Range(1, 100));
  cli.add_option("--json", json_path, "write the tables here");
  cli.add_option("--share", share_file, "instead: decode this elementary stream (Annex B) as --streams streams through "
                 "one decoder and through one decoder each, against it alone");
  cli.add_option("--codec", share_codec, "--share's codec")->check(CLI::IsMember({"h264", "hevc"}));
  cli.add_option("--streams", share_streams, "--share's streams")->check(CLI::Range(1, 64));
  cli.add_option("--per", share_per, "--share's surfaces per stream (0: the stream's minimum + 2)")->check(CLI::Range(0, 32));
  CLI11_PARSE(cli, argc, argv);

  if (cuda_load_functions(&cu, nullptr) != 0 || cuvid_load_functions(&cuvid, nullptr) != 0) {
    std::fprintf(stderr, "nvdec_create: libcuda.so.1 or libnvcuvid.so.1 not found (no NVIDIA driver): skipped\n");
    return 2;
  }
  json out = {{"width", kWidth}, {"height", 1080}, {"decoders", decoders}};
  try {
    check(cu->cuInit(0), "cuInit");
    CUdevice device = 0;
    check(cu->cuDeviceGet(&device, 0), "cuDeviceGet");
    char name[256] = {};
    check(cu->cuDeviceGetName(name, sizeof name, device), "cuDeviceGetName");
    CUcontext ctx = nullptr;
    check(cu->cuDevicePrimaryCtxRetain(&ctx, device), "cuDevicePrimaryCtxRetain");
    out["gpu"] = name;
    std::printf("NVDEC decoders on %s, %dx1080 NV12 (ffnvcodec's loader, no GStreamer)\n\n", name, kWidth);
    if (!share_file.empty()) {
      int status = 0;
      out = share_experiment(ctx, share_file, share_codec == "hevc" ? cudaVideoCodec_HEVC : cudaVideoCodec_H264,
                             share_streams, share_per, status);
      out["gpu"] = name;
      check(cu->cuDevicePrimaryCtxRelease(device), "cuDevicePrimaryCtxRelease");
      if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
      return status;
    }
    // (the first decoder of a process also loads the decoder's firmware and libraries: made once, not counted)
    one_at_a_time(ctx, create_info(cudaVideoCodec_H264, 8, 1), 1);

    std::printf("one at a time (median of %d)\n%-6s %9s %8s %8s %10s %11s\n", repeats, "codec", "surfaces", "outputs",
                "flags", "make ms", "destroy ms");
    for (const auto& shape : kShapes) {
      for (int s : surfaces) {
        for (int o : outputs) {
          for (const auto& flag : kFlags) {
            if (std::find(flags.begin(), flags.end(), flag.name) == flags.end()) continue;
            const auto [made, destroyed] = one_at_a_time(ctx, create_info(shape.id, s, o, flag.value), repeats);
            std::printf("%-6s %9d %8d %8s %10.1f %11.1f\n", shape.codec, s, o, flag.name, made, destroyed);
            out["one_at_a_time"].push_back({{"codec", shape.codec}, {"surfaces", s}, {"outputs", o}, {"flags", flag.name},
                                            {"make_ms", made}, {"destroy_ms", destroyed}});
          }
        }
      }
    }

    // The contexts the threads use: the primary one first, then contexts of their own.
    std::vector<CUcontext> contexts{ctx};
    const int most_contexts = *std::max_element(context_counts.begin(), context_counts.end());
    for (int i = 1; i < most_contexts; ++i) {
      CUcontext own = nullptr;
      check(cu->cuCtxCreate(&own, 0, device), "cuCtxCreate");
      CUcontext popped = nullptr;
      check(cu->cuCtxPopCurrent(&popped), "cuCtxPopCurrent");
      contexts.push_back(own);
    }
    std::printf("\n%d made at once (1 output surface, flags cuvid; 'vs one at a time': the wall time against %d x the "
                "median above: 1.0 = one at a time)\n%-6s %9s %8s %9s %10s %12s %12s %18s\n",
                decoders, decoders, "codec", "surfaces", "threads", "contexts", "wall ms", "median ms", "longest ms",
                "vs one at a time");
    for (const auto& shape : kShapes) {
      for (int s : surfaces) {
        const double alone = one_at_a_time(ctx, create_info(shape.id, s, 1), repeats).first;
        for (int t : threads) {
          for (int c : context_counts) {
            if (c > t) continue;  // (a context no thread uses)
            const std::vector<CUcontext> used(contexts.begin(), contexts.begin() + c);
            const auto r = at_once(used, create_info(shape.id, s, 1), decoders, std::min(t, decoders));
            const double ratio = r.wall_ms / (decoders * alone);
            std::printf("%-6s %9d %8d %9d %10.0f %12.1f %12.1f %18.2f\n", shape.codec, s, t, c, r.wall_ms, r.median_ms,
                        r.longest_ms, ratio);
            out["at_once"].push_back({{"codec", shape.codec}, {"surfaces", s}, {"threads", t}, {"contexts", c},
                                      {"wall_ms", r.wall_ms}, {"median_ms", r.median_ms}, {"longest_ms", r.longest_ms},
                                      {"vs_one_at_a_time", ratio}});
          }
        }
      }
    }
    for (size_t i = 1; i < contexts.size(); ++i) check(cu->cuCtxDestroy(contexts[i]), "cuCtxDestroy");
    check(cu->cuDevicePrimaryCtxRelease(device), "cuDevicePrimaryCtxRelease");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nvdec_create: %s\n", e.what());
    return 1;
  }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  cuvid_free_functions(&cuvid);
  cuda_free_functions(&cu);
  return 0;
}
