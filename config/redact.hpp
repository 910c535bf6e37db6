// Credentials out of anything the app shows or sends: a URI's user and password (rtsp://user:pass@cam/…) and the
// values of query keys that carry secrets (?password=…, &token=…), wherever they appear in a text — results, events,
// MQTT, the API's answers, logs. What the app itself needs to connect (its configuration, api.state_file) keeps them.
#pragma once
#include <string>
#include <string_view>

namespace vc::config {

// `text` with every URI's credentials replaced by "***" (rtsp://***@cam/stream, …?password=***). Text without a
// "://" is returned as it is.
std::string redact_credentials(std::string_view text);

}  // namespace vc::config
