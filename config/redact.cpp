#include "config/redact.hpp"

#include <algorithm>
#include <array>
#include <cctype>

namespace vc::config {
namespace {

bool scheme_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.'; }

// Where a URI written in running text ends: at white space, a quote, a bracket or a control character.
bool ends_uri(char c) {
  return std::isspace(static_cast<unsigned char>(c)) || c == '"' || c == '\'' || c == '<' || c == '>' || c == '`' ||
         c == '\\' || static_cast<unsigned char>(c) < 0x20;
}

// A query key that carries a secret: one whose name holds any of these (password, passphrase, access_token,
// X-Amz-Signature, client_secret, streamid, …). Over-redacting a harmless value costs nothing.
bool secret_key(std::string_view key) {
  static constexpr std::array<std::string_view, 11> kParts = {"pass", "pwd", "secret", "token", "key", "sig", "cred",
                                                              "auth", "user", "session", "streamid"};
  std::string lower(key);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return std::any_of(kParts.begin(), kParts.end(), [&](std::string_view p) { return lower.find(p) != std::string::npos; });
}

// One URI's text (scheme:// already copied): its credentials replaced.
std::string redact_rest(std::string_view uri) {
  std::string out;
  // The user information ends at the last '@' before the first '/' (a password may hold '?', '#', ':'). A password
  // with an unescaped '/' in it (not a valid URI, but seen) still has a ':' before that '/': then everything up to the
  // last '@' before the query goes — an '@' in a path after a port ("http://h:8080/a@b") is redacted too, which is
  // the safe way to be wrong.
  const size_t slash = std::min(uri.find('/'), uri.size());
  size_t at = uri.substr(0, slash).rfind('@');
  if (at == std::string_view::npos) {
    const size_t colon = uri.find(':');
    if (colon < slash) {
      const size_t query = std::min(uri.find_first_of("?#", slash), uri.size());
      at = uri.substr(0, query).rfind('@');
    }
  }
  size_t rest = 0;
  if (at != std::string_view::npos) {
    out += "***";
    rest = at;
  }
  // A URI inside this one (a proxy's path, a query value) is redacted too.
  const std::string tail = redact_credentials(uri.substr(rest));
  const size_t query = tail.find('?');
  if (query == std::string::npos) return out + tail;
  out += tail.substr(0, query + 1);
  std::string_view params = std::string_view(tail).substr(query + 1);
  while (!params.empty()) {
    const size_t amp = std::min(params.find_first_of("&#"), params.size());
    const std::string_view pair = params.substr(0, amp);
    const size_t eq = pair.find('=');
    if (eq != std::string_view::npos && secret_key(pair.substr(0, eq))) {
      out += pair.substr(0, eq + 1);
      out += "***";
    } else {
      out += pair;
    }
    if (amp < params.size()) out += params[amp];
    if (amp < params.size() && params[amp] == '#') {  // the fragment: kept as it is
      out += params.substr(amp + 1);
      break;
    }
    params = amp < params.size() ? params.substr(amp + 1) : std::string_view();
  }
  return out;
}

}  // namespace

std::string redact_credentials(std::string_view text) {
  std::string out;
  size_t copied = 0;
  for (size_t sep = text.find("://"); sep != std::string_view::npos; sep = text.find("://", sep + 3)) {
    if (sep == 0 || !scheme_char(text[sep - 1]) || sep < copied) continue;
    size_t end = sep + 3;
    while (end < text.size() && !ends_uri(text[end])) ++end;
    out += text.substr(copied, sep + 3 - copied);
    out += redact_rest(text.substr(sep + 3, end - sep - 3));
    copied = end;
  }
  if (copied == 0) return std::string(text);
  out += text.substr(copied);
  return out;
}

}  // namespace vc::config
