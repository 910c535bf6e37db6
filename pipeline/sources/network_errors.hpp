// Network sources that fail, said in words: "cannot connect to cam.local:554: connection refused" rather than
// rtspsrc's "Could not open resource for reading and writing" (whose detail is only "Failed to connect. (Generic
// error)"). GStreamer's own text stays in the debug log.
#pragma once
#include <gst/gst.h>

#include <string>

namespace vc::pipeline {

// Why a network source (rtsp, rtmp, http, …) at `uri` failed with GStreamer resource error `code`, in words, with
// host and port; "" when `uri` is not a network address. For a failed connection the host is asked again (a TCP
// connect of at most two seconds) to tell a refusal from an unknown host or one that does not answer.
std::string explain_network_failure(const std::string& uri, int resource_error_code);

}  // namespace vc::pipeline
