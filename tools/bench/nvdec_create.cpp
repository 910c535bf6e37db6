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
// Prints tables; --json writes them. Needs a GPU with NVDEC (exits 2 without one).
//
//   usage: nvdec_create [--decoders 64] [--threads 1,8,64] [--surfaces 4,8,20] [--flags cuvid,cuda,default]
//                       [--contexts 1,8] [--repeats 8] [--json out.json]
#include <ffnvcodec/dynlink_loader.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
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

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  if (cu->cuGetErrorName(r, &name) != CUDA_SUCCESS) name = "unknown";
  throw std::runtime_error(std::string(what) + " failed: " + name);
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"What making an NVDEC decoder costs, alone and many at once"};
  int decoders = 64, repeats = 8;
  std::vector<int> threads{1, 8, 64}, surfaces{4, 8, 20}, outputs{1, 2}, context_counts{1, 8};
  std::vector<std::string> flags{"cuvid", "cuda", "default"};
  std::string json_path;
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
