// Respond: what the metrics exporter (exporter.h) answers to one parsed
// request head (http_request.h), as the bytes to write: GET /metrics gets
// 200 and the text format, HEAD the same head without the body, other
// paths 404, other methods 405 (Allow: GET, HEAD), a request that could
// not be parsed 400, 431 or 505. After an error the connection closes (what
// follows a request that could not be read cannot be trusted to be the
// next one); after a good one it closes when the request asked to.
//
// Thread-safe: a pure function (it calls render_metrics on the caller's
// thread).
#pragma once

#include <functional>
#include <string>

#include "metrics/http_request.h"

namespace ps::metrics {

enum class HttpStatus {
  kOk = 200,
  kBadRequest = 400,
  kNotFound = 404,
  kMethodNotAllowed = 405,
  kHeadTooLarge = 431,
  kVersionNotSupported = 505,
};

struct HttpResponse {
  HttpStatus status = HttpStatus::kOk;
  std::string bytes;   // status line, header fields and body
  bool close = false;  // close the connection once it is written
};

// The answer to `head` (an outcome other than kIncomplete). render_metrics
// makes the body of GET and HEAD /metrics.
HttpResponse Respond(const ParsedHead& head,
                     const std::function<std::string()>& render_metrics);

}  // namespace ps::metrics
