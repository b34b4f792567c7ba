// ParseRequestHead: the head of one HTTP/1.x request (request line and
// header fields) as the metrics exporter (exporter.h) receives it from a
// peer nobody vouches for, one recv at a time. Strict where laxness would
// let a peer smuggle or stall (bare CR, NUL, folded lines, a body, a head
// past kMaxRequestHeadBytes), lenient only where clients differ harmlessly
// (LF alone ends a line).
//
//   // After each recv (FindHeadEnd keeps a trickled head O(bytes)):
//   ParsedHead p = ParseRequestHead(received);
//   if (p.outcome == ParseOutcome::kIncomplete) { /* read more */ }
//   else if (p.outcome == ParseOutcome::kComplete) {
//     Serve(p.request);  // then drop p.request.head_bytes of `received`
//   } else { /* answer the error (http_response.h), then close */ }
//
// Thread-safe: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ps::metrics {

// The largest request head accepted (request line, header fields and the
// empty line that ends them): larger is kHeadTooLarge (431). A Prometheus
// scrape sends about 300 bytes.
inline constexpr size_t kMaxRequestHeadBytes = 8192;

enum class HttpMethod {
  kGet,
  kHead,
  kOther,  // a well-formed method this server does not serve (405)
};

struct HttpRequest {
  HttpMethod method = HttpMethod::kOther;
  // The path of the request target, without the query ("/metrics").
  std::string path;
  // Whether the connection stays open after the answer: HTTP/1.1 without
  // "Connection: close". HTTP/1.0 always closes.
  bool keep_alive = false;
  // Bytes of the buffer the head took, its final empty line included; what
  // follows is the next (pipelined) request.
  size_t head_bytes = 0;
};

enum class ParseOutcome {
  kIncomplete,           // no end of the head yet: read more
  kComplete,             // `request` holds it
  kBadRequest,           // malformed, or with a body (400)
  kHeadTooLarge,         // no end within kMaxRequestHeadBytes (431)
  kVersionNotSupported,  // HTTP/2 and later in an HTTP/1 request line (505)
};

struct ParsedHead {
  ParseOutcome outcome = ParseOutcome::kIncomplete;
  HttpRequest request;  // for kComplete
  // For the errors: what is wrong, for the answer's body and the log (may
  // quote the peer's bytes: pass it through Printable before logging).
  std::string error;
};

// Where the head at the start of `buffer` ends (the offset just past the
// empty line that ends it), looking for that line only in the bytes from
// `from` on, as the ones before were looked at already; npos if it has not
// arrived. A caller that calls ParseRequestHead only when the first line or
// the head became whole (or the buffer reached the limit) parses each byte
// a bounded number of times however the peer splits its sends.
size_t FindHeadEnd(std::string_view buffer, size_t from);

// Parses the request at the start of `buffer` (all bytes received and not
// yet consumed). A malformed request line is reported as soon as that line
// is whole, the rest once the head is.
ParsedHead ParseRequestHead(std::string_view buffer,
                            size_t max_head_bytes = kMaxRequestHeadBytes);

}  // namespace ps::metrics
