#include "metrics/http_request.h"

#include <cctype>
#include <cstring>

namespace ps::metrics {
namespace {

// RFC 9110 5.6.2: the characters of a token (methods, field names).
bool IsTokenChar(char c) {
  if (std::isalnum(static_cast<unsigned char>(c))) return true;
  return c != '\0' && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

ParsedHead Fail(ParseOutcome outcome, std::string error) {
  ParsedHead p;
  p.outcome = outcome;
  p.error = std::move(error);
  return p;
}

// The lines of the head: each without its LF (and the CR before it).
// Returns false at the end of the (whole) text.
bool NextLine(std::string_view text, size_t* pos, std::string_view* line) {
  if (*pos >= text.size()) return false;
  size_t nl = text.find('\n', *pos);
  if (nl == std::string_view::npos) nl = text.size();
  *line = text.substr(*pos, nl - *pos);
  if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
  *pos = nl + 1;
  return true;
}

// "GET /metrics HTTP/1.1" into `request`; the error otherwise.
ParsedHead ParseRequestLine(std::string_view line, HttpRequest* request,
                            bool* http10) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 =
      sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos ||
      line.find(' ', sp2 + 1) != std::string_view::npos) {
    return Fail(ParseOutcome::kBadRequest,
                "the request line is not 'METHOD TARGET HTTP/1.x': '" +
                    std::string(line) + "'");
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method)) {
    return Fail(ParseOutcome::kBadRequest,
                "the method is not a token: '" + std::string(method) + "'");
  }
  if (target.empty() || target.front() != '/') {
    return Fail(ParseOutcome::kBadRequest,
                "the target is not a path (origin form, '/...'): '" +
                    std::string(target) + "'");
  }
  for (char c : target) {
    // Visible ASCII only (RFC 3986 characters and percent escapes).
    if (c <= ' ' || c >= 0x7f) {
      return Fail(ParseOutcome::kBadRequest,
                  "the target holds a character a URI cannot: '" +
                      std::string(target) + "'");
    }
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" ||
      !std::isdigit(static_cast<unsigned char>(version[5])) ||
      version[6] != '.' ||
      !std::isdigit(static_cast<unsigned char>(version[7]))) {
    return Fail(ParseOutcome::kBadRequest,
                "the version is not HTTP/<digit>.<digit>: '" +
                    std::string(version) + "'");
  }
  if (version[5] != '1') {
    return Fail(ParseOutcome::kVersionNotSupported,
                "HTTP/" + std::string(version.substr(5)) +
                    " is not served here (HTTP/1.0 and 1.1 are)");
  }
  *http10 = version[7] == '0';
  if (method == "GET") {
    request->method = HttpMethod::kGet;
  } else if (method == "HEAD") {
    request->method = HttpMethod::kHead;
  } else {
    request->method = HttpMethod::kOther;  // methods are case-sensitive
  }
  request->path = std::string(target.substr(0, target.find('?')));
  ParsedHead ok;
  ok.outcome = ParseOutcome::kComplete;
  return ok;
}

// One header field line into what the request needs from it; the error
// otherwise.
ParsedHead ParseField(std::string_view line, bool* close) {
  if (line.front() == ' ' || line.front() == '\t') {
    // Obsolete line folding (RFC 9112 5.2): a server must reject it or
    // unfold it; folded lines are a classic of request smuggling.
    return Fail(ParseOutcome::kBadRequest,
                "a header field line starts with whitespace (obsolete line "
                "folding)");
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || !IsToken(line.substr(0, colon))) {
    return Fail(ParseOutcome::kBadRequest,
                "a header field line is not 'name: value': '" +
                    std::string(line) + "'");
  }
  const std::string_view name = line.substr(0, colon);
  const std::string_view value = TrimBlanks(line.substr(colon + 1));
  for (char c : value) {
    if ((static_cast<unsigned char>(c) < ' ' && c != '\t') || c == 0x7f) {
      return Fail(
          ParseOutcome::kBadRequest,
          "header field '" + std::string(name) + "' holds a control character");
    }
  }
  if (EqualsIgnoreCase(name, "Content-Length")) {
    if (value.empty()) {
      return Fail(ParseOutcome::kBadRequest, "an empty Content-Length");
    }
    for (char c : value) {
      if (c != '0') {
        return Fail(ParseOutcome::kBadRequest,
                    "a request with a body (Content-Length: " +
                        std::string(value) + "): none is accepted here");
      }
    }
  } else if (EqualsIgnoreCase(name, "Transfer-Encoding")) {
    return Fail(ParseOutcome::kBadRequest,
                "a request with a body (Transfer-Encoding: " +
                    std::string(value) + "): none is accepted here");
  } else if (EqualsIgnoreCase(name, "Connection")) {
    // A comma-separated list of options; "keep-alive" is HTTP/1.1's
    // default, and HTTP/1.0 closes regardless (see below).
    std::string_view rest = value;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string_view option = TrimBlanks(rest.substr(0, comma));
      if (EqualsIgnoreCase(option, "close")) *close = true;
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  ParsedHead ok;
  ok.outcome = ParseOutcome::kComplete;
  return ok;
}

}  // namespace

size_t FindHeadEnd(std::string_view buffer, size_t from) {
  for (size_t nl = buffer.find('\n', from); nl != std::string_view::npos;
       nl = buffer.find('\n', nl + 1)) {
    // The line this LF ends is empty: it starts at the buffer's start or
    // right after the previous LF, with at most a CR before this one.
    size_t start = nl;
    if (start > 0 && buffer[start - 1] == '\r') --start;
    if (start == 0 || buffer[start - 1] == '\n') return nl + 1;
  }
  return std::string_view::npos;
}

ParsedHead ParseRequestHead(std::string_view buffer, size_t max_head_bytes) {
  const size_t end = FindHeadEnd(buffer, 0);
  const bool whole = end != std::string_view::npos;
  const std::string_view head = whole ? buffer.substr(0, end) : buffer;
  if (head.find('\0') != std::string_view::npos) {
    return Fail(ParseOutcome::kBadRequest, "a NUL byte in the request head");
  }
  // A CR must end a line: a bare one is how some parsers are told apart.
  for (size_t cr = head.find('\r'); cr != std::string_view::npos;
       cr = head.find('\r', cr + 1)) {
    if (cr + 1 < head.size() && head[cr + 1] != '\n') {
      return Fail(ParseOutcome::kBadRequest,
                  "a CR not followed by LF in the request head");
    }
  }
  ParsedHead result;
  bool http10 = false;
  size_t pos = 0;
  std::string_view line;
  // The request line, as soon as it is whole (a garbage first line need
  // not wait for the rest).
  if (head.find('\n') != std::string_view::npos) {
    NextLine(head, &pos, &line);
    ParsedHead rl = ParseRequestLine(line, &result.request, &http10);
    if (rl.outcome != ParseOutcome::kComplete) return rl;
  }
  if (!whole) {
    if (buffer.size() >= max_head_bytes) {
      return Fail(ParseOutcome::kHeadTooLarge,
                  "no end of the request head within " +
                      std::to_string(max_head_bytes) + " bytes");
    }
    return result;  // kIncomplete
  }
  if (end > max_head_bytes) {
    return Fail(ParseOutcome::kHeadTooLarge,
                "a request head of " + std::to_string(end) +
                    " bytes, more than " + std::to_string(max_head_bytes));
  }
  bool close = false;
  while (NextLine(head, &pos, &line) && !line.empty()) {
    ParsedHead field = ParseField(line, &close);
    if (field.outcome != ParseOutcome::kComplete) return field;
  }
  // HTTP/1.0 closes whatever it asks for: this server answers one request
  // per HTTP/1.0 connection.
  result.request.keep_alive = !http10 && !close;
  result.request.head_bytes = end;
  result.outcome = ParseOutcome::kComplete;
  return result;
}

}  // namespace ps::metrics
