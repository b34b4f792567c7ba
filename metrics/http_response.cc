#include "metrics/http_response.h"

#include "metrics/text_format.h"

namespace ps::metrics {
namespace {

const char* Reason(HttpStatus status) {
  switch (status) {
    case HttpStatus::kOk:
      return "OK";
    case HttpStatus::kBadRequest:
      return "Bad Request";
    case HttpStatus::kNotFound:
      return "Not Found";
    case HttpStatus::kMethodNotAllowed:
      return "Method Not Allowed";
    case HttpStatus::kHeadTooLarge:
      return "Request Header Fields Too Large";
    case HttpStatus::kVersionNotSupported:
      return "HTTP Version Not Supported";
  }
  return "Unknown";
}

// `body` with its head; HEAD answers carry the head alone, with the
// length the body would have.
HttpResponse Make(HttpStatus status, const char* content_type,
                  const std::string& body, bool with_body, bool close,
                  const char* extra_field = nullptr) {
  HttpResponse r;
  r.status = status;
  r.close = close;
  r.bytes.reserve(160 + (with_body ? body.size() : 0));
  r.bytes += "HTTP/1.1 ";
  r.bytes += std::to_string(static_cast<int>(status));
  r.bytes += ' ';
  r.bytes += Reason(status);
  r.bytes += "\r\nContent-Type: ";
  r.bytes += content_type;
  r.bytes += "\r\nContent-Length: ";
  r.bytes += std::to_string(body.size());
  r.bytes += "\r\n";
  if (extra_field != nullptr) {
    r.bytes += extra_field;
    r.bytes += "\r\n";
  }
  if (close) r.bytes += "Connection: close\r\n";
  r.bytes += "\r\n";
  if (with_body) r.bytes += body;
  return r;
}

constexpr char kPlain[] = "text/plain; charset=utf-8";

}  // namespace

HttpResponse Respond(const ParsedHead& head,
                     const std::function<std::string()>& render_metrics) {
  switch (head.outcome) {
    case ParseOutcome::kIncomplete:
    case ParseOutcome::kBadRequest:
      return Make(HttpStatus::kBadRequest, kPlain,
                  "bad request: " + head.error + "\n", true, true);
    case ParseOutcome::kHeadTooLarge:
      return Make(HttpStatus::kHeadTooLarge, kPlain,
                  "request head too large: " + head.error + "\n", true, true);
    case ParseOutcome::kVersionNotSupported:
      return Make(HttpStatus::kVersionNotSupported, kPlain, head.error + "\n",
                  true, true);
    case ParseOutcome::kComplete:
      break;
  }
  const HttpRequest& req = head.request;
  const bool close = !req.keep_alive;
  if (req.method == HttpMethod::kOther) {
    return Make(HttpStatus::kMethodNotAllowed, kPlain,
                "only GET and HEAD are served\n", true, close,
                "Allow: GET, HEAD");
  }
  const bool with_body = req.method == HttpMethod::kGet;
  if (req.path != "/metrics") {
    return Make(HttpStatus::kNotFound, kPlain,
                "not found: only /metrics is served\n", with_body, close);
  }
  return Make(HttpStatus::kOk, kTextContentType, render_metrics(), with_body,
              close);
}

}  // namespace ps::metrics
